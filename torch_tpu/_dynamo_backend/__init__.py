"""``torch.compile(model, backend="tpu")``: whole graphs as one XLA program, training included.

Dynamo captures a graph; AOTAutograd functionalizes it, decomposes it to core ATen (keeping the ops that have a
lowering rule of their own) and splits training graphs into forward and backward. Each ATen graph is flattened
here into a description (inputs, nodes with their schema names, arguments and result types from
``node.meta['val']``, outputs, input mutations) and handed to C++ (``csrc/compile``), which lowers it with the
same rules eager mode uses into ONE StableHLO program, compiled once per input signature and cached in process
and on disk (``TORCH_TPU_CACHE_DIR``, default ``~/.cache/torch_tpu``).

Ops without a rule: the graph is partitioned, supported partitions are compiled and the rest runs eagerly (the op
names are logged); with ``fullgraph=True`` (or ``options={"fallback": False}``) such an op is an error naming it.
Collectives (``_c10d_functional::*``) whose process groups use the XLA transport of ``tpu_dist`` (ranks as threads,
one device each) are compiled INTO the graph's program, which then spans the group's devices; on the host transport
they split the graph and run through their process group between the compiled partitions.

Registration: :func:`_install` (called by ``import torch_tpu``) registers the backend as soon as dynamo's backend
registry is imported (without importing dynamo itself); the ``torch_dynamo_backends`` entry point does the same for
installed packages. The default backend of ``torch.compile`` is never changed.

The package, one module per seam (each imports only those above it):

- ``_stats``: the counters of :func:`compile_stats` and the disk-cache directory;
- ``_args``: argument handling (schema kinds, the encoding of one argument, opaque graph inputs);
- ``_regions``: which nodes a program can hold, and the higher-order regions (invoke_subgraph, scan,
  control_deps): their checks and their inlining;
- ``_describe``: an FX graph as the description C++ compiles (``_C._CompiledGraph``);
- ``_runner``: :class:`_GraphRunner`, which calls a compiled graph;
- ``_collectives``: functional collectives and stream operations, and which collectives go inside a program;
- ``_decomp``: decompositions (core ATen, ``_foreach_*``, attention) and flex_attention's dense math;
- ``_partition``: an ATen graph to what runs it: one program, shape specialisations, partitions with eager
  fallbacks, or the eager graph;
- ``_backend``: :func:`tpu_backend` (AOTAutograd around the above) and the C++ graph call of inference graphs.

The names tests and tools use are re-exported here. A module-level name is read where it is defined: patch it
there (``torch_tpu._dynamo_backend._backend._compile_aten_graph``, not this package's re-export).
"""

from __future__ import annotations

import types
from typing import Optional

import torch

# What tests, tools and the rest of the package use (the public helpers first).
from ._stats import cache_dir, clear_cache, compile_stats, reset_compile_stats, set_cache_dir
from ._args import UnsupportedGraph
from ._describe import _describe, _make_graph
from ._runner import _GraphRunner
from ._collectives import ENV_COLLECTIVES_IN_PROGRAM, _IN_PROGRAM
from ._decomp import _decompositions, _inline_flex_attention
from ._partition import _ShapeSpecializedGraph, _compile_aten_graph
from ._backend import _graph_call, tpu_backend

__all__ = ["tpu_backend", "compile_stats", "reset_compile_stats", "set_cache_dir", "cache_dir", "register"]


_BACKEND_NAME = "tpu"


def register(registry: Optional[types.ModuleType] = None) -> None:
    r"""Register ``tpu_backend`` as dynamo backend "tpu" (idempotent)."""
    if registry is None:
        from torch._dynamo.backends import registry  # type: ignore[no-redef]
    if _BACKEND_NAME in registry._COMPILER_FNS:
        return
    registry.register_backend(compiler_fn=tpu_backend, name=_BACKEND_NAME)


_REGISTRY = "torch._dynamo.backends.registry"


def _conv_memory_format_like_eager() -> None:
    r"""Fake tensors' convolutions (``torch._subclasses.fake_impls``) give the result memory format
    ``torch._C._conv_determine_backend_memory_format`` names for the backend ``torch._C._select_conv_backend`` picks:
    contiguous for a PrivateUse1 device. tpu's eager convolutions follow CPU and CUDA (channels_last when the input
    or the weight is), so compiled graphs' value metadata, and with it their outputs' strides, say the same."""
    determine = torch._C._conv_determine_backend_memory_format
    if getattr(determine, "_torch_tpu", False):
        return

    def _determine(input_, weight, backend):
        fmt = determine(input_, weight, backend)
        if fmt == torch.contiguous_format and input_.device.type == "tpu":
            from torch._prims_common import suggest_memory_format

            for t in (input_, weight):
                f = suggest_memory_format(t)
                if f in (torch.channels_last, torch.channels_last_3d):
                    return f
        return fmt

    _determine._torch_tpu = True  # type: ignore[attr-defined]
    torch._C._conv_determine_backend_memory_format = _determine


def _install() -> None:
    r"""Register now if dynamo's registry is loaded, else right after it loads (dynamo is not imported here)."""
    from ..api import _when_imported

    _conv_memory_format_like_eager()
    _when_imported(_REGISTRY, register, "the torch.compile backend 'tpu'")
