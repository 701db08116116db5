"""The project's own fused kernels: ``tpu`` namespace ops with C++ lowering rules (csrc/lowering/rules/fused.cpp).

``torch.ops.tpu.swiglu(gate, up) = silu(gate) * up`` with its fused backward, checked against the unfused CPU
computation: eager (one program per call, forward and backward), inside ``torch.compile(backend="tpu",
fullgraph=True)`` (lowered by the same rule, no partition), float32 and bfloat16, and PyTorch-style errors.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_tpu


def _ref(gate, up):
    return F.silu(gate) * up


def test_rules_registered():
    for op in ("tpu::swiglu", "tpu::swiglu_backward", "tpu::stablehlo_call"):
        assert torch_tpu._C._compile_has_rule(op), op
    assert "tpu::swiglu" in torch_tpu._C._register_lowering_kernels()


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-6), (torch.bfloat16, 1e-2)], ids=["f32", "bf16"])
def test_swiglu_eager_forward_backward(dtype, tol):
    torch.manual_seed(0)
    gate, up = torch.randn(4, 6, 16, dtype=dtype), torch.randn(4, 6, 16, dtype=dtype)
    gt, ut = (t.to("tpu").requires_grad_() for t in (gate, up))
    torch_tpu.reset_fallback_counts()
    before = torch_tpu.cache_stats()["requests"]
    out = torch_tpu.ops.swiglu(gt, ut)
    assert torch_tpu.cache_stats()["requests"] - before == 1  # one fused program
    gc, uc = (t.clone().requires_grad_() for t in (gate, up))
    ref = _ref(gc, uc)
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), atol=tol, rtol=tol)
    g = torch.randn_like(ref)
    out.backward(g.to("tpu"))
    ref.backward(g)
    torch.testing.assert_close(gt.grad.cpu(), gc.grad, atol=tol, rtol=tol)
    torch.testing.assert_close(ut.grad.cpu(), uc.grad, atol=tol, rtol=tol)
    # The reference implementation serves CPU tensors.
    torch.testing.assert_close(torch.ops.tpu.swiglu(gate, up), _ref(gate, up))
    assert torch_tpu.fallback_counts() == {}


class _SwiGLUMLP(torch.nn.Module):
    def __init__(self, d=16, h=32, fused=True):
        super().__init__()
        self.gate = torch.nn.Linear(d, h, bias=False)
        self.up = torch.nn.Linear(d, h, bias=False)
        self.down = torch.nn.Linear(h, d, bias=False)
        self.fused = fused

    def forward(self, x):
        g, u = self.gate(x), self.up(x)
        return self.down(torch_tpu.ops.swiglu(g, u) if self.fused else _ref(g, u))


def test_swiglu_compiled_training_matches_cpu():
    torch.manual_seed(1)
    ref = _SwiGLUMLP(fused=False)
    mod = _SwiGLUMLP()
    mod.load_state_dict(ref.state_dict())
    mod.to("tpu")
    x = torch.randn(3, 5, 16)
    torch_tpu._dynamo_backend.reset_compile_stats()
    step = torch.compile(lambda inp: mod(inp).square().mean(), backend="tpu", fullgraph=True)
    loss = step(x.to("tpu"))
    loss.backward()
    ref_loss = ref(x).square().mean()
    ref_loss.backward()
    torch.testing.assert_close(loss.detach().cpu(), ref_loss.detach(), atol=1e-6, rtol=1e-5)
    for p, q in zip(mod.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, atol=1e-6, rtol=1e-5)
    s = torch_tpu.compile_stats()
    assert s["lowerings"] == 2 and s["partitioned_graphs"] == 0 and s["eager_graphs"] == 0, s


def test_swiglu_bad_input_raises_like_cpu():
    a, b = torch.randn(2, 3), torch.randn(3, 2)
    with pytest.raises(RuntimeError, match="gate and up must have the same shape") as cpu_err:
        torch.ops.tpu.swiglu(a, b)
    with pytest.raises(type(cpu_err.value), match="gate and up must have the same shape"):
        torch.ops.tpu.swiglu(a.to("tpu"), b.to("tpu"))
    with pytest.raises(RuntimeError, match="expected floating-point"):
        torch.ops.tpu.swiglu(torch.ones(2, dtype=torch.int32, device="tpu"), torch.ones(2, dtype=torch.int32,
                                                                                         device="tpu"))
