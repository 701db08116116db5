// Norm family: group norm, batch norm (every ATen variant: native_batch_norm, _native_batch_norm_legit(_functional,
// _no_training, .no_stats), _batch_norm_with_update(_functional), _batch_norm_no_update, batch_norm_update_stats)
// and their backward, native_layer_norm and _fused_rms_norm and their backward.
//
// Statistics and normalization run in accType (f32 for bf16/f16) and round once, like PyTorch CPU's kernels.
// eps and momentum are program inputs (one program serves every value).
//
// Running statistics: _native_batch_norm_legit / _batch_norm_with_update declare that they write running_mean and
// running_var without returning them; their rules return the new statistics after the schema's results and the
// eager kernel writes them. native_batch_norm updates them too although its schema does not say so: its rule
// computes the results only (PyTorch routes module calls through the declared variants).
#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

bool wantedOut(const Context& ctx, const std::vector<bool>& mask, size_t k) {
  return (k >= mask.size() || mask[k]) && k < ctx.outputs.size() && ctx.outputs[k].dtype != DType::Invalid;
}

// Zeros of result k's expected type (empty save_mean/save_invstd of evaluation-mode batch norm, reserve buffers).
Value emptyOut(Context& ctx, size_t k) {
  TensorType t = ctx.outputs[k];
  if (t.dtype == DType::Invalid) t.dtype = DType::F32;
  return ctx.b.zeros(t);
}

// ---------------------------------------------------------------------------------------------------------------
// group norm

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean [N, G], rstd [N, G])
std::vector<Value> groupNormRule(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  int64_t N = ctx.toInt(3), C = ctx.toInt(4), HW = ctx.toInt(5), G = ctx.toInt(6);
  if (G <= 0 || C % G != 0) ctx.fail("channels must be divisible by groups");
  DType c = accType(x.dtype());
  Shape gshape = {N, G, (C / G) * HW};
  Value xg = b.reshape(b.convert(x, c), gshape);
  double n = double((C / G) * HW);
  Value mean = b.div(b.reduce(xg, {2}, ReduceKind::Sum), b.constantF(n, c, {N, G}));
  Value d = b.sub(xg, b.broadcastInDim(mean, gshape, {0, 1}));
  Value var = b.div(b.reduce(b.mul(d, d), {2}, ReduceKind::Sum), b.constantF(n, c, {N, G}));
  Value rstd = b.rsqrt(b.add(var, b.broadcastTo(scalarArg(ctx, 7, c), {N, G})));
  Shape cshape = {N, C, HW};
  Value y;
  if (ctx.has(1) || ctx.has(2)) {
    // PyTorch CPU's form: y = x * scale + shift with scale = rstd * weight, shift = bias - mean * scale per (n, c)
    // (the same roundings, and the same NaN where an infinite weight meets the mean)
    Shape gc = {N, G, C / G};
    Value scale = b.broadcastInDim(rstd, gc, {0, 1});
    if (ctx.has(1)) scale = b.mul(scale, b.reshape(b.broadcastInDim(b.convert(ctx.tensor(1), c), {N, C}, {1}), gc));
    Value shift = b.neg(b.mul(scale, b.broadcastInDim(mean, gc, {0, 1})));
    if (ctx.has(2)) shift = b.add(shift, b.reshape(b.broadcastInDim(b.convert(ctx.tensor(2), c), {N, C}, {1}), gc));
    scale = b.reshape(scale, {N, C});
    shift = b.reshape(shift, {N, C});
    Value xc = b.reshape(b.convert(x, c), cshape);
    y = b.add(b.mul(xc, b.broadcastInDim(scale, cshape, {0, 1})), b.broadcastInDim(shift, cshape, {0, 1}));
  } else {
    y = b.reshape(b.mul(d, b.broadcastInDim(rstd, gshape, {0, 1})), cshape);
  }
  DType st = ctx.outputs[1].dtype != DType::Invalid ? ctx.outputs[1].dtype : x.dtype();
  return {b.convert(b.reshape(y, x.shape()), x.dtype()), b.convert(mean, st), b.convert(rstd, st)};
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group, output_mask)
std::vector<Value> groupNormBackwardRule(Context& ctx) {
  Builder& b = ctx.b;
  Value g = ctx.tensor(0), x = ctx.tensor(1);
  int64_t N = ctx.toInt(5), C = ctx.toInt(6), HW = ctx.toInt(7), G = ctx.toInt(8);
  std::vector<bool> mask = ctx.arg(9).bools;
  DType c = accType(x.dtype());
  Shape cshape = {N, C, HW}, g4 = {N, G, C / G, HW};
  Value gc = b.reshape(b.convert(g, c), cshape), xc = b.reshape(b.convert(x, c), cshape);
  Value mean = b.broadcastInDim(b.reshape(b.convert(ctx.tensor(2), c), {N, G}), g4, {0, 1});
  Value rstd = b.broadcastInDim(b.reshape(b.convert(ctx.tensor(3), c), {N, G}), g4, {0, 1});
  Value xhat = b.reshape(b.mul(b.sub(b.reshape(xc, g4), mean), rstd), cshape);
  std::vector<Value> res(3);
  if (wantedOut(ctx, mask, 0)) {
    Value gw = ctx.has(4) ? b.mul(gc, b.broadcastInDim(b.convert(ctx.tensor(4), c), cshape, {1})) : gc;
    Value gw4 = b.reshape(gw, g4), xh4 = b.reshape(xhat, g4);
    double n = double((C / G) * HW);
    Value inv_n = b.constantF(1.0 / n, c, {N, G});
    Value m1 = b.broadcastInDim(b.mul(b.reduce(gw4, {2, 3}, ReduceKind::Sum), inv_n), g4, {0, 1});
    Value m2 = b.broadcastInDim(b.mul(b.reduce(b.mul(gw4, xh4), {2, 3}, ReduceKind::Sum), inv_n), g4, {0, 1});
    Value dx = b.mul(rstd, b.sub(b.sub(gw4, m1), b.mul(xh4, m2)));
    res[0] = b.convert(b.reshape(dx, x.shape()), ctx.outputs[0].dtype);
  }
  if (wantedOut(ctx, mask, 1)) res[1] = b.convert(b.reduce(b.mul(gc, xhat), {0, 2}, ReduceKind::Sum), ctx.outputs[1].dtype);
  if (wantedOut(ctx, mask, 2)) res[2] = b.convert(b.reduce(gc, {0, 2}, ReduceKind::Sum), ctx.outputs[2].dtype);
  return res;
}

// ---------------------------------------------------------------------------------------------------------------
// batch norm

std::vector<int64_t> bnDims(const Value& x) {  // every dim but the channel dim 1
  std::vector<int64_t> d = {0};
  for (int64_t k = 2; k < x.rank(); ++k) d.push_back(k);
  return d;
}

Value perChannel(Builder& b, Value v, const Shape& shape) { return b.broadcastInDim(v, shape, {1}); }

struct BnIdx {  // argument indices (-1: absent from the schema)
  int weight = 1, bias = 2, rmean = -1, rvar = -1, training = -1, momentum = -1, eps = -1;
};

struct BnOut {
  Value y, save_mean, save_invstd, new_rmean, new_rvar;  // stats in the compute dtype
};

// training: batch statistics (and running-stat updates when running stats are given); else running statistics.
BnOut batchNorm(Context& ctx, const BnIdx& ix, bool training) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  DType c = accType(x.dtype());
  Value xc = b.convert(x, c);
  std::vector<int64_t> dims = bnDims(x);
  int64_t C = x.rank() > 1 ? x.shape()[1] : 1;
  Shape cs = {C};
  Value eps = b.broadcastTo(scalarArg(ctx, size_t(ix.eps), c), cs);
  bool has_rm = ix.rmean >= 0 && ctx.has(size_t(ix.rmean));
  bool has_rv = ix.rvar >= 0 && ctx.has(size_t(ix.rvar));
  BnOut o;
  Value mean, invstd;
  if (training) {
    double n = double(reducedCount(x.shape(), dims));
    mean = b.div(b.reduce(xc, dims, ReduceKind::Sum), b.constantF(n, c, cs));
    Value d = b.sub(xc, perChannel(b, mean, x.shape()));
    Value sq = b.reduce(b.mul(d, d), dims, ReduceKind::Sum);
    Value var = b.div(sq, b.constantF(n, c, cs));
    invstd = b.rsqrt(b.add(var, eps));
    o.save_mean = mean;
    o.save_invstd = invstd;
    if (has_rm || has_rv) {
      Value m = b.broadcastTo(scalarArg(ctx, size_t(ix.momentum), c), cs);
      Value keep = b.sub(b.constantF(1, c, cs), m);
      if (has_rm) {
        Value rm = ctx.tensor(size_t(ix.rmean));
        o.new_rmean = b.convert(b.add(b.mul(keep, b.convert(rm, c)), b.mul(m, mean)), rm.dtype());
      }
      if (has_rv) {
        Value rv = ctx.tensor(size_t(ix.rvar));
        Value unbiased = b.div(sq, b.constantF(n > 1 ? n - 1 : n, c, cs));
        o.new_rvar = b.convert(b.add(b.mul(keep, b.convert(rv, c)), b.mul(m, unbiased)), rv.dtype());
      }
    }
  } else {
    if (!has_rm || !has_rv) ctx.fail("evaluation mode needs running_mean and running_var");
    mean = b.convert(ctx.tensor(size_t(ix.rmean)), c);
    invstd = b.rsqrt(b.add(b.convert(ctx.tensor(size_t(ix.rvar)), c), eps));
  }
  Value y = b.mul(b.sub(xc, perChannel(b, mean, x.shape())), perChannel(b, invstd, x.shape()));
  if (ctx.has(size_t(ix.weight))) y = b.mul(y, perChannel(b, b.convert(ctx.tensor(size_t(ix.weight)), c), x.shape()));
  if (ctx.has(size_t(ix.bias))) y = b.add(y, perChannel(b, b.convert(ctx.tensor(size_t(ix.bias)), c), x.shape()));
  o.y = b.convert(y, x.dtype());
  return o;
}

// The three standard results (out, save_mean, save_invstd); evaluation mode gives empty statistics as PyTorch does.
std::vector<Value> bnResults(Context& ctx, const BnOut& o) {
  std::vector<Value> res = {o.y};
  for (size_t k = 1; k < 3; ++k) {
    const Value& s = k == 1 ? o.save_mean : o.save_invstd;
    if (k >= ctx.outputs.size()) break;
    if (s.valid() && s.shape() == ctx.outputs[k].shape)
      res.push_back(s);
    else
      res.push_back(emptyOut(ctx, k));
  }
  return res;
}

// Running statistics as results (functional variants): the updated ones in training, else the inputs.
void appendRunning(Context& ctx, const BnIdx& ix, const BnOut& o, std::vector<Value>& res) {
  res.push_back(o.new_rmean.valid() ? o.new_rmean : ctx.tensor(size_t(ix.rmean)));
  res.push_back(o.new_rvar.valid() ? o.new_rvar : ctx.tensor(size_t(ix.rvar)));
}

// native_batch_norm_backward(grad_out, input, weight?, running_mean?, running_var?, save_mean?, save_invstd?,
//                            bool train, float eps, bool[3] output_mask)
// batch_norm_backward(grad_out, input, weight, running_mean?, running_var?, save_mean?, save_var?, bool update,
//                     float eps, bool[3] output_mask, Tensor reserve) -- same positions.
std::vector<Value> batchNormBackwardRule(Context& ctx) {
  Builder& b = ctx.b;
  Value g = ctx.tensor(0), x = ctx.tensor(1);
  bool train = ctx.toBool(7);
  std::vector<bool> mask = ctx.arg(9).bools;
  DType c = accType(x.dtype());
  std::vector<int64_t> dims = bnDims(x);
  int64_t C = x.rank() > 1 ? x.shape()[1] : 1;
  Shape cs = {C};
  Value gc = b.convert(g, c), xc = b.convert(x, c);
  Value mean, invstd;
  if (train) {
    mean = b.convert(ctx.tensor(5), c);
    invstd = b.convert(ctx.tensor(6), c);
  } else {
    mean = b.convert(ctx.tensor(3), c);
    invstd = b.rsqrt(b.add(b.convert(ctx.tensor(4), c), b.broadcastTo(scalarArg(ctx, 8, c), cs)));
  }
  Value xhat = b.mul(b.sub(xc, perChannel(b, mean, x.shape())), perChannel(b, invstd, x.shape()));
  Value sum_g = b.reduce(gc, dims, ReduceKind::Sum);
  Value sum_gx = b.reduce(b.mul(gc, xhat), dims, ReduceKind::Sum);
  Value w = ctx.has(2) ? b.convert(ctx.tensor(2), c) : b.constantF(1, c, cs);
  std::vector<Value> res(3);
  if (wantedOut(ctx, mask, 0)) {
    Value scale = b.mul(w, invstd);  // per channel
    Value dx;
    if (train) {
      double n = double(reducedCount(x.shape(), dims));
      Value inv_n = b.constantF(1.0 / n, c, cs);
      Value mg = perChannel(b, b.mul(sum_g, inv_n), x.shape());
      Value mgx = perChannel(b, b.mul(sum_gx, inv_n), x.shape());
      dx = b.mul(perChannel(b, scale, x.shape()), b.sub(b.sub(gc, mg), b.mul(xhat, mgx)));
    } else {
      dx = b.mul(gc, perChannel(b, scale, x.shape()));
    }
    res[0] = b.convert(dx, ctx.outputs[0].dtype);
  }
  if (wantedOut(ctx, mask, 1)) res[1] = b.convert(sum_gx, ctx.outputs[1].dtype);
  if (wantedOut(ctx, mask, 2)) res[2] = b.convert(sum_g, ctx.outputs[2].dtype);
  return res;
}

// PyTorch CPU's parameter dtypes: weight, bias and running statistics share the input's dtype, or (mixed type) the
// input is bf16/f16 and all of them are f32. Other calls decline and the CPU kernel raises its error.
bool bnDTypes(const Context& ctx) {
  if (!realDTypes(ctx)) return false;
  DType x = ctx.tensor(0).dtype(), p = DType::Invalid;
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    const Arg& a = ctx.args[i];
    if (a.kind != Arg::Kind::Tensor || !a.tensor.valid()) continue;
    if (p != DType::Invalid && a.tensor.dtype() != p) return false;
    p = a.tensor.dtype();
  }
  return p == DType::Invalid || p == x || ((x == DType::BF16 || x == DType::F16) && p == DType::F32);
}

// Declines training calls of ops whose running-statistics writes the eager kernel cannot express (see the top).
bool noWrittenStats(const Context& ctx, int training_arg) {
  if (!bnDTypes(ctx)) return false;
  return training_arg >= 0 && !ctx.toBool(size_t(training_arg));
}

// ---------------------------------------------------------------------------------------------------------------
// rms norm

// _fused_rms_norm(input, normalized_shape, weight?, eps?) -> (out, rstd)
std::vector<Value> rmsNormRule(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  int64_t axis = x.rank() - int64_t(ctx.toInts(1).size());
  std::vector<int64_t> dims = range(axis, x.rank());
  DType c = accType(x.dtype());
  Value xc = b.convert(x, c);
  Shape rs = reducedShape(x.shape(), dims, false);
  double n = double(reducedCount(x.shape(), dims));
  Value ms = b.div(b.reduce(b.mul(xc, xc), dims, ReduceKind::Sum), b.constantF(n, c, rs));
  // eps absent: torch.finfo(input.dtype).eps
  Value eps;
  if (ctx.has(3)) {
    eps = scalarArg(ctx, 3, c);
  } else {
    double e = x.dtype() == DType::BF16 ? 0.0078125 : x.dtype() == DType::F16 ? 0.0009765625
               : x.dtype() == DType::F64 ? 2.220446049250313e-16 : 1.1920928955078125e-07;
    eps = b.constant(e, c);
  }
  Value rstd = b.rsqrt(b.add(ms, b.broadcastTo(eps, rs)));
  Value y = b.mul(xc, expandReduced(b, rstd, x.shape(), dims));
  if (ctx.has(2)) {
    Value w = b.convert(ctx.tensor(2), c);
    y = b.mul(y, b.broadcastInDim(w, x.shape(), range(axis, x.rank())));
  }
  Value rstd_out = b.reshape(rstd, reducedShape(x.shape(), dims, true));
  if (ctx.outputs.size() > 1 && ctx.outputs[1].dtype != DType::Invalid && rstd_out.shape() != ctx.outputs[1].shape)
    rstd_out = b.reshape(rstd, ctx.outputs[1].shape);
  return {b.convert(y, x.dtype()), rstd_out};
}

// _fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight?, bool[2] output_mask) -> (dx, dw)
std::vector<Value> rmsNormBackwardRule(Context& ctx) {
  Builder& b = ctx.b;
  Value g = ctx.tensor(0), x = ctx.tensor(1);
  int64_t axis = x.rank() - int64_t(ctx.toInts(2).size());
  std::vector<int64_t> dims = range(axis, x.rank()), batch = range(0, axis);
  std::vector<bool> mask = ctx.arg(5).bools;
  DType c = accType(x.dtype());
  Value gc = b.convert(g, c), xc = b.convert(x, c);
  Shape rs = reducedShape(x.shape(), dims, false);
  Value rstd = b.reshape(b.convert(ctx.tensor(3), c), rs);
  Value rstd_b = expandReduced(b, rstd, x.shape(), dims);
  std::vector<Value> res(2);
  if (wantedOut(ctx, mask, 0)) {
    Value gw = ctx.has(4) ? b.mul(gc, b.broadcastInDim(b.convert(ctx.tensor(4), c), x.shape(), dims)) : gc;
    double n = double(reducedCount(x.shape(), dims));
    // dx = rstd * (gw - x * rstd^2 * mean(gw * x))
    Value m = b.div(b.reduce(b.mul(gw, xc), dims, ReduceKind::Sum), b.constantF(n, c, rs));
    Value coef = expandReduced(b, b.mul(b.mul(rstd, rstd), m), x.shape(), dims);
    res[0] = b.convert(b.mul(rstd_b, b.sub(gw, b.mul(xc, coef))), ctx.outputs[0].dtype);
  }
  if (wantedOut(ctx, mask, 1)) {
    Value xhat = b.mul(xc, rstd_b);
    Value s = b.mul(gc, xhat);
    if (!batch.empty()) s = b.reduce(s, batch, ReduceKind::Sum);
    res[1] = b.convert(s, ctx.outputs[1].dtype);
  }
  return res;
}

// ---------------------------------------------------------------------------------------------------------------
// layer norm

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


// _weight_norm_interface(v, g, dim) (torch.nn.utils.weight_norm): norm = ||v|| over every dimension but `dim`
// (kept as size 1), w = v * (g / norm); computed in accType, norm returned in it (PyTorch's float norms for bf16).
std::vector<Value> weightNormRule(Context& ctx) {
  Builder& b = ctx.b;
  Value v = ctx.tensor(0), g = ctx.tensor(1);
  int64_t n = v.rank(), dim = ctx.has(2) ? ctx.toInt(2) : 0;
  if (dim < 0) dim += n;
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < n; ++d)
    if (d != dim) dims.push_back(d);
  DType c = accType(v.dtype());
  Value vc = b.convert(v, c);
  Value norm = b.sqrt(sumDims(b, b.mul(vc, vc), dims));  // (v.shape[dim],) or 0-d
  Shape keep(size_t(n), 1);
  if (n > 0) keep[size_t(dim)] = v.shape()[size_t(dim)];
  Value normKeep = b.reshape(norm, keep);
  Value scale = b.div(b.convert(b.reshape(g, keep), c), normKeep);
  Value w = b.mul(vc, b.broadcastTo(scale, v.shape()));
  return {b.convert(w, ctx.outputs[0].dtype), b.convert(b.reshape(normKeep, ctx.outputs[1].shape), ctx.outputs[1].dtype)};
}

// _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim): with d = sum(grad_w * v) over every
// dimension but `dim`, grad_v = g / norm * (grad_w - v * d / norm^2), grad_g = d / norm.
std::vector<Value> weightNormBackwardRule(Context& ctx) {
  Builder& b = ctx.b;
  Value gw = ctx.tensor(0), v = ctx.tensor(1), g = ctx.tensor(2), nrm = ctx.tensor(3);
  int64_t n = v.rank(), dim = ctx.toInt(4);
  if (dim < 0) dim += n;
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < n; ++d)
    if (d != dim) dims.push_back(d);
  DType c = accType(v.dtype());
  Shape keep(size_t(n), 1);
  if (n > 0) keep[size_t(dim)] = v.shape()[size_t(dim)];
  Value vc = b.convert(v, c), gwc = b.convert(gw, c);
  Value norm = b.reshape(b.convert(nrm, c), keep), gk = b.reshape(b.convert(g, c), keep);
  Value d = b.reshape(sumDims(b, b.mul(gwc, vc), dims), keep);
  Value proj = b.div(d, b.mul(norm, norm));
  Value gv = b.mul(b.broadcastTo(b.div(gk, norm), v.shape()), b.sub(gwc, b.mul(vc, b.broadcastTo(proj, v.shape()))));
  Value gg = b.div(d, norm);
  return {b.convert(gv, ctx.outputs[0].dtype), b.convert(b.reshape(gg, ctx.outputs[1].shape), ctx.outputs[1].dtype)};
}
}  // namespace

void populateNorm(Registry& r) {
  r.add("aten::native_group_norm", groupNormRule).accepts(realDTypes);
  r.add("aten::_weight_norm_interface", weightNormRule).accepts(realDTypes);
  r.add("aten::_weight_norm_interface_backward", weightNormBackwardRule).accepts(realDTypes);
  r.add("aten::native_group_norm_backward", groupNormBackwardRule).accepts(realDTypes);

  // native_batch_norm(input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
  r.add("aten::native_batch_norm", [](Context& ctx) {
    BnIdx ix{1, 2, 3, 4, 5, 6, 7};
    return bnResults(ctx, batchNorm(ctx, ix, ctx.toBool(5)));
  }).accepts(bnDTypes);
  // _native_batch_norm_legit(input, weight?, bias?, running_mean!, running_var!, training, momentum, eps)
  //   The eager kernel writes the running statistics from the two values after the schema's results.
  r.add("aten::_native_batch_norm_legit", [](Context& ctx) {
    BnIdx ix{1, 2, 3, 4, 5, 6, 7};
    BnOut o = batchNorm(ctx, ix, ctx.toBool(5));
    std::vector<Value> res = bnResults(ctx, o);
    appendRunning(ctx, ix, o, res);
    return res;
  }).accepts(bnDTypes);
  // _native_batch_norm_legit.no_stats(input, weight?, bias?, training, momentum, eps)
  r.add("aten::_native_batch_norm_legit.no_stats", [](Context& ctx) {
    BnIdx ix{1, 2, -1, -1, 3, 4, 5};
    return bnResults(ctx, batchNorm(ctx, ix, true));
  }).accepts(bnDTypes);
  // _native_batch_norm_legit_no_training(input, weight?, bias?, running_mean, running_var, momentum, eps)
  r.add("aten::_native_batch_norm_legit_no_training", [](Context& ctx) {
    BnIdx ix{1, 2, 3, 4, -1, 5, 6};
    return bnResults(ctx, batchNorm(ctx, ix, false));
  }).accepts(bnDTypes);
  // _native_batch_norm_legit_functional(input, weight?, bias?, running_mean, running_var, training, momentum, eps)
  //   -> (out, save_mean, save_invstd, running_mean_out, running_var_out)
  r.add("aten::_native_batch_norm_legit_functional", [](Context& ctx) {
    BnIdx ix{1, 2, 3, 4, 5, 6, 7};
    BnOut o = batchNorm(ctx, ix, ctx.toBool(5));
    std::vector<Value> res = bnResults(ctx, o);
    appendRunning(ctx, ix, o, res);
    return res;
  }).accepts(bnDTypes);
  // _batch_norm_with_update(input, weight?, bias?, running_mean!, running_var!, momentum, eps)
  //   -> (out, save_mean, save_invstd, reserve), then the written running statistics; its functional form returns
  //   the same values (running_mean_out, running_var_out last).
  auto withUpdate = [](Context& ctx) {
    BnIdx ix{1, 2, 3, 4, -1, 5, 6};
    BnOut o = batchNorm(ctx, ix, true);
    std::vector<Value> res = bnResults(ctx, o);
    res.push_back(emptyOut(ctx, 3));
    appendRunning(ctx, ix, o, res);
    return res;
  };
  r.add("aten::_batch_norm_with_update", withUpdate).accepts(bnDTypes);
  r.add("aten::_batch_norm_with_update_functional", withUpdate).accepts(bnDTypes);
  // _batch_norm_no_update(input, weight?, bias?, running_mean?, running_var?, momentum, eps)
  //   -> (out, save_mean, save_invstd, reserve); without running stats it normalizes with batch statistics.
  r.add("aten::_batch_norm_no_update", [](Context& ctx) {
    BnIdx ix{1, 2, 3, 4, -1, 5, 6};
    bool stats = ctx.has(3) && ctx.has(4);
    std::vector<Value> res = bnResults(ctx, batchNorm(ctx, ix, !stats));
    res.push_back(emptyOut(ctx, 3));
    return res;
  }).accepts(bnDTypes);
  r.add("aten::native_batch_norm_backward", batchNormBackwardRule).accepts(realDTypes);
  r.add("aten::batch_norm_backward", batchNormBackwardRule).accepts(realDTypes);
  // batch_norm_update_stats(input, running_mean?, running_var?, momentum) -> (mean, unbiased var)
  r.add("aten::batch_norm_update_stats", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    DType c = accType(x.dtype());
    Value xc = b.convert(x, c);
    std::vector<int64_t> dims = bnDims(x);
    Shape cs = {x.shape()[1]};
    double n = double(reducedCount(x.shape(), dims));
    Value mean = b.div(b.reduce(xc, dims, ReduceKind::Sum), b.constantF(n, c, cs));
    Value d = b.sub(xc, perChannel(b, mean, x.shape()));
    Value var = b.div(b.reduce(b.mul(d, d), dims, ReduceKind::Sum), b.constantF(n > 1 ? n - 1 : n, c, cs));
    return {mean, var};
  }).accepts(realDTypes);

  r.add("aten::_fused_rms_norm", rmsNormRule).accepts(realDTypes);
  r.add("aten::_fused_rms_norm_backward", rmsNormBackwardRule).accepts(realDTypes);

  r.add("aten::native_layer_norm", layerNormRule).accepts(realDTypes);
  r.add("aten::native_layer_norm_backward", layerNormBackwardRule).accepts(realDTypes);
}

}  // namespace torch_tpu::lowering
