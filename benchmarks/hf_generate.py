"""Hugging Face generate() throughput on tpu: static cache + compile against torch CPU eager, in one run.

A small Qwen3 built from its config (random weights, saved and loaded with from_pretrained; no hub access).
Rows: torch CPU eager (dynamic cache, the default), tpu eager (static cache, compile disabled) and tpu compiled
(static cache; Transformers auto-compiles decoding with backend "tpu"). Each is warmed up once, then timed over
--repeats generate() calls. Reported: new tokens per second, and for the compiled row the recompiles after warm-up
(dynamo graphs traced + XLA programs built during the timed calls), which must be 0. Exits 1 if tokens differ
from the CPU's (float32, greedy) or anything recompiled after warm-up.

    python benchmarks/hf_generate.py [--hidden 256 --layers 4 --new-tokens 64 --repeats 3 --markdown]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
import warnings

import torch

import torch_tpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = ap.parse_args()

    warnings.filterwarnings("ignore")
    from transformers import AutoModelForCausalLM, Qwen3Config
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)

    heads = max(1, args.hidden // 64)
    cfg = Qwen3Config(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=4 * args.hidden,
                      num_hidden_layers=args.layers, num_attention_heads=heads, num_key_value_heads=max(1, heads // 2),
                      head_dim=64, max_position_embeddings=args.prompt + args.new_tokens + 16)
    torch.manual_seed(0)
    prompt = torch.randint(3, args.vocab, (1, args.prompt))
    gen = dict(max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, do_sample=False)
    rows = []
    ok = True
    with tempfile.TemporaryDirectory() as d:
        AutoModelForCausalLM.from_config(cfg).save_pretrained(d)
        cpu = AutoModelForCausalLM.from_pretrained(d)
        tpu = AutoModelForCausalLM.from_pretrained(d, device_map="tpu")
        want = None
        for label, model, extra in (
            ("torch CPU eager (dynamic cache)", cpu, dict()),
            ("tpu eager (static cache)", tpu, dict(cache_implementation="static", disable_compile=True)),
            ("tpu compiled (static cache, backend tpu)", tpu, dict(cache_implementation="static")),
        ):
            ids = prompt.to(model.device)
            torch_tpu._dynamo_backend.reset_compile_stats()
            t0 = time.perf_counter()
            out = model.generate(ids, **gen, **extra).cpu()  # warm-up (compiles)
            warm_s = time.perf_counter() - t0
            w = torch_tpu._dynamo_backend.compile_stats()
            torch_tpu._dynamo_backend.reset_compile_stats()
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                out = model.generate(ids, **gen, **extra).cpu()
                times.append(time.perf_counter() - t0)
            s = torch_tpu._dynamo_backend.compile_stats()
            recompiles = s["graphs"] + s["compiles"] + s["disk_hits"]
            if want is None:
                want = out
            match = out.tolist() == want.tolist()
            ok &= match and recompiles == 0
            best = min(times)
            rows.append((label, args.new_tokens / best, best * 1e3 / args.new_tokens, warm_s,
                         w["graphs"] if "compiled" in label else "-", recompiles if "compiled" in label else "-",
                         "yes" if match else "NO"))

    head = ("run", "tokens/s", "ms/token", "warm-up s", "graphs at warm-up", "recompiles after warm-up",
            "tokens == CPU")
    print(f"Qwen3 hidden {args.hidden}, {args.layers} layers, vocab {args.vocab}, batch 1, prompt {args.prompt}, "
          f"{args.new_tokens} new tokens, float32, greedy; best of {args.repeats}; "
          f"plugin {torch_tpu._C._plugin_info()['platform_name']}, torch {torch.__version__}")
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print(f"| {r[0]} | {r[1]:.1f} | {r[2]:.2f} | {r[3]:.1f} | {r[4]} | {r[5]} | {r[6]} |")
    else:
        for r in rows:
            print(f"{r[0]:42s} {r[1]:8.1f} tok/s {r[2]:7.2f} ms/tok  warm-up {r[3]:6.1f} s  graphs {r[4]}  "
                  f"recompiles after warm-up {r[5]}  match {r[6]}")
    print(f"fallbacks: {torch_tpu._C._fallback_counts() or 'none'}")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
