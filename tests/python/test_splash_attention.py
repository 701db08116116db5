"""``torch_tpu.ops.splash_attention.splash_sdpa`` (TorchTPU's name): sliding-window, causal and GQA attention.

Checked against ``F.scaled_dot_product_attention`` on the CPU with the same mask (query ``i`` sees keys
``i - w .. i`` for ``local_window_size=w``), forward and backward, eager and under
``torch.compile(backend="tpu", fullgraph=True)``.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_tpu  # noqa: F401
from torch_tpu.ops.splash_attention import splash_sdpa


def _reference(q, k, v, scale, is_causal, window):
    """CPU attention with an explicit mask and explicitly repeated KV heads (independent of SDPA's GQA path)."""
    hq, hk = q.shape[1], k.shape[1]
    k = k.repeat_interleave(hq // hk, dim=1)
    v = v.repeat_interleave(hq // hk, dim=1)
    lq, lk = q.shape[-2], k.shape[-2]
    i = torch.arange(lq).unsqueeze(-1)
    j = torch.arange(lk).unsqueeze(0)
    if window is not None:
        mask = (j <= i) & (j >= i - window)
    elif is_causal:
        mask = j <= i
    else:
        mask = torch.ones(lq, lk, dtype=torch.bool)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


CASES = [
    # (heads, kv heads, window, is_causal, scale)
    (4, 4, 3, True, None),      # sliding window, MHA
    (4, 2, 5, True, 0.5),       # sliding window, GQA, explicit scale
    (4, 1, 0, True, None),      # window 0: each query sees only itself (MQA)
    (4, 2, None, True, None),   # causal GQA
    (2, 2, None, False, 1.0),   # full attention
    (4, 4, 40, True, None),     # window wider than the sequence: causal
]


@pytest.mark.parametrize("hq,hk,window,is_causal,scale", CASES)
def test_splash_sdpa_forward_backward_eager(hq, hk, window, is_causal, scale):
    torch.manual_seed(0)
    b, L, d = 2, 16, 8
    q, k, v = torch.randn(b, hq, L, d), torch.randn(b, hk, L, d), torch.randn(b, hk, L, d)
    grad = torch.randn(b, hq, L, d)
    qc, kc, vc = (t.clone().requires_grad_() for t in (q, k, v))
    ref = _reference(qc, kc, vc, scale, is_causal, window)
    ref.backward(grad)
    qt, kt, vt = (t.to("tpu").requires_grad_() for t in (q, k, v))
    out = splash_sdpa(qt, kt, vt, scale=scale, is_causal=is_causal, local_window_size=window,
                      enable_gqa=hq != hk)
    out.backward(grad.to("tpu"))
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), atol=2e-5, rtol=1e-5)
    for t, r in ((qt, qc), (kt, kc), (vt, vc)):
        torch.testing.assert_close(t.grad.cpu(), r.grad, atol=2e-5, rtol=1e-5)


@pytest.mark.slow
def test_splash_sdpa_compiled_fullgraph(fresh_dynamo):
    torch.manual_seed(1)
    b, hq, hk, L, d = 1, 4, 2, 12, 8
    q, k, v = torch.randn(b, hq, L, d), torch.randn(b, hk, L, d), torch.randn(b, hk, L, d)

    def step(q, k, v):
        out = splash_sdpa(q, k, v, scale=0.3, is_causal=True, local_window_size=4, enable_gqa=True)
        return (out * out).sum()

    qc, kc, vc = (t.clone().requires_grad_() for t in (q, k, v))
    ref = (lambda o: (o * o).sum())(_reference(qc, kc, vc, 0.3, True, 4))
    ref.backward()
    qt, kt, vt = (t.to("tpu").requires_grad_() for t in (q, k, v))
    loss = torch.compile(step, backend="tpu", fullgraph=True)(qt, kt, vt)
    loss.backward()
    torch.testing.assert_close(loss.detach().cpu(), ref.detach(), atol=1e-4, rtol=1e-5)
    for t, r in ((qt, qc), (kt, kc), (vt, vc)):
        torch.testing.assert_close(t.grad.cpu(), r.grad, atol=2e-5, rtol=1e-5)
    assert torch_tpu.compile_stats()["lowerings"] >= 1


def test_splash_sdpa_bfloat16_and_bad_input():
    torch.manual_seed(2)
    q, k, v = (torch.randn(1, 2, 8, 16, dtype=torch.bfloat16) for _ in range(3))
    out = splash_sdpa(q.to("tpu"), k.to("tpu"), v.to("tpu"), local_window_size=2)
    ref = _reference(q.float(), k.float(), v.float(), None, True, 2)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float().cpu(), ref, atol=2e-2, rtol=2e-2)
    kt = torch.randn(1, 1, 8, 16, device="tpu", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="enable_gqa"):
        splash_sdpa(q.to("tpu"), kt, kt)  # GQA shapes without enable_gqa=True (TorchTPU raises ValueError)
    with pytest.raises(ValueError, match="enable_gqa"):
        splash_sdpa(q.to("tpu"), k.to("tpu"), v.to("tpu"), enable_gqa=True)
    with pytest.raises(ValueError, match="local_window_size must be >= 0"):
        splash_sdpa(q.to("tpu"), k.to("tpu"), v.to("tpu"), local_window_size=-1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        splash_sdpa(q.to("tpu"), k.to("tpu"), v.to("tpu"), block_size=128)
    splash_sdpa(q.to("tpu"), k.to("tpu"), v.to("tpu"), block_q=128, block_kv=128)  # kernel tuning: accepted
