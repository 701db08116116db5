"""Shape functions of the fused GRU cell ops.

On every accelerator device PyTorch's recurrent layers (``nn.LSTM``, ``nn.GRU``, ``nn.LSTMCell``, ``nn.GRUCell``)
compute each step with the fused cells ``aten::_thnn_fused_lstm_cell`` / ``_thnn_fused_gru_cell`` and their
backward (``aten/src/ATen/native/RNN.cpp``); tpu lowers them (``csrc/lowering/rules/rnn.cpp``). PyTorch ships
meta kernels for the LSTM cell and its backward (the cell's fails for cells without biases), but none for the GRU
cell: without one, neither eager mode (which takes result types from meta kernels) nor ``torch.compile``'s fake
tensors can run it. This module registers the GRU cell's two and the LSTM cell's, with the CUDA kernels' checks and
result shapes (``aten/src/ATen/native/cuda/RNN.cu``).
"""

from __future__ import annotations

import torch

from . import _aten_kernels

_GRU_WORKSPACE = 5  # the GRU workspace holds 5 hidden-size blocks per row: r, z, n, hx, hn + b_hn


def _check_sizes(input_gates, hidden_gates, input_bias, hidden_bias, factor, prev_hidden) -> None:
    torch._check(input_gates.ndim == 2, lambda: f"{input_gates.ndim} != 2")
    torch._check(input_gates.shape == hidden_gates.shape,
                 lambda: f"{input_gates.shape} != {hidden_gates.shape}")
    gates_size = input_gates.size(1)
    if input_bias is not None:
        torch._check(input_bias.ndim == 1, lambda: f"{input_bias.ndim} != 1")
        torch._check(input_bias.numel() == gates_size, lambda: f"{input_bias.numel()} != {gates_size}")
        torch._check(input_bias.shape == hidden_bias.shape, lambda: f"{input_bias.shape} != {hidden_bias.shape}")
    torch._check(prev_hidden.ndim == 2, lambda: f"{prev_hidden.ndim} != 2")
    expected = input_gates.size(0) * gates_size // factor
    torch._check(prev_hidden.numel() == expected,
                 lambda: f"{prev_hidden.numel()} != {input_gates.size(0)} * {gates_size} // {factor} "
                         f"(aka {expected})")
    torch._check(all(x.device == input_gates.device for x in (hidden_gates, input_bias, hidden_bias, prev_hidden)
                     if x is not None),
                 lambda: "expected all inputs to be same device")


def _meta_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    _check_sizes(input_gates, hidden_gates, input_bias, hidden_bias, 4, cx)
    workspace = torch.empty_like(input_gates, memory_format=torch.contiguous_format)
    hy = torch.empty_like(cx, memory_format=torch.contiguous_format)
    cy = torch.empty_like(cx, memory_format=torch.contiguous_format)
    return hy, cy, workspace


def _meta_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    _check_sizes(input_gates, hidden_gates, input_bias, hidden_bias, 3, hx)
    workspace = hx.new_empty((hx.size(0), hx.size(1) * _GRU_WORKSPACE))
    hy = torch.empty_like(hx, memory_format=torch.contiguous_format)
    return hy, workspace


def _meta_gru_cell_backward(grad_hy, workspace, has_bias):
    torch._check(grad_hy.ndim == 2, lambda: f"fused_gru_cell_backward: expected grad_hy of 2 dimensions, "
                                            f"got {grad_hy.ndim}")
    torch._check(tuple(workspace.shape) == (grad_hy.size(0), grad_hy.size(1) * _GRU_WORKSPACE),
                 lambda: f"fused_gru_cell_backward: workspace of size {tuple(workspace.shape)}, expected "
                         f"{(grad_hy.size(0), grad_hy.size(1) * _GRU_WORKSPACE)}")
    hidden = workspace.size(1) // _GRU_WORKSPACE
    grad_input_gates = workspace.new_empty((workspace.size(0), hidden * 3))
    grad_hidden_gates = workspace.new_empty((workspace.size(0), hidden * 3))
    grad_hx = torch.empty_like(grad_hy, memory_format=torch.contiguous_format)
    grad_input_bias = workspace.new_empty((hidden * 3,)) if has_bias else None
    grad_hidden_bias = workspace.new_empty((hidden * 3,)) if has_bias else None
    return grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias


def _install() -> None:
    r"""Registers the meta kernels (idempotent). PyTorch's own for the LSTM cell (torch/_meta_registrations.py)
    reads ``.device`` of the optional biases and fails for ``bias=False`` cells: it is replaced, in the dispatcher
    and as the op's Python Meta kernel (which the Python dispatcher, i.e. dynamo's fake tensors, prefers)."""
    import torch._meta_registrations  # noqa: F401  (PyTorch's kernel must exist before it is replaced)

    for op, fn in (("_thnn_fused_lstm_cell", _meta_lstm_cell),
                   ("_thnn_fused_gru_cell", _meta_gru_cell),
                   ("_thnn_fused_gru_cell_backward", _meta_gru_cell_backward)):
        _aten_kernels.register(op, fn, "Meta", replaces=True)
        overload = getattr(torch.ops.aten, op).default
        if torch._C.DispatchKey.Meta in overload.py_kernels:
            overload.py_kernels[torch._C.DispatchKey.Meta] = fn
            overload._dispatch_cache.clear()
