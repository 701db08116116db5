"""Randomized soak test (torch_tpu/testing/soak.py): seeded random op calls on tpu, each compared with CPU.

Pass 1 runs the cases (each in a few value variants that share their compiled programs) and must find no
unexpected mismatch; known divergences are counted and printed. Pass 2 runs the same cases again: every program
is cached by then, so nothing may be compiled (unless the program cache evicted entries), and neither host RSS nor
tpu memory may grow.

Deterministic given TORCH_TPU_SOAK_SEED and TORCH_TPU_SOAK_CASES; TORCH_TPU_SOAK_BUDGET_S bounds pass 1 (cases not
started by then are skipped and the count is printed). Replay one case: python -m torch_tpu.testing.soak --seed S
--only I --variants 3 -v
"""
import gc
import os

import torch

import torch_tpu
from torch_tpu.testing import soak

SEED = int(os.environ.get("TORCH_TPU_SOAK_SEED", "0"))
CASES = int(os.environ.get("TORCH_TPU_SOAK_CASES", "600"))
VARIANTS = int(os.environ.get("TORCH_TPU_SOAK_VARIANTS", "3"))
BUDGET_S = float(os.environ.get("TORCH_TPU_SOAK_BUDGET_S", "150"))
# Host memory a second pass over cached programs may add: allocator noise, not growth with the number of calls
# (a leak of one small tensor per call would exceed it: pass 2 makes thousands of calls).
RSS_SLACK = 24 * 1024 * 1024


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _settle():
    gc.collect()
    torch.tpu.synchronize()
    torch.tpu.empty_cache()
    return torch.tpu.memory_allocated(), _rss()


def test_soak_matches_cpu_without_growth():
    first = soak.run(SEED, CASES, VARIANTS, budget_s=BUDGET_S)
    print("\npass 1:", first.summary())
    assert not first.unexpected, "tpu differs from CPU:\n" + first.summary()
    # The budget is a safety net for slow machines, not the normal way to end.
    assert first.cases >= min(CASES, 150), f"only {first.cases} cases ran within {BUDGET_S} s"
    assert first.calls >= 2 * first.cases

    mem1, rss1 = _settle()
    stats1 = torch_tpu.cache_stats()
    second = soak.run(SEED, first.cases, VARIANTS, indices=range(first.cases))
    mem2, rss2 = _settle()
    stats2 = torch_tpu.cache_stats()
    print("pass 2:", second.summary())
    print(f"pass 2: tpu memory {mem1} -> {mem2} bytes, host RSS {rss1 >> 20} -> {rss2 >> 20} MiB, "
          f"compiles {stats1['compiles']} -> {stats2['compiles']}")

    assert [(f.index, f.variant, f.what) for f in second.findings] == \
        [(f.index, f.variant, f.what) for f in first.findings], "the same cases gave different outcomes"
    assert mem2 == mem1, f"tpu memory grew over a repeated pass: {mem1} -> {mem2} bytes"
    if stats2.get("evictions", 0) == stats1.get("evictions", 0) == 0:
        assert stats2["compiles"] == stats1["compiles"], "the same calls compiled new programs"
    assert rss2 - rss1 < RSS_SLACK, f"host RSS grew by {(rss2 - rss1) >> 20} MiB over a repeated pass"


def test_soak_cases_are_deterministic():
    # Same seed, same case: the same description and the same argument values.
    for i in (0, 7, 123):
        a, b = soak.make_case(SEED, i, 1), soak.make_case(SEED, i, 1)
        assert a.describe() == b.describe()
        for x, y in zip(a.args, b.args):
            if isinstance(x, soak.Input):
                assert torch.equal(x.base, y.base) and x.recipe == y.recipe
    # Variants share the structure, not the values.
    a, b = soak.make_case(SEED, 5, 0), soak.make_case(SEED, 5, 1)
    assert a.describe() == b.describe()


def test_soak_detects_a_wrong_result():
    # The comparison is live: a case whose tpu result is off by one element is reported.
    case = soak.Case("probe", lambda x: x + 1 if x.device.type == "cpu" else x + 2,
                     [soak.Input(torch.arange(4.0))])
    assert "not close" in soak.run_case(case)
    case = soak.Case("probe", lambda x: x.sum() if x.device.type == "cpu" else x.new_ones(3)[10],
                     [soak.Input(torch.arange(4.0))])
    assert "tpu raised IndexError" in soak.run_case(case)
