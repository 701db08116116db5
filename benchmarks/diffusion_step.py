"""Diffusion denoiser step time on tpu: eager against ``pipe.transformer.compile(backend="tpu")``, and torch CPU.

A small SD3-style pipeline from configs with random weights (no hub access). One step = one call of the
transformer with classifier-free guidance (batch 2) plus the scheduler update, timed inside the pipeline with
``callback_on_step_end`` (the device is synchronized at each step; median step of --steps, best of two runs after a
warm-up run; text encoders and VAE are not in the step). Also reports the compiles of a second call at the same size
(must be 0) and latents' max difference from the CPU run.

    python benchmarks/diffusion_step.py [--size 64 --hidden 128 --layers 2 --steps 8 --markdown]

``--tp``: a Flux-style pipeline (``FluxTransformer2DModel``, which ships a ``_tp_plan``) per denoising step, eager
and with the transformer compiled (``fullgraph=True, dynamic=False``), on one rank and tensor-parallel over 2 and 4
ranks (``from_pretrained(..., parallel_config=TensorParallelConfig(mesh=...))``, ranks as threads of this process on
the CPU plugin's virtual chips, XLA transport; rank 0's step reported), each checked against the CPU latents, with
ratios eager/compiled and one rank/N ranks:

    python benchmarks/diffusion_step.py --tp [--ranks 1,2,4 --size 32 --hidden 256 --layers 2 --steps 6 --markdown]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import threading
import time
import warnings

if "--tp" in sys.argv:  # the virtual chips of the CPU plugin, before torch (and torch_tpu) are imported
    os.environ.setdefault("TORCH_TPU_NUM_DEVICES", "4")

import torch

import torch_tpu


def build(d, size, hidden, layers):
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, SD3Transformer2DModel, StableDiffusion3Pipeline
    from transformers import CLIPTextConfig, CLIPTextModelWithProjection, T5Config, T5EncoderModel

    from torch_tpu.testing.hf import char_clip_tokenizer

    tok = char_clip_tokenizer(d)
    clip = dict(bos_token_id=0, eos_token_id=1, pad_token_id=1, vocab_size=60, hidden_size=32, intermediate_size=64,
                num_attention_heads=4, num_hidden_layers=1, max_position_embeddings=16, projection_dim=32)
    heads = max(1, hidden // 32)
    torch.manual_seed(0)
    return StableDiffusion3Pipeline(
        transformer=SD3Transformer2DModel(sample_size=size // 2, patch_size=2, in_channels=4, num_layers=layers,
                                          attention_head_dim=hidden // heads, num_attention_heads=heads,
                                          caption_projection_dim=hidden, joint_attention_dim=32,
                                          pooled_projection_dim=64, out_channels=4),
        text_encoder=CLIPTextModelWithProjection(CLIPTextConfig(**clip)),
        text_encoder_2=CLIPTextModelWithProjection(CLIPTextConfig(**clip)),
        text_encoder_3=T5EncoderModel(T5Config(vocab_size=60, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4,
                                               relative_attention_num_buckets=8)),
        tokenizer=tok, tokenizer_2=tok, tokenizer_3=tok,
        vae=AutoencoderKL(in_channels=3, out_channels=3, block_out_channels=(8, 16), layers_per_block=1,
                          latent_channels=4, down_block_types=("DownEncoderBlock2D",) * 2,
                          up_block_types=("UpDecoderBlock2D",) * 2, norm_num_groups=4, use_quant_conv=False,
                          use_post_quant_conv=False, shift_factor=0.0609, scaling_factor=1.5035),
        scheduler=FlowMatchEulerDiscreteScheduler())


def build_flux(d, hidden, layers, heads):
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    from torch_tpu.testing.hf import char_clip_tokenizer

    tok = char_clip_tokenizer(d)
    torch.manual_seed(0)
    return FluxPipeline(
        transformer=FluxTransformer2DModel(patch_size=1, in_channels=4, num_layers=layers, num_single_layers=layers,
                                           attention_head_dim=hidden // heads, num_attention_heads=heads,
                                           joint_attention_dim=32, pooled_projection_dim=32,
                                           axes_dims_rope=[hidden // heads // 4, hidden // heads // 8 * 3,
                                                           hidden // heads // 8 * 3]),
        text_encoder=CLIPTextModel(CLIPTextConfig(bos_token_id=0, eos_token_id=1, pad_token_id=1, vocab_size=60,
                                                  hidden_size=32, intermediate_size=64, num_attention_heads=4,
                                                  num_hidden_layers=1, max_position_embeddings=16, projection_dim=32)),
        text_encoder_2=T5EncoderModel(T5Config(vocab_size=60, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4,
                                               relative_attention_num_buckets=8)),
        tokenizer=tok, tokenizer_2=tok,
        vae=AutoencoderKL(sample_size=32, in_channels=3, out_channels=3, block_out_channels=(4,), layers_per_block=1,
                          latent_channels=1, norm_num_groups=1, use_quant_conv=False, use_post_quant_conv=False,
                          shift_factor=0.0609, scaling_factor=1.5035),
        scheduler=FlowMatchEulerDiscreteScheduler())


def _step_times(pipe, size, steps, device):
    """Latents and the median step (s) of the best of two runs after a warm-up run."""
    pipe.set_progress_bar_config(disable=True)

    def once():
        marks = []

        def on_step_end(p, i, t, kw):
            torch.tpu.synchronize(device) if device is not None else None
            marks.append(time.perf_counter())
            return {}

        out = pipe("a cat", num_inference_steps=steps, height=size, width=size, output_type="latent",
                   max_sequence_length=16, generator=torch.Generator().manual_seed(0),
                   callback_on_step_end=on_step_end, callback_on_step_end_tensor_inputs=["latents"]).images.cpu()
        return out, sorted(b - a for a, b in zip(marks, marks[1:]))[(len(marks) - 1) // 2]

    once()
    (out, a), (_, b) = once(), once()
    return out, min(a, b)


def tp_main(args) -> None:
    from diffusers import FluxPipeline, FluxTransformer2DModel, TensorParallelConfig
    from torch.distributed.device_mesh import init_device_mesh

    from torch_tpu.distributed import run_ranks_as_threads

    ranks = [int(r) for r in args.ranks.split(",")]
    heads = args.heads
    if any(heads % r for r in ranks) or args.hidden % heads:
        raise SystemExit(f"--heads {heads} must divide --hidden {args.hidden} and be divisible by every rank count {ranks}")
    lock = threading.Lock()
    rows = []
    ok = True
    with tempfile.TemporaryDirectory() as d:
        build_flux(d, args.hidden, args.layers, heads).save_pretrained(d)
        want, cpu_step = _step_times(FluxPipeline.from_pretrained(d), args.size, args.steps, None)

        def job(rank, world, compiled):
            device = torch.device("tpu", rank)
            kw = {}
            mesh = init_device_mesh("tpu", (world,)) if world > 1 else None  # a collective: outside the lock
            # Loading a pipeline touches process-global state (Transformers' model construction): the rank threads
            # load one at a time.
            with lock:
                if mesh is not None:
                    kw["transformer"] = FluxTransformer2DModel.from_pretrained(
                        os.path.join(d, "transformer"), parallel_config=TensorParallelConfig(mesh=mesh))
                pipe = FluxPipeline.from_pretrained(d, **kw)
            pipe = pipe.to(device)
            if compiled:
                pipe.transformer.compile(backend="tpu", fullgraph=True, dynamic=False)
            return _step_times(pipe, args.size, args.steps, device)

        for world in ranks:
            for compiled in (False, True):
                if world == 1:
                    torch.tpu.set_device(0)
                    got, step = job(0, 1, compiled)
                else:
                    got, step = run_ranks_as_threads(job, world, args=(compiled,))[0]
                err = (got - want).abs().max().item()
                ok &= err < 1e-3
                rows.append((world, compiled, step, err))

    by = {(w, c): s for w, c, s, _ in rows}
    print(f"Flux-style transformer: hidden {args.hidden}, {heads} heads, {args.layers} double + {args.layers} single "
          f"blocks, image {args.size}x{args.size} ({(args.size // 2) ** 2} image + 16 text tokens), guidance-distilled "
          f"(batch 1), float32; torch CPU {cpu_step * 1e3:.1f} ms/step; plugin "
          f"{torch_tpu._C._plugin_info()['platform_name']} ({torch.tpu.device_count()} virtual chips), torch "
          f"{torch.__version__}")
    head = ("ranks", "eager ms/step", "compiled ms/step", "eager/compiled", "1 rank/N ranks (compiled)",
            "max |latents - CPU|")
    lines = []
    for w in ranks:
        e, c = by[(w, False)], by[(w, True)]
        err = max(r[3] for r in rows if r[0] == w)
        lines.append((str(w), f"{e * 1e3:.1f}", f"{c * 1e3:.1f}", f"{e / c:.2f}x", f"{by[(ranks[0], True)] / c:.2f}x",
                      f"{err:.1e}"))
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for ln in lines:
            print("| " + " | ".join(ln) + " |")
    else:
        for ln in lines:
            print("  ".join(f"{h}={v}" for h, v in zip(head, ln)))
    if not ok:
        raise SystemExit(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=64, help="image size (latents are size/2)")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--fullgraph", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--tp", action="store_true", help="Flux-style pipeline: eager/compiled on 1 rank and TP ranks")
    ap.add_argument("--ranks", default="1,2,4", help="with --tp: rank counts (threads, one virtual chip each)")
    ap.add_argument("--heads", type=int, default=4, help="with --tp: attention heads of the transformer")
    args = ap.parse_args()

    warnings.filterwarnings("ignore")
    from diffusers import StableDiffusion3Pipeline
    from diffusers.utils import logging as df_logging
    from transformers.utils import logging as hf_logging

    for lg in (df_logging, hf_logging):
        lg.set_verbosity_error()
        lg.disable_progress_bar()
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
    logging.getLogger("torch_tpu").setLevel(logging.ERROR)
    if args.tp:
        return tp_main(args)

    def run(pipe, steps):
        pipe.set_progress_bar_config(disable=True)
        marks = []

        def on_step_end(p, i, t, kw):  # per-step timestamps, the device drained at each mark
            if kw["latents"].device.type == "tpu":
                torch.tpu.synchronize()
            marks.append(time.perf_counter())
            return {}

        t0 = time.perf_counter()
        out = pipe("a cat", num_inference_steps=steps, height=args.size, width=args.size, output_type="latent",
                   generator=torch.Generator().manual_seed(0), callback_on_step_end=on_step_end,
                   callback_on_step_end_tensor_inputs=["latents"]).images.cpu()
        return out, time.perf_counter() - t0, marks

    def step_time(pipe):
        run(pipe, args.steps)  # warm-up
        best = None
        for _ in range(2):
            out, _, marks = run(pipe, args.steps)
            per = sorted(b - a for a, b in zip(marks, marks[1:]))[(len(marks) - 1) // 2]  # median step
            best = per if best is None else min(best, per)
        return out, best

    rows = []
    ok = True
    with tempfile.TemporaryDirectory() as d:
        build(d, args.size, args.hidden, args.layers).save_pretrained(d)
        want, cpu_step = step_time(StableDiffusion3Pipeline.from_pretrained(d))
        rows.append(("torch CPU eager", cpu_step, "-", "-", 0.0))
        pipe = StableDiffusion3Pipeline.from_pretrained(d).to("tpu")
        got, eager_step = step_time(pipe)
        err = (got - want).abs().max().item()
        ok &= err < 1e-3
        rows.append(("tpu eager", eager_step, "-", "-", err))
        pipe.transformer.compile(backend="tpu", fullgraph=args.fullgraph, dynamic=False)
        torch_tpu._dynamo_backend.reset_compile_stats()
        warm = run(pipe, args.steps)[1]
        w = torch_tpu._dynamo_backend.compile_stats()
        torch_tpu._dynamo_backend.reset_compile_stats()
        got, comp_step = step_time(pipe)
        s = torch_tpu._dynamo_backend.compile_stats()
        recompiles = s["graphs"] + s["compiles"] + s["disk_hits"]
        err = (got - want).abs().max().item()
        ok &= err < 1e-3 and recompiles == 0
        rows.append((f"tpu compiled (warm-up {warm:.1f} s, {w['graphs']} graphs)", comp_step, recompiles,
                     w["fallback_nodes"], err))

    print(f"SD3-style transformer: hidden {args.hidden}, {args.layers} layers, patch 2, image {args.size}x{args.size} "
          f"(latents 4x{args.size // 2}x{args.size // 2}), CFG batch 2, float32; "
          f"plugin {torch_tpu._C._plugin_info()['platform_name']}, torch {torch.__version__}")
    head = ("run", "ms/step", "recompiles after warm-up", "ops run eagerly in graphs", "max |latents - CPU|")
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print(f"| {r[0]} | {r[1] * 1e3:.1f} | {r[2]} | {r[3]} | {r[4]:.1e} |")
    else:
        for r in rows:
            print(f"{r[0]:45s} {r[1] * 1e3:8.1f} ms/step  recompiles {r[2]}  eager ops {r[3]}  err {r[4]:.1e}")
    print(f"fallbacks: {torch_tpu._C._fallback_counts() or 'none'}")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
