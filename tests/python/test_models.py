"""Whole small models on the tpu device: every op lowered (zero CPU fallbacks) and results matching CPU.

The models come from ``models.py`` (a Qwen3-style decoder, a Qwen3-MoE-style block, a DiT block, a small UNet);
the attention and CNN tests below cover scaled_dot_product_attention's variants and the conv / pooling / norm /
loss ops the models do not reach. Sizes are tiny: the file runs in well under a minute on two cores.
"""
from __future__ import annotations

import copy
import os
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models as M  # noqa: E402

TOL = dict(rtol=1e-4, atol=1e-4)
GRAD_TOL = dict(rtol=1e-3, atol=1e-4)


def _assert_no_fallbacks():
    assert torch_tpu._C._fallback_counts() == {}, torch_tpu._C._fallback_reasons()


def _pair(ctor, *args, **kwargs):
    """The same seeded model on CPU and on tpu."""
    cpu = M.seeded(0, ctor, *args, **kwargs)
    return cpu, copy.deepcopy(cpu).to("tpu")


def _assert_grads_close(cpu_model, tpu_model, **tol):
    for (name, p), (_, q) in zip(cpu_model.named_parameters(), tpu_model.named_parameters()):
        assert (p.grad is None) == (q.grad is None), name
        if p.grad is not None:
            torch.testing.assert_close(q.grad.cpu(), p.grad, msg=name, **tol)


def _decoder_step(model, ids, targets, opt):
    logits = model(ids)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return logits, loss


def test_qwen3_decoder_forward_backward_adamw_matches_cpu():
    cpu, tpu = _pair(M.Qwen3Decoder)
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, cpu.cfg.vocab, (2, 8), generator=gen)
    targets = torch.randint(0, cpu.cfg.vocab, (2, 8), generator=gen)
    opt_c = torch.optim.AdamW(cpu.parameters(), lr=1e-2, weight_decay=0.01)
    opt_t = torch.optim.AdamW(tpu.parameters(), lr=1e-2, weight_decay=0.01)
    torch_tpu.reset_fallback_counts()
    for step in range(2):
        logits_c, loss_c = _decoder_step(cpu, ids, targets, opt_c)
        logits_t, loss_t = _decoder_step(tpu, ids.to("tpu"), targets.to("tpu"), opt_t)
        torch.testing.assert_close(logits_t.detach().cpu(), logits_c.detach(), **TOL)
        torch.testing.assert_close(loss_t.detach().cpu(), loss_c.detach(), **TOL)
        if step == 0:
            _assert_grads_close(cpu, tpu, **GRAD_TOL)
    _assert_no_fallbacks()
    for (name, p), (_, q) in zip(cpu.named_parameters(), tpu.named_parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), msg=name, **GRAD_TOL)


def test_decoder_variant_gelu_tied_no_qk_norm_matches_cpu():
    # The decoder variants of benchmarks/decode_vs_jax.py's sweep: GELU MLP, lm_head tied to the embedding, no q/k
    # norms (Llama/GPT style). Eager training steps, then a compiled decode against a static KV cache, as on CPU.
    cfg = M.DecoderConfig(mlp="gelu", tie_embeddings=True, qk_norm=False)
    cpu, tpu = _pair(M.Qwen3Decoder, cfg)
    assert tpu.lm_head.weight is tpu.embed.weight and tpu.layers[0].gate_proj is None
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(0, cfg.vocab, (2, 8), generator=gen)
    targets = torch.randint(0, cfg.vocab, (2, 8), generator=gen)
    # SGD: Adam's normalized steps would turn rounding-level gradient differences of near-zero gradients into
    # learning-rate-sized ones
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.1)
    opt_t = torch.optim.SGD(tpu.parameters(), lr=0.1)
    torch_tpu.reset_fallback_counts()
    for step in range(2):
        logits_c, _ = _decoder_step(cpu, ids, targets, opt_c)
        logits_t, _ = _decoder_step(tpu, ids.to("tpu"), targets.to("tpu"), opt_t)
        torch.testing.assert_close(logits_t.detach().cpu(), logits_c.detach(), **TOL)
    _assert_no_fallbacks()
    assert tpu.lm_head.weight is tpu.embed.weight  # still one parameter after the optimizer steps
    torch.testing.assert_close(tpu.embed.weight.detach().cpu(), cpu.embed.weight.detach(), **GRAD_TOL)
    for m, dev in ((cpu, "cpu"), (tpu, "tpu")):
        m.init_kv_cache(1, 16, device=dev)
    step_t = torch.compile(tpu, backend="tpu", dynamic=False)
    with torch.no_grad():
        for i in range(3):
            pos = torch.tensor([i])
            want = cpu(torch.tensor([[5 + i]]), pos)
            got = step_t(torch.tensor([[5 + i]], device="tpu"), pos.to("tpu"))
            torch.testing.assert_close(got.cpu(), want, **TOL)


def test_qwen3_decoder_second_forward_compiles_nothing():
    _, tpu = _pair(M.Qwen3Decoder)
    gen = torch.Generator().manual_seed(2)
    with torch.no_grad():
        tpu(torch.randint(0, 256, (2, 8), generator=gen).to("tpu")).cpu()
        before = torch_tpu.cache_stats()["compiles"]
        torch_tpu.reset_fallback_counts()
        tpu(torch.randint(0, 256, (2, 8), generator=gen).to("tpu")).cpu()
    _assert_no_fallbacks()
    assert torch_tpu.cache_stats()["compiles"] == before


def test_dit_block_bf16_forward_close_to_cpu():
    # (models.Qwen3Decoder is not bf16-clean: its float32 RoPE tables promote q/k, so its bf16 check uses DiT.)
    cpu, tpu = _pair(M.DiTBlock)
    cpu, tpu = cpu.bfloat16(), tpu.bfloat16()
    gen = torch.Generator().manual_seed(3)
    x, c = torch.randn(2, 8, 64, generator=gen).bfloat16(), torch.randn(2, 64, generator=gen).bfloat16()
    torch_tpu.reset_fallback_counts()
    with torch.no_grad():
        out = tpu(x.to("tpu"), c.to("tpu")).cpu().float()
        ref = cpu(x, c).float()
    _assert_no_fallbacks()
    torch.testing.assert_close(out, ref, rtol=5e-2, atol=5e-2)


def test_moe_block_forward_backward_matches_cpu():
    cpu, tpu = _pair(M.MoEBlock)
    x = torch.randn(2, 8, 64, generator=torch.Generator().manual_seed(4))
    torch_tpu.reset_fallback_counts()
    y_c, aux_c = cpu(x)
    y_t, aux_t = tpu(x.to("tpu"))
    (y_t.square().mean() + aux_t).backward()
    _assert_no_fallbacks()
    (y_c.square().mean() + aux_c).backward()
    torch.testing.assert_close(y_t.detach().cpu(), y_c.detach(), **TOL)
    torch.testing.assert_close(aux_t.detach().cpu(), aux_c.detach(), **TOL)
    _assert_grads_close(cpu, tpu, **GRAD_TOL)


def test_dit_block_forward_backward_matches_cpu():
    cpu, tpu = _pair(M.DiTBlock)
    gen = torch.Generator().manual_seed(5)
    x, c = torch.randn(2, 8, 64, generator=gen), torch.randn(2, 64, generator=gen)
    xc, xt = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    torch_tpu.reset_fallback_counts()
    y_t = tpu(xt, c.to("tpu"))
    y_t.square().mean().backward()
    _assert_no_fallbacks()
    y_c = cpu(xc, c)
    y_c.square().mean().backward()
    torch.testing.assert_close(y_t.detach().cpu(), y_c.detach(), **TOL)
    torch.testing.assert_close(xt.grad.cpu(), xc.grad, **GRAD_TOL)
    _assert_grads_close(cpu, tpu, **GRAD_TOL)


def test_unet_forward_backward_matches_cpu():
    cpu, tpu = _pair(M.UNet2D)
    x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(6))
    xc, xt = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    torch_tpu.reset_fallback_counts()
    y_t = tpu(xt)
    y_t.square().mean().backward()
    _assert_no_fallbacks()
    y_c = cpu(xc)
    y_c.square().mean().backward()
    torch.testing.assert_close(y_t.detach().cpu(), y_c.detach(), **TOL)
    torch.testing.assert_close(xt.grad.cpu(), xc.grad, **GRAD_TOL)
    _assert_grads_close(cpu, tpu, **GRAD_TOL)


def test_unet_bf16_forward_close_to_cpu():
    cpu, tpu = _pair(M.UNet2D)
    cpu, tpu = cpu.bfloat16(), tpu.bfloat16()
    x = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(7)).bfloat16()
    torch_tpu.reset_fallback_counts()
    with torch.no_grad():
        out = tpu(x.to("tpu")).cpu().float()
        ref = cpu(x).float()
    _assert_no_fallbacks()
    torch.testing.assert_close(out, ref, rtol=5e-2, atol=5e-2)


# ---------------------------------------------------------------------------------------------------------------
# scaled_dot_product_attention (on a PrivateUse1 device it decomposes into math ops: all must lower)

SDPA_CASES = {
    "plain": dict(),
    "causal": dict(is_causal=True),
    "bool_mask": dict(mask="bool"),
    "float_mask": dict(mask="float"),
    "gqa_causal": dict(is_causal=True, enable_gqa=True, kv_heads=2),
    "scale": dict(scale=0.3),
}


@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_sdpa_matches_cpu(case):
    kw = dict(SDPA_CASES[case])
    gen = torch.Generator().manual_seed(8)
    kv_heads = kw.pop("kv_heads", 4)
    q = torch.randn(2, 4, 6, 8, generator=gen)
    k = torch.randn(2, kv_heads, 6, 8, generator=gen)
    v = torch.randn(2, kv_heads, 6, 8, generator=gen)
    mask = kw.pop("mask", None)
    if mask == "bool":
        kw["attn_mask"] = torch.rand(6, 6, generator=gen) > 0.3
        kw["attn_mask"].fill_diagonal_(True)
    elif mask == "float":
        kw["attn_mask"] = torch.randn(2, 1, 6, 6, generator=gen)

    def run(device):
        ins = [t.to(device).requires_grad_() for t in (q, k, v)]
        args = {n: (a.to(device) if torch.is_tensor(a) else a) for n, a in kw.items()}
        out = F.scaled_dot_product_attention(*ins, **args)
        out.square().sum().backward()
        return out.detach().cpu(), [t.grad.cpu() for t in ins]

    torch_tpu.reset_fallback_counts()
    out_t, grads_t = run("tpu")
    _assert_no_fallbacks()
    out_c, grads_c = run("cpu")
    torch.testing.assert_close(out_t, out_c, **TOL)
    for gt, gc in zip(grads_t, grads_c):
        torch.testing.assert_close(gt, gc, **GRAD_TOL)


def test_sdpa_dropout_runs_without_fallbacks():
    q = torch.randn(1, 2, 8, 8).to("tpu").requires_grad_()
    torch_tpu.reset_fallback_counts()
    out = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5, is_causal=True)
    out.sum().backward()
    _assert_no_fallbacks()
    assert torch.isfinite(out.cpu()).all() and torch.isfinite(q.grad.cpu()).all()


# ---------------------------------------------------------------------------------------------------------------
# A small CNN: the conv / pooling / norm / upsampling / loss ops the models above do not reach


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2, padding=2, dilation=2, groups=2)
        self.ct = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.c1d = nn.Conv1d(4, 4, 3, padding=1)
        self.head = nn.Linear(4, 5)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.bn(self.c1(x))), 3, 2, 1, ceil_mode=True)    # 16 -> 8
        h = F.avg_pool2d(F.silu(self.c2(h)), 3, 1, 1, count_include_pad=False)    # 8 -> 4
        h = F.glu(torch.cat([self.ct(h), self.ct(h)], dim=1), dim=1)               # 4 -> 8
        h = F.interpolate(h, scale_factor=1.5, mode="bilinear", align_corners=False)
        h = F.pixel_unshuffle(F.interpolate(h, size=(10, 10), mode="nearest"), 2).reshape(h.shape[0], 4, -1)
        h = F.adaptive_avg_pool1d(self.c1d(h), 1).flatten(1)
        return self.head(h)


@pytest.mark.parametrize("train", [True, False])
def test_small_cnn_with_losses_matches_cpu(train):
    cpu, tpu = _pair(SmallCNN)
    cpu.train(train)
    tpu.train(train)
    gen = torch.Generator().manual_seed(9)
    x = torch.randn(4, 3, 16, 16, generator=gen)
    labels = torch.randint(0, 5, (4,), generator=gen)
    soft = torch.rand(4, 5, generator=gen)

    def run(model, device):
        out = model(x.to(device))
        loss = (F.cross_entropy(out, labels.to(device), label_smoothing=0.1)
                + F.binary_cross_entropy_with_logits(out, soft.to(device))
                + F.binary_cross_entropy(out.sigmoid(), soft.to(device))
                + F.smooth_l1_loss(out, soft.to(device), beta=0.5)
                + F.huber_loss(out, soft.to(device), delta=0.5)
                + F.logsigmoid(out).mean())
        loss.backward()
        return out.detach().cpu(), loss.detach().cpu()

    torch_tpu.reset_fallback_counts()
    out_t, loss_t = run(tpu, "tpu")
    _assert_no_fallbacks()
    out_c, loss_c = run(cpu, "cpu")
    torch.testing.assert_close(out_t, out_c, **TOL)
    torch.testing.assert_close(loss_t, loss_c, **TOL)
    _assert_grads_close(cpu, tpu, **GRAD_TOL)


def test_batchnorm_running_stats_update_in_eager():
    bn_c = nn.BatchNorm2d(4, momentum=0.3)
    bn_t = copy.deepcopy(bn_c).to("tpu")
    x = torch.randn(3, 4, 5, 5, generator=torch.Generator().manual_seed(10))
    bn_c(x)
    bn_t(x.to("tpu"))
    torch.testing.assert_close(bn_t.running_mean.cpu(), bn_c.running_mean, **TOL)
    torch.testing.assert_close(bn_t.running_var.cpu(), bn_c.running_var, **TOL)
    assert int(bn_t.num_batches_tracked) == int(bn_c.num_batches_tracked) == 1
