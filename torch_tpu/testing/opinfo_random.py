"""Distribution comparison for random ops in the OpInfo sweep (torch_tpu/testing/opinfo.py): seeded draws pooled
per output, compared between tpu and CPU through per-draw statistics (NaN and value frequencies, mean, median,
spread) and, for independent elements, a two-sample Kolmogorov-Smirnov test."""
from __future__ import annotations

import contextlib
import math
from typing import Callable, List, Optional

import torch
from torch.utils._pytree import tree_flatten

from torch_tpu.testing.tolerances import tol


@contextlib.contextmanager
def _free_seed():
    """OpInfos of random ops reseed (torch.manual_seed(42)) before every call; pooled draws need fresh streams."""
    import torch.testing._internal.common_methods_invocations as cmi

    saved = cmi.wrapper_set_seed
    cmi.wrapper_set_seed = lambda op, *a, **k: op(*a, **k)
    try:
        yield
    finally:
        cmi.wrapper_set_seed = saved


def _ks_statistic(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.sort().values, b.sort().values
    allv = torch.cat([a, b])
    fa = torch.searchsorted(a, allv, right=True).double() / a.numel()
    fb = torch.searchsorted(b, allv, right=True).double() / b.numel()
    return float((fa - fb).abs().max())


def _z_test(name: str, a: List[float], b: List[float], rtol: float = 1e-6, atol: float = 1e-9) -> Optional[str]:
    """Means of per-draw statistics: equal within 5 standard errors plus the dtype's tolerance (the draws are
    independent; the elements of one draw need not be)."""
    ta, tb = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    ta, tb = ta[ta.isfinite()], tb[tb.isfinite()]
    if ta.numel() < 2 or tb.numel() < 2:
        return None
    ma, mb = float(ta.mean()), float(tb.mean())
    se = math.sqrt(float(ta.var()) / ta.numel() + float(tb.var()) / tb.numel())
    if abs(ma - mb) > 5 * se + rtol * abs(mb) + atol:
        return f"{name} {ma:.5g} on tpu vs {mb:.5g} on CPU (standard error {se:.3g}, {ta.numel()} draws)"
    return None


def _same_distribution(a: List[torch.Tensor], b: List[torch.Tensor], heavy_tailed: bool,
                       independent: bool, dtype: Optional[torch.dtype] = None) -> Optional[str]:
    """Draws of one output on tpu (a) and CPU (b), each a 1-D float64 tensor: NaN and value frequencies, mean,
    median and spread compared through per-draw statistics; for ops whose elements are independent draws, also a
    two-sample Kolmogorov-Smirnov test on the pooled elements."""
    # XLA flushes subnormal results (and intermediates) to zero where CPU keeps them: magnitudes below 1e-7 of the
    # output's largest finite magnitude (or below the smallest normal float32) count as zero on both sides.
    finite = [x[x.isfinite()].abs() for x in a + b]
    top = max([float(x.max()) for x in finite if x.numel()] or [0.0])
    tiny = max(torch.finfo(torch.float32).tiny, 1e-7 * top)
    a = [torch.where(x.abs() < tiny, torch.zeros_like(x), x) for x in a]
    b = [torch.where(x.abs() < tiny, torch.zeros_like(x), x) for x in b]
    if sum(x.numel() for x in a) == 0 or sum(x.numel() for x in b) == 0:
        return None
    frac = lambda xs, f: [float(f(x).double().mean()) for x in xs if x.numel()]  # noqa: E731
    err = _z_test("NaN frequency", frac(a, torch.isnan), frac(b, torch.isnan))
    if err is not None:
        return err
    a = [x[~x.isnan()] for x in a]
    b = [x[~x.isnan()] for x in b]
    pa, pb = torch.cat(a), torch.cat(b)
    if pa.numel() == 0 or pb.numel() == 0:
        return None
    values = torch.unique(torch.cat([pa, pb]))
    z_tol = (tol(dtype) if dtype is not None and (dtype.is_floating_point or dtype.is_complex)
           else dict(rtol=1e-6, atol=1e-9))
    if values.numel() <= 32 and bool((values == values.round()).all()):  # integer-valued: every value's frequency
        for v in values.tolist():
            err = _z_test(f"frequency of {v:g}", frac(a, lambda x: x == v), frac(b, lambda x: x == v))
            if err is not None:
                return err
    else:
        stat = lambda xs, f: [float(f(x[x.isfinite()])) for x in xs if x.isfinite().sum() > 1]  # noqa: E731
        tests = [("median", lambda x: x.median())]
        if not heavy_tailed:
            tests += [("mean", lambda x: x.mean()), ("standard deviation", lambda x: x.std())]
        for name, f in tests:
            err = _z_test(name, stat(a, f), stat(b, f), **z_tol)
            if err is not None:
                return err
    if independent:
        n, m = pa.numel(), pb.numel()
        d = _ks_statistic(pa, pb)
        crit = 1.95 * math.sqrt((n + m) / (n * m))  # alpha = 0.001
        if d > crit:
            return f"Kolmogorov-Smirnov statistic {d:.4f} > {crit:.4f} ({n}/{m} elements)"
    return None


def _draws(run: Callable[[int], object], count: int) -> List[List[torch.Tensor]]:
    """count seeded runs; per output leaf, the list of its flattened draws."""
    pooled: List[List[torch.Tensor]] = []
    for r in range(count):
        torch.manual_seed(1000 + r)
        leaves = [t for t in tree_flatten(run(r))[0] if isinstance(t, torch.Tensor)]
        if not pooled:
            pooled = [[] for _ in leaves]
        for k, t in enumerate(leaves):
            # a copy: in-place random ops return the same tensor every draw, and for a float64 CPU tensor
            # .cpu().double() would keep a view of it
            pooled[k].append(t.detach().reshape(-1).to("cpu", torch.float64, copy=True))
    return pooled
