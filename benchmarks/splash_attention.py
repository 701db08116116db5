"""splash_sdpa (torch_tpu.ops.splash_attention) against plain scaled_dot_product_attention on tpu, side by side.

Does routing plain SDPA to splash_sdpa pay? On every plugin torch-tpu tests (CPU) splash_sdpa is SDPA with the
sliding window as a boolean mask (lowered ops), so the question is whether the window's mask costs or saves time
against causal SDPA on the same shapes. Times forward+backward per call, eager (strict) and compiled
(backend="tpu"), for causal SDPA, SDPA with an explicit window mask, and splash_sdpa with the same window; prints
ratios to causal SDPA measured in the same run. Usage: python3 benchmarks/splash_attention.py [--iters N]
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

import torch_tpu  # noqa: F401
from torch_tpu.ops.splash_attention import sliding_window_mask, splash_sdpa


def timeit(fn, iters: int) -> float:
    for _ in range(2):
        fn()
    torch.tpu.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.tpu.synchronize()
    return (time.perf_counter() - t0) / iters


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--shapes", default="1x8x2x256x64,1x8x2x1024x64")
    args = ap.parse_args()
    print("| shape (b x hq x hkv x L x d), window | mode | causal SDPA ms | SDPA+mask / causal | splash / causal |")
    print("|---|---|---|---|---|")
    for spec in args.shapes.split(","):
        b, hq, hk, L, d = (int(v) for v in spec.split("x"))
        window = L // 8
        q = torch.randn(b, hq, L, d, device="tpu", requires_grad=True)
        k = torch.randn(b, hk, L, d, device="tpu", requires_grad=True)
        v = torch.randn(b, hk, L, d, device="tpu", requires_grad=True)

        def causal(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).sum()

        def masked(q, k, v):
            m = sliding_window_mask(L, L, window, device=q.device)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True).sum()

        def splash(q, k, v):
            return splash_sdpa(q, k, v, local_window_size=window, enable_gqa=True).sum()

        for mode in ("eager", "compiled"):
            times = []
            for fn in (causal, masked, splash):
                f = torch.compile(fn, backend="tpu") if mode == "compiled" else fn
                times.append(timeit(lambda: f(q, k, v).backward(), args.iters))
            print(f"| {spec}, {window} | {mode} | {times[0] * 1e3:.2f} | {times[1] / times[0]:.2f} | "
                  f"{times[2] / times[0]:.2f} |")


if __name__ == "__main__":
    main()
