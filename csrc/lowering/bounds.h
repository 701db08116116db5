// Device-side bounds checks shared by the indexing rules (gather/scatter, index, index_put, index_select, embedding,
// take/put, index_add/copy/fill/reduce, nll_loss targets) and the integer-division rules. Each check states what
// the CPU kernel checks, with its message and exception type (see Context::check).
#pragma once

#include <string>

#include "lowering/lowering.h"

namespace torch_tpu::lowering {

// `index` (an integer Value of any shape) addresses a dimension of `size`: valid in [-size, size) when negative
// indices wrap, else in [0, size). `message` may hold "{}" for an offending index. Elements where `skip` (pred,
// index's shape) holds are not checked (nll_loss's ignore_index).
void checkIndexRange(Context& ctx, Value index, int64_t size, bool negative_wraps, const std::string& message,
                     Context::CheckError error = Context::CheckError::Index, Value skip = Value());

// PyTorch's "index {} is out of bounds for dimension <dim> with size <size>".
std::string outOfBoundsMessage(int64_t dim, int64_t size);

// PyTorch's "index out of range in self" (index_select, embedding, index_add, index_reduce), with the index and
// the dimension.
std::string outOfRangeInSelf(int64_t dim, int64_t size);
// PyTorch's "out of range: tried to access index {} on a tensor of <n> elements." (take, put).
std::string takeMessage(int64_t n);

// An integer divisor must not be zero: RuntimeError "ZeroDivisionError", as the CPU kernels raise. No check for
// floating-point divisors.
void checkNonZeroDivisor(Context& ctx, Value divisor);

}  // namespace torch_tpu::lowering
