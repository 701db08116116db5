"""The ``tpu`` operator namespace: the project's own ops (``torch.ops.tpu.*``).

The schemas, and the reference implementations that serve CPU tensors and shape inference, are defined in C++
(csrc/eager/tpu_ops.cpp); on tpu tensors every op runs through its lowering rule (csrc/lowering/rules/), eager
and compiled alike. This module registers what is written in Python: autograd formulas, and the fake, CPU and
autograd implementations of ``tpu::stablehlo_call`` (foreign programs: :mod:`torch_tpu._foreign`).

Fused kernels:

- ``swiglu(gate, up)``: ``silu(gate) * up``, the gating of SwiGLU MLPs (Llama, Qwen, Mistral), one program per
  call in eager mode with a fused backward (``tpu::swiglu_backward``).

Adding one: docs/ARCHITECTURE.md, "Adding a fused kernel".
"""

from __future__ import annotations

from typing import Any, Tuple

import torch

from . import _foreign

__all__ = ["swiglu"]


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    r"""``silu(gate) * up`` as one fused op (any device; fused program and backward on tpu)."""
    return torch.ops.tpu.swiglu(gate, up)


def _swiglu_setup(ctx: Any, inputs: Tuple[Any, ...], output: Any) -> None:
    gate, up = inputs
    ctx.save_for_backward(gate, up)


def _swiglu_backward(ctx: Any, grad: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    gate, up = ctx.saved_tensors
    d_gate, d_up = torch.ops.tpu.swiglu_backward(grad.contiguous(), gate, up)
    return d_gate, d_up


_done = False


def _register() -> None:
    global _done
    if _done:
        return
    _done = True
    torch.library.register_autograd("tpu::swiglu", _swiglu_backward, setup_context=_swiglu_setup)
    _foreign._register_op()
    from . import _grouped_mm

    _grouped_mm._install()  # aten::_grouped_mm's shape function for every float dtype (MoE layers)
