"""Functional collectives and stream operations in a graph, and whether a graph's collectives can all run inside its
program (XLA-transport groups, forms the program expresses)."""

from __future__ import annotations

import logging
from typing import Dict, Optional

import torch

from .. import _C
from ._args import _is_process_group, _op_name, _real_object, _schema_args

log = logging.getLogger("torch_tpu")


_COLLECTIVE_NAMESPACES = ("_c10d_functional", "_c10d_functional_autograd", "c10d")


def _is_collective(n: torch.fx.Node) -> bool:
    name = _op_name(n.target) or ""
    return n.op == "call_function" and name.split("::")[0] in _COLLECTIVE_NAMESPACES


def _is_stream_op(n: torch.fx.Node) -> bool:
    name = _op_name(n.target) or ""
    return n.op == "call_function" and name.split("::")[0] == "streams"


# The functional collectives a program may hold: the collectives table (csrc/lowering/collectives.cpp).
_IN_PROGRAM = frozenset(_C._collectives_in_program())
ENV_COLLECTIVES_IN_PROGRAM = "TORCH_TPU_COLLECTIVES_IN_PROGRAM"


def _base_collective(n: torch.fx.Node) -> str:
    name = _op_name(n.target) or ""
    return name.split("::")[-1].split(".")[0]


def _group_name_of(n: torch.fx.Node) -> Optional[str]:
    for v, sa in _schema_args(n):
        if sa.name == "group_name":
            if isinstance(v, torch.fx.Node):
                v = v.meta.get("val", None)
            if isinstance(v, str):
                return v
            if _is_process_group(v):
                return str(_real_object(v).group_name)
            return None
    return None


def _collectives_in_program_default() -> bool:
    import os

    return os.environ.get(ENV_COLLECTIVES_IN_PROGRAM, "1").strip() != "0"


def _collectives_inside(gm: torch.fx.GraphModule, name: str) -> set:
    """The graph's functional collectives when all of them can run inside its program, else the empty set.

    They can when every one addresses a process group of the XLA transport (ranks as threads of this process, one
    device each) and is of a form the program expresses (even all_to_all splits); wait_tensor goes along with
    them.
    """
    nodes = [n for n in gm.graph.nodes if _is_collective(n)]
    if not nodes:
        return set()
    sizes: Dict[str, int] = {}
    for n in nodes:
        op = _op_name(n.target) or ""
        if op.split("::")[0] not in ("_c10d_functional", "_c10d_functional_autograd") or \
                _base_collective(n) not in _IN_PROGRAM:
            return set()
        if _base_collective(n) == "wait_tensor":
            continue
        group = _group_name_of(n)
        if group is None:
            return set()
        if group not in sizes:
            try:
                sizes[group] = int(_C._dist._replica_group_size(group))
            except Exception:  # noqa: BLE001 - an unknown group: the process group reports it when the graph runs
                sizes[group] = 0
        if sizes[group] == 0:
            return set()
        if _base_collective(n) == "all_to_all_single":
            vals = dict((sa.name, v) for v, sa in _schema_args(n))
            splits = [s for key in ("output_split_sizes", "input_split_sizes") for s in (vals.get(key) or [])]
            if any(not isinstance(s, int) for s in splits) or len(set(splits)) > 1:
                return set()
    log.info("torch_tpu: graph %s: %d collectives inside the program", name, len(nodes))
    return set(nodes)
