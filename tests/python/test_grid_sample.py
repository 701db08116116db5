"""F.grid_sample on tpu (grid_sampler_2d/3d and their backward) against PyTorch's CPU kernels.

Every interpolation mode (bilinear, nearest, bicubic in 2-d), padding mode (zeros, border, reflection) and
align_corners, with grid points outside [-1, 1] (padding decides), exactly on the border and at pixel centres; the
gradients of input and grid (bicubic's backward runs on the CPU). And bicubic and anti-aliased F.interpolate.
"""

import itertools

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

MODES = list(itertools.product(["zeros", "border", "reflection"], [False, True]))


def _grid(shape, dtype):
    g = torch.rand(shape, dtype=dtype) * 2.6 - 1.3  # a third of the points outside the input
    g.view(-1, shape[-1])[0] = 1.0
    g.view(-1, shape[-1])[1] = 0.0
    return g


def _compare(x, grid, mode, padding, ac, backward, tol):
    kw = dict(mode=mode, padding_mode=padding, align_corners=ac)
    xc, gc = x.clone().requires_grad_(backward), grid.clone().requires_grad_(backward)
    xt, gt = x.to("tpu").requires_grad_(backward), grid.to("tpu").requires_grad_(backward)
    expected = F.grid_sample(xc, gc, **kw)
    got = F.grid_sample(xt, gt, **kw)
    torch.testing.assert_close(got.cpu(), expected, atol=tol, rtol=tol)
    if backward:
        go = torch.randn_like(expected)
        expected.backward(go)
        got.backward(go.to("tpu"))
        torch.testing.assert_close(xt.grad.cpu(), xc.grad, atol=10 * tol, rtol=10 * tol)
        torch.testing.assert_close(gt.grad.cpu(), gc.grad, atol=10 * tol, rtol=10 * tol)


@pytest.mark.parametrize("padding,align_corners", MODES)
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_2d_forward_backward(strict_fallback, mode, padding, align_corners):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 7, dtype=torch.float64)
    _compare(x, _grid((2, 4, 6, 2), torch.float64), mode, padding, align_corners, True, 1e-12)


@pytest.mark.parametrize("padding,align_corners", MODES)
def test_grid_sample_2d_bicubic(strict_fallback, padding, align_corners):
    torch.manual_seed(1)
    x = torch.randn(2, 3, 5, 7)
    _compare(x, _grid((2, 4, 6, 2), torch.float32), "bicubic", padding, align_corners, False, 1e-5)


def test_grid_sample_2d_bicubic_backward_runs_on_cpu():
    torch.manual_seed(2)
    x = torch.randn(1, 2, 4, 4)
    torch_tpu.reset_fallback_counts()
    _compare(x, _grid((1, 3, 3, 2), torch.float32), "bicubic", "border", False, True, 1e-5)
    assert "aten::grid_sampler_2d_backward" in torch_tpu.fallback_counts()
    assert "aten::grid_sampler_2d" not in torch_tpu.fallback_counts()


@pytest.mark.parametrize("padding,align_corners", MODES[::2] + [("reflection", True)])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_3d_forward_backward(strict_fallback, mode, padding, align_corners):
    torch.manual_seed(3)
    x = torch.randn(2, 3, 4, 5, 6)
    _compare(x, _grid((2, 3, 4, 2, 3), torch.float32), mode, padding, align_corners, True, 1e-5)


def test_grid_sample_half_precision(strict_fallback):
    torch.manual_seed(4)
    x = torch.randn(2, 3, 8, 8)
    grid = _grid((2, 5, 5, 2), torch.float32)
    expected = F.grid_sample(x, grid, align_corners=False)
    got = F.grid_sample(x.to("tpu", torch.bfloat16), grid.to("tpu", torch.bfloat16), align_corners=False)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float().cpu(), expected, atol=0.05, rtol=0.05)


def test_spatial_transformer_trains(strict_fallback):
    # affine_grid + grid_sample, the spatial transformer: gradients reach theta on the device.
    torch.manual_seed(5)
    theta = torch.tensor([[[0.9, 0.1, 0.05], [-0.1, 1.1, 0.0]]]).repeat(2, 1, 1)
    x = torch.randn(2, 1, 9, 9)
    losses = {}
    for dev in ("cpu", "tpu"):
        t = theta.detach().to(dev).requires_grad_()
        out = F.grid_sample(x.to(dev), F.affine_grid(t, (2, 1, 6, 6), align_corners=False), align_corners=False)
        out.square().mean().backward()
        losses[dev] = (out.detach().cpu(), t.grad.cpu())
    torch.testing.assert_close(losses["tpu"], losses["cpu"], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("size", [(13, 3), (4, 4), (1, 1)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_interpolate_bicubic(strict_fallback, size, align_corners):
    torch.manual_seed(6)
    x = torch.randn(1, 2, 7, 5, requires_grad=True)
    xt = x.detach().to("tpu").requires_grad_()
    expected = F.interpolate(x, size=size, mode="bicubic", align_corners=align_corners)
    got = F.interpolate(xt, size=size, mode="bicubic", align_corners=align_corners)
    torch.testing.assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-5)
    go = torch.randn_like(expected)
    expected.backward(go)
    got.backward(go.to("tpu"))
    torch.testing.assert_close(xt.grad.cpu(), x.grad, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("size", [(5, 7), (3, 13), (1, 1)])
def test_interpolate_antialias(strict_fallback, mode, size):
    torch.manual_seed(7)
    x = torch.randn(2, 3, 16, 10, requires_grad=True)
    xt = x.detach().to("tpu").requires_grad_()
    expected = F.interpolate(x, size=size, mode=mode, antialias=True, align_corners=False)
    got = F.interpolate(xt, size=size, mode=mode, antialias=True, align_corners=False)
    torch.testing.assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-5)
    go = torch.randn_like(expected)
    expected.backward(go)
    got.backward(go.to("tpu"))
    torch.testing.assert_close(xt.grad.cpu(), x.grad, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("scale_factor", [0.5, 1.5, 2.0, 0.37])
def test_interpolate_float64_weights(strict_fallback, mode, align_corners, scale_factor):
    # float64 inputs are weighed in float64, as CPU's kernels (their opmath type): ones stay ones to 1e-14, and
    # results and gradients agree with CPU to 1e-12 (float weights were off by 1e-7)
    x = torch.randn(2, 3, 8, 8, dtype=torch.float64)
    kw = dict(scale_factor=scale_factor, mode=mode, align_corners=align_corners)
    xc, xt = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    expected, got = F.interpolate(xc, **kw), F.interpolate(xt, **kw)
    torch.testing.assert_close(got.detach().cpu(), expected.detach(), rtol=1e-12, atol=1e-12)
    go = torch.randn_like(expected)
    expected.backward(go)
    got.backward(go.to("tpu"))
    torch.testing.assert_close(xt.grad.cpu(), xc.grad, rtol=1e-12, atol=1e-12)
    ones = F.interpolate(torch.ones(1, 1, 8, 8, dtype=torch.float64, device="tpu"), **kw).cpu()
    torch.testing.assert_close(ones, torch.ones_like(ones), rtol=0, atol=1e-14)
