"""PyTorch's inference fast paths of nn.MultiheadAttention and nn.TransformerEncoder(Layer) on tpu.

In eval mode without autograd, PyTorch calls _native_multi_head_attention and _transformer_encoder_layer_fwd for
tpu tensors as it does for CPU and CUDA ones, and nn.TransformerEncoder with a key padding mask packs the batch into
a nested tensor. These run on the device (no CPU fallback) and give CPU's results; the pieces with device rules
(_masked_softmax, _transform_bias_rescale_qkv, _addmm_activation) are checked against CPU's kernels directly.
"""

import pytest
import torch
import torch.nn.functional as F

import torch_tpu  # noqa: F401

torch.backends.mha.set_fastpath_enabled(True)


def _close(actual, expected, atol=2e-5, rtol=1e-5):
    torch.testing.assert_close(actual.cpu(), expected, atol=atol, rtol=rtol, equal_nan=True)


def _padding_mask():
    mask = torch.zeros(3, 7, dtype=torch.bool)
    mask[0, 5:] = True
    mask[2, 3:] = True
    return mask


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_fast_path_matches_cpu(strict_fallback, activation, norm_first):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation=activation, batch_first=True,
                                             norm_first=norm_first).eval()
    x = torch.randn(3, 7, 32)
    mask = _padding_mask()
    with torch.no_grad():
        expected = layer(x)
        expected_masked = layer(x, src_key_padding_mask=mask)
        lt = layer.to("tpu")
        _close(lt(x.to("tpu")), expected)
        _close(lt(x.to("tpu"), src_key_padding_mask=mask.to("tpu")), expected_masked)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_with_padding_mask_takes_the_nested_path(strict_fallback, activation):
    # nn.TransformerEncoder packs the batch into a nested tensor (_nested_tensor_from_mask) when the mask is given in
    # eval mode; this failed on tpu ("Could not run 'aten::_to_copy' ... 'NestedTensortpu' backend").
    torch.manual_seed(1)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation=activation, batch_first=True)
    enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval()
    assert enc.use_nested_tensor
    x = torch.randn(3, 7, 32)
    mask = _padding_mask()
    with torch.no_grad():
        expected = enc(x, src_key_padding_mask=mask)
        out = enc.to("tpu")(x.to("tpu"), src_key_padding_mask=mask.to("tpu"))
    assert out.device.type == "tpu" and out.shape == expected.shape
    _close(out, expected)
    assert out.cpu()[mask].abs().max() == 0  # padding positions come back as zeros, as on CPU


def test_encoder_nested_path_with_every_row_shorter(strict_fallback):
    # All rows padded: the nested batch is shorter than the input, and to_padded_tensor restores the length.
    torch.manual_seed(2)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    enc = torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=True).eval()
    x = torch.randn(2, 6, 16)
    mask = torch.zeros(2, 6, dtype=torch.bool)
    mask[:, 4:] = True
    mask[1, 2:] = True
    with torch.no_grad():
        expected = enc(x, src_key_padding_mask=mask)
        _close(enc.to("tpu")(x.to("tpu"), src_key_padding_mask=mask.to("tpu")), expected)


@pytest.mark.parametrize("need_weights,average", [(False, True), (True, True), (True, False)])
def test_multihead_attention_fast_path_matches_cpu(strict_fallback, need_weights, average):
    torch.manual_seed(3)
    mha = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    x = torch.randn(3, 7, 32)
    mask = _padding_mask()
    causal = torch.triu(torch.ones(7, 7, dtype=torch.bool), 1)
    cases = [dict(), dict(key_padding_mask=mask), dict(attn_mask=causal)]
    with torch.no_grad():
        expected = [mha(x, x, x, need_weights=need_weights, average_attn_weights=average, **kw) for kw in cases]
        mt = mha.to("tpu")
        xt = x.to("tpu")
        for kw, (out, weights) in zip(cases, expected):
            kw = {k: v.to("tpu") for k, v in kw.items()}
            got, got_w = mt(xt, xt, xt, need_weights=need_weights, average_attn_weights=average, **kw)
            _close(got, out)
            if need_weights:
                _close(got_w, weights)
            else:
                assert got_w is None and weights is None


def test_multihead_attention_fast_path_distinct_key_value(strict_fallback):
    torch.manual_seed(4)
    mha = torch.nn.MultiheadAttention(16, 2, batch_first=True).eval()
    q, k, v = torch.randn(2, 5, 16), torch.randn(2, 5, 16), torch.randn(2, 5, 16)
    with torch.no_grad():
        out, w = mha(q, k, v)
        got, got_w = mha.to("tpu")(q.to("tpu"), k.to("tpu"), v.to("tpu"))
    _close(got, out)
    _close(got_w, w)


@pytest.mark.parametrize("mask_type,mask_shape", [(0, (5, 5)), (1, (2, 5)), (2, (2, 3, 5, 5))])
@pytest.mark.parametrize("dim", [3, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_masked_softmax_matches_cpu(strict_fallback, mask_type, mask_shape, dim, dtype):
    torch.manual_seed(5)
    x = torch.randn(2, 3, 5, 5, dtype=dtype)
    mask = torch.rand(mask_shape) > 0.6
    mask.view(-1)[:5] = True  # a fully masked row: NaN on CPU
    expected = torch._masked_softmax(x, mask, dim, mask_type)
    got = torch._masked_softmax(x.to("tpu"), mask.to("tpu"), dim, mask_type)
    assert got.dtype == expected.dtype
    tol = dict(atol=1e-2, rtol=1e-2) if dtype == torch.bfloat16 else {}
    _close(got, expected, **tol)
    assert torch.equal(got.cpu().isnan(), expected.isnan())


def test_masked_softmax_errors_as_cpu():
    x = torch.randn(2, 3, 5, 5)
    for mask, mask_type in [(torch.ones(2, 5), 1), (torch.zeros(3, 5, dtype=torch.bool), 1),
                            (torch.zeros(5, 4, dtype=torch.bool), 0), (torch.zeros(2, 5, dtype=torch.bool), None)]:
        with pytest.raises(RuntimeError) as cpu_err:
            torch._masked_softmax(x, mask, 3, mask_type)
        with pytest.raises(RuntimeError) as tpu_err:
            torch._masked_softmax(x.to("tpu"), mask.to("tpu"), 3, mask_type)
        assert str(cpu_err.value).splitlines()[0] in str(tpu_err.value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_transform_bias_rescale_qkv_matches_cpu(strict_fallback, dtype):
    torch.manual_seed(6)
    qkv = torch.randn(2, 5, 48, dtype=dtype)
    bias = torch.randn(48, dtype=dtype)
    expected = torch._transform_bias_rescale_qkv(qkv, bias, 4)
    got = torch._transform_bias_rescale_qkv(qkv.to("tpu"), bias.to("tpu"), 4)
    tol = dict(atol=2e-3, rtol=2e-3) if dtype == torch.float16 else {}
    for g, e in zip(got, expected):
        assert g.shape == e.shape == (2, 4, 5, 4)
        _close(g, e, **tol)


@pytest.mark.parametrize("use_gelu", [False, True])
def test_addmm_activation_matches_cpu(strict_fallback, use_gelu):
    # CPU's fused kernel applies the exact (erf) GELU; tanh's approximation differs by up to 5e-4 here.
    torch.manual_seed(7)
    a, m1, m2 = torch.randn(8, 16), torch.randn(8, 32), torch.randn(32, 16)
    expected = torch._addmm_activation(a, m1, m2, use_gelu=use_gelu)
    got = torch._addmm_activation(a.to("tpu"), m1.to("tpu"), m2.to("tpu"), use_gelu=use_gelu)
    _close(got, expected, atol=1e-5, rtol=1e-5)
    reference = F.gelu(a + m1 @ m2) if use_gelu else F.relu(a + m1 @ m2)
    _close(got, reference, atol=1e-5, rtol=1e-5)


def test_nested_tensor_moves_between_cpu_and_tpu():
    nt = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)])
    t = nt.to("tpu")
    assert t.is_nested and t.device.type == "tpu"
    back = t.cpu()
    for a, b in zip(back.unbind(), nt.unbind()):
        assert torch.equal(a, b)
    padded = t.clone().to_padded_tensor(0.0)
    assert torch.equal(padded.cpu(), nt.to_padded_tensor(0.0))
    assert t.to(torch.float64).cpu().dtype == torch.float64
    with pytest.raises(NotImplementedError):
        t.sin()  # other nested ops are not implemented on tpu: PyTorch's clear error, never a crash
