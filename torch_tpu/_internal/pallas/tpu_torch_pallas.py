"""What PyTorch's inductor Pallas code generator calls for device ``tpu`` (torch/_inductor/codegen/pallas.py).

Its generated code exports each kernel with ``jax.export`` for platform ``tpu`` and then calls::

    if not tpu_torch_pallas.lookup_custom_kernel(name, key):
        tpu_torch_pallas.register_custom_kernel(name, key, serialized_mlir_module=exported.mlir_module_serialized)
    results = tpu_torch_pallas.call_custom_kernel(name, key, inputs=[...], output_shapes=[...],
                                                  donate_argnums=[...])

A registered module becomes a program of a foreign kernel (:mod:`torch_tpu._foreign`), so each call is one
``tpu::stablehlo_call``: one eager program calling the kernel. Registration checks that the plugin compiles it:
Mosaic kernels (``tpu_custom_call``) compile only on a TPU plugin; on the CPU and CUDA plugins torch_tpu sends
inductor's graphs on tpu tensors to the ``tpu`` backend instead (:mod:`torch_tpu._inductor`), so this interface
is used on TPUs, or where ``TORCH_TPU_INDUCTOR=pallas`` asks for it.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from ... import _foreign

__all__ = ["register_custom_kernel", "lookup_custom_kernel", "call_custom_kernel", "registered_kernels"]

_lock = threading.Lock()
_kernels: Dict[Tuple[str, str], _foreign.ForeignKernel] = {}


class _PallasKernel(_foreign.ForeignKernel):
    kind = "Pallas kernel"


def register_custom_kernel(name: str, key: str, serialized_mlir_module: Optional[bytes] = None, *,
                           mlir_module: Optional[str] = None) -> None:
    r"""Registers the kernel `name` under `key` (inductor includes the shapes in it): a serialized StableHLO
    module (``Exported.mlir_module_serialized``), or its text as `mlir_module`. Raises if the plugin cannot
    compile it."""
    if serialized_mlir_module is None and mlir_module is None:
        raise TypeError("register_custom_kernel needs serialized_mlir_module or mlir_module")
    if mlir_module is None:
        from ..._jax import stablehlo_text

        text = stablehlo_text(bytes(serialized_mlir_module))  # type: ignore[arg-type]
    else:
        text = mlir_module
    k = _PallasKernel(_foreign.new_name(f"pallas.{name}"), display_name=f"{name} [{key}]")
    k.add_program(text)
    _foreign.register_kernel(k)
    with _lock:
        _kernels[(name, key)] = k


def lookup_custom_kernel(name: str, key: str) -> bool:
    r"""Whether `name` is registered under `key`."""
    with _lock:
        return (name, key) in _kernels


def call_custom_kernel(name: str, key: str, inputs: Sequence[torch.Tensor],
                       output_shapes: Optional[Sequence[torch.Tensor]] = None,
                       donate_argnums: Optional[Sequence[int]] = None,
                       input_output_aliases: Optional[Dict[int, int]] = None) -> List[torch.Tensor]:
    r"""Runs kernel `name`/`key` on `inputs` and returns fresh result tensors (checked against `output_shapes`,
    tensors of the expected shapes and dtypes). Donation hints are accepted and unused: inputs stay valid, and the
    generated code copies aliased results back itself."""
    with _lock:
        k = _kernels.get((name, key))
    if k is None:
        raise KeyError(f"torch_tpu: Pallas kernel {name!r} is not registered under key {key!r}")
    outs = list(torch.ops.tpu.stablehlo_call(list(inputs), k.name))
    if output_shapes is not None:
        want = [(t.dtype, tuple(t.shape)) for t in output_shapes]
        got = [(t.dtype, tuple(t.shape)) for t in outs]
        if want != got:
            raise RuntimeError(f"torch_tpu: Pallas kernel {name!r} returned {got}, the caller expects {want}")
    return outs


def registered_kernels() -> List[Tuple[str, str]]:
    with _lock:
        return sorted(_kernels)
