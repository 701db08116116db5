"""DLPack for tpu tensors: ``torch.from_dlpack(t)``, ``torch.utils.dlpack.from_dlpack(to_dlpack(t))`` and
``torch.asarray(capsule)`` of a tpu tensor give a tpu tensor aliasing the same storage, as they do for CPU and CUDA
tensors.

PyTorch exports a tpu (PrivateUse1) tensor as an extension-device capsule (``kDLExtDev``), but its importer wraps the
capsule's data pointer in a storage of its own, which for tpu is an opaque handle without a device buffer; and
``Tensor.__dlpack_device__`` knows the PrivateUse1 device only by its unrenamed name. :func:`_install` routes capsule
imports through ``torch_tpu._C._dlpack_import`` (csrc/python/dlpack_bindings.cpp: the exporting tensor's storage,
the capsule consumed) and answers ``__dlpack_device__`` for tpu tensors. Capsules of other devices go to PyTorch's
importer unchanged; an extension-device capsule that PyTorch did not export from a tpu tensor is a ValueError.
Consumers outside PyTorch (NumPy, JAX) do not import extension-device capsules: they raise their own error.
"""

from __future__ import annotations

from typing import Any

import torch

from . import _C

_installed = False


def _install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    original_from = torch._C._from_dlpack

    def _from_dlpack(capsule: Any) -> torch.Tensor:
        t = _C._dlpack_import(capsule)
        return original_from(capsule) if t is None else t

    _from_dlpack.__doc__ = original_from.__doc__
    torch._C._from_dlpack = _from_dlpack

    original_device = torch.Tensor.__dlpack_device__

    def __dlpack_device__(self: torch.Tensor):
        if type(self) is torch.Tensor or isinstance(self, torch.nn.Parameter):
            if self.device.type == "tpu":
                from torch.utils.dlpack import DLDeviceType

                return (DLDeviceType.kDLExtDev, self.device.index if self.device.index is not None else 0)
        return original_device(self)

    __dlpack_device__.__doc__ = original_device.__doc__
    torch.Tensor.__dlpack_device__ = __dlpack_device__  # type: ignore[method-assign]

    original_asarray = torch.asarray

    def asarray(obj: Any, *args: Any, **kwargs: Any) -> torch.Tensor:
        if type(obj).__name__ == "PyCapsule":
            t = _C._dlpack_import(obj)
            if t is not None:
                return original_asarray(t, *args, **kwargs)
        return original_asarray(obj, *args, **kwargs)

    asarray.__doc__ = original_asarray.__doc__
    torch.asarray = asarray
