"""Compile cost against depth: the first compiled call of a decoder at 2 and 24 layers (optionally 48).

    python benchmarks/compile_scale.py [--layers 2 24] [--markdown]

The model: decoder blocks of RMSNorm, causal attention (8 heads) and a SwiGLU MLP, d=256, batch 2 x 64 tokens.
Each row is measured in a fresh interpreter with a fresh TORCH_TPU_CACHE_DIR (nothing cached, in memory or on disk):
* tpu plain: torch.compile(backend="tpu", fullgraph=True) of the blocks as written (each layer's ops lowered and
  compiled by XLA once per layer);
* tpu region: the same with the block's forward under torch.compiler.nested_compile_region (the block is one
  function of the program, lowered once, called per layer);
* tpu loop: the plain blocks run by torch_tpu.scan_layers (weights stacked, one scan whose body is one block);
* jax scan: jax.jit of the same math with jax.lax.scan over stacked layer weights (the reference).
Both for the forward (inference) and a training step (forward + backward of a mean-square loss, no optimizer).
The first call covers Dynamo, AOTAutograd, lowering, XLA compile and the run. Dynamo's own seconds and the user
compiler's (AOTAutograd with the tpu backend inside it) come from torch._dynamo.utils.compilation_time_metrics, the
lowering and XLA compile seconds from torch_tpu.compile_stats() (XLA compiles at the first run, outside Dynamo). Printed: each row's first call, and its 24-layer / 2-layer ratio.
Timings are affected by the machine's load (printed): compare ratios measured in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
D, HEADS, BATCH, SEQ = 256, 8, 2, 64


def torch_worker(mode: str, layers: int, kind: str) -> dict:
    import torch
    import torch.nn.functional as F

    import torch_tpu

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm1 = torch.nn.Parameter(torch.ones(D))
            self.norm2 = torch.nn.Parameter(torch.ones(D))
            self.qkv = torch.nn.Linear(D, 3 * D, bias=False)
            self.o = torch.nn.Linear(D, D, bias=False)
            self.gate_up = torch.nn.Linear(D, 8 * D // 3 // 64 * 64 * 2, bias=False)
            self.down = torch.nn.Linear(8 * D // 3 // 64 * 64, D, bias=False)

        def body(self, x):
            b, s, _ = x.shape
            h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm1
            q, k, v = self.qkv(h).view(b, s, 3, HEADS, D // HEADS).permute(2, 0, 3, 1, 4).unbind(0)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, D)
            x = x + self.o(a)
            h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm2
            g, u = self.gate_up(h).chunk(2, dim=-1)
            return x + self.down(F.silu(g) * u)

    class RegionBlock(Block):
        @torch.compiler.nested_compile_region
        def forward(self, x):
            return self.body(x)

    class PlainBlock(Block):
        def forward(self, x):
            return self.body(x)

    torch.manual_seed(0)
    cls = RegionBlock if mode == "region" else PlainBlock
    model = torch.nn.Sequential(*[cls() for _ in range(layers)]).to("tpu")
    x = torch.randn(BATCH, SEQ, D, device="tpu")
    if mode == "loop":  # the blocks as written, run by torch_tpu.scan_layers (stacked weights, one loop body)
        f = torch.compile(lambda x: torch_tpu.scan_layers(model, x), backend="tpu", fullgraph=True)
    else:
        f = torch.compile(model, backend="tpu", fullgraph=True)
    from torch_tpu._dynamo_backend import reset_compile_stats

    reset_compile_stats()
    t0 = time.perf_counter()
    if kind == "forward":
        with torch.no_grad():
            out = f(x)
        out.cpu()
    else:
        xi = x.requires_grad_(True)
        loss = f(xi).square().mean()
        loss.backward()
        xi.grad.cpu()
    first = time.perf_counter() - t0
    st = torch_tpu.compile_stats()
    from torch._dynamo.utils import compilation_time_metrics as ctm

    def spent(*keys):
        return sum(sum(ctm.get(k, [])) for k in keys)

    # Dynamo's own seconds (tracing, guards) exclude the user compiler's: AOTAutograd and the tpu backend.
    user = spent("OutputGraph.call_user_compiler")
    return dict(first=first, dynamo=spent("_compile.compile_inner") - user, aot_backend=user,
                lower=st["lower_seconds"], xla=st["compile_seconds"], functions=st["region_functions"],
                calls=st["region_calls"], inlined=st["regions_inlined"])


def jax_worker(layers: int, kind: str) -> dict:
    import jax
    import jax.numpy as jnp

    hid = 8 * D // 3 // 64 * 64
    key = jax.random.PRNGKey(0)
    ks = jax.random.split(key, 5)
    w = dict(n1=jnp.ones((layers, D)), n2=jnp.ones((layers, D)),
             qkv=jax.random.normal(ks[0], (layers, D, 3 * D)) * 0.05, o=jax.random.normal(ks[1], (layers, D, D)) * 0.05,
             gu=jax.random.normal(ks[2], (layers, D, 2 * hid)) * 0.05,
             down=jax.random.normal(ks[3], (layers, hid, D)) * 0.05)
    x = jax.random.normal(ks[4], (BATCH, SEQ, D))
    mask = jnp.tril(jnp.ones((SEQ, SEQ), bool))

    def block(x, p):
        h = x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * p["n1"]
        q, k, v = jnp.split((h @ p["qkv"]).reshape(BATCH, SEQ, 3, HEADS, D // HEADS), 3, axis=2)
        q, k, v = (t[:, :, 0].transpose(0, 2, 1, 3) for t in (q, k, v))
        s = jnp.where(mask, q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(D // HEADS), -jnp.inf)
        a = (jax.nn.softmax(s, -1) @ v).transpose(0, 2, 1, 3).reshape(BATCH, SEQ, D)
        x = x + a @ p["o"]
        h = x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * p["n2"]
        g, u = jnp.split(h @ p["gu"], 2, -1)
        return x + (jax.nn.silu(g) * u) @ p["down"], None

    def fwd(w, x):
        return jax.lax.scan(block, x, w)[0]

    def step(w, x):
        return jax.value_and_grad(lambda w, x: jnp.mean(fwd(w, x) ** 2), argnums=(0, 1))(w, x)

    fn = jax.jit(fwd if kind == "forward" else step)
    t0 = time.perf_counter()
    c = fn.lower(w, x).compile()
    compiled = time.perf_counter() - t0
    jax.block_until_ready(c(w, x))
    return dict(first=time.perf_counter() - t0, xla=compiled)


def measure(mode: str, layers: int, kind: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TORCH_TPU_CACHE_DIR=cache,
                   PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        if mode == "jax":
            env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
            env["JAX_PLATFORMS"] = "cpu"
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", mode, str(layers), kind],
                           cwd=ROOT, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stdout[-3000:], p.stderr[-3000:], sep="\n")
        raise SystemExit(f"{mode} {layers} {kind} failed ({p.returncode})")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, nargs="+", default=[2, 24])
    ap.add_argument("--kinds", nargs="+", default=["forward", "train"])
    ap.add_argument("--modes", nargs="+", default=["plain", "region", "loop", "jax"])
    ap.add_argument("--worker", nargs=3)
    args = ap.parse_args()
    if args.worker:
        mode, layers, kind = args.worker
        r = jax_worker(int(layers), kind) if mode == "jax" else torch_worker(mode, int(layers), kind)
        print(json.dumps(r))
        return
    print(f"# cpus {os.cpu_count()}, load average at start {os.getloadavg()}")
    lo, hi = min(args.layers), max(args.layers)
    rows = []
    for kind in args.kinds:
        for mode in args.modes:
            res = {}
            for n in args.layers:
                res[n] = measure(mode, n, kind)
                print(f"# {kind} {mode} {n} layers: {res[n]}", flush=True)
            rows.append((kind, mode, res))
    print(f"# load average at end {os.getloadavg()}")
    head = " | ".join(f"{n} layers first call s (Dynamo / AOT+backend / lower / XLA)" for n in args.layers)
    print(f"\n| step | how | {head} | {hi}/{lo} ratio |")
    print("|---|---|" + "---|" * len(args.layers) + "---|")
    for kind, mode, res in rows:
        def cell(r):
            if "dynamo" not in r:  # jax: the whole compile is XLA's
                return f"{r['first']:.2f} (- / - / - / {r['xla']:.2f})"
            return f"{r['first']:.2f} ({r['dynamo']:.2f} / {r['aot_backend']:.2f} / {r['lower']:.2f} / {r['xla']:.2f})"

        cells = " | ".join(cell(res[n]) for n in args.layers)
        print(f"| {kind} | {mode} | {cells} | {res[hi]['first'] / res[lo]['first']:.2f}x |")


if __name__ == "__main__":
    main()
