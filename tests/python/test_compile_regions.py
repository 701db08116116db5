"""Repeated blocks compiled once: ``torch.compiler.nested_compile_region`` (invoke_subgraph) and
``torch._higher_order_ops.scan`` become private functions of the graph's program, lowered once whatever the number
of call sites (csrc/compile/graph.h), forward and backward, equal to CPU."""

import re

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu import _C

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

D = 16


class Block(torch.nn.Module):
    """RMSNorm, single-head attention, SwiGLU (a small decoder layer)."""

    def __init__(self, d: int = D) -> None:
        super().__init__()
        self.norm = torch.nn.Parameter(torch.ones(d))
        self.qkv = torch.nn.Linear(d, 3 * d, bias=False)
        self.o = torch.nn.Linear(d, d, bias=False)
        self.up = torch.nn.Linear(d, 2 * d, bias=False)
        self.down = torch.nn.Linear(d, d, bias=False)

    def body(self, x: torch.Tensor) -> torch.Tensor:
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        x = x + self.o(F.scaled_dot_product_attention(q, k, v, is_causal=True))
        g, u = self.up(x).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)


class RegionBlock(Block):
    @torch.compiler.nested_compile_region
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class PlainBlock(Block):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def _model(cls, layers: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(*[cls() for _ in range(layers)])


def _functions(text: str) -> int:
    return len(re.findall(r"func\.func private @region", text))


def _calls(text: str) -> int:
    return len(re.findall(r"func\.call", text))


def test_region_forward_once_equals_cpu():
    layers = 3
    cpu = _model(RegionBlock, layers)
    dev = _model(RegionBlock, layers).to("tpu")
    x = torch.randn(2, 8, D)
    with torch.no_grad():
        ref = cpu(x)
        out = torch.compile(dev, backend="tpu", fullgraph=True)(x.to("tpu"))
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-4, atol=1e-4)
    text = _C._compile_last_program_text()
    assert _functions(text) == 1 and _calls(text) == layers, text[:2000]
    st = torch_tpu.compile_stats()
    assert st["region_functions"] == 1 and st["region_calls"] == layers and st["regions_inlined"] == 0


@pytest.mark.slow  # four programs compiled (region and plain, forward and backward)
def test_region_training_step_equals_cpu_and_plain():
    layers = 2
    x = torch.randn(2, 8, D)
    grads = {}
    for name, cls, device, compiled in [("cpu", RegionBlock, "cpu", False), ("region", RegionBlock, "tpu", True),
                                        ("plain", PlainBlock, "tpu", True)]:
        m = _model(cls, layers).to(device)
        f = torch.compile(m, backend="tpu", fullgraph=True) if compiled else m
        xi = x.to(device).detach().requires_grad_(True)
        loss = f(xi).square().mean()
        loss.backward()
        grads[name] = [loss.detach().cpu(), xi.grad.cpu()] + [p.grad.cpu() for p in m.parameters()]
        if name == "region":
            # the backward graph (the latest program) holds the backward block once too
            text = _C._compile_last_program_text()
            assert _functions(text) == 1 and _calls(text) == layers, text[:2000]
            assert torch_tpu.compile_stats()["region_functions"] == 2  # the forward's and the backward's
    for name in ("region", "plain"):
        for a, b in zip(grads[name], grads["cpu"]):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_region_with_device_check_is_inlined():
    # an index's bounds are checked on the device (program state a function cannot reach): the region is compiled
    # inline at its call sites, and a bad index still raises
    class Gather(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(10, D))

        @torch.compiler.nested_compile_region
        def forward(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
            return x + torch.index_select(self.w, 0, idx)

    torch.manual_seed(0)
    cpu = Gather()
    dev = Gather().to("tpu")
    dev.load_state_dict(cpu.state_dict())

    def f(m, x, idx):
        return m(m(x, idx), idx)

    x, idx = torch.randn(4, D), torch.tensor([1, 3, 9, 0])
    with torch.no_grad():
        ref = f(cpu, x, idx)
        out = torch.compile(f, backend="tpu", fullgraph=True)(dev, x.to("tpu"), idx.to("tpu"))
    torch.testing.assert_close(out.cpu(), ref)
    st = torch_tpu.compile_stats()
    assert st["regions_inlined"] == 2 and st["region_functions"] == 0, st


def test_scan_forward_and_backward_equal_cpu():
    from torch._higher_order_ops.scan import scan

    def f(init, xs, w):
        def combine(c, x):
            h = torch.tanh(c @ w + x)
            return h, h.sum(-1) * 2

        return scan(combine, init, xs)

    torch.manual_seed(0)
    init, xs, w = torch.randn(3, 8), torch.randn(5, 3, 8), torch.randn(8, 8) * 0.3
    res = {}
    for dev in ("cpu", "tpu"):
        args = [t.detach().to(dev).requires_grad_(True) for t in (init, xs, w)]
        fn = f if dev == "cpu" else torch.compile(f, backend="tpu", fullgraph=True)
        carry, ys = fn(*args)
        if dev == "tpu":
            text = _C._compile_last_program_text()
            assert _functions(text) == 1 and "stablehlo.while" in text
        (carry.square().sum() + ys.sum()).backward()
        res[dev] = [carry.detach(), ys.detach()] + [a.grad for a in args]
    for a, b in zip(res["tpu"], res["cpu"]):
        torch.testing.assert_close(a.cpu(), b, rtol=1e-4, atol=1e-4)
    st = torch_tpu.compile_stats()
    assert st["region_functions"] == 2 and st["region_calls"] == 2  # the forward's scan and the backward's


class ScaledBlock(Block):
    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return self.body(x) * scale


def test_scan_layers_equal_cpu_eager_and_compiled():
    """torch_tpu.scan_layers: a stack of identical layers as one loop over stacked weights, equal to the plain loop
    on CPU (outputs and every layer's own parameter gradients); compiled, one loop body whatever the depth."""
    torch.manual_seed(0)
    layers = torch.nn.ModuleList([ScaledBlock() for _ in range(5)])
    x = torch.randn(2, 6, D)
    ref = x.requires_grad_(True)
    for layer in layers:
        ref = layer(ref, scale=0.9)
    ref.square().mean().backward()
    want = [x.grad] + [p.grad for p in layers.parameters()]
    for compiled in (False, True):
        dev_layers = torch.nn.ModuleList([ScaledBlock() for _ in range(5)])
        dev_layers.load_state_dict(layers.state_dict())
        dev_layers = dev_layers.to("tpu")
        xt = x.detach().to("tpu").requires_grad_(True)
        fn = torch_tpu.scan_layers
        if compiled:
            fn = torch.compile(fn, backend="tpu", fullgraph=True)
        out = fn(dev_layers, xt, scale=0.9)
        torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=1e-4, atol=1e-4)
        out.square().mean().backward()
        got = [xt.grad] + [p.grad for p in dev_layers.parameters()]
        for g, w in zip(got, want):
            torch.testing.assert_close(g.cpu(), w, rtol=1e-4, atol=1e-5)
        if compiled:
            st = torch_tpu.compile_stats()
            assert st["region_functions"] == 2 and st["region_calls"] == 2, st  # the forward loop and the backward's


def test_scan_layers_rejects_unlike_layers():
    a, b = ScaledBlock(), ScaledBlock(d=8)
    x = torch.randn(2, D)
    with pytest.raises(ValueError, match="norm of layer 1 is"):
        torch_tpu.scan_layers([a, b], x)
    with pytest.raises(ValueError, match="one class"):
        torch_tpu.scan_layers([a, torch.nn.Linear(D, D)], x)
    with pytest.raises(ValueError, match="no layers"):
        torch_tpu.scan_layers([], x)
