#include "lowering/bounds.h"

namespace torch_tpu::lowering {

void checkIndexRange(Context& ctx, Value index, int64_t size, bool negative_wraps, const std::string& message,
                     Context::CheckError error, Value skip) {
  Builder& b = ctx.b;
  if (!index.valid() || index.type.numel() == 0) return;
  Value i = b.convert(index, DType::S64);
  Value lo = b.broadcastTo(b.constantInt(negative_wraps ? -size : 0, DType::S64), i.shape());
  Value hi = b.broadcastTo(b.constantInt(size, DType::S64), i.shape());
  Value ok = b.andOp(b.compare(i, lo, Cmp::GE), b.compare(i, hi, Cmp::LT));
  if (skip.valid()) ok = b.orOp(ok, b.broadcastTo(skip, i.shape()));
  ctx.check(ok, message, i, error);
}

std::string outOfBoundsMessage(int64_t dim, int64_t size) {
  return "index {} is out of bounds for dimension " + std::to_string(dim) + " with size " + std::to_string(size);
}

std::string outOfRangeInSelf(int64_t dim, int64_t size) {
  return "index out of range in self (index {} for dimension " + std::to_string(dim) + " with size " +
         std::to_string(size) + ")";
}

std::string takeMessage(int64_t n) {
  return "out of range: tried to access index {} on a tensor of " + std::to_string(n) + " elements.";
}

void checkNonZeroDivisor(Context& ctx, Value divisor) {
  if (!divisor.valid() || shlo::isFloat(divisor.dtype()) || shlo::isComplex(divisor.dtype())) return;
  if (divisor.type.numel() == 0) return;
  Builder& b = ctx.b;
  ctx.check(b.compare(divisor, b.zerosLike(divisor), Cmp::NE), "ZeroDivisionError", Value(),
            Context::CheckError::Runtime);
}

}  // namespace torch_tpu::lowering
