"""torch.segment_reduce on tpu (segment_reduce and _segment_reduce_backward) against PyTorch's CPU kernels: every
reduction, lengths and offsets, axis 0 and 1, empty segments, `initial`, ties (max/min share the gradient), zeros
and NaNs, and CPU's checks of the lengths."""

import itertools

import pytest
import torch

import torch_tpu

CASES = [
    (torch.tensor([2.0, 2, 1, 0, 3, 4, 0, 0]), dict(lengths=torch.tensor([3, 3, 0, 2]))),  # ties, zeros, empty
    ((6, 3), dict(lengths=torch.tensor([2, 0, 4]))),
    ((6, 3), dict(offsets=torch.tensor([0, 2, 2, 6]))),
    ((2, 6, 3), dict(lengths=torch.tensor([[2, 4], [3, 3]]), axis=1)),
    ((2, 6), dict(offsets=torch.tensor([[0, 1, 6], [0, 3, 6]]), axis=1)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("initial", [None, 2.0])
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_segment_reduce_matches_cpu(strict_fallback, case, reduce, initial, dtype):
    data, kw = CASES[case]
    x = data if isinstance(data, torch.Tensor) else torch.randn(data, generator=torch.Generator().manual_seed(case))
    x = x.to(dtype)
    results = []
    for dev in ("cpu", "tpu"):
        xd = x.clone().to(dev).requires_grad_()
        out = torch.segment_reduce(xd, reduce, initial=initial, **{k: v.to(dev) if isinstance(v, torch.Tensor) else v
                                                                    for k, v in kw.items()})
        out.backward((torch.arange(out.numel(), dtype=dtype).reshape(out.shape) + 1).to(dev))
        results.append((out.detach().cpu(), xd.grad.cpu()))
    for e, g in zip(*results):
        torch.testing.assert_close(g, e, equal_nan=True)


@pytest.mark.parametrize("lengths,message", [([2, -1, 5], "lengths contains negative value"),
                                             ([2, 2, 1], "Expected all rows of lengths along axis to sum")])
def test_segment_reduce_checks(lengths, message):
    # raised at the call, as CPU and CUDA do (they read the lengths back); `unsafe` skips the checks
    data, lens = torch.randn(6, device="tpu"), torch.tensor(lengths, device="tpu")
    with pytest.raises(RuntimeError, match=message):
        torch.segment_reduce(data, "sum", lengths=lens)
    torch.segment_reduce(data, "sum", lengths=lens, unsafe=True).cpu()


@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("include_self", [False, True])
def test_scatter_and_index_reduce_keep_nan(reduce, include_self):
    # a NaN among the values a max/min scatter combines gives NaN, as on CPU (it used to be skipped)
    src = torch.tensor([1.0, float("nan"), 3.0, 2.0, 5.0, float("nan")])
    idx = torch.tensor([0, 0, 1, 1, 2, 2])
    expected = torch.zeros(3).scatter_reduce(0, idx, src, reduce, include_self=include_self)
    got = torch.zeros(3, device="tpu").scatter_reduce(0, idx.to("tpu"), src.to("tpu"), reduce,
                                                      include_self=include_self)
    torch.testing.assert_close(got.cpu(), expected, equal_nan=True)
    expected = torch.zeros(3).index_reduce(0, idx, src, reduce, include_self=include_self)
    got = torch.zeros(3, device="tpu").index_reduce(0, idx.to("tpu"), src.to("tpu"), reduce,
                                                    include_self=include_self)
    torch.testing.assert_close(got.cpu(), expected, equal_nan=True)


@pytest.mark.parametrize("reduce", ["max", "min", "prod"])
def test_segment_reduce_nan(strict_fallback, reduce):
    # a NaN wins a max/min segment and gets its gradient; prod's gradient of a NaN or zero is the others' product
    x0 = torch.tensor([1, float("nan"), 3, 4, 5, 5, 0, 0, 2, 0, float("nan")])
    lengths = torch.tensor([1, 2, 3, 0, 2, 3])
    results = []
    for dev in ("cpu", "tpu"):
        x = x0.clone().to(dev).requires_grad_()
        out = torch.segment_reduce(x, reduce, lengths=lengths.to(dev), initial=2.0)
        out.sum().backward()
        results.append((out.detach().cpu(), x.grad.cpu()))
    for e, g in zip(*results):
        torch.testing.assert_close(g, e, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_scatter_reduce_complex(strict_fallback, dtype):
    # sum, prod and mean of complex values on the device (amax/amin raise on CPU and are left to it)
    g = torch.Generator().manual_seed(0)
    self = torch.randn(4, 5, dtype=dtype, generator=g)
    src = torch.randn(4, 5, dtype=dtype, generator=g)
    idx = torch.randint(0, 4, (4, 5), generator=g)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.complex64 else {}
    for red in ("sum", "prod", "mean"):
        for include_self in (True, False):
            got = self.to("tpu").scatter_reduce(0, idx.to("tpu"), src.to("tpu"), red, include_self=include_self)
            torch.testing.assert_close(got.cpu(), self.scatter_reduce(0, idx, src, red, include_self=include_self),
                                       **tol)
    for red in ("add", "multiply"):
        got = self.to("tpu").scatter(0, idx.to("tpu"), src.to("tpu"), reduce=red)
        torch.testing.assert_close(got.cpu(), self.scatter(0, idx, src, reduce=red), **tol)


def test_segment_reduce_negative_axis(strict_fallback):
    x = torch.arange(12.0).reshape(2, 6)
    lengths = torch.tensor([[2, 4], [3, 3]])
    got = torch.segment_reduce(x.to("tpu"), "sum", lengths=lengths.to("tpu"), axis=-1)
    torch.testing.assert_close(got.cpu(), torch.segment_reduce(x, "sum", lengths=lengths, axis=-1))
