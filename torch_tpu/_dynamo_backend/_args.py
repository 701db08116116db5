"""Argument handling: an FX node's arguments in schema order, their kinds as C++ names them (``core::ArgKind``) and
their encoding in a graph description; opaque graph inputs (process groups, device meshes)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch

from .. import _C


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


_SCHEMA_KINDS: Dict[Tuple[str, str], Tuple[str, ...]] = {}  # bounded by the number of registered operators


def _arg_kinds(schema: Any) -> Tuple[str, ...]:
    """The kind of each argument of an operator's schema, as C++ names it (core::ArgKind; an Optional's element
    kind): read from C++'s one mapping (``_C._schema_arg_kinds``, the same as for eager calls), once per operator."""
    key = (schema.name, schema.overload_name)
    kinds = _SCHEMA_KINDS.get(key)
    if kinds is None:
        try:
            kinds = _SCHEMA_KINDS[key] = tuple(_C._schema_arg_kinds(*key))
        except KeyError as e:  # a TorchScript-only operator (never in an AOTAutograd graph)
            raise UnsupportedGraph(str(e)) from e
    return kinds


_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


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
    if isinstance(a, int) and not isinstance(a, bool) and not _INT64_MIN <= a <= _INT64_MAX or (
            isinstance(a, (list, tuple)) and any(isinstance(x, int) and not _INT64_MIN <= x <= _INT64_MAX for x in a)):
        # (a uint64 value above int64's range: the graph's ops take int64 constants; eager mode has the value)
        raise UnsupportedGraph(f"integer constant {a!r} of {name} outside int64's range")
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


def _getattr_path(obj: Any, path: str) -> Any:
    for p in path.split("."):
        obj = getattr(obj, p)
    return obj


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
