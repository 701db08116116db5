"""Diffusers on tpu, checked against the CPU run of the same weights.

Two tiny pipelines built from configs with random weights (no hub access): an SD3-style one
(``SD3Transformer2DModel``, flow-matching Euler scheduler, two CLIP text encoders with projection and a T5 encoder,
a tiny VAE) and a UNet-based Stable Diffusion one (``UNet2DConditionModel``, DDIM, one CLIP text encoder, a tiny
VAE). Tokenizers are CLIP BPE tokenizers written from a 54-entry vocabulary. Images are 16x16 (latents 4x8x8), two
inference steps, classifier-free guidance on (batch 2 in the denoiser).

Covered: ``pipe.to("tpu")``; only the denoiser on tpu while the text encoders stay on the CPU (prompts encoded on
the CPU and passed as embeddings); ``pipe.transformer.compile(backend="tpu", dynamic=False)`` with a second call at
the same size compiling nothing and a new size compiling once; ``torch.tpu.empty_cache()`` / ``synchronize()`` as
Diffusers calls them. The CPU reference uses the same CPU generator, so latents and images must agree.
"""

from __future__ import annotations


import pytest
import torch

import torch_tpu
from torch_tpu.testing.hf import char_clip_tokenizer

import diffusers  # noqa: E402,F401  (installed by scripts/setup.sh: a missing package fails, never skips)
import transformers  # noqa: E402,F401

from diffusers import (  # noqa: E402
    AutoencoderKL,
    DDIMScheduler,
    FlowMatchEulerDiscreteScheduler,
    SD3Transformer2DModel,
    StableDiffusion3Pipeline,
    StableDiffusionPipeline,
    UNet2DConditionModel,
)
from transformers import (  # noqa: E402
    CLIPTextConfig,
    CLIPTextModel,
    CLIPTextModelWithProjection,
    T5Config,
    T5EncoderModel,
)

LATENT_ATOL = 1e-4
IMAGE_ATOL = 1e-4  # images are float arrays in [0, 1]
SIZE = 16
PROMPT = "a cat"


def _clip_config(**kw):
    return CLIPTextConfig(bos_token_id=0, eos_token_id=1, pad_token_id=1, vocab_size=60, hidden_size=32,
                          intermediate_size=37, num_attention_heads=4, num_hidden_layers=1, max_position_embeddings=16,
                          layer_norm_eps=1e-5, hidden_act="gelu", **kw)


def sd3_pipeline(d):
    torch.manual_seed(0)
    transformer = SD3Transformer2DModel(sample_size=8, patch_size=1, in_channels=4, num_layers=1, attention_head_dim=8,
                                        num_attention_heads=4, caption_projection_dim=32, joint_attention_dim=32,
                                        pooled_projection_dim=64, out_channels=4)
    te1 = CLIPTextModelWithProjection(_clip_config(projection_dim=32))
    te2 = CLIPTextModelWithProjection(_clip_config(projection_dim=32))
    te3 = T5EncoderModel(T5Config(vocab_size=60, d_model=32, d_kv=8, d_ff=37, num_layers=1, num_heads=4,
                                  relative_attention_num_buckets=8, decoder_start_token_id=0))
    vae = AutoencoderKL(sample_size=SIZE, in_channels=3, out_channels=3, block_out_channels=(4, 8), layers_per_block=1,
                        latent_channels=4, down_block_types=("DownEncoderBlock2D",) * 2,
                        up_block_types=("UpDecoderBlock2D",) * 2, norm_num_groups=1, use_quant_conv=False,
                        use_post_quant_conv=False, shift_factor=0.0609, scaling_factor=1.5035)
    tok = char_clip_tokenizer(d)
    return StableDiffusion3Pipeline(transformer=transformer, text_encoder=te1, text_encoder_2=te2, text_encoder_3=te3,
                                    tokenizer=tok, tokenizer_2=tok, tokenizer_3=tok, vae=vae,
                                    scheduler=FlowMatchEulerDiscreteScheduler())


def sd_pipeline(d):
    torch.manual_seed(0)
    unet = UNet2DConditionModel(block_out_channels=(8, 16), layers_per_block=1, sample_size=8, in_channels=4,
                                out_channels=4, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
                                norm_num_groups=4, attention_head_dim=4)
    vae = AutoencoderKL(block_out_channels=(4, 8), in_channels=3, out_channels=3,
                        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                        latent_channels=4, norm_num_groups=2, sample_size=SIZE)
    scheduler = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
                              set_alpha_to_one=False, steps_offset=1)
    return StableDiffusionPipeline(unet=unet, vae=vae, text_encoder=CLIPTextModel(_clip_config()),
                                   tokenizer=char_clip_tokenizer(d), scheduler=scheduler, safety_checker=None,
                                   feature_extractor=None, requires_safety_checker=False)


PIPELINES = {"sd3": (sd3_pipeline, StableDiffusion3Pipeline), "sd-unet": (sd_pipeline, StableDiffusionPipeline)}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """name -> (pipeline class, directory of the saved pipeline)."""
    out = {}
    for name, (make, cls) in PIPELINES.items():
        d = tmp_path_factory.mktemp(name)
        make(str(d)).save_pretrained(d)
        out[name] = (cls, str(d))
    return out


_cpu_cache = {}


def cpu_reference(saved, name, output_type, height=SIZE, width=SIZE):
    key = (name, output_type, height, width)
    if key not in _cpu_cache:
        cls, d = saved[name]
        pipe = cls.from_pretrained(d)
        _cpu_cache[key] = _run(pipe, output_type, height, width)
    return _cpu_cache[key]


def _run(pipe, output_type, height=SIZE, width=SIZE, **kw):
    if "prompt_embeds" not in kw:
        kw["prompt"] = PROMPT
    out = pipe(num_inference_steps=2, height=height, width=width, output_type=output_type,
               generator=torch.Generator().manual_seed(0), **kw).images
    return out.cpu() if isinstance(out, torch.Tensor) else torch.from_numpy(out)


@pytest.mark.parametrize("name", list(PIPELINES))
def test_pipeline_to_tpu_matches_cpu(saved, name):
    cls, d = saved[name]
    pipe = cls.from_pretrained(d).to("tpu")
    assert pipe.device.type == "tpu"
    torch_tpu.reset_fallback_counts()
    latents = _run(pipe, "latent")
    images = _run(pipe, "np")
    assert torch_tpu._C._fallback_counts() == {}
    assert latents.shape == (1, 4, SIZE // 2, SIZE // 2) and images.shape == (1, SIZE, SIZE, 3)
    torch.testing.assert_close(latents, cpu_reference(saved, name, "latent"), atol=LATENT_ATOL, rtol=0)
    torch.testing.assert_close(images, cpu_reference(saved, name, "np"), atol=IMAGE_ATOL, rtol=0)


@pytest.mark.parametrize("name", list(PIPELINES))
def test_only_denoiser_on_tpu(saved, name):
    """Text encoders (and VAE) stay on the CPU; only the transformer / UNet moves to tpu. Prompts are encoded on
    the CPU and passed as embeddings (calling the split pipeline with a text prompt would feed tpu token ids to
    the CPU text encoders: Diffusers encodes on ``_execution_device``, which is the tpu one)."""
    cls, d = saved[name]
    pipe = cls.from_pretrained(d)
    denoiser = pipe.transformer if name == "sd3" else pipe.unet
    denoiser.to("tpu")
    assert pipe.text_encoder.device.type == "cpu" and pipe.device.type == "tpu"
    torch_tpu.reset_fallback_counts()
    if name == "sd3":
        pe, npe, ppe, nppe = pipe.encode_prompt(prompt=PROMPT, prompt_2=None, prompt_3=None, device="cpu",
                                                do_classifier_free_guidance=True)
        kw = dict(prompt_embeds=pe, negative_prompt_embeds=npe, pooled_prompt_embeds=ppe,
                  negative_pooled_prompt_embeds=nppe)
    else:
        pe, npe = pipe.encode_prompt(PROMPT, device="cpu", num_images_per_prompt=1, do_classifier_free_guidance=True)
        kw = dict(prompt_embeds=pe, negative_prompt_embeds=npe)
    assert pe.device.type == "cpu"
    latents = _run(pipe, "latent", **{k: v.to("tpu") for k, v in kw.items()})
    assert torch_tpu._C._fallback_counts() == {}
    torch.testing.assert_close(latents, cpu_reference(saved, name, "latent"), atol=LATENT_ATOL, rtol=0)
    # Decode on the CPU VAE, as a split pipeline would.
    ref_images = cpu_reference(saved, name, "np")
    vae = pipe.vae
    lat = latents / vae.config.scaling_factor + (vae.config.shift_factor or 0.0)
    with torch.no_grad():
        images = pipe.image_processor.postprocess(vae.decode(lat).sample, output_type="np")
    torch.testing.assert_close(torch.from_numpy(images), ref_images, atol=IMAGE_ATOL, rtol=0)


def _counts():
    s = torch_tpu._dynamo_backend.compile_stats()
    return {k: s[k] for k in ("graphs", "compiles", "lowerings", "runs", "fallback_nodes", "eager_graphs",
                              "partitioned_graphs")}


@pytest.mark.parametrize("fullgraph", [True, False], ids=["fullgraph", "partitioned"])
def test_sd3_transformer_compiled(saved, fresh_dynamo, fullgraph):
    cls, d = saved["sd3"]
    pipe = cls.from_pretrained(d).to("tpu")
    pipe.transformer.compile(backend="tpu", fullgraph=fullgraph, dynamic=False)
    torch_tpu.reset_fallback_counts()
    torch_tpu._dynamo_backend.reset_compile_stats()
    latents = _run(pipe, "latent")
    first = _counts()
    torch.testing.assert_close(latents, cpu_reference(saved, "sd3", "latent"), atol=LATENT_ATOL, rtol=0)
    assert first["graphs"] >= 1 and first["runs"] == 2 and first["eager_graphs"] == 0, first
    if fullgraph:
        assert first["fallback_nodes"] == 0 and first["partitioned_graphs"] == 0, first
    # Same size again: nothing new is traced or compiled.
    torch_tpu._dynamo_backend.reset_compile_stats()
    torch.testing.assert_close(_run(pipe, "latent"), latents, atol=0, rtol=0)
    again = _counts()
    assert again["graphs"] == 0 and again["compiles"] == 0 and again["runs"] == 2, again
    # A new size builds a new program once (one more dynamo graph; the executable may come from the in-process or
    # disk cache when an earlier test compiled the same program), then is cached as well.
    torch_tpu._dynamo_backend.reset_compile_stats()
    new = _run(pipe, "latent", height=2 * SIZE, width=SIZE)
    grown = _counts()
    assert grown["graphs"] == first["graphs"] and grown["lowerings"] >= 1, grown
    torch.testing.assert_close(new, cpu_reference(saved, "sd3", "latent", 2 * SIZE, SIZE), atol=LATENT_ATOL, rtol=0)
    torch_tpu._dynamo_backend.reset_compile_stats()
    _run(pipe, "latent", height=2 * SIZE, width=SIZE)
    assert _counts()["graphs"] == 0 and _counts()["compiles"] == 0
    assert torch_tpu._C._fallback_counts() == {}


def test_empty_cache_and_synchronize_as_diffusers_calls_them(saved):
    from diffusers.utils import torch_utils

    assert torch_utils.get_device() == "tpu"  # torch.accelerator reports tpu
    cls, d = saved["sd-unet"]
    pipe = cls.from_pretrained(d).to("tpu")
    _run(pipe, "latent")
    torch_utils.backend_synchronize("tpu")
    torch_utils.empty_device_cache()  # detects the device through torch.accelerator
    torch_utils.empty_device_cache("tpu")
    backend = torch_utils.TorchDeviceBackend("tpu")
    backend.synchronize()
    backend.empty_cache()
    backend.manual_seed(0)
    assert backend.device_count() >= 1
    assert backend.max_memory_allocated() >= backend.memory_allocated() > 0
    backend.reset_peak_memory_stats()
    torch.tpu.synchronize()
    torch.tpu.empty_cache()
    assert torch.tpu.memory_reserved() >= torch.tpu.memory_allocated()
