"""``torch.nn.attention.flex_attention`` on tpu tensors, eagerly.

PyTorch's ``flex_attention`` refuses every device outside a fixed list before any kernel runs
(``_validate_device``: "FlexAttention is only supported on CUDA, CPU, HPU, or MPS devices"). Its eager
implementation, however, is device-independent: the ``flex_attention`` higher-order op's CompositeExplicitAutograd
kernel (``sdpa_dense``) evaluates ``score_mod`` and the ``BlockMask``'s ``mask_mod`` over index grids with
``torch.vmap`` and applies a dense masked softmax, and its autograd kernel differentiates the same math
(``flex_attention_backward``). Every op of it has a tpu lowering, so on tpu it computes what it computes on the CPU
(and, unlike on the CPU, with gradients).

This module replaces the device check with one that also accepts tpu tensors; every other device, and the other
checks (nested tensors, dtypes, head sizes, the CPU and MPS backward restriction), are PyTorch's own.
``create_block_mask(..., device="tpu")`` needs nothing: it builds the mask with ordinary ops. Under
``torch.compile(backend="tpu")`` the higher-order op (and its backward) is traced into ATen ops from the same dense
implementation and becomes part of the graph's program (``_dynamo_backend._inline_flex_attention``), also with
``fullgraph=True``. The dense math materialises the scores (batch x heads x query x key), as PyTorch's CPU eager path
does: memory grows with the square of the sequence, not the sparse blocks of a ``BlockMask``.
``TORCH_TPU_FLEX_ATTENTION=0`` leaves PyTorch's check untouched.
"""

from __future__ import annotations

import functools
from typing import Any

from . import _settings

_MARK = "_torch_tpu_wrapped"


def _install() -> None:
    if not _settings.get("TORCH_TPU_FLEX_ATTENTION"):
        return
    try:
        import torch.nn.attention.flex_attention as fa
    except ImportError:  # pragma: no cover - a torch without flex attention
        return
    original = getattr(fa, "_validate_device", None)
    if original is None or getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def _validate_device(query: Any, key: Any, value: Any) -> None:
        if query.device.type == "tpu":
            return
        original(query, key, value)

    setattr(_validate_device, _MARK, True)
    fa._validate_device = _validate_device
    _register_autocast()


def _register_autocast() -> None:
    """``torch.autocast("tpu")`` around flex_attention: the higher-order op has autocast kernels for CUDA and the CPU
    only, so under tpu autocast it raised NotImplementedError (Diffusers' mixed-precision training of flex-attention
    models). As PyTorch's own: q, k and v are cast to the autocast dtype, then the op runs with autocast excluded."""
    import torch
    from torch._C import DispatchKey
    from torch._higher_order_ops.flex_attention import flex_attention as hop

    key = DispatchKey.AutocastPrivateUse1
    if key in hop.py_kernels:
        return

    def autocast_tpu(query: Any, key_: Any, value: Any, score_mod: Any, block_mask: Any, scale: Any,
                     kernel_options: Any, score_mod_other_buffers: Any = (), mask_mod_other_buffers: Any = ()) -> Any:
        dtype = torch.get_autocast_dtype("tpu")

        def cast(t: Any) -> Any:
            return t.to(dtype) if t.is_floating_point() and t.dtype != torch.float64 else t

        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(key)):
            return hop(cast(query), cast(key_), cast(value), score_mod, block_mask, scale, kernel_options,
                       score_mod_other_buffers, mask_mod_other_buffers)

    hop.py_impl(key)(autocast_tpu)
