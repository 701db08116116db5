"""Decompositions AOTAutograd applies (core ATen's, ``_foreach_*`` per element, attention with its log-sum-exp),
keeping ops that have a rule whole; flex_attention traced into the ATen ops of its dense math."""

from __future__ import annotations

import contextlib
import operator
from typing import Any, Callable, Dict, List, Optional

import torch

from .. import _C
from ._stats import _py_stats
from ._args import _getattr_path, _is_symbolic, _op_name
from ._regions import _copy_graph_before


def _fma(a: Any, b: Any, c: Any) -> torch.Tensor:
    return a * b + c


def late_decompositions() -> Dict[Any, Callable]:
    r"""Decompositions of ops registered after the first graph: Inductor's ``prims.fma`` (which Dynamo emits for
    ``addcmul_`` with a value, ``lerp`` and ``addcdiv_``: the single-tensor optimizers), once
    ``torch._inductor.inductor_prims`` is imported, as its reference ``a * b + c`` (operands broadcast, ``b`` may be a
    number)."""
    import sys

    if "torch._inductor.inductor_prims" not in sys.modules:
        return {}
    return {torch.ops.prims.fma.default: _fma}


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
    from .._attention import _flash_attention

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
