// CPU's contracts that PyTorch's meta kernels do not state, for the eager kernel (kernel.cpp) on a cache miss:
//  - errors CPU's kernels raise and the meta kernels do not (an out= dtype CPU refuses, a complex Python number given
//    to real tensors, reductions of tensors with more than 64 dims, subtraction with a bool operand, an in-place result type
//    that does not cast into self): the CPU kernel itself judges the call on
//    zero-filled host twins that alias as the tpu tensors do, and its error is rethrown;
//  - result layouts CPU's kernels choose and the meta kernels do not (channels_last convolutions, out= tensors
//    restrided after a resize).
// None of this runs on a cache hit: an error is never cached, and layouts are decided by the cache key's strides.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string>
#include <vector>

namespace torch_tpu {

// Raises the error CPU's kernel gives for this call where the meta kernel accepted it. `name`: "aten::add.out";
// `out_variant`: an out= form of a functional rule.
void judgeOnCpu(const c10::OperatorHandle& op, const std::string& name, bool out_variant,
                const torch::jit::Stack& stack, size_t base);

// The strides of flat result `k` of `functional_op` ("aten::exp") run on the Meta key with an out= call's meta
// arguments (`args` its schema's, out arguments left out); empty when contiguous, not dense, or not computable.
std::vector<int64_t> functionalResultStrides(const std::string& functional_op, const std::vector<c10::Argument>& args,
                                             const std::vector<c10::IValue>& meta_args, int k);

// ChannelsLast / ChannelsLast3d when `name` is a convolution (or its backward) whose input or weight is in that
// format, as CPU's and CUDA's kernels decide; else Contiguous.
c10::MemoryFormat convolutionMemoryFormat(const std::string& name, const torch::jit::Stack& stack, size_t base);

}  // namespace torch_tpu
