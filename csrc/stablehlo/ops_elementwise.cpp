// Elementwise builders: binary and unary arithmetic, CHLO unary ops, compare, select, clamp, conversions. Methods of
// shlo::Builder (builder.h).
#include <cstdint>
#include <limits>
#include <string>

#include "stablehlo/builder_impl.h"

namespace torch_tpu::shlo {

using namespace detail;

#define TPU_BINARY(Method, opname, mask)                                 \
  Value Builder::Method(Value a, Value b) {                              \
    impl_->check(#Method, a);                                            \
    impl_->check(#Method, b);                                            \
    requireSameType(#Method, a, b);                                      \
    requireDType(#Method, a, mask);                                      \
    return impl_->emit("stablehlo." opname, {a, b}, {}, a.type);         \
  }

TPU_BINARY(add, "add", kAll)
TPU_BINARY(sub, "subtract", kNum)
TPU_BINARY(mul, "multiply", kAll)
TPU_BINARY(pow, "power", kNum)
TPU_BINARY(max, "maximum", kAll)
TPU_BINARY(min, "minimum", kAll)
TPU_BINARY(atan2, "atan2", kFC)
TPU_BINARY(andOp, "and", kBits)
TPU_BINARY(orOp, "or", kBits)
TPU_BINARY(xorOp, "xor", kBits)
TPU_BINARY(shiftLeft, "shift_left", kInt)
TPU_BINARY(shiftRightArithmetic, "shift_right_arithmetic", kInt)
TPU_BINARY(shiftRightLogical, "shift_right_logical", kInt)
#undef TPU_BINARY

// Integer division and remainder keep XLA's results where C's are undefined (x / 0 = -1, all bits set; x % 0 = x;
// INT_MIN / -1 = INT_MIN; INT_MIN % -1 = 0) but no divide ever sees a zero divisor, nor a signed -1: the plugin's
// StableHLO constant folder divides constant operands natively and traps (SIGFPE, the process dies) on those, and a
// program's operands are constants more often than not in eager (an empty storage is a constant zero) and compiled
// code (torch.zeros(n) // torch.zeros(n)).
Value Builder::intDivRem(Value a, Value b, bool quotient) {
  const DType t = a.dtype();
  const Shape& shape = a.shape();
  Value zero = zeros(a.type), one = broadcastTo(constantInt(1, t), shape);
  Value by_zero = compare(b, zero, Cmp::EQ);
  Value unsafe = by_zero, by_minus_one;
  const bool is_signed = isSigned(t);  // (an integer type here)
  if (is_signed) {
    by_minus_one = compare(b, broadcastTo(constantInt(-1, t), shape), Cmp::EQ);
    unsafe = orOp(by_zero, by_minus_one);
  }
  Value safe = select(unsafe, one, b);
  Value r = impl_->emit(quotient ? "stablehlo.divide" : "stablehlo.remainder", {a, safe}, {}, a.type);
  if (is_signed) r = select(by_minus_one, quotient ? neg(a) : zero, r);
  return select(by_zero, quotient ? notOp(zero) : a, r);
}

Value Builder::div(Value a, Value b) {
  impl_->check("div", a);
  impl_->check("div", b);
  requireSameType("div", a, b);
  requireDType("div", a, kNum);
  if (isInteger(a.dtype())) return intDivRem(a, b, true);
  return impl_->emit("stablehlo.divide", {a, b}, {}, a.type);
}

Value Builder::rem(Value a, Value b) {
  impl_->check("rem", a);
  impl_->check("rem", b);
  requireSameType("rem", a, b);
  requireDType("rem", a, kNum);
  if (isInteger(a.dtype())) return intDivRem(a, b, false);
  return impl_->emit("stablehlo.remainder", {a, b}, {}, a.type);
}

#define TPU_UNARY(Method, opname, mask)                     \
  Value Builder::Method(Value a) {                          \
    impl_->check(#Method, a);                               \
    requireDType(#Method, a, mask);                         \
    return impl_->emit("stablehlo." opname, {a}, {}, a.type); \
  }

TPU_UNARY(neg, "negate", kSInt | kUInt | kFloat | kComplex)
TPU_UNARY(exp, "exponential", kFC)
TPU_UNARY(expm1, "exponential_minus_one", kFC)
TPU_UNARY(log, "log", kFC)
TPU_UNARY(log1p, "log_plus_one", kFC)
TPU_UNARY(sqrt, "sqrt", kFC)
TPU_UNARY(rsqrt, "rsqrt", kFC)
TPU_UNARY(cbrt, "cbrt", kFC)
TPU_UNARY(tanh, "tanh", kFC)
TPU_UNARY(logistic, "logistic", kFC)
TPU_UNARY(sin, "sine", kFC)
TPU_UNARY(cos, "cosine", kFC)
TPU_UNARY(tan, "tan", kFC)
TPU_UNARY(floor, "floor", kFloat)
TPU_UNARY(ceil, "ceil", kFloat)
TPU_UNARY(roundNearestEven, "round_nearest_even", kFloat)
TPU_UNARY(roundNearestAfz, "round_nearest_afz", kFloat)
TPU_UNARY(notOp, "not", kBits)
TPU_UNARY(popcnt, "popcnt", kInt)
TPU_UNARY(clz, "count_leading_zeros", kInt)
#undef TPU_UNARY

Value Builder::abs(Value a) {
  impl_->check("abs", a);
  requireDType("abs", a, kSInt | kUInt | kFloat | kPred | kComplex);
  if (isComplex(a.dtype())) {
    // The modulus as C's hypot: +inf when a part is infinite, else NaN when a part is NaN (XLA's CPU backend
    // scales by a NaN-ignoring maximum: |1 + NaN i| came out sqrt(2)); finite values keep XLA's overflow-safe
    // modulus.
    const TensorType rt{componentType(a.dtype()), a.shape()};
    Value m = impl_->emit("stablehlo.abs", {a}, {}, rt);
    Value re = realPart(a), im = imagPart(a);
    Value inf = orOp(chlo("is_inf", re), chlo("is_inf", im));
    Value nan = orOp(compare(re, re, Cmp::NE), compare(im, im, Cmp::NE));
    const double kInf = std::numeric_limits<double>::infinity(), kNaN = std::numeric_limits<double>::quiet_NaN();
    return select(inf, constantF(kInf, rt.dtype, rt.shape), select(nan, constantF(kNaN, rt.dtype, rt.shape), m));
  }
  if (a.dtype() == DType::Pred || (isInteger(a.dtype()) && !isSigned(a.dtype()))) return a;
  return impl_->emit("stablehlo.abs", {a}, {}, a.type);
}

Value Builder::sign(Value a) {
  impl_->check("sign", a);
  requireDType("sign", a, kSInt | kUInt | kFloat | kComplex | kPred);
  if (a.dtype() == DType::Pred) return a;
  if (isInteger(a.dtype()) && !isSigned(a.dtype())) return convert(compare(a, zerosLike(a), Cmp::NE), a.dtype());
  return impl_->emit("stablehlo.sign", {a}, {}, a.type);
}

Value Builder::isFinite(Value a) {
  impl_->check("isFinite", a);
  requireDType("isFinite", a, kFloat);
  return impl_->emit("stablehlo.is_finite", {a}, {}, TensorType{DType::Pred, a.shape()});
}

Value Builder::chlo(const std::string& name, Value a) {
  impl_->check("chlo", a);
  static const char* kPredResult[] = {"is_inf", "is_neg_inf", "is_pos_inf"};
  static const char* kKnown[] = {"erf",   "erfc", "erf_inv", "lgamma", "digamma", "asin",  "acos",
                                 "atan",  "sinh", "cosh",    "asinh",  "acosh",   "atanh", "tan",
                                 "bessel_i1e", "conj", "is_inf", "is_neg_inf", "is_pos_inf"};
  bool known = false;
  for (const char* k : kKnown) known = known || name == k;
  if (!known) fail("chlo", "unknown unary CHLO op '" + name + "'");
  requireDType(("chlo." + name).c_str(), a, kFC);
  bool pred = false;
  for (const char* k : kPredResult) pred = pred || name == k;
  std::string full = "chlo." + name;
  return impl_->emit(full.c_str(), {a}, {}, pred ? TensorType{DType::Pred, a.shape()} : a.type);
}

Value Builder::compare(Value a, Value b, Cmp dir) {
  impl_->check("compare", a);
  impl_->check("compare", b);
  requireSameType("compare", a, b);
  if (isComplex(a.dtype()) && dir != Cmp::EQ && dir != Cmp::NE)
    fail("compare", "complex operands only support EQ/NE");
  return impl_->emit("stablehlo.compare", {a, b}, Attrs().comparison(dir, a.dtype()),
                     TensorType{DType::Pred, a.shape()});
}

Value Builder::select(Value pred, Value on_true, Value on_false) {
  impl_->check("select", pred);
  impl_->check("select", on_true);
  impl_->check("select", on_false);
  if (pred.dtype() != DType::Pred) fail("select", "predicate must be pred (i1), got " + pred.type.str());
  requireSameType("select", on_true, on_false);
  if (pred.rank() != 0 && pred.shape() != on_true.shape())
    fail("select", "predicate shape " + pred.type.str() + " must be 0-d or match the operands " + on_true.type.str());
  return impl_->emit("stablehlo.select", {pred, on_true, on_false}, {}, on_true.type);
}

Value Builder::clamp(Value lo, Value x, Value hi) {
  impl_->check("clamp", lo);
  impl_->check("clamp", x);
  impl_->check("clamp", hi);
  for (const Value* b : {&lo, &hi}) {
    if (b->dtype() != x.dtype())
      fail("clamp", "bound dtype " + b->type.str() + " differs from operand " + x.type.str());
    if (b->rank() != 0 && b->shape() != x.shape())
      fail("clamp", "bound " + b->type.str() + " must be 0-d or match operand " + x.type.str());
  }
  requireDType("clamp", x, kAll & ~kComplex);
  return impl_->emit("stablehlo.clamp", {lo, x, hi}, {}, x.type);
}

Value Builder::convert(Value a, DType to) {
  impl_->check("convert", a);
  if (to == DType::Invalid) fail("convert", "invalid target dtype");
  if (a.dtype() == to) return a;
  if (isFloat8(a.dtype()))  // an exact widening first
    return convert(impl_->emit("stablehlo.convert", {a}, {}, TensorType{DType::F32, a.shape()}), to);
  if (isFloat8(to)) {
    Value r = toFloat8(convert(a, DType::F32), to);
    if (a.dtype() == DType::F64 && to == DType::F8E8M0FNU) {
      // XLA flushes f64 values below f32's normal range to zero; PyTorch rounds them to an f32 subnormal, which
      // e8m0fnu maps to 2^-126 (above 2^-127 plus half an f32 subnormal step) or to 2^-127.
      const Value mag = abs(a);
      const Value tiny = compare(mag, constantF(0x1p-126, DType::F64, a.shape()), Cmp::LT);
      const Value up = compare(mag, constantF(0x1p-127 + 0x1p-150, DType::F64, a.shape()), Cmp::GT);
      const Value bits = select(tiny, select(up, constantF(1, DType::U8, a.shape()), constantF(0, DType::U8, a.shape())),
                                bitcastConvert(r, DType::U8));
      r = bitcastConvert(bits, to);
    }
    return r;
  }
  if (to == DType::Pred) return compare(a, zerosLike(a), Cmp::NE);
  if (isComplex(a.dtype()) && !isComplex(to)) {
    // complex -> real: take the real part (like numpy / torch with a warning)
    Value re = impl_->emit("stablehlo.real", {a}, {}, TensorType{componentType(a.dtype()), a.shape()});
    return convert(re, to);
  }
  if (isFloat(a.dtype()) && (to == DType::U32 || to == DType::U64)) {
    // Float -> uint32/uint64 as PyTorch CPU computes it: below 2^31 (2^63) through the signed conversion below, from
    // there on the signed conversion of x - 2^31 (2^63) with the top bit flipped, so that values past the unsigned
    // range, NaN and -inf give 0 or the "integer indefinite" as x86 does. Half -> uint32 goes through int64 instead.
    if (a.dtype() == DType::F16 && to == DType::U32) {
      const Value w = convert(convert(a, DType::F32), DType::S64);
      return impl_->emit("stablehlo.convert", {w}, {}, TensorType{to, a.shape()});  // integer: low bits
    }
    if (a.dtype() == DType::F16 || a.dtype() == DType::BF16) a = convert(a, DType::F32);  // exact
    const DType wide = to == DType::U32 ? DType::S32 : DType::S64;
    const double lim = to == DType::U32 ? 0x1p31 : 0x1p63;
    const Shape& shape = a.shape();
    const Value top = broadcastTo(constantInt(to == DType::U32 ? std::numeric_limits<int32_t>::min()
                                                               : std::numeric_limits<int64_t>::min(), wide), shape);
    const Value limit = constantF(lim, a.dtype(), shape);
    const Value low = convert(a, wide);
    const Value high = xorOp(convert(sub(a, limit), wide), top);
    return bitcastConvert(select(compare(a, limit, Cmp::GE), high, low), to);
  }
  if (isFloat(a.dtype()) && (to == DType::U8 || to == DType::U16 || to == DType::S8 || to == DType::S16 ||
                             to == DType::S32 || to == DType::S64)) {
    // Float -> integer as PyTorch CPU computes it (x86's cvtt* conversions; scalar and vectorized kernels agree):
    // the value truncates to int32 (int64 for int64 results, and for uint8 from float64), where an out-of-range
    // value or NaN gives that type's minimum (the "integer indefinite"), then narrower types keep the low bits.
    // XLA's convert saturates instead (NaN -> 0). In-range values cost two compares and a select.
    if (a.dtype() == DType::F16 || a.dtype() == DType::BF16) a = convert(a, DType::F32);  // exact
    const DType wide = to == DType::S64 || (to == DType::U8 && a.dtype() == DType::F64) ? DType::S64 : DType::S32;
    const double lim = wide == DType::S64 ? 0x1p63 : 0x1p31;
    const Shape& shape = a.shape();
    const Value ok = andOp(compare(a, constantF(-lim, a.dtype(), shape), Cmp::GE),
                           compare(a, constantF(lim, a.dtype(), shape), Cmp::LT));  // false for NaN
    const int64_t indefinite = wide == DType::S64 ? std::numeric_limits<int64_t>::min()
                                                  : std::numeric_limits<int32_t>::min();
    Value w = impl_->emit("stablehlo.convert", {a}, {}, TensorType{wide, shape});
    w = select(ok, w, broadcastTo(constantInt(indefinite, wide), shape));
    return wide == to ? w : impl_->emit("stablehlo.convert", {w}, {}, TensorType{to, shape});  // integer: low bits
  }
  return impl_->emit("stablehlo.convert", {a}, {}, TensorType{to, a.shape()});
}

Value Builder::bitcastConvert(Value a, DType to) {
  impl_->check("bitcastConvert", a);
  if (to == DType::Invalid) fail("bitcastConvert", "invalid target dtype");
  if (a.dtype() == to) return a;
  if (bitWidth(a.dtype()) != bitWidth(to))
    fail("bitcastConvert", std::string("bit widths differ: ") + mlirName(a.dtype()) + " (" +
                               std::to_string(bitWidth(a.dtype())) + ") vs " + mlirName(to) + " (" +
                               std::to_string(bitWidth(to)) + ")");
  return impl_->emit("stablehlo.bitcast_convert", {a}, {}, TensorType{to, a.shape()});
}

Value Builder::realPart(Value a) {
  impl_->check("realPart", a);
  requireDType("realPart", a, kComplex);
  return impl_->emit("stablehlo.real", {a}, {}, TensorType{componentType(a.dtype()), a.shape()});
}

Value Builder::imagPart(Value a) {
  impl_->check("imagPart", a);
  requireDType("imagPart", a, kComplex);
  return impl_->emit("stablehlo.imag", {a}, {}, TensorType{componentType(a.dtype()), a.shape()});
}

Value Builder::complex(Value re, Value im) {
  impl_->check("complex", re);
  impl_->check("complex", im);
  requireSameType("complex", re, im);
  if (re.dtype() != DType::F32 && re.dtype() != DType::F64)
    fail("complex", "components must be f32 or f64, got " + re.type.str());
  DType t = re.dtype() == DType::F64 ? DType::C128 : DType::C64;
  return impl_->emit("stablehlo.complex", {re, im}, {}, TensorType{t, re.shape()});
}

Value Builder::conj(Value a) {
  if (!isComplex(a.dtype())) return a;
  return complex(realPart(a), neg(imagPart(a)));
}

Value Builder::fft(Value a, const std::string& kind, const std::vector<int64_t>& lengths) {
  impl_->check("fft", a);
  const size_t k = lengths.size();
  if (k < 1 || k > 3 || k > size_t(a.rank())) fail("fft", "1 to 3 transformed dimensions, at most the rank");
  Shape out = a.shape();
  DType t = a.dtype();
  if (kind == "FFT" || kind == "IFFT") {
    requireDType("fft", a, kComplex);
  } else if (kind == "RFFT") {
    if (a.dtype() != DType::F32 && a.dtype() != DType::F64) fail("fft", "RFFT needs an f32 or f64 operand");
    t = a.dtype() == DType::F64 ? DType::C128 : DType::C64;
    out.back() = lengths.back() / 2 + 1;
  } else if (kind == "IRFFT") {
    requireDType("fft", a, kComplex);
    t = componentType(a.dtype());
    out.back() = lengths.back();
  } else {
    fail("fft", "unknown fft type '" + kind + "'");
  }
  return impl_->emit("stablehlo.fft", {a},
                     Attrs().enumeration("fft_type", "fft_type", kind).array("fft_length", lengths),
                     TensorType{t, out});
}

}  // namespace torch_tpu::shlo
