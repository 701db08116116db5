"""An ATen FX graph as the description ``_C._CompiledGraph`` lowers: inputs, nodes with their schema names, encoded
arguments and result types, outputs, input mutations, and the subgraphs of its regions."""

from __future__ import annotations

import operator
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from .. import _C
from ._args import (UnsupportedGraph, _NOOP_OPS, _OpaqueInput, _arg_kinds, _encode, _getattr_path, _is_opaque, _meta,
                    _op_name, _schema_args)
from ._regions import _REGION_IDENTITY_OPS, _region_kind, _region_module, _region_ok, _region_operands


class _Desc:
    """A graph description plus what the Python runner needs (constants, outputs computed in Python)."""

    def __init__(self) -> None:
        self.desc: Dict[str, Any] = {}
        self.constants: List[torch.Tensor] = []  # get_attr tensors, appended to the inputs
        self.const_outputs: Dict[int, Any] = {}  # output position -> Python value
        self.node_of_desc: List[torch.fx.Node] = []
        self.dropped_inputs: List[int] = []  # graph inputs the program does not take (opaque objects)
        self.opaque_outputs: Dict[int, int] = {}  # output position -> the graph input (opaque) it returns
        self.group_guards: List[Tuple[int, str]] = []  # (graph input, the process group name the program uses)
        self.num_ops = 0



def _out_meta(v: Any) -> Tuple:
    """A graph output's meta, with the strides PyTorch gives it when they are not contiguous (channels_last, the
    layout of a transposed value) and dense: the program stores the output in that memory order, as eager does."""
    m = _meta(v)
    if m[0] and v.dim() > 1 and v.storage_offset() == 0 and not v.is_contiguous():
        sizes, strides = [int(s) for s in v.shape], [int(s) for s in v.stride()]
        expected = 1
        for d in sorted(range(len(sizes)), key=lambda d: (strides[d], sizes[d])):
            if sizes[d] != 1 and strides[d] != expected:
                return m
            expected *= sizes[d]
        return m + (strides,)
    return m

def _describe(gm: torch.fx.GraphModule, name: str, input_vals: Optional[Sequence[Any]] = None,
              subgraphs: Optional[List[Any]] = None) -> _Desc:
    d = _Desc()
    root = subgraphs is None
    if root:
        subgraphs = []  # (module, desc dict) of every region's subgraph, all levels
    sub_index: Dict[int, int] = {}
    graph_name = name  # `name` names each node's op below
    env: Dict[Any, Any] = {}
    inputs: List[Tuple] = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    get_attrs = [n for n in gm.graph.nodes if n.op == "get_attr"]
    for i, n in enumerate(placeholders):
        v = n.meta.get("val", None)
        if v is None and input_vals is not None:
            v = input_vals[i]
        if _is_opaque(v):
            env[n] = _OpaqueInput(i, v)
            d.dropped_inputs.append(i)
            continue
        if not isinstance(v, torch.Tensor):
            raise UnsupportedGraph(f"non-tensor graph input {n.name}: {v!r}")
        env[n] = len(inputs)
        inputs.append(_meta(v))
    for n in get_attrs:
        t = _getattr_path(gm, str(n.target))
        if isinstance(t, torch.fx.GraphModule) and n.users and all(_region_kind(u) for u in n.users):
            env[n] = None  # a region's subgraph (see below)
            continue
        if not isinstance(t, torch.Tensor):
            raise UnsupportedGraph(f"non-tensor attribute {n.target}")
        env[n] = len(inputs)
        inputs.append(_meta(t))
        d.constants.append(t)
    num_inputs = len(inputs)
    nv = num_inputs
    nodes: List[Tuple] = []
    mutations: List[Tuple[int, int]] = []
    output_node = None
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "get_attr"):
            continue
        if n.op == "output":
            output_node = n
            continue
        if n.op != "call_function":
            raise UnsupportedGraph(f"unsupported node {n.op} {n.target}")
        if n.target is operator.getitem:
            base = env[n.args[0]]
            if not isinstance(base, list):
                raise UnsupportedGraph(f"getitem of a non-list value {n.args[0].name}")
            env[n] = base[n.args[1]]
            continue
        kind = _region_kind(n)
        if kind is not None:
            # a function of the program, called here (its subgraph described once, whatever its call sites)
            sub = _region_module(gm, n)
            why = _region_ok(gm, n)
            if why is not None:
                raise UnsupportedGraph(f"{kind} {n.name}: {why}")
            operands = _region_operands(n)
            k = next((i for i, (m, _) in enumerate(subgraphs) if m is sub), None)
            if k is None:
                sd = _describe(sub, f"{graph_name}.{n.args[0].target}",
                               [o.meta.get("val", None) for o in operands], subgraphs)
                if sd.constants or sd.const_outputs or sd.dropped_inputs or sd.opaque_outputs:
                    raise UnsupportedGraph(f"{kind} {n.name}: its subgraph holds non-tensor values")
                k = len(subgraphs)
                subgraphs.append((sub, sd.desc))
            if kind == "invoke_subgraph":
                args = [("Int", "subgraph", "C", k), _encode(list(n.args[2:]), "TensorList", "operands", env)]
            else:
                _, init, xs, extra = n.args
                args = [("Int", "combine_fn", "C", k), _encode(list(init), "TensorList", "init", env),
                        _encode(list(xs), "TensorList", "xs", env),
                        _encode(list(extra), "TensorList", "additional_inputs", env)]
            val = n.meta.get("val", None)
            vals = list(val) if isinstance(val, (list, tuple)) else [val]
            metas = [_meta(x) for x in vals]
            idx = list(range(nv, nv + len(vals)))
            env[n] = idx
            nv += len(idx)
            nodes.append((f"higher_order::{kind}", args, metas, idx))
            d.node_of_desc.append(n)
            continue
        name = _op_name(n.target)
        if name is None:
            raise UnsupportedGraph(f"unsupported call {n.target}")
        if not root and name in _REGION_IDENTITY_OPS and not _C._compile_has_rule(name):
            env[n] = env[n.args[0]]
            continue
        if name in _NOOP_OPS:
            env[n] = None
            continue
        if name == "aten::copy_":
            dst = n.args[0]
            if not (isinstance(dst, torch.fx.Node) and dst.op == "placeholder"):
                raise UnsupportedGraph("copy_ into an intermediate value")
            src = n.args[1]
            v = nv
            nv += 1
            nodes.append(("aten::copy", [("Tensor", "self", "T", env[dst]), _encode(src, "Tensor", "src", env),
                                         ("Bool", "non_blocking", "C", False)],
                          [inputs[env[dst]]], [v]))
            d.node_of_desc.append(n)
            mutations.append((env[dst], v))
            env[n] = v
            continue
        kinds = _arg_kinds(n.target._schema)
        args = [_encode(v, kind, sa.name, env) for kind, (v, sa) in zip(kinds, _schema_args(n))]
        val = n.meta.get("val", None)
        returns = n.target._schema.returns
        if len(returns) == 1 and not isinstance(val, (list, tuple)):
            metas = [_meta(val)]
            idx = [nv]
            env[n] = nv
        else:
            # Several returns, some of them lists (the functional fused optimizers return a tuple of lists): the
            # node's values are the tensors in order; env keeps the nesting for getitem.
            vals = list(val) if isinstance(val, (list, tuple)) else [val]
            flat: List[Any] = []
            nested = []
            for x in vals:
                if isinstance(x, (list, tuple)):
                    nested.append(list(range(nv + len(flat), nv + len(flat) + len(x))))
                    flat.extend(x)
                else:
                    nested.append(nv + len(flat))
                    flat.append(x)
            metas = [_meta(x) for x in flat]
            idx = list(range(nv, nv + len(flat)))
            env[n] = nested
        nv += len(idx)
        nodes.append((name, args, metas, idx))
        d.node_of_desc.append(n)
    assert output_node is not None
    outs_arg = output_node.args[0]
    single = not isinstance(outs_arg, (list, tuple))
    outs_list = [outs_arg] if single else list(outs_arg)
    outputs: List[int] = []
    output_meta: List[Tuple] = []
    for k, o in enumerate(outs_list):
        if isinstance(o, torch.fx.Node):
            v = env[o]
            if isinstance(v, _OpaqueInput):  # handed through by the runner
                outputs.append(-1)
                output_meta.append((False, None, None, False))
                d.opaque_outputs[k] = v.index
                continue
            if isinstance(v, list):
                raise UnsupportedGraph("a list-valued graph output")
            if v is None:
                outputs.append(-1)
                output_meta.append((False, None, None, False))
                continue
            outputs.append(v)
            output_meta.append(_out_meta(o.meta.get("val", None)) if v >= num_inputs else inputs[v])
        else:
            outputs.append(-1)
            output_meta.append((False, None, None, False))
            if o is not None:
                d.const_outputs[k] = o
    d.group_guards = [(v.index, v.group) for v in env.values()
                      if isinstance(v, _OpaqueInput) and v.used and v.group is not None]
    d.desc = dict(name=graph_name, inputs=inputs, nodes=nodes, outputs=outputs, output_meta=output_meta,
                  mutations=mutations, num_values=nv)
    if root and subgraphs:
        d.desc["subgraphs"] = [sd for _, sd in subgraphs]
    d.single_output = single  # type: ignore[attr-defined]
    d.num_ops = len(nodes)
    return d


def _make_graph(gm: torch.fx.GraphModule, name: str, input_vals: Optional[Sequence[Any]] = None,
                inference: bool = False):
    d = _describe(gm, name, input_vals)
    # Inference graphs (no autograd) may keep transposed copies of their weights (see csrc/compile/plan.h).
    d.desc["inference"] = inference
    cg = _C._CompiledGraph(d.desc)
    return d, cg
