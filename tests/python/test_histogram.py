"""torch.histogram and torch.histogramdd on tpu against CPU's kernels: bin counts (edges from the range, from the
data, or a flat range widened) and given bin edges (sorted, repeated or unsorted), weights, density, NaN and
out-of-range points, empty inputs, out=, a compiled graph, and CPU's errors. Unweighted counts and the edges are
bit for bit CPU's; weighted sums and densities within float rounding.
"""
from __future__ import annotations

import math

import pytest
import torch

pytestmark = pytest.mark.usefixtures("strict_fallback")

DTYPES = [torch.float32, torch.float64]


def _flat(v):
    return [v] if isinstance(v, torch.Tensor) else [u for e in v for u in _flat(e)]


def _dev(v):
    if isinstance(v, torch.Tensor):
        return v.to("tpu")
    if isinstance(v, (list, tuple)) and v and isinstance(v[0], torch.Tensor):
        return [u.to("tpu") for u in v]
    return v


def _check(fn, x, *args, exact=True, **kw):
    want = fn(x, *args, **kw)
    got = fn(_dev(x), *[_dev(a) for a in args], **{k: _dev(v) for k, v in kw.items()})
    for w, g in zip(_flat(want), _flat(got), strict=True):
        assert g.device.type == "tpu"
        g = g.cpu()
        assert g.dtype == w.dtype and g.shape == w.shape
        if exact:
            assert torch.equal(g, w) or torch.equal(g.isnan(), w.isnan()) and torch.equal(g.nan_to_num(), w.nan_to_num())
        else:
            torch.testing.assert_close(g, w, equal_nan=True, rtol=1e-5, atol=1e-6)


def _inputs(dt):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(100, generator=g, dtype=dt), torch.randn(3, 7, generator=g, dtype=dt) * 10,
            torch.tensor([5.0, 5, 5], dtype=dt), torch.empty(0, dtype=dt),
            torch.tensor([0.1, 0.2, 0.3, 0.7, 1.0, 0.0, -0.0], dtype=dt),
            # points on the edges (the rightmost edge is in the last bin), NaN and infinities outside every bin
            torch.linspace(-1, 1, 1001, dtype=dt), (torch.rand(500, generator=g, dtype=dt) * 7).round() / 7,
            torch.tensor([0.5, math.nan, math.inf, -math.inf, 2.0, -3.0, 0.25], dtype=dt)]


@pytest.mark.parametrize("dt", DTYPES)
def test_histogram_bin_count(dt):
    for k, x in enumerate(_inputs(dt)):
        for bins in [1, 3, 7, 100]:
            for rng in [None, (0.0, 1.0), (-0.5, 0.5), (-3.0, 7.0), (2.0, 2.0)]:
                if rng is None and not torch.isfinite(x).all():
                    continue  # CPU raises (the data's range is not finite): test_errors
                w = torch.rand(x.shape, dtype=dt, generator=torch.Generator().manual_seed(k))
                for weight in [None, w]:
                    for density in [False, True]:
                        kw = dict(weight=weight, density=density) | ({} if rng is None else dict(range=rng))
                        _check(torch.histogram, x, bins, exact=weight is None and not density, **kw)


@pytest.mark.parametrize("dt", DTYPES)
def test_histogram_bin_edges(dt):
    g = torch.Generator().manual_seed(1)
    edge_sets = [torch.tensor([-1.0, 0, 0.5, 2]), torch.tensor([3.0, 1, 2, 0]), torch.tensor([0.0, 0, 1, 1, 2]),
                 torch.sort(torch.randn(9, generator=g)).values, torch.tensor([0.0, math.nan, 1.0])]
    for x in _inputs(dt):
        for edges in edge_sets:
            for weight in [None, torch.rand(x.shape, dtype=dt, generator=g)]:
                for density in [False, True]:
                    _check(torch.histogram, x, edges.to(dt), weight=weight, density=density,
                           exact=weight is None and not density)


@pytest.mark.parametrize("dt", DTYPES)
def test_histogramdd(dt):
    g = torch.Generator().manual_seed(2)
    for shape in [(50, 2), (4, 5, 3), (0, 2), (7, 1), (300, 3)]:
        x = torch.randn(shape, generator=g, dtype=dt)
        d = shape[-1]
        for bins in [[3] * d, [1] * d, [2, 5, 4][:d], 4]:
            for rng in [None, [-1.0, 1.0] * d]:
                for weight in [None, torch.rand(shape[:-1], generator=g, dtype=dt)]:
                    for density in [False, True]:
                        kw = dict(weight=weight, density=density) | ({} if rng is None else dict(range=rng))
                        _check(torch.histogramdd, x, bins, exact=weight is None and not density, **kw)
        edges = [torch.sort(torch.randn(4, generator=g, dtype=dt)).values for _ in range(d)]
        for weight in [None, torch.rand(shape[:-1], generator=g, dtype=dt)]:
            for density in [False, True]:
                _check(torch.histogramdd, x, edges, weight=weight, density=density,
                       exact=weight is None and not density)


def test_out_and_compile():
    x = torch.randn(60)
    h, e = torch.empty(0, device="tpu"), torch.empty(0, device="tpu")
    torch.histogram(x.to("tpu"), 6, range=(-2.0, 2.0), out=(h, e))
    want = torch.histogram(x, 6, range=(-2.0, 2.0))
    assert torch.equal(h.cpu(), want.hist) and torch.equal(e.cpu(), want.bin_edges)
    edges = torch.tensor([-1.0, 0.0, 0.3, 2.0])
    h, e = torch.empty(0, device="tpu"), torch.empty(0, device="tpu")
    torch.histogram(x.to("tpu"), edges.to("tpu"), out=(h, e))
    want = torch.histogram(x, edges)
    assert torch.equal(h.cpu(), want.hist) and torch.equal(e.cpu(), want.bin_edges)

    w = torch.rand(60)
    f = torch.compile(lambda t, w: torch.histogram(t * 2, 5, weight=w, density=True), backend="tpu", fullgraph=True)
    for g, c in zip(f(x.to("tpu"), w.to("tpu")), torch.histogram(x * 2, 5, weight=w, density=True)):
        torch.testing.assert_close(g.cpu(), c)
    pts = torch.randn(40, 2)
    f = torch.compile(lambda t: torch.histogramdd(t, [3, 4], range=[-1.0, 1.0, -2.0, 2.0]), backend="tpu",
                      fullgraph=True)
    got, want = f(pts.to("tpu")), torch.histogramdd(pts, [3, 4], range=[-1.0, 1.0, -2.0, 2.0])
    assert torch.equal(got.hist.cpu(), want.hist)
    assert all(torch.equal(a.cpu(), b) for a, b in zip(got.bin_edges, want.bin_edges, strict=True))


@pytest.mark.parametrize("call", [
    lambda d: torch.histogram(torch.tensor([1.0, 2.0], device=d), 3, range=(2.0, 1.0)),
    lambda d: torch.histogram(torch.tensor([1.0, 2.0], device=d), 3, range=(0.0, math.inf)),
    lambda d: torch.histogram(torch.tensor([1.0, 2.0], device=d), 0),
    lambda d: torch.histogram(torch.tensor([1.0, 2.0], device=d), 3, weight=torch.ones(3, device=d)),
    lambda d: torch.histogram(torch.tensor([1.0, 2.0], device=d), 3, weight=torch.ones(2, device=d).double()),
    lambda d: torch.histogram(torch.tensor([1.0, 2.0], device=d), torch.tensor([[1.0, 2.0]], device=d)),
    lambda d: torch.histogram(torch.tensor([1.0, 2.0], device=d), torch.tensor([1.0, 2.0], device=d).double()),
    lambda d: torch.histogramdd(torch.tensor([1.0, 2.0], device=d), [3]),
    lambda d: torch.histogramdd(torch.randn(4, 2, device=d), [3, 3], range=[0.0, 1.0]),
])
def test_errors(call):
    with pytest.raises(RuntimeError) as cpu_err:
        call("cpu")
    with pytest.raises(RuntimeError) as tpu_err:
        call("tpu")
    assert str(tpu_err.value) == str(cpu_err.value)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_data_range_not_finite(bad):
    with pytest.raises(RuntimeError, match="not finite"):
        torch.histogram(torch.tensor([1.0, bad]), 3)
    with pytest.raises(RuntimeError, match="not finite"):
        torch.histogram(torch.tensor([1.0, bad], device="tpu"), 3)[0].cpu()
