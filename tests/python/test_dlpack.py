"""DLPack with tpu tensors (torch_tpu/_dlpack.py, csrc/core/storage.h).

* Within PyTorch a tpu tensor round-trips through DLPack aliasing its storage, as CUDA tensors do: the capsule's
  device is kDLExtDev with the tpu index, ``torch.from_dlpack`` / ``torch.asarray`` give a tensor with the same
  data pointer on the same device, and a write through either tensor is seen by the other. Views (offsets inside
  the storage, transposes, strides) and every dtype a tpu tensor has keep their values.
* Exporting keeps PyTorch's own checks (requires_grad, conjugate bit: BufferError).
* Other frameworks cannot alias a tpu storage (its PJRT buffer is immutable and replaced on every write): NumPy
  refuses the kDLExtDev capsule, gets a CPU copy with ``device="cpu"``; ``copy=False`` to the CPU raises.
* A tensor over an address no live tpu storage holds raises a RuntimeError naming the address.
Every value is compared with the same steps on CPU.
"""

import gc

import numpy as np
import pytest
import torch
from torch.utils.dlpack import DLDeviceType, from_dlpack, to_dlpack

import torch_tpu  # noqa: F401


class _Producer:
    """An object that is not a tensor but speaks the DLPack protocol (what torch.asarray accepts)."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, **kwargs):
        return self.t.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16, torch.bool, torch.uint8,
                                   torch.complex64])
def test_capsule_round_trip_aliases(dtype):
    cpu = torch.arange(12).reshape(3, 4).to(dtype)
    x = cpu.to("tpu")
    capsule = to_dlpack(x)
    y = from_dlpack(capsule)
    assert y.device == x.device and y.dtype == dtype and y.shape == x.shape and y.stride() == x.stride()
    assert y.data_ptr() == x.data_ptr()
    assert torch.equal(y.cpu(), cpu)
    # a write through the imported tensor is seen by the exporting one, and back
    y[1] = cpu[0]
    expected = cpu.clone()
    expected[1] = cpu[0]
    assert torch.equal(x.cpu(), expected)
    x[2] = cpu[1]
    expected[2] = cpu[1]
    assert torch.equal(y.cpu(), expected)


def test_protocol_and_asarray_alias():
    x = torch.randn(5, 6).to("tpu")
    assert x.__dlpack_device__() == (DLDeviceType.kDLExtDev, 0)
    for y in (torch.from_dlpack(x), torch.asarray(_Producer(x)), torch.from_dlpack(x.__dlpack__())):
        assert y.device == x.device and y.data_ptr() == x.data_ptr()
        before = x.cpu()
        y.mul_(2)
        assert torch.equal(x.cpu(), before * 2)
        x.sub_(1)
        assert torch.equal(y.cpu(), before * 2 - 1)


@pytest.mark.parametrize("view", ["row", "narrow", "transpose", "strided", "element"])
def test_views_alias_their_place_in_the_storage(view):
    make = {
        "row": lambda t: t[2],
        "narrow": lambda t: t[1:, 2:5],
        "transpose": lambda t: t.t(),
        "strided": lambda t: t[::2, 1::3],
        "element": lambda t: t[3, 4],
    }[view]
    cpu = torch.arange(30, dtype=torch.float32).reshape(5, 6)
    x = cpu.to("tpu")
    y = torch.from_dlpack(make(x))
    ref = make(cpu.clone())
    assert y.shape == ref.shape and y.stride() == ref.stride()
    assert y.data_ptr() == make(x).data_ptr()
    assert torch.equal(y.cpu(), ref)
    # the write lands in the exporting tensor's storage where the view is
    y.add_(100)
    expected = cpu.clone()
    make(expected).add_(100)
    assert torch.equal(x.cpu(), expected)
    # and the imported tensor reads later writes of the exporter
    x.neg_()
    assert torch.equal(y.cpu(), make(-expected))


def test_views_of_the_imported_tensor_and_lifetime():
    cpu = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    x = cpu.to("tpu")
    y = from_dlpack(to_dlpack(x[1:]))
    z = y[:, 1:3]  # a view made before any kernel saw y
    z.fill_(-1)
    expected = cpu.clone()
    expected[1:][:, 1:3] = -1
    assert torch.equal(x.cpu(), expected)
    del x
    gc.collect()
    # the capsule keeps the storage alive for the importer
    assert torch.equal(y.cpu(), expected[1:])
    assert torch.equal((y * 2).cpu(), expected[1:] * 2)


def test_second_device():
    x = torch.arange(6.0).to("tpu:1")
    assert x.__dlpack_device__() == (DLDeviceType.kDLExtDev, 1)
    y = torch.from_dlpack(x)
    assert y.device == torch.device("tpu:1") and y.data_ptr() == x.data_ptr()
    y.add_(1)
    assert torch.equal(x.cpu(), torch.arange(6.0) + 1)


def test_export_checks_as_pytorch():
    x = torch.ones(3, device="tpu", requires_grad=True)
    with pytest.raises(BufferError, match="require gradient"):
        x.__dlpack__()
    c = torch.ones(3, dtype=torch.complex64).to("tpu").conj()
    with pytest.raises(BufferError, match="conjugate"):
        c.__dlpack__()


def test_resize_keeps_imported_aliases_apart():
    # a storage that grows past its address range gets a new one; tensors imported before keep reading theirs
    x = torch.arange(4.0).to("tpu")
    y = torch.from_dlpack(x)
    x.resize_(4096)
    x[:4] = torch.arange(4.0).to("tpu") + 10
    other = torch.zeros(8).to("tpu")
    assert torch.equal(y.cpu(), torch.arange(4.0) + 10)
    assert torch.equal(other.cpu(), torch.zeros(8))


def test_numpy_gets_a_copy_on_request():
    cpu = torch.randn(3, 4)
    x = cpu.to("tpu")
    # asked for the CPU (device="cpu": dl_device kDLCPU), PyTorch's __dlpack__ copies to the host
    a = np.from_dlpack(x, device="cpu")
    np.testing.assert_array_equal(a, cpu.numpy())
    x.add_(1)  # a copy: later writes are not seen
    np.testing.assert_array_equal(a, cpu.numpy())
    # the device's own capsule (kDLExtDev) is refused by NumPy, and a copy-free export to the CPU by PyTorch
    with pytest.raises((BufferError, RuntimeError), match="Unsupported device"):
        np.from_dlpack(x)
    with pytest.raises((BufferError, ValueError, RuntimeError)):
        x.__dlpack__(dl_device=(DLDeviceType.kDLCPU, 0), copy=False)


def test_tensor_over_a_foreign_address_raises():
    x = torch.arange(4.0).to("tpu")
    capsule = to_dlpack(x)
    del x
    gc.collect()
    # the capsule holds the storage: still readable
    assert torch.equal(from_dlpack(capsule).cpu(), torch.arange(4.0))
    # a storage over an address that is no tpu storage's (host memory) cannot back a tpu tensor
    host = torch.arange(4.0)
    storage = torch._C._construct_storage_from_data_pointer(host.data_ptr(), torch.device("tpu:0"), 16)
    with pytest.raises(RuntimeError, match="was not made by torch_tpu"):
        torch.empty(0, device="tpu").set_(storage).cpu()
