// Loss family: nll_loss (1-d/2-d targets), mse_loss, binary cross entropy (with logits), smooth L1 and Huber
// losses, and their backward.
//
// Half-precision inputs compute in f32 (accType) and round once at the end, like PyTorch CPU's kernels.
#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

using shlo::Cmp;

enum Reduction { kNone = 0, kMean = 1, kSum = 2 };

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

}  // namespace

void populateLosses(Registry& r) {
  r.add("aten::nll_loss_forward", nllForwardRule).accepts(realDTypes);
  r.add("aten::nll_loss2d_forward", nllForwardRule).accepts(realDTypes);
  r.add("aten::nll_loss_backward", nllBackwardRule).accepts(realDTypes);
  r.add("aten::nll_loss2d_backward", nllBackwardRule).accepts(realDTypes);
  // mse_loss(self, target, reduction=mean)
  r.add("aten::mse_loss", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0), t = ctx.tensor(1);
    DType out = promote(x.dtype(), t.dtype());
    DType c = accType(out);
    Shape shape = broadcastShapes({x.shape(), t.shape()});
    Value d = b.sub(b.broadcastTo(b.convert(x, c), shape), b.broadcastTo(b.convert(t, c), shape));
    return {b.convert(reduceLoss(b, b.mul(d, d), ctx.toInt(2)), out)};
  }).accepts(realDTypes);
  // mse_loss_backward(grad_output, self, target, reduction)
  r.add("aten::mse_loss_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value g = ctx.tensor(0), x = ctx.tensor(1), t = ctx.tensor(2);
    DType out = promote(x.dtype(), t.dtype());
    DType c = accType(out);
    Shape shape = broadcastShapes({x.shape(), t.shape(), g.shape()});
    Value d = b.sub(b.broadcastTo(b.convert(x, c), shape), b.broadcastTo(b.convert(t, c), shape));
    double norm = ctx.toInt(3) == kMean ? 2.0 / double(numel(shape)) : 2.0;
    Value res = b.mul(b.mul(d, b.constantF(norm, c, shape)), b.broadcastTo(b.convert(g, c), shape));
    return {b.convert(res, out)};
  }).accepts(realDTypes);
  r.add("aten::binary_cross_entropy_with_logits", bceLogitsRule).accepts(realDTypes);
  r.add("aten::binary_cross_entropy", bceRule).accepts(realDTypes);
  r.add("aten::binary_cross_entropy_backward", bceBackwardRule).accepts(realDTypes);
  r.add("aten::smooth_l1_loss", [](Context& ctx) { return smoothL1Rule(ctx, false); }).accepts(realDTypes);
  r.add("aten::smooth_l1_loss_backward", [](Context& ctx) { return smoothL1BackwardRule(ctx, false); })
      .accepts(realDTypes);
  r.add("aten::huber_loss", [](Context& ctx) { return smoothL1Rule(ctx, true); }).accepts(realDTypes);
  r.add("aten::huber_loss_backward", [](Context& ctx) { return smoothL1BackwardRule(ctx, true); }).accepts(realDTypes);
}

}  // namespace torch_tpu::lowering
