"""Fused optimizer calls in a Dynamo graph, made functional before AOTAutograd sees them.

A training step compiled whole (forward, ``loss.backward()``, ``opt.step()``: see
``torch_tpu._whole_step``) with a fused optimizer puts ``torch._fused_adam_`` (``_fused_adamw_``,
``_fused_sgd_``, ``_fused_adagrad_``) in the Dynamo graph. PyTorch's functionalization kernel of these in-place ops
treats an empty mutable list (``max_exp_avg_sqs`` without amsgrad, ``momentum_buffer_list`` without momentum) as "not
functional" and then refuses the call ("mutating a non-functional tensor with a functional tensor"), on every
device. :func:`functionalize_fused_optimizers` replaces each such node by :func:`_fused_functional`: the op's
functional variant (``aten::_fused_adam`` ..., which returns the new values of every mutable list) followed by a
``copy_`` of each new value into its tensor, which AOTAutograd turns into the graph's input mutations (donated
buffers, updated in place).
"""

from __future__ import annotations

from typing import Any, Dict, List

import torch

_FUSED = ("_fused_adam_", "_fused_adamw_", "_fused_sgd_", "_fused_adagrad_")


def _fused_name(target: Any) -> str:
    """The in-place fused optimizer ``target`` names (``torch._fused_adam_``, ``torch.ops.aten._fused_adam_.*``), or
    ""."""
    if isinstance(target, torch._ops.OpOverload):
        name = target._schema.name.split("::")[-1]
    elif isinstance(target, torch._ops.OpOverloadPacket):
        name = target._qualified_op_name.split("::")[-1]
    else:
        name = getattr(target, "__name__", "")
        if getattr(torch, name, None) is not target:
            return ""
    return name if name in _FUSED else ""


def _overload(name: str, kwargs: Dict[str, Any]) -> torch._ops.OpOverload:
    """The in-place overload a call binds to: ``.tensor_lr`` when ``lr`` (keyword-only in every fused schema) is a
    tensor."""
    packet = getattr(torch.ops.aten, name)
    if isinstance(kwargs.get("lr"), torch.Tensor) and "tensor_lr" in packet.overloads():
        return packet.tensor_lr
    return packet.default


def _fused_functional(name: str, *args: Any, **kwargs: Any) -> None:
    """``torch.<name>(*args, **kwargs)`` (an in-place fused optimizer step) through its functional variant."""
    inplace = _overload(name, kwargs)
    schema = inplace._schema
    bound: List[Any] = []
    for i, a in enumerate(schema.arguments):
        if i < len(args):
            bound.append(args[i])
        elif a.name in kwargs:
            bound.append(kwargs[a.name])
        else:
            bound.append(a.default_value)
    functional = getattr(getattr(torch.ops.aten, name[:-1]), inplace._overloadname)
    outs = functional(*args, **kwargs)
    mutable = [bound[i] for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write]
    if len(mutable) != len(outs):
        raise RuntimeError(f"torch_tpu: {name}: {len(mutable)} mutable lists, functional variant returned {len(outs)}")
    for dsts, srcs in zip(mutable, outs):
        for d, s in zip(dsts, srcs):
            d.copy_(s)


def functionalize_fused_optimizers(gm: torch.fx.GraphModule) -> int:
    """Rewrites every in-place fused optimizer call of ``gm`` (a Dynamo graph) as :func:`_fused_functional`; returns
    how many."""
    count = 0
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        name = _fused_name(node.target)
        if not name:
            continue
        node.target = _fused_functional
        node.args = (name,) + tuple(node.args)
        count += 1
    if count:
        gm.recompile()
    return count
