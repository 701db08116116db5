"""Python kernels this package registers for ATen ops on tpu (or for their shape functions).

PyTorch implements a few ops for CUDA only (``record_stream``, ``_scaled_dot_product_flash_attention``) and has a
shape function that refuses tpu's dtypes (``_grouped_mm``); the modules that replace them register through
:func:`register`, into one ``torch.library.Library`` kept alive for the life of the process. Registering the same
op and dispatch key twice is a no-op, so the installers may run more than once.
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
    _registered.add((op, key))
    return True
