"""``torch_tpu.compile_whole_step()``: ``torch.compile`` of a training step as one graph, hence one device program.

A training step ``loss = loss_fn(model(x), y); loss.backward(); opt.step(); opt.zero_grad()`` compiled by Dynamo with
its defaults splits into several graphs and runs Python between them:

* ``loss.backward()`` is a graph break (``torch._dynamo.config.trace_autograd_ops`` is off): the backward runs as
  AOTAutograd's separate backward graph, called by the autograd engine;
* ``Optimizer.step`` calls ``torch._dynamo.graph_break()`` before and after the update
  (``_use_grad_for_differentiable``; removed by ``patch_optimizer_graph_breaks``);
* ``Optimizer.zero_grad`` is ``torch._disable_dynamo``'d, and Dynamo disables every optimizer's ``_init_group`` and
  the fused ``_fused_adam``/``_fused_sgd``/``_fused_adagrad`` functions: they run eagerly between graphs;
* when ``.grad`` was assigned inside the graph (the traced backward), Dynamo's shortcut for ``_init_group`` (run it in
  Python on the real tensors) would read stale gradients, so it breaks the graph there.

:func:`compile_whole_step` lifts all of these for the process: the backward is traced into the step's graph (as
``torch.autograd.grad``, with the gradients accumulated into ``.grad`` as the autograd engine would), the update and
``zero_grad`` follow in the same graph, and ``_init_group`` is traced as Python when a gradient is pending. The tpu
backend turns the in-place fused optimizer calls into their functional variants (see ``_dynamo_backend._optim``), so
the parameters and optimizer state become the program's donated, in-place updated inputs. The result is one graph and
one program per step for SGD, Adam, AdamW, Adagrad, ... in their single-tensor, foreach and fused forms.

The step should return ``loss.detach()`` (or nothing): a returned tensor whose autograd graph the traced backward
consumed makes Dynamo restart with a graph break at the backward (as it documents), which gives three programs.
``compile_whole_step(False)`` restores PyTorch's behaviour. It changes Dynamo's tracing for every backend in the
process (the same graphs result with ``backend="inductor"`` on CPU, for instance).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable, List, Tuple

import torch

__all__ = ["compile_whole_step", "whole_step_enabled"]

_enabled = False
_restore: List[Tuple[Any, str, Any]] = []  # (owner, attribute, original value)

# Optimizer modules whose fused function Dynamo disables and whose fused ATen op the tpu backend lowers.
_FUSED_MODULES = ("adam", "adamw", "sgd", "adagrad")


def _set(owner: Any, name: str, value: Any) -> None:
    _restore.append((owner, name, owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)))
    setattr(owner, name, value)


def _restore_all() -> None:
    while _restore:
        owner, name, value = _restore.pop()
        setattr(owner, name, value)


def _undisabled(fn: Any) -> Any:
    """The function ``torch._dynamo.disable`` wrapped, or None when ``fn`` is not such a wrapper."""
    if getattr(fn, "_torchdynamo_disable", False):
        return getattr(fn, "_torchdynamo_orig_callable", None) or getattr(fn, "__wrapped__", None)
    return None


def _pending_grad_guard(original: Callable) -> Callable:
    """Dynamo's ``OptimizerVariable.graph_break_if_pending_mutation``, made to trace ``_init_group`` as Python
    (Dynamo's fallback path when its shortcut does not apply) instead of breaking the graph."""
    from torch._dynamo.variables import optimizer as ov

    def graph_break_if_pending_mutation(self: Any, tx: Any) -> None:
        side_effects = tx.output.side_effects
        for group in self.value.param_groups:
            for p in group["params"]:
                var = side_effects.id_to_variable.get(id(p), None)
                if var is not None and side_effects.has_pending_mutation(var):
                    raise ov.GuardInstallException()
        return None

    graph_break_if_pending_mutation.__wrapped__ = original  # type: ignore[attr-defined]
    return graph_break_if_pending_mutation


def compile_whole_step(enable: bool = True) -> None:
    r"""Let ``torch.compile`` capture a whole training step (forward, ``loss.backward()``, ``opt.step()``,
    ``opt.zero_grad()``) as one graph, which the tpu backend compiles to one program per step; ``enable=False``
    restores PyTorch's behaviour. See the module's documentation (``torch_tpu._whole_step``) for what changes."""
    global _enabled
    if not isinstance(enable, bool):
        raise TypeError(f"compile_whole_step(enable): expected a bool, got {type(enable).__name__}")
    if enable == _enabled:
        return
    if not enable:
        from ._internal.optim.patch import unpatch_optimizer_graph_breaks

        _restore_all()
        unpatch_optimizer_graph_breaks()
        _enabled = False
        return
    import torch._dynamo
    from torch._dynamo import eval_frame
    from torch._dynamo.variables import optimizer as ov

    from ._internal.optim.patch import patch_optimizer_graph_breaks

    eval_frame.TorchPatcher.patch()  # Dynamo's own disables, applied once: lifted below
    try:
        _set(torch._dynamo.config, "trace_autograd_ops", True)
        zero_grad = _undisabled(torch.optim.Optimizer.__dict__["zero_grad"]) or \
            getattr(torch.optim.Optimizer.__dict__["zero_grad"], "__wrapped__", None)
        if zero_grad is not None:
            _set(torch.optim.Optimizer, "zero_grad", zero_grad)
        for cls in list(vars(torch.optim).values()):
            if inspect.isclass(cls) and issubclass(cls, torch.optim.Optimizer) and "_init_group" in cls.__dict__:
                inner = _undisabled(cls.__dict__["_init_group"])
                if inner is not None:
                    _set(cls, "_init_group", inner)
        for short in _FUSED_MODULES:
            mod = importlib.import_module(f"torch.optim.{short}")
            name = f"_fused_{short}"
            inner = _undisabled(getattr(mod, name, None))
            if inner is not None:
                _set(mod, name, inner)
        _set(ov.OptimizerVariable, "graph_break_if_pending_mutation",
             _pending_grad_guard(ov.OptimizerVariable.graph_break_if_pending_mutation))
        patch_optimizer_graph_breaks()
    except BaseException:
        _restore_all()
        raise
    _enabled = True


def whole_step_enabled() -> bool:
    r"""Whether :func:`compile_whole_step` is in effect."""
    return _enabled

