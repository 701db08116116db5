"""torch.linalg.matrix_exp (scaling and squaring with a Taylor polynomial) and the regularized incomplete gamma
functions (series and continued fraction) on tpu against PyTorch's CPU kernels: matrix_exp forward and backward, real
and complex, batched, with norms from 0 to well past 1 (several squarings); igamma/igammac over small to large
arguments, exact values and CPU's special cases."""

import math

import pytest
import torch

import torch_tpu

TOL = {torch.float32: 2e-5, torch.float64: 1e-12, torch.complex64: 2e-5, torch.complex128: 1e-12}


@pytest.mark.parametrize("dtype", list(TOL))
@pytest.mark.parametrize("shape,scale", [((3, 3), 1.0), ((2, 4, 4), 5.0), ((5, 5), 0.01), ((1, 1), 3.0),
                                         ((3, 2, 2), 20.0), ((6, 6), 0.0), ((2, 0, 0), 1.0)])
def test_matrix_exp_matches_cpu(strict_fallback, dtype, shape, scale):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(shape, dtype=dtype, generator=g) * scale
    tol = TOL[dtype]
    ac, at = a.clone().requires_grad_(), a.to("tpu").requires_grad_()
    expected, got = torch.linalg.matrix_exp(ac), torch.linalg.matrix_exp(at)
    torch.testing.assert_close(got.detach().cpu(), expected.detach(), rtol=tol, atol=tol * expected.abs().max().item() if a.numel() else 0)
    if a.numel():
        go = torch.randn(shape, dtype=dtype, generator=g)
        expected.backward(go)
        got.backward(go.to("tpu"))
        torch.testing.assert_close(at.grad.cpu(), ac.grad, rtol=tol, atol=tol * ac.grad.abs().max().item())


def test_matrix_exp_rotation_and_nan(strict_fallback):
    # exp of a skew-symmetric generator is the rotation by its angle; a NaN gives NaN as on CPU
    theta = 2.5
    a = torch.tensor([[0.0, -theta], [theta, 0.0]], dtype=torch.float64, device="tpu")
    r = torch.tensor([[torch.cos(torch.tensor(theta)), -torch.sin(torch.tensor(theta))],
                      [torch.sin(torch.tensor(theta)), torch.cos(torch.tensor(theta))]], dtype=torch.float64)
    torch.testing.assert_close(torch.linalg.matrix_exp(a).cpu(), r)
    n = torch.tensor([[float("nan"), 0.0], [0.0, 1.0]])
    assert torch.linalg.matrix_exp(n.to("tpu")).cpu().isnan().all() == torch.linalg.matrix_exp(n).isnan().all()


# ---- the regularized incomplete gamma functions (igamma / igammac, torch.special.gammainc / gammaincc) ----

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("a_range,x_range", [((0.01, 1), (0.01, 1)), ((0.1, 10), (0.1, 10)), ((1, 50), (0.1, 80)),
                                             ((20, 200), (15, 250)), ((100, 2000), (50, 3000))])
def test_igamma_matches_cpu(strict_fallback, dtype, a_range, x_range):
    g = torch.Generator().manual_seed(0)
    a = (torch.rand(500, dtype=torch.float64, generator=g) * (a_range[1] - a_range[0]) + a_range[0]).to(dtype)
    x = (torch.rand(500, dtype=torch.float64, generator=g) * (x_range[1] - x_range[0]) + x_range[0]).to(dtype)
    # CPU's float64 asymptotic series (20 < a < 200, x near a) is itself off by up to 4e-10 from the exact value
    tol = 2e-6 if dtype == torch.float32 else 1e-9
    for f in (torch.igamma, torch.igammac):
        torch.testing.assert_close(f(a.to("tpu"), x.to("tpu")).cpu(), f(a, x), rtol=0, atol=tol)


def test_igamma_exact_values_and_special_cases(strict_fallback):
    # Q(n, x) = e^-x sum_{k<n} x^k / k! for whole n
    x = torch.tensor([0.5, 3.0, 7.5, 20.0], dtype=torch.float64)
    for n in (1, 4, 12):
        q = torch.exp(-x) * sum(x ** k / math.factorial(k) for k in range(n))
        got = torch.igammac(torch.full_like(x, n).to("tpu"), x.to("tpu")).cpu()
        torch.testing.assert_close(got, q, rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(torch.igamma(torch.full_like(x, n).to("tpu"), x.to("tpu")).cpu(), 1 - q,
                                   rtol=1e-12, atol=1e-14)
    a = torch.tensor([0.0, 0.0, 1.0, -1.0, float("nan"), float("inf"), 2.0, float("inf"), 3.0])
    xs = torch.tensor([0.0, 2.0, 0.0, 1.0, 1.0, 3.0, float("inf"), float("inf"), -1.0])
    for f in (torch.igamma, torch.igammac):
        torch.testing.assert_close(f(a.to("tpu"), xs.to("tpu")).cpu(), f(a, xs), equal_nan=True)
