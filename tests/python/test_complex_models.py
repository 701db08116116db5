"""Every Transformers and Diffusers model that computes with complex numbers (rotary embeddings through
view_as_complex / polar, FFT mixing, STFT front ends, inverse-STFT vocoder heads), with tiny random configs, equal to
CPU on tpu with fallbacks strict (no op may leave the device). QwenImage and Llama 4 are in test_complex.py.

Every model runs eagerly; a compiled (`torch.compile(backend="tpu", fullgraph=True)`) run is added for one model per
kind of complex computation (FFT mixing, rfft/irfft, STFT, inverse STFT with F.fold, complex128 rotary, row-mask
index_put), to keep the file fast. Models that do not compile with fullgraph=True on CPU either (data-dependent
shapes or .item()/.tolist() in their forward) run eagerly only; docs/hf_testing.md lists every model and result."""

import pytest
import torch


DEV = "tpu"


pytestmark = pytest.mark.usefixtures("strict_fallback")


def _to(v, dev):
    if isinstance(v, torch.Tensor):
        return v.to(dev)
    if isinstance(v, (list, tuple)):
        return type(v)(_to(x, dev) for x in v)
    if isinstance(v, dict):
        return {k: _to(x, dev) for k, x in v.items()}
    return v


def _flat(o):
    if isinstance(o, torch.Tensor):
        return [o]
    if hasattr(o, "to_tuple"):
        o = o.to_tuple()
    if isinstance(o, dict):
        o = list(o.values())
    if isinstance(o, (list, tuple)):
        return [t for x in o for t in _flat(x)]
    return []


class _Call(torch.nn.Module):
    """A model's forward (or encode/decode) on fixed inputs, moved to the device the call is made for."""

    def __init__(self, model, fn):
        super().__init__()
        self.model, self.fn = model, fn

    def forward(self, inputs):
        return self.fn(self.model, inputs)


def _check(model, inputs, fn=lambda m, i: m(**i), compiled=False, tol=1e-4):
    wrapped = _Call(model.eval(), fn)
    with torch.no_grad():
        want = _flat(wrapped(inputs))
        assert want and all(w.abs().max() > 0 for w in want if w.numel() and w.is_floating_point())
        wrapped.to(DEV)
        runs = [wrapped]
        if compiled:
            torch._dynamo.reset()
            runs.append(torch.compile(wrapped, backend="tpu", fullgraph=True))
        for run in runs:
            got = _flat(run(_to(inputs, DEV)))
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.device.type == "tpu"
                torch.testing.assert_close(g.cpu(), w, rtol=tol, atol=tol)


def _seeded(seed=0):
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------- Transformers

def test_deepseek_v2():
    from transformers import DeepseekV2Config, DeepseekV2ForCausalLM

    _seeded()
    cfg = DeepseekV2Config(vocab_size=64, hidden_size=32, intermediate_size=32, moe_intermediate_size=8,
                           num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, n_routed_experts=4,
                           n_shared_experts=1, kv_lora_rank=8, q_lora_rank=16, qk_rope_head_dim=8, v_head_dim=8,
                           qk_nope_head_dim=8, num_experts_per_tok=2, first_k_dense_replace=1, n_group=2, topk_group=1,
                           max_position_embeddings=32)
    _check(DeepseekV2ForCausalLM(cfg), {"input_ids": torch.randint(0, 64, (1, 6))}, lambda m, i: m(**i).logits)


def test_fnet_fft_mixing():
    from transformers import FNetConfig, FNetModel

    _seeded()
    cfg = FNetConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, intermediate_size=16,
                     max_position_embeddings=16)
    _check(FNetModel(cfg), {"input_ids": torch.randint(0, 64, (2, 6))}, lambda m, i: m(**i).last_hidden_state,
           compiled=True)


def test_autoformer_autocorrelation():
    from transformers import AutoformerConfig, AutoformerModel

    g = _seeded()
    cfg = AutoformerConfig(prediction_length=4, context_length=8, lags_sequence=[1, 2], d_model=8, encoder_layers=1,
                           decoder_layers=1, encoder_ffn_dim=8, decoder_ffn_dim=8, num_time_features=1, label_length=4,
                           encoder_attention_heads=1, decoder_attention_heads=1)
    n = 8 + 2
    inputs = dict(past_values=torch.randn(2, n, generator=g), past_time_features=torch.randn(2, n, 1, generator=g),
                  past_observed_mask=torch.ones(2, n), future_values=torch.randn(2, 4, generator=g),
                  future_time_features=torch.randn(2, 4, 1, generator=g))
    _check(AutoformerModel(cfg), inputs, lambda m, i: m(**i).last_hidden_state)


def _vocos_config(cls):
    cfg = cls(hidden_size=32, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
              head_dim=16, downsampling_ratios=(2, 2), quantization_dim=24, quantization_levels=(4, 4),
              semantic_model_config={"model_type": "wav2vec2-bert", "hidden_size": 8, "num_hidden_layers": 1,
                                     "num_attention_heads": 2, "intermediate_size": 16, "output_hidden_size": 8})
    cfg._attn_implementation = "sdpa"
    return cfg


@pytest.mark.parametrize("name", ["xcodec2", "neucodec"])
def test_codec_istft_decoder(name):
    # polar -> irfft -> F.fold overlap-add (col2im) -> window envelope: the Vocos inverse-STFT head
    import importlib

    import transformers

    prefix = {"xcodec2": "Xcodec2", "neucodec": "NeuCodec"}[name]
    g = _seeded()
    cfg = _vocos_config(getattr(transformers, prefix + "Config"))
    mod = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
    decoder = getattr(mod, prefix + "Decoder")(cfg)
    _check(decoder, {"x": torch.randn(1, 5, 32 + 8, generator=g)}, lambda m, i: m(i["x"]), compiled=name == "xcodec2")


def test_wavtokenizer_decode():
    from transformers import WavTokenizerConfig, WavTokenizerModel

    _seeded()
    cfg = WavTokenizerConfig(num_filters=4, upsampling_ratios=(2, 2), num_lstm_layers=1, hidden_size=8,
                             codebook_size=16, codebook_dim=8, decoder_hidden_size=16, decoder_intermediate_size=16,
                             decoder_num_layers=1, decoder_attention_num_groups=4)
    codes = torch.randint(0, 16, (1, 1, 5))
    _check(WavTokenizerModel(cfg), {"codes": codes}, lambda m, i: m.decode(i["codes"]).audio_values)


# ---------------------------------------------------------------- Diffusers

def test_qwenimage21_transformer():
    from diffusers.models.transformers.transformer_qwenimage21 import QwenImage21Transformer2DModel

    g = _seeded()
    m = QwenImage21Transformer2DModel(patch_size=1, in_channels=8, out_channels=8, num_layers=1, attention_head_dim=16,
                                      num_attention_heads=2, context_in_dim=8, axes_dims_rope=(8, 4, 4))
    inputs = dict(hidden_states=torch.randn(1, 16, 8, generator=g), encoder_hidden_states=torch.randn(1, 5, 8, generator=g),
                  timestep=torch.tensor([0.5]), img_shapes=[[(1, 4, 4)]], img_mask=torch.tensor([[False] * 5 + [True] * 4]))
    _check(m, inputs, lambda m, i: m(**i).sample)


def _z_image(in_channels=4):
    from diffusers import ZImageTransformer2DModel

    return ZImageTransformer2DModel(all_patch_size=(2,), all_f_patch_size=(1,), in_channels=in_channels, dim=32,
                                    n_layers=1, n_refiner_layers=1, n_heads=2, n_kv_heads=2, cap_feat_dim=16,
                                    axes_dims=[8, 4, 4], axes_lens=[64, 32, 32])


def test_z_image_transformer():
    g = _seeded()
    inputs = dict(x=[torch.randn(4, 1, 4, 4, generator=g)], t=torch.tensor([0.5]),
                  cap_feats=[torch.randn(5, 16, generator=g)])
    _check(_z_image(), inputs, lambda m, i: m(**i).sample)


def test_z_image_controlnet():
    # its pad tokens are written with `x[mask] = pad_token` (index_put with one row for every selected row)
    from diffusers import ZImageControlNetModel

    g = _seeded()
    cn = ZImageControlNetModel(control_layers_places=[0], control_refiner_layers_places=[0], control_in_dim=4, dim=32,
                               n_refiner_layers=1, n_heads=2, n_kv_heads=2)
    cn = ZImageControlNetModel.from_transformer(cn, _z_image())
    with torch.no_grad():
        for p in cn.parameters():
            if not p.abs().max():  # zero-initialized output projections: give them values
                p.normal_(0, 0.2, generator=g)
    inputs = dict(x=[torch.randn(4, 1, 4, 4, generator=g)], t=torch.tensor([0.5]),
                  cap_feats=[torch.randn(5, 16, generator=g)], control_context=[torch.randn(4, 1, 4, 4, generator=g)])
    _check(cn, inputs, lambda m, i: list(m(**i).values()), compiled=True)


def test_bria_transformer():
    from diffusers import BriaTransformer2DModel

    g = _seeded()
    m = BriaTransformer2DModel(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=8,
                               num_attention_heads=2, joint_attention_dim=16, axes_dims_rope=[0, 4, 4])
    inputs = dict(hidden_states=torch.randn(1, 16, 4, generator=g), encoder_hidden_states=torch.randn(1, 5, 16, generator=g),
                  timestep=torch.tensor([1.0]), img_ids=torch.randn(16, 3, generator=g), txt_ids=torch.randn(5, 3, generator=g))
    _check(m, inputs, lambda m, i: m(**i).sample)


def test_bria_fibo2_transformer():
    from diffusers.models.transformers.transformer_bria_fibo2 import BriaFibo2Transformer2DModel

    g = _seeded()
    m = BriaFibo2Transformer2DModel(in_channels=4, patch_size=2, dim=32, n_layers=1, n_refiner_layers=1, n_heads=2,
                                    cap_feat_dim=16, injection_layer_ids=(0,), perceiver_num_layers=1,
                                    min_num_gist_tokens=4, max_num_gist_tokens=8, gist_step=4, gist_min_text_len=4,
                                    gist_max_text_len=16, axes_dims=(8, 4, 4), axes_lens=(32, 16, 16))
    inputs = dict(hidden_states=torch.randn(1, 4, 4, 4, generator=g), timestep=torch.tensor([0.5]),
                  encoder_hidden_states=torch.randn(1, 2, 6, 16, generator=g))
    _check(m, inputs, lambda m, i: m(**i).sample)


def test_nucleusmoe_image_transformer():
    from diffusers.models.transformers.transformer_nucleusmoe_image import NucleusMoEImageTransformer2DModel

    g = _seeded()
    m = NucleusMoEImageTransformer2DModel(patch_size=2, in_channels=16, out_channels=4, num_layers=1,
                                          attention_head_dim=16, num_attention_heads=2, joint_attention_dim=16,
                                          axes_dims_rope=(8, 4, 4), num_experts=4, moe_intermediate_dim=16)
    inputs = dict(hidden_states=torch.randn(1, 16, 16, generator=g), img_shapes=[(1, 4, 4)],
                  encoder_hidden_states=torch.randn(1, 5, 16, generator=g), encoder_hidden_states_mask=torch.ones(1, 5),
                  timestep=torch.tensor([1.0]))
    _check(m, inputs, lambda m, i: m(**i).sample)


def test_anyflow_transformer():
    from diffusers.models.transformers.transformer_anyflow import AnyFlowTransformer3DModel

    g = _seeded()
    m = AnyFlowTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4,
                                  out_channels=4, text_dim=16, freq_dim=16, ffn_dim=16, num_layers=1,
                                  rope_max_seq_len=16)
    inputs = dict(hidden_states=torch.randn(1, 2, 4, 4, 4, generator=g), timestep=torch.tensor([[500.0, 500.0]]),
                  r_timestep=torch.tensor([[400.0, 400.0]]), encoder_hidden_states=torch.randn(1, 5, 16, generator=g))
    _check(m, inputs, lambda m, i: m(**i).sample)


def test_lumina2_transformer():
    from diffusers import Lumina2Transformer2DModel

    g = _seeded()
    m = Lumina2Transformer2DModel(sample_size=4, patch_size=2, in_channels=4, hidden_size=32, num_layers=1,
                                  num_refiner_layers=1, num_attention_heads=2, num_kv_heads=1, multiple_of=16,
                                  axes_dim_rope=(4, 6, 6), axes_lens=(16, 16, 16), cap_feat_dim=16)
    inputs = dict(hidden_states=torch.randn(1, 4, 4, 4, generator=g), timestep=torch.tensor([0.5]),
                  encoder_hidden_states=torch.randn(1, 5, 16, generator=g),
                  encoder_attention_mask=torch.ones(1, 5, dtype=torch.bool))
    _check(m, inputs, lambda m, i: m(**i).sample)


def test_lumina_next_transformer():
    from diffusers import LuminaNextDiT2DModel
    from diffusers.models.embeddings import get_2d_rotary_pos_embed_lumina

    g = _seeded()
    m = LuminaNextDiT2DModel(sample_size=4, patch_size=2, in_channels=4, hidden_size=32, num_layers=1,
                             num_attention_heads=2, num_kv_heads=1, multiple_of=16, learn_sigma=False,
                             cross_attention_dim=16)
    inputs = dict(hidden_states=torch.randn(1, 4, 4, 4, generator=g), timestep=torch.tensor([0.5]),
                  encoder_hidden_states=torch.randn(1, 5, 16, generator=g), encoder_mask=torch.ones(1, 5),
                  image_rotary_emb=get_2d_rotary_pos_embed_lumina(16, 4, 4), cross_attention_kwargs={})
    _check(m, inputs, lambda m, i: m(**i).sample)


@pytest.mark.parametrize("camera", [False, True])
def test_sana_wm_transformer(camera):
    # wan-style complex rotary embeddings; with camera conditions also the UCPE ray transforms (view_as_complex)
    from diffusers.models.transformers.transformer_sana_wm import SanaWMTransformer3DModel

    g = _seeded()
    m = SanaWMTransformer3DModel(in_channels=4, num_layers=2, hidden_size=32, num_attention_heads=2, softmax_every_n=2,
                                 linear_head_dim=16, image_size=4, caption_channels=16, chunk_plucker_channels=8,
                                 chunk_plucker_post_attn_blocks=2, use_chunk_plucker_post_attn=False,
                                 mixed_precision="fp32")
    inputs = dict(hidden_states=torch.randn(1, 4, 2, 4, 4, generator=g), timestep=torch.full((1, 1, 2), 500.0),
                  encoder_hidden_states=torch.randn(1, 1, 5, 16, generator=g), encoder_attention_mask=torch.ones(1, 5))
    if camera:
        inputs["camera_conditions"] = torch.randn(1, 2, 20, generator=g)
    # ill-conditioned in float32 (chunked delta-rule linear attention): CPU float32 itself is 3e-4 off a float64 run,
    # and tpu is as close to the float64 run as CPU is
    _check(m, inputs, lambda m, i: m(**i).sample, tol=2e-3)


def test_wan_animate_2_reference_pass():
    # rotary embeddings in complex128; the generation pass ("cached") needs flex attention, see docs/hf_testing.md
    from diffusers.models.transformers.transformer_wan_animate_2 import WanAnimate2KVCache, WanAnimate2Transformer3DModel

    g = _seeded()
    m = WanAnimate2Transformer3DModel(patch_size=(1, 2, 2), text_len=8, in_dim=8, dim=32, ffn_dim=32, freq_dim=16,
                                      text_dim=16, out_dim=4, num_heads=2, num_layers=1, use_img_emb=False)
    inputs = dict(hidden_states=[torch.randn(4, 2, 4, 4, generator=g)], timestep=torch.tensor([500.0]),
                  encoder_hidden_states=[torch.randn(5, 16, generator=g)],
                  condition_latents=[torch.randn(4, 2, 4, 4, generator=g)], offset_grid_sizes=torch.tensor([[2, 2, 2]]))

    def call(model, i):
        kv = WanAnimate2KVCache(1)
        out = model(**i, kv_cache=kv, kv_cache_mode="extract", seq_len=8)
        return list(out.sample) + [t for c in kv.layer_caches for t in vars(c).values() if isinstance(t, torch.Tensor)]

    _check(m, inputs, call)


def test_mmaudio_vae_stft_encoder():
    from diffusers.models.autoencoders.autoencoder_mmaudio import MMAudioVAE

    g = _seeded()
    m = MMAudioVAE(mel_bins=8, latent_channels=4, hidden_channels=8, channel_multipliers=(1, 2), layers_per_block=1,
                   sample_rate=16000, n_fft=32, hop_length=8)
    wav = torch.rand(1, 128, generator=g) * 1.6 - 0.8
    _check(m, {"x": wav}, lambda m, i: m.encode(i["x"]).latent_dist.mean, compiled=True)


def test_cosmos3_audio_stft_encoder():
    # a spectrogram ConvNeXt encoder whose convolutions use torch.nn.utils.weight_norm
    from diffusers.models.autoencoders.autoencoder_cosmos3_audio import Cosmos3AVAEAudioTokenizer

    g = _seeded()
    m = Cosmos3AVAEAudioTokenizer(sampling_rate=16000, vocoder_input_dim=8, dec_dim=8, dec_c_mults=(1, 2),
                                  dec_strides=(2, 2), dec_out_channels=1, stereo=False, enc_dim=8,
                                  enc_intermediate_dim=16, enc_num_layers=1, enc_num_blocks=1, enc_n_fft=16,
                                  enc_hop_length=4, enc_latent_dim=4, enc_c_mults=(1, 2), enc_strides=(2, 2))
    wav = torch.randn(1, 1, 128, generator=g) * 0.3
    _check(m, {"x": wav}, lambda m, i: m.encode(i["x"]).latent_dist.mean)


def test_fold_unfold_weight_norm_autograd():
    # the ops these models brought to the device, with their backward (col2im's is im2col and the reverse)
    g = _seeded()
    cols = torch.randn(2, 12, 4, generator=g)
    img = torch.randn(2, 3, 4, 5, generator=g)
    lin = torch.nn.utils.weight_norm(torch.nn.Linear(5, 3))
    kw = dict(kernel_size=(2, 2), dilation=(1, 2), padding=(1, 0), stride=(2, 1))

    def f(cols, img, lin):
        a = torch.nn.functional.fold(cols, (3, 4), **kw)
        b = torch.nn.functional.unfold(img, **kw)
        return a.square().sum() + (b * b.flip(-1)).sum() + lin(img).sum()

    grads = []
    for dev in ("cpu", DEV):
        c, i = cols.detach().to(dev).requires_grad_(), img.detach().to(dev).requires_grad_()
        lw = lin.to(dev)
        lw.zero_grad()
        f(c, i, lw).backward()
        grads.append([t.detach().cpu().clone() for t in (c.grad, i.grad, lw.weight_g.grad, lw.weight_v.grad)])
    for g_tpu, g_cpu in zip(grads[1], grads[0]):
        torch.testing.assert_close(g_tpu, g_cpu, rtol=1e-5, atol=1e-5)
