"""A training step (forward, backward, optimizer, zero_grad) of the decoder benchmark model, four ways, side by side.

* ``eager``: tpu eager, op by op;
* ``compiled loss``: the loss function compiled (forward and backward graphs), ``opt.step()`` eager;
* ``compiled loss + step``: the loss function and ``opt.step`` compiled separately (``patch_optimizer_graph_breaks``
  removes the step's own breaks): forward, backward and update programs, with Python between them;
* ``whole step``: ``torch_tpu.compile_whole_step()`` and the step function compiled: one program per step.

Each mode builds the same model (``benchmarks/compile_decoder.py``'s prefill configuration by default: Qwen3-style,
4 layers, hidden 512, batch 4, sequence 256) from the same seed, runs ``--warmup`` steps, then times ``--iters``
steps; it checks that the losses of every mode match the eager run's, and prints the programs launched per step
and a markdown table of times and ratios against the whole step. Usage:

    python benchmarks/whole_step.py [--opt adamw|adam|sgd] [--variant foreach|fused|single] [--iters N] [--small]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torch_tpu  # noqa: E402
from models import DecoderConfig, Qwen3Decoder, seeded  # noqa: E402

PREFILL = DecoderConfig(vocab=4096, hidden=512, layers=4, heads=8, kv_heads=4, head_dim=64, intermediate=1536)
SMALL = DecoderConfig(vocab=512, hidden=128, layers=2, heads=4, kv_heads=2, head_dim=32, intermediate=256)
MODES = ["eager", "compiled loss", "compiled loss + step", "whole step"]


def make_opt(name: str, variant: str, params):
    kw = {"foreach": {"foreach": True}, "fused": {"fused": True}, "single": {"foreach": False}}[variant]
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, **kw)
    cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[name]
    return cls(params, lr=1e-4, **kw)


def build(mode: str, cfg: DecoderConfig, batch: int, seq: int, opt_name: str, variant: str):
    """The mode's step function and its inputs (the model built from seed 0)."""
    m = seeded(0, Qwen3Decoder, cfg).to("tpu")
    ids = seeded(1, torch.randint, 0, cfg.vocab, (batch, seq + 1)).to("tpu")
    inp, tgt = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
    opt = make_opt(opt_name, variant, m.parameters())

    def loss_fn(model, x, y):
        return F.cross_entropy(model(x).reshape(-1, cfg.vocab), y.reshape(-1))

    lf, opt_step = loss_fn, opt.step
    if mode in ("compiled loss", "compiled loss + step"):
        lf = torch.compile(loss_fn, backend="tpu", dynamic=False)
    if mode == "compiled loss + step":
        opt_step = torch.compile(opt.step, backend="tpu", dynamic=False)

    def step(model, x, y):
        loss = lf(model, x, y)
        loss.backward()
        opt_step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    if mode == "whole step":
        step = torch.compile(step, backend="tpu", dynamic=False)
    return lambda: step(m, inp, tgt)


def timed(step, iters: int):
    torch.tpu.synchronize()
    launches0 = torch_tpu.launch_count()
    t0 = time.perf_counter()
    losses = [step() for _ in range(iters)]
    torch.tpu.synchronize()
    return (time.perf_counter() - t0) / iters, (torch_tpu.launch_count() - launches0) / iters, losses


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--opt", default="adamw", choices=["adamw", "adam", "sgd"])
    ap.add_argument("--variant", default="foreach", choices=["foreach", "fused", "single"])
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5, help="rounds of --iters steps per mode, in turns; the median round")
    ap.add_argument("--small", action="store_true", help="a 2-layer hidden-128 model, batch 2, sequence 64")
    ap.add_argument("--modes", default=",".join(MODES))
    args = ap.parse_args()
    cfg, batch, seq = (SMALL, 2, 64) if args.small else (PREFILL, 4, 256)
    modes = args.modes.split(",")
    print(f"# {args.opt} ({args.variant}), hidden {cfg.hidden}, layers {cfg.layers}, batch {batch}, seq {seq}; "
          f"cpus {os.cpu_count()}, load average {os.getloadavg()}")
    # Every mode's graphs are traced with the whole-step patches in place (the other modes' graphs hold no backward
    # and no optimizer: the patches do not change them); the modes are timed in turns, so load drift hits all alike.
    torch_tpu.compile_whole_step()
    steps = {md: build(md, cfg, batch, seq, args.opt, args.variant) for md in modes}
    losses = {md: [] for md in modes}
    for md in modes:
        t0 = time.perf_counter()
        losses[md] += [steps[md]() for _ in range(args.warmup)]
        torch.tpu.synchronize()
        print(f"# {md}: warm-up {args.warmup} steps in {time.perf_counter() - t0:.1f}s", flush=True)
    times = {md: [] for md in modes}
    launches = {md: 0.0 for md in modes}
    for r in range(args.repeats):
        for md in modes:
            dt, per_step, ls = timed(steps[md], args.iters)
            times[md].append(dt)
            launches[md] = per_step
            losses[md] += ls
        print(f"# round {r}: " + ", ".join(f"{md} {times[md][-1] * 1e3:.0f} ms" for md in modes), flush=True)
    res = {md: (statistics.median(times[md]), launches[md], torch.stack([x.cpu() for x in losses[md]]))
           for md in modes}
    ref = res[modes[0]][2]
    for md in modes[1:]:
        diff = (res[md][2] - ref).abs().max().item()
        print(f"# losses of {md} against {modes[0]}: max |diff| {diff:.3g}")
        if not torch.allclose(res[md][2], ref, rtol=1e-3, atol=1e-3):
            raise SystemExit(f"{md}: losses differ from {modes[0]}")
    base = res.get("whole step")
    print()
    print("| mode | ms per step (median round) | launches per step | time / whole step |")
    print("|---|---|---|---|")
    for md in modes:
        r = f"{res[md][0] / base[0]:.2f}x" if base else "-"
        print(f"| {md} | {res[md][0] * 1e3:.1f} | {res[md][1]:.1f} | {r} |")
    print(f"\nload average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
