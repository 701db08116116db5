"""Python kernels this package registers for ATen ops on tpu (or for their shape functions).

PyTorch implements a few ops for CUDA only (``record_stream``, ``_scaled_dot_product_flash_attention``) and has a
shape function that refuses tpu's dtypes (``_grouped_mm``); the modules that replace them register through
:func:`register`, into one ``torch.library.Library`` kept alive for the life of the process. Registering the same
op and dispatch key twice is a no-op, so the installers may run more than once.

The kernels run below the dispatcher, as PyTorch's own C++ and Python kernels do: Dynamo never traces them. Without
that, a kernel called eagerly inside a compiled function (after a graph break: ``nn.GRU`` under ``torch.compile``
with Dynamo's default ``allow_rnn=False``) had its own frames compiled, with the meta tensors it was given, and
handed their results back as real tensors ("Cannot copy out of meta tensor", or a cell op sent to the CPU).
"""

from __future__ import annotations

import warnings
from typing import Callable, Optional, Set, Tuple

import torch

_lib: Optional[torch.library.Library] = None
_registered: Set[Tuple[str, str]] = set()


def register(op: str, kernel: Callable, key: str = "PrivateUse1", replaces: bool = False) -> bool:
    r"""Registers ``kernel`` for ``aten::<op>`` under dispatch ``key``; returns False when it already was.

    ``replaces``: the kernel is meant to replace one PyTorch registered (PyTorch's warning about it is silenced).
    """
    global _lib
    if (op, key) in _registered:
        return False
    if _lib is None:
        _lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        if replaces:
            warnings.simplefilter("ignore")
        _lib.impl(op, kernel, key)
    _skip_in_dynamo(kernel)
    _registered.add((op, key))
    return True


def _skip_in_dynamo(kernel: Callable) -> None:
    """Marks the kernel's code, and everything it calls, as never traced by Dynamo (its frame-execution strategy in
    CPython's frame evaluation hook, which exists whether or not torch._dynamo is imported: importing it here would
    cost every ``import torch_tpu`` about half of ``import torch``)."""
    code = getattr(kernel, "__code__", None)
    if code is None:
        return
    from torch._C._dynamo.eval_frame import _FrameAction, _FrameExecStrategy, set_code_exec_strategy

    set_code_exec_strategy(code, _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP))
