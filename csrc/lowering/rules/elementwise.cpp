// Elementwise family: arithmetic with PyTorch type promotion and broadcasting, comparisons, where/clamp/masked_fill,
// unary math, activations and their backward formulas.
//
// Conventions: the promoted dtype T is computed from the arguments (resultTypeOf honors wrapped numbers and 0-d
// tensors); floating math runs in accType(T) (bf16/f16 upcast to f32, as PyTorch CPU's vectorized kernels do) and
// is rounded to T once at the end.
#include <cmath>
#include <limits>

#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

using shlo::Cmp;
using shlo::isFloat;
using shlo::isSigned;

using Fn1 = std::function<Value(Builder&, Value)>;
using Fn2 = std::function<Value(Builder&, Value, Value)>;

Value cmp(Builder& b, Value x, Value y, Cmp c) { return b.compare(x, y, c); }
Value cmpc(Builder& b, Value x, double v, Cmp c) { return b.compare(x, cst(b, v, x), c); }

// Common broadcast shape of the listed arguments (Python numbers are 0-d).
Shape commonShape(const Context& ctx, const std::vector<size_t>& idx) {
  std::vector<Shape> shapes;
  for (size_t i : idx)
    if (ctx.has(i)) shapes.push_back(argShape(ctx, i));
  return broadcastShapes(shapes);
}

// The listed arguments as Values of dtype t broadcast to their common shape.
std::vector<Value> operands(Context& ctx, const std::vector<size_t>& idx, DType t) {
  Shape shape = commonShape(ctx, idx);
  std::vector<Value> out;
  for (size_t i : idx) out.push_back(operand(ctx, i, t, shape));
  return out;
}

// Computation dtype for a result dtype: half types in f32, bool arithmetic in s64 where the op needs numbers.
DType computeType(DType t) { return accType(t); }

// ---- numeric building blocks ----

Value truncF(Builder& b, Value x) {
  if (!isFloat(x.dtype())) return x;
  return b.select(cmpc(b, x, 0, Cmp::LT), b.ceil(x), b.floor(x));
}

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

// pow with PyTorch's integer semantics for negative exponents (1 -> 1, -1 -> +-1, else 0).
Value powOp(Builder& b, Value x, Value e) {
  if (isFloat(x.dtype())) return b.pow(x, e);
  if (!isSigned(x.dtype())) return b.pow(x, e);
  Value zero = cst(b, 0, x), one = cst(b, 1, x), m1 = cst(b, -1, x);
  Value p = b.pow(x, b.max(e, zero));
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

Value sigmoidF(Builder& b, Value x) {  // 1 / (1 + exp(-x)), as PyTorch CPU
  Value one = cst(b, 1, x);
  return b.div(one, b.add(one, b.exp(b.neg(x))));
}

Value geluF(Builder& b, Value x, const std::string& approximate) {
  Value half = cst(b, 0.5, x), one = cst(b, 1, x);
  if (approximate == "tanh") {
    const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715;
    Value cube = b.mul(b.mul(x, x), x);
    Value inner = b.mul(cst(b, kBeta, x), b.add(x, b.mul(cst(b, kKappa, x), cube)));
    return b.mul(b.mul(half, x), b.add(one, b.tanh(inner)));
  }
  return b.mul(b.mul(x, half), b.add(one, b.chlo("erf", b.mul(x, cst(b, M_SQRT1_2, x)))));
}

Value geluBackwardF(Builder& b, Value g, Value x, const std::string& approximate) {
  Value half = cst(b, 0.5, x), one = cst(b, 1, x);
  if (approximate == "tanh") {
    const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715;
    Value x_sq = b.mul(x, x);
    Value x_cube = b.mul(x_sq, x);
    Value inner = b.mul(cst(b, kBeta, x), b.add(x, b.mul(cst(b, kKappa, x), x_cube)));
    Value t = b.tanh(inner);
    Value left = b.mul(half, x);
    Value right = b.add(one, t);
    Value left_d = b.mul(half, right);
    Value tanh_d = b.sub(one, b.mul(t, t));
    Value inner_d = b.mul(cst(b, kBeta, x), b.add(one, b.mul(cst(b, 3 * kKappa, x), x_sq)));
    Value right_d = b.mul(b.mul(left, tanh_d), inner_d);
    return b.mul(g, b.add(left_d, right_d));
  }
  const double kAlpha = M_SQRT1_2, kBeta = M_2_SQRTPI * M_SQRT1_2 * 0.5;
  Value cdf = b.mul(half, b.add(one, b.chlo("erf", b.mul(x, cst(b, kAlpha, x)))));
  Value pdf = b.mul(b.exp(b.mul(cst(b, -0.5, x), b.mul(x, x))), cst(b, kBeta, x));
  return b.mul(g, b.add(cdf, b.mul(x, pdf)));
}

Value clampOp(Builder& b, Value x, const Value* lo, const Value* hi) {
  if (lo) x = nanMax(b, x, *lo);
  if (hi) x = nanMin(b, x, *hi);
  return x;
}

double maxFinite(DType t) {
  switch (t) {
    case DType::F16: return 65504.0;
    case DType::BF16: return 3.3895313892515355e38;
    case DType::F32: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

// Hurwitz zeta(x, q) as PyTorch CPU computes it (Cephes: a direct sum until a > 9, then Euler-Maclaurin), with the
// loops unrolled under "done" masks (the direct sum runs at most 30 terms: exact for q >= -20).
Value zetaCephes(Builder& b, Value x, Value q) {
  static const double A[] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
                             7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
                             -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18};
  const double kMachep = 1.11022302462515654042E-16;
  Value one = cst(b, 1, x), zero = cst(b, 0, x), nine = cst(b, 9, x), eps = cst(b, kMachep, x);
  Value negx = b.neg(x);
  Value s = b.pow(q, negx), a = q, bb = b.zerosLike(x);
  Value done = b.constantF(0, DType::Pred, x.shape());
  for (int it = 1; it <= 30; ++it) {
    Value cont = b.notOp(done);
    if (it > 9) cont = b.andOp(cont, b.compare(a, nine, Cmp::LE));
    Value an = b.add(a, one), bn = b.pow(an, negx), sn = b.add(s, bn);
    a = b.select(cont, an, a);
    bb = b.select(cont, bn, bb);
    s = b.select(cont, sn, s);
    Value conv = b.andOp(b.compare(b.neg(b.mul(eps, sn)), bn, Cmp::LT), b.compare(bn, b.mul(eps, sn), Cmp::LT));
    done = b.orOp(done, b.andOp(cont, conv));
  }
  Value w = a;
  Value st = b.sub(b.add(s, b.div(b.mul(bb, w), b.sub(x, one))), b.mul(cst(b, 0.5, x), bb));
  s = b.select(done, s, st);
  Value aa = one, k = zero;
  for (int i = 0; i < 12; ++i) {
    aa = b.mul(aa, b.add(x, k));
    bb = b.div(bb, w);
    Value t = b.div(b.mul(aa, bb), cst(b, A[i], x));
    Value sn = b.add(s, t);
    s = b.select(done, s, sn);
    done = b.orOp(done, b.compare(b.abs(b.div(t, sn)), eps, Cmp::LT));
    k = b.add(k, one);
    aa = b.mul(aa, b.add(x, k));
    bb = b.div(bb, w);
    k = b.add(k, one);
  }
  Value inf = cst(b, INFINITY, x), nan = cst(b, NAN, x);
  Value qneg = b.compare(q, zero, Cmp::LE);
  s = b.select(b.andOp(qneg, b.compare(x, b.floor(x), Cmp::NE)), nan, s);
  s = b.select(b.andOp(qneg, b.compare(q, b.floor(q), Cmp::EQ)), inf, s);
  s = b.select(b.compare(x, one, Cmp::LT), nan, s);
  return b.select(b.compare(x, one, Cmp::EQ), inf, s);
}

// Orthogonal polynomials of PyTorch's special_* family, evaluated like PyTorch CPU: the three-term recurrence
// (unrolled to degree kMaxDegree, the result picked at n = trunc(degree argument)), with PyTorch's special cases
// and trigonometric forms for high degrees inside (-1, 1).
constexpr int kMaxDegree = 40;
enum class Poly { T, U, V, W, H, He, L, P, ST, SU, SV, SW };

Value orthoPoly(Builder& b, Value x, Value n, Poly kind) {
  Value one = cst(b, 1, x), two = cst(b, 2, x), zero = cst(b, 0, x);
  auto c = [&](double v) { return cst(b, v, x); };
  bool shifted = kind == Poly::ST || kind == Poly::SU || kind == Poly::SV || kind == Poly::SW;
  Value y = shifted ? b.sub(b.add(x, x), one) : x;  // the Chebyshev argument
  Value q1;
  switch (kind) {
    case Poly::T: case Poly::ST: case Poly::He: case Poly::P: q1 = y; break;
    case Poly::U: case Poly::SU: case Poly::H: q1 = b.add(y, y); break;
    case Poly::V: case Poly::SV: q1 = b.sub(b.add(y, y), one); break;
    case Poly::W: case Poly::SW: q1 = b.add(b.add(y, y), one); break;
    case Poly::L: q1 = b.sub(one, x); break;
  }
  Value p = b.onesLike(x), q = q1;
  Value res = b.select(b.compare(n, zero, Cmp::EQ), one, b.zerosLike(x));
  res = b.select(b.compare(n, one, Cmp::EQ), q1, res);
  for (int m = 1; m < kMaxDegree; ++m) {
    Value r;
    switch (kind) {
      case Poly::H: r = b.sub(b.mul(b.add(x, x), q), b.mul(c(2.0 * m), p)); break;
      case Poly::He: r = b.sub(b.mul(x, q), b.mul(c(m), p)); break;
      case Poly::L: r = b.div(b.sub(b.mul(b.add(c(2.0 * m), b.sub(one, x)), q), b.mul(c(m), p)), c(m + 1)); break;
      case Poly::P: r = b.div(b.sub(b.mul(b.mul(c(2.0 * m + 1), x), q), b.mul(c(m), p)), c(m + 1)); break;
      default: r = b.sub(b.mul(b.add(y, y), q), p); break;
    }
    p = q;
    q = r;
    res = b.select(b.compare(n, c(m + 1), Cmp::EQ), q, res);
  }
  auto eq = [&](Value a, double v) { return b.compare(a, c(v), Cmp::EQ); };
  Value even = b.compare(b.rem(n, two), zero, Cmp::EQ);
  Value ay = b.abs(y);
  Value inside = b.compare(ay, one, Cmp::LT);
  Value th = b.chlo("acos", y);
  Value np1 = b.add(n, one), n2p1 = b.add(b.add(n, n), one);
  auto sgn = [&](Value v) { return b.select(even, v, b.neg(v)); };
  switch (kind) {
    case Poly::T: case Poly::ST: {
      Value trig = b.cos(b.mul(n, th));
      res = b.select(b.andOp(b.compare(n, c(6), Cmp::GT), inside), trig, res);
      if (kind == Poly::T) res = b.select(eq(ay, 1), b.select(b.orOp(b.compare(x, zero, Cmp::GT), even), one, b.neg(one)), res);
      else {
        res = b.select(eq(x, 0), sgn(one), res);
        res = b.select(eq(x, 1), one, res);
      }
      break;
    }
    case Poly::U: case Poly::SU: {
      Value st = b.sin(th);
      Value trig = b.select(b.compare(st, zero, Cmp::NE), b.div(b.sin(b.mul(np1, th)), st),
                            b.div(b.mul(np1, b.cos(b.mul(np1, th))), y));
      res = b.select(b.andOp(b.compare(n, c(kind == Poly::U ? 8 : 6), Cmp::GT), inside), trig, res);
      if (kind == Poly::U) res = b.select(eq(ay, 1), b.select(b.orOp(b.compare(x, zero, Cmp::GT), even), np1, b.neg(np1)), res);
      else {
        res = b.select(eq(x, 0), sgn(np1), res);
        res = b.select(eq(x, 1), np1, res);
      }
      break;
    }
    case Poly::V: case Poly::SV: {
      Value half = b.div(th, two);
      Value trig = b.select(b.compare(b.sin(half), one, Cmp::NE), b.div(b.cos(b.mul(b.add(n, c(0.5)), th)), b.cos(half)),
                            sgn(n2p1));
      res = b.select(b.andOp(b.compare(n, c(kind == Poly::V ? 8 : 6), Cmp::GT), inside), trig, res);
      if (kind == Poly::V) res = b.select(eq(ay, 1), b.select(b.compare(x, zero, Cmp::GT), one, sgn(n2p1)), res);
      else {
        res = b.select(eq(x, 0), sgn(n2p1), res);
        res = b.select(eq(x, 1), one, res);
      }
      break;
    }
    case Poly::W: case Poly::SW: {
      Value half = b.div(th, two);
      Value edge = kind == Poly::W ? b.select(b.compare(x, zero, Cmp::GT), n2p1, sgn(one)) : sgn(one);
      Value trig = b.select(b.compare(b.cos(half), one, Cmp::NE), b.div(b.sin(b.mul(b.add(n, c(0.5)), th)), b.sin(half)),
                            edge);
      res = b.select(b.andOp(b.compare(n, c(kind == Poly::W ? 8 : 4), Cmp::GT), inside), trig, res);
      if (kind == Poly::W) res = b.select(eq(ay, 1), b.select(b.compare(x, zero, Cmp::GT), n2p1, sgn(one)), res);
      else {
        res = b.select(eq(x, 0), sgn(one), res);
        res = b.select(eq(x, 1), n2p1, res);
      }
      break;
    }
    case Poly::L: res = b.select(eq(b.abs(x), 0), one, res); break;
    case Poly::P:
      res = b.select(eq(ay, 1), b.select(b.orOp(b.orOp(b.compare(x, zero, Cmp::GT), eq(n, 0)), even), one, b.neg(one)), res);
      break;
    default: break;
  }
  return b.select(b.compare(n, zero, Cmp::LT), b.zerosLike(x), res);
}

// ---- registration helpers ----

// Ops PyTorch rejects for bool operands: declined so that CPU raises PyTorch's own error.
bool rejectsBool(const std::string& op) {
  static const char* kOps[] = {"neg", "abs", "floor", "ceil", "round", "trunc", "frac", "relu", "sub.Tensor",
                               "sub.Scalar", "rsub.Tensor", "rsub.Scalar", "remainder.Tensor", "remainder.Scalar",
                               "remainder.Scalar_Tensor", "fmod.Tensor", "fmod.Scalar", "floor_divide",
                               "floor_divide.Scalar", "pow.Tensor_Tensor", "pow.Tensor_Scalar", "pow.Scalar", "hypot",
                               "logaddexp", "div.Tensor_mode", "div.Scalar_mode", "round.decimals", "addcmul",
                               "clamp", "clamp.Tensor", "clamp_min", "clamp_min.Tensor", "clamp_max",
                               "clamp_max.Tensor"};
  for (const char* k : kOps)
    if (op == std::string("aten::") + k) return true;
  return false;
}

// Ops PyTorch CPU implements for floating dtypes only (integer and bool operands raise NotImplementedError there):
// declined for those, so that CPU raises.
bool rejectsIntegral(const std::string& op) {
  static const char* kOps[] = {"frac", "nextafter", "lerp.Scalar", "lerp.Tensor", "hardswish", "hardsigmoid",
                               "sigmoid_backward", "tanh_backward", "hardsigmoid_backward", "hardswish_backward",
                               "logaddexp", "logaddexp2"};
  for (const char* k : kOps)
    if (op == std::string("aten::") + k) return true;
  return false;
}

// A bool alpha with a non-bool result: PyTorch raises "Boolean alpha only supported for Boolean results".
bool boolAlphaMismatch(const Context& ctx, DType promoted) {
  for (size_t i = 0; i < ctx.args.size(); ++i)
    if (ctx.args[i].name == "alpha" && ctx.args[i].kind == Arg::Kind::Scalar &&
        ctx.args[i].scalar.kind == HostScalar::Kind::Bool && promoted != DType::Pred)
      return true;
  return false;
}

// The dtype an elementwise call computes in: the promoted type of its first two operands.
DType promotedOf(const Context& ctx) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < 2 && i < ctx.args.size(); ++i)
    if (ctx.args[i].kind == Arg::Kind::Tensor || ctx.args[i].kind == Arg::Kind::Scalar) idx.push_back(i);
  return resultTypeOf(ctx, idx);
}

// Registers an elementwise rule: declines complex dtypes, and bool operands for ops PyTorch rejects them for
// (except div.*_mode with no rounding mode, which is true division).
void addEw(Registry& r, const std::string& op, RuleFn fn) {
  Rule rule;
  rule.op = op;
  rule.fn = std::move(fn);
  bool no_bool = rejectsBool(op);
  bool no_int = rejectsIntegral(op);
  bool div_mode = op.find("_mode") != std::string::npos;
  bool same_dtypes = op == "aten::heaviside";  // "heaviside is not yet implemented for tensors with different dtypes"
  rule.accepts = [no_bool, no_int, div_mode, same_dtypes](const Context& ctx) {
    if (!realDTypes(ctx)) return false;
    DType promoted = promotedOf(ctx);
    if (no_int && !isFloat(promoted)) return false;
    if (boolAlphaMismatch(ctx, promoted)) return false;
    if (same_dtypes && ctx.has(1) && ctx.args[1].kind == Arg::Kind::Tensor &&
        ctx.tensor(0).dtype() != ctx.tensor(1).dtype())
      return false;
    if (!no_bool || promoted != DType::Pred) return true;
    return div_mode && !ctx.has(2);
  };
  r.add(std::move(rule));
}

// Unary op on a tensor whose result keeps the input dtype (neg, abs, floor, relu, ...). fn sees accType values.
void unarySame(Registry& r, const std::string& op, Fn1 fn) {
  addEw(r, op, [fn](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    return {inAcc(ctx.b, x, x.dtype(), [&](Value v) { return fn(ctx.b, v); })};
  });
}

// Unary op with a floating result (exp, sin, sigmoid, ...): integer/bool inputs become float32 first.
void unaryFloat(Registry& r, const std::string& op, Fn1 fn) {
  addEw(r, op, [fn](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    DType out = toFloat(x.dtype());
    Value v = ctx.b.convert(x, accType(out));
    return {ctx.b.convert(fn(ctx.b, v), out)};
  });
}

// Unary predicate (isnan, logical_not, ...): fn sees the input in its own dtype and returns pred.
void unaryPred(Registry& r, const std::string& op, Fn1 fn) {
  addEw(r, op, [fn](Context& ctx) -> std::vector<Value> { return {fn(ctx.b, ctx.tensor(0))}; });
}

// Binary op on args (0, 1) computed in the promoted dtype T (accType for halves), result T.
// `float_result`: integer promotion gives float32 (true division, atan2).
void binary(Registry& r, const std::string& op, Fn2 fn, bool float_result = false) {
  addEw(r, op, [fn, float_result](Context& ctx) -> std::vector<Value> {
    DType t = resultTypeOf(ctx, {0, 1});
    if (float_result) t = toFloat(t);
    DType c = computeType(t);
    auto v = operands(ctx, {0, 1}, c);
    return {ctx.b.convert(fn(ctx.b, v[0], v[1]), t)};
  });
}

// Arithmetic with alpha (add/sub/rsub): fn(a, b) with b already scaled by alpha (args 0, 1, alpha 2).
void binaryAlpha(Registry& r, const std::string& op, bool reversed, bool subtract) {
  addEw(r, op, [reversed, subtract](Context& ctx) -> std::vector<Value> {
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
  });
}

// Comparison of args (0, 1) in their promoted dtype; result pred.
void comparison(Registry& r, const std::string& op, Cmp c) {
  addEw(r, op, [c](Context& ctx) -> std::vector<Value> {
    DType t = resultTypeOf(ctx, {0, 1});
    auto v = operands(ctx, {0, 1}, t);
    return {ctx.b.compare(v[0], v[1], c)};
  });
}

// Bitwise/logical-integer op: only bool and integer dtypes (floats decline and fall back to CPU, which raises).
void bitwise(Registry& r, const std::string& op, Fn2 fn) {
  Rule rule;
  rule.op = op;
  rule.fn = [fn](Context& ctx) -> std::vector<Value> {
    DType t = resultTypeOf(ctx, {0, 1});
    auto v = operands(ctx, {0, 1}, t);
    return {fn(ctx.b, v[0], v[1])};
  };
  rule.accepts = [](const Context& ctx) { return realDTypes(ctx) && !isFloat(resultTypeOf(ctx, {0, 1})); };
  r.add(std::move(rule));
}

// Logical op: operands compared with zero, result pred.
void logical(Registry& r, const std::string& op, Fn2 fn) {
  addEw(r, op, [fn](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Shape shape = commonShape(ctx, {0, 1});
    auto nz = [&](size_t i) {
      Value x = b.broadcastTo(ctx.tensor(i), shape);
      return x.dtype() == DType::Pred ? x : b.compare(x, b.zerosLike(x), Cmp::NE);
    };
    return {fn(b, nz(0), nz(1))};
  });
}

// Backward-style op of (grad, x) computed in the promoted float type: fn(g, x) with extra scalar args fetched by fn.
using FnCtx = std::function<Value(Context&, DType /*compute*/, Value /*g*/, Value /*x*/)>;
void gradOp(Registry& r, const std::string& op, size_t gi, size_t xi, FnCtx fn) {
  addEw(r, op, [fn, gi, xi](Context& ctx) -> std::vector<Value> {
    DType t = resultTypeOf(ctx, {gi, xi});
    DType c = computeType(t);
    auto v = operands(ctx, {gi, xi}, c);
    return {ctx.b.convert(fn(ctx, c, v[0], v[1]), t)};
  });
}

}  // namespace

void populateElementwise(Registry& r) {
  // ---- arithmetic ----
  binaryAlpha(r, "aten::add.Tensor", false, false);
  binaryAlpha(r, "aten::add.Scalar", false, false);
  binaryAlpha(r, "aten::sub.Tensor", false, true);
  binaryAlpha(r, "aten::sub.Scalar", false, true);
  binaryAlpha(r, "aten::rsub.Tensor", true, true);
  binaryAlpha(r, "aten::rsub.Scalar", true, true);
  Fn2 mul = [](Builder& b, Value x, Value y) { return x.dtype() == DType::Pred ? b.andOp(x, y) : b.mul(x, y); };
  binary(r, "aten::mul.Tensor", mul);
  binary(r, "aten::mul.Scalar", mul);
  Fn2 div = [](Builder& b, Value x, Value y) { return b.div(x, y); };
  binary(r, "aten::div.Tensor", div, /*float_result=*/true);
  binary(r, "aten::div.Scalar", div, true);
  auto divMode = [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    std::string mode = ctx.has(2) ? ctx.arg(2).s : "";
    DType t = resultTypeOf(ctx, {0, 1});
    if (mode.empty()) t = toFloat(t);
    else if (mode != "trunc" && mode != "floor") ctx.fail("unknown rounding_mode '" + mode + "'");
    DType c = t == DType::Pred ? DType::S64 : computeType(t);
    auto v = operands(ctx, {0, 1}, c);
    Value q = mode.empty() ? b.div(v[0], v[1]) : mode == "trunc" ? divTrunc(b, v[0], v[1]) : divFloor(b, v[0], v[1]);
    return {b.convert(q, t)};
  };
  addEw(r, "aten::div.Tensor_mode", divMode);
  addEw(r, "aten::div.Scalar_mode", divMode);
  Fn2 floordiv = [](Builder& b, Value x, Value y) {
    if (x.dtype() == DType::Pred) return b.convert(divFloor(b, b.convert(x, DType::S64), b.convert(y, DType::S64)), DType::Pred);
    return divFloor(b, x, y);
  };
  binary(r, "aten::floor_divide", floordiv);
  binary(r, "aten::floor_divide.Scalar", floordiv);
  Fn2 remainder = [](Builder& b, Value x, Value y) { return remainderOp(b, x, y); };
  binary(r, "aten::remainder.Tensor", remainder);
  binary(r, "aten::remainder.Scalar", remainder);
  binary(r, "aten::remainder.Scalar_Tensor", remainder);
  Fn2 fmod = [](Builder& b, Value x, Value y) { return b.rem(x, y); };
  binary(r, "aten::fmod.Tensor", fmod);
  binary(r, "aten::fmod.Scalar", fmod);
  Fn2 pow = [](Builder& b, Value x, Value y) {
    if (x.dtype() == DType::Pred) return b.convert(powOp(b, b.convert(x, DType::S64), b.convert(y, DType::S64)), DType::Pred);
    return powOp(b, x, y);
  };
  binary(r, "aten::pow.Tensor_Tensor", pow);
  binary(r, "aten::pow.Tensor_Scalar", pow);
  binary(r, "aten::pow.Scalar", pow);
  binary(r, "aten::maximum", [](Builder& b, Value x, Value y) { return nanMax(b, x, y); });
  binary(r, "aten::minimum", [](Builder& b, Value x, Value y) { return nanMin(b, x, y); });
  binary(r, "aten::fmax", [](Builder& b, Value x, Value y) {  // NaN only if both are NaN
    Value m = b.max(x, y);
    if (!isFloat(x.dtype())) return m;
    return b.select(isNan(b, x), y, b.select(isNan(b, y), x, m));
  });
  binary(r, "aten::fmin", [](Builder& b, Value x, Value y) {
    Value m = b.min(x, y);
    if (!isFloat(x.dtype())) return m;
    return b.select(isNan(b, x), y, b.select(isNan(b, y), x, m));
  });
  binary(r, "aten::atan2", [](Builder& b, Value x, Value y) { return b.atan2(x, y); }, true);
  binary(r, "aten::hypot", [](Builder& b, Value x, Value y) { return b.sqrt(b.add(b.mul(x, x), b.mul(y, y))); });
  binary(r, "aten::copysign.Tensor", [](Builder& b, Value x, Value y) {
    // |x| with the sign bit of y: select on y's sign bit (-0.0 counts as negative).
    Value ax = b.abs(x);
    DType it = shlo::bitWidth(y.dtype()) == 64 ? DType::S64 : shlo::bitWidth(y.dtype()) == 32 ? DType::S32 : DType::S16;
    Value neg = b.compare(b.bitcastConvert(y, it), b.zerosLike(b.bitcastConvert(y, it)), Cmp::LT);
    return b.select(neg, b.neg(ax), ax);
  }, true);
  binary(r, "aten::xlogy.Tensor", [](Builder& b, Value x, Value y) {
    Value zero = cst(b, 0, x);
    Value res = b.select(b.compare(x, zero, Cmp::EQ), zero, b.mul(x, b.log(y)));
    return b.select(isNan(b, y), y, res);
  }, true);
  binary(r, "aten::logaddexp", [](Builder& b, Value x, Value y) {
    Value m = b.max(x, y);
    Value res = b.add(m, b.log1p(b.exp(b.neg(b.abs(b.sub(x, y))))));
    // equal infinities: x - y is NaN; the answer is that infinity
    Value same_inf = b.andOp(b.compare(x, y, Cmp::EQ), b.compare(b.abs(x), cst(b, INFINITY, x), Cmp::EQ));
    return b.select(same_inf, x, res);
  }, true);

  binary(r, "aten::logaddexp2", [](Builder& b, Value x, Value y) {
    Value m = b.max(x, y);
    Value d = b.neg(b.abs(b.sub(x, y)));
    Value res = b.add(m, b.div(b.log1p(b.pow(cst(b, 2, x), d)), cst(b, M_LN2, x)));
    Value same_inf = b.andOp(b.compare(x, y, Cmp::EQ), b.compare(b.abs(x), cst(b, INFINITY, x), Cmp::EQ));
    return b.select(same_inf, x, res);
  }, true);
  binary(r, "aten::heaviside", [](Builder& b, Value x, Value v) {
    Value zero = cst(b, 0, x);
    Value pos = b.select(b.compare(x, zero, Cmp::GT), cst(b, 1, x), zero);
    return b.select(b.compare(x, zero, Cmp::EQ), v, b.select(isNan(b, x), x, pos));
  });
  // shifts: shift counts outside [0, bits) give 0 (left) or the sign fill (right), as stablehlo does.
  for (const char* ov : {".Tensor", ".Tensor_Scalar", ".Scalar_Tensor"}) {
    bitwise(r, std::string("aten::bitwise_left_shift") + ov, [](Builder& b, Value x, Value y) {
      return b.shiftLeft(x, y);
    });
    bitwise(r, std::string("aten::bitwise_right_shift") + ov, [](Builder& b, Value x, Value y) {
      return isSigned(x.dtype()) ? b.shiftRightArithmetic(x, y) : b.shiftRightLogical(x, y);
    });
  }

  // nextafter(self, other): the next representable float from self toward other (bit arithmetic).
  binary(r, "aten::nextafter", [](Builder& b, Value x, Value y) {
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
  });

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
    Rule rule;
    rule.op = op;
    rule.fn = [gcdOp, lcm](Context& ctx) -> std::vector<Value> {
      DType t = resultTypeOf(ctx, {0, 1});
      auto v = operands(ctx, {0, 1}, t);
      Builder& b = ctx.b;
      Value g = gcdOp(b, v[0], v[1]);
      if (!lcm) return {g};
      Value zero = b.zerosLike(g);
      Value safe = b.select(b.compare(g, zero, Cmp::EQ), b.onesLike(g), g);
      Value l = b.abs(b.mul(b.div(v[0], safe), v[1]));
      return {b.select(b.compare(g, zero, Cmp::EQ), zero, l)};
    };
    rule.accepts = [](const Context& ctx) {
      DType t = resultTypeOf(ctx, {0, 1});
      return realDTypes(ctx) && shlo::isInteger(t);
    };
    r.add(std::move(rule));
  }

  // ---- bitwise / logical ----
  bitwise(r, "aten::bitwise_and.Tensor", [](Builder& b, Value x, Value y) { return b.andOp(x, y); });
  bitwise(r, "aten::bitwise_and.Scalar", [](Builder& b, Value x, Value y) { return b.andOp(x, y); });
  bitwise(r, "aten::bitwise_or.Tensor", [](Builder& b, Value x, Value y) { return b.orOp(x, y); });
  bitwise(r, "aten::bitwise_or.Scalar", [](Builder& b, Value x, Value y) { return b.orOp(x, y); });
  bitwise(r, "aten::bitwise_xor.Tensor", [](Builder& b, Value x, Value y) { return b.xorOp(x, y); });
  bitwise(r, "aten::bitwise_xor.Scalar", [](Builder& b, Value x, Value y) { return b.xorOp(x, y); });
  {
    Rule rule;
    rule.op = "aten::bitwise_not";
    rule.fn = [](Context& ctx) -> std::vector<Value> { return {ctx.b.notOp(ctx.tensor(0))}; };
    rule.accepts = [](const Context& ctx) { return realDTypes(ctx) && !isFloat(ctx.tensor(0).dtype()); };
    r.add(std::move(rule));
  }
  logical(r, "aten::logical_and", [](Builder& b, Value x, Value y) { return b.andOp(x, y); });
  logical(r, "aten::logical_or", [](Builder& b, Value x, Value y) { return b.orOp(x, y); });
  logical(r, "aten::logical_xor", [](Builder& b, Value x, Value y) { return b.xorOp(x, y); });
  unaryPred(r, "aten::logical_not", [](Builder& b, Value x) {
    return x.dtype() == DType::Pred ? b.notOp(x) : b.compare(x, b.zerosLike(x), Cmp::EQ);
  });

  // ---- comparisons ----
  const std::pair<const char*, Cmp> cmps[] = {{"eq", Cmp::EQ}, {"ne", Cmp::NE}, {"lt", Cmp::LT},
                                              {"le", Cmp::LE}, {"gt", Cmp::GT}, {"ge", Cmp::GE}};
  for (auto& [name, c] : cmps) {
    comparison(r, std::string("aten::") + name + ".Tensor", c);
    comparison(r, std::string("aten::") + name + ".Scalar", c);
  }
  unaryPred(r, "aten::isnan", [](Builder& b, Value x) { return isNan(b, x); });
  unaryPred(r, "aten::isinf", [](Builder& b, Value x) {
    if (!isFloat(x.dtype())) return b.constantF(0, DType::Pred, x.shape());
    return b.compare(b.abs(x), cst(b, INFINITY, x), Cmp::EQ);
  });
  unaryPred(r, "aten::isposinf", [](Builder& b, Value x) {
    if (!isFloat(x.dtype())) return b.constantF(0, DType::Pred, x.shape());
    return b.compare(x, cst(b, INFINITY, x), Cmp::EQ);
  });
  unaryPred(r, "aten::isneginf", [](Builder& b, Value x) {
    if (!isFloat(x.dtype())) return b.constantF(0, DType::Pred, x.shape());
    return b.compare(x, cst(b, -INFINITY, x), Cmp::EQ);
  });

  // ---- selection ----
  addEw(r, "aten::where.self", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = resultTypeOf(ctx, {1, 2});
    Shape shape = commonShape(ctx, {0, 1, 2});
    Value cond = b.broadcastTo(ctx.tensor(0), shape);
    if (cond.dtype() != DType::Pred) cond = b.compare(cond, b.zerosLike(cond), Cmp::NE);
    return {b.select(cond, operand(ctx, 1, t, shape), operand(ctx, 2, t, shape))};
  });
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
  addEw(r, "aten::clamp", clampRule);
  addEw(r, "aten::clamp.Tensor", clampRule);
  binary(r, "aten::clamp_min", [](Builder& b, Value x, Value y) { return nanMax(b, x, y); });
  binary(r, "aten::clamp_min.Tensor", [](Builder& b, Value x, Value y) { return nanMax(b, x, y); });
  binary(r, "aten::clamp_max", [](Builder& b, Value x, Value y) { return nanMin(b, x, y); });
  binary(r, "aten::clamp_max.Tensor", [](Builder& b, Value x, Value y) { return nanMin(b, x, y); });
  auto maskedFill = [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0);
    Shape shape = commonShape(ctx, {0, 1});
    Value mask = b.broadcastTo(ctx.tensor(1), shape);
    if (mask.dtype() != DType::Pred) mask = b.compare(mask, b.zerosLike(mask), Cmp::NE);
    Value v = b.broadcastTo(scalarArg(ctx, 2, self.dtype()), shape);
    return {b.select(mask, v, b.broadcastTo(self, shape))};
  };
  addEw(r, "aten::masked_fill.Scalar", maskedFill);
  addEw(r, "aten::masked_fill.Tensor", maskedFill);

  // ---- unary, dtype-preserving ----
  unarySame(r, "aten::neg", [](Builder& b, Value x) { return b.neg(x); });
  unarySame(r, "aten::abs", [](Builder& b, Value x) {
    return (x.dtype() == DType::Pred || !isSigned(x.dtype())) ? x : b.abs(x);
  });
  unarySame(r, "aten::sign", signOp);
  unarySame(r, "aten::sgn", signOp);
  unarySame(r, "aten::floor", [](Builder& b, Value x) { return isFloat(x.dtype()) ? b.floor(x) : x; });
  unarySame(r, "aten::ceil", [](Builder& b, Value x) { return isFloat(x.dtype()) ? b.ceil(x) : x; });
  unarySame(r, "aten::round", [](Builder& b, Value x) { return isFloat(x.dtype()) ? b.roundNearestEven(x) : x; });
  unarySame(r, "aten::trunc", truncF);
  unarySame(r, "aten::frac", [](Builder& b, Value x) { return b.sub(x, truncF(b, x)); });
  addEw(r, "aten::round.decimals", [](Context& ctx) -> std::vector<Value> {
    int64_t d = ctx.toInt(1);
    Value x = ctx.tensor(0);
    return {inAcc(ctx.b, x, x.dtype(), [&](Value v) {
      Builder& b = ctx.b;
      if (!isFloat(v.dtype())) return v;
      Value p = cst(b, std::pow(10.0, double(std::llabs(d))), v);
      if (d < 0) return b.mul(b.roundNearestEven(b.div(v, p)), p);
      return b.div(b.roundNearestEven(b.mul(v, p)), p);
    })};
  });
  addEw(r, "aten::nan_to_num", [](Context& ctx) -> std::vector<Value> {
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
  });

  unaryPred(r, "aten::signbit", [](Builder& b, Value x) {
    if (x.dtype() == DType::Pred || !isSigned(x.dtype())) return b.constantF(0, DType::Pred, x.shape());
    if (!isFloat(x.dtype())) return b.compare(x, b.zerosLike(x), Cmp::LT);
    int w = shlo::bitWidth(x.dtype());
    DType it = w == 64 ? DType::S64 : w == 32 ? DType::S32 : DType::S16;
    Value bits = b.bitcastConvert(x, it);
    return b.compare(bits, b.zerosLike(bits), Cmp::LT);
  });
  // angle of a real number: 0 for x >= 0, pi for x < 0, NaN stays NaN.
  unaryFloat(r, "aten::angle", [](Builder& b, Value x) {
    Value res = b.select(b.compare(x, cst(b, 0, x), Cmp::LT), cst(b, M_PI, x), cst(b, 0, x));
    return b.select(isNan(b, x), x, res);
  });
  // frexp(self) -> (mantissa in [0.5, 1), int32 exponent); 0, inf and NaN give (self, 0).
  {
    Rule rule;
    rule.op = "aten::frexp.Tensor";
    rule.accepts = [](const Context& ctx) { return realDTypes(ctx) && isFloat(ctx.tensor(0).dtype()); };
    rule.fn = [](Context& ctx) -> std::vector<Value> {
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
    };
    r.add(std::move(rule));
  }

  // ---- unary, floating result ----
  unaryFloat(r, "aten::exp", [](Builder& b, Value x) { return b.exp(x); });
  unaryFloat(r, "aten::exp2", [](Builder& b, Value x) { return b.pow(cst(b, 2, x), x); });
  unaryFloat(r, "aten::expm1", [](Builder& b, Value x) { return b.expm1(x); });
  unaryFloat(r, "aten::log", [](Builder& b, Value x) { return b.log(x); });
  unaryFloat(r, "aten::log2", [](Builder& b, Value x) { return b.div(b.log(x), cst(b, M_LN2, x)); });
  unaryFloat(r, "aten::log10", [](Builder& b, Value x) { return b.div(b.log(x), cst(b, M_LN10, x)); });
  unaryFloat(r, "aten::log1p", [](Builder& b, Value x) { return b.log1p(x); });
  unaryFloat(r, "aten::sqrt", [](Builder& b, Value x) { return b.sqrt(x); });
  unaryFloat(r, "aten::rsqrt", [](Builder& b, Value x) { return b.rsqrt(x); });
  unaryFloat(r, "aten::reciprocal", [](Builder& b, Value x) { return b.div(cst(b, 1, x), x); });
  unaryFloat(r, "aten::sin", [](Builder& b, Value x) { return b.sin(x); });
  unaryFloat(r, "aten::cos", [](Builder& b, Value x) { return b.cos(x); });
  unaryFloat(r, "aten::tan", [](Builder& b, Value x) { return b.tan(x); });
  unaryFloat(r, "aten::tanh", [](Builder& b, Value x) { return b.tanh(x); });
  unaryFloat(r, "aten::sigmoid", sigmoidF);
  unaryFloat(r, "aten::deg2rad", [](Builder& b, Value x) { return b.mul(x, cst(b, M_PI / 180.0, x)); });
  unaryFloat(r, "aten::rad2deg", [](Builder& b, Value x) { return b.mul(x, cst(b, 180.0 / M_PI, x)); });
  unaryFloat(r, "aten::sinc", [](Builder& b, Value x) {
    Value px = b.mul(x, cst(b, M_PI, x));
    return b.select(b.compare(x, cst(b, 0, x), Cmp::EQ), cst(b, 1, x), b.div(b.sin(px), px));
  });
  // digamma(0) is -inf in PyTorch (CHLO gives NaN at every pole)
  unaryFloat(r, "aten::digamma", [](Builder& b, Value x) {
    return b.select(b.compare(x, cst(b, 0, x), Cmp::EQ), cst(b, -INFINITY, x), b.chlo("digamma", x));
  });
  for (const char* name : {"erf", "erfc", "lgamma", "asin", "acos", "atan", "sinh", "cosh", "asinh",
                           "acosh", "atanh"}) {
    std::string n = name;
    unaryFloat(r, "aten::" + n, [n](Builder& b, Value x) { return b.chlo(n, x); });
  }
  unaryFloat(r, "aten::erfinv", [](Builder& b, Value x) { return b.chlo("erf_inv", x); });
  addEw(r, "aten::logit", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    DType out = toFloat(x.dtype());
    Builder& b = ctx.b;
    Value v = b.convert(x, accType(out));
    if (ctx.has(1)) {
      Value eps = b.broadcastTo(scalarArg(ctx, 1, v.dtype()), v.shape());
      v = b.clamp(eps, v, b.sub(cst(b, 1, v), eps));
    }
    return {b.convert(b.log(b.div(v, b.sub(cst(b, 1, v), v))), out)};
  });

  // ---- special functions (CHLO where XLA has them) ----
  auto chlo2 = [](Builder& b, const std::string& name, Value x, Value y) {
    return b.raw("\"chlo." + name + "\"(" + b.ref(x) + ", " + b.ref(y) + ")",
                 "(" + x.type.str() + ", " + y.type.str() + ") -> " + x.type.str(), x.type);
  };
  // polygamma(int n, Tensor self): n = 0 digamma, n = 1 trigamma (PyTorch CPU's series with reflection below 0.5).
  // Higher orders use PyTorch's Cephes zeta, whose negative-argument behavior XLA's zeta does not share: declined.
  {
    Rule rule;
    rule.op = "aten::polygamma";
    rule.accepts = [](const Context& ctx) { return realDTypes(ctx) && ctx.toInt(0) >= 0; };
    rule.fn = [](Context& ctx) -> std::vector<Value> {
      Builder& b = ctx.b;
      Value x0 = ctx.tensor(1);
      DType out = toFloat(x0.dtype());
      Value x = b.convert(x0, accType(out));
      int64_t n = ctx.toInt(0);
      if (n == 0) return {b.convert(b.chlo("digamma", x), out)};
      if (n >= 2) {  // (-1)^(n+1) n! zeta(n + 1, x)
        double fact = std::exp(std::lgamma(double(n) + 1.0));
        Value z = zetaCephes(b, b.constantF(double(n + 1), x.dtype(), x.shape()), x);
        return {b.convert(b.mul(cst(b, (n % 2 ? 1.0 : -1.0) * fact, x), z), out)};
      }
      Value one = cst(b, 1, x);
      Value refl = b.compare(x, cst(b, 0.5, x), Cmp::LT);
      Value sinpx = b.sin(b.mul(cst(b, M_PI, x), x));
      Value res = b.select(refl, b.neg(b.div(cst(b, M_PI * M_PI, x), b.mul(sinpx, sinpx))), b.zerosLike(x));
      Value y = b.select(refl, b.sub(one, x), x);
      for (int i = 0; i < 6; ++i) {
        res = b.add(res, b.div(one, b.mul(y, y)));
        y = b.add(y, one);
      }
      Value ixx = b.div(one, b.mul(y, y));
      Value poly = b.sub(cst(b, 1.0 / 30, y), b.mul(ixx, cst(b, 1.0 / 42, y)));
      poly = b.sub(cst(b, 1.0 / 6, y), b.mul(ixx, poly));
      Value tail = b.div(b.add(b.add(one, b.div(one, b.mul(cst(b, 2, y), y))), b.mul(ixx, poly)), y);
      res = b.add(res, tail);
      res = b.select(refl, b.neg(res), res);
      return {b.convert(res, out)};
    };
    r.add(std::move(rule));
  }
  for (const char* ov : {"", ".other_scalar", ".self_scalar"}) {
    binary(r, std::string("aten::special_zeta") + ov,
           [](Builder& b, Value x, Value q) { return zetaCephes(b, x, q); }, true);
    binary(r, std::string("aten::special_xlog1py") + ov, [](Builder& b, Value x, Value y) {
      Value zero = cst(b, 0, x);
      Value res = b.select(b.compare(x, zero, Cmp::EQ), zero, b.mul(x, b.log1p(y)));
      return b.select(isNan(b, y), y, res);
    }, true);
  }
  // i0 / i0e: the power series below |x| = 15, the asymptotic expansion above (i0e skips the exp(|x|) factor).
  auto besselI0 = [](Builder& b, Value x, bool scaled) {
    Value ax = b.abs(x);
    Value small = b.min(ax, cst(b, 15, x));
    Value q = b.mul(b.mul(small, small), cst(b, 0.25, x));
    // Horner form: every partial value stays finite (XLA reassociates products with constants, which in the
    // term-by-term form overflows q^k).
    Value sum = b.onesLike(x);
    for (int k = 26; k >= 1; --k) sum = b.add(cst(b, 1, x), b.mul(b.mul(q, cst(b, 1.0 / (double(k) * k), x)), sum));
    if (scaled) sum = b.mul(sum, b.exp(b.neg(small)));
    Value big = b.max(ax, cst(b, 15, x));  // keeps the unused branch finite
    Value inv = b.div(cst(b, 1, x), big);
    Value acc = b.onesLike(x), coef = b.onesLike(x);
    double c = 1;
    for (int k = 1; k <= 8; ++k) {
      c *= double(2 * k - 1) * double(2 * k - 1) / (8.0 * k);
      coef = b.mul(coef, inv);
      acc = b.add(acc, b.mul(cst(b, c, x), coef));
    }
    Value asym = b.div(acc, b.sqrt(b.mul(cst(b, 2 * M_PI, x), big)));
    if (!scaled) asym = b.mul(asym, b.exp(big));
    return b.select(b.compare(ax, cst(b, 15, x), Cmp::LE), sum, asym);
  };
  unaryFloat(r, "aten::i0", [besselI0](Builder& b, Value x) { return besselI0(b, x, false); });
  unaryFloat(r, "aten::special_i0e", [besselI0](Builder& b, Value x) { return besselI0(b, x, true); });
  unaryFloat(r, "aten::special_modified_bessel_i0", [besselI0](Builder& b, Value x) { return besselI0(b, x, false); });
  unaryFloat(r, "aten::special_modified_bessel_i1", [](Builder& b, Value x) {
    return b.mul(b.chlo("bessel_i1e", x), b.exp(b.abs(x)));
  });
  // spherical j0 = sin(x)/x (a Taylor polynomial near 0, as PyTorch)
  unaryFloat(r, "aten::special_spherical_bessel_j0", [](Builder& b, Value x) {
    Value x2 = b.mul(x, x);
    Value series = b.sub(cst(b, 1, x), b.mul(x2, b.sub(cst(b, 1.0 / 6, x), b.mul(x2, b.sub(cst(b, 1.0 / 120, x),
                                                  b.mul(x2, b.sub(cst(b, 1.0 / 5040, x), b.mul(x2, cst(b, 1.0 / 362880, x)))))))));
    Value res = b.select(b.compare(b.abs(x), cst(b, 0.5, x), Cmp::LT), series, b.div(b.sin(x), x));
    return b.select(b.compare(b.abs(x), cst(b, INFINITY, x), Cmp::EQ), b.zerosLike(x), res);
  });
  // erfcx(x) = exp(x^2) erfc(x): directly below 4, the asymptotic series above (where erfc underflows).
  auto erfcx = [](Builder& b, Value x) {
    Value direct = b.mul(b.exp(b.mul(x, x)), b.chlo("erfc", x));
    Value big = b.max(x, cst(b, 4, x));
    Value inv2 = b.div(cst(b, 1, x), b.mul(cst(b, 2, x), b.mul(big, big)));
    Value sum = b.onesLike(x), term = b.onesLike(x);
    for (int k = 1; k <= 10; ++k) {
      term = b.mul(term, b.mul(cst(b, -(2.0 * k - 1), x), inv2));
      sum = b.add(sum, term);
    }
    Value asym = b.div(sum, b.mul(big, cst(b, std::sqrt(M_PI), x)));
    return b.select(b.compare(x, cst(b, 4, x), Cmp::LT), direct, asym);
  };
  unaryFloat(r, "aten::special_erfcx", erfcx);
  // log_ndtr(x) = log(Phi(x)): log1p(-erfc(x/sqrt2)/2) above -1, log(erfcx(-x/sqrt2)/2) - x^2/2 below.
  unaryFloat(r, "aten::special_log_ndtr", [erfcx](Builder& b, Value x) {
    Value t = b.mul(x, cst(b, M_SQRT1_2, x));
    Value hi = b.log1p(b.neg(b.div(b.chlo("erfc", t), cst(b, 2, x))));
    Value lo = b.sub(b.log(b.div(erfcx(b, b.neg(t)), cst(b, 2, x))), b.div(b.mul(x, x), cst(b, 2, x)));
    return b.select(b.compare(x, cst(b, -1, x), Cmp::LT), lo, hi);
  });
  unaryFloat(r, "aten::special_i1e", [](Builder& b, Value x) { return b.chlo("bessel_i1e", x); });
  unaryFloat(r, "aten::special_i1", [](Builder& b, Value x) {
    return b.mul(b.chlo("bessel_i1e", x), b.exp(b.abs(x)));
  });
  unaryFloat(r, "aten::special_entr", [](Builder& b, Value x) {
    Value zero = cst(b, 0, x);
    Value res = b.select(b.compare(x, zero, Cmp::GT), b.neg(b.mul(x, b.log(x))),
                         b.select(b.compare(x, zero, Cmp::EQ), zero, cst(b, -INFINITY, x)));
    return b.select(isNan(b, x), x, res);
  });
  unaryFloat(r, "aten::special_ndtri", [](Builder& b, Value p) {
    return b.mul(cst(b, M_SQRT2, p), b.chlo("erf_inv", b.sub(b.mul(cst(b, 2, p), p), cst(b, 1, p))));
  });

  {
    const std::pair<const char*, Poly> polys[] = {
        {"chebyshev_polynomial_t", Poly::T}, {"chebyshev_polynomial_u", Poly::U},
        {"chebyshev_polynomial_v", Poly::V}, {"chebyshev_polynomial_w", Poly::W},
        {"hermite_polynomial_h", Poly::H}, {"hermite_polynomial_he", Poly::He},
        {"laguerre_polynomial_l", Poly::L}, {"legendre_polynomial_p", Poly::P},
        {"shifted_chebyshev_polynomial_t", Poly::ST}, {"shifted_chebyshev_polynomial_u", Poly::SU},
        {"shifted_chebyshev_polynomial_v", Poly::SV}, {"shifted_chebyshev_polynomial_w", Poly::SW}};
    for (auto& [name, kind] : polys)
      for (const char* ov : {"", ".x_scalar", ".n_scalar"}) {
        Poly k = kind;
        addEw(r, std::string("aten::special_") + name + ov, [k](Context& ctx) -> std::vector<Value> {
          Builder& b = ctx.b;
          DType t = ctx.outputs.at(0).dtype;
          DType c = isFloat(t) ? accType(t) : DType::F64;
          auto v = operands(ctx, {0, 1}, c);
          Value n = isFloat(c) ? truncF(b, v[1]) : v[1];
          return {b.convert(orthoPoly(b, v[0], n, k), t)};
        });
      }
  }

  // ---- activations ----
  unarySame(r, "aten::relu", [](Builder& b, Value x) {
    if (x.dtype() == DType::Pred || !isSigned(x.dtype())) return x;
    return b.select(cmpc(b, x, 0, Cmp::LT), b.zerosLike(x), x);
  });
  addEw(r, "aten::gelu", [](Context& ctx) -> std::vector<Value> {
    std::string approx = ctx.has(1) ? ctx.arg(1).s : "none";
    Value x = ctx.tensor(0);
    return {inAcc(ctx.b, x, x.dtype(), [&](Value v) { return geluF(ctx.b, v, approx); })};
  });
  unarySame(r, "aten::silu", [](Builder& b, Value x) { return b.div(x, b.add(cst(b, 1, x), b.exp(b.neg(x)))); });
  unarySame(r, "aten::mish", [](Builder& b, Value x) { return b.mul(x, b.tanh(b.log1p(b.exp(x)))); });
  unarySame(r, "aten::hardsigmoid", [](Builder& b, Value x) {
    return b.div(b.clamp(cst(b, 0, x), b.add(x, cst(b, 3, x)), cst(b, 6, x)), cst(b, 6, x));
  });
  unarySame(r, "aten::hardswish", [](Builder& b, Value x) {
    return b.div(b.mul(x, b.clamp(cst(b, 0, x), b.add(x, cst(b, 3, x)), cst(b, 6, x))), cst(b, 6, x));
  });
  auto selfScalars = [](Registry& r, const std::string& op,
                        std::function<Value(Builder&, Value, const std::vector<Value>&)> fn, size_t nscalars) {
    addEw(r, op, [fn, nscalars](Context& ctx) -> std::vector<Value> {
      Value x = ctx.tensor(0);
      DType c = computeType(x.dtype());
      std::vector<Value> s;
      for (size_t i = 1; i <= nscalars; ++i) s.push_back(operand(ctx, i, c, x.shape()));
      return {ctx.b.convert(fn(ctx.b, ctx.b.convert(x, c), s), x.dtype())};
    });
  };
  selfScalars(r, "aten::leaky_relu", [](Builder& b, Value x, const std::vector<Value>& s) {
    return b.select(cmpc(b, x, 0, Cmp::GT), x, b.mul(x, s[0]));
  }, 1);
  selfScalars(r, "aten::hardtanh", [](Builder& b, Value x, const std::vector<Value>& s) {
    return clampOp(b, x, &s[0], &s[1]);
  }, 2);
  selfScalars(r, "aten::threshold", [](Builder& b, Value x, const std::vector<Value>& s) {
    return b.select(b.compare(x, s[0], Cmp::LE), s[1], x);
  }, 2);
  selfScalars(r, "aten::elu", [](Builder& b, Value x, const std::vector<Value>& s) {
    // alpha s[0], scale s[1], input_scale s[2]
    Value neg = b.mul(b.expm1(b.mul(x, s[2])), b.mul(s[0], s[1]));
    return b.select(cmpc(b, x, 0, Cmp::LE), neg, b.mul(x, s[1]));
  }, 3);
  selfScalars(r, "aten::softplus", [](Builder& b, Value x, const std::vector<Value>& s) {
    Value xb = b.mul(x, s[0]);
    return b.select(b.compare(xb, s[1], Cmp::GT), x, b.div(b.log1p(b.exp(xb)), s[0]));
  }, 2);

  selfScalars(r, "aten::softshrink", [](Builder& b, Value x, const std::vector<Value>& s) {
    Value l = s[0];
    Value res = b.select(b.compare(x, l, Cmp::GT), b.sub(x, l),
                         b.select(b.compare(x, b.neg(l), Cmp::LT), b.add(x, l), b.zerosLike(x)));
    return b.select(isNan(b, x), x, res);
  }, 1);
  selfScalars(r, "aten::hardshrink", [](Builder& b, Value x, const std::vector<Value>& s) {
    Value l = s[0];
    Value inside = b.andOp(b.compare(x, b.neg(l), Cmp::GE), b.compare(x, l, Cmp::LE));
    return b.select(inside, b.zerosLike(x), x);
  }, 1);
  // _prelu_kernel(self, weight): weight already has a broadcastable shape.
  addEw(r, "aten::_prelu_kernel", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = resultTypeOf(ctx, {0, 1});
    DType c = computeType(t);
    auto v = operands(ctx, {0, 1}, c);
    return {b.convert(b.select(cmpc(b, v[0], 0, Cmp::GT), v[0], b.mul(v[1], v[0])), t)};
  });
  // _prelu_kernel_backward(grad_output, self, weight) -> (grad_input, grad_weight), both in the broadcast shape.
  addEw(r, "aten::_prelu_kernel_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = resultTypeOf(ctx, {1, 2});
    DType c = computeType(t);
    auto v = operands(ctx, {0, 1, 2}, c);
    Value g = v[0], x = v[1], w = v[2];
    Value pos = cmpc(b, x, 0, Cmp::GT);
    Value gi = b.select(pos, g, b.mul(w, g));
    Value gw = b.select(pos, b.zerosLike(g), b.mul(x, g));
    return {b.convert(b.broadcastTo(gi, ctx.outputs.at(0).shape), t), b.convert(b.broadcastTo(gw, ctx.outputs.at(1).shape), t)};
  });

  // ---- activation backward ----
  gradOp(r, "aten::threshold_backward", 0, 1, [](Context& ctx, DType c, Value g, Value x) {
    Value th = operand(ctx, 2, c, x.shape());
    return ctx.b.select(ctx.b.compare(x, th, Cmp::LE), ctx.b.zerosLike(g), g);
  });
  gradOp(r, "aten::gelu_backward", 0, 1, [](Context& ctx, DType, Value g, Value x) {
    return geluBackwardF(ctx.b, g, x, ctx.has(2) ? ctx.arg(2).s : "none");
  });
  gradOp(r, "aten::silu_backward", 0, 1, [](Context& ctx, DType, Value g, Value x) {
    Builder& b = ctx.b;
    Value s = sigmoidF(b, x);
    Value one = cst(b, 1, x);
    return b.mul(g, b.mul(s, b.add(one, b.mul(x, b.sub(one, s)))));
  });
  gradOp(r, "aten::mish_backward", 0, 1, [](Context& ctx, DType, Value g, Value x) {
    Builder& b = ctx.b;
    Value s = sigmoidF(b, x);
    Value t = b.tanh(b.log1p(b.exp(x)));
    Value one = cst(b, 1, x);
    return b.mul(g, b.add(t, b.mul(b.mul(x, s), b.sub(one, b.mul(t, t)))));
  });
  for (const char* op : {"aten::softshrink_backward", "aten::hardshrink_backward"})
    gradOp(r, op, 0, 1, [](Context& ctx, DType c, Value g, Value x) {
      Builder& b = ctx.b;
      Value l = operand(ctx, 2, c, x.shape());
      Value inside = b.andOp(b.compare(x, b.neg(l), Cmp::GE), b.compare(x, l, Cmp::LE));
      return b.select(inside, b.zerosLike(g), g);
    });
  // logit_backward(grad_output, self, eps=None)
  gradOp(r, "aten::logit_backward", 0, 1, [](Context& ctx, DType c, Value g, Value x) {
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
  });
  gradOp(r, "aten::tanh_backward", 0, 1, [](Context& ctx, DType, Value g, Value y) {
    return ctx.b.mul(g, ctx.b.sub(cst(ctx.b, 1, y), ctx.b.mul(y, y)));
  });
  gradOp(r, "aten::sigmoid_backward", 0, 1, [](Context& ctx, DType, Value g, Value y) {
    return ctx.b.mul(ctx.b.mul(g, ctx.b.sub(cst(ctx.b, 1, y), y)), y);
  });
  gradOp(r, "aten::leaky_relu_backward", 0, 1, [](Context& ctx, DType c, Value g, Value x) {
    Value slope = operand(ctx, 2, c, x.shape());
    return ctx.b.select(cmpc(ctx.b, x, 0, Cmp::GT), g, ctx.b.mul(g, slope));
  });
  gradOp(r, "aten::hardtanh_backward", 0, 1, [](Context& ctx, DType c, Value g, Value x) {
    Builder& b = ctx.b;
    Value lo = operand(ctx, 2, c, x.shape()), hi = operand(ctx, 3, c, x.shape());
    Value out = b.orOp(b.compare(x, lo, Cmp::LE), b.compare(x, hi, Cmp::GE));
    return b.select(out, b.zerosLike(g), g);
  });
  gradOp(r, "aten::hardsigmoid_backward", 0, 1, [](Context& ctx, DType, Value g, Value x) {
    Builder& b = ctx.b;
    Value in = b.andOp(cmpc(b, x, -3, Cmp::GT), cmpc(b, x, 3, Cmp::LT));
    return b.select(in, b.div(g, cst(b, 6, g)), b.zerosLike(g));
  });
  gradOp(r, "aten::hardswish_backward", 0, 1, [](Context& ctx, DType, Value g, Value x) {
    Builder& b = ctx.b;
    Value mid = b.mul(g, b.add(b.div(x, cst(b, 3, x)), cst(b, 0.5, x)));
    return b.select(cmpc(b, x, -3, Cmp::LT), b.zerosLike(g), b.select(cmpc(b, x, 3, Cmp::LE), mid, g));
  });
  gradOp(r, "aten::softplus_backward", 0, 1, [](Context& ctx, DType c, Value g, Value x) {
    Builder& b = ctx.b;
    Value beta = operand(ctx, 2, c, x.shape()), th = operand(ctx, 3, c, x.shape());
    Value xb = b.mul(x, beta);
    Value z = b.exp(xb);
    return b.select(b.compare(xb, th, Cmp::GT), g, b.div(b.mul(g, z), b.add(z, cst(b, 1, z))));
  });
  // elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result)
  gradOp(r, "aten::elu_backward", 0, 5, [](Context& ctx, DType c, Value g, Value x) {
    Builder& b = ctx.b;
    Value alpha = operand(ctx, 1, c, x.shape()), scale = operand(ctx, 2, c, x.shape()),
          iscale = operand(ctx, 3, c, x.shape());
    Value negcoef = b.mul(alpha, scale);
    Value neg = ctx.toBool(4) ? b.mul(b.mul(g, iscale), b.add(x, negcoef))
                              : b.mul(b.mul(b.mul(g, iscale), negcoef), b.exp(b.mul(x, iscale)));
    return b.select(cmpc(b, x, 0, Cmp::LE), neg, b.mul(g, scale));
  });

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
  addEw(r, "aten::addcmul", addcRule(false));
  addEw(r, "aten::addcdiv", addcRule(true));
  auto lerpRule = [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = resultTypeOf(ctx, {0, 1});
    DType c = computeType(t);
    auto v = operands(ctx, {0, 1, 2}, c);
    Value self = v[0], end = v[1], w = v[2];
    Value diff = b.sub(end, self);
    Value small = b.compare(b.abs(w), cst(b, 0.5, w), Cmp::LT);
    Value lo = b.add(self, b.mul(w, diff));
    Value hi = b.sub(end, b.mul(diff, b.sub(cst(b, 1, w), w)));
    return {b.convert(b.select(small, lo, hi), t)};
  };
  addEw(r, "aten::lerp.Scalar", lerpRule);
  addEw(r, "aten::lerp.Tensor", lerpRule);
}

}  // namespace torch_tpu::lowering
