"""``torch_tpu._internal.optim.patch``: TorchTPU's ``patch_optimizer_graph_breaks()``.

PyTorch wraps every optimizer's ``step`` in ``torch.optim.optimizer._use_grad_for_differentiable``, which calls
``torch._dynamo.graph_break()`` before and after the update, so ``torch.compile`` of a training step splits at
``opt.step()`` (forward+backward in one graph, the update in another, with the step's Python in between).
:func:`patch_optimizer_graph_breaks` replaces that wrapper (for optimizer classes defined so far and later) by one
that only sets grad mode (``defaults["differentiable"]``) around the update, so dynamo traces the update into the
same frame; :func:`unpatch_optimizer_graph_breaks` restores PyTorch's. Numerics are unchanged: the update is the
same code, run under ``no_grad`` as before.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Optional

import torch
import torch.optim.optimizer as _optimizer

__all__ = ["patch_optimizer_graph_breaks", "unpatch_optimizer_graph_breaks", "use_grad_for_differentiable"]

_original_decorator: Optional[Callable] = None
_original_steps: Dict[type, Callable] = {}


def use_grad_for_differentiable(func: Callable) -> Callable:
    r"""``_use_grad_for_differentiable`` without the graph breaks: grad mode is ``defaults["differentiable"]``
    during ``func`` and restored after it."""

    @functools.wraps(func)
    def _use_grad_no_break(*args: Any, **kwargs: Any) -> Any:
        self = args[0]
        prev = torch.is_grad_enabled()
        try:
            torch.set_grad_enabled(bool(self.defaults.get("differentiable", False)))
            return func(*args, **kwargs)
        finally:
            torch.set_grad_enabled(prev)

    _use_grad_no_break._torch_tpu_no_break = True  # type: ignore[attr-defined]
    return _use_grad_no_break


def _is_use_grad(fn: Any) -> bool:
    return getattr(getattr(fn, "__code__", None), "co_name", None) == "_use_grad"


def _patched(step: Callable) -> Optional[Callable]:
    r"""``step`` with PyTorch's ``_use_grad`` wrapper replaced (keeping the profiler hook around it), or None."""
    if _is_use_grad(step) and hasattr(step, "__wrapped__"):
        return use_grad_for_differentiable(step.__wrapped__)
    inner = getattr(step, "__wrapped__", None)
    if getattr(step, "hooked", False) and inner is not None and _is_use_grad(inner):
        new = torch.optim.Optimizer.profile_hook_step(use_grad_for_differentiable(inner.__wrapped__))
        new.hooked = True  # type: ignore[attr-defined]
        return new
    return None


def _subclasses(cls: type) -> set:
    out = set()
    for c in cls.__subclasses__():
        out.add(c)
        out |= _subclasses(c)
    return out


def patch_optimizer_graph_breaks() -> None:
    r"""Remove the graph breaks around ``Optimizer.step`` (every optimizer class, and those defined later)."""
    global _original_decorator
    if _original_decorator is None:
        _original_decorator = _optimizer._use_grad_for_differentiable
    _optimizer._use_grad_for_differentiable = use_grad_for_differentiable
    for cls in _subclasses(torch.optim.Optimizer):
        step = cls.__dict__.get("step")
        if step is None:
            continue
        new = _patched(step)
        if new is not None:
            _original_steps.setdefault(cls, step)
            cls.step = new


def unpatch_optimizer_graph_breaks() -> None:
    r"""Restore PyTorch's decorator and the optimizer classes' original ``step``."""
    global _original_decorator
    if _original_decorator is not None:
        _optimizer._use_grad_for_differentiable = _original_decorator
        _original_decorator = None
    for cls, step in _original_steps.items():
        cls.step = step
    _original_steps.clear()
