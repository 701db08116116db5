"""Expected ModuleInfo and OptimInfo failures on `tpu`: which cases fail, how, and why.

The entries are the OpInfo sweep's (torch_tpu.testing.opinfo.xfail), keyed by
  modules:     the ModuleInfo name ("nn.LSTM"), a dtype ("float32", "bfloat16"), a direction ("train_forward",
               "train_backward", "eval_forward", "eval_backward") and optionally the sample indices (default: all);
  optimizers:  the OptimizerInfo name ("Adam"), dtype "float32", direction "step" and optionally the configuration
               indices (torch_tpu.testing.optims.configs order; docs/module_coverage.md lists them);
and the kind of failure: fallback=[ops] (right, but these ATen ops ran on the CPU fallback), error=regex (the device
raised; the regex matches "ExceptionType: message"), mismatch=regex (wrong result; the regex matches the
comparison's message). A covered case that fails another way is an unexpected failure, one that passes an
unexpected pass: both fail tests/python/test_module_conformance.py (for its subset) and are listed by
tools/module_coverage.py. Entries that cannot apply fail test_module_expected_failures_are_reachable.
"""
from torch_tpu.testing.opinfo import xfail

X = []  # the entries, built below; EXPECTED_FAILURES at the end

BOTH = ("float32", "bfloat16")

# ---- optimizers ----
# capturable & differentiable (configurations CPU cannot run; the reference is CPU without capturable). Both are
# PyTorch's capturable code paths, not the device: the same configuration on the CPU with the capturable path forced
# (torch.optim.optimizer._get_capturable_supported_devices patched to include "cpu") fails the same way.
X += xfail("ASGD", "float32", "step",
           "capturable & differentiable: PyTorch's capturable ASGD step saves the `eta` state tensor for backward "
           "(param.addcmul_(grad, eta)) and then overwrites it in place (eta.copy_(new_eta)), so the gradient "
           "through the steps raises autograd's version-counter error on every device",
           samples=[23, 26, 29, 32, 35],
           error="RuntimeError: one of the variables needed for gradient computation has been modified by an "
                 "inplace operation")
X += xfail("RAdam", "float32", "step",
           "capturable & differentiable: PyTorch's capturable RAdam takes torch.where(rho_t > 5, sqrt(rect), 0) "
           "where the non-capturable path branches in Python; rect is negative in the first steps, so the gradient "
           "of the discarded branch is NaN and poisons the gradient through the steps on every device (the "
           "parameters and state match CPU)", samples=[20, 23, 26, 29],
           mismatch="gradients through the steps: .*nan")


# ---- modules ----
# bf16 backward of the Transformer layers: a bf16 case passes when it matches CPU's bf16 result, or CPU's float32
# result rounded, or has at most twice CPU's relative error against the float32 computation. These three miss that.
X += xfail("nn.Transformer", "bfloat16", "train_backward",
           "sample 27 (key padding masks, batch 2): a ReLU pre-activation in the decoder's feed-forward block is "
           "-0.0024 in the float32 computation, within bf16 rounding of the layers before it: CPU's bf16 run gets "
           "-0.0010, the device's +0.0045 (its upstream bf16 results differ from CPU's by rounding; the forward output "
           "matches), so on the device that unit's gradient flows and on CPU it does not. linear1's and every "
           "upstream gradient then differ by up to 0.9 of their magnitude (the same layer, masks and dtype with other "
           "weights pass)", samples=[27], mismatch="Tensor-likes are not close")
X += xfail("nn.Transformer", "bfloat16", "train_backward",
           "sample 58 (attention and key padding masks, unbatched): the gradients' worst relative error against the "
           "float32 computation is 0.041, CPU's bf16 run's 0.016 (2.6x, over the 2x allowed); cause not isolated "
           "(the bf16 sums, products and attention of these layers round as CPU's elsewhere in the sweep)",
           samples=[58], mismatch="Tensor-likes are not close")
X += xfail("nn.TransformerDecoderLayer", "bfloat16", "train_backward",
           "sample 3: the gradients' worst relative error against the float32 computation is 0.035 (the gradient of "
           "multihead_attn.in_proj_bias), CPU's bf16 run's 0.014 (2.5x, over the 2x allowed); the other gradients are "
           "within 2x of CPU's; cause not isolated", samples=[3], mismatch="Tensor-likes are not close")


EXPECTED_FAILURES = X
