"""DLPack round trips of tpu tensors alias the same storage (as on CPU and CUDA); errors are clear."""

import numpy as np
import pytest
import torch
from torch.utils.dlpack import DLDeviceType, from_dlpack, to_dlpack

import torch_tpu  # noqa: F401

IMPORTS = {
    "from_dlpack(tensor)": lambda t: torch.from_dlpack(t),
    "from_dlpack(to_dlpack)": lambda t: from_dlpack(to_dlpack(t)),
    "from_dlpack(__dlpack__)": lambda t: torch.from_dlpack(t.__dlpack__()),
    "asarray(capsule)": lambda t: torch.asarray(to_dlpack(t)),
    "versioned capsule": lambda t: torch.from_dlpack(t.__dlpack__(max_version=(1, 0))),
}


def _views(x):
    return {"whole": x, "narrow": x[:, 1:], "transposed": x.t(), "row": x[1], "strided": x[:, ::2],
            "size-1 dim": x[:1]}


@pytest.mark.parametrize("how", list(IMPORTS))
def test_round_trip_aliases(how):
    x = torch.arange(12.0, device="tpu").reshape(3, 4)
    for name, t in _views(x).items():
        y = IMPORTS[how](t)
        assert y.device == t.device and y.dtype == t.dtype and y.shape == t.shape, name
        assert y.untyped_storage().data_ptr() == t.untyped_storage().data_ptr(), name
        torch.testing.assert_close(y.cpu(), t.cpu())
        y.mul_(2).add_(1)  # writes through the import are seen by the exporter, and back
        torch.testing.assert_close(t.cpu(), y.cpu())
        t.sub_(1)
        torch.testing.assert_close(y.cpu(), t.cpu())
    # the exporting tensor may go away: the import keeps the storage
    z = torch.full((5,), 3.0, device="tpu")
    w = IMPORTS[how](z)
    del z
    torch.testing.assert_close(w.cpu(), torch.full((5,), 3.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int8,
                                   torch.uint8, torch.int32, torch.int64, torch.bool, torch.complex64])
def test_dtypes(dtype):
    src = torch.arange(6).reshape(2, 3) % 2 if dtype is torch.bool else torch.arange(6).reshape(2, 3)
    t = src.to(dtype).to("tpu")
    y = torch.from_dlpack(t)
    assert y.dtype == dtype
    assert torch.equal(y.cpu(), t.cpu())


def test_device_and_cpu_paths_unchanged():
    x = torch.ones(2, 3, device="tpu")
    assert x.__dlpack_device__() == (DLDeviceType.kDLExtDev, 0)
    c = torch.arange(4.0)
    y = torch.from_dlpack(c)  # CPU capsules still go to PyTorch's importer
    y[0] = 7
    assert c[0] == 7
    n = np.arange(3.0)
    assert torch.equal(torch.from_dlpack(n), torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64))


def test_errors():
    x = torch.ones(3, device="tpu")
    cap = to_dlpack(x)
    from_dlpack(cap)
    with pytest.raises(RuntimeError, match="consumed only once"):
        from_dlpack(cap)
    with pytest.raises(BufferError, match="require gradient"):  # as on CPU
        torch.ones(2, device="tpu", requires_grad=True).__dlpack__()
    with pytest.raises(RuntimeError):  # NumPy does not import extension-device memory
        np.from_dlpack(x)
