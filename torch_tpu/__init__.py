"""torch_tpu: TPUs (any PJRT plugin) as a native PyTorch device, "tpu".

``import torch_tpu`` (or just ``import torch``: torch autoloads it through the ``torch.backends`` entry
point) renames PyTorch's PrivateUse1 backend to "tpu", loads the C++ extension that registers the ATen
kernels, picks the PJRT plugin (see :mod:`torch_tpu._plugin`), and installs ``torch.tpu`` (the device
module), ``torch.backends.tpu`` and the ``tensor.tpu()`` / ``module.tpu()`` / ``is_tpu`` conveniences.
The PJRT client itself is created on first use.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, Optional

def _autoload() -> None:
    r"""Entry point of the ``torch.backends`` group: importing this package did the work.

    PyTorch calls it during ``import torch`` unless ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``.
    """
    # Defined before `import torch`: when `import torch_tpu` runs first, torch's autoload finds this package
    # partially imported and calls this no-op; the import then completes normally.


import torch  # noqa: E402

_BACKEND = "tpu"

# ---- 1. the device name ----
if torch._C._get_privateuse1_backend_name() != _BACKEND:
    torch.utils.rename_privateuse1_backend(_BACKEND)

# ---- 2. the extension (registers kernels, guard, hooks, allocator) ----
from . import _C  # noqa: E402

# ---- 3. the plugin (the client is created lazily in C++) ----
from . import _plugin  # noqa: E402
from . import device as _device_module  # noqa: E402

_plugin_state: Dict[str, Any] = {"path": None, "kind": None, "options": {}}


def _configure_plugin() -> None:
    try:
        path, kind, options = _plugin.find_plugin()
    except (_plugin.PluginNotFoundError, ValueError) as e:
        # Keep `import torch` working without a plugin: torch.tpu.is_available() is False, and the first
        # use of the device raises this message.
        _device_module._set_plugin_error(str(e))
        return
    _plugin_state.update(path=path, kind=kind, options=options)
    _device_module._set_plugin_error(None)
    if getattr(_device_module, "_configured_plugin", None) != (path, options):  # re-import: already set
        _C._set_plugin(path, options)
        _device_module._configured_plugin = (path, options)


_configure_plugin()

# ---- 4. torch.tpu, torch.backends.tpu, generated methods ----
from . import backends as _backends  # noqa: E402

if getattr(torch, _BACKEND, None) is not _device_module:
    if hasattr(torch, _BACKEND):
        raise RuntimeError(
            f"torch.{_BACKEND} already exists ({getattr(torch, _BACKEND)!r}); torch_tpu cannot install its "
            "device module over it"
        )
    torch._register_device_module(_BACKEND, _device_module)

sys.modules.setdefault(f"torch.{_BACKEND}.amp", _device_module.amp)

if not hasattr(torch.backends, _BACKEND):
    setattr(torch.backends, _BACKEND, _backends)
    sys.modules.setdefault(f"torch.backends.{_BACKEND}", _backends)

if not hasattr(torch.Tensor, _BACKEND):
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
    )

# bfloat16 is the native low precision: make it torch.autocast("tpu")'s default dtype (autocast dtypes are
# per thread in PyTorch; this sets it for the importing thread, normally the main one).
try:
    if torch.get_autocast_dtype(_BACKEND) == torch.float16:
        torch.set_autocast_dtype(_BACKEND, torch.bfloat16)
except (AttributeError, RuntimeError):  # pragma: no cover - older torch
    pass

# ---- 5. dynamo's device interface for "tpu" (registered when dynamo's registry is imported) ----
from . import api  # noqa: E402

api._install_dynamo_hook()
from ._dynamo_backend import _install as _install_compile, compile_stats  # noqa: E402  (torch.compile backend "tpu")
_install_compile()

# ---- 6. the c10d backend "tpu_dist" ----
from . import distributed  # noqa: E402

distributed._register()

# ---- public helpers ----


def plugin_info() -> Dict[str, Any]:
    r"""The PJRT plugin in use: path, kind, options and (once loaded) its platform and attributes."""
    return _backends.plugin_info()


def fallback_counts() -> Dict[str, int]:
    r"""Per-op counts of calls that ran on the CPU fallback instead of a tpu lowering."""
    return {str(k): int(v) for k, v in dict(_C._fallback_counts()).items()}


def fallback_reasons() -> Dict[str, str]:
    r"""For ops whose lowering exists but declined a call: op -> the latest reason (e.g. an unsupported dtype)."""
    fn = getattr(_C, "_fallback_reasons", None)
    return {str(k): str(v) for k, v in dict(fn()).items()} if fn is not None else {}


def fallback_report(print_report: bool = True, file: Optional[Any] = None) -> Dict[str, int]:
    r"""Per-op CPU-fallback counts, most frequent first; also printed unless ``print_report=False``.

    Every op listed ran on the host (copying its tpu inputs to CPU and results back): the places to add a
    lowering, or to avoid, for speed. Set ``TORCH_TPU_FALLBACK_STRICT=1`` (or :func:`set_fallback_strict`)
    to make a fallback an error instead.
    """
    counts = dict(sorted(fallback_counts().items(), key=lambda kv: (-kv[1], kv[0])))
    if print_report:
        out = file if file is not None else sys.stdout
        if not counts:
            print("torch_tpu: no CPU fallbacks", file=out)
        else:
            reasons = fallback_reasons()
            width = max(len(k) for k in counts)
            digits = len(str(max(counts.values())))
            print(f"torch_tpu: {sum(counts.values())} CPU fallback calls over {len(counts)} ops", file=out)
            for op, n in counts.items():
                why = f"  ({reasons[op]})" if op in reasons else ""
                print(f"  {op:<{width}}  {n:>{digits}}{why}", file=out)
    return counts


def set_fallback_strict(strict: bool = True) -> None:
    r"""Make a CPU fallback raise (True) or run with a one-time warning per op (False)."""
    _C._set_fallback_strict(bool(strict))


def fallback_strict() -> bool:
    r"""Whether CPU fallbacks raise (see :func:`set_fallback_strict`)."""
    return bool(_C._fallback_strict())


def reset_fallback_counts() -> None:
    r"""Zero the per-op CPU-fallback counters."""
    _C._reset_fallback_counts()


def cache_stats() -> Dict[str, Any]:
    r"""Compilation cache counters: requests, hits, compiles, compile_seconds."""
    return dict(_C._cache_stats())


def __getattr__(name: str) -> Any:
    if name == "__version__":
        try:
            from importlib.metadata import version

            return version("torch_tpu")
        except Exception:
            return "0.0.0+unknown"
    raise AttributeError(f"module 'torch_tpu' has no attribute {name!r}")


__all__ = [
    "api",
    "cache_stats",
    "fallback_counts",
    "fallback_reasons",
    "fallback_report",
    "fallback_strict",
    "set_fallback_strict",
    "plugin_info",
    "reset_fallback_counts",
]


# ---- exit: let autograd's device threads let go of finished backward passes ----
# A tpu backward runs on PyTorch's autograd device thread, which drops each finished graph task (and the Python
# context `backward()` stashed in it) just after the caller's backward() has returned. If the interpreter is
# already finalizing then, that thread cannot take the GIL and the process aborts ("terminate called without an
# active exception"). At exit, one tiny backward per used device, run without a stashed Python context, makes each
# device thread finish (and drop) the previous task while the interpreter is still alive.
def _drain_autograd_device_threads() -> None:
    try:
        if not _device_module.is_initialized():
            return
        engine = torch.autograd.Variable._execution_engine
        for d in range(_device_module.device_count()):
            x = torch.zeros((), device=f"tpu:{d}", requires_grad=True)
            y = x * 1.0
            # Straight into the engine (torch.autograd.backward would stash a Python context again), accumulating
            # into x.grad so the finished task holds no Python objects of its own.
            engine.run_backward((y,), (torch.ones((), device=f"tpu:{d}"),), False, False, (), True, True)
    except Exception:  # noqa: BLE001 - best effort at exit
        pass


import atexit as _atexit  # noqa: E402

_atexit.register(_drain_autograd_device_threads)
