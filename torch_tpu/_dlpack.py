"""DLPack for tpu tensors.

Within PyTorch a tpu tensor round-trips through DLPack aliasing its storage: ``torch.utils.dlpack.to_dlpack(t)``
(or ``t.__dlpack__()``) makes a capsule whose device is ``kDLExtDev`` (PyTorch's DLPack device for PrivateUse1,
index = the tpu device) and whose data pointer is the tensor's address in its storage; ``torch.from_dlpack`` /
``torch.asarray`` of it build a tensor over that address (``at::from_blob``), which the first tpu kernel to see it
turns into a view of the exporting tensor's storage (``storageOf`` in csrc/core/storage.h). Writes through either
tensor are seen by both, as on CUDA.

PyTorch's ``Tensor.__dlpack_device__`` recognizes the PrivateUse1 backend only under its original name
("privateuse1") and raises ``ValueError: Unknown device type tpu for Dlpack`` for the renamed one, so
``torch.from_dlpack(t)`` (which asks the producer for its device first) failed. This module wraps it: a tensor on
the renamed backend reports ``(kDLExtDev, index)``; every other tensor goes to PyTorch's method unchanged. The wrap
goes away when PyTorch compares against ``torch._C._get_privateuse1_backend_name()``.

Other frameworks: a tpu storage is a PJRT buffer that a write replaces (buffers are immutable), so no consumer
outside PyTorch can alias it. A consumer that asks for a CPU copy (``numpy.from_dlpack(t, device="cpu")`` passes
``dl_device=(kDLCPU, 0)``) gets one from PyTorch's own ``__dlpack__`` (``copy=False`` raises); one that takes the
capsule as it is sees the ``kDLExtDev`` device and refuses it with its own error (NumPy: "Unsupported device in
DLTensor").
"""

from __future__ import annotations

import functools

import torch

_MARK = "_torch_tpu_wrapped"


def _install() -> None:
    original = torch.Tensor.__dlpack_device__
    if getattr(original, _MARK, False):
        return
    backend = torch._C._get_privateuse1_backend_name()

    @functools.wraps(original)
    def __dlpack_device__(self):
        if type(self) is torch.Tensor or not torch.overrides.has_torch_function_unary(self):
            device = self.device
            if device.type == backend:
                from torch.utils.dlpack import DLDeviceType

                return (DLDeviceType.kDLExtDev, device.index if device.index is not None else 0)
        return original(self)

    setattr(__dlpack_device__, _MARK, True)
    torch.Tensor.__dlpack_device__ = __dlpack_device__
