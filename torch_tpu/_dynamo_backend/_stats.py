"""torch.compile's counters (:func:`compile_stats`) and the in-process / on-disk executable caches' controls."""

from __future__ import annotations

from typing import Any, Dict, Optional

from .. import _C


_py_stats: Dict[str, int] = {"partitioned_graphs": 0, "eager_graphs": 0, "fallback_nodes": 0, "collective_nodes": 0,
                             "dynamic_graphs": 0, "shape_specializations": 0, "stream_nodes": 0,
                             "program_collectives": 0, "flex_attention_nodes": 0,
                             "regions_inlined": 0}


def compile_stats() -> Dict[str, Any]:
    r"""torch.compile counters: graphs, runs, signature_hits, fast_calls (runs launched by the C++ graph call of
    inference graphs, see ``_graph_call``), donated (input buffers donated to a run's program: mutated inputs
    nobody else holds, such as a static KV cache, are updated in place), lowerings, compiles (XLA), memory_hits, disk_hits,
    disk_writes, compile_seconds, lower_seconds, partitioned_graphs / eager_graphs / fallback_nodes /
    collective_nodes (collectives run through their process group between compiled partitions) /
    program_collectives (collectives compiled inside a graph's program, see docs/distributed.md), stream_nodes
    (stream and event operations, run between compiled partitions), and
    dynamic_graphs / shape_specializations (graphs with symbolic sizes, and the concrete-shape programs made for
    them), flex_attention_nodes (``flex_attention`` higher-order ops traced into ATen ops, see
    ``_inline_flex_attention``), region_functions / region_calls (subgraphs of ``nested_compile_region`` and
    ``scan`` lowered once as functions of their program, and their call sites), regions_inlined (regions
    compiled inline instead: a random op or device-side check inside, or a partitioned graph) and
    program_evictions (programs compiled graphs dropped beyond ``TORCH_TPU_GRAPH_PROGRAM_CACHE_SIZE`` per graph)."""
    d = dict(_C._compile_stats())
    d.update(_py_stats)
    return d


def reset_compile_stats() -> None:
    r"""Zero the counters of :func:`compile_stats`."""
    _C._compile_reset_stats()
    for k in _py_stats:
        _py_stats[k] = 0


def set_cache_dir(path: Optional[str]) -> None:
    r"""Directory of the on-disk executable cache (``None`` or ``""`` disables it)."""
    _C._compile_set_cache_dir(path or "")


def cache_dir() -> str:
    return str(_C._compile_cache_dir())


def clear_cache() -> None:
    r"""Drop the in-process executable cache (compiled graphs keep their programs; the disk cache stays)."""
    _C._compile_clear_cache()
