"""The eager program caches: the disk cache shared by processes (warm start, corrupt entries, concurrent writers,
size budget with least-recently-used eviction, disabling it) and the bounded in-process cache.

Each scenario runs fresh interpreters (``run_python``) over a private cache directory, so the numbers it checks
(compiles, disk hits) belong to that scenario alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

# A small workload touching a few dozen op signatures: forward and backward of a tiny MLP, a reduction, a view write.
WORKLOAD = """
import json, sys, torch, torch_tpu
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).to("tpu")
x = torch.randn(5, 8).to("tpu")
y = m(x).softmax(-1)
loss = (y * torch.arange(4, device="tpu")).sum()
loss.backward()
z = torch.zeros(6, 6, device="tpu")
z[1:3, 2:5] += 2.5
out = {"loss": loss.item(), "z": z.sum().item(), "grad": m[0].weight.grad.abs().sum().item()}
torch_tpu._drain_autograd_device_threads()  # what runs at exit, compiled before the counts are taken
torch_tpu._C._flush_disk_cache()
s = torch_tpu.cache_stats()
out.update(compiles=s["compiles"], disk_hits=s["disk_hits"], misses=s["misses"], disk=s["disk"])
print("RESULT" + json.dumps(out))
"""


def _result(proc: subprocess.CompletedProcess) -> dict:
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT"):
            return json.loads(line[len("RESULT"):])
    raise AssertionError(f"no result\n--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}")


def _entries(d: Path):
    return sorted(p for p in d.glob("*.exe"))


def _env(cache: Path, **extra):
    env = {"TORCH_TPU_CACHE_DIR": str(cache), "TORCH_TPU_NUM_DEVICES": "1"}
    env.update(extra)
    return env


def test_second_process_compiles_nothing(tmp_path, run_python):
    cache = tmp_path / "cache"
    first = _result(run_python(WORKLOAD, env=_env(cache)))
    assert first["compiles"] > 10 and first["disk_hits"] == 0
    assert first["disk"]["writes"] == first["compiles"] and first["disk"]["pending_writes"] == 0
    assert len(_entries(cache)) == first["compiles"]
    second = _result(run_python(WORKLOAD, env=_env(cache)))
    assert second["compiles"] == 0, second
    assert second["disk_hits"] == first["compiles"]
    assert second["disk"]["writes"] == 0
    for k in ("loss", "z", "grad"):
        assert second[k] == first[k]


def test_exit_flushes_queued_writes(tmp_path, run_python):
    # No explicit flush: the writes queued by the background writer are finished at exit.
    cache = tmp_path / "cache"
    code = WORKLOAD.replace("torch_tpu._C._flush_disk_cache()", "")
    first = _result(run_python(code, env=_env(cache)))
    assert len(_entries(cache)) == first["compiles"]
    assert not list(cache.glob(".*.tmp"))


def test_corrupt_and_truncated_entries_are_recompiled(tmp_path, run_python):
    cache = tmp_path / "cache"
    first = _result(run_python(WORKLOAD, env=_env(cache)))
    entries = _entries(cache)
    n = len(entries)
    sizes = {p.name: p.stat().st_size for p in entries}
    for i, p in enumerate(entries):
        data = p.read_bytes()
        if i % 4 == 0:
            p.write_bytes(data[: len(data) // 2])  # truncated
        elif i % 4 == 1:
            p.write_bytes(b"")  # empty
        elif i % 4 == 2:
            mid = len(data) // 2
            p.write_bytes(data[:mid] + bytes([data[mid] ^ 0xFF]) + data[mid + 1:])  # one byte garbled
        else:
            p.write_bytes(b"not an executable at all" * 10)
    second = _result(run_python(WORKLOAD, env=_env(cache)))
    assert second["compiles"] == n and second["disk_hits"] == 0
    assert second["disk"]["corrupt"] == n
    for k in ("loss", "z", "grad"):
        assert second[k] == first[k]
    # Rewritten, whole again: a third process loads everything.
    assert {p.name: p.stat().st_size for p in _entries(cache)} == sizes
    third = _result(run_python(WORKLOAD, env=_env(cache)))
    assert third["compiles"] == 0 and third["disk_hits"] == n


def test_concurrent_processes_share_the_directory(tmp_path):
    cache = tmp_path / "cache"
    from conftest import _subprocess_env, REPO_ROOT

    env = _subprocess_env(_env(cache))
    procs = [
        subprocess.Popen([sys.executable, "-c", textwrap.dedent(WORKLOAD)], env=env, cwd=str(REPO_ROOT),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        results.append(_result(subprocess.CompletedProcess(p.args, 0, out, err)))
    assert len({(r["loss"], r["z"], r["grad"]) for r in results}) == 1
    assert not list(cache.glob(".*.tmp"))
    n = len(_entries(cache))
    assert n == max(r["compiles"] + r["disk_hits"] for r in results)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(WORKLOAD)], env=env, cwd=str(REPO_ROOT),
                          capture_output=True, text=True, timeout=600)
    last = _result(proc)
    assert last["compiles"] == 0 and last["disk_hits"] == n


def test_size_budget_and_lru_order(tmp_path, run_python):
    cache = tmp_path / "cache"
    first = _result(run_python(WORKLOAD, env=_env(cache)))
    entries = _entries(cache)
    total = sum(p.stat().st_size for p in entries)
    assert len(entries) == first["compiles"]
    # A known recency order: entry i was last used at time base + i.
    base = time.time() - 10000
    for i, p in enumerate(entries):
        os.utime(p, (base + i, base + i))
    # A disk hit makes its entry the most recently used: a process that runs one op loads one entry.
    probe = """
import torch, torch_tpu
z = torch.zeros(6, 6, device="tpu")
z[1:3, 2:5] += 2.5
z.cpu()
torch_tpu._drain_autograd_device_threads()
s = torch_tpu.cache_stats()
print("RESULT{\\"compiles\\": %d, \\"disk_hits\\": %d}" % (s["compiles"], s["disk_hits"]))
"""
    before = {p.name: p.stat().st_mtime for p in _entries(cache)}
    r = _result(run_python(probe, env=_env(cache)))
    after = {p.name: p.stat().st_mtime for p in _entries(cache)}
    touched = [k for k in after if k in before and after[k] > before[k] + 1]
    assert r["disk_hits"] >= 1 and len(touched) == r["disk_hits"]
    # Budget: half of the directory. The oldest entries go first; the ones just used stay.
    budget = total // 2
    trim = f"""
import torch, torch_tpu
torch_tpu._C._set_cache_max_bytes({budget})
torch_tpu._C._trim_disk_cache()
s = torch_tpu.cache_stats()["disk"]
print("RESULT{{\\"evictions\\": %d, \\"evicted_bytes\\": %d}}" % (s["evictions"], s["evicted_bytes"]))
"""
    t = _result(run_python(trim, env=_env(cache)))
    left = _entries(cache)
    assert sum(p.stat().st_size for p in left) <= budget
    assert t["evictions"] == len(entries) - len(left)
    names = [p.name for p in entries]
    kept = {p.name for p in left}
    for name in touched:
        assert name in kept
    # Everything kept (except the touched ones) is newer than everything evicted.
    untouched_kept = [names.index(k) for k in kept if k not in touched]
    evicted = [i for i, n in enumerate(names) if n not in kept]
    assert evicted and (not untouched_kept or min(untouched_kept) > max(evicted))


def test_writes_stay_within_budget(tmp_path, run_python):
    # A budget smaller than what the workload writes: the writer evicts as it goes.
    _result(run_python(WORKLOAD, env=_env(tmp_path / "full")))
    budget = sum(p.stat().st_size for p in _entries(tmp_path / "full")) // 3
    cache = tmp_path / "cache"
    r = _result(run_python(WORKLOAD, env=_env(cache, TORCH_TPU_CACHE_MAX_BYTES=str(budget))))
    assert r["disk"]["writes"] == r["compiles"]
    assert r["disk"]["evictions"] > 0
    assert sum(p.stat().st_size for p in _entries(cache)) <= budget


def test_empty_cache_dir_disables_the_disk_cache(tmp_path, run_python):
    code = WORKLOAD + "\nimport os\nprint('FILES', sorted(os.listdir('.')))\n"
    r = _result(run_python(code, env={"TORCH_TPU_CACHE_DIR": "", "HOME": str(tmp_path), "XDG_CACHE_HOME": None}))
    assert r["compiles"] > 0 and r["disk_hits"] == 0
    assert r["disk"]["writes"] == 0 and r["disk"]["misses"] == 0 and r["disk"]["dir"] == ""
    assert not (tmp_path / ".cache").exists()


def test_program_cache_is_bounded(run_python):
    # issue 13: a loop over new shapes keeps host memory flat once the process cache is full.
    code = """
import json, resource, torch, torch_tpu
def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20
x = torch.randn(4096).to("tpu")
rss = {}
for i in range(1, 241):
    y = (x[:i] * 1.5).sum()   # a new signature per i (two programs: slice read + mul, sum)
    y.item()
    if i in (80, 240):
        rss[i] = rss_mb()
s = torch_tpu.cache_stats()
print("RESULT" + json.dumps({"rss": rss, "entries": s["entries"], "evictions": s["evictions"],
                             "limit": s["entry_limit"], "compiles": s["compiles"]}))
"""
    r = _result(run_python(code, env={"TORCH_TPU_CACHE_DIR": "", "TORCH_TPU_PROGRAM_CACHE_SIZE": "40",
                                      "TORCH_TPU_NUM_DEVICES": "1"}))
    assert r["limit"] == 40 and r["entries"] <= 40
    assert r["evictions"] >= r["compiles"] - 40 - 5
    growth = r["rss"]["240"] - r["rss"]["80"]
    assert growth < 25, r


def test_program_cache_evicts_least_recently_used(run_python):
    code = """
import json, torch, torch_tpu
torch_tpu._C._set_program_cache_limit(3)
x = torch.ones(8, device="tpu")
def run(i):
    return x[:i].neg().cpu()
base = torch_tpu.cache_stats()
for i in (1, 2, 3):
    run(i)
run(1)            # 1 is now the most recently used; 2 the least
run(4)            # evicts 2
s0 = torch_tpu.cache_stats()
run(1); run(3); run(4)
s1 = torch_tpu.cache_stats()
run(2)            # evicted: built again
s2 = torch_tpu.cache_stats()
print("RESULT" + json.dumps({"hits_134": s1["hits"] - s0["hits"], "misses_2": s2["misses"] - s1["misses"],
                             "evictions": s2["evictions"], "entries": s2["entries"]}))
"""
    r = _result(run_python(code, env={"TORCH_TPU_CACHE_DIR": "", "TORCH_TPU_NUM_DEVICES": "1"}))
    assert r["hits_134"] == 3 and r["misses_2"] == 1
    assert r["entries"] == 3 and r["evictions"] >= 2


def test_default_numbers_are_built_into_programs():
    # A Scalar argument passed at its schema default (add's alpha=1: every `a + b`) is part of the program, not one
    # more input to pass at every launch; other values stay inputs shared by one program. Fused eager shows the
    # per-op programs (functions of the pending trace) with their parameters.
    import re

    import torch

    import torch_tpu

    a, b = torch.randn(8), torch.randn(8)
    at, bt = a.to("tpu"), b.to("tpu")
    torch_tpu._C._clear_cache()
    before = torch_tpu.cache_stats()
    torch_tpu.set_eager_mode("fused")
    try:
        got = [at + bt, torch.add(at, bt, alpha=2), torch.add(at, bt, alpha=3), torch.add(at, bt, alpha=1.0),
               torch.sub(at, bt)]
        text = torch_tpu._C._fused_pending_text()
    finally:
        torch_tpu.set_eager_mode("strict")
    after = torch_tpu.cache_stats()
    want = [a + b, torch.add(a, b, alpha=2), torch.add(a, b, alpha=3), torch.add(a, b, alpha=1.0), a - b]
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w)
    # a + b, add(alpha=2) (alpha=3 calls the same program), add(alpha=1.0) (a float is not the int default), a - b.
    params = [len(re.findall(r"%arg\d+:", m)) for m in re.findall(r"func\.func private @e\d+\(([^)]*)\)", text)]
    assert params == [2, 3, 3, 2], text
    assert after["misses"] - before["misses"] == 4 and after["hits"] - before["hits"] == 1
