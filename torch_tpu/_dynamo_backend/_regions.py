"""Which nodes a program can hold, and the higher-order regions.

``invoke_subgraph`` (``nested_compile_region``) and ``scan`` nodes become private functions of the program when
their subgraph can (see csrc/compile/graph.h), else they are inlined; ``control_deps`` (stream and event operations
AOTAutograd wraps) is always inlined.
"""

from __future__ import annotations

import operator
from typing import Any, Dict, List, Optional, Sequence

import torch

from .. import _C
from ._stats import _py_stats
from ._args import _NOOP_OPS, _getattr_path, _op_name


def _node_supported(node: torch.fx.Node) -> Optional[str]:
    """None if the node can be part of a compiled graph, else why not (the lowering layer's one wording)."""
    if node.op != "call_function":
        return None
    if node.target is operator.getitem:
        return None
    if _region_kind(node) is not None:
        gm = node.graph.owning_module
        why = _region_ok(gm, node) if gm is not None else "no owning module"
        return None if why is None else _C._no_lowering(str(node.target.name()), why)
    name = _op_name(node.target)
    if name is None:
        return _C._no_lowering(getattr(node.target, "__name__", str(node.target)), "not an ATen operator")
    if name in _NOOP_OPS or name == "aten::copy_":
        return None
    if not _C._compile_has_rule(name):
        return _C._no_lowering(name)
    return None


# Copies without a rule that a region's function computes as the value itself (a function's values are not
# storages: nothing aliases them).
_REGION_IDENTITY_OPS = {"aten::detach_copy", "aten::alias_copy"}


def _region_kind(n: torch.fx.Node) -> Optional[str]:
    """"invoke_subgraph" or "scan" for a node of those higher-order ops (compiled as functions of the program,
    see csrc/compile/graph.h), else None."""
    t = n.target
    if n.op == "call_function" and isinstance(t, torch._ops.HigherOrderOperator) and not n.kwargs:
        k = t.name()
        if k == "invoke_subgraph" and len(n.args) >= 2:
            return k
        if k == "scan" and len(n.args) == 4:
            return k
    return None


def _region_module(gm: torch.fx.GraphModule, n: torch.fx.Node) -> Optional[torch.fx.GraphModule]:
    a = n.args[0]
    if not (isinstance(a, torch.fx.Node) and a.op == "get_attr"):
        return None
    sub = _getattr_path(gm, str(a.target))
    return sub if isinstance(sub, torch.fx.GraphModule) else None


def _region_operands(n: torch.fx.Node) -> List[Any]:
    """The tensor operands of a region node, in the order its subgraph takes them."""
    if _region_kind(n) == "invoke_subgraph":
        return list(n.args[2:])
    _, init, xs, extra = n.args
    return list(init) + list(xs) + list(extra)


def _region_ok(gm: torch.fx.GraphModule, n: torch.fx.Node) -> Optional[str]:
    """None if a region node can become a function of the program (its subgraph's nodes all have lowerings, it
    takes tensors only and holds no constants), else why not."""
    sub = _region_module(gm, n)
    if sub is None:
        return "its subgraph is not a graph module"
    if not all(isinstance(a, torch.fx.Node) for a in _region_operands(n)):
        return "a non-tensor operand"
    for sn in sub.graph.nodes:
        if sn.op == "get_attr" and not isinstance(_getattr_path(sub, str(sn.target)), torch.fx.GraphModule):
            return "a constant inside the subgraph"
        if sn.op == "call_function":
            if _region_kind(sn) is not None:
                why = _region_ok(sub, sn)
            elif sn.target is operator.getitem:
                why = None
            else:
                name = _op_name(sn.target)
                why = None if name is not None and (name in _NOOP_OPS or name in _REGION_IDENTITY_OPS
                                                    or _C._compile_has_rule(name)) else \
                    _node_supported(sn) or "no lowering"
                if name == "aten::copy_":
                    why = "an input mutation inside the subgraph"
            if why is not None:
                return why
    return None


def _inline_regions(gm: torch.fx.GraphModule, only: Optional[set] = None) -> int:
    """Replace invoke_subgraph nodes (all, or those in ``only``) by their subgraph's nodes, in place (the graph
    compiles them per call site). Returns how many were inlined."""
    count = 0
    for n in list(gm.graph.nodes):
        if _region_kind(n) != "invoke_subgraph" or (only is not None and n not in only):
            continue
        sub = _region_module(gm, n)
        if sub is None:
            continue
        sub_node = n.args[0]
        _replace_with_copy(gm, n, sub_node,
                           _copy_graph_before(gm, n, sub, list(n.args[2:]), const_prefix="_region_const"))
        count += 1
    if count:
        # nested regions of inlined subgraphs are inlined too when they cannot be functions
        gm.graph.lint()
        gm.recompile()
        _py_stats["regions_inlined"] += count
    return count


def _prepare_regions(gm: torch.fx.GraphModule) -> None:
    """Regions whose subgraph cannot become a function of the program are inlined (nested ones first)."""
    while True:
        bad = {n for n in gm.graph.nodes if _region_kind(n) == "invoke_subgraph" and _region_ok(gm, n) is not None}
        if not bad or not _inline_regions(gm, bad):
            return


def _replace_with_copy(gm: torch.fx.GraphModule, n: torch.fx.Node, sub_node: torch.fx.Node, out: Any) -> None:
    """Replaces the higher-order call `n` by `out`, its subgraph copied in place (_copy_graph_before): getitem users
    take the copied outputs, and the subgraph's get_attr node goes when nothing else uses it."""
    for user in list(n.users):
        if user.op == "call_function" and user.target is operator.getitem and isinstance(out, (list, tuple)):
            user.replace_all_uses_with(out[user.args[1]])
            gm.graph.erase_node(user)
    if n.users:
        n.replace_all_uses_with(out)
    gm.graph.erase_node(n)
    if not sub_node.users:
        gm.graph.erase_node(sub_node)


def _copy_graph_before(gm: torch.fx.GraphModule, before: torch.fx.Node, sub: torch.fx.GraphModule,
                       args: Sequence[Any], const_prefix: str = "_inlined_const") -> Any:
    """Copies ``sub``'s nodes into ``gm`` ahead of ``before``, its placeholders bound to ``args``; returns what its
    output node returns, in ``gm``'s nodes. A constant ``sub`` holds as an attribute becomes an attribute of ``gm``
    (a tensor as a non-persistent buffer) named ``const_prefix`` and a number."""
    env: Dict[torch.fx.Node, Any] = {}
    out: Any = None
    with gm.graph.inserting_before(before):
        env.update(zip([x for x in sub.graph.nodes if x.op == "placeholder"], args))
        for sn in sub.graph.nodes:
            if sn.op == "placeholder":
                continue
            if sn.op == "output":
                out = torch.fx.map_arg(sn.args[0], lambda x: env[x])
                continue
            if sn.op == "get_attr":
                attr = f"{const_prefix}_{len(gm.graph.nodes)}"
                const = _getattr_path(sub, str(sn.target))
                if isinstance(const, torch.Tensor):
                    gm.register_buffer(attr, const, persistent=False)
                else:
                    setattr(gm, attr, const)
                env[sn] = gm.graph.get_attr(attr)
                env[sn].meta.update(sn.meta)
                continue
            env[sn] = gm.graph.node_copy(sn, lambda x: env[x])
    return out


def _inline_control_deps(gm: torch.fx.GraphModule) -> None:
    """Replace each ``control_deps(deps, subgraph, *args)`` node by the nodes of its subgraph, in place.

    AOTAutograd wraps side-effecting stream and event operations in this higher-order op so that inductor keeps
    them in order. Here the graph's node order is the order partitions and eager nodes run in, so the wrapper is
    not needed: inlining it exposes the operation itself (``streams::*``), which then runs between partitions.
    """
    changed = False
    for n in list(gm.graph.nodes):
        target = n.target
        if not (n.op == "call_function" and isinstance(target, torch._ops.HigherOrderOperator)
                and target.name() == "control_deps" and not n.kwargs and len(n.args) >= 2):
            continue
        sub_node = n.args[1]
        if not (isinstance(sub_node, torch.fx.Node) and sub_node.op == "get_attr"):
            continue
        sub = _getattr_path(gm, str(sub_node.target))
        if not isinstance(sub, torch.fx.GraphModule) or any(x.op == "get_attr" for x in sub.graph.nodes):
            continue
        args = list(n.args[2:])
        if sum(x.op == "placeholder" for x in sub.graph.nodes) != len(args):
            continue
        _replace_with_copy(gm, n, sub_node, _copy_graph_before(gm, n, sub, args))
        changed = True
    if changed:
        gm.graph.lint()
        gm.recompile()
