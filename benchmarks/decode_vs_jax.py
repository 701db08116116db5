"""Compiled decode and prefill of a Qwen3-style decoder: torch.compile(backend="tpu") against jax.jit of the same
model on the same XLA:CPU, side by side in one process.

The model (tests/python/models.py Qwen3Decoder): 4 layers, hidden 256, 8 query heads and 4 key/value heads of 64,
SwiGLU 768, vocabulary 4096, rotary embeddings, q/k RMSNorm. The JAX reference is the same math written in
jax.numpy, its weights copied from the torch model (linear weights as [in, out] arrays, as a JAX model keeps them).

* decode: batch 1, one token per step against a static KV cache of 256 positions (torch: index_copy_ into the cache
  buffers, which the compiled program updates; JAX: lax.dynamic_update_slice on caches donated to the step);
* prefill: batch 4 x 128 tokens, causal, no cache.

Before timing, 6 decode steps from empty caches and one prefill are run on both sides and their logits compared.
Timing: `--iters` decode steps (a fortieth as many prefills, at least 3) launched back to back, one synchronization
at the end, best of `--repeats` samples, the two sides alternating sample by sample; the same for a quarter as many
steps each waited for ("waited"), and the process CPU time per step. `--runs N` repeats the whole measurement.
Then the stages of one steady-state compiled decode call (CompiledGraph._time_stages). XLA_FLAGS=--xla_dump_to=DIR
dumps both sides' optimized HLO (the CPU plugin honours XLA_FLAGS as jaxlib does).
`--sweep [SHAPE ...]` times decode alone over the decoder shapes of SHAPES (hidden 128-1024, 4-16 heads, KV
128-1024, SwiGLU and GELU MLPs, tied and untied embeddings, with and without q/k norms).
Usage: python3 benchmarks/decode_vs_jax.py [--runs 3] [--iters 100] [--repeats 10] [--sweep [SHAPE ...]]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import torch_tpu  # noqa: E402,F401
from models import DecoderConfig, Qwen3Decoder, seeded  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

CFG = DecoderConfig(vocab=4096, hidden=256, layers=4, heads=8, kv_heads=4, head_dim=64, intermediate=768)
KV_LEN = 256
PREFILL_SHAPE = (4, 128)


# ---------------------------------------------------------------------------------------------------------------
# The JAX reference


def jax_params(m: Qwen3Decoder) -> dict:
    """The torch model's weights as a JAX pytree (linear weights transposed to [in, out])."""
    def lin(w):
        return jnp.asarray(w.detach().cpu().numpy().T.copy())

    def vec(w):
        return jnp.asarray(w.detach().cpu().numpy())

    cfg = m.cfg
    layers = []
    for L in m.layers:
        a = L.attn
        d = dict(in_norm=vec(L.input_norm.weight), post_norm=vec(L.post_norm.weight),
                 wq=lin(a.q_proj.weight), wk=lin(a.k_proj.weight), wv=lin(a.v_proj.weight),
                 wo=lin(a.o_proj.weight), wu=lin(L.up_proj.weight), wd=lin(L.down_proj.weight))
        if cfg.qk_norm:
            d.update(q_norm=vec(a.q_norm.weight), k_norm=vec(a.k_norm.weight))
        if cfg.mlp == "swiglu":
            d.update(wg=lin(L.gate_proj.weight))
        layers.append(d)
    p = dict(embed=vec(m.embed.weight), layers=layers, norm=vec(m.norm.weight), inv_freq=vec(m.inv_freq))
    if not cfg.tie_embeddings:  # tied: the logits are x @ embed.T, as a JAX model with shared embeddings does
        p["lm_head"] = lin(m.lm_head.weight)
    return p


def _rms(x, w, eps):
    return w * (x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps))


def _rot(x):
    h = x.shape[-1] // 2
    return jnp.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def jax_forward(cfg, p, ids, start, caches):
    """logits [b, s, vocab] (and the updated caches when `caches` is a list of (k, v) [b, kv, max, hd])."""
    b, s = ids.shape
    h, kv, hd, eps = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.eps
    pos = jnp.arange(s) + start
    n = caches[0][0].shape[2] if caches is not None else s
    mask = jnp.where(jnp.arange(n)[None, :] > pos[:, None], -jnp.inf, 0.0).astype(jnp.float32)
    freqs = pos[:, None].astype(jnp.float32) * p["inv_freq"][None, :]
    emb = jnp.concatenate([freqs, freqs], axis=-1)
    cos, sin = jnp.cos(emb), jnp.sin(emb)
    x = p["embed"][ids]
    new = []
    for i, L in enumerate(p["layers"]):
        y = _rms(x, L["in_norm"], eps)
        q = (y @ L["wq"]).reshape(b, s, h, hd)
        k = (y @ L["wk"]).reshape(b, s, kv, hd)
        if cfg.qk_norm:
            q, k = _rms(q, L["q_norm"], eps), _rms(k, L["k_norm"], eps)
        q, k = q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3)
        v = (y @ L["wv"]).reshape(b, s, kv, hd).transpose(0, 2, 1, 3)
        q = q * cos + _rot(q) * sin
        k = k * cos + _rot(k) * sin
        if caches is not None:
            kc = jax.lax.dynamic_update_slice(caches[i][0], k, (0, 0, start, 0))
            vc = jax.lax.dynamic_update_slice(caches[i][1], v, (0, 0, start, 0))
            new.append((kc, vc))
            k, v = kc, vc
        rep = h // kv
        k = jnp.repeat(k, rep, axis=1)
        v = jnp.repeat(v, rep, axis=1)
        scores = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(hd)) + mask
        out = (jax.nn.softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(b, s, h * hd)
        x = x + out @ L["wo"]
        y = _rms(x, L["post_norm"], eps)
        if cfg.mlp == "swiglu":
            x = x + (jax.nn.silu(y @ L["wg"]) * (y @ L["wu"])) @ L["wd"]
        else:
            x = x + jax.nn.gelu(y @ L["wu"], approximate=False) @ L["wd"]
    y = _rms(x, p["norm"], eps)
    logits = y @ p["embed"].T if cfg.tie_embeddings else y @ p["lm_head"]
    return (logits, new) if caches is not None else logits


def jax_decode_fn(cfg):
    return jax.jit(lambda p, caches, ids, start: jax_forward(cfg, p, ids, start, caches), donate_argnums=(1,))


def jax_prefill_fn(cfg):
    return jax.jit(lambda p, ids: jax_forward(cfg, p, ids, 0, None))


def jax_caches(cfg, kv_len):
    shape = (1, cfg.kv_heads, kv_len, cfg.head_dim)
    return [(jnp.zeros(shape, jnp.float32), jnp.zeros(shape, jnp.float32)) for _ in range(cfg.layers)]


# ---------------------------------------------------------------------------------------------------------------
# Both sides


class Sides:
    def __init__(self, cfg: DecoderConfig = CFG, kv_len: int = KV_LEN, prefill_shape=PREFILL_SHAPE) -> None:
        self.cfg, self.kv_len = cfg, kv_len
        self.m = seeded(0, Qwen3Decoder, cfg).to("tpu")  # decode model (static cache)
        self.m.init_kv_cache(1, kv_len, device="tpu")
        self.pm = seeded(0, Qwen3Decoder, cfg).to("tpu")  # prefill model (no cache)
        self.p = jax_params(self.m)
        self.t_decode = torch.compile(self.m, backend="tpu", dynamic=False)
        self.t_prefill = torch.compile(self.pm, backend="tpu", dynamic=False)
        self.j_decode = jax_decode_fn(cfg)
        self.j_prefill = jax_prefill_fn(cfg)
        self.t_ids = torch.tensor([[17]], device="tpu")
        self.t_pos = [torch.tensor([i], device="tpu") for i in range(kv_len)]
        self.j_ids = jnp.asarray([[17]], dtype=jnp.int32)
        self.j_pos = [jnp.asarray(i, dtype=jnp.int32) for i in range(kv_len)]
        self.j_cache = jax_caches(cfg, kv_len)
        ids = seeded(1, torch.randint, 0, cfg.vocab, prefill_shape)
        self.t_prompt = ids.to("tpu")
        self.j_prompt = jnp.asarray(ids.numpy().astype(np.int32))

    def reset_caches(self) -> None:
        for L in self.m.layers:
            L.attn.k_cache.zero_()
            L.attn.v_cache.zero_()
        self.j_cache = jax_caches(self.cfg, self.kv_len)

    # one step of each

    def torch_decode(self, i: int) -> torch.Tensor:
        with torch.no_grad():
            return self.t_decode(self.t_ids, self.t_pos[i % self.kv_len])

    def jax_decode(self, i: int):
        logits, self.j_cache = self.j_decode(self.p, self.j_cache, self.j_ids, self.j_pos[i % self.kv_len])
        return logits

    def torch_prefill(self, i: int = 0) -> torch.Tensor:
        with torch.no_grad():
            return self.t_prefill(self.t_prompt)

    def jax_prefill(self, i: int = 0):
        return self.j_prefill(self.p, self.j_prompt)

    def compare(self) -> tuple:
        self.reset_caches()
        a = torch.stack([self.torch_decode(i).cpu() for i in range(6)])
        b = torch.from_numpy(np.stack([np.asarray(self.jax_decode(i)) for i in range(6)]))
        c = self.torch_prefill().cpu()
        d = torch.from_numpy(np.asarray(self.jax_prefill()))
        return (a - b).abs().max().item(), (c - d).abs().max().item(), a.abs().max().item()


def _time(step, sync, iters: int, each: bool = False) -> tuple:
    """(wall seconds, CPU seconds of the whole process) per step over `iters` steps."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = None
    for i in range(iters):
        out = step(i)
        if each:
            sync(out)
    sync(out)
    return (time.perf_counter() - w0) / iters, (time.process_time() - c0) / iters


def _call_time(step, sync, n: int) -> float:
    """Median seconds until a call returns, the device idle at each call (every step waited for): the host's
    dispatch cost (for torch.compile: Dynamo's frame evaluation and guards, the module call, the graph call)."""
    t = []
    for i in range(n):
        t0 = time.perf_counter()
        out = step(i)
        t.append(time.perf_counter() - t0)
        sync(out)
    return sorted(t)[n // 2]


def _tsync(out) -> None:
    torch.tpu.synchronize()


def _jsync(out) -> None:
    jax.block_until_ready(out)


def measure(s: Sides, iters: int, repeats: int, which=("decode", "prefill")) -> dict:
    """Per step, the best of `repeats` samples of `iters` steps, the two sides alternating sample by sample (a
    shared machine's load then hits both alike): wall time launching back to back, wall time waiting for every
    step, and the process's CPU time per step (all threads; less sensitive than wall time to other processes)."""
    r = {}
    for name, tstep, jstep, n in (("decode", s.torch_decode, s.jax_decode, iters),
                                  ("prefill", s.torch_prefill, s.jax_prefill, max(iters // 40, 3))):
        if name not in which:
            continue
        for _ in range(3):  # warm both
            tstep(0), jstep(0)
        _tsync(None), _jsync(jstep(0))
        best = {k: float("inf") for k in ("torch", "jax", "torch_cpu", "jax_cpu", "torch_latency", "jax_latency")}
        for _ in range(repeats):
            for side, step, sync in (("torch", tstep, _tsync), ("jax", jstep, _jsync)):
                w, c = _time(step, sync, n)
                best[side] = min(best[side], w)
                best[side + "_cpu"] = min(best[side + "_cpu"], c)
                w, _ = _time(step, sync, max(n // 4, 3), each=True)
                best[side + "_latency"] = min(best[side + "_latency"], w)
        r[name] = best
    return r


def _patched_graph_call(wrap):
    """A context in which torch.compile(backend="tpu") graphs are called through `wrap(graph, inner)`."""
    import contextlib

    from torch_tpu import _C
    from torch_tpu._dynamo_backend import _backend  # where _graph_call reads _C

    real = _C._GraphCall

    def patched(graph, slow, bump=()):
        return wrap(graph, real(graph, slow, list(bump)))

    @contextlib.contextmanager
    def ctx():
        torch._dynamo.reset()  # a new model of the same class would reuse the graph compiled for the timed one
        _backend._C = type("C", (), {"__getattr__": lambda self, k: getattr(_C, k),
                                     "_GraphCall": staticmethod(patched)})()
        try:
            yield
        finally:
            _backend._C = _C

    return ctx()


def _second_copy(s: Sides, wrap):
    """A second compiled copy of the decode model whose graph call goes through `wrap(graph, inner)`, after 3 steps."""
    with _patched_graph_call(wrap):
        m = seeded(0, Qwen3Decoder, s.cfg).to("tpu")
        m.init_kv_cache(1, s.kv_len, device="tpu")
        f = torch.compile(m, backend="tpu", dynamic=False)
        with torch.no_grad():
            for i in range(3):
                f(s.t_ids, s.t_pos[i])
    torch.tpu.synchronize()
    return f


def dispatch_split(s: Sides, n: int = 200) -> tuple:
    """Median microseconds, each step waited for (the device idle at each call), of a compiled decode call's host
    work: until the graph call starts (Dynamo's frame evaluation, guards, module calls, argument gathering), the
    graph call (signature, launch), after it; and jax.jit's whole call."""
    marks = {}

    def wrap(graph, inner):
        def call(*args):
            marks["in"] = time.perf_counter()
            out = inner(*args)
            marks["out"] = time.perf_counter()
            return out
        return call

    f = _second_copy(s, wrap)
    parts = [[], [], []]
    with torch.no_grad():
        for i in range(n):
            t0 = time.perf_counter()
            f(s.t_ids, s.t_pos[i % s.kv_len])
            t1 = time.perf_counter()
            for k, v in enumerate((marks["in"] - t0, marks["out"] - marks["in"], t1 - marks["out"])):
                parts[k].append(v)
            torch.tpu.synchronize()
    med = [sorted(p)[n // 2] * 1e6 for p in parts]
    return med[0], med[1], med[2], _call_time(s.jax_decode, _jsync, n) * 1e6


def decode_stages(s: Sides, n: int) -> dict:
    """torch_tpu's breakdown of one steady-state compiled decode call (CompiledGraph._time_stages: signature, program
    lookup, launch bookkeeping and output tensors, PJRT execute enqueue), on a second compiled copy of the decode
    model whose graph call records its arguments."""
    seen = {}

    def wrap(graph, inner):
        def call(*args):
            seen["graph"], seen["args"] = graph, list(args)
            return inner(*args)
        return call

    _second_copy(s, wrap)
    st = seen["graph"]._time_stages(seen["args"], n)
    torch.tpu.synchronize()
    return {k: v / 1e3 for k, v in st.items()}  # microseconds


# ---------------------------------------------------------------------------------------------------------------
# The shape sweep (--sweep): decode only, each shape against jax.jit of the same math

# name: (hidden, heads, kv_heads, head_dim, intermediate, mlp, tied, qk_norm, kv_len, vocab); 4 layers each.
SHAPES = {
    "h128-swiglu": (128, 4, 2, 32, 384, "swiglu", False, True, 128, 4096),
    "h256-gelu-tied": (256, 8, 8, 32, 1024, "gelu", True, False, 256, 8192),
    "h256-swiglu-llama": (256, 8, 4, 32, 768, "swiglu", False, False, 512, 4096),
    "h384-gelu": (384, 6, 6, 64, 1536, "gelu", False, True, 1024, 4096),
    "h512-swiglu-tied": (512, 8, 2, 64, 1408, "swiglu", True, True, 512, 8192),
    "h512-gelu-16h": (512, 16, 4, 32, 2048, "gelu", False, False, 1024, 4096),
    "h768-swiglu-12h": (768, 12, 4, 64, 2048, "swiglu", False, True, 256, 8192),
    "h1024-gelu-tied": (1024, 16, 16, 64, 4096, "gelu", True, False, 128, 8192),
    "h1024-swiglu-8h": (1024, 8, 8, 128, 2816, "swiglu", False, True, 1024, 4096),
}


def shape_cfg(name: str) -> tuple:
    hid, h, kv, hd, inter, mlp, tied, qkn, kv_len, vocab = SHAPES[name]
    return DecoderConfig(vocab=vocab, hidden=hid, layers=4, heads=h, kv_heads=kv, head_dim=hd, intermediate=inter,
                         mlp=mlp, tie_embeddings=tied, qk_norm=qkn), kv_len


def sweep(names, runs: int, repeats: int, budget_s: float) -> None:
    """Each shape: the logits of 6 decode steps compared, then `runs` measurements of decode launched back to back
    (a sample of about `budget_s` seconds per side, best of `repeats`) and waited for every step."""
    rows = []
    for name in names:
        cfg, kv_len = shape_cfg(name)
        torch._dynamo.reset()
        s = Sides(cfg, kv_len)
        s.reset_caches()
        a = torch.stack([s.torch_decode(i).cpu() for i in range(6)])
        b = torch.from_numpy(np.stack([np.asarray(s.jax_decode(i)) for i in range(6)]))
        diff, scale = (a - b).abs().max().item(), a.abs().max().item()
        w, _ = _time(s.jax_decode, _jsync, 5)
        iters = max(10, min(400, int(budget_s / max(w, 1e-5))))
        ratios, waited, per = [], [], []
        for _ in range(runs):
            r = measure(s, iters, repeats, which=("decode",))["decode"]
            ratios.append(r["torch"] / r["jax"])
            waited.append(r["torch_latency"] / r["jax_latency"])
            per.append((r["torch"], r["jax"], r["torch_latency"], r["jax_latency"]))
        host = dispatch_split(s)
        print(f"# {name}: {cfg} kv {kv_len}: logits max |diff| {diff:.3g} (up to {scale:.3g}); iters {iters}; "
              f"ratios {', '.join(f'{x:.2f}' for x in ratios)}; waited {', '.join(f'{x:.2f}' for x in waited)}; "
              f"host us per call (waited): torch before graph {host[0]:.0f} + graph call {host[1]:.0f} + after "
              f"{host[2]:.0f}, jax {host[3]:.0f}", flush=True)
        rows.append((name, cfg, kv_len, diff, per, ratios, waited, host))
        del s
    print()
    print("| shape | hidden / heads / kv heads / head dim / MLP | KV | vocab, lm_head | tpu ms (median run) | jax ms | "
          "ratio, runs | worst | waited: tpu / jax ms (median run) | waited ratio, runs | host us per call: tpu Dynamo "
          "+ graph call + after / jax | logits max \\|diff\\| |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, cfg, kv_len, diff, per, ratios, waited, host in rows:
        mid = sorted(range(len(ratios)), key=lambda i: ratios[i])[len(ratios) // 2]
        print(f"| {name} | {cfg.hidden} / {cfg.heads} / {cfg.kv_heads} / {cfg.head_dim} / {cfg.mlp} {cfg.intermediate}"
              f"{'' if cfg.qk_norm else ', no qk-norm'} | {kv_len} | {cfg.vocab}, "
              f"{'tied' if cfg.tie_embeddings else 'untied'} | {per[mid][0] * 1e3:.3f} | {per[mid][1] * 1e3:.3f} | "
              f"{', '.join(f'{x:.2f}' for x in ratios)} | {max(ratios):.2f}x | "
              f"{per[mid][2] * 1e3:.3f} / {per[mid][3] * 1e3:.3f} | {', '.join(f'{x:.2f}' for x in waited)} | "
              f"{host[0]:.0f} + {host[1]:.0f} + {host[2]:.0f} / {host[3]:.0f} | {diff:.2g} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--sweep", nargs="*", default=None, metavar="SHAPE",
                    help=f"decode only, over decoder shapes (all when none named): {', '.join(SHAPES)}")
    ap.add_argument("--sample-seconds", type=float, default=0.2, help="--sweep: seconds per timed sample and side")
    args = ap.parse_args()
    if args.sweep is not None:
        bad = [n for n in args.sweep if n not in SHAPES]
        if bad:
            ap.error(f"unknown shape(s) {bad}; known: {', '.join(SHAPES)}")
        print(f"# cpus {os.cpu_count()}, load average {os.getloadavg()}, jax {jax.__version__}, "
              f"torch {torch.__version__}")
        sweep(args.sweep or list(SHAPES), args.runs, args.repeats, args.sample_seconds)
        return
    print(f"# cpus {os.cpu_count()}, load average {os.getloadavg()}, jax {jax.__version__}, torch {torch.__version__}")
    s = Sides()
    d_dec, d_pre, scale = s.compare()
    print(f"# logits, torch compiled vs jax.jit: decode (6 steps) max |diff| {d_dec:.3g}, prefill max |diff| "
          f"{d_pre:.3g} (logits up to {scale:.3g})")
    rows = []
    for run in range(args.runs):
        la = os.getloadavg()[0]
        r = measure(s, args.iters, args.repeats)
        rows.append((run + 1, la, os.getloadavg()[0], r))
        for k, v in r.items():
            print(f"# run {run + 1} {k}: torch {v['torch'] * 1e3:.3f} ms, jax {v['jax'] * 1e3:.3f} ms, "
                  f"ratio {v['torch'] / v['jax']:.2f}x; waited per step: torch {v['torch_latency'] * 1e3:.3f} ms, "
                  f"jax {v['jax_latency'] * 1e3:.3f} ms ({v['torch_latency'] / v['jax_latency']:.2f}x); CPU time per step: "
                  f"torch {v['torch_cpu'] * 1e3:.3f} ms, jax {v['jax_cpu'] * 1e3:.3f} ms "
                  f"({v['torch_cpu'] / v['jax_cpu']:.2f}x)", flush=True)
    print()
    print("| run (load average) | decode tpu compiled (ms) | decode jax.jit (ms) | decode ratio | decode waited ratio "
          "| prefill tpu compiled (ms) | prefill jax.jit (ms) | prefill ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for run, la0, la1, r in rows:
        d, p = r["decode"], r["prefill"]
        print(f"| {run} ({la0:.1f} -> {la1:.1f}) | {d['torch'] * 1e3:.3f} | {d['jax'] * 1e3:.3f} | "
              f"{d['torch'] / d['jax']:.2f}x | {d['torch_latency'] / d['jax_latency']:.2f}x | "
              f"{p['torch'] * 1e3:.2f} | {p['jax'] * 1e3:.2f} | {p['torch'] / p['jax']:.2f}x |")
    stages = decode_stages(s, 200)
    print("\ncompiled decode call, steady state (us): " + ", ".join(f"{k} {v:.1f}" for k, v in stages.items()))
    st = torch_tpu.compile_stats()
    print(f"\ntpu compile stats: compiles={st['compiles']} disk_hits={st['disk_hits']} runs={st['runs']} "
          f"fast_calls={st.get('fast_calls')} donated={st.get('donated')} packed_weights={st['packed_weights']}")


if __name__ == "__main__":
    main()
