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
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--moe-intermediate", type=int, default=64)
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = ap.parse_args()

    warnings.filterwarnings("ignore")
    from transformers import AutoModelForCausalLM, Qwen3MoeConfig, StaticCache
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
    torch._dynamo.config.cache_size_limit = 64

    head_dim = 32
    heads = max(1, args.hidden // head_dim)
    cfg = Qwen3MoeConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=4 * args.hidden,
                         moe_intermediate_size=args.moe_intermediate, num_experts=args.experts,
                         num_experts_per_tok=args.top_k, norm_topk_prob=True, decoder_sparse_step=1,
                         num_hidden_layers=args.layers, num_attention_heads=heads,
                         num_key_value_heads=max(1, heads // 2), head_dim=head_dim,
                         max_position_embeddings=args.prompt + args.warmup + args.repeats + 8)
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
        model = AutoModelForCausalLM.from_config(cfg)
        with torch.no_grad():  # routers start at zero (all experts tie): give them random weights
            for n, p in model.named_parameters():
                if p.dim() >= 2 and p.abs().sum() == 0:
                    p.normal_(0, 0.5)
        model.save_pretrained(d)
        del model
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


if __name__ == "__main__":
    main()
