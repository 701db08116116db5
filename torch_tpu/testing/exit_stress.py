"""Exit stress: processes that end while work is in flight must exit cleanly.

Each child process (``--child SEED``) does a little of everything that leaves work behind at exit, chosen by its
seed, and then ends at once: programs of fresh shapes compiled in the process (their disk-cache writes still
queued), a fused eager trace seen twice (its fused program then compiles on the background thread), launches not
waited for (a chain of matmuls still running), a backward pass, tensors alive in module globals, the two virtual
devices, and for some seeds a collective between two ranks of the ``tpu_dist`` XLA transport. It ends by falling
off the end of the script, by ``sys.exit(0)``, or by ``sys.exit(3)`` (the status must come through unchanged).

The driver starts children in parallel (two at a time by default), each with its own or a shared fresh
``TORCH_TPU_CACHE_DIR``, and counts those that exit with an unexpected status (a crash is a negative status, -11
for a segmentation fault) or print "LLVM ERROR". Used by tests/python/test_exit_stress.py; for long runs:

    python -m torch_tpu.testing.exit_stress --runs 300 [--jobs 2] [--seed 0]
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional

BAD_OUTPUT = ("LLVM ERROR", "Segmentation fault", "Fatal Python error", "terminate called", "Aborted")


def expected_status(seed: int) -> int:
    return 3 if seed % 5 == 4 else 0


def _child(seed: int) -> None:
    import torch

    import torch_tpu

    rng = random.Random(seed)
    n = 3 + seed % 7  # a size no other seed of the same run shares: fresh programs (compiles, disk writes)
    dev = "tpu:1" if seed % 3 == 2 and torch.tpu.device_count() > 1 else "tpu"

    # Strict eager: a few programs of fresh shapes; their executables are written to the disk cache in the
    # background.
    x = torch.randn(n, 8 + n, device=dev)
    w = torch.randn(8 + n, 16, device=dev, requires_grad=True)
    y = torch.nn.functional.gelu(x @ w).sum()
    y.backward()  # the autograd device thread keeps the finished task until the next one
    kept = [w.grad, (x * 2 + 1).softmax(-1)]

    # Fused eager: the same step twice; the second sighting queues its fused program on the compile thread, which
    # is often still compiling when the process ends.
    h = torch.randn(1, 32 + n, device=dev)
    lin = torch.nn.Linear(32 + n, 32 + n).to(dev)
    torch_tpu.set_eager_mode("fused")
    for _ in range(2):
        with torch.no_grad():
            z = h
            for _ in range(4):
                z = torch.nn.functional.gelu(lin(torch.nn.functional.rms_norm(z, (32 + n,))))
        z.cpu()
    if rng.random() < 0.5:
        torch_tpu.set_eager_mode("strict")

    # Launches not waited for: still running when the interpreter shuts down.
    with torch.no_grad():
        a = torch.randn(192, 192, device=dev)
        for _ in range(6 + rng.randrange(6)):
            a = (a @ a).tanh()
    kept.append(a)

    if seed % 4 == 1 and torch.tpu.device_count() > 1:
        import torch.distributed as dist

        from torch_tpu.distributed import run_ranks_as_threads

        def rank_fn(rank: int, world: int) -> float:
            t = torch.full((64,), float(rank + 1), device=f"tpu:{rank}")
            work = dist.all_reduce(t, async_op=True)
            work.wait()
            dist.all_reduce(torch.ones(4, device=f"tpu:{rank}"))  # launched, not read back
            return float(t[0].item())

        got = run_ranks_as_threads(rank_fn, 2)
        assert got == [3.0, 3.0], got

    globals()["_kept"] = kept  # freed during the interpreter's finalization
    print(f"child {seed} done", flush=True)
    status = expected_status(seed)
    if status or seed % 5 == 3:
        sys.exit(status)


def run_child(seed: int, cache_dir: str, timeout: float = 600.0, env: Optional[Dict[str, str]] = None) -> Dict:
    e = dict(os.environ if env is None else env)
    e["TORCH_TPU_CACHE_DIR"] = cache_dir
    e.setdefault("TORCH_TPU_NUM_DEVICES", "2")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    e["PYTHONPATH"] = os.pathsep.join(p for p in (root, e.get("PYTHONPATH", "")) if p)
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-X", "faulthandler", "-m", "torch_tpu.testing.exit_stress", "--child",
                            str(seed)], env=e, capture_output=True, text=True, timeout=timeout)
        rc, out = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as ex:
        rc = None
        out = f"timed out after {timeout}s\n" + str(ex.stdout or "") + str(ex.stderr or "")
    bad = [s for s in BAD_OUTPUT if s in out]
    ok = rc == expected_status(seed) and not bad and f"child {seed} done" in out
    return {"seed": seed, "rc": rc, "ok": ok, "bad": bad, "seconds": time.monotonic() - t0, "output": out}


def run(runs: int, jobs: int = 2, seed: int = 0, verbose: bool = False) -> List[Dict]:
    """Runs `runs` children, `jobs` at a time; every fourth pair shares one fresh cache directory (both
    processes write the same entries), the others get one each."""
    root = tempfile.mkdtemp(prefix="tpu_exit_stress_")
    try:
        def one(i: int) -> Dict:
            s = seed + i
            cache = os.path.join(root, f"shared{i // 2}" if (i // 2) % 4 == 3 else f"own{i}")
            r = run_child(s, cache)
            if verbose:
                tail = "" if r["ok"] else "\n" + r["output"][-3000:]
                print(f"[{i + 1}/{runs}] seed {s}: rc={r['rc']} {'ok' if r['ok'] else 'FAILED'} "
                      f"{r['seconds']:.1f}s{tail}", flush=True)
            return r

        with ThreadPoolExecutor(max_workers=jobs) as ex:
            return list(ex.map(one, range(runs)))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        _child(args.child)
        return 0
    t0 = time.monotonic()
    results = run(args.runs, args.jobs, args.seed, verbose=True)
    failed = [r for r in results if not r["ok"]]
    print(f"{len(results)} processes, {len(failed)} failed ({time.monotonic() - t0:.0f}s): "
          + ", ".join(f"seed {r['seed']} rc={r['rc']}{' ' + '/'.join(r['bad']) if r['bad'] else ''}"
                      for r in failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
