// Elementwise family: arithmetic with PyTorch type promotion and broadcasting, bitwise and logical ops,
// comparisons, where/clamp/masked_fill, unary math (and the backward of tanh, sigmoid and logit), lerp and addc*.
// Special functions are in special.cpp, activations in activation.cpp; the pieces the three share in
// lowering/pointwise.h.
#include <cmath>
#include <limits>

#include "lowering/bounds.h"
#include "lowering/families.h"
#include "lowering/pointwise.h"

namespace torch_tpu::lowering {
namespace {

using shlo::isFloat;
using shlo::isSigned;

// ---- numeric building blocks ----

Value divTrunc(Builder& b, Value a, Value d) {
  if (isFloat(a.dtype())) return truncF(b, b.div(a, d));
  return b.div(a, d);
}

// PyTorch's div_floor (floating: c10 div_floor_floating; integers: floor of the exact quotient).
Value divFloor(Builder& b, Value a, Value d) {
  if (isFloat(a.dtype())) {
    Value zero = cst(b, 0, a);
    Value mod = b.rem(a, d);
    Value div = b.div(b.sub(a, mod), d);
    Value adj = b.andOp(b.compare(mod, zero, Cmp::NE),
                        b.compare(b.compare(d, zero, Cmp::LT), b.compare(mod, zero, Cmp::LT), Cmp::NE));
    div = b.select(adj, b.sub(div, cst(b, 1, a)), div);
    Value fl = b.floor(div);
    fl = b.select(b.compare(b.sub(div, fl), cst(b, 0.5, a), Cmp::GT), b.add(fl, cst(b, 1, a)), fl);
    Value q = b.div(a, d);
    Value signed_zero = b.mul(zero, q);  // copysign(0, a / b)
    Value res = b.select(b.compare(div, zero, Cmp::NE), fl, signed_zero);
    return b.select(b.compare(d, zero, Cmp::EQ), q, res);
  }
  if (!isSigned(a.dtype())) return b.div(a, d);
  Value zero = cst(b, 0, a);
  Value q = b.div(a, d);
  Value r = b.rem(a, d);
  Value adj = b.andOp(b.compare(r, zero, Cmp::NE),
                      b.compare(b.compare(r, zero, Cmp::LT), b.compare(d, zero, Cmp::LT), Cmp::NE));
  return b.select(adj, b.sub(q, cst(b, 1, a)), q);
}

// Python-style remainder: the result has the divisor's sign.
Value remainderOp(Builder& b, Value a, Value d) {
  Value r = b.rem(a, d);
  if (!isSigned(a.dtype())) return r;
  Value zero = cst(b, 0, a);
  Value adj = b.andOp(b.compare(r, zero, Cmp::NE),
                      b.compare(b.compare(r, zero, Cmp::LT), b.compare(d, zero, Cmp::LT), Cmp::NE));
  return b.select(adj, b.add(r, d), r);
}

// x^e of integers for e >= 0 by repeated squaring, as CPU's powi: exact modulo 2^bits (XLA's integer power gives
// other values once the result overflows: (-55)^127 in int64).
Value intPow(Builder& b, Value x, Value e) {
  Value r = cst(b, 1, x), base = x, one = cst(b, 1, e), zero = cst(b, 0, e);
  for (int i = 0; i < shlo::bitWidth(e.dtype()); ++i) {
    r = b.select(b.compare(b.andOp(e, one), zero, Cmp::NE), b.mul(r, base), r);
    base = b.mul(base, base);
    e = b.shiftRightLogical(e, one);
  }
  return r;
}

// pow with PyTorch's integer semantics for negative exponents (1 -> 1, -1 -> +-1, else 0).
Value powOp(Builder& b, Value x, Value e) {
  if (isFloat(x.dtype())) return b.pow(x, e);
  if (!isSigned(x.dtype())) return isInteger(x.dtype()) ? intPow(b, x, e) : b.pow(x, e);
  Value zero = cst(b, 0, x), one = cst(b, 1, x), m1 = cst(b, -1, x);
  Value p = intPow(b, x, b.max(e, zero));
  Value odd = b.compare(b.rem(e, cst(b, 2, e)), zero, Cmp::NE);
  Value negres = b.select(b.compare(x, one, Cmp::EQ), one,
                          b.select(b.compare(x, m1, Cmp::EQ), b.select(odd, m1, one), zero));
  return b.select(b.compare(e, zero, Cmp::LT), negres, p);
}

Value signOp(Builder& b, Value x) {
  if (x.dtype() == DType::Pred) return x;
  Value zero = cst(b, 0, x);
  Value pos = b.select(b.compare(x, zero, Cmp::GT), cst(b, 1, x), zero);
  if (!isSigned(x.dtype())) return pos;
  return b.select(b.compare(x, zero, Cmp::LT), cst(b, -1, x), pos);
}

double maxFinite(DType t) {
  switch (t) {
    case DType::F16: return 65504.0;
    case DType::BF16: return 3.3895313892515355e38;
    case DType::F32: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

// ---- rule factories of this family ----

// Unary predicate (isnan, logical_not, ...): fn sees the input in its own dtype and returns pred.
RuleFn unaryPred(Fn1 fn) {
  return [fn](Context& ctx) -> std::vector<Value> { return {fn(ctx.b, ctx.tensor(0))}; };
}

// Arithmetic with alpha (add/sub/rsub): fn(a, b) with b already scaled by alpha (args 0, 1, alpha 2).
RuleFn binaryAlpha(bool reversed, bool subtract) {
  return [reversed, subtract](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = resultTypeOf(ctx, {0, 1});
    DType c = computeType(t);
    auto v = operands(ctx, {0, 1}, c);
    Value x = v[0], y = v[1];
    if (reversed) std::swap(x, y);
    if (c == DType::Pred) {  // bool add: self | (alpha & other)
      if (ctx.has(2)) y = b.andOp(y, operand(ctx, 2, c, y.shape()));
      return {b.orOp(x, y)};
    }
    if (ctx.has(2)) y = b.mul(y, operand(ctx, 2, c, y.shape()));
    return {b.convert(subtract ? b.sub(x, y) : b.add(x, y), t)};
  };
}

// Comparison of args (0, 1) in their promoted dtype; result pred.
RuleFn comparison(Cmp c) {
  return [c](Context& ctx) -> std::vector<Value> {
    DType t = resultTypeOf(ctx, {0, 1});
    auto v = operands(ctx, {0, 1}, t);
    if (shlo::isFloat8(t))  // float8 compares as its float32 value
      for (Value& x : v) x = ctx.b.convert(x, DType::F32);
    return {ctx.b.compare(v[0], v[1], c)};
  };
}

// Bitwise/logical-integer op of args (0, 1) in their promoted dtype.
RuleFn bitwise(Fn2 fn) {
  return [fn](Context& ctx) -> std::vector<Value> {
    DType t = resultTypeOf(ctx, {0, 1});
    auto v = operands(ctx, {0, 1}, t);
    return {fn(ctx.b, v[0], v[1])};
  };
}
// Only bool and integer dtypes (floats decline and fall back to CPU, which raises).
bool bitwiseAccepts(const Context& ctx) { return realDTypes(ctx) && !isFloat(resultTypeOf(ctx, {0, 1})); }

// Logical op: operands compared with zero, result pred.
RuleFn logical(Fn2 fn) {
  return [fn](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Shape shape = commonShape(ctx, {0, 1});
    auto nz = [&](size_t i) {
      Value x = b.broadcastTo(ctx.tensor(i), shape);
      return x.dtype() == DType::Pred ? x : b.compare(x, b.zerosLike(x), Cmp::NE);
    };
    return {fn(b, nz(0), nz(1))};
  };
}

// Integer division and remainder of args (0, 1): an integer divisor of zero raises "ZeroDivisionError" like the CPU
// kernels (a device-side check).
RuleFn binaryIntDiv(Fn2 fn) {
  return [fn](Context& ctx) -> std::vector<Value> {
    DType t = resultTypeOf(ctx, {0, 1});
    DType c = computeType(t);
    auto v = operands(ctx, {0, 1}, c);
    checkNonZeroDivisor(ctx, v[1]);
    return {ctx.b.convert(fn(ctx.b, v[0], v[1]), t)};
  };
}

}  // namespace

void populateElementwise(Registry& r) {
  // ---- arithmetic ----
  r.add("aten::add.Tensor", binaryAlpha(false, false)).accepts(elementwiseAccepts).complex();
  r.add("aten::add.Scalar", binaryAlpha(false, false)).accepts(elementwiseAccepts).complex();
  r.add("aten::sub.Tensor", binaryAlpha(false, true)).accepts(elementwiseAccepts).complex();
  r.add("aten::sub.Scalar", binaryAlpha(false, true)).accepts(elementwiseAccepts).complex();
  r.add("aten::rsub.Tensor", binaryAlpha(true, true)).accepts(elementwiseAccepts).complex();
  r.add("aten::rsub.Scalar", binaryAlpha(true, true)).accepts(elementwiseAccepts).complex();
  Fn2 mul = [](Builder& b, Value x, Value y) { return x.dtype() == DType::Pred ? b.andOp(x, y) : b.mul(x, y); };
  r.add("aten::mul.Tensor", binary(mul)).accepts(elementwiseAccepts).dtypes(kRestricted);
  r.add("aten::mul.Scalar", binary(mul)).accepts(elementwiseAccepts).dtypes(kRestricted);
  Fn2 div = [](Builder& b, Value x, Value y) { return b.div(x, y); };
  r.add("aten::div.Tensor", binary(div, /*float_result=*/true)).accepts(elementwiseAccepts).complex();
  r.add("aten::div.Scalar", binary(div, true)).accepts(elementwiseAccepts).complex();
  auto divMode = [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    std::string mode = ctx.has(2) ? ctx.arg(2).s : "";
    DType t = resultTypeOf(ctx, {0, 1});
    if (mode.empty()) t = toFloat(t);
    else if (mode != "trunc" && mode != "floor") ctx.fail("unknown rounding_mode '" + mode + "'");
    DType c = t == DType::Pred ? DType::S64 : computeType(t);
    auto v = operands(ctx, {0, 1}, c);
    if (!mode.empty()) checkNonZeroDivisor(ctx, v[1]);
    Value q = mode.empty() ? b.div(v[0], v[1]) : mode == "trunc" ? divTrunc(b, v[0], v[1]) : divFloor(b, v[0], v[1]);
    return {b.convert(q, t)};
  };
  r.add("aten::div.Tensor_mode", divMode).accepts(elementwiseAccepts);
  r.add("aten::div.Scalar_mode", divMode).accepts(elementwiseAccepts);
  Fn2 floordiv = [](Builder& b, Value x, Value y) {
    if (x.dtype() == DType::Pred) return b.convert(divFloor(b, b.convert(x, DType::S64), b.convert(y, DType::S64)), DType::Pred);
    return divFloor(b, x, y);
  };
  r.add("aten::floor_divide", binaryIntDiv(floordiv)).accepts(elementwiseAccepts);
  r.add("aten::floor_divide.Scalar", binaryIntDiv(floordiv)).accepts(elementwiseAccepts);
  Fn2 remainder = [](Builder& b, Value x, Value y) { return remainderOp(b, x, y); };
  r.add("aten::remainder.Tensor", binaryIntDiv(remainder)).accepts(elementwiseAccepts);
  r.add("aten::remainder.Scalar", binaryIntDiv(remainder)).accepts(elementwiseAccepts);
  r.add("aten::remainder.Scalar_Tensor", binaryIntDiv(remainder)).accepts(elementwiseAccepts);
  Fn2 fmod = [](Builder& b, Value x, Value y) { return b.rem(x, y); };
  r.add("aten::fmod.Tensor", binaryIntDiv(fmod)).accepts(elementwiseAccepts);
  r.add("aten::fmod.Scalar", binaryIntDiv(fmod)).accepts(elementwiseAccepts);
  Fn2 pow = [](Builder& b, Value x, Value y) {
    if (x.dtype() == DType::Pred) return b.convert(powOp(b, b.convert(x, DType::S64), b.convert(y, DType::S64)), DType::Pred);
    return powOp(b, x, y);
  };
  r.add("aten::pow.Tensor_Tensor", binary(pow)).accepts(elementwiseAccepts).complex().transcendental();
  r.add("aten::pow.Tensor_Scalar", binary(pow)).accepts(elementwiseAccepts).complex().transcendental();
  r.add("aten::pow.Scalar", binary(pow)).accepts(elementwiseAccepts).complex().transcendental();
  r.add("aten::maximum", binary([](Builder& b, Value x, Value y) { return nanMax(b, x, y); }))
      .accepts(elementwiseAccepts);
  r.add("aten::minimum", binary([](Builder& b, Value x, Value y) { return nanMin(b, x, y); }))
      .accepts(elementwiseAccepts);
  r.add("aten::fmax", binary([](Builder& b, Value x, Value y) {  // NaN only if both are NaN
    Value m = b.max(x, y);
    if (!isFloat(x.dtype())) return m;
    return b.select(isNan(b, x), y, b.select(isNan(b, y), x, m));
  })).accepts(elementwiseAccepts);
  r.add("aten::fmin", binary([](Builder& b, Value x, Value y) {
    Value m = b.min(x, y);
    if (!isFloat(x.dtype())) return m;
    return b.select(isNan(b, x), y, b.select(isNan(b, y), x, m));
  })).accepts(elementwiseAccepts);
  r.add("aten::atan2", binary([](Builder& b, Value x, Value y) { return b.atan2(x, y); }, true))
      .accepts(elementwiseAccepts).transcendental();
  // hypot(x, y) as C's: the modulus of x + yi (no overflow of x * x for large x; +inf when either is infinite,
  // NaN otherwise when either is NaN); half types compute in float, as CPU's kernel
  r.add("aten::hypot", binary([](Builder& b, Value x, Value y) {
    const DType t = x.dtype(), c = accType(t);
    return b.convert(b.abs(b.complex(b.convert(x, c), b.convert(y, c))), t);
  })).accepts(elementwiseAccepts);
  r.add("aten::copysign.Tensor", binary([](Builder& b, Value x, Value y) { return copySign(b, x, y); }, true))
      .accepts(elementwiseAccepts);
  r.add("aten::xlogy.Tensor", binary([](Builder& b, Value x, Value y) {
    Value zero = cst(b, 0, x);
    Value res = b.select(b.compare(x, zero, Cmp::EQ), zero, b.mul(x, b.log(y)));
    return b.select(isNan(b, y), y, res);
  }, true)).accepts(elementwiseAccepts);
  r.add("aten::logaddexp", binary([](Builder& b, Value x, Value y) {
    if (shlo::isComplex(x.dtype())) {
      // As PyTorch's complex kernel: min/max by the real parts, log1p(exp(min - max)) + max; when both real parts
      // are the same infinity, min (-inf) or log(exp(min) + exp(max)) (+inf). NaNs propagate through either.
      Value xr = b.realPart(x), yr = b.realPart(y);
      Value x_lt = b.compare(xr, yr, Cmp::LT);
      Value mn = b.select(x_lt, x, y), mx = b.select(x_lt, y, x);
      Value mnr = b.realPart(mn);
      Value res = b.add(b.log1p(b.exp(b.sub(mn, mx))), mx);
      Value same_inf = b.andOp(b.compare(mnr, b.realPart(mx), Cmp::EQ),
                               b.compare(b.abs(mnr), cst(b, INFINITY, mnr), Cmp::EQ));
      Value inf_res = b.select(b.compare(mnr, b.zerosLike(mnr), Cmp::LT), mn, b.log(b.add(b.exp(mn), b.exp(mx))));
      return b.select(same_inf, inf_res, res);
    }
    Value m = b.max(x, y);
    Value res = b.add(m, b.log1p(b.exp(b.neg(b.abs(b.sub(x, y))))));
    // equal infinities: x - y is NaN; the answer is that infinity
    Value same_inf = b.andOp(b.compare(x, y, Cmp::EQ), b.compare(b.abs(x), cst(b, INFINITY, x), Cmp::EQ));
    return b.select(same_inf, x, res);
  }, true)).accepts(elementwiseAccepts).complex();

  r.add("aten::logaddexp2", binary([](Builder& b, Value x, Value y) {
    Value m = b.max(x, y);
    Value d = b.neg(b.abs(b.sub(x, y)));
    Value res = b.add(m, b.div(b.log1p(b.pow(cst(b, 2, x), d)), cst(b, M_LN2, x)));
    Value same_inf = b.andOp(b.compare(x, y, Cmp::EQ), b.compare(b.abs(x), cst(b, INFINITY, x), Cmp::EQ));
    return b.select(same_inf, x, res);
  }, true)).accepts(elementwiseAccepts);
  // heaviside(x, values): values where x == 0, else x > 0 (as CPU's and CUDA's kernels: 0 for a NaN x)
  r.add("aten::heaviside", binary([](Builder& b, Value x, Value v) {
    Value zero = cst(b, 0, x);
    Value pos = b.select(b.compare(x, zero, Cmp::GT), cst(b, 1, x), zero);
    return b.select(b.compare(x, zero, Cmp::EQ), v, pos);
  })).accepts(elementwiseAccepts);
  // shifts: shift counts outside [0, bits) give 0 (left) or the sign fill (right), as stablehlo does.
  for (const char* ov : {".Tensor", ".Tensor_Scalar", ".Scalar_Tensor"}) {
    r.add(std::string("aten::bitwise_left_shift") + ov, bitwise([](Builder& b, Value x, Value y) {
      return b.shiftLeft(x, y);
    })).accepts(bitwiseAccepts).dtypes(kWideUnsigned);
    r.add(std::string("aten::bitwise_right_shift") + ov, bitwise([](Builder& b, Value x, Value y) {
      return isSigned(x.dtype()) ? b.shiftRightArithmetic(x, y) : b.shiftRightLogical(x, y);
    })).accepts(bitwiseAccepts).dtypes(kWideUnsigned);
  }
  // The Python operators (x << y, x >> y; their in-place forms __ilshift__/__irshift__ map to these in core/ops.cpp):
  // the same functions, without the 16/32/64-bit unsigned types CPU's kernels of these operators lack.
  for (const char* ov : {".Tensor", ".Scalar"}) {
    r.add(std::string("aten::__lshift__") + ov, bitwise([](Builder& b, Value x, Value y) {
      return b.shiftLeft(x, y);
    })).accepts(bitwiseAccepts);
    r.add(std::string("aten::__rshift__") + ov, bitwise([](Builder& b, Value x, Value y) {
      return isSigned(x.dtype()) ? b.shiftRightArithmetic(x, y) : b.shiftRightLogical(x, y);
    })).accepts(bitwiseAccepts);
  }

  // nextafter(self, other): the next representable float from self toward other (bit arithmetic).
  r.add("aten::nextafter", binary([](Builder& b, Value x, Value y) {
    if (!isFloat(x.dtype())) return x;
    int w = shlo::bitWidth(x.dtype());
    DType it = w == 64 ? DType::S64 : w == 32 ? DType::S32 : DType::S16;
    Value bits = b.bitcastConvert(x, it);
    Value one = b.constantF(1, it, x.shape());
    Value zero = cst(b, 0, x);
    Value up = b.compare(b.compare(x, y, Cmp::LT), b.compare(x, zero, Cmp::GT), Cmp::EQ);  // away from zero
    Value moved = b.bitcastConvert(b.select(up, b.add(bits, one), b.sub(bits, one)), x.dtype());
    // from zero: the smallest subnormal with other's sign
    Value tiny = b.bitcastConvert(one, x.dtype());
    Value from_zero = b.select(b.compare(y, zero, Cmp::LT), b.neg(tiny), tiny);
    Value res = b.select(b.compare(x, zero, Cmp::EQ), from_zero, moved);
    res = b.select(b.compare(x, y, Cmp::EQ), y, res);
    return b.select(b.orOp(isNan(b, x), isNan(b, y)), b.add(x, y), res);
  })).accepts(elementwiseAccepts);

  // gcd / lcm of integers: Euclid's algorithm unrolled (64 steps cover operands below 10^13).
  auto gcdOp = [](Builder& b, Value x, Value y) {
    Value a = b.abs(x), c = b.abs(y);
    Value zero = b.zerosLike(a);
    for (int i = 0; i < 64; ++i) {
      Value nz = b.compare(c, zero, Cmp::NE);
      Value safe = b.select(nz, c, b.onesLike(c));
      Value rem = b.rem(a, safe);
      a = b.select(nz, c, a);
      c = b.select(nz, rem, zero);
    }
    return a;
  };
  for (const char* op : {"aten::gcd", "aten::lcm"}) {
    bool lcm = std::string(op) == "aten::lcm";
    r.add(op, [gcdOp, lcm](Context& ctx) -> std::vector<Value> {
      DType t = resultTypeOf(ctx, {0, 1});
      auto v = operands(ctx, {0, 1}, t);
      Builder& b = ctx.b;
      Value g = gcdOp(b, v[0], v[1]);
      if (!lcm) return {g};
      Value zero = b.zerosLike(g);
      Value safe = b.select(b.compare(g, zero, Cmp::EQ), b.onesLike(g), g);
      // abs(a / g * b) in C's int for 8- and 16-bit types (their product does not wrap before abs), as CPU's kernel
      const DType w = shlo::bitWidth(t) < 32 ? DType::S32 : t;
      Value l = b.convert(b.abs(b.mul(b.convert(b.div(v[0], safe), w), b.convert(v[1], w))), t);
      return {b.select(b.compare(g, zero, Cmp::EQ), zero, l)};
    }).accepts([](const Context& ctx) {
      DType t = resultTypeOf(ctx, {0, 1});
      return realDTypes(ctx) && shlo::isInteger(t);
    });
  }

  // ---- bitwise / logical ----
  r.add("aten::bitwise_and.Tensor", bitwise([](Builder& b, Value x, Value y) { return b.andOp(x, y); }))
      .accepts(bitwiseAccepts).dtypes(kWideUnsigned);
  r.add("aten::bitwise_and.Scalar", bitwise([](Builder& b, Value x, Value y) { return b.andOp(x, y); }))
      .accepts(bitwiseAccepts).dtypes(kWideUnsigned);
  r.add("aten::bitwise_or.Tensor", bitwise([](Builder& b, Value x, Value y) { return b.orOp(x, y); }))
      .accepts(bitwiseAccepts).dtypes(kWideUnsigned);
  r.add("aten::bitwise_or.Scalar", bitwise([](Builder& b, Value x, Value y) { return b.orOp(x, y); }))
      .accepts(bitwiseAccepts).dtypes(kWideUnsigned);
  r.add("aten::bitwise_xor.Tensor", bitwise([](Builder& b, Value x, Value y) { return b.xorOp(x, y); }))
      .accepts(bitwiseAccepts).dtypes(kWideUnsigned);
  r.add("aten::bitwise_xor.Scalar", bitwise([](Builder& b, Value x, Value y) { return b.xorOp(x, y); }))
      .accepts(bitwiseAccepts).dtypes(kWideUnsigned);
  r.add("aten::bitwise_not", [](Context& ctx) -> std::vector<Value> { return {ctx.b.notOp(ctx.tensor(0))}; })
      .accepts([](const Context& ctx) { return realDTypes(ctx) && !isFloat(ctx.tensor(0).dtype()); });
  r.add("aten::logical_and", logical([](Builder& b, Value x, Value y) { return b.andOp(x, y); }))
      .accepts(elementwiseAccepts).complex();
  r.add("aten::logical_or", logical([](Builder& b, Value x, Value y) { return b.orOp(x, y); }))
      .accepts(elementwiseAccepts).complex();
  r.add("aten::logical_xor", logical([](Builder& b, Value x, Value y) { return b.xorOp(x, y); }))
      .accepts(elementwiseAccepts).complex();
  r.add("aten::logical_not", unaryPred([](Builder& b, Value x) {
    return x.dtype() == DType::Pred ? b.notOp(x) : b.compare(x, b.zerosLike(x), Cmp::EQ);
  })).accepts(elementwiseAccepts).complex();

  // ---- comparisons ----
  const std::pair<const char*, Cmp> cmps[] = {{"eq", Cmp::EQ}, {"ne", Cmp::NE}, {"lt", Cmp::LT},
                                              {"le", Cmp::LE}, {"gt", Cmp::GT}, {"ge", Cmp::GE}};
  for (auto& [name, c] : cmps) {
    // float8, uint16/32/64 and complex numbers compare for equality only (as on CPU)
    const unsigned eq = c == Cmp::EQ || c == Cmp::NE ? kRestricted : 0u;
    r.add(std::string("aten::") + name + ".Tensor", comparison(c)).accepts(elementwiseAccepts).dtypes(eq);
    r.add(std::string("aten::") + name + ".Scalar", comparison(c)).accepts(elementwiseAccepts).dtypes(eq);
  }
  r.add("aten::isnan", unaryPred([](Builder& b, Value x) { return isNan(b, x); }))
      .accepts(elementwiseAccepts)
      .dtypes(kRestricted);
  r.add("aten::isinf", unaryPred([](Builder& b, Value x) {
    auto inf = [&](Value v) { return b.compare(b.abs(v), cst(b, INFINITY, v), Cmp::EQ); };
    if (shlo::isComplex(x.dtype())) return b.orOp(inf(b.realPart(x)), inf(b.imagPart(x)));
    if (!isFloat(x.dtype())) return b.constantF(0, DType::Pred, x.shape());
    return inf(x);
  })).accepts(elementwiseAccepts).complex();
  r.add("aten::isposinf", unaryPred([](Builder& b, Value x) {
    if (!isFloat(x.dtype())) return b.constantF(0, DType::Pred, x.shape());
    return b.compare(x, cst(b, INFINITY, x), Cmp::EQ);
  })).accepts(elementwiseAccepts);
  r.add("aten::isneginf", unaryPred([](Builder& b, Value x) {
    if (!isFloat(x.dtype())) return b.constantF(0, DType::Pred, x.shape());
    return b.compare(x, cst(b, -INFINITY, x), Cmp::EQ);
  })).accepts(elementwiseAccepts);

  // ---- selection ----
  r.add("aten::where.self", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = resultTypeOf(ctx, {1, 2});
    Shape shape = commonShape(ctx, {0, 1, 2});
    Value cond = b.broadcastTo(ctx.tensor(0), shape);
    if (cond.dtype() != DType::Pred) cond = b.compare(cond, b.zerosLike(cond), Cmp::NE);
    return {b.select(cond, operand(ctx, 1, t, shape), operand(ctx, 2, t, shape))};
  }).accepts(elementwiseAccepts).dtypes(kRestricted);
  auto clampRule = [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = resultTypeOf(ctx, {0, 1, 2});
    DType c = computeType(t);
    Shape shape = commonShape(ctx, {0, 1, 2});
    Value x = operand(ctx, 0, c, shape);
    Value lo, hi;
    if (ctx.has(1)) lo = operand(ctx, 1, c, shape);
    if (ctx.has(2)) hi = operand(ctx, 2, c, shape);
    return {b.convert(clampOp(b, x, ctx.has(1) ? &lo : nullptr, ctx.has(2) ? &hi : nullptr), t)};
  };
  r.add("aten::clamp", clampRule).accepts(elementwiseAccepts);
  r.add("aten::clamp.Tensor", clampRule).accepts(elementwiseAccepts);
  r.add("aten::clamp_min", binary([](Builder& b, Value x, Value y) { return nanMax(b, x, y); }))
      .accepts(elementwiseAccepts);
  r.add("aten::clamp_min.Tensor", binary([](Builder& b, Value x, Value y) { return nanMax(b, x, y); }))
      .accepts(elementwiseAccepts);
  r.add("aten::clamp_max", binary([](Builder& b, Value x, Value y) { return nanMin(b, x, y); }))
      .accepts(elementwiseAccepts);
  r.add("aten::clamp_max.Tensor", binary([](Builder& b, Value x, Value y) { return nanMin(b, x, y); }))
      .accepts(elementwiseAccepts);
  auto maskedFill = [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0);
    Shape shape = commonShape(ctx, {0, 1});
    Value mask = b.broadcastTo(ctx.tensor(1), shape);
    if (mask.dtype() != DType::Pred) mask = b.compare(mask, b.zerosLike(mask), Cmp::NE);
    Value v = b.broadcastTo(scalarArg(ctx, 2, self.dtype()), shape);
    return {b.select(mask, v, b.broadcastTo(self, shape))};
  };
  r.add("aten::masked_fill.Scalar", maskedFill).accepts(elementwiseAccepts).complex();
  r.add("aten::masked_fill.Tensor", maskedFill).accepts(elementwiseAccepts).complex();

  // ---- unary, dtype-preserving ----
  r.add("aten::neg", unarySame([](Builder& b, Value x) { return b.neg(x); })).accepts(elementwiseAccepts).complex();
  r.add("aten::abs", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    if (shlo::isComplex(x.dtype())) return {ctx.b.abs(x)};  // the modulus, a real result
    return {inAcc(ctx.b, x, x.dtype(), [&](Value v) {
      return (v.dtype() == DType::Pred || !isSigned(v.dtype())) ? v : ctx.b.abs(v);
    })};
  }).accepts(elementwiseAccepts).dtypes(kFloat8 | kComplex);
  r.add("aten::sign", unarySame(signOp)).accepts(elementwiseAccepts);
  // sgn of a complex number: z / |z| (0 for 0), stablehlo.sign's complex form.
  r.add("aten::sgn", unarySame([](Builder& b, Value x) { return shlo::isComplex(x.dtype()) ? b.sign(x) : signOp(b, x); }))
      .accepts(elementwiseAccepts).complex();
  r.add("aten::floor", unarySame([](Builder& b, Value x) { return isFloat(x.dtype()) ? b.floor(x) : x; }))
      .accepts(elementwiseAccepts);
  r.add("aten::ceil", unarySame([](Builder& b, Value x) { return isFloat(x.dtype()) ? b.ceil(x) : x; }))
      .accepts(elementwiseAccepts);
  r.add("aten::round", unarySame([](Builder& b, Value x) { return isFloat(x.dtype()) ? b.roundNearestEven(x) : x; }))
      .accepts(elementwiseAccepts);
  r.add("aten::trunc", unarySame(truncF)).accepts(elementwiseAccepts);
  r.add("aten::frac", unarySame([](Builder& b, Value x) { return b.sub(x, truncF(b, x)); }))
      .accepts(elementwiseAccepts);
  r.add("aten::round.decimals", [](Context& ctx) -> std::vector<Value> {
    int64_t d = ctx.toInt(1);
    Value x = ctx.tensor(0);
    return {inAcc(ctx.b, x, x.dtype(), [&](Value v) {
      Builder& b = ctx.b;
      if (!isFloat(v.dtype())) return v;
      Value p = cst(b, std::pow(10.0, double(std::llabs(d))), v);
      if (d < 0) return b.mul(b.roundNearestEven(b.div(v, p)), p);
      return b.div(b.roundNearestEven(b.mul(v, p)), p);
    })};
  }).accepts(elementwiseAccepts);
  r.add("aten::nan_to_num", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    if (!isFloat(x.dtype())) return {x};
    DType t = x.dtype();
    auto opt = [&](size_t i, double dflt) {
      return ctx.has(i) ? b.broadcastTo(scalarArg(ctx, i, t), x.shape()) : b.constantF(dflt, t, x.shape());
    };
    Value res = b.select(isNan(b, x), opt(1, 0.0), x);
    res = b.select(b.compare(x, cst(b, INFINITY, x), Cmp::EQ), opt(2, maxFinite(t)), res);
    res = b.select(b.compare(x, cst(b, -INFINITY, x), Cmp::EQ), opt(3, -maxFinite(t)), res);
    return {res};
  }).accepts(elementwiseAccepts);

  r.add("aten::signbit", unaryPred([](Builder& b, Value x) {
    if (x.dtype() == DType::Pred || !isSigned(x.dtype())) return b.constantF(0, DType::Pred, x.shape());
    if (!isFloat(x.dtype())) return b.compare(x, b.zerosLike(x), Cmp::LT);
    int w = shlo::bitWidth(x.dtype());
    DType it = w == 64 ? DType::S64 : w == 32 ? DType::S32 : DType::S16;
    Value bits = b.bitcastConvert(x, it);
    return b.compare(bits, b.zerosLike(bits), Cmp::LT);
  })).accepts(elementwiseAccepts);
  // angle of a real number: 0 for x >= 0, pi for x < 0, NaN stays NaN.
  // angle of a complex number: atan2(imag, real), a real result.
  r.add("aten::angle", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    if (shlo::isComplex(x.dtype())) return {b.atan2(b.imagPart(x), b.realPart(x))};
    DType out = toFloat(x.dtype());
    Value v = b.convert(x, accType(out));
    Value res = b.select(b.compare(v, cst(b, 0, v), Cmp::LT), cst(b, M_PI, v), cst(b, 0, v));
    return {b.convert(b.select(isNan(b, v), v, res), out)};
  }).accepts(elementwiseAccepts).complex();
  // conj_physical: the conjugate's values (a copy for real dtypes).
  r.add("aten::conj_physical", [](Context& ctx) -> std::vector<Value> { return {ctx.b.conj(ctx.tensor(0))}; })
      .complex();
  // polar(abs, angle) = abs * (cos(angle) + i sin(angle)); complex(real, imag).
  r.add("aten::polar", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    const Shape& out = ctx.outputs.at(0).shape;
    Value m = b.broadcastTo(ctx.tensor(0), out), a = b.broadcastTo(ctx.tensor(1), out);
    return {b.complex(b.mul(m, b.cos(a)), b.mul(m, b.sin(a)))};
  }).accepts([](const Context& ctx) {
    DType t = ctx.tensor(0).dtype();
    return (t == DType::F32 || t == DType::F64) && ctx.tensor(1).dtype() == t;
  }).complex();
  // complex(real, imag): float16 parts make a complex32 result, which programs compute as complex64 (the parts
  // are exact in float32, and the storage rounds them back to half)
  r.add("aten::complex", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    const Shape& out = ctx.outputs.at(0).shape;
    auto part = [&](int i) {
      Value v = ctx.tensor(i);
      return b.broadcastTo(v.dtype() == DType::F16 ? b.convert(v, DType::F32) : v, out);
    };
    return {b.complex(part(0), part(1))};
  })
      .accepts([](const Context& ctx) {
        DType t = ctx.tensor(0).dtype();
        return (t == DType::F16 || t == DType::F32 || t == DType::F64) && ctx.tensor(1).dtype() == t;
      })
      .complex();
  // frexp(self) -> (mantissa in [0.5, 1), int32 exponent); 0, inf and NaN give (self, 0).
  r.add("aten::frexp.Tensor", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x0 = ctx.tensor(0);
    DType t = x0.dtype();
    DType c = t == DType::F64 ? DType::F64 : DType::F32;
    Value x = b.convert(x0, c);
    int mant = c == DType::F64 ? 52 : 23, bias = c == DType::F64 ? 1022 : 126;
    DType it = c == DType::F64 ? DType::S64 : DType::S32;
    // scale subnormals into the normal range first
    double scale_exp = c == DType::F64 ? 54 : 25;
    Value small = b.compare(b.abs(x), cst(b, c == DType::F64 ? 2.2250738585072014e-308 : 1.1754943508222875e-38, x),
                            Cmp::LT);
    Value xs = b.select(small, b.mul(x, cst(b, std::ldexp(1.0, int(scale_exp)), x)), x);
    Value bits = b.bitcastConvert(xs, it);
    Value ef = b.andOp(b.shiftRightLogical(bits, b.constantF(mant, it, x.shape())),
                       b.constantF(c == DType::F64 ? 0x7ff : 0xff, it, x.shape()));
    Value e = b.sub(ef, b.constantF(bias, it, x.shape()));
    e = b.select(small, b.sub(e, b.constantF(scale_exp, it, x.shape())), e);
    int64_t keep_mask = c == DType::F64 ? int64_t(~(int64_t(0x7ff) << 52)) : int64_t(~(int64_t(0xff) << 23)) & 0xffffffff;
    Value mbits = b.orOp(b.andOp(bits, b.broadcastTo(b.constantInt(c == DType::F64 ? keep_mask : int64_t(int32_t(uint32_t(keep_mask))), it), x.shape())),
                         b.broadcastTo(b.constantInt(int64_t(bias) << mant, it), x.shape()));
    Value m = b.bitcastConvert(mbits, c);
    Value special = b.orOp(b.compare(x, cst(b, 0, x), Cmp::EQ), b.notOp(b.isFinite(x)));
    m = b.select(special, x, m);
    e = b.select(special, b.zerosLike(e), e);
    return {b.convert(m, t), b.convert(e, DType::S32)};
  }).accepts([](const Context& ctx) { return realDTypes(ctx) && isFloat(ctx.tensor(0).dtype()); });

  // ---- unary, floating result ----
  r.add("aten::exp", unaryFloat([](Builder& b, Value x) { return b.exp(x); }))
      .accepts(elementwiseAccepts).complex().transcendental();
  r.add("aten::exp2", unaryFloat([](Builder& b, Value x) { return b.pow(cst(b, 2, x), x); }))
      .accepts(elementwiseAccepts).complex().transcendental();
  r.add("aten::expm1", unaryFloat([](Builder& b, Value x) { return b.expm1(x); }))
      .accepts(elementwiseAccepts).complex().transcendental();
  r.add("aten::log", unaryFloat([](Builder& b, Value x) { return b.log(x); }))
      .accepts(elementwiseAccepts).complex().transcendental();
  r.add("aten::log2", unaryFloat([](Builder& b, Value x) { return b.div(b.log(x), cst(b, M_LN2, x)); }))
      .accepts(elementwiseAccepts).complex().transcendental();
  r.add("aten::log10", unaryFloat([](Builder& b, Value x) { return b.div(b.log(x), cst(b, M_LN10, x)); }))
      .accepts(elementwiseAccepts).complex().transcendental();
  r.add("aten::log1p", unaryFloat([](Builder& b, Value x) { return b.log1p(x); }))
      .accepts(elementwiseAccepts).complex().transcendental();
  r.add("aten::sqrt", unaryFloat([](Builder& b, Value x) { return b.sqrt(x); })).accepts(elementwiseAccepts).complex();
  r.add("aten::rsqrt", unaryFloat([](Builder& b, Value x) { return b.rsqrt(x); }))
      .accepts(elementwiseAccepts).complex();
  r.add("aten::reciprocal", unaryFloat([](Builder& b, Value x) { return b.div(cst(b, 1, x), x); }))
      .accepts(elementwiseAccepts).complex();
  r.add("aten::sin", unaryFloat([](Builder& b, Value x) { return b.sin(x); }))
      .accepts(elementwiseAccepts).complex().transcendental();
  r.add("aten::cos", unaryFloat([](Builder& b, Value x) { return b.cos(x); }))
      .accepts(elementwiseAccepts).complex().transcendental();
  r.add("aten::tan", unaryFloat([](Builder& b, Value x) { return b.tan(x); }))
      .accepts(elementwiseAccepts).complex().transcendental();
  r.add("aten::tanh", unaryFloat([](Builder& b, Value x) { return b.tanh(x); })).accepts(elementwiseAccepts).complex();
  r.add("aten::sigmoid", unaryFloat(sigmoidF)).accepts(elementwiseAccepts).complex();
  r.add("aten::deg2rad", unaryFloat([](Builder& b, Value x) { return b.mul(x, cst(b, M_PI / 180.0, x)); }))
      .accepts(elementwiseAccepts);
  r.add("aten::rad2deg", unaryFloat([](Builder& b, Value x) { return b.mul(x, cst(b, 180.0 / M_PI, x)); }))
      .accepts(elementwiseAccepts);
  r.add("aten::sinc", unaryFloat([](Builder& b, Value x) {
    Value px = b.mul(x, cst(b, M_PI, x));
    return b.select(b.compare(x, cst(b, 0, x), Cmp::EQ), cst(b, 1, x), b.div(b.sin(px), px));
  })).accepts(elementwiseAccepts).complex();
  r.add("aten::digamma", unaryFloat(digammaF)).accepts(elementwiseAccepts).transcendental();
  for (const char* name : {"erf", "erfc", "lgamma"}) {
    std::string n = name;
    r.add("aten::" + n, unaryFloat([n](Builder& b, Value x) { return b.chlo(n, x); }))
        .accepts(elementwiseAccepts).transcendental();
  }
  for (const char* name : {"asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"}) {
    std::string n = name;
    r.add("aten::" + n, unaryFloat([n](Builder& b, Value x) { return b.chlo(n, x); }))
        .accepts(elementwiseAccepts).complex().transcendental();
  }
  r.add("aten::erfinv", unaryFloat([](Builder& b, Value x) { return b.chlo("erf_inv", x); }))
      .accepts(elementwiseAccepts).transcendental();
  r.add("aten::logit", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    DType out = toFloat(x.dtype());
    Builder& b = ctx.b;
    Value v = b.convert(x, accType(out));
    if (ctx.has(1)) {
      Value eps = b.broadcastTo(scalarArg(ctx, 1, v.dtype()), v.shape());
      v = b.clamp(eps, v, b.sub(cst(b, 1, v), eps));
    }
    return {b.convert(b.log(b.div(v, b.sub(cst(b, 1, v), v))), out)};
  }).accepts(elementwiseAccepts);

  // ---- backward of unary ops ----
  // logit_backward(grad_output, self, eps=None)
  r.add("aten::logit_backward", gradOp(0, 1, [](Context& ctx, DType c, Value g, Value x) {
    Builder& b = ctx.b;
    Value one = cst(b, 1, x);
    Value res = b.div(g, b.mul(x, b.sub(one, x)));
    if (!ctx.has(2)) {
      Value out = b.orOp(cmpc(b, x, 0, Cmp::LT), cmpc(b, x, 1, Cmp::GT));
      return b.select(out, cst(b, NAN, x), res);
    }
    Value lo = operand(ctx, 2, c, x.shape());
    Value hi = b.sub(one, lo);
    Value out = b.orOp(b.compare(x, lo, Cmp::LT), b.compare(x, hi, Cmp::GT));
    return b.select(out, b.zerosLike(g), res);
  })).accepts(elementwiseAccepts);
  // Complex: the gradient times the conjugate of the derivative (PyTorch's conjugate Wirtinger convention).
  r.add("aten::tanh_backward", gradOp(0, 1, [](Context& ctx, DType, Value g, Value y) {
    return ctx.b.mul(g, ctx.b.conj(ctx.b.sub(cst(ctx.b, 1, y), ctx.b.mul(y, y))));
  })).accepts(elementwiseAccepts).complex();
  r.add("aten::sigmoid_backward", gradOp(0, 1, [](Context& ctx, DType, Value g, Value y) {
    Builder& b = ctx.b;
    return b.mul(b.mul(g, b.conj(b.sub(cst(b, 1, y), y))), b.conj(y));
  })).accepts(elementwiseAccepts).complex();

  // ---- ternary ----
  auto addcRule = [](bool divide) {
    return [divide](Context& ctx) -> std::vector<Value> {
      Builder& b = ctx.b;
      DType t = resultTypeOf(ctx, {0, 1, 2});
      DType c = computeType(t);
      auto v = operands(ctx, {0, 1, 2}, c);
      Value value = operand(ctx, 3, c, v[0].shape());
      Value prod = divide ? b.div(v[1], v[2]) : b.mul(v[1], v[2]);
      return {b.convert(b.add(v[0], b.mul(value, prod)), t)};
    };
  };
  r.add("aten::addcmul", addcRule(false)).accepts(elementwiseAccepts).complex();
  r.add("aten::addcdiv", addcRule(true)).accepts(elementwiseAccepts).complex();
  auto lerpRule = [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = resultTypeOf(ctx, {0, 1});
    DType c = computeType(t);
    auto v = operands(ctx, {0, 1, 2}, c);
    Value self = v[0], end = v[1], w = v[2];
    Value diff = b.sub(end, self);
    Value aw = b.abs(w);  // (the modulus of a complex weight)
    Value small = b.compare(aw, cst(b, 0.5, aw), Cmp::LT);
    Value lo = b.add(self, b.mul(w, diff));
    Value hi = b.sub(end, b.mul(diff, b.sub(cst(b, 1, w), w)));
    return {b.convert(b.select(small, lo, hi), t)};
  };
  r.add("aten::lerp.Scalar", lerpRule).accepts(elementwiseAccepts).complex();
  r.add("aten::lerp.Tensor", lerpRule).accepts(elementwiseAccepts).complex();
}

}  // namespace torch_tpu::lowering
