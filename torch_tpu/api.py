"""``torch_tpu.api``: the device-runtime surface PyTorch's internals use.

* :class:`TpuInterface` -- a ``torch._dynamo.device_interface.DeviceInterface`` for "tpu" built on
  ``torch.tpu`` (device selection, streams/events, synchronize, properties, memory). PyTorch registers a
  minimal interface of its own for "tpu" the first time dynamo's registry is used; :func:`register` runs
  that registration first and then replaces it with this one. ``torch_tpu`` calls :func:`register`
  automatically when ``torch._dynamo.device_interface`` is imported (it is not imported eagerly: dynamo
  takes seconds to import).
* ``_device_module._DeviceModule`` and ``streams.TpuStream`` / ``streams.TpuEvent`` -- the names PyTorch's
  ``torch.tpu`` shim (in PyTorch versions that ship one) imports from ``torch_tpu.api``.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Optional

import torch

from . import _streams as streams
from . import device as _dev

__all__ = ["TpuInterface", "register", "streams", "tpu_device"]  # noqa: F822 (TpuInterface is lazy)

Device = Any


def tpu_device(index: Optional[int] = None) -> torch.device:
    r"""Start the tpu runtime (if it has not started) and return the device: ``torch.device("tpu")``, or
    ``tpu:<index>``. TorchTPU's first documented call (``from torch_tpu import api; device = api.tpu_device()``);
    here ``torch.device("tpu")`` works without it, and the runtime starts on first use anyway.

    Raises RuntimeError (with the reason) when no PJRT plugin can start, and ValueError for an index out of range.
    """
    _dev._lazy_init()
    if index is None:
        return torch.device("tpu")
    n = _dev.device_count()
    if not 0 <= int(index) < n:
        raise ValueError(f"tpu device index {index} out of range: {n} tpu device(s)")
    return torch.device("tpu", int(index))


class _DeviceModule:
    r"""Static facade over ``torch.tpu`` (the shape PyTorch's ``torch.tpu`` shim expects)."""

    is_available = staticmethod(_dev.is_available)
    device_count = staticmethod(_dev.device_count)
    current_device = staticmethod(_dev.current_device)
    set_device = staticmethod(_dev.set_device)
    synchronize = staticmethod(_dev.synchronize)
    is_initialized = staticmethod(_dev.is_initialized)
    stream = staticmethod(streams.stream)
    current_stream = staticmethod(streams.current_stream)
    set_stream = staticmethod(streams.set_stream)
    default_stream = staticmethod(streams.default_stream)
    get_amp_supported_dtype = staticmethod(_dev.get_amp_supported_dtype)
    get_device_properties = staticmethod(_dev.get_device_properties)
    memory_allocated = staticmethod(_dev.memory_allocated)

    @staticmethod
    def _init_runtime(device_type: str = "tpu") -> None:
        _dev._lazy_init()


_device_module = types.ModuleType(__name__ + "._device_module", "torch_tpu.api._device_module (compat)")
_device_module._DeviceModule = _DeviceModule  # type: ignore[attr-defined]
_device_module.DeviceModule = _DeviceModule  # type: ignore[attr-defined]

# Make `from torch_tpu.api.streams import TpuStream` and `import torch_tpu.api._device_module` work although
# this is a plain module, not a package.
sys.modules.setdefault(__name__ + ".streams", streams)
sys.modules.setdefault(__name__ + "._device_module", _device_module)


# ---------------------------------------------------------------------------------------------------------
# Dynamo / Inductor device interface
# ---------------------------------------------------------------------------------------------------------

_worker_props: dict = {}
_worker_current: dict = {}

_interface: Any = None  # built by _build_interface(); read as torch_tpu.api.TpuInterface


def __getattr__(name: str) -> Any:
    if name == "TpuInterface":
        return _interface if _interface is not None else register()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _build_interface() -> Any:
    from torch._dynamo import device_interface as di

    base = getattr(di, "TpuInterface", None) or di.DeviceInterface

    class _Worker:
        @staticmethod
        def set_device(device: int) -> None:
            _worker_current["tpu"] = device

        @staticmethod
        def current_device() -> int:
            if "tpu" in _worker_current:
                return _worker_current["tpu"]
            return _dev.current_device()

        @staticmethod
        def get_device_properties(device: Device = None) -> Any:
            if device is not None:
                if isinstance(device, str):
                    device = torch.device(device)
                if isinstance(device, torch.device):
                    if device.type != "tpu":
                        raise AssertionError(f"Expected device type 'tpu', got '{device.type}'")
                    device = device.index
            if device is None:
                device = _Worker.current_device()
            if "tpu" not in _worker_props:
                _worker_props["tpu"] = [_dev.get_device_properties(i) for i in range(_dev.device_count())]
            return _worker_props["tpu"][device]

    def is_available() -> bool:
        return _dev.is_available()

    def get_compute_capability(device: Device = None) -> str:
        return ""

    def get_raw_stream(device_idx: int) -> int:
        return 0

    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True

    def is_triton_capable(device: Device = None) -> bool:
        return False

    attrs = dict(
        __doc__="torch_tpu's DeviceInterface for the 'tpu' device (see torch_tpu.api).",
        __module__=__name__,
        device=_dev.device,
        Event=streams.Event,
        Stream=streams.Stream,
        Worker=_Worker,
        current_device=staticmethod(_dev.current_device),
        set_device=staticmethod(_dev.set_device),
        exchange_device=staticmethod(_dev._exchange_device),
        maybe_exchange_device=staticmethod(_dev._maybe_exchange_device),
        device_count=staticmethod(_dev.device_count),
        is_available=staticmethod(is_available),
        stream=staticmethod(streams.stream),
        current_stream=staticmethod(streams.current_stream),
        set_stream=staticmethod(streams.set_stream),
        _set_stream_by_id=staticmethod(streams._set_stream_by_id),
        get_raw_stream=staticmethod(get_raw_stream),
        synchronize=staticmethod(_dev.synchronize),
        get_device_properties=staticmethod(_dev.get_device_properties),
        get_compute_capability=staticmethod(get_compute_capability),
        is_bf16_supported=staticmethod(is_bf16_supported),
        memory_allocated=staticmethod(_dev.memory_allocated),
        is_triton_capable=staticmethod(is_triton_capable),
    )
    return type("TpuInterface", (base,), attrs)


def register(di: Optional[types.ModuleType] = None) -> Any:
    r"""Register :class:`TpuInterface` with ``torch._dynamo.device_interface`` for "tpu"; returns it.

    Runs PyTorch's own (lazy) registration first so that it cannot later overwrite this one.
    """
    global _interface
    if di is None:
        from torch._dynamo import device_interface as di

    di.get_registered_device_interfaces()  # runs torch's init_device_reg() if it has not run yet
    if _interface is None:
        _interface = _build_interface()
    di.register_interface_for_device("tpu", _interface)
    if _dev.is_initialized():
        for i in range(_dev.device_count()):
            di.register_interface_for_device(f"tpu:{i}", _interface)
    return _interface


_DYNAMO_DI = "torch._dynamo.device_interface"


def _guarded(callback: Any, what: str) -> Any:
    """``callback(module)`` that warns instead of raising: never break dynamo's import over a registration."""

    def run(module: types.ModuleType) -> None:
        try:
            callback(module)
        except Exception as e:
            import warnings

            warnings.warn(f"torch_tpu: could not register {what}: {e!r}")

    return run


class _PostImportLoader:
    """Wraps a module's loader to run a callback once the module has executed."""

    def __init__(self, inner: Any, callback: Any) -> None:
        self._inner = inner
        self._callback = callback

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        # Leave the module's loader the real one (inspect / linecache read sources through it).
        module.__loader__ = self._inner
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._inner
        self._inner.exec_module(module)
        self._callback(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _PostImportFinder:
    """A meta-path finder that fires ``callback(module)`` after ``name`` is imported, once.

    It stays on the meta path until the module has executed: a lookup that does not import
    (``importlib.util.find_spec``, as Transformers' availability checks do) must not consume the hook.
    """

    def __init__(self, name: str, callback: Any) -> None:
        self._name = name
        self._callback = callback
        self._busy = False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self._name or self._busy:
            return None
        self._busy = True  # the finders asked below include this one
        try:
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = _PostImportLoader(spec.loader, self._fire)
                    return spec
            return None
        finally:
            self._busy = False

    def _fire(self, module: types.ModuleType) -> None:
        self.remove()
        self._callback(module)

    def remove(self) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


def _when_imported(name: str, callback: Any, what: str) -> None:
    r"""Run ``callback(module)`` now if module ``name`` is loaded, else right after it loads (without importing it).

    A re-import of torch_tpu does not add a second hook for the same module.
    """
    callback = _guarded(callback, what)
    mod = sys.modules.get(name)
    if mod is not None:
        callback(mod)
        return
    if not any(type(f).__name__ == "_PostImportFinder" and getattr(f, "_name", None) == name for f in sys.meta_path):
        sys.meta_path.insert(0, _PostImportFinder(name, callback))


def _install_dynamo_hook() -> None:
    r"""Register the dynamo interface now if dynamo's registry is loaded, else right after it loads."""
    _when_imported(_DYNAMO_DI, register, "the dynamo device interface for 'tpu'")
