"""Adaptive and fractional max pooling, multi-margin, multilabel-margin and CTC losses on the device, against CPU.

Every op here has a lowering (forward and backward); the tests run with strict fallbacks, so a call that reached the
CPU fallback would raise. Max pooling indices must equal CPU's exactly (first maximum in scan order, last NaN);
fractional pooling is compared given the same random samples, and its module path (samples drawn on the device) is
checked for consistency.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

pytestmark = pytest.mark.usefixtures("strict_fallback")


def _ties(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-4, 5, shape, generator=g).to(dtype)  # many equal values: ties decide the indices
    return x


def _close(a, b, dtype=torch.float32):
    tol = dict(atol=1e-5, rtol=1e-5) if dtype in (torch.float32, torch.float64) else dict(atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(a.cpu(), b, **tol, equal_nan=True)


def _fwd_bwd(fn, inputs, dtype=torch.float32, grad_arg=0, exact=False):
    """Runs fn on CPU and on tpu; compares outputs (exactly for indices) and the gradient of grad_arg."""
    cpu = [t.clone().requires_grad_(i == grad_arg) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
           for i, t in enumerate(inputs)]
    dev = [t.detach().to("tpu").requires_grad_(i == grad_arg)
           if isinstance(t, torch.Tensor) and t.is_floating_point() else (t.to("tpu") if isinstance(t, torch.Tensor)
                                                                         else t)
           for i, t in enumerate(inputs)]
    out_c, out_d = fn(*cpu), fn(*dev)
    if not isinstance(out_c, tuple):
        out_c, out_d = (out_c,), (out_d,)
    for a, b in zip(out_d, out_c):
        assert a.device.type == "tpu" and a.shape == b.shape and a.dtype == b.dtype
        if exact or not b.is_floating_point():
            assert torch.equal(a.cpu(), b) or torch.equal(a.cpu().isnan(), b.isnan()) and torch.equal(
                a.cpu().nan_to_num(), b.nan_to_num()), f"{a.cpu()} vs {b}"
        else:
            _close(a, b, dtype)
    g = torch.randn(out_c[0].shape, generator=torch.Generator().manual_seed(1)).to(out_c[0].dtype)
    out_c[0].backward(g)
    out_d[0].backward(g.to("tpu"))
    _close(dev[grad_arg].grad, cpu[grad_arg].grad, dtype)


# ---- adaptive max pooling ----

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape,out", [((2, 3, 7, 9), (3, 4)), ((3, 5, 6), (1, 1)), ((1, 2, 8, 8), (4, 3))])
def test_adaptive_max_pool2d(dtype, shape, out):
    x = _ties(shape, dtype)
    x.view(-1)[5] = float("nan")
    x.view(-1)[7] = float("nan")
    _fwd_bwd(lambda t: F.adaptive_max_pool2d(t, out, return_indices=True), [x], dtype, exact=True)


def test_adaptive_max_pool3d():
    x = _ties((1, 2, 5, 6, 7))
    x.view(-1)[11] = float("nan")
    _fwd_bwd(lambda t: F.adaptive_max_pool3d(t, (2, 3, 4), return_indices=True), [x], exact=True)
    _fwd_bwd(lambda t: F.adaptive_max_pool3d(t, (5, 1, 3), return_indices=True), [_ties((2, 5, 4, 6), seed=3)],
             exact=True)


def test_adaptive_max_pool1d_module():
    _fwd_bwd(torch.nn.AdaptiveMaxPool1d(4, return_indices=True), [_ties((2, 3, 11))], exact=True)


# ---- fractional max pooling ----

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fractional_max_pool2d_given_samples(dtype):
    g = torch.Generator().manual_seed(2)
    x = _ties((2, 3, 11, 10), dtype)
    x.view(-1)[3] = float("nan")
    u = torch.rand(2, 3, 2, generator=g).to(dtype)
    _fwd_bwd(lambda t, s: F.fractional_max_pool2d(t, 3, output_size=(5, 4), return_indices=True, _random_samples=s),
             [x, u], dtype, exact=True)
    # unbatched, kernel (2, 3), output ratio
    x3, u3 = _ties((3, 9, 12), dtype, seed=4), torch.rand(1, 3, 2, generator=g).to(dtype)
    _fwd_bwd(lambda t, s: F.fractional_max_pool2d(t, (2, 3), output_ratio=(0.5, 0.5), return_indices=True,
                                                  _random_samples=s), [x3, u3], dtype, exact=True)


def test_fractional_max_pool3d_given_samples():
    g = torch.Generator().manual_seed(5)
    x = _ties((2, 2, 7, 8, 9))
    u = torch.rand(2, 2, 3, generator=g)
    _fwd_bwd(lambda t, s: F.fractional_max_pool3d(t, (2, 3, 2), output_size=(4, 3, 5), return_indices=True,
                                                  _random_samples=s), [x, u], exact=True)
    # unbatched with more sample rows than batches (PyTorch's ModuleInfo does this): the kernels read the first row
    before = dict(torch_tpu._C._fallback_counts())
    _fwd_bwd(lambda t, s: F.fractional_max_pool3d(t, 2, output_ratio=0.5, return_indices=True, _random_samples=s),
             [_ties((2, 5, 5, 5), seed=6), torch.rand(2, 2, 3, generator=g)], exact=True)
    assert dict(torch_tpu._C._fallback_counts()) == before


@pytest.mark.parametrize("nd", [2, 3])
def test_fractional_max_pool_module_draws_on_device(nd):
    torch.manual_seed(0)
    shape = (2, 3, 9, 10) if nd == 2 else (2, 2, 6, 7, 8)
    x = torch.randn(shape).to("tpu").requires_grad_(True)
    mod = (torch.nn.FractionalMaxPool2d(2, output_ratio=0.5, return_indices=True) if nd == 2
           else torch.nn.FractionalMaxPool3d(2, output_ratio=0.5, return_indices=True))
    out, idx = mod(x)
    out.sum().backward()
    flat = x.detach().cpu().flatten(-nd)
    picked = flat.gather(-1, idx.cpu().flatten(-nd)).view(out.shape)
    assert torch.equal(picked, out.detach().cpu())
    grad = torch.zeros_like(flat).scatter_add_(-1, idx.cpu().flatten(-nd), torch.ones_like(picked).flatten(-nd))
    assert torch.equal(x.grad.cpu(), grad.view(shape))


# ---- multi-margin and multilabel-margin losses ----

@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multi_margin_loss(p, reduction):
    g = torch.Generator().manual_seed(6)
    x = torch.randn(5, 7, generator=g)
    t = torch.randint(0, 7, (5,), generator=g)
    w = torch.rand(7, generator=g)
    _fwd_bwd(lambda a, b, c: F.multi_margin_loss(a, b, p=p, margin=0.7, weight=c, reduction=reduction), [x, t, w])
    _fwd_bwd(lambda a, b: F.multi_margin_loss(a, b, p=p, reduction=reduction), [x[0], t[0]])  # 1-d input


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multilabel_margin_loss(reduction):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(4, 6, generator=g)
    t = torch.tensor([[3, 0, -1, 1, 2, 2], [5, 5, 1, 0, 2, 3], [-1, 2, 3, 0, 0, 0], [1, 4, 2, 0, 3, -1]])
    _fwd_bwd(lambda a, b: F.multilabel_margin_loss(a, b, reduction=reduction), [x, t])
    _fwd_bwd(lambda a, b: F.multilabel_margin_loss(a, b, reduction=reduction), [x[1], t[3]])  # 1-d input


def test_multi_margin_loss_target_out_of_range():
    x, t = torch.randn(3, 4), torch.tensor([0, 4, 1])
    with pytest.raises(RuntimeError):
        F.multi_margin_loss(x, t)
    with pytest.raises(RuntimeError, match="target out of range"):
        F.multi_margin_loss(x.to("tpu"), t.to("tpu")).cpu()


def test_multilabel_margin_loss_target_out_of_range():
    x, t = torch.randn(2, 4), torch.tensor([[0, 4, -1, 0], [1, 2, -1, 0]])
    with pytest.raises(RuntimeError):
        F.multilabel_margin_loss(x, t)
    with pytest.raises(RuntimeError, match="out of range"):
        F.multilabel_margin_loss(x.to("tpu"), t.to("tpu")).cpu()


# ---- CTC loss ----

def _ctc_inputs(T=12, N=3, C=6, seed=8):
    g = torch.Generator().manual_seed(seed)
    lp = torch.randn(T, N, C, generator=g).log_softmax(-1)
    return lp, g


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_ctc_loss_padded_targets(reduction):
    lp, g = _ctc_inputs()
    targets = torch.randint(1, 6, (3, 5), generator=g)
    targets[0, 1] = targets[0, 0]  # a repeated label (no s-2 transition)
    il, tl = [12, 9, 10], [5, 3, 0]
    _fwd_bwd(lambda a, b: F.ctc_loss(a, b, il, tl, blank=0, reduction=reduction), [lp, targets])


def test_ctc_loss_concatenated_targets_tensor_lengths_blank():
    lp, g = _ctc_inputs(T=10, N=4, C=5, seed=9)
    tl = torch.tensor([2, 4, 1, 3])
    targets = torch.randint(0, 4, (int(tl.sum()),), generator=g)  # blank is 4
    il = torch.tensor([10, 8, 10, 7])
    _fwd_bwd(lambda a, b: F.ctc_loss(a, b, il, tl, blank=4, reduction="sum"), [lp, targets])


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss_impossible_alignment(zero_infinity):
    lp, g = _ctc_inputs(T=4, N=2, C=4, seed=10)
    targets = torch.tensor([[1, 1, 1, 2], [1, 2, 3, 1]])  # item 0 needs 7 frames: infinite loss
    _fwd_bwd(lambda a, b: F.ctc_loss(a, b, [4, 4], [4, 2], reduction="none", zero_infinity=zero_infinity),
             [lp, targets])


def test_ctc_loss_unbatched():
    lp, g = _ctc_inputs(T=7, N=1, C=5, seed=11)
    targets = torch.tensor([1, 3, 3])
    _fwd_bwd(lambda a, b: F.ctc_loss(a, b, [7], [3], reduction="mean"), [lp[:, 0], targets])


def test_ctc_loss_module():
    lp, g = _ctc_inputs(T=9, N=2, C=5, seed=12)
    targets = torch.tensor([[1, 2, 2], [4, 3, 0]])
    _fwd_bwd(torch.nn.CTCLoss(blank=0), [lp, targets, torch.tensor([9, 6]), torch.tensor([3, 2])])


# ---- compiled ----

def _compiled(fn, *args):
    torch._dynamo.reset()
    out_c = fn(*args)
    out_d = torch.compile(fn, backend="tpu", fullgraph=True)(*[a.to("tpu") for a in args])
    if not isinstance(out_c, tuple):
        out_c, out_d = (out_c,), (out_d,)
    for a, b in zip(out_d, out_c):
        if b.is_floating_point():
            _close(a, b)
        else:
            assert torch.equal(a.cpu(), b)


def test_compiled_pooling():
    _compiled(lambda x: F.adaptive_max_pool2d(x, (3, 2), return_indices=True), _ties((2, 3, 7, 5)))
    _compiled(lambda x: F.adaptive_max_pool3d(x, (2, 2, 3), return_indices=True), _ties((1, 2, 5, 4, 6)))
    g = torch.Generator().manual_seed(13)
    _compiled(lambda x, u: F.fractional_max_pool2d(x, 2, output_size=(4, 5), return_indices=True,
                                                   _random_samples=u),
              _ties((2, 2, 9, 10)), torch.rand(2, 2, 2, generator=g))
    _compiled(lambda x, u: F.fractional_max_pool3d(x, 2, output_size=(3, 4, 3), return_indices=True,
                                                   _random_samples=u),
              _ties((1, 2, 6, 7, 6)), torch.rand(1, 2, 3, generator=g))


def test_compiled_losses():
    g = torch.Generator().manual_seed(14)
    x = torch.randn(4, 5, generator=g)
    _compiled(lambda a, t: F.multi_margin_loss(a, t, p=2, margin=0.5), x, torch.tensor([0, 4, 2, 2]))
    # No -1 in the targets: graphs trace PyTorch's decomposition of multilabel_margin_loss_forward, which counts the
    # positions after a -1 too (its CPU kernel stops at the -1; eager mode on tpu matches the kernel).
    _compiled(lambda a, t: F.multilabel_margin_loss(a, t), x, torch.tensor([[1, 2, 4, 0, 3]] * 4))
    # No CTC case: PyTorch tags aten::_ctc_loss dynamic_output_shape, so Dynamo cannot capture it in any graph.


@pytest.mark.parametrize("p", [0.99, 0.5, 0.01, 1.5, 3.0])
def test_cdist_backward_where_a_coordinate_difference_is_zero(p):
    # |d|^(p-1) is infinite at d == 0 for p < 1: that element's gradient term is 0, as on CPU (no NaN)
    x = torch.tensor([[0.3, -1.2], [2.0, 0.5]])
    y = torch.stack([x[0] + torch.tensor([1.0, 0.0]), torch.tensor([0.1, 0.5])])
    grads = {}
    for dev in ("cpu", "tpu"):
        a, b = x.detach().to(dev).requires_grad_(True), y.detach().to(dev).requires_grad_(True)
        torch.cdist(a, b, p=p).backward(torch.ones(2, 2, device=dev))
        grads[dev] = (a.grad.cpu(), b.grad.cpu())
    for g, w in zip(grads["tpu"], grads["cpu"]):
        assert not g.isnan().any()
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")])
@pytest.mark.parametrize("n,m", [(1, 3), (2, 3), (7, 5), (33, 4), (6, 0)])
def test_pdist_forward_backward(strict_fallback, dtype, p, n, m):
    # every pair i < j in row-major order; a repeated row (a zero distance) gives no NaN in the gradient
    x = torch.randn(n, m, dtype=dtype, generator=torch.Generator().manual_seed(n * 10 + m))
    if n > 3:
        x[3] = x[1]
    xc, xt = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    expected, got = F.pdist(xc, p), F.pdist(xt, p)
    torch.testing.assert_close(got.cpu(), expected.detach())
    if expected.numel():
        g = torch.randn(expected.shape, dtype=dtype, generator=torch.Generator().manual_seed(1))
        expected.backward(g)
        got.backward(g.to("tpu"))
        torch.testing.assert_close(xt.grad.cpu(), xc.grad)


def test_cdist_backward_infinity_norm(strict_fallback):
    a, b = torch.randn(4, 3, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    ac, at = a.clone().requires_grad_(), a.to("tpu").requires_grad_()
    torch.cdist(ac, b, float("inf")).sum().backward()
    torch.cdist(at, b.to("tpu"), float("inf")).sum().backward()
    torch.testing.assert_close(at.grad.cpu(), ac.grad)


@pytest.mark.parametrize("call", [
    lambda x: F.avg_pool2d(x, 2, stride=(1, 3010182406857593769)),
    lambda x: F.max_pool2d(x, 2, stride=(1, 3010182406857593769)),
    lambda x: F.max_pool3d(x.unsqueeze(0), (1, 2, 2), stride=(1, 1, 3010182406857593769)),
])
def test_pool_window_arguments_past_int_raise_as_cpu(call):
    # CPU's kernels convert windows to int and raise instead of overflowing; so do these calls (CPU's error)
    x = torch.randn(1, 2, 4, 4)
    with pytest.raises(RuntimeError, match="value cannot be converted to type int without overflow"):
        call(x)
    with pytest.raises(RuntimeError, match="value cannot be converted to type int without overflow"):
        call(x.to("tpu"))


@pytest.mark.parametrize("kwargs,message", [
    (dict(kernel_size=(0, 1)), "kernel size should be greater than zero"),
    (dict(kernel_size=(3, 3), dilation=(0, 1)), "dilation should be greater than zero"),
    (dict(kernel_size=(3, 3), padding=(-1, 0)), "padding should be non-negative"),
    (dict(kernel_size=(3, 3), stride=(0, 1)), "stride should be greater than zero"),
])
def test_unfold_invalid_windows_raise_as_cpu(kwargs, message):
    # CPU's error (in strict fallback mode, PyTorch's meta kernel words some of them differently)
    x = torch.randn(1, 3, 8, 8)
    prev = torch_tpu.fallback_strict()
    torch_tpu.set_fallback_strict(False)
    try:
        for t in (x, x.to("tpu")):
            with pytest.raises(RuntimeError, match=message):
                F.unfold(t, **kwargs)
    finally:
        torch_tpu.set_fallback_strict(prev)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, float("inf")])
def test_pdist_cdist_propagate_nan(p):
    # infinite rows differ by NaN: distances are NaN as on CPU (p = 0 included, where vector_norm counts a NaN as
    # nonzero), except cdist's infinity norm, whose running max skips NaN on CPU and CUDA
    x = torch.full((2, 2), float("inf"), dtype=torch.float64)
    for f in (lambda t: F.pdist(t, p), lambda t: torch.cdist(t, t, p)):
        torch.testing.assert_close(f(x.to("tpu")).cpu(), f(x), equal_nan=True)
