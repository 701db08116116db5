"""torch.compile(backend="tpu") on a Qwen3-style decoder (4 layers), against tpu eager and torch CPU.

Two shapes:
* decode: batch 1, one new token against a static KV cache of 256 positions, hidden 256 (per-op overhead dominates);
* prefill: batch 4, sequence 256, hidden 512: the forward, and a training step (forward, backward, AdamW),
  where arithmetic dominates.

Each is timed as tpu compiled, tpu eager, torch CPU eager and torch CPU inductor in one run; prints a markdown table
with the ratios. Usage: python3 benchmarks/compile_decoder.py [--iters N] [--skip-inductor]
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torch_tpu  # noqa: E402,F401
from models import DecoderConfig, Qwen3Decoder, seeded  # noqa: E402

DECODE = DecoderConfig(vocab=4096, hidden=256, layers=4, heads=4, kv_heads=2, head_dim=64, intermediate=768)
PREFILL = DecoderConfig(vocab=4096, hidden=512, layers=4, heads=8, kv_heads=4, head_dim=64, intermediate=1536)


def sync(dev: str) -> None:
    if dev == "tpu":
        torch.tpu.synchronize()


def timeit(fn, dev: str, iters: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    sync(dev)
    return (time.perf_counter() - t0) / iters


def bench_decode(mode: str, iters: int) -> float:
    dev = "tpu" if mode.startswith("tpu") else "cpu"
    m = seeded(0, Qwen3Decoder, DECODE).to(dev)
    m.init_kv_cache(1, 256, device=dev)
    fwd = m
    if mode == "tpu compiled":
        fwd = torch.compile(m, backend="tpu", dynamic=False)
    elif mode == "cpu inductor":
        fwd = torch.compile(m, backend="inductor", dynamic=False)
    ids = torch.tensor([[17]], device=dev)
    positions = [torch.tensor([i], device=dev) for i in range(200)]
    state = {"i": 0}

    def step():
        with torch.no_grad():
            fwd(ids, positions[state["i"] % 200])
        state["i"] += 1

    return timeit(step, dev, iters, warmup=3)


def bench_prefill(mode: str, iters: int, train: bool) -> float:
    dev = "tpu" if mode.startswith("tpu") else "cpu"
    m = seeded(0, Qwen3Decoder, PREFILL).to(dev)
    ids = seeded(1, torch.randint, 0, PREFILL.vocab, (4, 257)).to(dev)
    inp, tgt = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    def loss_fn(model, x, y):
        logits = model(x)
        return F.cross_entropy(logits.reshape(-1, PREFILL.vocab), y.reshape(-1))

    lf, fwd = loss_fn, m
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    opt_step = opt.step
    if mode == "tpu compiled":
        lf = torch.compile(loss_fn, backend="tpu", dynamic=False)
        fwd = torch.compile(m, backend="tpu", dynamic=False)
        opt_step = torch.compile(opt.step, backend="tpu", dynamic=False)
    elif mode == "cpu inductor":
        lf = torch.compile(loss_fn, backend="inductor", dynamic=False)
        fwd = torch.compile(m, backend="inductor", dynamic=False)
        opt_step = torch.compile(opt.step, backend="inductor", dynamic=False)
    if not train:
        def step():
            with torch.no_grad():
                fwd(inp)
    else:
        def step():
            loss = lf(m, inp, tgt)
            loss.backward()
            opt_step()
            opt.zero_grad(set_to_none=True)
    return timeit(step, dev, iters, warmup=2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=0, help="iterations per measurement (default per benchmark)")
    ap.add_argument("--skip-inductor", action="store_true")
    ap.add_argument("--only", default="", help="comma list of: decode,prefill,train")
    ap.add_argument("--torch-threads", type=int, default=0, help="torch.set_num_threads for the CPU runs (0: default)")
    args = ap.parse_args()
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    print(f"# torch threads {torch.get_num_threads()}, cpus {os.cpu_count()}, load average {os.getloadavg()}")
    modes = ["tpu compiled", "tpu eager", "cpu eager"] + ([] if args.skip_inductor else ["cpu inductor"])
    benches = [
        ("decode (b1, 1 token, kv 256, h256)", lambda md, n: bench_decode(md, n), 50),
        ("prefill forward (b4, s256, h512)", lambda md, n: bench_prefill(md, n, False), 5),
        ("train step fwd+bwd+AdamW (b4, s256, h512)", lambda md, n: bench_prefill(md, n, True), 3),
    ]
    if args.only:
        keep = args.only.split(",")
        benches = [b for b in benches if b[0].split()[0] in keep]
    results = {}
    for name, fn, n in benches:
        for md in modes:
            t0 = time.perf_counter()
            t = fn(md, args.iters or n)
            results[(name, md)] = t
            print(f"# {name} / {md}: {t * 1e3:.2f} ms per step (measured in {time.perf_counter() - t0:.1f}s)",
                  flush=True)
    stats = torch_tpu.compile_stats()
    print()
    print("| benchmark | " + " | ".join(f"{md} (ms)" for md in modes) +
          " | eager/compiled | cpu eager/compiled" + ("" if args.skip_inductor else " | cpu inductor/compiled") + " |")
    print("|---" * (len(modes) + 3 - args.skip_inductor) + "|---|")
    for name, _, _ in benches:
        row = [results[(name, md)] for md in modes]
        c = results[(name, "tpu compiled")]
        ratios = [results[(name, "tpu eager")] / c, results[(name, "cpu eager")] / c]
        if not args.skip_inductor:
            ratios.append(results[(name, "cpu inductor")] / c)
        print(f"| {name} | " + " | ".join(f"{t * 1e3:.2f}" for t in row) + " | " +
              " | ".join(f"{r:.2f}x" for r in ratios) + " |")
    print()
    print(f"load average at the end: {os.getloadavg()}")
    print(f"tpu compile stats: compiles={stats['compiles']} disk_hits={stats['disk_hits']} "
          f"compile_seconds={stats['compile_seconds']:.2f} lowerings={stats['lowerings']} "
          f"packed_weights={stats['packed_weights']}")


if __name__ == "__main__":
    main()
