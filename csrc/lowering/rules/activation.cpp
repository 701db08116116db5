// Activation family: relu, gelu, silu, mish, hardsigmoid/hardswish/hardtanh, leaky_relu, threshold, elu,
// softplus, soft/hard shrink, prelu, and their backward formulas.
#include <cmath>
#include <limits>

#include "lowering/families.h"
#include "lowering/pointwise.h"

namespace torch_tpu::lowering {
namespace {

using shlo::isSigned;

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

}  // namespace

void populateActivation(Registry& r) {
  r.add("aten::relu", unarySame([](Builder& b, Value x) {
    if (x.dtype() == DType::Pred || !isSigned(x.dtype())) return x;
    return b.select(cmpc(b, x, 0, Cmp::LT), b.zerosLike(x), x);
  })).accepts(elementwiseAccepts);
  r.add("aten::gelu", [](Context& ctx) -> std::vector<Value> {
    std::string approx = ctx.has(1) ? ctx.arg(1).s : "none";
    Value x = ctx.tensor(0);
    return {inAcc(ctx.b, x, x.dtype(), [&](Value v) { return gelu(ctx.b, v, approx); })};
  }).accepts(elementwiseAccepts);
  r.add("aten::silu", unarySame([](Builder& b, Value x) { return b.div(x, b.add(cst(b, 1, x), b.exp(b.neg(x)))); }))
      .accepts(elementwiseAccepts).complex();
  r.add("aten::mish", unarySame([](Builder& b, Value x) { return b.mul(x, b.tanh(b.log1p(b.exp(x)))); }))
      .accepts(elementwiseAccepts);
  r.add("aten::hardsigmoid", unarySame([](Builder& b, Value x) {
    return b.div(b.clamp(cst(b, 0, x), b.add(x, cst(b, 3, x)), cst(b, 6, x)), cst(b, 6, x));
  })).accepts(elementwiseAccepts);
  r.add("aten::hardswish", unarySame([](Builder& b, Value x) {
    return b.div(b.mul(x, b.clamp(cst(b, 0, x), b.add(x, cst(b, 3, x)), cst(b, 6, x))), cst(b, 6, x));
  })).accepts(elementwiseAccepts);
  // self (argument 0) and `nscalars` numbers after it, in self's compute dtype; the result has self's dtype.
  using FnScalars = std::function<Value(Builder&, Value, const std::vector<Value>&)>;
  auto selfScalars = [](FnScalars fn, size_t nscalars) -> RuleFn {
    return [fn, nscalars](Context& ctx) -> std::vector<Value> {
      Value x = ctx.tensor(0);
      DType c = computeType(x.dtype());
      std::vector<Value> s;
      for (size_t i = 1; i <= nscalars; ++i) s.push_back(operand(ctx, i, c, x.shape()));
      return {ctx.b.convert(fn(ctx.b, ctx.b.convert(x, c), s), x.dtype())};
    };
  };
  r.add("aten::leaky_relu", selfScalars([](Builder& b, Value x, const std::vector<Value>& s) {
    return b.select(cmpc(b, x, 0, Cmp::GT), x, b.mul(x, s[0]));
  }, 1)).accepts(elementwiseAccepts);
  r.add("aten::hardtanh", selfScalars([](Builder& b, Value x, const std::vector<Value>& s) {
    return clampOp(b, x, &s[0], &s[1]);
  }, 2)).accepts(elementwiseAccepts);
  r.add("aten::threshold", selfScalars([](Builder& b, Value x, const std::vector<Value>& s) {
    return b.select(b.compare(x, s[0], Cmp::LE), s[1], x);
  }, 2)).accepts(elementwiseAccepts);
  r.add("aten::elu", selfScalars([](Builder& b, Value x, const std::vector<Value>& s) {
    // alpha s[0], scale s[1], input_scale s[2]
    Value neg = b.mul(b.expm1(b.mul(x, s[2])), b.mul(s[0], s[1]));
    return b.select(cmpc(b, x, 0, Cmp::LE), neg, b.mul(x, s[1]));
  }, 3)).accepts(elementwiseAccepts);
  r.add("aten::softplus", selfScalars([](Builder& b, Value x, const std::vector<Value>& s) {
    Value xb = b.mul(x, s[0]);
    return b.select(b.compare(xb, s[1], Cmp::GT), x, b.div(b.log1p(b.exp(xb)), s[0]));
  }, 2)).accepts(elementwiseAccepts);

  r.add("aten::softshrink", selfScalars([](Builder& b, Value x, const std::vector<Value>& s) {
    Value l = s[0];
    Value res = b.select(b.compare(x, l, Cmp::GT), b.sub(x, l),
                         b.select(b.compare(x, b.neg(l), Cmp::LT), b.add(x, l), b.zerosLike(x)));
    return b.select(isNan(b, x), x, res);
  }, 1)).accepts(elementwiseAccepts);
  r.add("aten::hardshrink", selfScalars([](Builder& b, Value x, const std::vector<Value>& s) {
    Value l = s[0];
    Value inside = b.andOp(b.compare(x, b.neg(l), Cmp::GE), b.compare(x, l, Cmp::LE));
    return b.select(inside, b.zerosLike(x), x);
  }, 1)).accepts(elementwiseAccepts);
  // _prelu_kernel(self, weight): weight already has a broadcastable shape.
  r.add("aten::_prelu_kernel", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = resultTypeOf(ctx, {0, 1});
    DType c = computeType(t);
    auto v = operands(ctx, {0, 1}, c);
    return {b.convert(b.select(cmpc(b, v[0], 0, Cmp::GT), v[0], b.mul(v[1], v[0])), t)};
  }).accepts(elementwiseAccepts);
  // _prelu_kernel_backward(grad_output, self, weight) -> (grad_input, grad_weight), both in the broadcast shape.
  r.add("aten::_prelu_kernel_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = resultTypeOf(ctx, {1, 2});
    DType c = computeType(t);
    auto v = operands(ctx, {0, 1, 2}, c);
    Value g = v[0], x = v[1], w = v[2];
    Value pos = cmpc(b, x, 0, Cmp::GT);
    Value gi = b.select(pos, g, b.mul(w, g));
    Value gw = b.select(pos, b.zerosLike(g), b.mul(x, g));
    return {b.convert(b.broadcastTo(gi, ctx.outputs.at(0).shape), t), b.convert(b.broadcastTo(gw, ctx.outputs.at(1).shape), t)};
  }).accepts(elementwiseAccepts);

  // ---- backward ----
  r.add("aten::threshold_backward", gradOp(0, 1, [](Context& ctx, DType c, Value g, Value x) {
    Value th = operand(ctx, 2, c, x.shape());
    return ctx.b.select(ctx.b.compare(x, th, Cmp::LE), ctx.b.zerosLike(g), g);
  })).accepts(elementwiseAccepts);
  r.add("aten::gelu_backward", gradOp(0, 1, [](Context& ctx, DType, Value g, Value x) {
    return geluBackwardF(ctx.b, g, x, ctx.has(2) ? ctx.arg(2).s : "none");
  })).accepts(elementwiseAccepts);
  r.add("aten::silu_backward", gradOp(0, 1, [](Context& ctx, DType, Value g, Value x) {
    Builder& b = ctx.b;
    Value s = sigmoidF(b, x);
    Value one = cst(b, 1, x);
    return b.mul(g, b.mul(s, b.add(one, b.mul(x, b.sub(one, s)))));
  })).accepts(elementwiseAccepts);
  r.add("aten::mish_backward", gradOp(0, 1, [](Context& ctx, DType, Value g, Value x) {
    Builder& b = ctx.b;
    Value s = sigmoidF(b, x);
    Value t = b.tanh(b.log1p(b.exp(x)));
    Value one = cst(b, 1, x);
    return b.mul(g, b.add(t, b.mul(b.mul(x, s), b.sub(one, b.mul(t, t)))));
  })).accepts(elementwiseAccepts);
  for (const char* op : {"aten::softshrink_backward", "aten::hardshrink_backward"})
    r.add(op, gradOp(0, 1, [](Context& ctx, DType c, Value g, Value x) {
      Builder& b = ctx.b;
      Value l = operand(ctx, 2, c, x.shape());
      Value inside = b.andOp(b.compare(x, b.neg(l), Cmp::GE), b.compare(x, l, Cmp::LE));
      return b.select(inside, b.zerosLike(g), g);
    })).accepts(elementwiseAccepts);
  r.add("aten::leaky_relu_backward", gradOp(0, 1, [](Context& ctx, DType c, Value g, Value x) {
    Value slope = operand(ctx, 2, c, x.shape());
    return ctx.b.select(cmpc(ctx.b, x, 0, Cmp::GT), g, ctx.b.mul(g, slope));
  })).accepts(elementwiseAccepts);
  r.add("aten::hardtanh_backward", gradOp(0, 1, [](Context& ctx, DType c, Value g, Value x) {
    Builder& b = ctx.b;
    Value lo = operand(ctx, 2, c, x.shape()), hi = operand(ctx, 3, c, x.shape());
    Value out = b.orOp(b.compare(x, lo, Cmp::LE), b.compare(x, hi, Cmp::GE));
    return b.select(out, b.zerosLike(g), g);
  })).accepts(elementwiseAccepts);
  r.add("aten::hardsigmoid_backward", gradOp(0, 1, [](Context& ctx, DType, Value g, Value x) {
    Builder& b = ctx.b;
    Value in = b.andOp(cmpc(b, x, -3, Cmp::GT), cmpc(b, x, 3, Cmp::LT));
    return b.select(in, b.div(g, cst(b, 6, g)), b.zerosLike(g));
  })).accepts(elementwiseAccepts);
  r.add("aten::hardswish_backward", gradOp(0, 1, [](Context& ctx, DType, Value g, Value x) {
    Builder& b = ctx.b;
    Value mid = b.mul(g, b.add(b.div(x, cst(b, 3, x)), cst(b, 0.5, x)));
    return b.select(cmpc(b, x, -3, Cmp::LE), b.zerosLike(g), b.select(cmpc(b, x, 3, Cmp::LT), mid, g));
  })).accepts(elementwiseAccepts);
  r.add("aten::softplus_backward", gradOp(0, 1, [](Context& ctx, DType c, Value g, Value x) {
    Builder& b = ctx.b;
    Value beta = operand(ctx, 2, c, x.shape()), th = operand(ctx, 3, c, x.shape());
    Value xb = b.mul(x, beta);
    Value z = b.exp(xb);
    return b.select(b.compare(xb, th, Cmp::GT), g, b.div(b.mul(g, z), b.add(z, cst(b, 1, z))));
  })).accepts(elementwiseAccepts);
  // elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result)
  r.add("aten::elu_backward", gradOp(0, 5, [](Context& ctx, DType c, Value g, Value x) {
    Builder& b = ctx.b;
    Value alpha = operand(ctx, 1, c, x.shape()), scale = operand(ctx, 2, c, x.shape()),
          iscale = operand(ctx, 3, c, x.shape());
    Value negcoef = b.mul(alpha, scale);
    Value neg = ctx.toBool(4) ? b.mul(b.mul(g, iscale), b.add(x, negcoef))
                              : b.mul(b.mul(b.mul(g, iscale), negcoef), b.exp(b.mul(x, iscale)));
    return b.select(cmpc(b, x, 0, Cmp::LE), neg, b.mul(g, scale));
  })).accepts(elementwiseAccepts);
}

}  // namespace torch_tpu::lowering
