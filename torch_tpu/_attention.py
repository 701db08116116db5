"""``aten::_scaled_dot_product_flash_attention`` on tpu: attention that also returns its log-sum-exp.

PyTorch implements the op for CUDA only (the CPU has ``_scaled_dot_product_flash_attention_for_cpu``), so on tpu it
reached the CPU fallback, which has no kernel for it ("Could not run 'aten::_scaled_dot_product_flash_attention'
with arguments from the 'CPU' backend"). Code that needs the log-sum-exp of an attention block calls it directly:
Diffusers' ring attention (``ContextParallelConfig(ring_degree=N)`` with the ``_native_flash`` backend) merges the
partial attention of each ring step with it. Here it is the composition of tpu ops (float32 scores, causal mask,
log-sum-exp, softmax, weighted sum), each a lowered program: the results are those of the math of
``scaled_dot_product_attention`` plus the log-sum-exp in float32, as the CUDA kernel returns it. Compiled graphs
decompose the op into the same composition (``_dynamo_backend._decompositions``), so it stays in one program. The
backward (``_scaled_dot_product_flash_attention_backward``) has no tpu kernel.
"""

from __future__ import annotations

import math
from typing import Optional

import torch

from . import _aten_kernels



def _flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, dropout_p: float = 0.0,
                     is_causal: bool = False, return_debug_mask: bool = False, *, scale: Optional[float] = None):
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise RuntimeError("_scaled_dot_product_flash_attention: query, key and value must be 4-D (batch, heads, "
                           f"sequence, head dim), got {query.dim()}-D, {key.dim()}-D and {value.dim()}-D")
    if not (query.dtype == key.dtype == value.dtype):
        raise RuntimeError("_scaled_dot_product_flash_attention: query, key and value must have the same dtype, got "
                           f"{query.dtype}, {key.dtype} and {value.dtype}")
    if dropout_p != 0.0:
        raise NotImplementedError("_scaled_dot_product_flash_attention on tpu: dropout_p must be 0 (the dropout "
                                  "mask of the CUDA kernel comes from its Philox state; use "
                                  "torch.nn.functional.scaled_dot_product_attention for attention with dropout)")
    b, h, sq, d = query.shape
    sk = key.shape[-2]
    s = scale if scale is not None else 1.0 / math.sqrt(d)
    scores = torch.matmul(query.float(), key.float().transpose(-2, -1)) * s
    if is_causal:
        keep = torch.ones(sq, sk, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - lse.unsqueeze(-1))
    out = torch.matmul(probs, value.float()).to(query.dtype)
    empty = torch.empty(0, dtype=torch.int32, device=query.device)
    philox = torch.empty((), dtype=torch.int64, device=query.device)
    debug = torch.empty(0, dtype=query.dtype, device=query.device)
    return out, lse, empty, empty.clone(), sq, sk, philox, philox.clone(), debug


def _install() -> None:
    r"""Registers ``aten::_scaled_dot_product_flash_attention`` for the tpu device."""
    _aten_kernels.register("_scaled_dot_product_flash_attention", _flash_attention)
