"""searchsorted and bucketize against CPU: PyTorch's binary search step by step, so that every answer is CPU's,
also for sequences that are not sorted, NaNs, sorters and N-d sequences."""

from __future__ import annotations

import pytest
import torch

import torch_tpu  # noqa: F401


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 100])
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_matches_cpu(n, right):
    g = torch.Generator().manual_seed(n)
    for unsorted in (False, True):
        s = torch.randn(n, generator=g)
        if not unsorted:
            s = s.sort().values
        s[torch.rand(n, generator=g) < 0.1] = float("nan")
        v = torch.randn(50, generator=g)
        v[::7] = float("nan")
        v[3] = s[0]
        assert torch.equal(torch.searchsorted(s.to("tpu"), v.to("tpu"), right=right).cpu(),
                           torch.searchsorted(s, v, right=right))
    s2 = torch.randn(4, n, generator=g).sort(-1).values
    v2 = torch.randn(4, 9, generator=g)
    assert torch.equal(torch.searchsorted(s2.to("tpu"), v2.to("tpu"), right=right).cpu(),
                       torch.searchsorted(s2, v2, right=right))
    seq = torch.randn(n, generator=g)
    srt = seq.argsort()
    assert torch.equal(torch.searchsorted(seq.to("tpu"), v.to("tpu"), sorter=srt.to("tpu"), right=right).cpu(),
                       torch.searchsorted(seq, v, sorter=srt, right=right))
    ii = torch.randint(0, 10, (30,), generator=g)
    bd = torch.tensor([1, 3, 3, 5, 9])
    assert torch.equal(torch.bucketize(ii.to("tpu"), bd.to("tpu"), right=right).cpu(),
                       torch.bucketize(ii, bd, right=right))


def test_searchsorted_unsorted_permuted_rows_match_cpu():
    # test_reductions' test_bucketization: boundaries that are not sorted, permuted, int32 values, float64 sequence.
    v3 = torch.tensor([[[1, 3, 5], [2, 4, 6]], [[1, 2, 3], [4, 5, 6]]])
    vp, bp = v3.permute(2, 1, 0).to(torch.int32), v3.permute(2, 1, 0).to(torch.float64)
    for right in (False, True):
        got = torch.searchsorted(bp.to("tpu"), vp.to("tpu"), right=right).cpu()
        assert torch.equal(got, torch.searchsorted(bp, vp, right=right))


def test_non_contiguous_warnings_as_on_cpu():
    # CPU's (and CUDA's) searchsorted/bucketize warn about non-contiguous boundaries, values and sorters, in that order
    import warnings

    def calls(d):
        b = torch.tensor([[1.0, 2], [3, 4], [5, 6]], device=d).t()
        v = torch.tensor([[2.0, 5]], device=d)
        bd = torch.tensor([1.0, 3, 5], device=d)
        return {
            "searchsorted": lambda: torch.searchsorted(b, v.expand(2, 2)),
            "out": lambda: torch.searchsorted(b, v.expand(2, 2), out=torch.empty(2, 2, dtype=torch.long, device=d)),
            "bucketize_out": lambda: torch.bucketize(v.expand(3, 2).t(), bd,
                                                     out=torch.empty(2, 3, dtype=torch.long, device=d)),
            "scalar": lambda: torch.searchsorted(b[0], 3.0),
            "bucketize": lambda: torch.bucketize(torch.rand(3, 4, device=d).t(), bd),
            "contiguous": lambda: torch.bucketize(v, bd),
        }

    prev = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    try:
        for name in calls("cpu"):
            got = {}
            for d in ("cpu", "tpu"):
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    calls(d)[name]()
                got[d] = [str(x.message).split(" (Triggered")[0] for x in w if "searchsorted()" in str(x.message)]
            assert got["tpu"] == got["cpu"], name
    finally:
        torch.set_warn_always(prev)
