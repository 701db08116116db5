"""Eager per-op overhead: a cached small op on `tpu` against torch CPU eager, in one run.

    python benchmarks/eager_op_latency.py [--n 20000] [--batches 5]

Prints a table: per-call latency of `a + b` on 1k floats (launch only, and launch + wait), the same op on torch
CPU eager, their ratio, and the first-compile time of the op (cache cleared first). The same add on 999 floats (and
its own torch CPU reference) is below the CPU plugin's inline threshold: it runs on the calling thread. Fused eager rows
(torch_tpu.set_eager_mode("fused")): the op is recorded, and a loop of them runs as one program cut at the loop
period (32 ops): "results dropped" lets the program skip the adds whose results died (what fused eager does with
temporaries), "results kept" keeps every result alive (every add computed), "+ synchronize" runs one recorded op per
step.
"""
import argparse
import os
import shutil
import tempfile
import time

import torch

import torch_tpu


BATCHES = 5


def per_call(fn, n, warmup=200):
    """Seconds per call: the best of BATCHES batches of n / BATCHES calls, after min(warmup, n) untimed calls (on a
    shared machine the slow batches are the ones another process took the core from)."""
    for _ in range(min(warmup, n)):
        fn()
    per = max(1, n // BATCHES)
    best = float("inf")
    for _ in range(BATCHES):
        t0 = time.perf_counter()
        for _ in range(per):
            fn()
        best = min(best, (time.perf_counter() - t0) / per)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--numel", type=int, default=1000)
    ap.add_argument("--inline-numel", type=int, default=999,
                    help="elements of the add below the CPU plugin's inline threshold (fewer than 1000 flops)")
    ap.add_argument("--batches", type=int, default=5, help="timed batches per row; each row reports the best")
    args = ap.parse_args()
    global BATCHES
    BATCHES = max(1, args.batches)

    a_cpu, b_cpu = torch.randn(args.numel), torch.randn(args.numel)
    a, b = a_cpu.to("tpu"), b_cpu.to("tpu")

    # First compile of a fresh signature (cache cleared). The process's first op also pays one-time start-up
    # (PyTorch imports its Python meta registrations on first use), so warm up with another op first.
    t0 = time.perf_counter()
    (a * b).cpu()
    process_first_op = time.perf_counter() - t0
    # A private disk cache directory: the first call compiles, and after dropping the process cache the same call
    # reads the executable back from disk (what a second process does).
    old_dir = torch_tpu._C._compile_cache_dir()
    tmp = tempfile.mkdtemp()
    torch_tpu._C._compile_set_cache_dir(tmp)
    torch_tpu._C._clear_cache()
    c0 = torch_tpu.cache_stats()["compile_seconds"]
    t0 = time.perf_counter()
    (a + b).cpu()
    first_call = time.perf_counter() - t0
    compile_s = torch_tpu.cache_stats()["compile_seconds"] - c0
    torch_tpu._C._flush_disk_cache()
    torch_tpu._C._clear_cache()
    t0 = time.perf_counter()
    (a + b).cpu()
    disk_call = time.perf_counter() - t0
    torch_tpu._C._compile_set_cache_dir(old_dir)
    shutil.rmtree(tmp, ignore_errors=True)

    launch = per_call(lambda: a + b, args.n)
    torch.tpu.synchronize()
    # alpha=2 is a program input (one program for every alpha), as every add's alpha was before defaults were built
    # into programs: the cost of one more argument per launch.
    launch_alpha = per_call(lambda: torch.add(a, b, alpha=2), args.n)
    torch.tpu.synchronize()

    def add_and_wait():
        c = a + b
        torch.tpu.synchronize()
        return c

    waited = per_call(add_and_wait, args.n // 4)
    cpu = per_call(lambda: a_cpu + b_cpu, args.n)
    # The CPU plugin runs a program on the calling thread, with no hand-off to its worker threads, only when XLA's
    # cost analysis counts fewer than 1000 flops and nothing it depends on is still running: a 1000-element add is
    # exactly at that threshold; one element fewer is below it. The PJRT C API has no option to ask for it.
    small = args.inline_numel
    a_s_cpu, b_s_cpu = torch.randn(small), torch.randn(small)
    a_s, b_s = a_s_cpu.to("tpu"), b_s_cpu.to("tpu")
    launch_small = per_call(lambda: a_s + b_s, args.n)
    torch.tpu.synchronize()
    cpu_small = per_call(lambda: a_s_cpu + b_s_cpu, args.n)
    # Reference: jax.jit's dispatch of the same add on its own XLA:CPU client (XLA's C++ client, no C API between),
    # dispatch only like the tpu launch rows; skipped without jax (the [jax] extra).
    jax_rows = []
    try:
        import jax
        import numpy as np

        jadd = jax.jit(lambda x, y: x + y)
        for numel, (xa, xb) in ((args.numel, (a_cpu, b_cpu)), (small, (a_s_cpu, b_s_cpu))):
            ja, jb = jax.device_put(np.asarray(xa)), jax.device_put(np.asarray(xb))
            jadd(ja, jb).block_until_ready()
            t = per_call(lambda: jadd(ja, jb), args.n)
            jadd(ja, jb).block_until_ready()
            jax_rows.append((f"jax.jit add of {numel} (dispatch)", t * 1e6, t / (cpu if numel == args.numel else cpu_small)))
    except ImportError:
        pass
    kept = []

    def keep_cpu():
        kept.append(a_cpu + b_cpu)
        if len(kept) >= 1000:
            kept.clear()

    cpu_kept = per_call(keep_cpu, args.n)
    kept.clear()

    torch_tpu.set_eager_mode("fused")

    def fused_per_call(fn, n):
        # Warm up until the loop's fused program (compiled in the background) is in use.
        per_call(fn, 2000)
        torch_tpu._C._fused_wait()
        return per_call(fn, n)

    fused = fused_per_call(lambda: a + b, args.n)
    torch.tpu.synchronize()

    def keep_tpu():
        kept.append(a + b)
        if len(kept) >= 1000:
            kept.clear()

    fused_kept = fused_per_call(keep_tpu, args.n)
    kept.clear()
    torch.tpu.synchronize()
    fused_waited = fused_per_call(add_and_wait, args.n // 4)
    stats = torch_tpu.cache_stats()["fused"]
    torch_tpu.set_eager_mode("strict")
    info = torch_tpu._C._plugin_info()

    rows = [
        ("tpu eager, cached add (launch)", launch * 1e6, launch / cpu),
        ("tpu eager, cached add(alpha=2) (launch)", launch_alpha * 1e6, launch_alpha / cpu),
        ("tpu eager, cached add + synchronize", waited * 1e6, waited / cpu),
        ("torch CPU eager add", cpu * 1e6, 1.0),
        (f"tpu eager, cached add of {small} (launch, inline)", launch_small * 1e6, launch_small / cpu_small),
        (f"torch CPU eager add of {small}", cpu_small * 1e6, 1.0),
        *jax_rows,
        ("tpu fused eager, add (results dropped)", fused * 1e6, fused / cpu),
        ("tpu fused eager, add (results kept)", fused_kept * 1e6, fused_kept / cpu_kept),
        ("torch CPU eager add (results kept)", cpu_kept * 1e6, cpu_kept / cpu),
        ("tpu fused eager, add + synchronize", fused_waited * 1e6, fused_waited / cpu),
        ("tpu first op of the process (one-time start-up)", process_first_op * 1e6, process_first_op / cpu),
        ("tpu first call (compile + run + copy back)", first_call * 1e6, first_call / cpu),
        ("tpu first compile alone", compile_s * 1e6, compile_s / cpu),
        ("tpu first call, executable from the disk cache", disk_call * 1e6, disk_call / cpu),
    ]
    print(f"plugin: {info['path']}  PJRT API {info['api_version']}  platform {info['platform_name']}")
    print(f"op: a + b, {args.numel} float32 elements, {args.n} calls\n")
    print(f"| {'case':<48} | {'us/call':>10} | {'x CPU eager':>11} |")
    print(f"|{'-' * 50}|{'-' * 12}|{'-' * 13}|")
    for name, us, ratio in rows:
        print(f"| {name:<48} | {us:>10.2f} | {ratio:>11.2f} |")
    print(f"\nfused eager: {stats['ops']} ops recorded, {stats['flushes']} traces, {stats['hits']} fused program hits, "
          f"{stats['replays']} run op by op, {stats['compiles']} fused programs compiled")
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
