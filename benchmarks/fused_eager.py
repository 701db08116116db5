"""Fused eager against strict eager on overhead-bound loops of small ops, over repeated fresh processes.

Loops (batch 1, float32, small shapes: dispatch and launch overhead dominate):
* mlp:     8 residual blocks of RMSNorm, Linear 64->128, GELU, Linear 128->64 (inference); `mlp-nosync` is the
           same loop synchronized only at the end of each timed block (the loop is cut at its period);
* attn:    2 pre-norm self-attention blocks (hidden 64, 4 heads, sequence 16, softmax attention, out projection);
* adamw:   one AdamW step (foreach, no fused kernel) over 24 small parameters with their gradients;
* sgd:     one SGD-with-momentum step over the same 24 parameters;
* decode:  the decode step of benchmarks/compile_decoder.py's 4-layer Qwen3-style decoder (static KV cache 256).

Each loop runs in a fresh subprocess (so the trace, loop-period and program caches start empty), once with an empty
disk cache (`cold`: every fused program is compiled in the background while the loop runs) and once with the disk
cache the cold run left (`warm`). In the subprocess: the loop's outputs after a few steps are compared between
strict and fused mode (they must be equal), then strict and fused are timed side by side in alternating blocks of
steps (every step ends with torch.tpu.synchronize(), like a training or decode loop reading a value; `-nosync`
loops only at the end of each block), after the same
number of warm-up steps for both (fused compiles are *not* awaited: what they cost before landing is measured).

`--load` keeps one core busy with another process during every run (a machine that is not quiet). `--first N` also
runs each mode alone in a fresh process from the loop's first step (the same disk cache state for both: cold, an
empty one; warm, the one the cold timing filled), times that step and then N steps in windows of `--window`: the
window ratios show what the fused programs' compiles, first launches and speed checks cost while they happen.

    python benchmarks/fused_eager.py [--runs 3] [--loops mlp,attn,adamw,sgd,decode] [--load] [--first 100] [--markdown]

Prints per loop and cache state the strict/fused ratio of every run, the worst and the median, the worst of the
timed blocks, and with --first the ratio over steps 2 to N+1 per run and its worst window.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LOOPS = ["mlp", "mlp-nosync", "attn", "adamw", "sgd", "decode"]


# ---------------------------------------------------------------------------------------------------------------
# The loops (run in the child process).


def build(name: str):
    """Returns (step, outputs): `step()` runs one iteration; `outputs()` the tensors to compare between modes.
    Built fresh (same seed) for each mode, so both start from the same state."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)
    dev = "tpu"
    if name.startswith("mlp"):

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.ones(64))
                self.up = nn.Linear(64, 128)
                self.down = nn.Linear(128, 64)

            def forward(self, x):
                h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w
                return x + self.down(F.gelu(self.up(h)))

        m = nn.Sequential(*[Block() for _ in range(8)]).to(dev)
        x = torch.randn(1, 64).to(dev)
        out = {}

        def step():
            with torch.no_grad():
                out["y"] = m(x)

        return step, lambda: [out["y"]]

    if name == "attn":

        class Attn(nn.Module):
            def __init__(self, d=64, h=4):
                super().__init__()
                self.h = h
                self.norm = nn.LayerNorm(d)
                self.qkv = nn.Linear(d, 3 * d)
                self.o = nn.Linear(d, d)

            def forward(self, x):
                b, s, d = x.shape
                q, k, v = self.qkv(self.norm(x)).split(d, dim=-1)
                q, k, v = (t.view(b, s, self.h, d // self.h).transpose(1, 2) for t in (q, k, v))
                a = torch.softmax(q @ k.transpose(-1, -2) / (d // self.h) ** 0.5, dim=-1) @ v
                return x + self.o(a.transpose(1, 2).reshape(b, s, d))

        m = nn.Sequential(Attn(), Attn()).to(dev)
        x = torch.randn(1, 16, 64).to(dev)
        out = {}

        def step():
            with torch.no_grad():
                out["y"] = m(x)

        return step, lambda: [out["y"]]

    if name in ("adamw", "sgd"):
        shapes = [(64, 64), (64,), (128, 64), (128,), (64, 128), (64,)] * 4
        params = [torch.randn(s).to(dev).requires_grad_() for s in shapes]
        for p in params:
            p.grad = torch.randn(p.shape).to(dev) * 0.01
        if name == "adamw":
            opt = torch.optim.AdamW(params, lr=1e-3, foreach=True)
        else:
            opt = torch.optim.SGD(params, lr=1e-2, momentum=0.9, foreach=True)

        def step():
            opt.step()

        return step, lambda: list(params)

    if name == "decode":
        sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
        from models import DecoderConfig, Qwen3Decoder, seeded

        cfg = DecoderConfig(vocab=4096, hidden=256, layers=4, heads=4, kv_heads=2, head_dim=64, intermediate=768)
        m = seeded(0, Qwen3Decoder, cfg).to(dev)
        m.init_kv_cache(1, 256, device=dev)
        ids = torch.tensor([[17]], device=dev)
        positions = [torch.tensor([i], device=dev) for i in range(256)]
        state = {"i": 0}
        out = {}

        def step():
            with torch.no_grad():
                out["y"] = m(ids, positions[state["i"] % 256])
            state["i"] += 1

        return step, lambda: [out["y"]]

    raise ValueError(f"unknown loop {name!r}")


def child(name: str, steps: int, blocks: int, warmup: int, check: int) -> dict:
    import torch
    import torch_tpu

    per_step = not name.endswith("-nosync")

    def run_steps(step, n):
        for _ in range(n):
            step()
            if per_step:
                torch.tpu.synchronize()
        torch.tpu.synchronize()

    # Timing: one loop object per mode, same warm-up, alternating blocks.
    loops = {}
    for mode in ("strict", "fused"):
        torch_tpu.set_eager_mode(mode)
        loops[mode] = build(name)[0]
        run_steps(loops[mode], warmup)
    torch_tpu.set_eager_mode("strict")
    t = {"strict": 0.0, "fused": 0.0}
    block_ratios = []
    s0 = torch_tpu.cache_stats()["fused"]
    per = max(1, steps // blocks)
    for _ in range(blocks):
        bt = {}
        for mode in ("strict", "fused"):
            torch_tpu.set_eager_mode(mode)
            t0 = time.perf_counter()
            run_steps(loops[mode], per)
            bt[mode] = time.perf_counter() - t0
            t[mode] += bt[mode]
        block_ratios.append(bt["strict"] / bt["fused"])
    torch_tpu.set_eager_mode("strict")
    s1 = torch_tpu.cache_stats()["fused"]
    # Outputs equal between modes after `check` steps, from the same initial state.
    res = {}
    for mode in ("strict", "fused"):
        torch_tpu.set_eager_mode(mode)
        step, outputs = build(name)
        run_steps(step, check)
        res[mode] = [t.detach().cpu().clone() for t in outputs()]
    torch_tpu.set_eager_mode("strict")
    max_diff = max(float((a - b).abs().max()) for a, b in zip(res["strict"], res["fused"]))
    equal = all(torch.equal(a, b) for a, b in zip(res["strict"], res["fused"]))

    n = per * blocks
    return {
        "loop": name,
        "strict_ms": 1e3 * t["strict"] / n,
        "fused_ms": 1e3 * t["fused"] / n,
        "ratio": t["strict"] / t["fused"],
        "block_ratios": block_ratios,
        "equal": equal,
        "max_diff": max_diff,
        "timed": {k: s1[k] - s0.get(k, 0) for k in s1 if isinstance(s1[k], (int, float)) and k in s0},
        "stats": s1,
    }


def child_first(name: str, mode: str, steps: int, window: int) -> dict:
    """One mode from the loop's first step in this fresh process: the seconds of its first step (the process's first
    launches: per-op programs compiled or read from disk, the same in both modes), then of each window of `window`
    steps after it."""
    import torch
    import torch_tpu

    per_step = not name.endswith("-nosync")
    torch_tpu.set_eager_mode(mode)
    step = build(name)[0]
    torch.tpu.synchronize()
    t0 = time.perf_counter()
    step()
    torch.tpu.synchronize()
    first = time.perf_counter() - t0
    times = []
    for _ in range(steps // window):
        t0 = time.perf_counter()
        for _ in range(window):
            step()
            if per_step:
                torch.tpu.synchronize()
        torch.tpu.synchronize()
        times.append(time.perf_counter() - t0)
    return {"loop": name, "mode": mode, "first": first, "windows": times}


# ---------------------------------------------------------------------------------------------------------------
# The driver.


def busy_process() -> subprocess.Popen:
    """Another process keeping one core busy (pure Python arithmetic), as on a machine that is not quiet."""
    # It also ends when this process is gone (killed before it could stop it).
    code = ("import os\nparent, x, i = %d, 0, 0\nwhile True:\n    x = (x * 1103515245 + 12345) %% 2147483648\n"
            "    i += 1\n    if i %% 1000000 == 0 and os.getppid() != parent:\n        break\n" % os.getpid())
    return subprocess.Popen([sys.executable, "-c", code])


def run_child(name: str, cache_dir: str, args, first_mode: str = "") -> dict:
    env = dict(os.environ)
    env["TORCH_TPU_CACHE_DIR"] = cache_dir
    env.pop("TORCH_TPU_EAGER_MODE", None)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--steps", str(args.steps), "--blocks",
           str(args.blocks), "--warmup", str(args.warmup), "--check", str(args.check)]
    if first_mode:
        cmd += ["--first-mode", first_mode, "--first", str(args.first), "--window", str(args.window)]
    load = busy_process() if args.load else None
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    finally:
        if load is not None:
            load.kill()
            load.wait()
    if r.returncode != 0:
        raise RuntimeError(f"{name}: exit {r.returncode}\n{r.stdout}\n{r.stderr[-4000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--loops", default=",".join(LOOPS))
    ap.add_argument("--steps", type=int, default=200, help="timed steps per mode")
    ap.add_argument("--blocks", type=int, default=10, help="alternating strict/fused blocks the steps are split in")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps per mode (fused compiles not awaited)")
    ap.add_argument("--check", type=int, default=4, help="steps before comparing the outputs of the two modes")
    ap.add_argument("--cache", default="cold,warm", help="cold, warm or both")
    ap.add_argument("--load", action="store_true", help="another process keeps one core busy during every run")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--first", type=int, default=0,
                    help="also time each mode alone from its first step: that step, then N steps in windows of "
                         "--window, each mode in its own fresh process with the same disk cache (cold: empty; warm: "
                         "filled)")
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--first-mode", default="", help=argparse.SUPPRESS)
    ap.add_argument("--child", default="")
    args = ap.parse_args()
    if args.child:
        if args.first_mode:
            print(json.dumps(child_first(args.child, args.first_mode, args.first, args.window)))
        else:
            print(json.dumps(child(args.child, args.steps, args.blocks, args.warmup, args.check)))
        return

    loops = [x for x in args.loops.split(",") if x]
    caches = [x for x in args.cache.split(",") if x]
    results: dict = {}
    firsts: dict = {}
    load0 = os.getloadavg()
    for run in range(args.runs):
        for name in loops:
            with tempfile.TemporaryDirectory(prefix="fused_bench_") as d:
                for cache in ("cold", "warm"):
                    if args.first and cache in caches:
                        w, f1 = {}, {}
                        for mode in ("strict", "fused"):
                            if cache == "cold":
                                with tempfile.TemporaryDirectory(prefix="fused_first_") as e:
                                    rf = run_child(name, e, args, mode)
                            else:
                                rf = run_child(name, d, args, mode)
                            w[mode], f1[mode] = rf["windows"], rf["first"]
                        wr = [a / b for a, b in zip(w["strict"], w["fused"])]
                        firsts.setdefault((name, cache), []).append((wr, sum(w["strict"]) / sum(w["fused"])))
                        print(f"run {run + 1} {name:7s} {cache}: first step strict {f1['strict'] * 1e3:.0f} ms fused "
                              f"{f1['fused'] * 1e3:.0f} ms; the next {args.first} steps, strict/fused per window of "
                              f"{args.window}: {', '.join(f'{x:.2f}' for x in wr)}; all {args.first}: "
                              f"{sum(w['strict']) / sum(w['fused']):.2f}", file=sys.stderr, flush=True)
                    r = run_child(name, d, args)  # the warm run reuses the disk cache the cold run filled
                    if cache not in caches:
                        continue
                    results.setdefault((name, cache), []).append(r)
                    tm = r["timed"]
                    print(f"run {run + 1} {name:7s} {cache}: strict {r['strict_ms']:.3f} ms fused {r['fused_ms']:.3f} ms"
                          f" ratio {r['ratio']:.2f}x (worst block {min(r['block_ratios']):.2f}x) equal={r['equal']} (timed: hits {tm.get('hits')} replays "
                          f"{tm.get('replays')} slow {tm.get('slow_programs', '-')} trials {tm.get('speed_trials', '-')}) load {os.getloadavg()[0]:.1f}",
                          file=sys.stderr, flush=True)
                    if args.verbose:
                        print(json.dumps(r["stats"]), file=sys.stderr)
    load1 = os.getloadavg()
    print(f"load average {load0[0]:.1f} -> {load1[0]:.1f}")
    print(f"another process busy on one core: {'yes' if args.load else 'no'}")
    if args.markdown:
        print("| loop | cache | strict ms/step (median) | fused ms/step (median) | strict/fused per run | worst | median | "
              f"worst block of {max(1, args.steps // args.blocks)} steps | "
              + (f"steps 2-{args.first + 1}: strict/fused per run | worst window of {args.window} | " if args.first
                 else "")
              + "outputs equal |")
        print("|---|---|---|---|---|---|---|---|" + ("---|---|" if args.first else "") + "---|")
    for (name, cache), rs in results.items():
        ratios = [r["ratio"] for r in rs]
        worst_block = min(min(r["block_ratios"]) for r in rs)
        fw = firsts.get((name, cache))
        first_cell = (f"{', '.join(f'{t:.2f}' for _, t in fw)} | {min(min(x) for x, _ in fw):.2f}x | " if fw
                      else ("- | - | " if args.first else ""))
        eq = all(r["equal"] for r in rs)
        sm = statistics.median(r["strict_ms"] for r in rs)
        fm = statistics.median(r["fused_ms"] for r in rs)
        per_run = ", ".join(f"{x:.2f}" for x in ratios)
        if args.markdown:
            print(f"| {name} | {cache} | {sm:.3f} | {fm:.3f} | {per_run} | {min(ratios):.2f}x | "
                  f"{statistics.median(ratios):.2f}x | {worst_block:.2f}x | {first_cell}{'yes' if eq else 'NO (max diff %.2e)' % max(r['max_diff'] for r in rs)} |")
        else:
            print(f"{name:7s} {cache:5s} strict {sm:.3f} ms fused {fm:.3f} ms ratios [{per_run}] worst "
                  f"{min(ratios):.2f}x median {statistics.median(ratios):.2f}x worst block {worst_block:.2f}x "
                  + (f"steps 2-{args.first + 1} {', '.join(f'{t:.2f}' for _, t in fw)} worst window "
                     f"{min(min(x) for x, _ in fw):.2f}x " if fw else "") + f"equal {eq}")


if __name__ == "__main__":
    main()
