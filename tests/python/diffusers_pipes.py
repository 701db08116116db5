"""Tiny Diffusers pipelines built from configs (random weights, no hub), shared by the pipeline tests and the
diffusion benchmark.

* ``flux``: Flux text-to-image (``FluxTransformer2DModel``, which ships a ``_tp_plan``; CLIP + T5 text encoders,
  AutoencoderKL, flow-matching Euler).
* ``qwenimage``: QwenImage text-to-image (``QwenImageTransformer2DModel``, ``_tp_plan``, complex rotary
  embeddings; ``AutoencoderKLQwenImage``). Its text encoder is a Qwen2.5-VL model with a hub tokenizer and chat
  template, so the pipeline is saved without it and called with prompt embeddings.
* ``wan``: Wan text-to-video (``WanTransformer3DModel``, UMT5 text encoder, ``AutoencoderKLWan``).

``save(name, d)`` writes the pipeline to ``d`` (``save_pretrained``); ``load(name, d)`` reads it back
(``from_pretrained``), optionally with a tensor-parallel ``parallel_config`` for the transformer; ``call_kwargs``
are the fixed arguments of one call (2 steps, fixed CPU generator, latents out).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict

import torch

from torch_tpu.testing.hf import char_clip_tokenizer

NAMES = ("flux", "qwenimage", "wan")
PROMPT = "a cat"


def _clip(**kw):
    from transformers import CLIPTextConfig, CLIPTextModel

    return CLIPTextModel(CLIPTextConfig(bos_token_id=0, eos_token_id=1, pad_token_id=1, vocab_size=60, hidden_size=32,
                                        intermediate_size=37, num_attention_heads=4, num_hidden_layers=1,
                                        max_position_embeddings=16, layer_norm_eps=1e-5, hidden_act="gelu",
                                        projection_dim=32, **kw)).eval()


def _t5(d_model=32, umt5=False):
    from transformers import T5Config, T5EncoderModel, UMT5Config, UMT5EncoderModel

    if umt5:
        return UMT5EncoderModel(UMT5Config(vocab_size=60, d_model=d_model, d_kv=8, d_ff=37, num_layers=1, num_heads=4,
                                           relative_attention_num_buckets=8, decoder_start_token_id=0)).eval()
    return T5EncoderModel(T5Config(vocab_size=60, d_model=d_model, d_kv=8, d_ff=37, num_layers=1, num_heads=4,
                                   relative_attention_num_buckets=8, decoder_start_token_id=0)).eval()


def flux_transformer(heads: int = 4):
    from diffusers import FluxTransformer2DModel

    return FluxTransformer2DModel(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=8,
                                  num_attention_heads=heads, joint_attention_dim=32, pooled_projection_dim=32,
                                  axes_dims_rope=[2, 2, 4])


def qwenimage_transformer(heads: int = 4):
    from diffusers import QwenImageTransformer2DModel

    return QwenImageTransformer2DModel(patch_size=2, in_channels=16, out_channels=4, num_layers=1,
                                       attention_head_dim=16, num_attention_heads=heads, joint_attention_dim=16,
                                       guidance_embeds=False, axes_dims_rope=(8, 4, 4))


def _flux(d):
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxPipeline

    torch.manual_seed(0)
    transformer = flux_transformer()
    vae = AutoencoderKL(sample_size=16, in_channels=3, out_channels=3, block_out_channels=(4,), layers_per_block=1,
                        latent_channels=1, norm_num_groups=1, use_quant_conv=False, use_post_quant_conv=False,
                        shift_factor=0.0609, scaling_factor=1.5035)
    tok = char_clip_tokenizer(d)
    return FluxPipeline(scheduler=FlowMatchEulerDiscreteScheduler(), text_encoder=_clip(), text_encoder_2=_t5(),
                        tokenizer=tok, tokenizer_2=tok, transformer=transformer, vae=vae)


def _qwenimage(d):
    from diffusers import AutoencoderKLQwenImage, FlowMatchEulerDiscreteScheduler, QwenImagePipeline

    torch.manual_seed(0)
    transformer = qwenimage_transformer()
    vae = AutoencoderKLQwenImage(base_dim=24, z_dim=4, dim_mult=[1, 2, 4], num_res_blocks=1,
                                 temperal_downsample=[False, True], latents_mean=[0.0] * 4, latents_std=[1.0] * 4)
    return QwenImagePipeline(transformer=transformer, vae=vae, scheduler=FlowMatchEulerDiscreteScheduler(),
                             text_encoder=None, tokenizer=None)


def _wan(d):
    from diffusers import AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, WanPipeline, WanTransformer3DModel

    torch.manual_seed(0)
    vae = AutoencoderKLWan(base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                           temperal_downsample=[False, True, True])
    transformer = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12,
                                        in_channels=16, out_channels=16, text_dim=32, freq_dim=256, ffn_dim=32,
                                        num_layers=1, cross_attn_norm=True, qk_norm="rms_norm_across_heads",
                                        rope_max_seq_len=32)
    return WanPipeline(transformer=transformer, vae=vae, scheduler=FlowMatchEulerDiscreteScheduler(shift=7.0),
                       text_encoder=_t5(umt5=True), tokenizer=char_clip_tokenizer(d))


_BUILD = {"flux": _flux, "qwenimage": _qwenimage, "wan": _wan}


def save(name: str, d: str) -> None:
    """Builds pipeline ``name`` (seeded; the global RNG state is restored) and saves it to directory ``d``."""
    state = torch.random.get_rng_state()
    try:
        _BUILD[name](d).save_pretrained(d)
    finally:
        torch.random.set_rng_state(state)


def load(name: str, d: str, parallel_config=None):
    """``from_pretrained`` of the saved pipeline; with ``parallel_config``, the transformer is loaded sharded
    (``from_pretrained(..., parallel_config=...)``) and passed to the pipeline."""
    import diffusers

    cls = {"flux": diffusers.FluxPipeline, "qwenimage": diffusers.QwenImagePipeline, "wan": diffusers.WanPipeline}[name]
    kw: Dict[str, Any] = {}
    if name == "qwenimage":
        kw.update(text_encoder=None, tokenizer=None)
    if parallel_config is not None:
        tcls = {"flux": diffusers.FluxTransformer2DModel, "qwenimage": diffusers.QwenImageTransformer2DModel,
                "wan": diffusers.WanTransformer3DModel}[name]
        kw["transformer"] = tcls.from_pretrained(os.path.join(d, "transformer"), parallel_config=parallel_config)
    return cls.from_pretrained(d, **kw)


def call_kwargs(name: str) -> Dict[str, Any]:
    """Arguments of one fixed call: 2 steps, a seeded CPU generator, latents out."""
    kw: Dict[str, Any] = dict(num_inference_steps=2, generator=torch.Generator().manual_seed(0), output_type="latent")
    if name == "flux":
        kw.update(prompt=PROMPT, height=16, width=16, max_sequence_length=16, guidance_scale=3.5)
    elif name == "qwenimage":
        g = torch.Generator().manual_seed(1)
        kw.update(prompt_embeds=torch.randn(1, 8, 16, generator=g), prompt_embeds_mask=torch.ones(1, 8, dtype=torch.long),
                  height=32, width=32, true_cfg_scale=1.0)
    else:
        kw.update(prompt=PROMPT, negative_prompt="a dog", height=16, width=16, num_frames=5, max_sequence_length=16,
                  guidance_scale=6.0)
    return kw


def run(pipe, name: str, device=None, **extra) -> torch.Tensor:
    """One call of the pipeline with ``call_kwargs`` (tensors moved to ``device``); the latents on the CPU."""
    kw = call_kwargs(name)
    if device is not None:
        kw = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    kw.update(extra)
    out = pipe(**kw)
    out = out.frames if hasattr(out, "frames") else out.images
    return out.detach().cpu()


def tp_transformer(name: str, heads: int = 4):
    """A tiny transformer (``heads`` attention heads) and CPU inputs for one forward. Not seeded: the caller seeds.
    With a ``_tp_plan``: ``flux``, ``flux2``, ``qwenimage``, ``qwenimage21``; with a ``_cp_plan`` only: ``wan``."""
    g = torch.Generator().manual_seed(1)
    if name == "flux":
        m = flux_transformer(heads)
        x = dict(hidden_states=torch.randn(1, 16, 4, generator=g), encoder_hidden_states=torch.randn(1, 8, 32, generator=g),
                 pooled_projections=torch.randn(1, 32, generator=g), timestep=torch.tensor([1.0]),
                 img_ids=torch.zeros(16, 3), txt_ids=torch.zeros(8, 3))
    elif name == "flux2":
        from diffusers import Flux2Transformer2DModel

        m = Flux2Transformer2DModel(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
                                    attention_head_dim=16, num_attention_heads=heads, joint_attention_dim=32,
                                    timestep_guidance_channels=256, axes_dims_rope=[4, 4, 4, 4])
        img = torch.cartesian_prod(torch.arange(1), torch.arange(4), torch.arange(4), torch.arange(1))[None]
        txt = torch.cartesian_prod(torch.arange(1), torch.arange(1), torch.arange(1), torch.arange(8))[None]
        x = dict(hidden_states=torch.randn(1, 16, 4, generator=g), encoder_hidden_states=torch.randn(1, 8, 32, generator=g),
                 img_ids=img, txt_ids=txt, timestep=torch.tensor([1.0]), guidance=torch.tensor([1.0]))
    elif name == "qwenimage21":
        from diffusers import QwenImage21Transformer2DModel

        m = QwenImage21Transformer2DModel(patch_size=1, in_channels=8, out_channels=8, num_layers=1,
                                          attention_head_dim=16, num_attention_heads=heads, context_in_dim=24,
                                          mlp_ratio=2, axes_dims_rope=(4, 6, 6))
        # 6 text tokens, then 4 image slots of the vision-language sequence standing for the 4x4 target latents.
        x = dict(hidden_states=torch.randn(1, 16, 8, generator=g), encoder_hidden_states=torch.randn(1, 6, 24, generator=g),
                 timestep=torch.tensor([0.5]), img_shapes=[[(1, 4, 4)]],
                 img_mask=torch.cat([torch.zeros(1, 6, dtype=torch.bool), torch.ones(1, 4, dtype=torch.bool)], dim=1))
    elif name == "wan":
        from diffusers import WanTransformer3DModel

        m = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=heads, attention_head_dim=12,
                                  in_channels=16, out_channels=16, text_dim=32, freq_dim=256, ffn_dim=32, num_layers=1,
                                  cross_attn_norm=True, qk_norm="rms_norm_across_heads", rope_max_seq_len=32)
        x = dict(hidden_states=torch.randn(1, 16, 2, 4, 4, generator=g), timestep=torch.tensor([500]),
                 encoder_hidden_states=torch.randn(1, 8, 32, generator=g))
    else:
        m = qwenimage_transformer(heads)
        x = dict(hidden_states=torch.randn(1, 16, 16, generator=g), encoder_hidden_states=torch.randn(1, 8, 16, generator=g),
                 encoder_hidden_states_mask=torch.ones(1, 8, dtype=torch.long), timestep=torch.tensor([1.0]),
                 img_shapes=[(1, 4, 4)])
    return m.eval(), x


def _tp_spec(name: str):
    """``(model_class, init_dict, cpu_inputs)`` as Diffusers' tensor-parallel test workers take them
    (``tests/models/transformers/_tpu_tp_worker.py SPEC``): one attention head per rank (``$WORLD_SIZE``)."""
    torch.manual_seed(0)
    model, inputs = tp_transformer(name, heads=int(os.environ.get("WORLD_SIZE", "2")))
    return type(model), {k: v for k, v in model.config.items() if not k.startswith("_")}, inputs


def tp_spec_flux():
    return _tp_spec("flux")


def tp_spec_flux2():
    return _tp_spec("flux2")


def tp_spec_qwenimage():
    return _tp_spec("qwenimage")


def tp_spec_qwenimage21():
    return _tp_spec("qwenimage21")


if __name__ == "__main__":  # python tests/python/diffusers_pipes.py NAME DIR: save one pipeline
    save(sys.argv[1], sys.argv[2])
