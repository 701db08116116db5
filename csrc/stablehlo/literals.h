// Text of numbers, element literals and tensor types in StableHLO's generic syntax. Internal to the stablehlo
// layer (builder, attributes); not part of its public interface.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>

#include "stablehlo/builder.h"

namespace torch_tpu::shlo::detail {

inline void appendInt(std::string& s, int64_t v) {
  char b[24];
  auto r = std::to_chars(b, b + sizeof(b), v);
  s.append(b, r.ptr);
}
inline void appendUInt(std::string& s, uint64_t v) {
  char b[24];
  auto r = std::to_chars(b, b + sizeof(b), v);
  s.append(b, r.ptr);
}

// "tensor<2x3xf32>", "tensor<f32>"
inline void appendType(std::string& s, const TensorType& t) {
  s += "tensor<";
  for (int64_t d : t.shape) {
    appendInt(s, d);
    s += 'x';
  }
  s += mlirName(t.dtype);
  s += '>';
}
// "tensor<f32>" (a region argument or result)
inline void appendScalarType(std::string& s, DType t) {
  s += "tensor<";
  s += mlirName(t);
  s += '>';
}

// "[2, 3]" (error messages)
std::string shapeStr(const Shape& sh);

// A literal of `v` rounded to the real float type `t`: a decimal that round-trips exactly through the MLIR parser
// (which reads a double and converts), or the hex bit pattern for inf/nan.
void appendFloatLit(std::string& s, double v, DType t);
// An integer or pred literal of `v` wrapped to `t`'s width ("true"/"false" for pred).
void appendIntLit(std::string& s, int64_t v, DType t);
// One element literal of dtype t for value v (floats: rounded; complex: (v, 0); integers: saturating conversion).
void appendElemLit(std::string& s, double v, DType t);

// The double -> int64 bit pattern used for integer constants (saturating, NaN -> 0; pred: v != 0).
int64_t doubleToInt(double v, DType t);
}  // namespace torch_tpu::shlo::detail
