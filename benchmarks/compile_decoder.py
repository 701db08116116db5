"""torch.compile(backend="tpu") on a Qwen3-style decoder (4 layers), against tpu eager and torch CPU.

Two shapes:
* decode: batch 1, one new token against a static KV cache of 256 positions, hidden 256 (per-op overhead dominates);
* prefill: batch 4, sequence 256, hidden 512: the forward, and a training step (forward, backward, AdamW),
  where arithmetic dominates.

Each is timed as tpu compiled, tpu eager (strict), tpu fused eager (torch_tpu.set_eager_mode("fused")), torch CPU
eager and torch CPU inductor in one run; prints a markdown table with the ratios. Fused eager is warmed up longer
(--fused-warmup steps, default 12, then until the fused programs compiled in the background are ready): a recorded
trace runs op by op until its fused program is ready. Usage: python3 benchmarks/compile_decoder.py [--iters N] [--skip-inductor] [--skip-fused]
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
    if dev == "tpu" and torch_tpu.eager_mode() == "fused":
        torch_tpu._C._fused_wait()  # fused programs are compiled in the background: let them land
        for _ in range(2):
            fn()
        sync(dev)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    sync(dev)
    return (time.perf_counter() - t0) / iters


FUSED_WARMUP = 12


class eager_mode:
    """Sets torch_tpu's eager mode for the "tpu fused" runs."""

    def __init__(self, mode: str):
        self.mode = "fused" if mode == "tpu fused" else "strict"

    def __enter__(self):
        self.prev = torch_tpu.eager_mode()
        torch_tpu.set_eager_mode(self.mode)

    def __exit__(self, *exc):
        torch_tpu.set_eager_mode(self.prev)
        # Background work (fused programs compiling, disk cache writes) must not overlap the next measurement.
        torch_tpu._C._fused_wait()
        torch_tpu._C._flush_disk_cache()


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

    with eager_mode(mode):
        return timeit(step, dev, iters, warmup=FUSED_WARMUP if mode == "tpu fused" else 3)


def decode_logits(mode: str, steps: int = 6) -> torch.Tensor:
    """Logits of `steps` decode steps on tpu in eager `mode` ("tpu eager" or "tpu fused"), from the same weights."""
    m = seeded(0, Qwen3Decoder, DECODE).to("tpu")
    m.init_kv_cache(1, 256, device="tpu")
    ids = torch.tensor([[17]], device="tpu")
    outs = []
    with eager_mode(mode), torch.no_grad():
        for i in range(steps):
            outs.append(m(ids, torch.tensor([i], device="tpu")))
        return torch.stack([o.cpu() for o in outs])


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
    with eager_mode(mode):
        return timeit(step, dev, iters, warmup=FUSED_WARMUP if mode == "tpu fused" else 2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=0, help="iterations per measurement (default per benchmark)")
    ap.add_argument("--skip-inductor", action="store_true")
    ap.add_argument("--only", default="", help="comma list of: decode,prefill,train")
    ap.add_argument("--torch-threads", type=int, default=0, help="torch.set_num_threads for the CPU runs (0: default)")
    ap.add_argument("--skip-fused", action="store_true")
    ap.add_argument("--fused-warmup", type=int, default=12)
    args = ap.parse_args()
    global FUSED_WARMUP
    FUSED_WARMUP = args.fused_warmup
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    print(f"# torch threads {torch.get_num_threads()}, cpus {os.cpu_count()}, load average {os.getloadavg()}")
    modes = (["tpu compiled", "tpu eager"] + ([] if args.skip_fused else ["tpu fused"]) + ["cpu eager"] +
             ([] if args.skip_inductor else ["cpu inductor"]))
    benches = [
        ("decode (b1, 1 token, kv 256, h256)", lambda md, n: bench_decode(md, n), 50),
        ("prefill forward (b4, s256, h512)", lambda md, n: bench_prefill(md, n, False), 5),
        ("train step fwd+bwd+AdamW (b4, s256, h512)", lambda md, n: bench_prefill(md, n, True), 3),
    ]
    if args.only:
        keep = args.only.split(",")
        benches = [b for b in benches if b[0].split()[0] in keep]
    results = {}
    same = None
    if not args.skip_fused:
        a, b = decode_logits("tpu eager"), decode_logits("tpu fused")
        same = (torch.equal(a, b), (a - b).abs().max().item())
        print(f"# decode logits, fused vs strict eager over 6 steps: equal={same[0]} max |diff|={same[1]:.3g}")
    for name, fn, n in benches:
        for md in modes:
            t0 = time.perf_counter()
            t = fn(md, args.iters or n)
            results[(name, md)] = t
            print(f"# {name} / {md}: {t * 1e3:.2f} ms per step (measured in {time.perf_counter() - t0:.1f}s)",
                  flush=True)
    stats = torch_tpu.compile_stats()
    print()
    ratio_names = ["eager/compiled"] + ([] if args.skip_fused else ["eager/fused", "fused/compiled"]) + \
        ["cpu eager/compiled"] + ([] if args.skip_inductor else ["cpu inductor/compiled"])
    print("| benchmark | " + " | ".join(f"{md} (ms)" for md in modes) + " | " + " | ".join(ratio_names) + " |")
    print("|---" * (len(modes) + len(ratio_names) + 1) + "|")
    for name, _, _ in benches:
        row = [results[(name, md)] for md in modes]
        c = results[(name, "tpu compiled")]
        ratios = [results[(name, "tpu eager")] / c]
        if not args.skip_fused:
            f = results[(name, "tpu fused")]
            ratios += [results[(name, "tpu eager")] / f, f / c]
        ratios.append(results[(name, "cpu eager")] / c)
        if not args.skip_inductor:
            ratios.append(results[(name, "cpu inductor")] / c)
        print(f"| {name} | " + " | ".join(f"{t * 1e3:.2f}" for t in row) + " | " +
              " | ".join(f"{r:.2f}x" for r in ratios) + " |")
    print()
    print(f"load average at the end: {os.getloadavg()}")
    print(f"tpu compile stats: compiles={stats['compiles']} disk_hits={stats['disk_hits']} "
          f"compile_seconds={stats['compile_seconds']:.2f} lowerings={stats['lowerings']} "
          f"packed_weights={stats['packed_weights']}")
    f = torch_tpu.cache_stats()["fused"]
    print(f"tpu fused eager: ops recorded={f['ops']} traces={f['flushes']} fused hits={f['hits']} "
          f"fused compiles={f['compiles']} (+{f['disk_hits']} from disk) replays={f['replays']} "
          f"cut at loop period/limit={f['limit_flushes']}")


if __name__ == "__main__":
    main()
