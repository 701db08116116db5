// Quantized tensors (torch.quint8, qint8, quint4x2, qint32: PyTorch's affine-quantized layout) on tpu: not supported.
// Every operator reaching the QuantizedPrivateUse1 key (quantize_per_tensor/per_channel with a tpu input, moving a
// quantized CPU tensor to tpu, quantized factories with device="tpu") raises NotImplementedError naming the
// alternatives, instead of PyTorch's generic "Could not run ... with arguments from the 'Quantizedtpu' backend".
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace torch_tpu {

namespace {

void quantizedUnsupported(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "tpu: quantized tensors (torch.quint8, torch.qint8, torch.quint4x2, torch.qint32) are not supported on "
      "tpu (operator ", op.schema().operator_name(), "). Supported instead: low-precision floating-point dtypes "
      "(torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2, with torch._scaled_mm), and plain "
      "integer tensors (torch.int8, torch.uint8, torch.int32) with their scales kept as separate tensors; quantized "
      "tensors themselves stay on the CPU");
}

}  // namespace

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&quantizedUnsupported>());
}

}  // namespace torch_tpu
