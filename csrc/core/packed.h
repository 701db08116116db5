// Packed weights: copies of weights with their last two dimensions transposed, for products that read a weight as
// its transpose (x @ W.T, the form of every nn.Linear; a mixture-of-experts layer's grouped matmul). XLA:CPU runs a
// product whose right operand contracts its minor dimension at about 40-60% of the speed of the row-major form; TPU
// and GPU compilers choose operand layouts themselves. Inference programs (compiled graphs; eager calls with
// autograd off) read such a weight through its packed copy, made once per weight buffer and cached weakly by that
// buffer: writing the weight gives its storage a new buffer (the old entry expires), and the cache neither keeps a
// weight alive nor prevents its donation.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "runtime/runtime.h"

namespace torch_tpu::core {

// On for the CPU plugin; TORCH_TPU_PACK_WEIGHTS=0/1 overrides.
bool packWeightsEnabled();

// Whether `t` is a weight worth reading packed: a floating 2-D or 3-D tensor whose last two dimensions (each at least
// 16) are the transpose of its whole, row-major storage.
bool isPackableTranspose(const at::Tensor& t);

// The buffer of `weight`'s copy with its last two dimensions transposed (row-major), made on first use and kept
// while `src` (the weight's current buffer) lives.
runtime::BufferPtr packedTranspose(const at::Tensor& weight, const runtime::BufferPtr& src);
void clearPackedWeights();
int64_t packedWeightsMade();  // copies made since the process started

}  // namespace torch_tpu::core
