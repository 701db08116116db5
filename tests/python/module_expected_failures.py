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
X += xfail("SparseAdam", "float32", "step",
           "SparseAdam steps sparse COO gradients: tpu has no sparse layout", error="Sparsetpu")
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


EXPECTED_FAILURES = X
