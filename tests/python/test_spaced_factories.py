"""linspace, logspace and arange(out=) on tpu against CPU: the same numbers bit for bit for integer, half, bfloat16
and float32 results (CPU's order of conversions and roundings), the plain and out= forms on the device alike, and
CPU's warning when arange resizes its out= tensor."""

import warnings

import pytest
import torch

import torch_tpu  # noqa: F401

DTYPES = [torch.int16, torch.int64, torch.uint8, torch.bfloat16, torch.float16, torch.float32]
RANGES = [(0.3, 1.1), (0.7, 3.9), (1.0, 127.0), (2.25, 2.25 + 5.5)]


@pytest.mark.parametrize("fn", ["linspace", "logspace"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_spaced_bit_equal_to_cpu(fn, dtype):
    f = getattr(torch, fn)
    before = torch_tpu.fallback_counts()
    for start, end in RANGES:
        for steps in (1, 7, 50):
            kw = {"base": 2.0} if fn == "logspace" else {}
            ref = f(start, end, steps, dtype=dtype, **kw)
            got = f(start, end, steps, dtype=dtype, device="tpu", **kw).cpu()
            out = torch.empty(0, dtype=dtype, device="tpu")
            f(start, end, steps, out=out, **kw)
            assert torch.equal(got, ref), (start, end, steps, got, ref)
            assert torch.equal(out.cpu(), ref), (start, end, steps)
    assert torch_tpu.fallback_counts() == before  # the out= forms run on the device too


def test_arange_out_resize_warning_as_on_cpu():
    for d in ("cpu", "tpu"):
        line = torch.zeros(1, 49, device=d)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            torch.arange(-1, 1, 2.0 / 49, dtype=torch.float32, out=line)
        assert line.shape == (50,)
        assert any("The out tensor will be resized" in str(x.message) for x in w), d
    r = torch.empty(0, dtype=torch.long, device="tpu")
    torch.arange(0, 10, 3, out=r)
    assert r.tolist() == [0, 3, 6, 9]
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        torch.arange(0, 10, 0, out=r)
