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
X += xfail("Adagrad", "float32", "step",
           "fused Adagrad: PyTorch has no meta kernel for _fused_adagrad_ (the eager path takes result types from "
           "meta kernels), so it runs on the CPU fallback", samples=[3, 7, 11, 15, 19, 23, 27],
           fallback=["aten::_fused_adagrad_", "aten::_fused_adagrad_.tensor_lr"])


EXPECTED_FAILURES = X
