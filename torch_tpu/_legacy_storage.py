"""The legacy typed storage classes of the tpu device (torch.tpu.FloatStorage, ...), as torch.cuda defines its own.

`Tensor.storage_type()` looks them up in torch.tpu, `torch.tpu.FloatStorage(n)` makes a storage of n floats on the
current tpu device, and `isinstance(t.storage(), torch.tpu.FloatStorage)` holds for a tpu float tensor's storage.
PyTorch's TypedStorage finds the device of a legacy class from the last part of its module's name, so the classes
say they live in `torch.tpu`.

Also notes PyTorch's deleter of storage byte slices (`UntypedStorage[a:b]`) so that tensors set onto a slice of a
tpu storage alias the sliced storage (core/storage.h).
"""

import torch
from torch._utils import classproperty
from torch.storage import _LegacyStorage, _warn_typed_storage_removal

_DTYPES = {
    "ByteStorage": torch.uint8,
    "DoubleStorage": torch.double,
    "FloatStorage": torch.float,
    "HalfStorage": torch.half,
    "LongStorage": torch.long,
    "IntStorage": torch.int,
    "ShortStorage": torch.short,
    "CharStorage": torch.int8,
    "BoolStorage": torch.bool,
    "BFloat16Storage": torch.bfloat16,
    "ComplexDoubleStorage": torch.cdouble,
    "ComplexFloatStorage": torch.cfloat,
}


class _TpuLegacyStorage(_LegacyStorage):
    @classmethod
    def from_buffer(cls, *args, **kwargs):
        _warn_typed_storage_removal()
        raise RuntimeError("from_buffer: Not available for tpu storage")

    @classmethod
    def _new_with_weak_ptr(cls, *args, **kwargs):
        raise RuntimeError("_new_with_weak_ptr: Not available for tpu storage")

    @classmethod
    def _new_shared_filename(cls, manager, obj, size, *, device=None, dtype=None):
        raise RuntimeError("_new_shared_filename: Not available for tpu storage")


def _make(name, dtype, module_name):
    def _dtype(cls):
        return dtype

    def _public_dtype(cls):
        _warn_typed_storage_removal()
        return dtype

    cls = type(name, (_TpuLegacyStorage,), {"dtype": classproperty(_public_dtype), "_dtype": classproperty(_dtype)})
    cls.__module__ = module_name
    cls.__qualname__ = name
    return cls


def _install(device_module, backend):
    for name, dtype in _DTYPES.items():
        if hasattr(device_module, name):
            continue
        cls = _make(name, dtype, f"torch.{backend}")
        setattr(device_module, name, cls)
        torch._storage_classes.add(cls)
    from . import _C

    _C._note_storage_slice(torch.UntypedStorage(1)[0:1]._cdata)
