// Pieces shared by the pointwise rule families (see pointwise.h).
#include "lowering/pointwise.h"

namespace torch_tpu::lowering {

using shlo::isFloat;

namespace {

// Ops PyTorch rejects for bool operands: declined so that CPU raises PyTorch's own error.
bool rejectsBool(const std::string& op) {
  static const char* kOps[] = {"neg", "abs", "floor", "ceil", "round", "trunc", "frac", "relu", "sub.Tensor",
                               "sub.Scalar", "rsub.Tensor", "rsub.Scalar", "remainder.Tensor", "remainder.Scalar",
                               "remainder.Scalar_Tensor", "fmod.Tensor", "fmod.Scalar", "floor_divide",
                               "floor_divide.Scalar", "pow.Tensor_Tensor", "pow.Tensor_Scalar", "pow.Scalar", "hypot",
                               "logaddexp", "div.Tensor_mode", "div.Scalar_mode", "round.decimals", "addcmul",
                               "clamp", "clamp.Tensor", "clamp_min", "clamp_max"};  // clamp_min/max.Tensor take bools
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

// A bool alpha with a non-bool result: PyTorch raises "Boolean alpha only supported for Boolean results"; a floating
// (or complex) alpha with an integer or bool result: "For integral input tensors, argument alpha must not be a
// floating point number" (CPU's check; the meta kernel lets a bool result pass).
bool boolAlphaMismatch(const Context& ctx, DType promoted) {
  for (const Arg& a : ctx.args) {
    if (a.name != "alpha" || a.kind != Arg::Kind::Scalar) continue;
    if (a.scalar.kind == HostScalar::Kind::Bool && promoted != DType::Pred) return true;
    if ((a.scalar.kind == HostScalar::Kind::Float || a.scalar.kind == HostScalar::Kind::Complex) &&
        !isFloat(promoted) && !shlo::isComplex(promoted) && !shlo::isFloat8(promoted))
      return true;
  }
  return false;
}

// The dtype an elementwise call computes in: the promoted type of its first two operands.
DType promotedOf(const Context& ctx) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < 2 && i < ctx.args.size(); ++i)
    if (ctx.args[i].kind == Arg::Kind::Tensor || ctx.args[i].kind == Arg::Kind::Scalar) idx.push_back(i);
  return resultTypeOf(ctx, idx);
}

}  // namespace

AcceptsFn elementwiseAccepts(const std::string& op) {
  bool no_bool = rejectsBool(op);
  bool no_int = rejectsIntegral(op);
  bool div_mode = op.find("_mode") != std::string::npos;
  bool same_dtypes = op == "aten::heaviside";  // "heaviside is not yet implemented for tensors with different dtypes"
  return [no_bool, no_int, div_mode, same_dtypes](const Context& ctx) {
    // Complex calls reach this only for rows listing kComplex (lowering.h: declineReason).
    DType promoted = promotedOf(ctx);
    if (no_int && !isFloat(promoted) && !shlo::isComplex(promoted)) return false;
    if (boolAlphaMismatch(ctx, promoted)) return false;
    if (same_dtypes && ctx.has(1) && ctx.args[1].kind == Arg::Kind::Tensor &&
        ctx.tensor(0).dtype() != ctx.tensor(1).dtype())
      return false;
    if (!no_bool || promoted != DType::Pred) return true;
    return div_mode && !ctx.has(2);
  };
}

RuleFn unarySame(Fn1 fn) {
  return [fn](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    return {inAcc(ctx.b, x, x.dtype(), [&](Value v) { return fn(ctx.b, v); })};
  };
}

RuleFn unaryFloat(Fn1 fn) {
  return [fn](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    DType out = toFloat(x.dtype());
    Value v = ctx.b.convert(x, accType(out));
    return {ctx.b.convert(fn(ctx.b, v), out)};
  };
}

RuleFn binary(Fn2 fn, bool float_result) {
  return [fn, float_result](Context& ctx) -> std::vector<Value> {
    DType t = resultTypeOf(ctx, {0, 1});
    if (float_result) t = toFloat(t);
    DType c = computeType(t);
    // float8: a Python number is rounded to the float8 type first, as PyTorch's common dtype does
    auto v = operands(ctx, {0, 1}, shlo::isFloat8(t) ? t : c);
    for (Value& x : v) x = ctx.b.convert(x, c);
    return {ctx.b.convert(fn(ctx.b, v[0], v[1]), t)};
  };
}

RuleFn gradOp(size_t gi, size_t xi, FnCtx fn) {
  return [fn, gi, xi](Context& ctx) -> std::vector<Value> {
    DType t = resultTypeOf(ctx, {gi, xi});
    DType c = computeType(t);
    auto v = operands(ctx, {gi, xi}, c);
    return {ctx.b.convert(fn(ctx, c, v[0], v[1]), t)};
  };
}

Shape commonShape(const Context& ctx, const std::vector<size_t>& idx) {
  std::vector<Shape> shapes;
  for (size_t i : idx)
    if (ctx.has(i)) shapes.push_back(argShape(ctx, i));
  return broadcastShapes(shapes);
}

std::vector<Value> operands(Context& ctx, const std::vector<size_t>& idx, DType t) {
  Shape shape = commonShape(ctx, idx);
  std::vector<Value> out;
  for (size_t i : idx) out.push_back(operand(ctx, i, t, shape));
  return out;
}

DType computeType(DType t) { return accType(t); }

Value cmpc(Builder& b, Value x, double v, Cmp c) { return b.compare(x, cst(b, v, x), c); }

Value truncF(Builder& b, Value x) {
  if (!isFloat(x.dtype())) return x;
  return b.select(cmpc(b, x, 0, Cmp::LT), b.ceil(x), b.floor(x));
}

Value sigmoidF(Builder& b, Value x) {
  Value one = cst(b, 1, x);
  return b.div(one, b.add(one, b.exp(b.neg(x))));
}

Value digammaF(Builder& b, Value x) {
  // CHLO gives NaN at every pole; CPU gives copysign(inf, -x) at +-0 (and NaN at the negative integers, as CHLO)
  return b.select(b.compare(x, cst(b, 0, x), Cmp::EQ), copySign(b, cst(b, INFINITY, x), b.neg(x)),
                  b.chlo("digamma", x));
}

Value besselISeries(Builder& b, Value x, int order, int terms) {
  Value q = b.mul(b.mul(x, x), cst(b, 0.25, x));
  Value s = b.onesLike(x);
  for (int k = terms; k >= 1; --k)
    s = b.add(cst(b, 1, x), b.mul(b.mul(q, cst(b, 1.0 / (double(k) * (k + order)), x)), s));
  return order == 0 ? s : b.mul(b.mul(x, cst(b, 0.5, x)), s);
}

Value clampOp(Builder& b, Value x, const Value* lo, const Value* hi) {
  if (lo) x = nanMax(b, x, *lo);
  if (hi) x = nanMin(b, x, *hi);
  return x;
}

}  // namespace torch_tpu::lowering
