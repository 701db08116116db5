// Warnings CPU's and CUDA's kernels give on every call, which a cached program cannot: these kernels give them,
// then run the op's rule (eager/kernel.h loweringKernel).
//  - searchsorted and bucketize warn (once per program, or every call under torch.set_warn_always) when a boundary,
//    value or sorter tensor is not contiguous, since they copy it first; the rule reads any layout.
//  - arange(out=) into a tensor of another number of elements warns that it resizes it (rounding errors make the
//    count differ from what the caller expects), then resizes it.
// And checks CPU's and CUDA's kernels make by reading values back (one synchronization):
//  - segment_reduce with lengths and not `unsafe`: no length is negative and each row's lengths add up to the axis'
//    size.
//  - normal with a std tensor: every std is at least 0 (not NaN).
// And the argument checks of CUDA's int4 weight-only kernels (_convert_weight_to_int4pack, _weight_int4pack_mm),
// which CPU has no kernel for: its messages, as RuntimeErrors, before the rules (lowering/rules/packed_mm.cpp).
// And checks of Python numbers a cached program takes as inputs (so no cache miss sees a new value):
//  - leaky_relu_backward and elu_backward of an in-place forward (self_is_result / is_result) with a negative slope
//    raise CPU's error (the result cannot be inverted).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/RangeUtils.h>
#include <torch/library.h>

#include "eager/kernel.h"

namespace torch_tpu {
namespace {

// The value of the argument named `name` (none when absent).
const c10::IValue* argNamed(const c10::OperatorHandle& op, torch::jit::Stack* stack, const char* name) {
  const auto& args = op.schema().arguments();
  const size_t base = stack->size() - args.size();
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].name() == name) return &(*stack)[base + i];
  return nullptr;
}

void warnNonContiguous(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  auto tensorArg = [&](const char* name) -> const at::Tensor* {
    const c10::IValue* v = argNamed(op, stack, name);
    return v && v->isTensor() && v->toTensor().defined() ? &v->toTensor() : nullptr;
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

void arangeOut(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const size_t base = stack->size() - op.schema().arguments().size();
  const c10::Scalar start = (*stack)[base].toScalar(), end = (*stack)[base + 1].toScalar();
  const c10::Scalar step = (*stack)[base + 2].toScalar();
  at::Tensor out = (*stack)[base + 3].toTensor();
  const int64_t size = out.scalar_type() == at::kLong ? at::native::compute_arange_size<int64_t>(start, end, step)
                                                      : at::native::compute_arange_size<double>(start, end, step);
  if (out.numel() != size) {
    if (out.numel() > 0)
      TORCH_WARN("The number of elements in the out tensor of shape ", out.sizes(), " is ", out.numel(),
                 " which does not match the computed number of elements ", size,
                 ". Note that this may occur as a result of rounding error. The out tensor will be resized to a "
                 "tensor of shape (", size, ",).");
    out.resize_({size});
  }
  loweringKernel(op, ks, stack);
}

// Whether an in-place forward (`result_flag`) was called with a negative `slope`: CPU's backward kernels refuse it.
bool negativeSlopeOfInPlace(const c10::OperatorHandle& op, torch::jit::Stack* stack, const char* slope,
                            const char* result_flag) {
  const c10::IValue* s = argNamed(op, stack, slope);
  const c10::IValue* is_result = argNamed(op, stack, result_flag);
  return is_result && is_result->toBool() && s && s->toScalar().to<double>() < 0.0;
}

void leakyReluBackward(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  TORCH_CHECK(!negativeSlopeOfInPlace(op, stack, "negative_slope", "self_is_result"),
              "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. "
              "This is caused by calling in-place forward function with a negative slope, please call out-of-place "
              "version instead. File an issue at https://github.com/pytorch/pytorch if you do require supporting "
              "in-place leakRelu backward calculation with negative slope");
  loweringKernel(op, ks, stack);
}

void eluBackward(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  TORCH_CHECK(!negativeSlopeOfInPlace(op, stack, "alpha", "is_result"),
              "In-place elu backward calculation is triggered with a negative slope which is not supported. This is "
              "caused by calling in-place forward function with a negative slope, please call out-of-place version "
              "instead.");
  loweringKernel(op, ks, stack);
}

void segmentReduce(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const c10::IValue* lengths = argNamed(op, stack, "lengths");
  const c10::IValue* unsafe = argNamed(op, stack, "unsafe");
  const c10::IValue* axis = argNamed(op, stack, "axis");
  const c10::IValue* data = argNamed(op, stack, "data");
  if (lengths && lengths->isTensor() && lengths->toTensor().defined() && !(unsafe && unsafe->toBool()) &&
      lengths->toTensor().numel() > 0) {
    const at::Tensor& l = lengths->toTensor();
    const int64_t size = data->toTensor().size(axis ? axis->toInt() : 0);
    // one transfer for both conditions
    at::Tensor flags = at::stack({l.min().ge(0), l.sum({-1}).eq(size).all()}).to(at::kCPU);
    TORCH_CHECK(flags[0].item<bool>(), "lengths contains negative value!");
    TORCH_CHECK(flags[1].item<bool>(), "segment_reduce(): Expected all rows of lengths along axis ",
                "to sum to data.size(lengths.dim()-1) when !unsafe.");
  }
  loweringKernel(op, ks, stack);
}

void normalStdTensor(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const c10::IValue* std_arg = argNamed(op, stack, "std");
  if (std_arg && std_arg->isTensor()) {
    const at::Tensor& s = std_arg->toTensor();
    TORCH_CHECK(!s.is_complex(), "normal expects standard deviation to be non-complex");
    TORCH_CHECK(s.numel() == 0 || s.min().ge(0).item<bool>(), "normal expects all elements of std >= 0.0");
  }
  loweringKernel(op, ks, stack);
}

void int4Pack(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const at::Tensor& w = argNamed(op, stack, "self")->toTensor();
  const int64_t inner = argNamed(op, stack, "innerKTiles")->toInt();
  TORCH_CHECK(w.dim() == 2, "_convert_weight_to_int4pack : expect weight to be 2D tensor.");
  TORCH_CHECK(w.scalar_type() == at::kByte, "_convert_weight_to_int4pack : expect weight to be kByte.");
  TORCH_CHECK(inner == 2 || inner == 4 || inner == 8,
              "_convert_weight_to_int4pack : innerKTiles need to be 2, 4, or 8, got ", inner);
  // The packed shape PyTorch's meta kernel gives (n / 8, k / (16 innerKTiles)) holds the whole weight only then.
  TORCH_CHECK(w.size(0) % 8 == 0, "_convert_weight_to_int4pack : expect weight.size(0) to be a multiple of 8, got ",
              w.size(0));
  TORCH_CHECK((2 * w.size(1)) % (16 * inner) == 0, "_convert_weight_to_int4pack : expect k = 2 * weight.size(1) to "
              "be a multiple of 16 * innerKTiles = ", 16 * inner, ", got ", 2 * w.size(1));
  loweringKernel(op, ks, stack);
}

void int4Mm(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const char* fn = "_weight_int4pack_mm";
  const at::Tensor& a = argNamed(op, stack, "self")->toTensor();
  const at::Tensor& w = argNamed(op, stack, "mat2")->toTensor();
  const int64_t group = argNamed(op, stack, "qGroupSize")->toInt();
  const at::Tensor& sz = argNamed(op, stack, "qScaleAndZeros")->toTensor();
  TORCH_CHECK(a.device() == w.device() && a.device() == sz.device(), fn,
              " : expect A, B and qScaleAndZeros to be on the same device.");
  TORCH_CHECK(group == 32 || group == 64 || group == 128 || group == 256, fn,
              " : expect qGroupSize to be 32, 64, 128 or 256, got ", group);
  TORCH_CHECK(a.dim() == 2, fn, " : expect A to be 2D tensor.");
  TORCH_CHECK(a.scalar_type() == at::kBFloat16 || a.scalar_type() == at::kHalf || a.scalar_type() == at::kFloat,
              fn, " : expect A to be either 32-bit or 16-bit float tensor.");
  TORCH_CHECK(w.dim() == 4, fn, " : expect B to be 4D tensor.");
  TORCH_CHECK(w.scalar_type() == at::kInt, fn, " : expect B to be int32 tensor.");
  const int64_t n = w.size(0) * 8;
  TORCH_CHECK(a.size(1) == w.size(1) * w.size(3) * 2 * 16, fn, " : expect A.size(1) == ",
              w.size(1) * w.size(3) * 2 * 16, " (from B's shape), got ", a.size(1));
  TORCH_CHECK(a.size(1) % group == 0, fn, " : expect A.size(1) to be a multiple of qGroupSize ", group);
  TORCH_CHECK(sz.dim() == 3 && sz.size(0) == a.size(1) / group && sz.size(1) == n && sz.size(2) == 2, fn,
              " : expect qScaleAndZeros to be 3d tensor with sizes [", a.size(1) / group, ", ", n, ", 2]");
  TORCH_CHECK(sz.scalar_type() == at::kBFloat16 || sz.scalar_type() == at::kHalf || sz.scalar_type() == at::kFloat,
              fn, " : expect qScaleAndZeros to be a float tensor.");
  loweringKernel(op, ks, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_convert_weight_to_int4pack", torch::CppFunction::makeFromBoxedFunction<&int4Pack>());
  m.impl("_weight_int4pack_mm", torch::CppFunction::makeFromBoxedFunction<&int4Mm>());
  for (const char* name : {"normal.Tensor_Tensor", "normal.Tensor_Tensor_out", "normal.float_Tensor",
                           "normal.float_Tensor_out"})
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&normalStdTensor>());
  m.impl("segment_reduce", torch::CppFunction::makeFromBoxedFunction<&segmentReduce>());
  m.impl("leaky_relu_backward", torch::CppFunction::makeFromBoxedFunction<&leakyReluBackward>());
  m.impl("elu_backward", torch::CppFunction::makeFromBoxedFunction<&eluBackward>());
  m.impl("arange.start_out", torch::CppFunction::makeFromBoxedFunction<&arangeOut>());
  // The out= variants run through these (core/ops.h), which warn.
  for (const char* name : {"searchsorted.Tensor", "searchsorted.Scalar", "bucketize.Tensor", "bucketize.Scalar"})
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&warnNonContiguous>());
}

}  // namespace torch_tpu
