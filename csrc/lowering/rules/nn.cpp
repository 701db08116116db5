// NN family: softmax/log_softmax and their backward, masked softmax and the packed q/k/v split of the attention fast
// paths, glu, log_sigmoid, pixel_shuffle/unshuffle, dropout, and their backward. Losses are in
// losses.cpp, layer norm in norm.cpp, index_select and embedding in indexing.cpp.
//
// Half-precision inputs compute in f32 (accType) and round once at the end, like PyTorch CPU's kernels.
#include <cmath>
#include <optional>

#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

using shlo::Cmp;

// softmax / log_softmax of x (already in the compute dtype) along dim, numerically stable (max subtracted).
Value softmaxCore(Builder& b, Value x, int64_t dim, bool log) {
  if (x.rank() == 0) return log ? b.zerosLike(x) : b.onesLike(x);
  Value m = b.reduce(x, {dim}, ReduceKind::Max);
  Value shifted = b.sub(x, expandReduced(b, m, x.shape(), {dim}));
  if (log) {
    Value s = b.reduce(b.exp(shifted), {dim}, ReduceKind::Sum);
    return b.sub(shifted, expandReduced(b, b.log(s), x.shape(), {dim}));
  }
  Value e = b.exp(shifted);
  Value s = b.reduce(e, {dim}, ReduceKind::Sum);
  return b.div(e, expandReduced(b, s, x.shape(), {dim}));
}

std::vector<Value> softmaxRule(Context& ctx, bool log) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  int64_t dim = normDim(ctx, ctx.toInt(1), x.rank());
  bool half_to_float = ctx.has(2) && ctx.toBool(2);
  DType out = half_to_float ? DType::F32 : x.dtype();
  return {b.convert(softmaxCore(b, b.convert(x, accType(x.dtype())), dim, log), out)};
}

// (grad_output, output, dim, input_dtype)
std::vector<Value> softmaxBackwardRule(Context& ctx, bool log) {
  Builder& b = ctx.b;
  Value g = ctx.tensor(0), y = ctx.tensor(1);
  DType out = ctx.has(3) && ctx.arg(3).kind == Arg::Kind::ScalarType ? ctx.arg(3).dtype : g.dtype();
  DType c = accType(promote(g.dtype(), y.dtype()));
  g = b.convert(g, c);
  y = b.convert(y, c);
  if (g.rank() == 0) return {b.convert(log ? b.sub(g, b.mul(b.exp(y), g)) : b.mul(y, b.sub(g, g)), out)};
  int64_t dim = normDim(ctx, ctx.toInt(2), g.rank());
  Value res;
  if (log) {
    Value s = b.reduce(g, {dim}, ReduceKind::Sum);
    res = b.sub(g, b.mul(b.exp(y), expandReduced(b, s, g.shape(), {dim})));
  } else {
    Value s = b.reduce(b.mul(g, y), {dim}, ReduceKind::Sum);
    res = b.mul(y, b.sub(g, expandReduced(b, s, g.shape(), {dim})));
  }
  return {b.convert(res, out)};
}

// glu(self, dim): a * sigmoid(b) of the two halves along dim.
std::vector<Value> gluRule(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  int64_t dim = normDim(ctx, ctx.toInt(1), x.rank());
  int64_t h = x.shape()[size_t(dim)] / 2;
  DType c = accType(x.dtype());
  Value xc = b.convert(x, c);
  Value a = b.sliceInDim(xc, 0, h, 1, dim), g = b.sliceInDim(xc, h, 2 * h, 1, dim);
  return {b.convert(b.mul(a, b.logistic(g)), x.dtype())};
}

// glu_backward(grad_output, self, dim)
std::vector<Value> gluBackwardRule(Context& ctx) {
  Builder& b = ctx.b;
  Value go = ctx.tensor(0), x = ctx.tensor(1);
  int64_t dim = normDim(ctx, ctx.toInt(2), x.rank());
  int64_t h = x.shape()[size_t(dim)] / 2;
  DType c = accType(x.dtype());
  Value xc = b.convert(x, c), gc = b.convert(go, c);
  Value a = b.sliceInDim(xc, 0, h, 1, dim), g = b.sliceInDim(xc, h, 2 * h, 1, dim);
  Value s = b.logistic(g);
  Value da = b.mul(s, gc);
  Value db = b.mul(b.mul(b.mul(b.sub(b.onesLike(s), s), s), a), gc);
  return {b.convert(b.concatenate({da, db}, dim), x.dtype())};
}

// pixel_shuffle(self, r): (..., C*r*r, H, W) -> (..., C, H*r, W*r); unshuffle is the inverse.
std::vector<Value> pixelShuffleRule(Context& ctx, bool unshuffle) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  int64_t r = ctx.toInt(1), n = x.rank();
  if (n < 3) ctx.fail("needs at least 3 dimensions");
  Shape lead(x.shape().begin(), x.shape().end() - 3);
  int64_t L = int64_t(lead.size());
  int64_t C = x.shape()[size_t(n - 3)], H = x.shape()[size_t(n - 2)], W = x.shape()[size_t(n - 1)];
  Shape split = lead;
  std::vector<int64_t> perm;
  for (int64_t k = 0; k < L; ++k) perm.push_back(k);
  if (!unshuffle) {
    int64_t oc = C / (r * r);
    split.insert(split.end(), {oc, r, r, H, W});
    // (oc, r1, r2, H, W) -> (oc, H, r1, W, r2)
    for (int64_t k : {0, 3, 1, 4, 2}) perm.push_back(L + k);
  } else {
    split.insert(split.end(), {C, H / r, r, W / r, r});
    // (C, H', r1, W', r2) -> (C, r1, r2, H', W')
    for (int64_t k : {0, 2, 4, 1, 3}) perm.push_back(L + k);
  }
  return {b.reshape(b.transpose(b.reshape(x, split), perm), ctx.outputs[0].shape)};
}
// _masked_softmax(self, mask, dim=None, mask_type=None): softmax over the elements whose mask is false, as PyTorch
// CPU's kernel computes it (the attention fast paths of nn.MultiheadAttention and nn.TransformerEncoderLayer call
// it). mask_type 0 is an (L, L) attention mask over a (B, H, L, L) input, 1 a (B, L) padding mask, 2 a mask of the
// input's shape; a 2-d mask with a 4-d input needs the type, any other ranks are type 2. A row with every element
// masked is NaN, as on CPU. masked_softmax_accepts declines the shapes CPU rejects, so its kernel raises.
std::optional<int64_t> maskType(const Context& ctx, const Shape& x, const Shape& m) {
  std::optional<int64_t> t;
  if (ctx.has(3)) t = ctx.toInt(3);
  if (m.size() != 2 || x.size() != 4) t = 2;
  return t;
}

bool maskedSoftmaxAccepts(const Context& ctx) {
  if (!realDTypes(ctx) || !shlo::isFloat(ctx.tensor(0).dtype()) || ctx.tensor(1).dtype() != DType::Pred) return false;
  const Shape x = ctx.tensor(0).shape();
  const Shape m = ctx.tensor(1).shape();
  auto t = maskType(ctx, x, m);
  if (!t) return false;
  if (*t == 2) return x == m;
  // Types 0 and 1 index the mask by the query length; CPU's kernel reads it that way only for square scores.
  if (x[2] != x[3]) return false;
  if (*t == 1) return x[0] == m[0] && x[2] == m[1];
  if (*t == 0) return x[2] == m[0] && x[2] == m[1];
  return false;
}

std::vector<Value> maskedSoftmaxRule(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0), m = ctx.tensor(1);
  const Shape xs = x.shape();
  int64_t t = *maskType(ctx, xs, m.shape());
  if (t == 1) m = b.broadcastInDim(m, xs, {0, 3});
  if (t == 0) m = b.broadcastInDim(m, xs, {2, 3});
  if (x.rank() == 0) {
    x = b.reshape(x, {1});
    m = b.reshape(m, {1});
  }
  int64_t dim = ctx.has(2) ? normDim(ctx, ctx.toInt(2), x.rank()) : x.rank() - 1;
  DType c = accType(x.dtype());
  Value xc = b.convert(x, c);
  Value ninf = b.constantF(-INFINITY, c, x.shape());
  Value mx = b.reduce(b.select(m, ninf, xc), {dim}, ReduceKind::Max);
  Value e = b.exp(b.sub(xc, expandReduced(b, mx, x.shape(), {dim})));
  e = b.select(m, b.zerosLike(e), e);
  Value s = b.reduce(e, {dim}, ReduceKind::Sum);
  // CPU multiplies by the reciprocal of the sum, NaN where every element was masked.
  Value zero = b.zerosLike(s);
  Value inv = b.select(b.compare(s, zero, Cmp::EQ), b.constantF(NAN, c, s.shape()), b.div(b.onesLike(s), s));
  Value y = b.mul(e, expandReduced(b, inv, x.shape(), {dim}));
  return {b.reshape(b.convert(y, ctx.tensor(0).dtype()), ctx.outputs[0].shape)};
}

// _transform_bias_rescale_qkv(qkv, qkv_bias, num_heads): qkv (B, T, 3D) plus its bias, split into q, k and v of
// shape (B, num_heads, T, D / num_heads), q divided by sqrt(D / num_heads) (the attention fast path's packed
// projection, as CPU's kernel computes it).
std::vector<Value> transformBiasRescaleQkvRule(Context& ctx) {
  Builder& b = ctx.b;
  Value qkv = ctx.tensor(0), bias = ctx.tensor(1);
  int64_t H = ctx.toInt(2);
  const Shape& s = qkv.shape();
  int64_t B = s[0], T = s[1], D = s[2] / 3, dh = D / H;
  DType c = accType(qkv.dtype());
  Value x = b.add(b.convert(qkv, c), b.broadcastInDim(b.convert(bias, c), s, {2}));
  std::vector<Value> out;
  for (int64_t k = 0; k < 3; ++k) {
    Value part = b.sliceInDim(x, k * D, (k + 1) * D, 1, 2);
    if (k == 0) part = b.div(part, b.constantF(std::sqrt(double(dh)), c, part.shape()));
    part = b.transpose(b.reshape(part, {B, T, H, dh}), {0, 2, 1, 3});
    out.push_back(b.convert(part, qkv.dtype()));
  }
  return out;
}

bool transformBiasRescaleQkvAccepts(const Context& ctx) {
  if (!realDTypes(ctx) || !shlo::isFloat(ctx.tensor(0).dtype())) return false;
  const Shape s = ctx.tensor(0).shape();
  const Shape bs = ctx.tensor(1).shape();
  int64_t H = ctx.toInt(2);
  return s.size() == 3 && bs.size() == 1 && bs[0] == s[2] && s[2] % 3 == 0 && H > 0 && (s[2] / 3) % H == 0 &&
         ctx.tensor(1).dtype() == ctx.tensor(0).dtype();
}

// PyTorch CPU's softmax implements floating inputs only: integer calls decline, and its kernel raises.
bool floatSelf(const Context& ctx) { return realDTypes(ctx) && shlo::isFloat(ctx.tensor(0).dtype()); }

}  // namespace

void populateNN(Registry& r) {
  r.add("aten::_softmax", [](Context& ctx) { return softmaxRule(ctx, false); }).accepts(floatSelf);
  r.add("aten::_log_softmax", [](Context& ctx) { return softmaxRule(ctx, true); }).accepts(floatSelf);
  r.add("aten::_softmax_backward_data", [](Context& ctx) { return softmaxBackwardRule(ctx, false); })
      .accepts(realDTypes);
  r.add("aten::_log_softmax_backward_data", [](Context& ctx) { return softmaxBackwardRule(ctx, true); })
      .accepts(realDTypes);
  r.add("aten::_masked_softmax", maskedSoftmaxRule).accepts(maskedSoftmaxAccepts);
  r.add("aten::_transform_bias_rescale_qkv", transformBiasRescaleQkvRule).accepts(transformBiasRescaleQkvAccepts);
  r.add("aten::glu", gluRule).accepts(realDTypes);
  r.add("aten::glu_backward", gluBackwardRule).accepts(realDTypes);
  // log_sigmoid_forward(self) -> (output, buffer = exp(-|x|), PyTorch CPU's buffer; the backward recomputes it)
  r.add("aten::log_sigmoid_forward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    DType c = accType(x.dtype());
    Value xc = b.convert(x, c);
    Value buf = ctx.outputs.size() > 1 && ctx.outputs[1].shape == x.shape() ? b.exp(b.neg(b.abs(xc)))
                                                                           : b.zeros({c, ctx.outputs[1].shape});
    return {b.convert(logSigmoid(b, xc), x.dtype()), buf};
  }).accepts(realDTypes);
  // log_sigmoid_backward(grad_output, self, buffer): grad * sigmoid(-x)
  r.add("aten::log_sigmoid_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value g = ctx.tensor(0), x = ctx.tensor(1);
    DType c = accType(x.dtype());
    Shape shape = broadcastShapes({g.shape(), x.shape()});
    Value xc = b.broadcastTo(b.convert(x, c), shape), gc = b.broadcastTo(b.convert(g, c), shape);
    return {b.convert(b.mul(gc, b.logistic(b.neg(xc))), x.dtype())};
  }).accepts(realDTypes);
  r.add("aten::pixel_shuffle", [](Context& ctx) { return pixelShuffleRule(ctx, false); }).accepts(realDTypes).complex();
  r.add("aten::pixel_unshuffle", [](Context& ctx) { return pixelShuffleRule(ctx, true); })
      .accepts(realDTypes).complex();
  // native_dropout(input, float p, bool? train) -> (output, mask)
  r.add("aten::native_dropout", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    if (ctx.has(2) && !ctx.toBool(2)) return {x, b.constantF(1, DType::Pred, x.shape())};
    DType c = x.dtype() == DType::F64 ? DType::F64 : DType::F32;
    Value bits = b.rngBitGenerator(ctx.rngState(), {c == DType::F64 ? DType::U64 : DType::U32, x.shape()})[1];
    Value u;
    if (c == DType::F64)
      u = b.mul(b.convert(b.shiftRightLogical(bits, b.constantF(11, DType::U64, x.shape())), c),
                b.constantF(std::ldexp(1.0, -53), c, x.shape()));
    else
      u = b.mul(b.convert(b.shiftRightLogical(bits, b.constantF(8, DType::U32, x.shape())), c),
                b.constantF(std::ldexp(1.0, -24), c, x.shape()));
    Value p = scalarArg(ctx, 1, c);
    Value keep_p = b.sub(b.constant(1, c), p);
    Value keep = b.compare(u, b.broadcastTo(keep_p, x.shape()), Cmp::LT);
    Value scale = b.select(b.compare(p, b.constant(1, c), Cmp::EQ), b.constant(0, c), b.div(b.constant(1, c), keep_p));
    DType xc = accType(x.dtype());
    Value out = b.mul(b.select(keep, b.convert(x, xc), b.zeros({xc, x.shape()})),
                      b.broadcastTo(b.convert(scale, xc), x.shape()));
    return {b.convert(out, x.dtype()), keep};
  }).accepts(realDTypes);
  // native_dropout_backward(grad_output, mask, float scale)
  r.add("aten::native_dropout_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value g = ctx.tensor(0), mask = ctx.tensor(1);
    // the result type promotes grad_output with the float scale (bool/integer gradients give float32, as on CPU)
    DType out = !ctx.outputs.empty() && ctx.outputs[0].dtype != DType::Invalid ? ctx.outputs[0].dtype : g.dtype();
    DType c = accType(out);
    Value m = b.convert(b.broadcastTo(mask, g.shape()), c);
    Value s = b.broadcastTo(scalarArg(ctx, 2, c), g.shape());
    return {b.convert(b.mul(b.mul(b.convert(g, c), m), s), out)};
  }).accepts(realDTypes);
}

}  // namespace torch_tpu::lowering
