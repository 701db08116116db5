// torch.autocast("tpu"): the same policies as CUDA (matmuls and convolutions in the lower-precision dtype,
// numerically sensitive ops in float32); every other op falls through.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace at::autocast {
namespace {

#define TPU_AUTOCAST_LOW(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define TPU_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(TPU_AUTOCAST_LOW)
  AT_FORALL_FP32(TPU_AUTOCAST_FP32)
}

}  // namespace
}  // namespace at::autocast
