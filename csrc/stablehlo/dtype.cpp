// DType helpers, TensorType formatting and PyTorch-style type promotion.
#include <string>

#include "stablehlo/builder.h"

namespace torch_tpu::shlo {

bool isFloat(DType t) { return t == DType::F16 || t == DType::F32 || t == DType::F64 || t == DType::BF16; }

bool isFloat8(DType t) {
  switch (t) {
    case DType::F8E5M2: case DType::F8E4M3FN: case DType::F8E5M2FNUZ: case DType::F8E4M3FNUZ: case DType::F8E8M0FNU:
      return true;
    default:
      return false;
  }
}

bool isInteger(DType t) {
  switch (t) {
    case DType::S8: case DType::S16: case DType::S32: case DType::S64:
    case DType::U8: case DType::U16: case DType::U32: case DType::U64:
      return true;
    default:
      return false;
  }
}

bool isSigned(DType t) {
  switch (t) {
    case DType::S8: case DType::S16: case DType::S32: case DType::S64:
      return true;
    default:
      return isFloat(t);
  }
}

bool isComplex(DType t) { return t == DType::C64 || t == DType::C128; }

DType componentType(DType t) { return t == DType::C128 ? DType::F64 : t == DType::C64 ? DType::F32 : t; }

int bitWidth(DType t) {
  switch (t) {
    case DType::Pred: return 1;
    case DType::F8E5M2: case DType::F8E4M3FN: case DType::F8E5M2FNUZ: case DType::F8E4M3FNUZ: case DType::F8E8M0FNU:
      return 8;
    case DType::S8: case DType::U8: return 8;
    case DType::S16: case DType::U16: case DType::F16: case DType::BF16: return 16;
    case DType::S32: case DType::U32: case DType::F32: return 32;
    case DType::S64: case DType::U64: case DType::F64: case DType::C64: return 64;
    case DType::C128: return 128;
    default: return 0;
  }
}

const char* mlirName(DType t) {
  switch (t) {
    case DType::Pred: return "i1";
    case DType::S8: return "i8";
    case DType::S16: return "i16";
    case DType::S32: return "i32";
    case DType::S64: return "i64";
    case DType::U8: return "ui8";
    case DType::U16: return "ui16";
    case DType::U32: return "ui32";
    case DType::U64: return "ui64";
    case DType::F16: return "f16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::BF16: return "bf16";
    case DType::C64: return "complex<f32>";
    case DType::C128: return "complex<f64>";
    case DType::F8E5M2: return "f8E5M2";
    case DType::F8E4M3FN: return "f8E4M3FN";
    case DType::F8E5M2FNUZ: return "f8E5M2FNUZ";
    case DType::F8E4M3FNUZ: return "f8E4M3FNUZ";
    case DType::F8E8M0FNU: return "f8E8M0FNU";
    default: return "<invalid-dtype>";
  }
}

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorType::str() const {
  std::string s;
  s.reserve(24);
  s += "tensor<";
  for (int64_t d : shape) {
    s += std::to_string(d);
    s += 'x';
  }
  s += mlirName(dtype);
  s += '>';
  return s;
}

namespace {
// Category rank: bool < integer < float < complex.
int category(DType t) {
  if (t == DType::Pred) return 0;
  if (isInteger(t)) return 1;
  if (isFloat(t)) return 2;
  if (isComplex(t)) return 3;
  return -1;
}
DType signedOfWidth(int w) {
  switch (w) {
    case 8: return DType::S8;
    case 16: return DType::S16;
    case 32: return DType::S32;
    default: return DType::S64;
  }
}
}  // namespace

DType promoteTypes(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Invalid || b == DType::Invalid) return DType::Invalid;
  int ca = category(a), cb = category(b);
  if (ca != cb) {
    // The higher category wins, except complex with a wider float component.
    DType hi = ca > cb ? a : b, lo = ca > cb ? b : a;
    if (isComplex(hi) && lo == DType::F64) return DType::C128;
    return hi;
  }
  switch (ca) {
    case 1: {  // integers
      bool sa = isSigned(a), sb = isSigned(b);
      int wa = bitWidth(a), wb = bitWidth(b);
      if (sa == sb) return wa >= wb ? a : b;
      // signed + unsigned: a signed type that holds both (capped at int64, like torch's uint8 rules)
      int ws = sa ? wa : wb, wu = sa ? wb : wa;
      return signedOfWidth(ws > wu ? ws : (wu * 2 > 64 ? 64 : wu * 2));
    }
    case 2: {  // floats
      if ((a == DType::F16 && b == DType::BF16) || (a == DType::BF16 && b == DType::F16)) return DType::F32;
      return bitWidth(a) >= bitWidth(b) ? a : b;
    }
    case 3:
      return DType::C128;
    default:
      return a;
  }
}

}  // namespace torch_tpu::shlo
