"""``torch.compile(model)`` (the default backend, inductor) on tpu tensors.

PyTorch's inductor maps device ``tpu`` to its Pallas code generator, whose kernels are Mosaic (Pallas TPU)
programs exported with ``jax.export(platforms=["tpu"])`` and run through
:mod:`torch_tpu._internal.pallas.tpu_torch_pallas`. Mosaic runs only on a TPU plugin (libtpu). On the other
plugins (CPU, CUDA) torch_tpu sends inductor's graphs whose tensors are on tpu to the ``tpu`` backend instead
(AOTAutograd and one XLA program per graph, as ``torch.compile(backend="tpu")``), with a one-time notice.
Graphs on other devices are never touched: inductor compiles them as always.

``TORCH_TPU_INDUCTOR``: ``auto`` (default: Pallas on a TPU plugin, else the tpu backend), ``pallas`` (always
inductor's Pallas code generator, which then needs jax and a plugin that runs its kernels), ``tpu`` (always the
tpu backend). Inductor options (``mode=``, ``options=``) do not apply to redirected graphs.
"""

from __future__ import annotations

import functools
import logging
import warnings
from typing import Any, Callable, Optional, Sequence

import torch

log = logging.getLogger("torch_tpu")

_ENV = "TORCH_TPU_INDUCTOR"
_noticed = False
stats = {"redirected_graphs": 0}


def mode() -> str:
    r"""What happens to inductor graphs on tpu tensors: "pallas" (inductor's own code generator) or "tpu"."""
    from . import _settings

    v = _settings.get(_ENV)  # auto, pallas or tpu (ValueError otherwise)
    if v != "auto":
        return v
    from . import _C

    try:
        platform = str(_C._plugin_info().get("platform_name", "")).lower()
    except Exception:  # noqa: BLE001 - no plugin: nothing can run anyway, keep inductor's behaviour
        return "pallas"
    return "pallas" if platform == "tpu" else "tpu"


def _on_tpu(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == "tpu"


def touches_tpu(gm: Any, example_inputs: Sequence[Any]) -> bool:
    r"""Whether a dynamo graph has tpu tensors among its inputs or the values it computes."""
    if any(_on_tpu(x) for x in example_inputs):
        return True
    graph = getattr(gm, "graph", None)
    if graph is None:
        return False
    for n in graph.nodes:
        v = n.meta.get("example_value", n.meta.get("val"))
        if _on_tpu(v) or (isinstance(v, (list, tuple)) and any(_on_tpu(e) for e in v)):
            return True
    return False


def _notice() -> None:
    global _noticed
    if _noticed:
        return
    _noticed = True
    from . import _C

    try:
        platform = _C._plugin_info().get("platform_name")
    except Exception:  # noqa: BLE001
        platform = "?"
    warnings.warn(
        f"torch_tpu: torch.compile's default backend (inductor) generates Mosaic (Pallas TPU) kernels, which the "
        f"PJRT plugin in use ({platform}) cannot run; graphs on tpu tensors are compiled by the 'tpu' backend "
        f"instead (inductor's mode/options do not apply to them). Set {_ENV}=pallas to keep inductor's code "
        f"generator, or pass backend=\"tpu\" to silence this notice.",
        UserWarning, stacklevel=3)


def _aot_compilation() -> bool:
    """Whether inductor is compiling ahead of time (AOTInductor: ``aoti_compile_and_package``, ``aot_compile``)."""
    try:
        from torch._inductor.virtualized import V

        return bool(V.aot_compilation)
    except Exception:  # noqa: BLE001 - older torch: no AOT flag to read
        return False


def _wrap(orig: Callable) -> Callable:
    @functools.wraps(orig)
    def compile_fx(model_: Any, example_inputs_: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        if isinstance(model_, torch.fx.GraphModule) and touches_tpu(model_, example_inputs_) and mode() == "tpu":
            if _aot_compilation():
                raise RuntimeError(
                    "torch_tpu: AOTInductor (torch._inductor.aoti_compile_and_package / aot_compile) cannot compile "
                    "a graph on tpu tensors: it packages C++ code generated for the CPU or CUDA, and there is no tpu "
                    "code generator for it. Compile ahead of time with torch.compile(backend=\"tpu\") instead: its "
                    "programs are cached on disk (TORCH_TPU_CACHE_DIR), so a later process loads them without "
                    "compiling.")
            _notice()
            stats["redirected_graphs"] += 1
            # Resolved by name, as torch.compile(backend="tpu") does (TorchTPU: a plain torch.compile on tpu
            # tensors looks up the "tpu" backend).
            import torch._dynamo.backends.registry as registry

            log.info("torch_tpu: inductor graph on tpu tensors compiled by the tpu backend")
            return registry.lookup_backend("tpu")(model_, example_inputs_)
        return orig(model_, example_inputs_, *args, **kwargs)

    compile_fx._torch_tpu_redirect = True  # type: ignore[attr-defined]
    compile_fx._torch_tpu_original = orig  # type: ignore[attr-defined]
    return compile_fx


def _patch(mod: Any) -> None:
    fn = getattr(mod, "compile_fx", None)
    if fn is None or getattr(fn, "_torch_tpu_redirect", False):
        return
    mod.compile_fx = _wrap(fn)


def _install() -> None:
    r"""Wrap inductor's entry point (``torch._inductor.compile_fx.compile_fx``) when inductor is imported."""
    from .api import _when_imported

    _when_imported("torch._inductor.compile_fx", _patch, "the inductor redirect for tpu graphs")
