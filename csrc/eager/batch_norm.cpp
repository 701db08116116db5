// native_batch_norm updates running_mean / running_var in place although its schema does not declare it, so no
// generated kernel can know to write them. On the device it runs as _native_batch_norm_legit, whose schema declares
// the writes (its rule returns the new statistics and the lowering kernel writes them).
#include <ATen/ATen.h>
#include <torch/library.h>

namespace torch_tpu {
namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, bool training,
    double momentum, double eps) {
  if (running_mean.has_value() && running_mean->defined() && running_var.has_value() && running_var->defined()) {
    at::Tensor rm = *running_mean, rv = *running_var;
    return at::_native_batch_norm_legit(input, weight, bias, rm, rv, training, momentum, eps);
  }
  return at::_native_batch_norm_legit(input, weight, bias, training, momentum, eps);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("native_batch_norm", TORCH_FN(native_batch_norm)); }

}  // namespace torch_tpu
