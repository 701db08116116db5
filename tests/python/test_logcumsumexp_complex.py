"""Complex logcumsumexp on tpu against CPU's kernel, which adds one element at a time (log-add-exp in complex128):
the imaginary parts follow CPU's branches (not reduced to (-pi, pi]), every pairing of the special values (NaN,
infinite real parts, infinite imaginary parts, zeros) as CPU gives it, along every dim; the backward (autograd's
formula reads logcumsumexp of complex numbers again) and a compiled graph, all without the CPU fallback.
"""
from __future__ import annotations

import math

import pytest
import torch

pytestmark = pytest.mark.usefixtures("strict_fallback")

DTYPES = [torch.complex64, torch.complex128]
inf, nan = math.inf, math.nan


def _check(x, dim):
    want = torch.logcumsumexp(x, dim)
    got = torch.logcumsumexp(x.to("tpu"), dim).cpu()
    assert got.dtype == want.dtype and got.shape == want.shape
    for part in (torch.real, torch.imag):
        w, g = part(want), part(got)
        assert torch.equal(w.isnan(), g.isnan())
        fin = torch.isfinite(w)
        assert torch.equal(w[~fin & ~w.isnan()], g[~fin & ~w.isnan()])  # infinities (and their signs) exactly
        # complex64 results are CPU's bit for bit (both accumulate in complex128); complex128 within rounding (up to
        # 2e-14 apart measured after 300 additions)
        tol = dict(rtol=0, atol=0) if x.dtype == torch.complex64 else dict(rtol=1e-13, atol=1e-13)
        torch.testing.assert_close(g[fin], w[fin], **tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_random(dtype):
    g = torch.Generator().manual_seed(0)
    _check(torch.randn(5, 7, generator=g, dtype=dtype) * 3, 1)
    _check(torch.randn(5, 7, generator=g, dtype=dtype) * 3, 0)
    _check(torch.randn(3, 4, 6, generator=g, dtype=dtype) * 10, -2)
    _check(torch.randn(300, generator=g, dtype=dtype) * 2, 0)
    # large imaginary parts: the results' imaginary parts lie far outside (-pi, pi], on CPU's branches
    x = torch.complex(torch.randn(60, generator=g), torch.randn(60, generator=g) * 20).to(dtype)
    _check(x, 0)
    assert torch.logcumsumexp(x.to("tpu"), 0).imag.abs().max() > 2 * math.pi
    _check(torch.tensor(complex(1, 2), dtype=dtype), 0)
    _check(torch.empty(0, 3, dtype=dtype), 0)


SPECIAL = [complex(inf, 0), complex(-inf, 0), complex(-inf, 1), complex(inf, 2), complex(nan, 0), complex(0, nan),
           complex(1, inf), complex(-inf, -3), complex(0, 0), complex(-0.0, 0), complex(2, 3), complex(inf, inf)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_special_values(dtype):
    for a in SPECIAL:
        for b in SPECIAL:
            _check(torch.tensor([a, b, complex(0.5, 0.5)], dtype=dtype), 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_backward_and_compile(dtype):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 6, generator=g, dtype=dtype)
    grad = torch.randn(4, 6, generator=g, dtype=dtype)
    xc = x.clone().requires_grad_()
    torch.logcumsumexp(xc, 1).backward(grad)
    xt = x.to("tpu").requires_grad_()
    torch.logcumsumexp(xt, 1).backward(grad.to("tpu"))
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.complex64 else dict(rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(xt.grad.cpu(), xc.grad, **tol)
    f = torch.compile(lambda t: torch.logcumsumexp(t * 2, 0), backend="tpu", fullgraph=True)
    torch.testing.assert_close(f(x.to("tpu")).cpu(), torch.logcumsumexp(x * 2, 0), **tol)
    out = torch.empty(4, 6, dtype=dtype, device="tpu")
    torch.logcumsumexp(x.to("tpu"), 1, out=out)
    torch.testing.assert_close(out.cpu(), torch.logcumsumexp(x, 1), **tol)
