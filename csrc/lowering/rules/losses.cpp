// Loss family: nll_loss (1-d/2-d targets), mse_loss, binary cross entropy (with logits), smooth L1 and Huber
// losses, multi-margin and multilabel-margin losses, CTC loss (alpha/beta recursions as stablehlo.while loops), and
// their backward.
//
// Half-precision inputs compute in f32 (accType) and round once at the end, like PyTorch CPU's kernels.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "lowering/bounds.h"
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
  // bounds check: every target names a class, except those equal to ignore_index
  Value ignored = b.compare(b.convert(target, DType::S64),
                            b.broadcastTo(b.constantInt(ignore_index, DType::S64), target.shape()), Cmp::EQ);
  checkIndexRange(ctx, target, self.shape()[p.class_dim], false, "Target {} is out of bounds.",
                  Context::CheckError::Index, ignored);
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


// The margin losses' backward: d(loss)/d(x) carries 1/D per frame, and 1/F more for reduction=mean.
double marginGradScale(int64_t reduction, int64_t F, int64_t D) {
  return reduction == kMean ? 1. / double(F * D) : 1. / double(D);
}

// gi [F, D] times grad_output: 0-d for a reduced loss (or a single frame), else one value per frame [F].
Value timesFrameGrad(Builder& b, Value gi, Value go, int64_t reduction, DType c) {
  const Shape fd = gi.shape();
  Value gc = b.convert(go, c);
  if (reduction != kNone || go.rank() == 0) return b.mul(gi, b.broadcastTo(b.reshape(gc, {}), fd));
  return b.mul(gi, b.broadcastInDim(b.reshape(gc, {fd[0]}), fd, {0}));
}

// x [F, D] at idx [F, J] within each row -> [F, J].
Value takeAlongRows(Builder& b, Value x, Value idx) { return gatherDim(b, x, 1, idx); }


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

// ---- multi-class margin losses ----

// Input viewed as [nframe, dim] the way PyTorch's kernels do: a 0-d or 1-d input is one frame.
Shape framesOf(const Value& x) {
  if (x.rank() <= 1) return {1, x.rank() == 0 ? 1 : x.shape()[0]};
  return {x.shape()[0], x.shape()[1]};
}

// The row-wise parts shared by multi_margin_loss forward and backward: target one-hot, z = margin - x[target] + x.
struct MarginParts {
  Value x, onehot, z, wt;  // [F, D], pred [F, D], [F, D], weight[target] [F] (invalid without weight)
  int64_t F, D;
};

MarginParts marginParts(Context& ctx, size_t x_i, size_t t_i, size_t margin_i, size_t w_i, DType c) {
  Builder& b = ctx.b;
  MarginParts m;
  Shape fd = framesOf(ctx.tensor(x_i));
  m.F = fd[0];
  m.D = fd[1];
  m.x = b.reshape(b.convert(ctx.tensor(x_i), c), fd);
  Value t = b.reshape(b.convert(ctx.tensor(t_i), DType::S64), {m.F});
  checkIndexRange(ctx, t, m.D, false, "target out of range", Context::CheckError::Runtime);
  m.onehot = b.compare(b.iota({DType::S64, fd}, 1), b.broadcastInDim(t, fd, {0}), Cmp::EQ);
  Value xt = b.reduce(b.select(m.onehot, m.x, b.zerosLike(m.x)), {1}, ReduceKind::Sum);
  Value margin = b.broadcastTo(scalarArg(ctx, margin_i, c), {m.F});
  m.z = b.add(b.broadcastInDim(b.sub(margin, xt), fd, {0}), m.x);
  if (ctx.has(w_i)) {
    Value w = b.reshape(b.convert(ctx.tensor(w_i), c), {m.D});
    m.wt = takeAlong(b, w, 0, b.clamp(b.constantInt(0, DType::S64), t, b.constantInt(m.D - 1, DType::S64)));
  }
  return m;
}

// multi_margin_loss(self, target, p, margin, weight?, reduction): per frame
// sum over d != target of w[target] * max(0, margin - x[target] + x[d])^p, divided by dim.
std::vector<Value> multiMarginRule(Context& ctx) {
  Builder& b = ctx.b;
  DType c = ctx.tensor(0).dtype();
  int64_t p = int64_t(ctx.staticDouble(2));
  int64_t reduction = ctx.toInt(5);
  MarginParts m = marginParts(ctx, 0, 1, 3, 4, c);
  Shape fd = {m.F, m.D};
  Value pos = b.andOp(b.compare(m.z, b.zerosLike(m.z), Cmp::GT), b.notOp(m.onehot));
  Value h = p == 1 ? m.z : b.mul(m.z, m.z);
  if (m.wt.valid()) h = b.mul(h, b.broadcastInDim(m.wt, fd, {0}));
  h = b.select(pos, h, b.zerosLike(h));
  Value row = b.div(b.reduce(h, {1}, ReduceKind::Sum), b.constantF(double(m.D), c, {m.F}));
  return {b.reshape(reduceLoss(b, row, reduction), ctx.outputs[0].shape)};
}

// multi_margin_loss_backward(grad_output, self, target, p, margin, weight?, reduction)
std::vector<Value> multiMarginBackwardRule(Context& ctx) {
  Builder& b = ctx.b;
  Value self = ctx.tensor(1), go = ctx.tensor(0);
  DType c = self.dtype();
  int64_t p = int64_t(ctx.staticDouble(3));
  int64_t reduction = ctx.toInt(6);
  MarginParts m = marginParts(ctx, 1, 2, 4, 5, c);
  Shape fd = {m.F, m.D};
  double gd = marginGradScale(reduction, m.F, m.D);
  Value g = b.constantF(gd, c, fd);
  Value pos = b.andOp(b.compare(m.z, b.zerosLike(m.z), Cmp::GT), b.notOp(m.onehot));
  Value h = p == 1 ? g : b.mul(b.mul(b.constantF(2, c, fd), g), m.z);
  if (m.wt.valid()) h = b.mul(h, b.broadcastInDim(m.wt, fd, {0}));
  h = b.select(pos, h, b.zerosLike(h));
  Value tgt = b.neg(b.reduce(h, {1}, ReduceKind::Sum));
  Value gi = b.select(m.onehot, b.broadcastInDim(tgt, fd, {0}), h);
  return {b.reshape(timesFrameGrad(b, gi, go, reduction, c), self.shape())};
}

// The parts of multilabel_margin_loss: target [F, D] lists each frame's classes up to the first -1.
struct MultilabelParts {
  Value x, t, valid, hit;  // x [F, D]; t [F, D] S64 (clamped to >= 0); valid pred [F, D] (position before the
                           // first -1); hit pred [F, J, D]: position j names class d
  int64_t F, D;
};

MultilabelParts multilabelParts(Context& ctx, size_t x_i, size_t t_i, DType c) {
  Builder& b = ctx.b;
  MultilabelParts m;
  Shape fd = framesOf(ctx.tensor(x_i));
  m.F = fd[0];
  m.D = fd[1];
  m.x = b.reshape(b.convert(ctx.tensor(x_i), c), fd);
  Value t = b.reshape(b.convert(ctx.tensor(t_i), DType::S64), fd);
  Value lo = b.compare(t, b.constantF(-1, DType::S64, fd), Cmp::GE);
  Value hi = b.compare(t, b.constantF(double(m.D), DType::S64, fd), Cmp::LT);
  ctx.check(b.andOp(lo, hi), "argument #2 'target' is out of range", Value(), Context::CheckError::Runtime);
  Value neg = b.compare(t, b.zerosLike(t), Cmp::LT);
  Value j = b.iota({DType::S64, fd}, 1);
  Value first_neg = b.reduce(b.select(neg, j, b.constantF(double(m.D), DType::S64, fd)), {1}, ReduceKind::Min);
  m.valid = b.compare(j, b.broadcastInDim(first_neg, fd, {0}), Cmp::LT);
  m.t = b.max(t, b.zerosLike(t));
  Shape fjd = {m.F, m.D, m.D};
  m.hit = b.andOp(b.compare(b.broadcastInDim(m.t, fjd, {0, 1}), b.iota({DType::S64, fjd}, 2), Cmp::EQ),
                  b.broadcastInDim(m.valid, fjd, {0, 1}));
  return m;
}

// active[f, j, d]: valid position j, class d not a target, and 1 - x[t[j]] + x[d] > 0.
Value multilabelActive(Builder& b, const MultilabelParts& m, Value is_target, DType c) {
  Shape fd = {m.F, m.D}, fjd = {m.F, m.D, m.D};
  Value xt = takeAlongRows(b, m.x, m.t);  // [F, J]
  Value z = b.add(b.broadcastInDim(b.sub(b.constantF(1, c, fd), xt), fjd, {0, 1}), b.broadcastInDim(m.x, fjd, {0, 2}));
  Value ok = b.andOp(b.broadcastInDim(m.valid, fjd, {0, 1}), b.broadcastInDim(b.notOp(is_target), fjd, {0, 2}));
  return b.andOp(ok, b.compare(z, b.zerosLike(z), Cmp::GT));
}

// multilabel_margin_loss_forward(self, target, reduction) -> (output, is_target)
std::vector<Value> multilabelRule(Context& ctx) {
  Builder& b = ctx.b;
  DType c = ctx.tensor(0).dtype();
  int64_t reduction = ctx.toInt(2);
  MultilabelParts m = multilabelParts(ctx, 0, 1, c);
  Shape fd = {m.F, m.D}, fjd = {m.F, m.D, m.D};
  Value is_target = b.reduce(m.hit, {1}, ReduceKind::Max);  // [F, D] pred
  Value active = multilabelActive(b, m, is_target, c);
  Value xt = takeAlongRows(b, m.x, m.t);
  Value z = b.add(b.broadcastInDim(b.sub(b.constantF(1, c, fd), xt), fjd, {0, 1}), b.broadcastInDim(m.x, fjd, {0, 2}));
  Value row = b.reduce(b.select(active, z, b.zerosLike(z)), {1, 2}, ReduceKind::Sum);  // [F]
  Value out;
  if (reduction == kNone && ctx.outputs[0].shape.size() == 1) {
    out = b.div(row, b.constantF(double(m.D), c, {m.F}));
  } else {
    out = b.div(b.reduce(row, {0}, ReduceKind::Sum), b.constant(double(m.D), c));
    if (reduction == kMean) out = b.div(out, b.constant(double(m.F), c));
  }
  Value ist = b.reshape(b.convert(is_target, c), ctx.tensor(1).shape());
  return {b.reshape(out, ctx.outputs[0].shape), ist};
}

// multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target)
std::vector<Value> multilabelBackwardRule(Context& ctx) {
  Builder& b = ctx.b;
  Value go = ctx.tensor(0), self = ctx.tensor(1);
  DType c = self.dtype();
  int64_t reduction = ctx.toInt(3);
  MultilabelParts m = multilabelParts(ctx, 1, 2, c);
  Shape fd = {m.F, m.D};
  Value is_target = b.compare(b.reshape(b.convert(ctx.tensor(4), c), fd), b.zeros({c, fd}), Cmp::NE);
  Value active = b.convert(multilabelActive(b, m, is_target, c), c);  // [F, J, D]
  double gd = marginGradScale(reduction, m.F, m.D);
  // +g for each active (j, d) at d; -g for each at the class t[j]
  Value plus = b.reduce(active, {1}, ReduceKind::Sum);                   // [F, D]
  Value per_j = b.reduce(active, {2}, ReduceKind::Sum);                  // [F, J]
  Value minus = b.reduce(b.select(m.hit, b.broadcastInDim(per_j, {m.F, m.D, m.D}, {0, 1}),
                                  b.zeros({c, {m.F, m.D, m.D}})),
                         {1}, ReduceKind::Sum);                           // [F, D]
  Value gi = b.mul(b.sub(plus, minus), b.constantF(gd, c, fd));
  return {b.reshape(timesFrameGrad(b, gi, go, reduction, c), self.shape())};
}

// ---- CTC loss ----
//
// _ctc_loss(log_probs [T, N, C], targets, input_lengths, target_lengths, blank, zero_infinity) -> (nll [N],
// log_alpha [N, T, S]) with S = 2 * max target length + 1. The lengths are int lists, so they shape the program.
// The alpha recursion of PyTorch's CPU kernel (log space, the three-term log-sum-exp shifted by its maximum) runs
// as a stablehlo.while over time, all batch items and extended-target positions s at once; positions past an item's
// 2 * target_length and times past its input length are -inf in log_alpha (PyTorch leaves them unwritten).

struct Ctc {
  int64_t T, N, C, S;
  std::vector<int64_t> il, tl;
  DType c;
  Value lpg;    // [T, N, S] log_probs at each position's extended-target label
  Value tp;     // [N, S] S64 extended target labels (blank at even s)
  Value skip;   // [N, S] pred: the s-2 -> s transition is allowed (s > 1, labels differ)
  Value valid;  // [N, S] pred: s <= 2 * target_length
};

Value constPred(Builder& b, const std::vector<int64_t>& v, const Shape& shape) {
  return b.compare(b.reshape(b.constantI64s(v, DType::S64), shape), b.zeros({DType::S64, shape}), Cmp::NE);
}

Ctc ctcSetup(Context& ctx, size_t lp_i, size_t tg_i, size_t il_i, size_t tl_i, size_t blank_i, int64_t S) {
  Builder& b = ctx.b;
  Ctc k;
  Value lp = ctx.tensor(lp_i), tg = ctx.tensor(tg_i);
  k.T = lp.shape()[0];
  k.N = lp.shape()[1];
  k.C = lp.shape()[2];
  k.S = S;
  k.il = ctx.toInts(il_i);
  k.tl = ctx.toInts(tl_i);
  k.c = lp.dtype();
  int64_t blank = ctx.toInt(blank_i);
  if (int64_t(k.il.size()) != k.N || int64_t(k.tl.size()) != k.N) ctx.fail("lengths must have batch_size entries");
  int64_t L = (S - 1) / 2;
  // Flat positions of each item's target labels (concatenated 1-d targets or padded [N, L'] rows).
  Value flat = b.reshape(b.convert(tg, DType::S64), {tg.type.numel()});
  std::vector<int64_t> pos, odd(size_t(k.N * S), 0), valid(size_t(k.N * S), 0);
  int64_t off = 0;
  for (int64_t n = 0; n < k.N; ++n) {
    for (int64_t l = 0; l < L; ++l) {
      int64_t p = tg.rank() == 1 ? off + std::min(l, std::max<int64_t>(k.tl[size_t(n)] - 1, 0))
                                 : n * tg.shape()[1] + std::min(l, tg.shape()[1] - 1);
      pos.push_back(std::min(std::max<int64_t>(p, 0), std::max<int64_t>(tg.type.numel() - 1, 0)));
    }
    if (tg.rank() == 1) off += k.tl[size_t(n)];
    for (int64_t s = 0; s < S; ++s) {
      odd[size_t(n * S + s)] = s % 2;
      valid[size_t(n * S + s)] = s <= 2 * k.tl[size_t(n)];
    }
  }
  Shape ns = {k.N, S};
  Value labels;  // [N, L]
  if (L > 0 && tg.type.numel() > 0)
    labels = b.reshape(takeAlong(b, flat, 0, pos), {k.N, L});
  else
    labels = b.constantF(double(blank), DType::S64, {k.N, L});
  // tp[n, s] = s odd ? labels[n, s / 2] : blank
  std::vector<int64_t> half;
  for (int64_t s = 0; s < S; ++s) half.push_back(std::min<int64_t>(s / 2, std::max<int64_t>(L - 1, 0)));
  Value spread = L > 0 ? takeAlong(b, labels, 1, half) : b.constantF(double(blank), DType::S64, ns);
  k.tp = b.select(constPred(b, odd, ns), spread, b.constantF(double(blank), DType::S64, ns));
  if (S > 2) {
    Value prev2 = b.concatenate({b.constantF(double(blank), DType::S64, {k.N, 2}), b.sliceInDim(k.tp, 0, S - 2, 1, 1)}, 1);
    Value s_gt1 = b.compare(b.iota({DType::S64, ns}, 1), b.constantF(1, DType::S64, ns), Cmp::GT);
    k.skip = b.andOp(s_gt1, b.compare(prev2, k.tp, Cmp::NE));
  } else {
    k.skip = b.zeros({DType::Pred, ns});
  }
  k.valid = constPred(b, valid, ns);
  // lpg[t, n, s] = log_probs[t, n, tp[n, s]]
  Shape tns = {k.T, k.N, S};
  k.lpg = gatherDim(b, lp, 2, b.broadcastInDim(b.clamp(b.constantInt(0, DType::S64), k.tp,
                                                           b.constantInt(k.C - 1, DType::S64)), tns, {1, 2}));
  return k;
}

// log(exp(a - m) + exp(b - m) + exp(c - m)) + m with m = max(a, b, c) (0 when all are -inf), PyTorch's order.
Value logSumExp3(Builder& b, Value x1, Value x2, Value x3) {
  Value ninf = b.scalarLike(-INFINITY, x1);
  Value m = b.max(b.max(x1, x2), x3);
  m = b.select(b.compare(m, ninf, Cmp::EQ), b.zerosLike(m), m);
  Value s = b.add(b.add(b.exp(b.sub(x1, m)), b.exp(b.sub(x2, m))), b.exp(b.sub(x3, m)));
  return b.add(b.log(s), m);
}

// Shifts along dim 1 by `by` positions (positive: toward higher s), filling with -inf.
Value shiftS(Builder& b, Value x, int64_t by) {
  int64_t S = x.shape()[1];
  Shape fill = x.shape();
  int64_t n = std::min<int64_t>(std::abs(by), S);
  fill[1] = n;
  Value ninf = b.constantF(-INFINITY, x.dtype(), fill);
  if (n == S) return b.constantF(-INFINITY, x.dtype(), x.shape());
  if (by > 0) return b.concatenate({ninf, b.sliceInDim(x, 0, S - n, 1, 1)}, 1);
  return b.concatenate({b.sliceInDim(x, n, S, 1, 1), ninf}, 1);
}

// Per-item mask [N, S] of rows t (0-d S32 inside a loop) against the static lengths: t `cmp` il[n] + delta.
Value timeMask(Builder& b, Value t, const std::vector<int64_t>& il, int64_t delta, Cmp cmp, int64_t S) {
  std::vector<int64_t> v;
  for (int64_t x : il) v.push_back(x + delta);
  int64_t N = int64_t(il.size());
  Value lim = b.broadcastInDim(b.constantI64s(v, DType::S64), {N, S}, {0});
  Value tb = b.broadcastTo(b.convert(t, DType::S64), {N, S});
  return b.compare(tb, lim, cmp);
}

std::vector<Value> ctcRule(Context& ctx) {
  Builder& b = ctx.b;
  int64_t S = ctx.outputs[1].shape[2];
  Ctc k = ctcSetup(ctx, 0, 1, 2, 3, 4, S);
  DType c = k.c;
  Shape ns = {k.N, S}, tns = {k.T, k.N, S};
  Value ninf_ns = b.constantF(-INFINITY, c, ns);
  Value la_all = b.constantF(-INFINITY, c, tns);
  Value s_iota = b.iota({DType::S64, ns}, 1);
  std::vector<int64_t> tl1;
  for (int64_t x : k.tl) tl1.push_back(x > 0 ? 1 : 0);
  if (k.T > 0) {
    Value lp0 = b.reshape(b.sliceInDim(k.lpg, 0, 1, 1, 0), ns);
    std::vector<int64_t> has_target;
    for (int64_t n = 0; n < k.N; ++n)
      for (int64_t s = 0; s < S; ++s) has_target.push_back(tl1[size_t(n)]);
    Value first = b.orOp(b.compare(s_iota, b.zerosLike(s_iota), Cmp::EQ),
                         b.andOp(b.compare(s_iota, b.constantF(1, DType::S64, ns), Cmp::EQ),
                                 constPred(b, has_target, ns)));
    Value la0 = b.select(first, lp0, ninf_ns);
    Value zero = b.constantInt(0, DType::S32);
    la_all = b.dynamicUpdateSlice(la_all, b.reshape(la0, {1, k.N, S}), {zero, zero, zero});
    std::vector<Value> res = b.forLoop(k.T - 1, {la0, la_all, k.lpg, k.skip}, [&](Builder& bb, Value i,
                                                                                const std::vector<Value>& a) {
      Value t = bb.add(i, bb.constantInt(1, DType::S32));
      Value prev = a[0];
      Value ninf = bb.constantF(-INFINITY, c, ns);
      Value la2 = shiftS(bb, prev, 1);
      Value la3 = bb.select(a[3], shiftS(bb, prev, 2), ninf);
      Value z = bb.constantInt(0, DType::S32);
      Value lpt = bb.reshape(bb.dynamicSlice(a[2], {t, z, z}, {1, k.N, S}), ns);
      Value cur = bb.add(logSumExp3(bb, prev, la2, la3), lpt);
      Value all = bb.dynamicUpdateSlice(a[1], bb.reshape(cur, {1, k.N, S}), {t, z, z});
      return std::vector<Value>{cur, all, a[2], a[3]};
    });
    la_all = res[1];
  }
  // Mask the unwritten part, then [N, T, S].
  std::vector<int64_t> mask;
  for (int64_t t = 0; t < k.T; ++t)
    for (int64_t n = 0; n < k.N; ++n)
      for (int64_t s = 0; s < S; ++s) mask.push_back(t < k.il[size_t(n)] && s <= 2 * k.tl[size_t(n)]);
  Value la = b.select(constPred(b, mask, tns), la_all, b.constantF(-INFINITY, c, tns));
  Value log_alpha = b.transpose(la, {1, 0, 2});
  // Each item's row at t = input_length - 1.
  std::vector<int64_t> rows;
  for (int64_t n = 0; n < k.N; ++n) rows.push_back(n * k.T + std::max<int64_t>(k.il[size_t(n)] - 1, 0));
  Value last = k.T > 0 ? takeAlong(b, b.reshape(log_alpha, {k.N * k.T, S}), 0, rows) : ninf_ns;
  std::vector<int64_t> at2, at1;
  for (int64_t x : k.tl) {
    at2.push_back(2 * x);
    at1.push_back(2 * x - 1);
  }
  auto pick = [&](const std::vector<int64_t>& at) {
    Value hit = b.compare(s_iota, b.broadcastInDim(b.constantI64s(at, DType::S64), ns, {0}), Cmp::EQ);
    return b.reduce(b.select(hit, last, ninf_ns), {1}, ReduceKind::Max);
  };
  Value l1 = pick(at2), l2 = pick(at1);  // l2 is -inf for an empty target
  Value ninf_n = b.constantF(-INFINITY, c, {k.N});
  Value m = b.max(l1, l2);
  m = b.select(b.compare(m, ninf_n, Cmp::EQ), b.zerosLike(m), m);
  Value ll = b.add(b.log(b.add(b.exp(b.sub(l1, m)), b.exp(b.sub(l2, m)))), m);
  std::vector<int64_t> empty_target, no_input;
  for (int64_t n = 0; n < k.N; ++n) {
    empty_target.push_back(k.tl[size_t(n)] == 0);
    no_input.push_back(k.il[size_t(n)] == 0);
  }
  ll = b.select(constPred(b, empty_target, {k.N}), l1, ll);
  // no input: likelihood 1 for an empty target, else 0
  Value none_ll = b.select(constPred(b, empty_target, {k.N}), b.zerosLike(ll), ninf_n);
  ll = b.select(constPred(b, no_input, {k.N}), none_ll, ll);
  return {b.neg(ll), log_alpha};
}

// _ctc_loss_backward(grad [N], log_probs, targets, input_lengths, target_lengths, neg_log_likelihood, log_alpha,
// blank, zero_infinity): the beta recursion backward over time (same loop shape), then per label the log-sum-exp
// of alpha + beta over the positions carrying it, and PyTorch's (exp(lp) - exp(lcab + nll - lp)) * grad.
std::vector<Value> ctcBackwardRule(Context& ctx) {
  Builder& b = ctx.b;
  Value la_in = ctx.tensor(6);
  int64_t S = la_in.shape()[2];
  Ctc k = ctcSetup(ctx, 1, 2, 3, 4, 7, S);
  bool zero_inf = ctx.toBool(8);
  DType c = k.c;
  Shape ns = {k.N, S}, tns = {k.T, k.N, S}, tnc = {k.T, k.N, k.C};
  Value lp = ctx.tensor(1);
  Value la = b.transpose(b.convert(la_in, c), {1, 0, 2});  // [T, N, S]
  // s + 1 and s + 2 transitions allowed at s (s < 2 tl, and s < 2 tl - 1 with differing labels)
  std::vector<int64_t> lt2, lt1;
  for (int64_t n = 0; n < k.N; ++n)
    for (int64_t s = 0; s < S; ++s) {
      lt2.push_back(s < 2 * k.tl[size_t(n)]);
      lt1.push_back(s < 2 * k.tl[size_t(n)] - 1);
    }
  Value next1 = constPred(b, lt2, ns);
  Value tp_next2 = S > 2 ? b.concatenate({b.sliceInDim(k.tp, 2, S, 1, 1), b.zeros({DType::S64, {k.N, 2}})}, 1)
                         : b.zeros({DType::S64, ns});
  Value next2 = b.andOp(constPred(b, lt1, ns), b.compare(tp_next2, k.tp, Cmp::NE));
  std::vector<int64_t> init_pos;
  for (int64_t n = 0; n < k.N; ++n)
    for (int64_t s = 0; s < S; ++s)
      init_pos.push_back(s == 2 * k.tl[size_t(n)] || (k.tl[size_t(n)] > 0 && s == 2 * k.tl[size_t(n)] - 1));
  Value init_at = constPred(b, init_pos, ns);
  Value lb_all = b.constantF(-INFINITY, c, tns);
  if (k.T > 0) {
    Value lb0 = b.constantF(-INFINITY, c, ns);
    std::vector<Value> res = b.forLoop(k.T, {lb0, lb_all, k.lpg, next1, next2, init_at}, [&](Builder& bb, Value i,
                                                                                      const std::vector<Value>& a) {
      Value t = bb.sub(bb.constantInt(k.T - 1, DType::S32), i);
      Value nxt = a[0];
      Value ninf = bb.constantF(-INFINITY, c, ns);
      Value z = bb.constantInt(0, DType::S32);
      Value lpt = bb.reshape(bb.dynamicSlice(a[2], {t, z, z}, {1, k.N, S}), ns);
      Value lb2 = bb.select(a[3], shiftS(bb, nxt, -1), ninf);
      Value lb3 = bb.select(a[4], shiftS(bb, nxt, -2), ninf);
      Value rec = bb.add(logSumExp3(bb, nxt, lb2, lb3), lpt);
      Value start = bb.select(a[5], lpt, ninf);
      Value at_last = timeMask(bb, t, k.il, -1, Cmp::EQ, S);
      Value before = timeMask(bb, t, k.il, -1, Cmp::LT, S);
      Value cur = bb.select(at_last, start, bb.select(before, rec, ninf));
      Value all = bb.dynamicUpdateSlice(a[1], bb.reshape(cur, {1, k.N, S}), {t, z, z});
      return std::vector<Value>{cur, all, a[2], a[3], a[4], a[5]};
    });
    lb_all = res[1];
  }
  std::vector<int64_t> mask;
  for (int64_t t = 0; t < k.T; ++t)
    for (int64_t n = 0; n < k.N; ++n)
      for (int64_t s = 0; s < S; ++s) mask.push_back(t < k.il[size_t(n)] && s <= 2 * k.tl[size_t(n)]);
  Value ninf_tns = b.constantF(-INFINITY, c, tns);
  Value lab = b.select(constPred(b, mask, tns), b.add(la, lb_all), ninf_tns);  // [T, N, S]
  // lcab[t, n, c] = log-sum-exp over s with tp[n, s] == c of lab[t, n, s]
  Shape tnsc = {k.T, k.N, S, k.C};
  Value oh = b.broadcastInDim(b.compare(b.broadcastInDim(k.tp, {k.N, S, k.C}, {0, 1}),
                                        b.iota({DType::S64, {k.N, S, k.C}}, 2), Cmp::EQ),
                              tnsc, {1, 2, 3});
  Value labc = b.broadcastInDim(lab, tnsc, {0, 1, 2});
  Value ninf_tnsc = b.constantF(-INFINITY, c, tnsc);
  Value mx = b.reduce(b.select(oh, labc, ninf_tnsc), {2}, ReduceKind::Max);  // [T, N, C]
  Value mxs = b.select(b.compare(mx, b.constantF(-INFINITY, c, tnc), Cmp::EQ), b.zerosLike(mx), mx);
  Value e = b.exp(b.sub(labc, b.broadcastInDim(mxs, tnsc, {0, 1, 3})));
  Value sum = b.reduce(b.select(oh, e, b.zeros({c, tnsc})), {2}, ReduceKind::Sum);
  Value lcab = b.add(b.log(sum), mxs);
  Value lpc = b.convert(lp, c);
  Value nll = b.broadcastInDim(b.convert(ctx.tensor(5), c), tnc, {1});
  Value gr = b.broadcastInDim(b.convert(ctx.tensor(0), c), tnc, {1});
  Value res = b.mul(b.sub(b.exp(lpc), b.exp(b.sub(b.add(lcab, nll), lpc))), gr);
  std::vector<int64_t> live;
  for (int64_t t = 0; t < k.T; ++t)
    for (int64_t n = 0; n < k.N; ++n)
      for (int64_t q = 0; q < k.C; ++q) live.push_back(t < k.il[size_t(n)]);
  Value keep = constPred(b, live, tnc);
  if (zero_inf) keep = b.andOp(keep, b.compare(nll, b.constantF(INFINITY, c, tnc), Cmp::NE));
  return {b.select(keep, res, b.zeros({c, tnc}))};
}

// PyTorch CPU implements these losses for floating inputs only: integer calls decline, and its kernel raises.
bool floatSelf(const Context& ctx) { return realDTypes(ctx) && shlo::isFloat(ctx.tensor(0).dtype()); }
bool floatOperands(const Context& ctx) { return realDTypes(ctx) && shlo::isFloat(lossType(ctx, 0, 1)); }
// multi-margin, multilabel-margin and CTC losses: CPU kernels for float32/float64 only.
bool f32or64(const Context& ctx, size_t i) {
  DType t = ctx.tensor(i).dtype();
  return realDTypes(ctx) && (t == DType::F32 || t == DType::F64);
}
// p is 1 or 2 (PyTorch raises otherwise)
bool marginP(const Context& ctx, size_t x_i, size_t p_i) {
  if (!f32or64(ctx, x_i)) return false;
  double p = ctx.staticDouble(p_i);
  return p == 1 || p == 2;
}

}  // namespace

void populateLosses(Registry& r) {
  r.add("aten::nll_loss_forward", nllForwardRule).accepts(floatSelf);
  r.add("aten::nll_loss2d_forward", nllForwardRule).accepts(floatSelf);
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
  r.add("aten::smooth_l1_loss", [](Context& ctx) { return smoothL1Rule(ctx, false); }).accepts(floatOperands);
  r.add("aten::smooth_l1_loss_backward", [](Context& ctx) { return smoothL1BackwardRule(ctx, false); })
      .accepts(realDTypes);
  r.add("aten::huber_loss", [](Context& ctx) { return smoothL1Rule(ctx, true); }).accepts(floatOperands);
  r.add("aten::huber_loss_backward", [](Context& ctx) { return smoothL1BackwardRule(ctx, true); }).accepts(realDTypes);
  r.add("aten::multi_margin_loss", multiMarginRule).staticArgs({"p"}).accepts([](const Context& ctx) {
    return marginP(ctx, 0, 2);
  });
  r.add("aten::multi_margin_loss_backward", multiMarginBackwardRule).staticArgs({"p"}).accepts([](const Context& ctx) {
    return marginP(ctx, 1, 3);
  });
  r.add("aten::multilabel_margin_loss_forward", multilabelRule).accepts([](const Context& ctx) {
    return f32or64(ctx, 0);
  });
  r.add("aten::multilabel_margin_loss_backward", multilabelBackwardRule).accepts([](const Context& ctx) {
    return f32or64(ctx, 1);
  });
  r.add("aten::_ctc_loss", ctcRule).accepts([](const Context& ctx) { return f32or64(ctx, 0); });
  r.add("aten::_ctc_loss_backward", ctcBackwardRule).accepts([](const Context& ctx) { return f32or64(ctx, 1); });
}

}  // namespace torch_tpu::lowering
