// Literal text: float literals that round-trip exactly through the MLIR parser, integer literals wrapped to their
// width, element literals of any dtype. See literals.h.
#include "stablehlo/literals.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>

namespace torch_tpu::shlo::detail {

std::string shapeStr(const Shape& sh) {
  std::string s = "[";
  for (size_t i = 0; i < sh.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(sh[i]);
  }
  s += ']';
  return s;
}

namespace {

uint16_t floatToBf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
double bf16BitsToDouble(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

#if defined(__FLT16_MANT_DIG__)
uint16_t doubleToF16Bits(double v) {
  _Float16 h = static_cast<_Float16>(v);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
double f16BitsToDouble(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<double>(h);
}
#else
uint16_t doubleToF16Bits(double v) {
  float f = static_cast<float>(v);
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t ax = x & 0x7FFFFFFF;
  if (ax >= 0x7F800000) return static_cast<uint16_t>(sign | 0x7C00 | (ax > 0x7F800000 ? 0x200 : 0));
  if (ax >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);  // overflow after rounding
  if (ax < 0x38800000) {                                               // subnormal half
    float af;
    std::memcpy(&af, &ax, 4);
    uint32_t m = static_cast<uint32_t>(std::nearbyint(af * 16777216.0f));  // 2^24
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t r = ax + 0xC8000FFF + ((ax >> 13) & 1);  // rebias (-112<<23) and round-to-nearest-even
  return static_cast<uint16_t>(sign | (r >> 13));
}
double f16BitsToDouble(uint16_t b) {
  int e = (b >> 10) & 0x1F, m = b & 0x3FF;
  double s = (b & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return s * std::ldexp(m, -24);
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : s * std::numeric_limits<double>::infinity();
  return s * std::ldexp(m + 1024, e - 25);
}
#endif

void appendHex(std::string& s, uint64_t bits, int digits) {
  static const char* kHex = "0123456789ABCDEF";
  s += "0x";
  for (int i = digits - 1; i >= 0; --i) s += kHex[(bits >> (4 * i)) & 0xF];
}

int64_t wrapSigned(int64_t v, int bits) {
  if (bits >= 64) return v;
  uint64_t u = static_cast<uint64_t>(v) & ((uint64_t{1} << bits) - 1);
  if (u >> (bits - 1)) u |= ~((uint64_t{1} << bits) - 1);
  return static_cast<int64_t>(u);
}
uint64_t wrapUnsigned(int64_t v, int bits) {
  uint64_t u = static_cast<uint64_t>(v);
  if (bits >= 64) return u;
  return u & ((uint64_t{1} << bits) - 1);
}

}  // namespace

void appendFloatLit(std::string& s, double v, DType t) {
  double r;
  uint64_t bits;
  int digits;
  switch (t) {
    case DType::F64:
      r = v;
      std::memcpy(&bits, &r, 8);
      digits = 16;
      break;
    case DType::F16: {
      uint16_t h = doubleToF16Bits(v);
      bits = h;
      r = f16BitsToDouble(h);
      digits = 4;
      break;
    }
    case DType::BF16: {
      uint16_t h = floatToBf16Bits(static_cast<float>(v));
      bits = h;
      r = bf16BitsToDouble(h);
      digits = 4;
      break;
    }
    default: {  // F32
      float f = static_cast<float>(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      bits = u;
      r = f;
      digits = 8;
      break;
    }
  }
  if (!std::isfinite(r)) {
    appendHex(s, bits, digits);
    return;
  }
  char buf[40];
  auto res = std::to_chars(buf, buf + sizeof(buf), r);
  std::string_view sv(buf, static_cast<size_t>(res.ptr - buf));
  size_t e = sv.find('e');
  std::string_view mant = sv.substr(0, e);
  if (mant.find('.') == std::string_view::npos) {
    s.append(mant);
    s += ".0";
    if (e != std::string_view::npos) s.append(sv.substr(e));
  } else {
    s.append(sv);
  }
}

void appendIntLit(std::string& s, int64_t v, DType t) {
  if (t == DType::Pred) {
    s += v ? "true" : "false";
  } else if (isSigned(t)) {
    appendInt(s, wrapSigned(v, bitWidth(t)));
  } else {
    appendUInt(s, wrapUnsigned(v, bitWidth(t)));
  }
}

int64_t doubleToInt(double v, DType t) {
  if (t == DType::Pred) return v != 0;  // NaN -> true, like bool(nan)
  if (std::isnan(v)) return 0;
  if (t == DType::U64 && v >= 9223372036854775808.0) {
    if (v >= 18446744073709551615.0) return -1;
    return static_cast<int64_t>(static_cast<uint64_t>(v));
  }
  if (v >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
  if (v <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

void appendElemLit(std::string& s, double v, DType t) {
  if (isFloat(t)) {
    appendFloatLit(s, v, t);
  } else if (isComplex(t)) {
    s += '(';
    appendFloatLit(s, v, componentType(t));
    s += ", ";
    appendFloatLit(s, 0.0, componentType(t));
    s += ')';
  } else {
    appendIntLit(s, doubleToInt(v, t), t);
  }
}

}  // namespace torch_tpu::shlo::detail
