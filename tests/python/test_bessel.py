"""torch.special's Bessel functions j0, j1, y0, y1, the modified Bessel functions of the second kind k0, k1 (and
their exp-scaled forms) and the Airy function Ai on tpu, against CPU's kernels: every branch of their approximations
and its edges, the special values (0, negative arguments, infinities, NaN), float32 and float64, eager and compiled.
"""
from __future__ import annotations

import math

import pytest
import torch

pytestmark = pytest.mark.usefixtures("strict_fallback")

FNS = ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1",
       "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "airy_ai"]

# The branch edges of the approximations (1e-5, 2, 2.09, 5, 8.3203353, 103.892) from both sides, and special values.
EDGES = [0.0, -0.0, 1e-7, 9.99e-6, 1.001e-5, 0.5, 1.999, 2.0, 2.001, 2.0899, 2.09, 2.0901, 4.999, 5.0, 5.001,
         8.32, 8.3204, 20.0, 50.0, 103.0, 103.9, 200.0, 1e4, math.inf, -math.inf, math.nan]


def _inputs(dtype):
    grid = torch.linspace(-12, 40, 2601, dtype=torch.float64)
    edges = torch.tensor(EDGES + [-e for e in EDGES if e == e], dtype=torch.float64)
    return torch.cat([grid, edges]).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("fn", FNS)
def test_matches_cpu(fn, dtype):
    f = getattr(torch.special, fn)
    x = _inputs(dtype)
    want = f(x)
    got = f(x.to("tpu")).cpu()
    assert got.dtype == want.dtype
    # float32: the device's sin/cos/exp/log may differ from the C library's by an ulp or two, which the oscillating
    # forms amplify near their zeros (absolute tolerance), and by more for the large phases of Ai far left (sin and
    # cos of about 700 at x = -104: 1e-5 there, where both differ from the float64 value by as much); float64 agrees
    # to about 1e-13.
    tol = dict(rtol=2e-5, atol=2e-5) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(got, want, equal_nan=True, **tol)
    # the special values exactly: infinities, NaN and zeros where CPU gives them
    special = ~torch.isfinite(want) | (want == 0)
    assert torch.equal(torch.isnan(got[special]), torch.isnan(want[special]))
    both = special & ~torch.isnan(want)
    assert torch.equal(got[both], want[both])


def test_integer_inputs_and_out_and_compile():
    i = torch.arange(-3, 9)
    for fn in FNS:
        f = getattr(torch.special, fn)
        want = f(i)
        got = f(i.to("tpu"))
        assert got.dtype == want.dtype == torch.float32
        torch.testing.assert_close(got.cpu(), want, equal_nan=True, rtol=2e-5, atol=2e-6)
        out = torch.empty(12, dtype=torch.float64, device="tpu")
        f(i.to("tpu").double(), out=out)
        torch.testing.assert_close(out.cpu(), f(i.double()), equal_nan=True, rtol=1e-10, atol=1e-12)
    x = torch.linspace(0.1, 12, 64)
    g = torch.compile(lambda t: torch.special.bessel_j0(t) + torch.special.airy_ai(-t)
                      + torch.special.scaled_modified_bessel_k1(t), backend="tpu", fullgraph=True)
    want = torch.special.bessel_j0(x) + torch.special.airy_ai(-x) + torch.special.scaled_modified_bessel_k1(x)
    torch.testing.assert_close(g(x.to("tpu")).cpu(), want, rtol=2e-5, atol=2e-6)
