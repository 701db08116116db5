"""Transformers' own model tests on tpu (tools/hf_suite.py), and regressions they found.

* ``test_hf_suite_subset``: the CI subset of tools/hf_suite.py — a few tests per model family of the tree it
  assembles from the transformers 5.24.0 sdist (downloaded from the package index once, cached under the build
  directory) and tests/hf_suite/, run on cpu and on tpu; every test that passes on cpu must pass on tpu.
* Regressions, each checked against the CPU on the real plugin:
  - ``histc`` of integer tensors (Transformers' MoE layers count tokens per expert with an int32 ``histc`` on
    accelerators; the CPU kernel only takes floating inputs, so the CPU fallback raised).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torch_tpu

REPO_ROOT = Path(__file__).resolve().parents[2]


def _no_fallbacks(fn):
    torch_tpu.reset_fallback_counts()
    out = fn()
    assert torch_tpu.fallback_counts() == {}, torch_tpu.fallback_counts()
    return out


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int32, torch.int64])
@pytest.mark.parametrize("bins,lo,hi", [(4, 0, 3), (7, 0, 0), (5, 2, 9), (3, 5, 5), (6, 1.5, 8.5)])
def test_histc_integer_input(dtype, bins, lo, hi):
    torch.manual_seed(0)
    x = torch.randint(0, 12, (3, 17)).to(dtype)
    # as on CUDA: bounds truncated to integers, (x - min) * bins // (max - min), the maximum in the last bin, values
    # outside [min, max] dropped, the input dtype kept (the CPU bins the same values as floats identically)
    expected = torch.histc(x.float(), bins=bins, min=int(lo), max=int(hi)).to(dtype)
    got = _no_fallbacks(lambda: torch.histc(x.to("tpu"), bins=bins, min=lo, max=hi).cpu())
    assert got.dtype == dtype
    assert torch.equal(got, expected), (got, expected)


def test_histc_integer_counts_experts_like_moe_layers():
    """Transformers' grouped experts: sorted expert ids of each (token, k) pair -> tokens per expert -> offsets."""
    num_experts = 4
    torch.manual_seed(0)
    expert_ids = torch.randint(0, num_experts, (21, 2)).reshape(-1)
    sorted_ids, _ = torch.sort(expert_ids)
    expected = torch.bincount(expert_ids, minlength=num_experts).to(torch.int32)

    def run():
        counts = torch.histc(sorted_ids.to("tpu").int(), bins=num_experts, min=0, max=num_experts - 1)
        return counts.cpu(), torch.cumsum(counts, dim=0, dtype=torch.int32).cpu()

    counts, offsets = _no_fallbacks(run)
    assert torch.equal(counts, expected)
    assert torch.equal(offsets, torch.cumsum(expected, 0, dtype=torch.int32))


def test_histc_bool_input_raises_like_cpu():
    x = torch.tensor([True, False])
    with pytest.raises(RuntimeError) as cpu_err:
        torch.histc(x, bins=2)
    with pytest.raises(RuntimeError) as tpu_err:
        torch.histc(x.to("tpu"), bins=2)
    assert "Bool" in str(cpu_err.value) and "Bool" in str(tpu_err.value)


def test_hf_suite_subset(tmp_path):
    """A few of Transformers' model tests per family pass on tpu wherever they pass on cpu."""
    report = tmp_path / "report.md"
    cmd = [sys.executable, str(REPO_ROOT / "tools" / "hf_suite.py"), "--subset", "--check", "--timeout", "600",
           "--results", str(tmp_path / "results"), "--report", str(report)]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1500)
    text = report.read_text() if report.exists() else ""
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-4000:]}"
    # every family ran and passed tests on both devices (a tree that collects nothing must not pass)
    rows = [line for line in text.splitlines()
            if line.startswith("| ") and " / " in line and "**all**" not in line and not line.startswith("| family ")]
    assert len(rows) == 6, text
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        cpu_pass, tpu_pass = int(cells[2].split(" / ")[0]), int(cells[3].split(" / ")[0])
        assert cpu_pass >= 3 and tpu_pass >= cpu_pass, row
