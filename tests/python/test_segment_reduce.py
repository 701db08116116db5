"""torch.segment_reduce on tpu (segment_reduce and _segment_reduce_backward) against PyTorch's CPU kernels: every
reduction, lengths and offsets, axis 0 and 1, empty segments, `initial`, ties (max/min share the gradient) and
zeros (prod), and CPU's checks of the lengths as device-side checks."""

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
    with pytest.raises(RuntimeError, match=message):
        torch.segment_reduce(torch.randn(6, device="tpu"), "sum", lengths=torch.tensor(lengths, device="tpu")).cpu()
