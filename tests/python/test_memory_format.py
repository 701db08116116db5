"""Memory formats propagate as on CPU: a fresh result has the strides PyTorch's meta kernel gives it (TensorIterator
follows its inputs' layout: channels_last in, channels_last out; a transposed input gives a transposed result), and
its values are right in that layout."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu  # noqa: F401

CL = torch.channels_last
CL3 = torch.channels_last_3d


def _nchw(device, shape=(2, 3, 4, 4), fmt=CL):
    g = torch.Generator().manual_seed(0)
    return torch.randn(shape, generator=g).to(device).contiguous(memory_format=fmt)


CASES = {
    "add": lambda a: a + 1,
    "mul_self": lambda a: a * a,
    "relu": torch.relu,
    "gelu": F.gelu,
    "where": lambda a: torch.where(a > 0, a, 0.0),
    "cat_dim0": lambda a: torch.cat([a, a]),
    "cat_dim1": lambda a: torch.cat([a, a], 1),
    "stack": lambda a: torch.stack([a, a]),
    "clone": lambda a: a.clone(),
    "contiguous_cl": lambda a: a.contiguous().contiguous(memory_format=CL),
    "empty_like": lambda a: torch.empty_like(a).fill_(1),
    "zeros_like": torch.zeros_like,
    "ones_like": torch.ones_like,
    "to_half": lambda a: a.to(torch.float16),
    "batch_norm": lambda a: F.batch_norm(a, None, None, training=True),
    "max_pool": lambda a: F.max_pool2d(a, 2),
    "avg_pool": lambda a: F.avg_pool2d(a, 2),
    "interpolate": lambda a: F.interpolate(a, scale_factor=2),
    "sum_keepdim": lambda a: a.sum(1, keepdim=True),
    "softmax": lambda a: torch.softmax(a, 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_channels_last_propagates(name):
    f = CASES[name]
    ref = f(_nchw("cpu"))
    out = f(_nchw("tpu"))
    assert out.stride() == ref.stride(), name
    assert out.is_contiguous(memory_format=CL) == ref.is_contiguous(memory_format=CL)
    torch.testing.assert_close(out.cpu(), ref, atol=1e-3, rtol=1e-3)


def test_channels_last_3d_and_permuted_inputs():
    for f in (lambda a: a + 1, lambda a: torch.cat([a, a], 2), torch.neg):
        ref, out = f(_nchw("cpu", (2, 3, 2, 3, 4), CL3)), f(_nchw("tpu", (2, 3, 2, 3, 4), CL3))
        assert out.stride() == ref.stride()
        torch.testing.assert_close(out.cpu(), ref)
    x = torch.arange(12.0).reshape(3, 4)
    for f in (lambda t: t.t() + 1, lambda t: t.t() * t.t(), lambda t: torch.exp(t.t())):
        ref, out = f(x), f(x.to("tpu"))
        assert out.stride() == ref.stride() == (1, 4)
        torch.testing.assert_close(out.cpu(), ref)
        # a later op reads the permuted result right, eager and in a chain
        torch.testing.assert_close((out @ out.t()).cpu(), ref @ ref.t())


def test_resize_as_and_out_keep_format():
    a = _nchw("tpu")
    r = torch.empty(0, device="tpu")
    r.resize_as_(a, memory_format=torch.preserve_format)
    assert r.is_contiguous(memory_format=CL)
    # out= keeps the out tensor's own layout (it has the right size already)
    out = torch.empty(2, 3, 4, 4, device="tpu")
    torch.add(a, 1, out=out)
    assert out.is_contiguous()
    torch.testing.assert_close(out.cpu(), _nchw("cpu") + 1)


def test_channels_last_training_step_matches_cpu():
    torch.manual_seed(0)
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    conv_t = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    conv_t.load_state_dict(conv.state_dict())
    conv = conv.to(memory_format=CL)
    conv_t = conv_t.to("tpu", memory_format=CL)
    x = _nchw("cpu", (2, 3, 6, 6))
    for m, inp in ((conv, x), (conv_t, x.to("tpu"))):
        m(inp).square().mean().backward()
    for p, q in zip(conv.parameters(), conv_t.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("x_cl,w_cl", [(True, False), (False, True), (True, True), (False, False)])
@pytest.mark.parametrize("dims", [2, 3])
def test_convolution_results_follow_channels_last_inputs(x_cl, w_cl, dims):
    # CPU's and CUDA's convolutions give channels_last outputs, input gradients and weight gradients when the input or
    # the weight is channels_last (PyTorch's meta kernel does not say so).
    fmt = CL if dims == 2 else CL3
    conv = F.conv2d if dims == 2 else F.conv3d
    spatial = (5, 5) if dims == 2 else (4, 4, 4)
    res = {}
    for dev in ("cpu", "tpu"):
        g = torch.Generator().manual_seed(0)
        x = torch.randn((2, 3) + spatial, generator=g).to(dev)
        w = torch.randn((4, 3) + (3,) * dims, generator=g).to(dev)
        b = torch.randn(4, generator=g).to(dev)
        if x_cl:
            x = x.contiguous(memory_format=fmt)
        if w_cl:
            w = w.contiguous(memory_format=fmt)
        x.requires_grad_()
        w.requires_grad_()
        y = conv(x, w, b, padding=1)
        gx, gw = torch.autograd.grad(y, (x, w), torch.ones_like(y))
        res[dev] = (y, gx, gw)
    for c, t in zip(res["cpu"], res["tpu"]):
        assert t.stride() == c.stride()
        torch.testing.assert_close(t.detach().cpu(), c.detach(), atol=1e-4, rtol=1e-4)


def test_compiled_graph_outputs_have_eager_strides():
    # A compiled graph's outputs have the strides PyTorch's graph metadata gives them (as backend="aot_eager" on CPU
    # returns them): channels_last stays channels_last, a transposed result stays transposed, values as on CPU.
    x = _nchw("cpu", (2, 3, 4, 4))
    y = torch.randn(3, 5)

    def pointwise(a):
        return torch.relu(a) + 1

    def transposed(a):
        return a.t() * 2

    for fn, inp in ((pointwise, x), (transposed, y)):
        want = torch.compile(fn, backend="aot_eager")(inp)
        got = torch.compile(fn, backend="tpu")(inp.to("tpu"))
        assert got.stride() == want.stride()
        torch.testing.assert_close(got.cpu(), want)


def test_compiled_channels_last_convolution_matches_cpu():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU()).to(memory_format=CL)
    mt = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU())
    mt.load_state_dict(m.state_dict())
    mt = mt.to("tpu", memory_format=CL)
    x = _nchw("cpu", (2, 3, 6, 6)).requires_grad_()
    xt = x.detach().to("tpu").requires_grad_()
    want = torch.compile(m, backend="aot_eager")(x)
    got = torch.compile(mt, backend="tpu")(xt)
    assert got.stride() == want.stride()
    torch.testing.assert_close(got.detach().cpu(), want.detach(), atol=1e-5, rtol=1e-5)
    want.square().sum().backward()
    got.square().sum().backward()
    assert xt.grad.stride() == x.grad.stride()
    assert mt[0].weight.grad.stride() == m[0].weight.grad.stride()
    torch.testing.assert_close(xt.grad.cpu(), x.grad, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("fmt", [CL, torch.contiguous_format])
def test_ambiguous_size_one_strides_propagate(fmt):
    # A (n, c, 1, 1) tensor is both contiguous and channels_last; its strides (which differ only in size-1 dims) still
    # propagate to results as on CPU, and the two layouts do not share a cached program.
    for dev in ("cpu", "tpu"):
        a = torch.rand(10, 3, 1, 1, device=dev).to(memory_format=fmt)
        b = torch.rand(3, 1, 1, device=dev)
        for r in (a + b, b + a, a * 5):
            assert r.stride() == a.stride()


def test_resized_out_takes_the_result_permutation():
    # An out= tensor the call resizes gets the strides CPU gives it (the inputs' permutation for TensorIterator ops,
    # contiguous for products).
    for fn in (lambda x, o: torch.exp(x, out=o), lambda x, o: torch.add(x, x, out=o),
               lambda x, o: torch.mm(x[0], x[0].t(), out=o)):
        res = {}
        for dev in ("cpu", "tpu"):
            x = torch.arange(24.0, device=dev).reshape(2, 3, 4).permute(2, 0, 1)
            out = torch.empty(0, device=dev)
            fn(x, out)
            res[dev] = out
        assert res["tpu"].stride() == res["cpu"].stride()
        torch.testing.assert_close(res["tpu"].cpu(), res["cpu"])


def test_cpu_tensor_indexed_by_tpu_indices_raises_like_cpu():
    x = torch.randn(3, 4)
    with pytest.raises(RuntimeError, match=r"indices should be either .* \(cpu\)"):
        x[torch.tensor([0, 2], device="tpu")]
