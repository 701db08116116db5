"""Mixture-of-experts decode step on tpu: Transformers' experts implementations, eager and compiled, in one run.

A Qwen3-MoE-style model built from its config (random weights, saved and loaded with from_pretrained; no hub
access): 64 experts, 8 per token, batch 64, a static KV cache. One decode step (batch 64 x 1 token, after a prefill
of --prompt tokens) is timed for each row:

* torch CPU eager with each ``experts_implementation`` ("eager" = the per-expert loop, "batched_mm", "grouped_mm");
* tpu eager with each implementation (the per-expert loop synchronizes with the host once per layer to find the
  experts hit: that is how Transformers writes it);
* tpu compiled (``torch.compile(model.forward, backend="tpu", fullgraph=True)``) with "batched_mm" and "grouped_mm"
  (the per-expert loop has data-dependent shapes and is not compiled).

Every row's logits are compared with the CPU run of the same implementation (float32). Reported: median ms per
step over --repeats steps after --warmup steps, speed-up against tpu eager with the per-expert loop, and the
compiled rows' recompiles after warm-up (dynamo graphs traced + XLA programs built), which must be 0. Exits 1 if a
row does not match the CPU or anything recompiled.

    python benchmarks/moe_decode.py [--hidden 128 --moe-intermediate 64 --layers 2 --repeats 10 --markdown]

``--sweep`` instead times tpu eager's per-expert loop against tpu eager's grouped_mm path over a grid of MoE shapes
(``--sweep-experts`` x ``--sweep-top-k`` x ``--sweep-batch``) on a tiny one-layer model (``--hidden 64
--moe-intermediate 32 --layers 1 --vocab 256`` unless given). At every point the two tpu models run the same decode
steps, alternately (a loop step, then a grouped step, so that load on a shared machine hits both alike); ratio =
median loop step / median grouped step, in the same process. Also per point: the programs each path launches per
step (``torch_tpu.launch_count``), the programs the grouped path built or compiled during the timed steps (its
shapes do not depend on the routing: must be 0), both paths' logits against the torch CPU run, and the experts
module alone (the first layer's, on the last step's hidden states and routing, loop and grouped alternately, each
call waited for: the part of the step the two paths differ in). Prints a table
(Markdown with ``--markdown``) and the worst ratio; exits 1 if a point does not match the CPU or the grouped path
compiled during the timed steps.

    python benchmarks/moe_decode.py --sweep [--sweep-experts 8,16,64,128 --sweep-top-k 1,2,8 \
        --sweep-batch 1,16,64,256 --repeats 5 --markdown] [--sweep-grouped-mode fused]

``--sweep-grouped-mode fused`` runs the grouped path's steps in fused eager mode (each step reads nothing on the host,
so it becomes one fused program; give ``--repeats`` of 20 or more so that the speed check's first launches fall in
the untimed pass); the per-expert loop stays in strict mode (its host reads cut every step into many traces).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
import warnings

import torch

import torch_tpu

IMPLS = ("eager", "batched_mm", "grouped_mm")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hidden", type=int, default=None, help="128 (--sweep: 64)")
    ap.add_argument("--moe-intermediate", type=int, default=None, help="64 (--sweep: 32)")
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--layers", type=int, default=None, help="2 (--sweep: 1)")
    ap.add_argument("--vocab", type=int, default=None, help="1024 (--sweep: 256)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=None, help="10 (--sweep: 5)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--sweep", action="store_true", help="expert loop vs grouped_mm over a grid of MoE shapes")
    ap.add_argument("--sweep-experts", default="8,16,64,128")
    ap.add_argument("--sweep-top-k", default="1,2,8")
    ap.add_argument("--sweep-batch", default="1,16,64,256")
    ap.add_argument("--sweep-grouped-mode", choices=("strict", "fused"), default="strict",
                    help="eager mode of the grouped path's steps in the sweep (fused: each step, which reads nothing "
                         "on the host, becomes one fused program; the loop stays strict)")
    args = ap.parse_args()
    small = dict(hidden=64, moe_intermediate=32, layers=1, vocab=256, repeats=5)
    large = dict(hidden=128, moe_intermediate=64, layers=2, vocab=1024, repeats=10)
    for k, v in (small if args.sweep else large).items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.sweep:
        sweep(args)
        return

    _quiet()
    from transformers import AutoModelForCausalLM, StaticCache

    cfg = _config(args, args.experts, args.top_k)
    torch.manual_seed(0)
    prompt = torch.randint(3, args.vocab, (args.batch, args.prompt))
    step_ids = torch.randint(3, args.vocab, (args.batch, 1))
    # The static cache advances by one position per step (its length counter is a tensor, so compiled steps do not
    # recompile): it holds the prompt and every warm-up and timed step.
    max_len = args.prompt + args.warmup + args.repeats

    def decode_step(model, fwd, cache, i):
        dev = model.device
        pos = torch.tensor([args.prompt + i], device=dev)
        return fwd(input_ids=step_ids.to(dev), past_key_values=cache, cache_position=pos,
                   position_ids=pos.expand(args.batch, 1), use_cache=True).logits

    def prefill(model):
        cache = StaticCache(config=model.config, max_cache_len=max_len)
        dev = model.device
        with torch.no_grad():
            model(input_ids=prompt.to(dev), past_key_values=cache, cache_position=torch.arange(args.prompt, device=dev),
                  use_cache=True)
        return cache

    rows = []
    ok = True
    ref = {}
    with tempfile.TemporaryDirectory() as d:
        _save_random(cfg, d)
        plan = [("cpu", impl, False) for impl in IMPLS] + [("tpu", impl, False) for impl in IMPLS] + \
               [("tpu", impl, True) for impl in ("batched_mm", "grouped_mm")]
        for device, impl, compiled in plan:
            kw = dict(experts_implementation=impl)
            if device == "tpu":
                kw["device_map"] = "tpu"
            model = AutoModelForCausalLM.from_pretrained(d, **kw)
            cache = prefill(model)
            fwd = model.forward
            if compiled:
                torch._dynamo.reset()
                fwd = torch.compile(model.forward, backend="tpu", fullgraph=True)
            torch_tpu._dynamo_backend.reset_compile_stats()
            t0 = time.perf_counter()
            with torch.no_grad():
                for i in range(args.warmup):
                    logits = decode_step(model, fwd, cache, i).cpu()
            warm_s = time.perf_counter() - t0
            torch_tpu._dynamo_backend.reset_compile_stats()
            times = []
            with torch.no_grad():
                for i in range(args.warmup, args.warmup + args.repeats):
                    t0 = time.perf_counter()
                    logits = decode_step(model, fwd, cache, i).cpu()  # .cpu(): the step has finished
                    times.append(time.perf_counter() - t0)
            s = torch_tpu._dynamo_backend.compile_stats()
            recompiles = s["graphs"] + s["compiles"] + s["disk_hits"]
            if device == "cpu":
                ref[impl] = logits
            err = (logits - ref[impl]).abs().max().item()
            match = err <= 1e-3
            ok &= match and (not compiled or recompiles == 0)
            label = f"{'torch CPU' if device == 'cpu' else 'tpu'} {'compiled' if compiled else 'eager'}, {impl}"
            rows.append(dict(label=label, ms=statistics.median(times) * 1e3, warm=warm_s, err=err, match=match,
                             recompiles=recompiles if compiled else "-", impl=impl, device=device, compiled=compiled))
            del model, cache, fwd
            torch._dynamo.reset()

    base = next(r["ms"] for r in rows if r["device"] == "tpu" and not r["compiled"] and r["impl"] == "eager")
    head = ("run", "ms/step", "speed-up vs tpu eager expert loop", "warm-up s", "recompiles after warm-up",
            "max |logits - CPU|")
    print(f"Qwen3-MoE-style: hidden {args.hidden}, moe_intermediate {args.moe_intermediate}, {args.experts} experts, "
          f"top-{args.top_k}, {args.layers} layers, vocab {args.vocab}; one decode step at batch {args.batch} "
          f"(static cache, prompt {args.prompt}); float32; median of {args.repeats} after {args.warmup} warm-up steps; "
          f"plugin {torch_tpu._C._plugin_info()['platform_name']}, torch {torch.__version__}")
    if args.markdown:
        print("| " + " | ".join(h.replace("|", "\\|") for h in head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print(f"| {r['label']} | {r['ms']:.2f} | {base / r['ms']:.1f}x | {r['warm']:.1f} | {r['recompiles']} | "
                  f"{r['err']:.1e} |")
    else:
        for r in rows:
            print(f"{r['label']:36s} {r['ms']:9.2f} ms  x{base / r['ms']:6.1f}  warm-up {r['warm']:6.1f} s  "
                  f"recompiles {r['recompiles']}  err {r['err']:.1e}")
    print(f"fallbacks: {torch_tpu._C._fallback_counts() or 'none'}")
    if not ok:
        raise SystemExit(1)


def _quiet() -> None:
    warnings.filterwarnings("ignore")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
    torch._dynamo.config.cache_size_limit = 64


def _config(args, experts: int, top_k: int):
    from transformers import Qwen3MoeConfig

    head_dim = 32
    heads = max(1, args.hidden // head_dim)
    return Qwen3MoeConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=4 * args.hidden,
                          moe_intermediate_size=args.moe_intermediate, num_experts=experts,
                          num_experts_per_tok=top_k, norm_topk_prob=True, decoder_sparse_step=1,
                          num_hidden_layers=args.layers, num_attention_heads=heads,
                          num_key_value_heads=max(1, heads // 2), head_dim=head_dim,
                          max_position_embeddings=args.prompt + args.warmup + args.repeats + 8)


def _save_random(cfg, d: str) -> None:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():  # routers start at zero (all experts tie): give them random weights
        for n, p in model.named_parameters():
            if p.dim() >= 2 and p.abs().sum() == 0:
                p.normal_(0, 0.5)
    model.save_pretrained(d)


def _ints(text: str) -> list:
    return [int(v) for v in text.split(",") if v.strip()]


def sweep(args) -> None:
    """tpu eager: the per-expert loop against the grouped_mm path over experts x top-k x batch (see the module doc)."""
    _quiet()
    from transformers import AutoModelForCausalLM, StaticCache

    steps = args.repeats
    max_len = args.prompt + steps
    rows = []
    ok = True
    for experts in _ints(args.sweep_experts):
        for top_k in _ints(args.sweep_top_k):
            if top_k > experts:
                continue
            cfg = _config(args, experts, top_k)
            with tempfile.TemporaryDirectory() as d:
                _save_random(cfg, d)
                models = {"cpu": AutoModelForCausalLM.from_pretrained(d, experts_implementation="grouped_mm"),
                          "loop": AutoModelForCausalLM.from_pretrained(d, experts_implementation="eager",
                                                                        device_map="tpu"),
                          "grouped": AutoModelForCausalLM.from_pretrained(d, experts_implementation="grouped_mm",
                                                                           device_map="tpu")}
            hits = []  # distinct experts the CPU model's tokens chose, per MoE layer call (hook on the routed experts)
            for layer in models["cpu"].model.layers:
                layer.mlp.experts.register_forward_pre_hook(
                    lambda mod, a: hits.append(int(torch.unique(a[1]).numel())))
            seen = []  # the inputs of the grouped tpu model's first experts module at the latest step
            models["grouped"].model.layers[0].mlp.experts.register_forward_pre_hook(
                lambda mod, a: seen.__setitem__(slice(None), [a]))
            for batch in _ints(args.sweep_batch):
                gen = torch.Generator().manual_seed(batch)
                prompt = torch.randint(3, args.vocab, (batch, args.prompt), generator=gen)
                ids = torch.randint(3, args.vocab, (steps, batch, 1), generator=gen)  # a new token every step
                caches = {}

                def prefill(names):
                    with torch.no_grad():
                        for name in names:
                            model = models[name]
                            dev = model.device
                            caches[name] = StaticCache(config=model.config, max_cache_len=max_len)
                            model(input_ids=prompt.to(dev), past_key_values=caches[name],
                                  cache_position=torch.arange(args.prompt, device=dev), use_cache=True)

                def step(name, i):
                    model, dev = models[name], models[name].device
                    fused = name == "grouped" and args.sweep_grouped_mode == "fused"
                    if fused:
                        torch_tpu.set_eager_mode("fused")
                    try:
                        pos = torch.tensor([args.prompt + i], device=dev)
                        with torch.no_grad():
                            out = model(input_ids=ids[i].to(dev), past_key_values=caches[name],
                                        cache_position=pos, position_ids=pos.expand(batch, 1), use_cache=True).logits
                        return out.cpu()  # .cpu(): the step has finished
                    finally:
                        if fused:
                            torch_tpu.set_eager_mode("strict")

                def built_by(fn):
                    s0 = torch_tpu.cache_stats()
                    out = fn()
                    s1 = torch_tpu.cache_stats()
                    return out, (s1["misses"] - s0["misses"]) + (s1["compiles"] - s0["compiles"])

                # Pass 1 (warm-up): the steps once, untimed; every program either path needs for these routings is
                # built here (the loop: per expert and per number of tokens it got; grouped_mm: at its first step).
                built = {"loop": 0, "grouped": 0}
                prefill(("loop", "grouped"))
                for i in range(steps):
                    for name in ("loop", "grouped"):
                        _, n = built_by(lambda: step(name, i))
                        if name == "loop" or i > 0:
                            built[name] += n
                    if i == 2:
                        torch_tpu._C._fused_wait()  # fused grouped steps: the program queued at the second step
                # Pass 2: the same steps from a new prefill, timed, loop and grouped alternately, against the CPU.
                prefill(models)
                times = {"loop": [], "grouped": []}
                cpu_times = {"loop": [], "grouped": []}
                launches = {}
                err = {"loop": 0.0, "grouped": 0.0}
                for i in range(steps):
                    hits.clear()
                    ref = step("cpu", i)
                    for name in ("loop", "grouped"):
                        n0 = torch_tpu.launch_count()
                        c0 = time.process_time()
                        t0 = time.perf_counter()
                        logits, n = built_by(lambda: step(name, i))
                        times[name].append(time.perf_counter() - t0)
                        cpu_times[name].append(time.process_time() - c0)
                        launches[name] = torch_tpu.launch_count() - n0
                        if name == "grouped":
                            built[name] += n
                        err[name] = max(err[name], (logits - ref).abs().max().item())
                # The experts module alone (one layer), on the last step's hidden states and routing (whose programs
                # both paths have built): loop and grouped alternately, each call waited for.
                layer_times = {"loop": [], "grouped": []}
                with torch.no_grad():
                    for _ in range(args.repeats):
                        for name in ("loop", "grouped"):
                            mod = models[name].model.layers[0].mlp.experts
                            torch.tpu.synchronize()
                            t0 = time.perf_counter()
                            mod(*seen[0])
                            torch.tpu.synchronize()
                            layer_times[name].append(time.perf_counter() - t0)
                layer_ratio = statistics.median(layer_times["loop"]) / statistics.median(layer_times["grouped"])
                loop_ms = statistics.median(times["loop"]) * 1e3
                grouped_ms = statistics.median(times["grouped"]) * 1e3
                cpu_ratio = statistics.median(cpu_times["loop"]) / statistics.median(cpu_times["grouped"])
                match = max(err.values()) <= 1e-3
                ok &= match and built["grouped"] == 0
                rows.append(dict(experts=experts, top_k=top_k, batch=batch, loop=loop_ms, grouped=grouped_ms,
                                 ratio=loop_ms / grouped_ms, cpu_ratio=cpu_ratio, layer_ratio=layer_ratio,
                                 layer_loop=statistics.median(layer_times["loop"]) * 1e3,
                                 layer_grouped=statistics.median(layer_times["grouped"]) * 1e3,
                                 hit=statistics.mean(hits),
                                 loop_launches=launches["loop"], grouped_launches=launches["grouped"],
                                 built=built["grouped"], loop_built=built["loop"], err=max(err.values()),
                                 match=match))
                r = rows[-1]
                print(f"# experts {experts:4d} top-{top_k} batch {batch:4d} hit {r['hit']:5.1f}: "
                      f"loop {loop_ms:8.2f} ms ({r['loop_launches']} programs), grouped {grouped_ms:7.2f} ms "
                      f"({r['grouped_launches']} programs), ratio {r['ratio']:6.1f}x "
                      f"(CPU time {r['cpu_ratio']:6.1f}x; experts module alone {r['layer_loop']:.2f} / "
                      f"{r['layer_grouped']:.2f} ms = {r['layer_ratio']:.1f}x), "
                      f"built: loop {r['loop_built']} grouped {r['built']}, "
                      f"err {r['err']:.1e}", flush=True)
            del models
    head = ("experts", "top-k", "batch", "experts hit per layer", "expert loop ms/step", "grouped_mm ms/step",
            "ratio", "ratio of CPU time", "experts module alone: loop / grouped ms", "ratio, module alone",
            "programs/step loop", "programs/step grouped",
            "programs built in warm-up: loop", "grouped programs built after its first step", "max |logits - CPU|")
    print(f"Sweep, tpu eager: Qwen3-MoE-style, hidden {args.hidden}, moe_intermediate {args.moe_intermediate}, "
          f"{args.layers} layer(s), vocab {args.vocab}; one decode step (static cache, prompt {args.prompt}); "
          f"float32; median of {args.repeats} alternating steps, replayed after an untimed pass over the same steps; "
          f"grouped steps in {args.sweep_grouped_mode} eager mode; "
          f"plugin {torch_tpu._C._plugin_info()['platform_name']}, torch {torch.__version__}")
    cells = [(r["experts"], r["top_k"], r["batch"], f"{r['hit']:.0f}", f"{r['loop']:.2f}", f"{r['grouped']:.2f}",
              f"{r['ratio']:.1f}x", f"{r['cpu_ratio']:.1f}x", f"{r['layer_loop']:.2f} / {r['layer_grouped']:.2f}",
              f"{r['layer_ratio']:.1f}x", r["loop_launches"], r["grouped_launches"],
              r["loop_built"], r["built"], f"{r['err']:.1e}")
             for r in rows]
    if args.markdown:
        print("| " + " | ".join(h.replace("|", "\\|") for h in head) + " |")
        print("|" + "---|" * len(head))
        for c in cells:
            print("| " + " | ".join(str(v) for v in c) + " |")
    else:
        for c in cells:
            print("  ".join(f"{str(v):>8s}" for v in c))
    worst = min(rows, key=lambda r: r["ratio"])
    print(f"worst ratio: {worst['ratio']:.1f}x (experts {worst['experts']}, top-{worst['top_k']}, "
          f"batch {worst['batch']}); best: {max(r['ratio'] for r in rows):.1f}x; experts module alone: worst "
          f"{min(r['layer_ratio'] for r in rows):.1f}x, best {max(r['layer_ratio'] for r in rows):.1f}x")
    print(f"fallbacks: {torch_tpu._C._fallback_counts() or 'none'}")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
