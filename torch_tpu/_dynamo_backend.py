"""``torch.compile(model, backend="tpu")``: whole graphs as one XLA program, training included.

(Over 1,000 lines: its seams -- graph description and argument encoding, the runner, partitioning and eager
fallbacks, higher-order-op inlining and regions, decompositions -- are to become modules of a package, issue 31;
not yet split because the tests and tools reach several of its private names.)

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
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import operator
import time
import types
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from . import _C

log = logging.getLogger("torch_tpu")

__all__ = ["tpu_backend", "compile_stats", "reset_compile_stats", "set_cache_dir", "cache_dir", "register"]

_BACKEND_NAME = "tpu"
_graph_ids = itertools.count()
_py_stats: Dict[str, int] = {"partitioned_graphs": 0, "eager_graphs": 0, "fallback_nodes": 0, "collective_nodes": 0,
                             "dynamic_graphs": 0, "shape_specializations": 0, "stream_nodes": 0,
                             "program_collectives": 0, "flex_attention_nodes": 0,
                             "regions_inlined": 0}
# Specialisations kept per dynamic graph (least recently used first out; their programs stay in the executable caches).
_MAX_SPECIALIZATIONS = 64

# Nodes that compute nothing (runtime assertions AOTAutograd or decompositions insert).
_NOOP_OPS = {
    "aten::_assert_tensor_metadata",
    "aten::_assert_async",
    "aten::_assert_async.msg",
    "aten::_assert_scalar",
    "aten::sym_constrain_range",
    "aten::sym_constrain_range_for_size",
    "aten::_print",
    "aten::record_stream",
}


class UnsupportedGraph(RuntimeError):
    pass


# ---------------------------------------------------------------------------------------------------------------
# Public helpers


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
    ``scan`` lowered once as functions of their program, and their call sites) and regions_inlined (regions
    compiled inline instead: a random op or device-side check inside, or a partitioned graph)."""
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


# ---------------------------------------------------------------------------------------------------------------
# Graph description


def _op_name(target: Any) -> Optional[str]:
    if isinstance(target, torch._ops.OpOverload):
        s = target._schema
        return s.name + ("." + s.overload_name if s.overload_name else "")
    return None


def _meta(v: Any) -> Tuple:
    if isinstance(v, torch.Tensor):
        try:
            sizes = [int(s) for s in v.shape]
        except Exception as e:  # symbolic sizes
            raise UnsupportedGraph(f"symbolic shape {tuple(v.shape)} (compile with dynamic=False)") from e
        return (True, v.dtype, sizes, v.device.type == "cpu")
    return (False, None, None, False)


_LIST_KINDS = {"TensorType": "TensorList", "IntType": "IntList", "SymIntType": "IntList", "FloatType": "FloatList",
               "BoolType": "BoolList", "NumberType": "ScalarList"}
_KINDS = {"TensorType": "Tensor", "NumberType": "Scalar", "FloatType": "Float", "IntType": "Int", "SymIntType": "Int",
          "BoolType": "Bool", "StringType": "String", "ScalarTypeType": "ScalarType", "DeviceObjType": "Device",
          "GeneratorType": "Generator"}


def _arg_kind(sa: Any) -> str:
    """The schema kind of an argument, as C++ names it (core::ArgKind): an Optional's element kind."""
    t = sa.real_type
    if t.kind() == "OptionalType":
        t = t.getElementType()
    if t.kind() == "ListType":
        e = t.getElementType()
        if e.kind() == "OptionalType":
            e = e.getElementType()
        return _LIST_KINDS.get(e.kind(), "Other")
    return _KINDS.get(t.kind(), "Other")


def _encode(a: Any, kind: str, name: str, env: Dict[Any, Any]) -> Tuple:
    """One argument as (kind, name, tag, payload): T value index, TL value indices, C a constant, O present."""
    if isinstance(a, torch.fx.Node):
        v = env[a]
        if isinstance(v, _OpaqueInput):
            if v.group is None:
                raise UnsupportedGraph(f"opaque graph input {a.name} ({v.type_name}) is an argument of an op")
            v.used = True
            return (kind, name, "C", v.group)
        if isinstance(v, list):
            return (kind, name, "TL", v)
        if v is None:
            raise UnsupportedGraph(f"argument {a.name} has no value")
        return (kind, name, "T", v)
    if kind == "TensorList" and isinstance(a, (list, tuple)):
        out = []
        for x in a:
            if x is None:
                out.append(-1)
            elif isinstance(x, torch.fx.Node) and isinstance(env.get(x), int):
                out.append(env[x])
            else:
                raise UnsupportedGraph(f"unsupported tensor list element {x!r}")
        return (kind, name, "TL", out)
    if _is_process_group(a):  # a functional collective's group: by name
        return (kind, name, "C", str(_real_object(a).group_name))
    if isinstance(a, (torch.device, torch.layout, torch.memory_format)):
        return (kind, name, "O", None)
    if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)) or (
            isinstance(a, (list, tuple)) and any(isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool))
                                                 for x in a)):
        raise UnsupportedGraph("symbolic scalar argument (compile with dynamic=False)")
    if a is None or isinstance(a, (bool, int, float, complex, str, torch.dtype)):
        return (kind, name, "C", a)
    if isinstance(a, (list, tuple)) and all(isinstance(x, (bool, int, float)) for x in a):
        return (kind, name, "C", list(a))
    raise UnsupportedGraph(f"unsupported argument {a!r}")


def _is_process_group(a: Any) -> bool:
    try:
        from torch.distributed import ProcessGroup
    except ImportError:  # torch built without distributed
        return False
    if isinstance(_real_object(a), ProcessGroup):
        return True
    return type(a).__name__ == "FakeScriptObject" and "ProcessGroup" in str(getattr(a, "script_class_name", ""))


def _real_object(a: Any) -> Any:
    """The object behind an opaque graph input (a FakeScriptObject while tracing)."""
    return getattr(a, "real_obj", a) if type(a).__name__ == "FakeScriptObject" else a


def _is_opaque(v: Any) -> bool:
    """An opaque non-tensor graph input: a process group or a DeviceMesh (torch registers both as opaque reference
    types; a DTensor graph takes its mesh as an input), or another script / opaque object."""
    if v is None or isinstance(v, torch.Tensor):
        return False
    if _is_process_group(v) or type(v).__name__ == "FakeScriptObject" or isinstance(v, torch.ScriptObject):
        return True
    try:
        from torch._opaque_base import OpaqueBase
    except ImportError:  # older torch
        return False
    return isinstance(v, OpaqueBase)


class _OpaqueInput:
    """A graph input that is an opaque object (a DeviceMesh, a process group): a compile-time constant of the
    program, which does not take it. A process group is its name (its functional collectives address it, see
    csrc/compile/collectives.h); a mesh is only handed through (DTensor graphs return it with the DTensors they
    make). The runner drops these inputs and returns the given object where the graph returns it."""

    def __init__(self, index: int, obj: Any) -> None:
        self.index = index
        real = _real_object(obj)
        self.type_name = str(getattr(obj, "script_class_name", None) or type(real).__name__)
        self.group: Optional[str] = str(real.group_name) if _is_process_group(obj) else None
        self.used = False  # the program depends on it (its group name)


def _schema_args(node: torch.fx.Node) -> List[Tuple[Any, Any]]:
    """(value, schema argument) for every argument of the node's schema, defaults filled in."""
    schema = node.target._schema
    out = []
    for i, sa in enumerate(schema.arguments):
        if i < len(node.args) and not sa.kwarg_only:
            v = node.args[i]
        elif sa.name in node.kwargs:
            v = node.kwargs[sa.name]
        elif sa.has_default_value():
            v = sa.default_value
        else:
            v = None
        out.append((v, sa))
    return out


def _graph_device(gm: torch.fx.GraphModule) -> torch.device:
    """The tpu device a graph's program runs on: its first tpu input's (else the current device)."""
    for n in gm.graph.nodes:
        v = n.meta.get("val", None) if n.op == "placeholder" else None
        if isinstance(v, torch.Tensor) and v.device.type == "tpu":
            return torch.device("tpu", v.device.index if v.device.index is not None else torch.tpu.current_device())
    return torch.device("tpu", torch.tpu.current_device())


def _made_elsewhere(node: torch.fx.Node, dev: torch.device) -> Optional[str]:
    """Why a node runs eagerly because its result is asked for on another device than the graph's (another chip,
    meta: full_like(x, 1, device="tpu:1")), else None. Results on the cpu are graph outputs copied to the host."""
    if node.op != "call_function":
        return None
    v = node.meta.get("val", None)
    for t in (v if isinstance(v, (list, tuple)) else [v]):
        if isinstance(t, torch.Tensor) and t.device.type != "cpu":
            d = t.device
            if d.type == "tpu" and d.index is None:
                d = torch.device("tpu", torch.tpu.current_device())
            if d != dev:
                name = _op_name(node.target) or str(node.target)
                return _C._no_lowering(name, f"its result is on {t.device}, the graph runs on {dev}")
    return None


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
        args = [_encode(v, _arg_kind(sa), sa.name, env) for v, sa in _schema_args(n)]
        val = n.meta.get("val", None)
        returns = n.target._schema.returns
        if len(returns) == 1 and not isinstance(val, (list, tuple)):
            metas = [_meta(val)]
            idx = [nv]
            env[n] = nv
        else:
            vals = list(val) if isinstance(val, (list, tuple)) else [val]
            metas = [_meta(x) for x in vals]
            idx = list(range(nv, nv + len(vals)))
            env[n] = idx
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
            output_meta.append(_meta(o.meta.get("val", None)) if v >= num_inputs else inputs[v])
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


def _getattr_path(obj: Any, path: str) -> Any:
    for p in path.split("."):
        obj = getattr(obj, p)
    return obj


# ---------------------------------------------------------------------------------------------------------------
# Runners


def _log_compile(name: str, ev: Tuple) -> None:
    source, ops, seconds, key = ev
    if source == "compile":
        log.info("torch_tpu: compiled graph %s: %d ops in %.3fs", name, ops, seconds)
    else:
        log.info("torch_tpu: graph %s: %d ops, executable from the %s cache in %.3fs", name, ops, source, seconds)


class _GraphRunner:
    """Calls a compiled graph: boxed (AOTAutograd passes a list and lets us clear it) or as a module.

    The graph is lowered when it first runs with an input signature. If some of its nodes cannot be lowered, nothing
    has run yet: ``on_errors(errors)`` then returns the callable that runs the graph from now on (a partitioned or
    eager version), or raises.
    """

    _boxed_call = True

    def __init__(self, d: _Desc, cg: Any, name: str, on_errors: Callable[[List[Tuple[int, str]]], Callable]) -> None:
        self.cg = cg
        self.name = name
        self._boxed_call = True  # in the instance dict: functools.wraps (dynamo's disable wrapper) copies it
        self.constants = d.constants
        self.const_outputs = d.const_outputs
        self.single = d.single_output  # type: ignore[attr-defined]
        self._dev_constants: Dict[Any, List[torch.Tensor]] = {}
        self._on_errors = on_errors
        self._instead: Optional[Callable] = None
        self._dropped = set(d.dropped_inputs)
        self._opaque_outputs = d.opaque_outputs
        self._group_guards = d.group_guards

    def _constants_for(self, inputs: Sequence[Any]) -> List[torch.Tensor]:
        dev = None
        for t in inputs:
            if isinstance(t, torch.Tensor) and t.device.type == "tpu":
                dev = t.device
                break
        if dev is None:
            dev = torch.device("tpu", torch.tpu.current_device())
        c = self._dev_constants.get(dev)
        if c is None:
            c = [t.to(dev) for t in self.constants]
            self._dev_constants[dev] = c
        return c

    def run(self, inputs: List[Any]) -> List[Any]:
        if self._instead is not None:
            return self._instead(inputs)
        given = inputs
        if self._dropped:
            for i, group in self._group_guards:  # the program was built for this group
                got = str(getattr(_real_object(given[i]), "group_name", None))
                if got != group:
                    raise RuntimeError(f"torch_tpu: graph {self.name} was compiled for process group '{group}', "
                                       f"called with process group '{got}'")
            inputs = [x for i, x in enumerate(inputs) if i not in self._dropped]
        args = list(inputs) + self._constants_for(inputs) if self.constants else inputs
        outs, ev, errors = self.cg.run(args)
        if errors:
            self._instead = self._on_errors(errors)
            self.cg.retire()  # a graph call in front of this runner sends every call here from now on
            self.cg = None
            return self._instead(given)
        if ev is not None:
            _log_compile(self.name, ev)
        if self.const_outputs:
            for k, v in self.const_outputs.items():
                outs[k] = v
        for k, i in self._opaque_outputs.items():
            outs[k] = given[i]
        return outs

    def __call__(self, *args: Any) -> List[Any]:
        if len(args) == 1 and isinstance(args[0], list):  # boxed: we own the list and free the inputs early
            inputs = list(args[0])
            args[0].clear()
            return self.run(inputs)
        return self.run(list(args))  # unboxed (e.g. the backward, called through dynamo's disable wrapper)


class _SubgraphModule(torch.nn.Module):
    """A compiled partition inside a partitioned graph."""

    def __init__(self, runner: _GraphRunner) -> None:
        super().__init__()
        self.runner = runner

    def forward(self, *args: Any) -> Any:
        outs = self.runner.run(list(args))
        return outs[0] if self.runner.single else tuple(outs)


def _make_graph(gm: torch.fx.GraphModule, name: str, input_vals: Optional[Sequence[Any]] = None,
                inference: bool = False):
    d = _describe(gm, name, input_vals)
    # Inference graphs (no autograd) may keep transposed copies of their weights (see csrc/compile/plan.h).
    d.desc["inference"] = inference
    cg = _C._CompiledGraph(d.desc)
    return d, cg


def _fail_message(name: str, bad: Dict[torch.fx.Node, str]) -> str:
    # Each message is the lowering layer's "no lowering for <op> (<reason>)".
    return f"torch_tpu: graph {name} cannot be one program (fullgraph=True): " + "; ".join(sorted(set(bad.values())))


def _is_symbolic(v: Any) -> bool:
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        from torch.fx.experimental import symbolic_shapes as ss

        concrete = {torch.SymInt: ss.is_concrete_int, torch.SymFloat: ss.is_concrete_float,
                    torch.SymBool: ss.is_concrete_bool}[type(v)]
        return not concrete(v)
    if isinstance(v, torch.Tensor):
        return any(_is_symbolic(x) for x in (*v.shape, *v.stride(), v.storage_offset()))
    if isinstance(v, (list, tuple)):
        return any(_is_symbolic(x) for x in v)
    return False


def _is_dynamic(gm: torch.fx.GraphModule) -> bool:
    """Whether the graph has symbolic sizes (``dynamic=True``, or automatic dynamic shapes after a recompile)."""
    for n in gm.graph.nodes:
        if n.op == "output":
            continue
        if _is_symbolic(n.meta.get("val", None)):
            return True
    return False


def _global_state_key() -> Tuple:
    """torch's settings a traced graph's result types and program depend on (the C++ caches key on the same,
    core/global_state.h): a specialisation traced under one default dtype, deterministic mode, matmul precision or
    autocast state never serves another."""
    return (torch.get_default_dtype(), torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(), torch.get_float32_matmul_precision(),
            torch.is_autocast_enabled("tpu"), torch.get_autocast_dtype("tpu"))


def _input_key(x: Any) -> Tuple:
    if isinstance(x, torch.Tensor):
        return ("T", x.dtype, x.device, tuple(x.shape), tuple(x.stride()), x.storage_offset())
    return ("V", type(x).__name__, x)


class _ShapeSpecializedGraph:
    """A graph with symbolic sizes, run as one program per distinct concrete input signature.

    XLA programs have static shapes, so a graph traced with ``dynamic=True`` (or marked dynamic by dynamo after a
    shape change) is specialised when it first meets a new input signature (tensor sizes and strides, the values
    of its integer inputs): it is re-traced with those inputs as fake tensors, which turns every ``sym_size`` /
    ``sym_sum`` / symbolic arithmetic node into a constant, and the resulting static graph is compiled as any other
    (and cached in process and on disk). Dynamo itself does not recompile: the symbolic graph stays one guard set.
    Each new specialisation is logged at INFO on the ``torch_tpu`` logger and counted in
    ``compile_stats()["shape_specializations"]``.
    """

    _boxed_call = True

    def __init__(self, gm: torch.fx.GraphModule, name: str, fullgraph: bool, inference: bool,
                 collectives_in_program: bool = True) -> None:
        from collections import OrderedDict

        self.gm = gm
        self.name = name
        self.fullgraph = fullgraph
        self.collectives_in_program = collectives_in_program
        self.inference = inference
        self._boxed_call = True
        self.specs: "OrderedDict[Tuple, Callable]" = OrderedDict()
        self.count = 0

    def _specialize(self, inputs: List[Any]) -> Callable:
        from torch.fx.experimental.proxy_tensor import make_fx

        tensor_pos = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
        others = {i: x for i, x in enumerate(inputs) if not isinstance(x, torch.Tensor)}
        for i, x in others.items():
            if x is not None and not isinstance(x, (bool, int, float)):
                raise RuntimeError(f"torch_tpu: graph {self.name}: cannot specialise on input {i} of type "
                                   f"{type(x).__name__}")
        n = len(inputs)
        gm = self.gm

        def static(*tensors: torch.Tensor) -> Any:
            full: List[Any] = [None] * n
            for i, t in zip(tensor_pos, tensors):
                full[i] = t
            for i, x in others.items():
                full[i] = x
            return gm(*full)

        self.count += 1
        sname = f"{self.name}.s{self.count}"
        shapes = ", ".join(f"{tuple(inputs[i].shape)}" for i in tensor_pos[:6]) + (", ..." if len(tensor_pos) > 6
                                                                                      else "")
        log.info("torch_tpu: graph %s has symbolic sizes: specialising it as %s for inputs %s%s", self.name, sname,
                 shapes, f" and integers {sorted(others.values(), key=str)}" if others else "")
        _py_stats["shape_specializations"] += 1
        with torch.no_grad():
            sgm = make_fx(static, tracing_mode="fake", _allow_non_fake_inputs=False)(
                *[inputs[i] for i in tensor_pos])
        sgm.graph.eliminate_dead_code()
        sgm.recompile()
        tensors_ex = [inputs[i] for i in tensor_pos]
        # specialise=False: sizes that stay symbolic (data-dependent ones, e.g. after nonzero) take the static path's
        # handling of them (partitions or eager, or the fullgraph error) instead of another specialisation
        compiled = _compile_aten_graph(sgm, tensors_ex, sname, self.fullgraph, self.inference, specialise=False,
                                       collectives_in_program=self.collectives_in_program)

        def run(args: List[Any]) -> List[Any]:
            outs = compiled([args[i] for i in tensor_pos])
            return list(outs) if isinstance(outs, (list, tuple)) else [outs]

        return run

    def run(self, inputs: List[Any]) -> List[Any]:
        key = (_global_state_key(),) + tuple(_input_key(x) for x in inputs)
        fn = self.specs.get(key)
        if fn is None:
            fn = torch._dynamo.disable(self._specialize)(inputs)
            self.specs[key] = fn
            while len(self.specs) > _MAX_SPECIALIZATIONS:
                self.specs.popitem(last=False)
        else:
            self.specs.move_to_end(key)
        return fn(inputs)

    def __call__(self, *args: Any) -> List[Any]:
        if len(args) == 1 and isinstance(args[0], list):  # boxed
            inputs = list(args[0])
            args[0].clear()
            return self.run(inputs)
        return self.run(list(args))


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


def _flex_attention_ops() -> Dict[Any, Callable]:
    """flex_attention's higher-order ops -> their dense implementations (what they run eagerly on any device)."""
    import importlib

    try:
        fa = importlib.import_module("torch._higher_order_ops.flex_attention")
    except ImportError:  # pragma: no cover - a torch without flex attention
        return {}
    return {fa.flex_attention: fa.sdpa_dense, fa.flex_attention_backward: fa.sdpa_dense_backward}


def _inline_flex_attention(gm: torch.fx.GraphModule) -> None:
    """Replace each ``flex_attention`` / ``flex_attention_backward`` node by the ATen ops of its dense math, in place.

    Dynamo keeps ``torch.nn.attention.flex_attention`` as a higher-order op whose score_mod and mask_mod are
    subgraphs; inductor generates a kernel for it. Here the op's dense implementation (PyTorch's own: score_mod and
    mask_mod evaluated over index grids with vmap, a masked softmax; its backward the same way) is traced with the
    node's fake values into core ATen ops, which the graph's program then contains like any others. Nodes with
    symbolic sizes stay (they are specialised first, see _ShapeSpecializedGraph).
    """
    ops = _flex_attention_ops()
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and n.target in ops]
    if not nodes:
        return
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.utils import _pytree as pytree

    global _decomp_cache
    if _decomp_cache is None:
        _decomp_cache = _decompositions()
    for n in nodes:
        flat, spec = pytree.tree_flatten((n.args, n.kwargs))
        values = [_getattr_path(gm, str(a.target)) if isinstance(a, torch.fx.Node) and a.op == "get_attr" else a
                  for a in flat]
        # tensors (graph values, and constants the graph holds as attributes) are the traced function's inputs;
        # subgraphs (score_mod, mask_mod, their joint graphs) and Python values are baked in
        pos = [i for i, a in enumerate(flat)
               if isinstance(a, torch.fx.Node) and (a.op != "get_attr" or isinstance(values[i], torch.Tensor))]
        metas = [flat[i].meta.get("val") for i in pos]
        fake_mode = torch._guards.detect_fake_mode([m for m in metas if isinstance(m, torch.Tensor)])
        for j, i in enumerate(pos):
            if metas[j] is None and isinstance(values[i], torch.Tensor) and fake_mode is not None:
                metas[j] = fake_mode.from_tensor(values[i], static_shapes=True)
        if any(not isinstance(m, torch.Tensor) or _is_symbolic(m) for m in metas):
            continue
        impl = ops[n.target]

        def dense(*tensors: Any, _values: List[Any] = values, _pos: List[int] = pos, _impl: Callable = impl) -> Any:
            vals = list(_values)
            for i, t in zip(_pos, tensors):
                vals[i] = t
            args, kwargs = pytree.tree_unflatten(vals, spec)
            return _impl(*args, **kwargs)

        # functionalized: the dense math writes into buffers it allocates (programs take no in-place copies); under
        # the graph's fake mode: its index grids (arange) are made inside, and backward graphs compile lazily,
        # outside any fake mode
        with fake_mode if fake_mode is not None else contextlib.nullcontext():
            sub = make_fx(torch.func.functionalize(dense, remove="mutations"),
                          decomposition_table=_decomp_cache)(*metas)
        # the traced math's constants are copied into gm
        out = _copy_graph_before(gm, n, sub, [flat[i] for i in pos], const_prefix="_flex_const")
        for user in list(n.users):
            if user.op == "call_function" and user.target is operator.getitem and isinstance(out, (list, tuple)):
                item = out[user.args[1]]
                if isinstance(item, (list, tuple)):  # the backward's grads of score_mod buffers (a tuple)
                    for u2 in list(user.users):
                        if u2.op == "call_function" and u2.target is operator.getitem:
                            u2.replace_all_uses_with(item[u2.args[1]])
                            gm.graph.erase_node(u2)
                    if user.users:
                        continue
                else:
                    user.replace_all_uses_with(item)
                gm.graph.erase_node(user)
        if n.users:
            raise RuntimeError(f"torch_tpu: cannot inline {n.format_node()}: its results are used whole")
        gm.graph.erase_node(n)
        _py_stats["flex_attention_nodes"] += 1
    for a in list(gm.graph.nodes):
        if a.op == "get_attr" and not a.users:
            gm.graph.erase_node(a)
    gm.graph.lint()
    gm.recompile()


def _compile_aten_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], name: str,
                        fullgraph: bool, inference: bool = False, specialise: bool = True,
                        collectives_in_program: bool = True) -> Callable:
    _inline_control_deps(gm)
    _inline_flex_attention(gm)
    _prepare_regions(gm)
    if specialise and _is_dynamic(gm):
        _py_stats["dynamic_graphs"] += 1
        log.info("torch_tpu: graph %s has symbolic sizes; it is compiled once per concrete input signature", name)
        return _ShapeSpecializedGraph(gm, name, fullgraph, inference, collectives_in_program)
    # Ops without a rule partition the graph now; nodes whose rule cannot lower their call are found when the graph
    # is lowered for its first input signature.
    bad: Dict[torch.fx.Node, str] = {}
    inside = _collectives_inside(gm, name) if collectives_in_program else set()
    dev = _graph_device(gm)
    for n in gm.graph.nodes:
        if n in inside:
            continue
        why = _node_supported(n) or _made_elsewhere(n, dev)
        if why is not None:
            bad[n] = why
    if bad and _inline_regions(gm):
        # a partitioned graph runs its regions' nodes inline (partitions take no subgraphs)
        return _compile_aten_graph(gm, example_inputs, name, fullgraph, inference, specialise, collectives_in_program)
    if inside and bad:  # the graph is partitioned anyway: its collectives split it too
        bad.update({n: _op_name(n.target) or str(n.target) for n in inside})
        inside = set()
    if inside:
        _py_stats["program_collectives"] += sum(1 for n in inside if _base_collective(n) != "wait_tensor")
    if bad:
        # Collectives (functional collectives from DTensor, FSDP2, tensor parallelism or user code) split the
        # graph: they run through their process group (tpu_dist) between the compiled partitions, even with
        # fullgraph=True.
        collectives = {n for n in bad if _is_collective(n)}
        # Stream and event operations dynamo records (streams::fork/join/record_event/wait_event/synchronize_*,
        # record_stream; e.g. Diffusers' group offloading hooks inside a compiled model) act on the host's view of
        # the device queue: they run eagerly where the graph has them, between compiled partitions, even with
        # fullgraph=True (a tpu device is one in-order queue, so they order nothing inside a program).
        stream_ops = {n for n in bad if _is_stream_op(n)}
        collectives |= stream_ops
        others = {n: m for n, m in bad.items() if n not in collectives}
        if fullgraph and others:
            raise RuntimeError(_fail_message(name, others))
        if others:
            log.warning("torch_tpu: graph %s: ops without a lowering run eagerly: %s", name,
                        ", ".join(sorted({(_op_name(n.target) or str(n.target)) for n in others})))
        if stream_ops:
            _py_stats["stream_nodes"] += len(stream_ops)
            log.info("torch_tpu: graph %s: %d stream/event operations run between compiled partitions", name,
                     len(stream_ops))
            collectives -= stream_ops
        if collectives:
            _py_stats["collective_nodes"] += len(collectives)
            log.info("torch_tpu: graph %s: %d collectives run through their process group between compiled "
                     "partitions", name, len(collectives))
        return _partitioned(gm, name, set(bad), fullgraph, inference)
    try:
        d, cg = _make_graph(gm, name, example_inputs, inference)
    except UnsupportedGraph as e:
        if inside:
            # Not one program (e.g. an opaque graph input that an op takes as an argument): split at the
            # collectives, which run through their process group.
            log.info("torch_tpu: graph %s: collectives run through their process group (%s)", name, e)
            _py_stats["program_collectives"] -= sum(1 for n in inside if _base_collective(n) != "wait_tensor")
            _py_stats["collective_nodes"] += len(inside)
            return _partitioned(gm, name, set(inside), fullgraph, inference)
        return _eager_graph(gm, name, str(e), fullgraph)

    def on_errors(errors: List[Tuple[int, str]]) -> Callable:
        whole = [m for idx, m in errors if idx < 0]
        if whole:
            return _unboxed(_eager_graph(gm, name, whole[0], fullgraph))
        failed = {d.node_of_desc[idx]: msg for idx, msg in errors}
        regions = {n for n in failed if _region_kind(n) == "invoke_subgraph"}
        if regions:
            # a region's function could not be built (a random op or a device-side check inside it): its call
            # sites compile its nodes inline
            log.info("torch_tpu: graph %s: regions compiled inline: %s", name, "; ".join(sorted(set(
                failed[n] for n in regions))))
            _inline_regions(gm, regions)
            return _unboxed(_compile_aten_graph(gm, example_inputs, name, fullgraph, inference, specialise,
                                                collectives_in_program))
        # A collective that cannot run inside the program (uneven all_to_all splits, ...): the graph is split at
        # every collective instead, as on the host transport.
        split = {n: m for n, m in failed.items() if n in inside}
        others = {n: m for n, m in failed.items() if n not in inside}
        if fullgraph and others:
            raise RuntimeError(_fail_message(name, others))
        if others:
            log.warning("torch_tpu: graph %s: ops that cannot be lowered run eagerly: %s", name,
                        ", ".join(sorted({(_op_name(n.target) or str(n.target)) for n in others})))
        if split:
            log.info("torch_tpu: graph %s: collectives run through their process group (%s)", name,
                     "; ".join(sorted(set(split.values()))))
            _py_stats["collective_nodes"] += len(inside)
        return _unboxed(_partitioned(gm, name, set(others) | set(inside), fullgraph, inference))

    log.debug("torch_tpu: graph %s: %d ops", name, d.num_ops)
    return _GraphRunner(d, cg, name, on_errors)


def _unboxed(boxed: Callable) -> Callable:
    """A boxed function (takes the input list) as a runner's replacement: called with the inputs, returns a list."""
    return lambda inputs: list(boxed(list(inputs)))


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


def _eager_graph(gm: torch.fx.GraphModule, name: str, why: str, fullgraph: bool) -> Callable:
    if fullgraph:
        raise RuntimeError(f"torch_tpu: graph {name} cannot be compiled: {why}")
    log.warning("torch_tpu: graph %s runs eagerly: %s", name, why)
    _py_stats["eager_graphs"] += 1
    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(gm)


def _partitioned(gm: torch.fx.GraphModule, name: str, bad: set, fullgraph: bool, inference: bool = False) -> Callable:
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupport
    from torch._functorch.aot_autograd import make_boxed_func

    _py_stats["partitioned_graphs"] += 1
    _py_stats["fallback_nodes"] += sum(1 for n in bad if not (_is_collective(n) or _is_stream_op(n)))
    bad_names = {n.name for n in bad}

    class _Support(OperatorSupport):
        def is_node_supported(self, submodules: Any, node: torch.fx.Node) -> bool:
            # Input mutations (copy_) stay outside the partitions: a partition may run before a later reader of
            # the input's old value, so the writes run eagerly where the graph has them (at its end).
            return (node.op == "call_function" and node.name not in bad_names and _node_supported(node) is None
                    and node.target is not torch.ops.aten.copy_.default)

    part = CapabilityBasedPartitioner(gm, _Support(), allows_single_node_partition=True)
    partitions = part.propose_partitions()
    fused = part.fuse_partitions(partitions)
    count = 0
    for node in list(fused.graph.nodes):
        if node.op != "call_module" or not str(node.target).startswith("fused_"):
            continue
        sub = getattr(fused, node.target)
        vals = [a.meta.get("val", None) if isinstance(a, torch.fx.Node) else a for a in node.args]
        for ph, v in zip([n for n in sub.graph.nodes if n.op == "placeholder"], vals):
            if "val" not in ph.meta and v is not None:
                ph.meta["val"] = v
        sname = f"{name}.{node.target}"
        try:
            d, cg = _make_graph(sub, sname, None, inference)
        except UnsupportedGraph as e:
            log.warning("torch_tpu: partition %s runs eagerly: %s", sname, e)
            continue

        def on_errors(errors: List[Tuple[int, str]], sub: torch.fx.GraphModule = sub, sname: str = sname,
                      single: bool = d.single_output) -> Callable:  # type: ignore[attr-defined]
            log.warning("torch_tpu: partition %s runs eagerly: %s", sname, "; ".join(m for _, m in errors))

            def eager(inputs: List[Any]) -> List[Any]:
                r = sub(*inputs)
                return [r] if single else list(r)

            return eager

        setattr(fused, node.target, _SubgraphModule(_GraphRunner(d, cg, sname, on_errors)))
        count += 1
    fused.recompile()
    log.info("torch_tpu: graph %s: %d compiled partitions", name, count)
    return make_boxed_func(fused)


# ---------------------------------------------------------------------------------------------------------------
# The backend


def _decompositions() -> Dict[Any, Callable]:
    from torch._decomp import core_aten_decompositions

    from torch._decomp import decomposition_table

    table = dict(core_aten_decompositions())
    aten = torch.ops.aten
    # Core ATen ops (not decomposed by the core table) that are easy to decompose when there is no rule for them.
    extra = [
        aten.native_group_norm.default,
        aten.native_batch_norm.default,
        aten._native_batch_norm_legit.default,
        aten._native_batch_norm_legit_functional.default,
        aten._native_batch_norm_legit_no_training.default,
        aten.upsample_nearest1d.vec,
        aten.upsample_nearest2d.vec,
        aten.upsample_nearest3d.vec,
        aten.upsample_bilinear2d.vec,
        aten.native_layer_norm.default,
        aten.native_layer_norm_backward.default,
        aten._softmax.default,
        aten._log_softmax.default,
        aten.gelu.default,
        aten.native_dropout.default,
        aten.addmm.default,
    ]
    for op in extra:
        if op not in table and op in decomposition_table:
            table[op] = decomposition_table[op]
    table.update(_foreach_decompositions())
    # Attention with its log-sum-exp (Diffusers' ring attention): the composition tpu's eager kernel runs.
    from ._attention import _flash_attention

    table[aten._scaled_dot_product_flash_attention.default] = _flash_attention
    # Ops with a rule of their own stay whole: one rule emits better code than its decomposition.
    for op in list(table):
        name = _op_name(op)
        if name is not None and _C._compile_has_rule(name):
            del table[op]
    return table


_decomp_cache: Optional[Dict[Any, Callable]] = None


def _foreach_decompositions() -> Dict[Any, Callable]:
    """``_foreach_<op>`` (optimizers) as one ``<op>`` per list element: each is then lowered by its own rule."""
    table: Dict[Any, Callable] = {}
    for full in torch._C._dispatch_get_all_op_names():
        if not full.startswith("aten::_foreach_"):
            continue
        base, _, overload = full[len("aten::"):].partition(".")
        if base.endswith("_"):
            continue  # in-place forms: functionalization turns them into the functional ones
        elem = getattr(torch.ops.aten, base[len("_foreach_"):], None)
        packet = getattr(torch.ops.aten, base, None)
        if elem is None or packet is None:
            continue
        op = getattr(packet, overload or "default", None)
        if op is None:
            continue
        table[op] = _make_foreach_decomp(op, elem)
    return table


def _make_foreach_decomp(op: Any, elem: Any) -> Callable:
    kinds = []  # per argument: "tensors", "scalars" or "plain"
    names = []
    for a in op._schema.arguments:
        t = str(a.type)
        if "Tensor" in t and ("List" in t or "[]" in t):
            kinds.append("tensors")
        elif ("Scalar" in t or "float" in t or "int" in t) and ("List" in t or "[]" in t):
            kinds.append("scalars")
        else:
            kinds.append("plain")
        names.append((a.name, a.kwarg_only))

    def decomp(*args: Any, **kwargs: Any) -> List[torch.Tensor]:
        pos = list(args)
        kw = dict(kwargs)
        n = None
        for i, k in enumerate(kinds):
            if k != "plain" and i < len(pos):
                n = len(pos[i])
                break
        if n is None:
            return NotImplemented
        out = []
        for j in range(n):
            a, k2 = [], dict(kw)
            for i, x in enumerate(pos):
                v = x[j] if kinds[i] != "plain" else x
                if names[i][0] in ("value", "alpha"):  # keyword-only in the per-element ops (addcmul, add)
                    k2[names[i][0]] = v
                else:
                    a.append(v)
            out.append(elem(*a, **k2))
        return out

    return decomp


def _current_fullgraph() -> bool:
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
    except Exception:
        return False
    if tx is None:
        return False
    return bool(getattr(tx, "one_graph", False) or getattr(tx, "error_on_graph_break", False))


def tpu_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], options: Optional[Dict[str, Any]] = None,
                **kwargs: Any) -> Callable:
    r"""The dynamo backend "tpu": AOTAutograd (core ATen, functionalized) + one XLA program per graph.

    ``options`` (``torch.compile(..., options={...})``): ``fallback`` (default True: ops without a rule run
    eagerly; False makes them an error, as ``fullgraph=True`` does); ``collectives_in_program`` (default True,
    unless ``TORCH_TPU_COLLECTIVES_IN_PROGRAM=0``: functional collectives of XLA-transport groups are compiled into
    the graph's program; False splits the graph at them); ``graph_call`` (default True: inference graphs that
    AOTAutograd's runtime wrappers would pass through unchanged are called from C++, see :func:`_graph_call`).
    """
    global _decomp_cache
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    opts = dict(options or {})
    opts.update(kwargs)
    fullgraph = _current_fullgraph() or not opts.get("fallback", True)
    in_program = bool(opts.get("collectives_in_program", _collectives_in_program_default()))
    gid = next(_graph_ids)

    inference: Dict[str, Any] = {}  # what the inference compiler saw (for the graph call, see _graph_call)

    def compiler(kind: str) -> Callable:
        def fn(g: torch.fx.GraphModule, ex: Sequence[Any]) -> Callable:
            compiled = _compile_aten_graph(g, ex, f"g{gid}.{kind}", fullgraph, inference=kind == "inference",
                                           collectives_in_program=in_program)
            if kind == "inference":
                ctx = torch._guards.TracingContext.try_get()
                inference.update(runner=compiled, num_inputs=sum(1 for n in g.graph.nodes if n.op == "placeholder"),
                                 meta=getattr(ctx, "fw_metadata", None) if ctx is not None else None)
            return compiled

        return fn

    if _decomp_cache is None:
        _decomp_cache = _decompositions()
    decompositions = _decomp_cache
    # Custom ops implemented by a JAX kernel (torch_tpu._jax): traced through to tpu::stablehlo_call.
    from ._jax import kernel_op_decompositions

    kernel_ops = kernel_op_decompositions()
    if kernel_ops:
        decompositions = {**_decomp_cache, **kernel_ops}
    backend = aot_autograd(
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
        decompositions=decompositions,
        partition_fn=min_cut_rematerialization_partition,
        keep_inference_input_mutations=True,
    )
    compiled = backend(gm, example_inputs)
    call = _graph_call(compiled, inference, gm, example_inputs) if opts.get("graph_call", True) else None
    return call if call is not None else compiled


def _graph_call(compiled: Callable, inference: Dict[str, Any], gm: torch.fx.GraphModule,
                example_inputs: Sequence[Any]) -> Optional[Callable]:
    """The C++ graph call (``_C._GraphCall``) that replaces AOTAutograd's runtime wrappers for an inference graph
    whose wrappers would pass every call through unchanged, else None.

    AOTAutograd wraps the backend's compiled graph in Python that, per call, reorders and regenerates what the graph
    could not return itself: outputs that alias inputs or intermediates (views), input mutations applied outside the
    graph, subclass wrapping, effect tokens, deduplicated or aliased inputs, grad-mode changes. A graph with none of
    that (most inference graphs: fresh outputs, in-graph mutations such as a static KV cache's) needs only the launch:
    the graph call takes Dynamo's tensors straight to the program and returns its outputs, and falls back to the
    wrapped path for any call it does not serve (a new input signature, whose program that path builds; CPU
    tensors). Dynamo's guards (grad mode, requires_grad, sizes, dtypes, devices, aliasing) keep every call that reaches
    it an inference call of the same kind. ``options={"graph_call": False}`` keeps the wrappers.
    """
    runner = inference.get("runner")
    meta = inference.get("meta")
    if not isinstance(runner, _GraphRunner) or meta is None or runner.cg is None:
        return None
    if runner.constants or runner._dropped or runner.const_outputs or runner._instead is not None:
        return None
    try:
        plain = (meta.num_mutated_inp_runtime_indices == 0 and meta.num_outputs_aliased == 0
                 and meta.num_intermediate_bases == 0 and not meta.dynamic_outputs
                 and meta.grad_enabled_mutation is None and not meta.tokens and not meta.is_rng_op_functionalized
                 and not getattr(meta, "unsafe_view_out_indices", None)
                 and all(isinstance(m, int) or type(m).__name__ == "PlainTensorMeta" for m in meta.subclass_inp_meta))
        bump = [int(i) for i in meta.mutated_graph_handled_indices_seen_by_autograd]
    except AttributeError:  # another torch's metadata: keep its wrappers
        return None
    if not plain or inference.get("num_inputs") != len(example_inputs):
        return None
    if any(True for _ in gm.parameters()) or any(True for _ in gm.buffers()):
        return None  # AOTAutograd passes lifted parameters first
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    if not all(isinstance(x, torch.Tensor) and not is_traceable_wrapper_subclass(x) for x in example_inputs):
        return None
    outs: List[Any] = []
    for n in gm.graph.find_nodes(op="output"):
        torch.fx.node.map_arg(n.args, lambda a: outs.append(a.meta.get("val")))
    if any(isinstance(v, torch.Tensor) and is_traceable_wrapper_subclass(v) for v in outs):
        return None
    if bump:
        # A mutated input that shares its storage with another input is AOTAutograd's synthetic-base case.
        mutated = {i for i, info in enumerate(meta.input_info) if info.mutates_data or info.mutates_metadata}
        storages = [x.untyped_storage()._cdata for x in example_inputs]
        if any(storages.count(storages[i]) > 1 for i in mutated):
            return None
    return _C._GraphCall(runner.cg, compiled, bump)


# ---------------------------------------------------------------------------------------------------------------
# Registration


def register(registry: Optional[types.ModuleType] = None) -> None:
    r"""Register ``tpu_backend`` as dynamo backend "tpu" (idempotent)."""
    if registry is None:
        from torch._dynamo.backends import registry  # type: ignore[no-redef]
    if _BACKEND_NAME in registry._COMPILER_FNS:
        return
    registry.register_backend(compiler_fn=tpu_backend, name=_BACKEND_NAME)


_REGISTRY = "torch._dynamo.backends.registry"


def _install() -> None:
    r"""Register now if dynamo's registry is loaded, else right after it loads (dynamo is not imported here)."""
    from .api import _when_imported

    _when_imported(_REGISTRY, register, "the torch.compile backend 'tpu'")
