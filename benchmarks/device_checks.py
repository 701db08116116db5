"""What the device-side checks (index bounds, integer division by zero) cost: each workload timed with the checks on
and off in the same process, alternating rounds, so both see the same machine.

Workloads:
* decode: the 4-layer Qwen3-style decoder of compile_decoder.py, batch 1, one token against a static KV cache of 256
  (an embedding and 8 index_copy_ per step), tpu eager and tpu compiled; synchronized every step (as generation is);
* generate: Hugging Face generate() of hf_generate.py's Qwen3 (hidden 256, 4 layers, 32 new tokens, static cache),
  tpu eager and tpu compiled;
* index+item: the worst case, one indexing op and one .item() per step (a flag read at every synchronization).

Prints a markdown table: median time per step with the checks on and off, and the overhead. Usage:
    python benchmarks/device_checks.py [--rounds 5] [--only decode,generate,micro]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))

import torch  # noqa: E402

import torch_tpu  # noqa: E402
from models import DecoderConfig, Qwen3Decoder, seeded  # noqa: E402

DECODE = DecoderConfig(vocab=4096, hidden=256, layers=4, heads=4, kv_heads=2, head_dim=64, intermediate=768)


def ab(step, iters: int, rounds: int):
    """Median seconds per step with the checks on and off, alternating rounds of `iters` steps (each warmed up)."""
    times = {True: [], False: []}
    for on in (True, False):  # warm-up: both programs compiled
        torch_tpu.set_device_checks(on)
        for _ in range(3):
            step()
        torch.tpu.synchronize()
    for r in range(rounds):
        for on in ((True, False) if r % 2 == 0 else (False, True)):
            torch_tpu.set_device_checks(on)
            torch.tpu.synchronize()
            t0 = time.perf_counter()
            for _ in range(iters):
                step()
            torch.tpu.synchronize()
            times[on].append((time.perf_counter() - t0) / iters)
    torch_tpu.set_device_checks(True)
    return statistics.median(times[True]), statistics.median(times[False])


def decode_steps(compiled: bool):
    m = seeded(0, Qwen3Decoder, DECODE).to("tpu")
    m.init_kv_cache(1, 256, device="tpu")
    fwd = torch.compile(m, backend="tpu", dynamic=False) if compiled else m
    ids = torch.tensor([[17]], device="tpu")
    positions = [torch.tensor([i], device="tpu") for i in range(200)]
    state = {"i": 0}

    def step():
        with torch.no_grad():
            out = fwd(ids, positions[state["i"] % 200])
        out[0, -1, 0].item()  # one synchronization per token, as generation has
        state["i"] += 1

    return step


def generate_steps(compiled: bool, tmp: str):
    from transformers import AutoModelForCausalLM, Qwen3Config

    cfg = Qwen3Config(vocab_size=4096, hidden_size=256, intermediate_size=1024, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=64)
    path = os.path.join(tmp, "qwen3")
    if not os.path.exists(path):
        torch.manual_seed(0)
        AutoModelForCausalLM.from_config(cfg).save_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, device_map="tpu")
    ids = torch.randint(3, 4096, (1, 16), generator=torch.Generator().manual_seed(0)).to("tpu")
    extra = dict(cache_implementation="static")
    if not compiled:
        extra["disable_compile"] = True

    def step():
        model.generate(ids, max_new_tokens=32, min_new_tokens=32, do_sample=False, **extra).cpu()

    return step


def micro_steps():
    x = torch.arange(4096.0, device="tpu")
    idx = torch.tensor([7, 4000, 12], device="tpu")

    def step():
        x[idx].sum().item()

    return step


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="decode,generate,micro")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
    except ImportError:
        pass
    only = args.only.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = []
        if "decode" in only:
            work += [("decode, tpu eager (per token)", lambda: decode_steps(False), 40),
                     ("decode, tpu compiled (per token)", lambda: decode_steps(True), 40)]
        if "generate" in only:
            work += [("HF generate 32 tokens, tpu eager", lambda: generate_steps(False, tmp), 1),
                     ("HF generate 32 tokens, tpu compiled", lambda: generate_steps(True, tmp), 1)]
        if "micro" in only:
            work += [("x[idx].sum().item() (worst case)", micro_steps, 200)]
        for name, make, iters in work:
            on, off = ab(make(), iters, args.rounds)
            rows.append((name, on, off))
            print(f"# {name}: on {on * 1e3:.3f} ms, off {off * 1e3:.3f} ms", flush=True)
    print(f"\n# load average {os.getloadavg()}, cpus {os.cpu_count()}, median of {args.rounds} alternating rounds")
    print("| workload | checks on (ms) | checks off (ms) | overhead |")
    print("|---|---|---|---|")
    for name, on, off in rows:
        print(f"| {name} | {on * 1e3:.3f} | {off * 1e3:.3f} | {100 * (on / off - 1):+.1f}% |")


if __name__ == "__main__":
    main()
