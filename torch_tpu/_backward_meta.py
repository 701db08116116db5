"""Shape functions (Meta kernels) for loss and pooling ops whose PyTorch Meta kernel is missing or differs from CPU.

The eager kernel takes every op's result types from its Meta kernel. PyTorch has none for the backward of
fractional 3-d max pooling, the multi-margin and multilabel-margin losses and CTC loss (their CPU kernels compute
the shapes inline), so without these the device lowerings of those ops could not run. Each returns a contiguous
tensor shaped like the input whose gradient it is, after the argument checks the CPU kernel makes on shapes
(data-dependent checks stay with the device lowering).

The Meta kernels of multi_margin_loss and multilabel_margin_loss_forward (PyTorch's decompositions) give a 1-d
input's unreduced loss the shape (1,), where the CPU kernels return a 0-d tensor (multi-margin: for a 0-d target;
multilabel: for a target of at most one dim): they are wrapped to give CPU's shapes, keeping PyTorch's checks.

The fused Adagrad step (``_fused_adagrad_``, both overloads) and the fused Adam and AdamW steps with a Tensor ``lr``
(``_fused_adam_.tensor_lr``, ``_fused_adamw_.tensor_lr``; their float-lr overloads have one) have no Meta kernel
either: theirs make the list checks and write nothing, so the device lowerings run.

Nor do the two pieces of the attention fast paths of nn.MultiheadAttention and nn.TransformerEncoderLayer that
have device lowerings: ``_masked_softmax`` (its mask-type shape checks are CPU's) and
``_transform_bias_rescale_qkv`` (the packed q/k/v split into three (B, heads, T, head_dim) tensors).

``_sample_dirichlet`` has none either (its result is shaped like its concentrations).

``randperm``'s out= form (every randperm call on tpu reaches it) gets the checks CPU's kernel makes on ``n`` and the
result dtype (n beyond what the dtype holds exactly, bool), with CPU's messages, so the device lowering never sees
a call CPU rejects.
"""

from __future__ import annotations

import torch

from . import _aten_kernels


def _fractional_max_pool3d_backward(grad_output, self, kernel_size, output_size, indices):
    torch._check(len(output_size) == 3, lambda: "fractional_max_pool3d_backward: output_size must have 3 entries")
    d = 1 if self.dim() == 5 else 0
    for i, what in enumerate(("time", "height", "width")):
        torch._check(grad_output.size(d + 1 + i) == output_size[i],
                     lambda what=what: f"fractional_max_pool3d_backward(): gradOutput {what} unexpected")
    return self.new_empty(self.shape)


def _multi_margin_loss_backward(grad_output, self, target, p, margin, weight=None, reduction=1):
    torch._check(p == 1 or p == 2, lambda: "only p == 1 and p == 2 supported")
    return self.new_empty(self.shape)


def _multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target):
    torch._check(target.shape == is_target.shape,
                 lambda: f"Expected tensor for argument #3 'target' to have the same size as tensor for argument "
                         f"#5 'is_target'; but {list(target.shape)} does not equal {list(is_target.shape)}")
    return self.new_empty(self.shape)


def _ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood, log_alpha,
                       blank, zero_infinity=False):
    return log_probs.new_empty(log_probs.shape)


def _fused_adagrad_(self, grads, state_sums, state_steps, *, lr, lr_decay, weight_decay, eps, maximize,
                    grad_scale=None, found_inf=None):
    n = len(self)
    torch._check(len(grads) == n and len(state_sums) == n and len(state_steps) == n,
                 lambda: "_fused_adagrad_: params, grads, state_sums and state_steps must have the same length")
    for p, g, s in zip(self, grads, state_sums):
        torch._check(p.shape == g.shape and p.shape == s.shape,
                     lambda: "_fused_adagrad_: a param, its grad and its state_sum must have the same shape")


def _fused_adam_tensor_lr(op):
    def meta(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1, beta2, weight_decay, eps,
             amsgrad, maximize, grad_scale=None, found_inf=None):
        torch._check(lr.dim() == 0 or lr.numel() == 1, lambda: f"{op}: lr must be a one-element tensor")
        # The float overload's Meta kernel checks the lists.
        getattr(torch.ops.aten, op).default(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
                                            lr=1.0, beta1=beta1, beta2=beta2, weight_decay=weight_decay, eps=eps,
                                            amsgrad=amsgrad, maximize=maximize, grad_scale=grad_scale,
                                            found_inf=found_inf)
    return meta


def _multi_margin_loss(input, target, p=1, margin=1, weight=None, reduction=1):
    from torch._decomp.decompositions import multi_margin_loss

    out = multi_margin_loss(input, target, p, margin, weight, reduction)  # PyTorch's checks and dtype
    nframe = input.size(0) if input.dim() == 2 else 1
    return out.new_empty((nframe,) if reduction == 0 and target.dim() > 0 else ())


def _multilabel_margin_loss_forward(input, target, reduction):
    from torch._decomp.decompositions import multilabel_margin_loss_forward

    out, is_target = multilabel_margin_loss_forward(input, target, reduction)
    nframe = input.size(0) if input.dim() == 2 else 1
    return out.new_empty((nframe,) if reduction == 0 and target.dim() > 1 else ()), is_target


def _masked_softmax(self, mask, dim=None, mask_type=None):
    torch._check(mask.dtype == torch.bool, lambda: "Mask should be a boolean tensor")
    if mask.dim() != 2 or self.dim() != 4:
        mask_type = 2
    if mask_type == 2:
        torch._check(self.shape == mask.shape, lambda: "For mask_type == 2 mask shape should match input shape")
    elif mask_type == 1:
        torch._check(self.size(0) == mask.size(0) and self.size(2) == mask.size(1),
                     lambda: "For mask_type == 1 mask shape should be (B, L)")
    elif mask_type == 0:
        torch._check(self.size(2) == mask.size(0) and self.size(2) == mask.size(1),
                     lambda: "For mask_type == 0 mask shape should be (L, L)")
    else:
        torch._check(mask_type is not None, lambda: "Mask Type should be defined")
        torch._check(False, lambda: "Mask Type should be 0 (src_mask) or 1 (src_key_padding_mask), or 2 (default_mask)")
    torch._check(self.dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16),
                 lambda: f'"masked_softmax" not implemented for {str(self.dtype).replace("torch.", "")}')
    return torch.empty_like(self)


def _transform_bias_rescale_qkv(qkv, qkv_bias, num_heads):
    torch._check(qkv.dim() == 3, lambda: "expected qkv to be a 3-d (B, T, 3 * D) tensor")
    b, t, three_d = qkv.shape
    d = three_d // 3
    torch._check(d % num_heads == 0, lambda: "transform_bias_rescale_qkv: D must be divisible by num_head")
    torch._check(three_d == 3 * d, lambda: "transform_bias_rescale_qkv: qkv last dim should be 3 * D")
    shape = (b, num_heads, t, d // num_heads)
    return qkv.new_empty(shape), qkv.new_empty(shape), qkv.new_empty(shape)


_RANDPERM_INT_LIMITS = {torch.int8: ("int8_t", 127), torch.uint8: ("uint8_t", 255), torch.int16: ("int16_t", 32767),
                        torch.uint16: ("uint16_t", 65535), torch.int32: ("int32_t", 2**31 - 1)}
_RANDPERM_FLOAT_DIGITS = {torch.float16: ("Half", 11), torch.bfloat16: ("BFloat16", 8), torch.float32: ("Float", 24)}


def _sample_dirichlet(alpha, generator=None):
    return torch.empty_like(alpha)


_SCALAR_TYPE_NAMES = {torch.float64: "Double", torch.float32: "Float", torch.float16: "Half",
                      torch.bfloat16: "BFloat16"}


def _binomial(count, prob, generator=None):
    torch._check(prob.dtype == count.dtype,
                 lambda: f"Found dtype {_SCALAR_TYPE_NAMES.get(prob.dtype, prob.dtype)} but expected "
                         f"{_SCALAR_TYPE_NAMES.get(count.dtype, count.dtype)}")
    return count.new_empty(torch.broadcast_shapes(count.shape, prob.shape))


def _geqrf(self):
    torch._check(self.dim() >= 2, lambda: "torch.geqrf: input must have at least 2 dimensions.")
    *batch, m, n = self.shape
    return torch.empty_like(self), self.new_empty((*batch, min(m, n)))


def _randperm_generator_out(n, *, generator=None, out):
    if out.dtype == torch.bool:
        raise NotImplementedError('"randperm" not implemented for \'Bool\'')
    if out.dtype in _RANDPERM_INT_LIMITS:
        name, top = _RANDPERM_INT_LIMITS[out.dtype]
        torch._check(n - 1 <= top, lambda: f"value cannot be converted to type {name} without overflow")
    if out.dtype in _RANDPERM_FLOAT_DIGITS:
        name, digits = _RANDPERM_FLOAT_DIGITS[out.dtype]
        limit = (1 << digits) + 1
        torch._check(n <= limit, lambda: f"n cannot be greater than {limit} for {name} type.")
    torch._check(n >= 0, lambda: f"Trying to create tensor with negative dimension {n}: [{n}]")
    if out.shape != (n,):
        out.resize_(n)
    return out


def _weight_int4pack_mm(x, w, q_group_size, q_scale_and_zeros):
    # PyTorch's Meta kernel reads `w.fake_device`, which only fake tensors have: the same checks and result for meta
    # tensors too (the device of a fake tensor is still what decides XPU's 2-d layout).
    torch._check(x.dim() == 2, lambda: "x must be a 2D tensor")
    xpu = getattr(w, "fake_device", w.device).type == "xpu"
    expected_dim = 2 if xpu else 4
    torch._check(w.dim() == expected_dim, lambda: f"w must be a {expected_dim}D tensor")
    torch._check(x.dtype in [torch.float32, torch.float16, torch.bfloat16],
                 lambda: f"expected x to be f32/f16/bf16, got {x.dtype}")
    torch._check(w.dtype is torch.int32, lambda: f"expected w to be int32, got {w.dtype}")
    return x.new_empty(x.size(0), w.size(0) if xpu else w.size(0) * 8, dtype=x.dtype)


def _replace_meta(name: str, fn) -> None:
    _aten_kernels.register(name, fn, "Meta", replaces=True)
    # Under the Python dispatcher (dynamo's fake tensors) PyTorch's function is also the op's Python Meta kernel.
    op = getattr(torch.ops.aten, name).default
    if torch._C.DispatchKey.Meta in op.py_kernels:
        op.py_kernels[torch._C.DispatchKey.Meta] = fn
        op._dispatch_cache.clear()


def _install() -> None:
    _aten_kernels.register("randperm.generator_out", _randperm_generator_out, "Meta", replaces=True)
    op = torch.ops.aten.randperm.generator_out
    if torch._C.DispatchKey.Meta in op.py_kernels:
        op.py_kernels[torch._C.DispatchKey.Meta] = _randperm_generator_out
        op._dispatch_cache.clear()
    _replace_meta("multi_margin_loss", _multi_margin_loss)
    _replace_meta("geqrf", _geqrf)  # PyTorch's Meta kernel for geqrf is not usable by eager kernels
    _replace_meta("_weight_int4pack_mm", _weight_int4pack_mm)  # nor is _weight_int4pack_mm's (fake tensors only)
    _replace_meta("multilabel_margin_loss_forward", _multilabel_margin_loss_forward)
    for op, fn in (("fractional_max_pool3d_backward", _fractional_max_pool3d_backward),
                   ("multi_margin_loss_backward", _multi_margin_loss_backward),
                   ("multilabel_margin_loss_backward", _multilabel_margin_loss_backward),
                   ("_ctc_loss_backward", _ctc_loss_backward),
                   ("_fused_adagrad_", _fused_adagrad_), ("_fused_adagrad_.tensor_lr", _fused_adagrad_),
                   ("_fused_adam_.tensor_lr", _fused_adam_tensor_lr("_fused_adam_")),
                   ("_fused_adamw_.tensor_lr", _fused_adam_tensor_lr("_fused_adamw_")),
                   ("_masked_softmax", _masked_softmax),
                   ("_transform_bias_rescale_qkv", _transform_bias_rescale_qkv),
                   ("_sample_dirichlet", _sample_dirichlet),
                   ("binomial", _binomial)):
        if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{op}", "Meta"):
            _aten_kernels.register(op, fn, "Meta")
