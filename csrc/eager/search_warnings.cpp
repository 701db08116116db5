// searchsorted and bucketize: CPU's and CUDA's kernels warn (once per program, or every call under
// torch.set_warn_always) when a boundary, value or sorter tensor is not contiguous, since they copy it first. The
// rule reads any layout, but the warnings are part of the contract: this kernel gives them, then runs the rule.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "eager/kernel.h"

namespace torch_tpu {
namespace {

void warnNonContiguous(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const auto& args = op.schema().arguments();
  const size_t base = stack->size() - args.size();
  auto tensorArg = [&](const char* name) -> const at::Tensor* {
    for (size_t i = 0; i < args.size(); ++i) {
      const c10::IValue& v = (*stack)[base + i];
      if (args[i].name() == name && v.isTensor() && v.toTensor().defined()) return &v.toTensor();
    }
    return nullptr;
  };
  const at::Tensor* boundaries = tensorArg("sorted_sequence");
  if (!boundaries) boundaries = tensorArg("boundaries");
  const at::Tensor* input = tensorArg("self");
  const at::Tensor* sorter = tensorArg("sorter");
  // The same messages, in the same order, as ATen's searchsorted_maybe_trim_input_tensors.
  if (input && !input->is_contiguous())
    TORCH_WARN_ONCE("torch.searchsorted(): input value tensor is non-contiguous, this will lower the performance due "
                    "to extra data copy when converting non-contiguous tensor to contiguous, please use contiguous "
                    "input value tensor if possible. This message will only appear once per program.");
  if (boundaries && !boundaries->is_contiguous())
    TORCH_WARN_ONCE("torch.searchsorted(): boundary tensor is non-contiguous, this will lower the performance due to "
                    "extra data copy when converting non-contiguous tensor to contiguous, please use contiguous "
                    "boundary tensor if possible. This message will only appear once per program.");
  if (sorter && !sorter->is_contiguous())
    TORCH_WARN_ONCE("torch.searchsorted(): sorter tensor is non-contiguous, this will lower the performance due to "
                    "extra data copy when converting non-contiguous tensor to contiguous, please use contiguous "
                    "sorter tensor if possible. This message will only appear once per program.");
  loweringKernel(op, ks, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // The out= variants run through these (core/ops.h), which warn.
  for (const char* name : {"searchsorted.Tensor", "searchsorted.Scalar", "bucketize.Tensor", "bucketize.Scalar"})
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&warnNonContiguous>());
}

}  // namespace torch_tpu
