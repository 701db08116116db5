#include "core/dtype.h"

#include <c10/util/Exception.h>

#include "lowering/target.h"

namespace torch_tpu {

shlo::DType toDType(at::ScalarType t) {
  using D = shlo::DType;
  switch (t) {
    case at::kBool: return D::Pred;
    case at::kChar: return D::S8;
    case at::kShort: return D::S16;
    case at::kInt: return D::S32;
    case at::kLong: return D::S64;
    case at::kByte: return D::U8;
    case at::kUInt16: return D::U16;
    case at::kUInt32: return D::U32;
    case at::kUInt64: return D::U64;
    case at::kHalf: return D::F16;
    case at::kFloat: return D::F32;
    case at::kDouble: return D::F64;
    case at::kBFloat16: return D::BF16;
    case at::kComplexFloat: return D::C64;
    case at::kComplexDouble: return D::C128;
    case at::kComplexHalf: return D::C64;
    case at::kFloat8_e5m2: return D::F8E5M2;
    case at::kFloat8_e4m3fn: return D::F8E4M3FN;
    case at::kFloat8_e5m2fnuz: return D::F8E5M2FNUZ;
    case at::kFloat8_e4m3fnuz: return D::F8E4M3FNUZ;
    case at::kFloat8_e8m0fnu: return D::F8E8M0FNU;
    default: break;
  }
  TORCH_CHECK_TYPE(false, "tpu: unsupported dtype ", t);
}

bool supportedDType(at::ScalarType t) {
  switch (t) {
    case at::kBool: case at::kChar: case at::kShort: case at::kInt: case at::kLong: case at::kByte:
    case at::kHalf: case at::kFloat: case at::kDouble: case at::kBFloat16: case at::kComplexFloat:
    case at::kUInt16: case at::kUInt32: case at::kUInt64: case at::kComplexHalf:
    case at::kFloat8_e5m2: case at::kFloat8_e4m3fn: case at::kFloat8_e5m2fnuz: case at::kFloat8_e4m3fnuz:
    case at::kFloat8_e8m0fnu:
      return true;
    case at::kComplexDouble:
      return complex128Supported();
    default:
      return false;
  }
}

shlo::DType storageDType(at::ScalarType t) {
  if (t == at::kComplexHalf) return shlo::DType::U32;
  return toDType(t);
}

bool complex128Supported() {
  // TPUs have no complex128 (nor float64) arithmetic; XLA:CPU and XLA:GPU have both.
  return lowering::target().platform != "tpu";
}

at::ScalarType toScalarType(shlo::DType t) {
  using D = shlo::DType;
  switch (t) {
    case D::Pred: return at::kBool;
    case D::S8: return at::kChar;
    case D::S16: return at::kShort;
    case D::S32: return at::kInt;
    case D::S64: return at::kLong;
    case D::U8: return at::kByte;
    case D::U16: return at::kUInt16;
    case D::U32: return at::kUInt32;
    case D::U64: return at::kUInt64;
    case D::F16: return at::kHalf;
    case D::F32: return at::kFloat;
    case D::F64: return at::kDouble;
    case D::BF16: return at::kBFloat16;
    case D::C64: return at::kComplexFloat;
    case D::C128: return at::kComplexDouble;
    case D::F8E5M2: return at::kFloat8_e5m2;
    case D::F8E4M3FN: return at::kFloat8_e4m3fn;
    case D::F8E5M2FNUZ: return at::kFloat8_e5m2fnuz;
    case D::F8E4M3FNUZ: return at::kFloat8_e4m3fnuz;
    case D::F8E8M0FNU: return at::kFloat8_e8m0fnu;
    default: break;
  }
  TORCH_CHECK(false, "tpu: no torch dtype for element type ", static_cast<int>(t));
}

}  // namespace torch_tpu
