// float8 conversions with PyTorch's exact semantics. Methods of shlo::Builder (builder.h).
//
// PyTorch converts to float8 through float32 with its own rounding and overflow rules (c10's
// fp8*_from_fp32_value): e4m3fn saturates finite overflow and infinities to +-448, the fnuz types map overflow to
// their single NaN, e8m0fnu rounds the exponent with its own guard/round/sticky rule. XLA's convert differs in
// those cases (it gives NaN or inf), so conversions *to* float8 are emitted here as the same integer steps on the
// float32 bits. Conversions *from* float8 are exact widenings (every float8 value is a float32 value).
#include <cstdint>
#include <string>

#include "stablehlo/builder_impl.h"

namespace torch_tpu::shlo {

using namespace detail;

namespace {

// The parameters of c10's fp8 (non-e8m0) conversion from float32 bits with the sign cleared.
struct F8Format {
  uint32_t overflow;     // |bits| >= overflow: the overflow result
  uint32_t denorm_below; // |bits| < denorm_below: the subnormal path
  uint32_t denorm_mask;  // the float32 added to land subnormals in the low bits
  int shift;             // mantissa bits dropped: 20 (3 mantissa bits) or 21 (2)
  int32_t bias;          // float8 exponent bias
  bool fnuz;             // overflow -> 0x80 (NaN), unsigned zero
  bool saturate;         // e4m3fn: finite overflow -> 0x7e, NaN -> 0x7f
};

F8Format formatOf(DType t) {
  switch (t) {
    case DType::F8E4M3FN: return {1087u << 20, 121u << 23, 141u << 23, 20, 7, false, true};
    case DType::F8E5M2: return {143u << 23, 113u << 23, 134u << 23, 21, 15, false, false};
    case DType::F8E4M3FNUZ: return {0x87u << 23, 0x78u << 23, 0x8Cu << 23, 20, 8, true, false};
    case DType::F8E5M2FNUZ: return {0x8Fu << 23, 0x70u << 23, 0x85u << 23, 21, 16, true, false};
    default: break;
  }
  throw BuildError("convert: not a float8 type: " + std::string(mlirName(t)));
}

}  // namespace

Value Builder::toFloat8(Value x, DType to) {
  impl_->check("toFloat8", x);
  if (x.dtype() != DType::F32) fail("toFloat8", "needs an f32 operand, got " + x.type.str());
  auto u = [&](uint64_t v) { return constantF(static_cast<double>(v & 0xFFFFFFFFu), DType::U32, x.shape()); };
  auto f = [&](uint32_t v) { return bitcastConvert(u(v), DType::F32); };
  const Value bits = bitcastConvert(x, DType::U32);
  Value out;
  if (to == DType::F8E8M0FNU) {
    const Value exponent = andOp(shiftRightLogical(bits, u(23)), u(0xFF));
    auto set = [&](uint32_t mask) { return compare(andOp(bits, u(mask)), u(0), Cmp::NE); };
    const Value g = set(0x400000), r = set(0x200000), s = set(0x1FFFFF);
    const Value lsb = compare(exponent, u(0), Cmp::GT);
    const Value up = andOp(g, orOp(orOp(r, s), lsb));
    const Value rounded = add(exponent, select(up, u(1), u(0)));
    out = select(compare(exponent, u(0xFF), Cmp::EQ), exponent, rounded);
  } else {
    const F8Format fmt = formatOf(to);
    const Value sign = andOp(bits, u(0x80000000u));
    const Value mag = xorOp(bits, sign);
    const Value sign8 = shiftRightLogical(sign, u(24));
    // Subnormals: adding 2^k in float32 rounds the magnitude to the float8 subnormal step.
    const Value den = andOp(sub(bitcastConvert(add(bitcastConvert(mag, DType::F32), f(fmt.denorm_mask)), DType::U32),
                                u(fmt.denorm_mask)),
                            u(0xFF));
    // Normals: round to nearest even on the kept mantissa bits, rebias the exponent.
    const uint32_t half = (1u << (fmt.shift - 1)) - 1;
    const Value odd = andOp(shiftRightLogical(mag, u(fmt.shift)), u(1));
    const uint64_t rebias = static_cast<uint64_t>(static_cast<uint32_t>((fmt.bias - 127) * (1 << 23)));
    const Value nrm = andOp(shiftRightLogical(add(add(mag, u(rebias + half)), odd), u(fmt.shift)), u(0xFF));
    const Value small = compare(mag, u(fmt.denorm_below), Cmp::LT);
    const Value big = compare(mag, u(fmt.overflow), Cmp::GE);
    if (fmt.fnuz) {
      const Value val = select(small, den, nrm);
      const Value zero = andOp(small, compare(den, u(0), Cmp::EQ));  // no negative zero
      out = select(big, u(0x80), select(zero, u(0), orOp(val, sign8)));
    } else {
      Value val = select(small, den, nrm);
      Value over;
      if (fmt.saturate) {
        val = select(compare(val, u(0x7F), Cmp::EQ), u(0x7E), val);
        over = select(compare(mag, u(0x7F800000u), Cmp::GT), u(0x7F), u(0x7E));
      } else {
        over = select(compare(mag, u(0x7F800000u), Cmp::GT), u(0x7F), u(0x7C));
      }
      out = orOp(select(big, over, val), sign8);
    }
  }
  return bitcastConvert(impl_->emit("stablehlo.convert", {out}, {}, TensorType{DType::U8, x.shape()}), to);
}

}  // namespace torch_tpu::shlo
