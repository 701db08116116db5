// NN family: softmax/log_softmax and their backward, layer norm and its backward, embedding and its backward,
// index_select, nll_loss (1-d/2-d targets), mse_loss, binary cross entropy (with logits), smooth L1 and Huber losses,
// glu, log_sigmoid, pixel_shuffle/unshuffle, dropout.
//
// Half-precision inputs compute in f32 (accType) and round once at the end, like PyTorch CPU's kernels.
#include <cmath>

#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

using shlo::Cmp;
using shlo::isFloat;

enum Reduction { kNone = 0, kMean = 1, kSum = 2 };

std::vector<int64_t> range(int64_t lo, int64_t hi) {
  std::vector<int64_t> d;
  for (int64_t k = lo; k < hi; ++k) d.push_back(k);
  return d;
}

Value sumDims(Builder& b, Value x, const std::vector<int64_t>& dims) {
  return dims.empty() ? x : b.reduce(x, dims, ReduceKind::Sum);
}

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
  if (!shlo::isFloat(x.dtype())) ctx.fail("integer input (PyTorch CPU implements floating dtypes only)");
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

// Broadcasts a tensor of the normalized (trailing) shape over `shape`.
Value trailing(Builder& b, Value v, const Shape& shape) {
  std::vector<int64_t> map = range(int64_t(shape.size()) - v.rank(), int64_t(shape.size()));
  return b.broadcastInDim(v, shape, map);
}

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd)
std::vector<Value> layerNormRule(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  int64_t axis = x.rank() - int64_t(ctx.toInts(1).size());
  if (axis < 0) ctx.fail("normalized_shape is longer than the input's rank");
  std::vector<int64_t> dims = range(axis, x.rank());
  DType c = accType(x.dtype());
  Value xc = b.convert(x, c);
  double n = double(reducedCount(x.shape(), dims));
  Value mean = b.div(sumDims(b, xc, dims), b.constantF(n, c, reducedShape(x.shape(), dims, false)));
  Value d = b.sub(xc, expandReduced(b, mean, x.shape(), dims));
  Value var = b.div(sumDims(b, b.mul(d, d), dims), b.constantF(n, c, mean.shape()));
  Value eps = b.broadcastTo(scalarArg(ctx, 4, c), var.shape());
  Value rstd = b.rsqrt(b.add(var, eps));
  Value out = b.mul(d, expandReduced(b, rstd, x.shape(), dims));
  if (ctx.has(2)) out = b.mul(out, trailing(b, b.convert(ctx.tensor(2), c), x.shape()));
  if (ctx.has(3)) out = b.add(out, trailing(b, b.convert(ctx.tensor(3), c), x.shape()));
  Shape stat = reducedShape(x.shape(), dims, true);
  DType st = ctx.outputs.size() > 1 && ctx.outputs[1].dtype != DType::Invalid ? ctx.outputs[1].dtype : x.dtype();
  return {b.convert(out, x.dtype()), b.convert(b.reshape(mean, stat), st), b.convert(b.reshape(rstd, stat), st)};
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?, bias?, bool[3] output_mask)
std::vector<Value> layerNormBackwardRule(Context& ctx) {
  Builder& b = ctx.b;
  Value g = ctx.tensor(0), x = ctx.tensor(1);
  int64_t axis = x.rank() - int64_t(ctx.toInts(2).size());
  std::vector<int64_t> norm = range(axis, x.rank()), batch = range(0, axis);
  std::vector<bool> mask = ctx.arg(7).bools;
  mask.resize(3, true);
  DType c = accType(x.dtype());
  Value gc = b.convert(g, c), xc = b.convert(x, c);
  Value mean = expandReduced(b, b.convert(ctx.tensor(3), c), x.shape(), norm);
  Value rstd = expandReduced(b, b.convert(ctx.tensor(4), c), x.shape(), norm);
  Value xhat = b.mul(b.sub(xc, mean), rstd);
  std::vector<Value> res(3);
  auto wanted = [&](int k) {
    return mask[k] && (k >= int(ctx.outputs.size()) || ctx.outputs[k].dtype != DType::Invalid);
  };
  if (wanted(0)) {
    Value gw = ctx.has(5) ? b.mul(gc, trailing(b, b.convert(ctx.tensor(5), c), x.shape())) : gc;
    double n = double(reducedCount(x.shape(), norm));
    Value inv_n = b.constantF(1.0 / n, c, reducedShape(x.shape(), norm, false));
    Value mean_gw = expandReduced(b, b.mul(sumDims(b, gw, norm), inv_n), x.shape(), norm);
    Value mean_gwx = expandReduced(b, b.mul(sumDims(b, b.mul(gw, xhat), norm), inv_n), x.shape(), norm);
    Value dx = b.mul(rstd, b.sub(b.sub(gw, mean_gw), b.mul(xhat, mean_gwx)));
    res[0] = b.convert(dx, x.dtype());
  }
  Shape wshape(x.shape().begin() + axis, x.shape().end());
  if (wanted(1)) {
    DType wt = ctx.has(5) ? ctx.tensor(5).dtype() : x.dtype();
    res[1] = b.convert(b.reshape(sumDims(b, b.mul(gc, xhat), batch), wshape), wt);
  }
  if (wanted(2)) {
    DType bt = ctx.has(6) ? ctx.tensor(6).dtype() : x.dtype();
    res[2] = b.convert(b.reshape(sumDims(b, gc, batch), wshape), bt);
  }
  return res;
}

// Rows of `table` (along dim 0) picked by integer `idx` of any shape: result idx.shape + table.shape[1:].
Value takeRows(Builder& b, Value table, Value idx) {
  Builder::GatherDims gd;
  int64_t ir = idx.rank();
  gd.offset_dims = range(ir, ir + table.rank() - 1);
  gd.collapsed_slice_dims = {0};
  gd.start_index_map = {0};
  gd.index_vector_dim = ir;
  std::vector<int64_t> sizes = table.shape();
  sizes[0] = 1;
  Shape out = idx.shape();
  out.insert(out.end(), table.shape().begin() + 1, table.shape().end());
  return b.gather(table, idx, gd, sizes, out);
}

// index_select(self, dim, index): index 0-d or 1-d.
std::vector<Value> indexSelectRule(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0), index = ctx.tensor(2);
  int64_t k = index.type.numel();
  Value idx = b.reshape(index, {k});
  if (x.rank() == 0) return {b.reshape(b.broadcastTo(x, {k}), {})};
  return {takeAlong(b, x, normDim(ctx, ctx.toInt(1), x.rank()), idx)};
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
std::vector<Value> embeddingBackwardRule(Context& ctx) {
  Builder& b = ctx.b;
  Value g = ctx.tensor(0), indices = ctx.tensor(1);
  int64_t num_weights = ctx.toInt(2), padding_idx = ctx.toInt(3);
  bool scale = ctx.toBool(4);
  int64_t m = indices.type.numel();
  int64_t dim = g.shape().empty() ? 1 : g.shape().back();
  DType c = accType(g.dtype());
  Value idx = b.convert(b.reshape(indices, {m}), DType::S64);
  Value rows = b.convert(b.reshape(g, {m, dim}), c);
  Value keep = b.compare(idx, b.broadcastTo(b.constantInt(padding_idx, DType::S64), {m}), Cmp::NE);
  Value w = b.convert(keep, c);  // 0 for padding rows
  Value idx2 = b.reshape(idx, {m, 1});
  if (scale) {
    Builder::ScatterDims sd1;
    sd1.update_window_dims = {};
    sd1.inserted_window_dims = {0};
    sd1.scatter_dims_to_operand_dims = {0};
    sd1.index_vector_dim = 1;
    Value counts = b.scatter(b.zeros({c, {num_weights}}), idx2, b.constantF(1, c, {m}), sd1, ReduceKind::Sum);
    Builder::GatherDims gd;
    gd.offset_dims = {};
    gd.collapsed_slice_dims = {0};
    gd.start_index_map = {0};
    gd.index_vector_dim = 1;
    Value cnt = b.gather(counts, idx2, gd, {1}, {m});
    w = b.div(w, b.max(cnt, b.constantF(1, c, {m})));
  }
  if (padding_idx >= 0 || scale) rows = b.mul(rows, b.broadcastInDim(w, {m, dim}, {0}));
  Builder::ScatterDims sd;
  sd.update_window_dims = {1};
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  Value out = b.scatter(b.zeros({c, {num_weights, dim}}), idx2, rows, sd, ReduceKind::Sum);
  return {b.convert(out, g.dtype())};
}

// Shared by nll_loss forward/backward: one-hot of target along the class dim, per-element weights (0 where ignored).
struct NllParts {
  int64_t class_dim;
  Value onehot;  // pred, self's shape
  Value w;       // weights per target element, compute dtype, target's shape (0 where target == ignore_index)
};

NllParts nllParts(Context& ctx, Value self, Value target, size_t weight_i, int64_t ignore_index, DType c) {
  Builder& b = ctx.b;
  NllParts p;
  p.class_dim = self.rank() == 1 ? 0 : 1;
  std::vector<int64_t> tdims;
  for (int64_t d = 0; d < self.rank(); ++d)
    if (d != p.class_dim) tdims.push_back(d);
  Value t = b.convert(target, DType::S64);
  Value cls = b.iota({DType::S64, self.shape()}, p.class_dim);
  p.onehot = b.compare(cls, b.broadcastInDim(t, self.shape(), tdims), Cmp::EQ);
  Value mask = b.compare(t, b.broadcastTo(b.constantInt(ignore_index, DType::S64), t.shape()), Cmp::NE);
  Value w;
  if (ctx.has(weight_i)) {
    Value wb = b.broadcastInDim(b.convert(ctx.tensor(weight_i), c), self.shape(), {p.class_dim});
    w = b.reduce(b.select(p.onehot, wb, b.zerosLike(wb)), {p.class_dim}, ReduceKind::Sum);
  } else {
    w = b.constantF(1, c, t.shape());
  }
  p.w = b.select(mask, w, b.zerosLike(w));
  return p;
}

// nll_loss_forward / nll_loss2d_forward(self, target, weight?, reduction, ignore_index) -> (output, total_weight)
std::vector<Value> nllForwardRule(Context& ctx) {
  Builder& b = ctx.b;
  Value self = ctx.tensor(0), target = ctx.tensor(1);
  if (!shlo::isFloat(self.dtype())) ctx.fail("integer input (PyTorch CPU implements floating dtypes only)");
  int64_t reduction = ctx.toInt(3), ignore_index = ctx.toInt(4);
  DType c = accType(self.dtype());
  Value x = b.convert(self, c);
  NllParts p = nllParts(ctx, x, target, 2, ignore_index, c);
  Value picked = b.reduce(b.select(p.onehot, x, b.zerosLike(x)), {p.class_dim}, ReduceKind::Sum);
  Value loss = b.select(b.compare(p.w, b.zerosLike(p.w), Cmp::NE), b.neg(b.mul(picked, p.w)), b.zerosLike(p.w));
  std::vector<int64_t> all = range(0, loss.rank());
  Value total = sumDims(b, p.w, all);
  Value out;
  if (reduction == kNone) {
    out = loss;
    if (self.rank() > 1) total = b.constant(0, c);
  } else {
    out = sumDims(b, loss, all);
    if (reduction == kMean) out = b.div(out, total);
  }
  return {b.convert(out, self.dtype()), b.convert(total, self.dtype())};
}

// nll_loss_backward(grad_output, self, target, weight?, reduction, ignore_index, total_weight)
std::vector<Value> nllBackwardRule(Context& ctx) {
  Builder& b = ctx.b;
  Value go = ctx.tensor(0), self = ctx.tensor(1), target = ctx.tensor(2);
  int64_t reduction = ctx.toInt(4), ignore_index = ctx.toInt(5);
  DType c = accType(self.dtype());
  NllParts p = nllParts(ctx, self, target, 3, ignore_index, c);
  Value g = b.convert(go, c);
  Value coef;
  if (reduction == kNone) {
    coef = b.mul(p.w, b.broadcastTo(g, p.w.shape()));
  } else {
    Value scale = g;
    if (reduction == kMean) scale = b.div(scale, b.convert(ctx.tensor(6), c));
    coef = b.mul(p.w, b.broadcastTo(b.reshape(scale, {}), p.w.shape()));
  }
  std::vector<int64_t> tdims;
  for (int64_t d = 0; d < self.rank(); ++d)
    if (d != p.class_dim) tdims.push_back(d);
  Value cb = b.broadcastInDim(b.neg(coef), self.shape(), tdims);
  return {b.convert(b.select(p.onehot, cb, b.zerosLike(cb)), self.dtype())};
}

Value reduceLoss(Builder& b, Value loss, int64_t reduction) {
  if (reduction == kNone) return loss;
  Value s = sumDims(b, loss, range(0, loss.rank()));
  if (reduction == kMean) s = b.div(s, b.constant(double(loss.type.numel()), s.dtype()));
  return s;
}


// ---- pointwise losses ----

// The listed tensor arguments in dtype c broadcast to their common shape (absent optionals are skipped).
std::vector<Value> lossOperands(Context& ctx, const std::vector<size_t>& idx, DType c, Shape& shape) {
  std::vector<Shape> shapes;
  for (size_t i : idx)
    if (ctx.has(i)) shapes.push_back(ctx.tensor(i).shape());
  shape = broadcastShapes(shapes);
  std::vector<Value> out;
  for (size_t i : idx) out.push_back(ctx.has(i) ? ctx.b.broadcastTo(ctx.b.convert(ctx.tensor(i), c), shape) : Value());
  return out;
}

DType lossType(const Context& ctx, size_t self_i, size_t target_i) {
  return promote(ctx.tensor(self_i).dtype(), ctx.tensor(target_i).dtype());
}

// grad_output (0-d for a reduced loss) over `shape`, divided by the element count for reduction=mean.
Value lossGrad(Context& ctx, size_t g_i, int64_t reduction, DType c, const Shape& shape) {
  Builder& b = ctx.b;
  Value g = b.convert(ctx.tensor(g_i), c);
  if (reduction == kMean) g = b.div(g, b.constantF(double(numel(shape)), c, g.shape()));
  return b.broadcastTo(g, shape);
}

Value splat(Builder& b, double v, DType c, const Shape& s) { return b.constantF(v, c, s); }

// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|))
Value logSigmoid(Builder& b, Value x) {
  return b.sub(b.min(x, b.zerosLike(x)), b.log1p(b.exp(b.neg(b.abs(x)))));
}

// binary_cross_entropy_with_logits(self, target, weight?, pos_weight?, reduction)
std::vector<Value> bceLogitsRule(Context& ctx) {
  Builder& b = ctx.b;
  DType out = lossType(ctx, 0, 1), c = accType(out);
  Shape shape;
  std::vector<Value> v = lossOperands(ctx, {0, 1, 2, 3}, c, shape);
  Value x = v[0], t = v[1];
  Value ls = logSigmoid(b, x);
  if (v[3].valid()) ls = b.mul(ls, b.add(b.mul(b.sub(v[3], splat(b, 1, c, shape)), t), splat(b, 1, c, shape)));
  Value loss = b.sub(b.mul(b.sub(splat(b, 1, c, shape), t), x), ls);
  if (v[2].valid()) loss = b.mul(loss, v[2]);
  return {b.convert(reduceLoss(b, loss, ctx.toInt(4)), out)};
}

// binary_cross_entropy(self, target, weight?, reduction)
std::vector<Value> bceRule(Context& ctx) {
  Builder& b = ctx.b;
  DType out = lossType(ctx, 0, 1), c = accType(out);
  Shape shape;
  std::vector<Value> v = lossOperands(ctx, {0, 1, 2}, c, shape);
  Value x = v[0], t = v[1];
  Value lo = splat(b, -100, c, shape);
  Value l1 = b.max(b.log1p(b.neg(x)), lo), l0 = b.max(b.log(x), lo);
  Value loss = b.sub(b.mul(b.sub(t, splat(b, 1, c, shape)), l1), b.mul(t, l0));
  if (v[2].valid()) loss = b.mul(loss, v[2]);
  return {b.convert(reduceLoss(b, loss, ctx.toInt(3)), out)};
}

// binary_cross_entropy_backward(grad_output, self, target, weight?, reduction)
std::vector<Value> bceBackwardRule(Context& ctx) {
  Builder& b = ctx.b;
  DType out = lossType(ctx, 1, 2), c = accType(out);
  Shape shape;
  std::vector<Value> v = lossOperands(ctx, {1, 2, 3}, c, shape);
  Value x = v[0], t = v[1];
  Value denom = b.max(b.mul(b.sub(splat(b, 1, c, shape), x), x), splat(b, 1e-12, c, shape));
  Value res = b.div(b.sub(x, t), denom);
  if (v[2].valid()) res = b.mul(res, v[2]);
  res = b.mul(res, lossGrad(ctx, 0, ctx.toInt(4), c, shape));
  return {b.convert(res, out)};
}

// smooth_l1_loss(self, target, reduction, beta) / huber_loss(self, target, reduction, delta)
std::vector<Value> smoothL1Rule(Context& ctx, bool huber) {
  Builder& b = ctx.b;
  DType out = lossType(ctx, 0, 1), c = accType(out);
  if (!shlo::isFloat(out)) ctx.fail("integer operands (PyTorch CPU implements floating dtypes only)");
  Shape shape;
  std::vector<Value> v = lossOperands(ctx, {0, 1}, c, shape);
  Value z = b.abs(b.sub(v[0], v[1]));
  Value beta = b.broadcastTo(scalarArg(ctx, 3, c), shape);
  Value half = splat(b, 0.5, c, shape);
  Value loss;
  if (huber)
    loss = b.select(b.compare(z, beta, Cmp::LT), b.mul(half, b.mul(z, z)), b.mul(beta, b.sub(z, b.mul(half, beta))));
  else
    loss = b.select(b.compare(z, beta, Cmp::LT), b.div(b.mul(half, b.mul(z, z)), beta), b.sub(z, b.mul(half, beta)));
  return {b.convert(reduceLoss(b, loss, ctx.toInt(2)), out)};
}

// smooth_l1_loss_backward / huber_loss_backward(grad_output, self, target, reduction, beta|delta)
std::vector<Value> smoothL1BackwardRule(Context& ctx, bool huber) {
  Builder& b = ctx.b;
  DType out = lossType(ctx, 1, 2), c = accType(out);
  Shape shape;
  std::vector<Value> v = lossOperands(ctx, {1, 2}, c, shape);
  Value d = b.sub(v[0], v[1]);
  Value beta = b.broadcastTo(scalarArg(ctx, 4, c), shape);
  Value one = splat(b, 1, c, shape);
  Value hi = huber ? beta : one, lo = b.neg(hi);
  Value mid = huber ? d : b.div(d, beta);
  Value res = b.select(b.compare(d, b.neg(beta), Cmp::LE), lo, b.select(b.compare(d, beta, Cmp::GE), hi, mid));
  return {b.convert(b.mul(res, lossGrad(ctx, 0, ctx.toInt(3), c, shape)), out)};
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
}  // namespace

void populateNN(Registry& r) {
  addReal(r, "aten::_softmax", [](Context& ctx) { return softmaxRule(ctx, false); });
  addReal(r, "aten::_log_softmax", [](Context& ctx) { return softmaxRule(ctx, true); });
  addReal(r, "aten::_softmax_backward_data", [](Context& ctx) { return softmaxBackwardRule(ctx, false); });
  addReal(r, "aten::_log_softmax_backward_data", [](Context& ctx) { return softmaxBackwardRule(ctx, true); });
  addReal(r, "aten::native_layer_norm", layerNormRule);
  addReal(r, "aten::native_layer_norm_backward", layerNormBackwardRule);
  // embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)
  addReal(r, "aten::embedding", [](Context& ctx) -> std::vector<Value> {
    return {takeRows(ctx.b, ctx.tensor(0), ctx.tensor(1))};
  });
  addReal(r, "aten::embedding_dense_backward", embeddingBackwardRule);
  addReal(r, "aten::index_select", indexSelectRule);
  addReal(r, "aten::nll_loss_forward", nllForwardRule);
  addReal(r, "aten::nll_loss2d_forward", nllForwardRule);
  addReal(r, "aten::nll_loss_backward", nllBackwardRule);
  addReal(r, "aten::nll_loss2d_backward", nllBackwardRule);
  // mse_loss(self, target, reduction=mean)
  addReal(r, "aten::mse_loss", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0), t = ctx.tensor(1);
    DType out = promote(x.dtype(), t.dtype());
    DType c = accType(out);
    Shape shape = broadcastShapes({x.shape(), t.shape()});
    Value d = b.sub(b.broadcastTo(b.convert(x, c), shape), b.broadcastTo(b.convert(t, c), shape));
    return {b.convert(reduceLoss(b, b.mul(d, d), ctx.toInt(2)), out)};
  });
  // mse_loss_backward(grad_output, self, target, reduction)
  addReal(r, "aten::mse_loss_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value g = ctx.tensor(0), x = ctx.tensor(1), t = ctx.tensor(2);
    DType out = promote(x.dtype(), t.dtype());
    DType c = accType(out);
    Shape shape = broadcastShapes({x.shape(), t.shape(), g.shape()});
    Value d = b.sub(b.broadcastTo(b.convert(x, c), shape), b.broadcastTo(b.convert(t, c), shape));
    double norm = ctx.toInt(3) == kMean ? 2.0 / double(numel(shape)) : 2.0;
    Value res = b.mul(b.mul(d, b.constantF(norm, c, shape)), b.broadcastTo(b.convert(g, c), shape));
    return {b.convert(res, out)};
  });
  addReal(r, "aten::binary_cross_entropy_with_logits", bceLogitsRule);
  addReal(r, "aten::binary_cross_entropy", bceRule);
  addReal(r, "aten::binary_cross_entropy_backward", bceBackwardRule);
  addReal(r, "aten::smooth_l1_loss", [](Context& ctx) { return smoothL1Rule(ctx, false); });
  addReal(r, "aten::smooth_l1_loss_backward", [](Context& ctx) { return smoothL1BackwardRule(ctx, false); });
  addReal(r, "aten::huber_loss", [](Context& ctx) { return smoothL1Rule(ctx, true); });
  addReal(r, "aten::huber_loss_backward", [](Context& ctx) { return smoothL1BackwardRule(ctx, true); });
  addReal(r, "aten::glu", gluRule);
  addReal(r, "aten::glu_backward", gluBackwardRule);
  // log_sigmoid_forward(self) -> (output, buffer = exp(-|x|), PyTorch CPU's buffer; the backward recomputes it)
  addReal(r, "aten::log_sigmoid_forward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    DType c = accType(x.dtype());
    Value xc = b.convert(x, c);
    Value buf = ctx.outputs.size() > 1 && ctx.outputs[1].shape == x.shape() ? b.exp(b.neg(b.abs(xc)))
                                                                           : b.zeros({c, ctx.outputs[1].shape});
    return {b.convert(logSigmoid(b, xc), x.dtype()), buf};
  });
  // log_sigmoid_backward(grad_output, self, buffer): grad * sigmoid(-x)
  addReal(r, "aten::log_sigmoid_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value g = ctx.tensor(0), x = ctx.tensor(1);
    DType c = accType(x.dtype());
    Shape shape = broadcastShapes({g.shape(), x.shape()});
    Value xc = b.broadcastTo(b.convert(x, c), shape), gc = b.broadcastTo(b.convert(g, c), shape);
    return {b.convert(b.mul(gc, b.logistic(b.neg(xc))), x.dtype())};
  });
  addReal(r, "aten::pixel_shuffle", [](Context& ctx) { return pixelShuffleRule(ctx, false); });
  addReal(r, "aten::pixel_unshuffle", [](Context& ctx) { return pixelShuffleRule(ctx, true); });
  // native_dropout(input, float p, bool? train) -> (output, mask)
  addReal(r, "aten::native_dropout", [](Context& ctx) -> std::vector<Value> {
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
  });
  // native_dropout_backward(grad_output, mask, float scale)
  addReal(r, "aten::native_dropout_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value g = ctx.tensor(0), mask = ctx.tensor(1);
    // the result type promotes grad_output with the float scale (bool/integer gradients give float32, as on CPU)
    DType out = ctx.outputs[0].dtype != DType::Invalid ? ctx.outputs[0].dtype : g.dtype();
    DType c = accType(out);
    Value m = b.convert(b.broadcastTo(mask, g.shape()), c);
    Value s = b.broadcastTo(scalarArg(ctx, 2, c), g.shape());
    return {b.convert(b.mul(b.mul(b.convert(g, c), m), s), out)};
  });
}

}  // namespace torch_tpu::lowering
