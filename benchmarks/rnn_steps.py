"""A 2-layer nn.LSTM on tpu: first-call time (program builds and compiles) and warm time per sequence step, in
strict eager, fused eager and torch.compile (dynamo's allow_rnn=True, which unrolls the sequence into the graph),
forward only or forward + backward, for a short and a long sequence.

    python benchmarks/rnn_steps.py [--steps 16 128] [--hidden 128] [--batch 8] [--repeat 5] [--backward]

Each configuration runs in a fresh process (cold caches, no disk cache) so first-call times are comparable.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, sys, time, torch, torch_tpu
import torch._dynamo
mode, steps, hidden, batch, repeat, backward = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "1"
torch.manual_seed(0)
m = torch.nn.LSTM(hidden, hidden, num_layers=2).to("tpu")
x = torch.randn(steps, batch, hidden).to("tpu")
if mode == "fused":
    torch_tpu.set_eager_mode("fused")
fn = m
if mode == "compiled":
    torch._dynamo.config.allow_rnn = True
    fn = torch.compile(m, backend="tpu")
def step():
    y, _ = fn(x)
    if backward:
        y.sum().backward()
    torch.tpu.synchronize()
t0 = time.perf_counter(); step(); first = time.perf_counter() - t0
step()
l0 = torch_tpu.launch_count(); step(); launches = torch_tpu.launch_count() - l0
times = []
for _ in range(repeat):
    t0 = time.perf_counter(); step(); times.append(time.perf_counter() - t0)
times.sort()
print(json.dumps({"first_s": first, "warm_s": times[len(times) // 2], "launches": launches}))
"""


def run(mode: str, steps: int, hidden: int, batch: int, repeat: int, backward: bool) -> dict:
    env = dict(os.environ)
    env["TORCH_TPU_CACHE_DIR"] = tempfile.mkdtemp(prefix="rnn_bench_cache_")
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(steps), str(hidden), str(batch), str(repeat),
                          "1" if backward else "0"], env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, nargs="+", default=[16, 128])
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--backward", action="store_true")
    ap.add_argument("--modes", nargs="+", default=["strict", "fused", "compiled"])
    a = ap.parse_args()
    print(f"2-layer LSTM hidden {a.hidden} batch {a.batch} backward {a.backward}; load {os.getloadavg()[0]:.1f}")
    print(f"{'mode':>9} {'steps':>5} {'first call s':>12} {'warm ms':>9} {'warm ms/step':>12} {'launches':>8}")
    for mode in a.modes:
        for t in a.steps:
            r = run(mode, t, a.hidden, a.batch, a.repeat, a.backward)
            print(f"{mode:>9} {t:>5} {r['first_s']:>12.2f} {r['warm_s'] * 1e3:>9.1f} {r['warm_s'] * 1e3 / t:>12.3f} {r['launches']:>8}",
                  flush=True)


if __name__ == "__main__":
    main()
