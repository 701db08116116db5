// Reduction family: sum/mean/prod, amax/amin/max/min (NaN-propagating), argmax/argmin, any/all, var/std,
// vector norms, logsumexp, cumulative sums/products.
//
// Accumulation follows PyTorch CPU: bf16/f16 accumulate in f32 (accType) and round once; sum/prod of bool and
// integer tensors give int64 unless a dtype is given; mean/var/std only take floating tensors.
#include <cmath>
#include <limits>

#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

using shlo::Cmp;
using shlo::isFloat;

bool optBool(const Context& ctx, size_t i) { return ctx.has(i) && ctx.toBool(i); }

// dtype of sum/prod/cumsum: the dtype argument, else int64 for bool/integers, else the input dtype.
DType sumType(const Context& ctx, size_t dtype_arg, DType in) {
  if (ctx.has(dtype_arg) && ctx.arg(dtype_arg).kind == Arg::Kind::ScalarType) return ctx.arg(dtype_arg).dtype;
  return (in == DType::Pred || shlo::isInteger(in)) ? DType::S64 : in;
}

std::vector<int64_t> allDims(int64_t rank) {
  std::vector<int64_t> d;
  for (int64_t k = 0; k < rank; ++k) d.push_back(k);
  return d;
}

// sum-like rules: (self, dim?, keepdim, dtype?) or the full forms (self, dtype?).
std::vector<Value> sumRule(Context& ctx, bool full, ReduceKind kind, bool mean) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  std::vector<int64_t> dims = full ? allDims(x.rank()) : reduceDims(ctx, 1, x.rank());
  bool keep = !full && optBool(ctx, 2);
  DType out = sumType(ctx, full ? 1 : 3, x.dtype());
  if (mean && !(ctx.has(full ? 1 : 3))) out = x.dtype();
  DType acc = accType(out);
  if (acc == DType::Pred) acc = DType::S64;
  Value v = b.convert(x, acc);
  Value r = dims.empty() ? v : b.reduce(v, dims, kind);
  if (mean) r = b.div(r, b.constantF(double(reducedCount(x.shape(), dims)), acc, r.shape()));
  return {keepDims(b, b.convert(r, out), x.shape(), dims, keep)};
}

bool floatInput(const Context& ctx) { return realDTypes(ctx) && isFloat(ctx.tensor(0).dtype()); }

void addMean(Registry& r, const std::string& op, bool full) {
  Rule rule;
  rule.op = op;
  rule.fn = [full](Context& ctx) { return sumRule(ctx, full, ReduceKind::Sum, true); };
  // mean of integers raises in PyTorch; let CPU say so. A float dtype argument makes it legal.
  rule.accepts = [full](const Context& ctx) {
    size_t di = full ? 1 : 3;
    return realDTypes(ctx) && (isFloat(ctx.tensor(0).dtype()) ||
                               (ctx.has(di) && ctx.arg(di).kind == Arg::Kind::ScalarType && isFloat(ctx.arg(di).dtype)));
  };
  r.add(std::move(rule));
}

// amax/amin over a dim list (empty = all), max/min over everything.
std::vector<Value> extremeRule(Context& ctx, bool full, bool is_max) {
  Value x = ctx.tensor(0);
  std::vector<int64_t> dims = full ? allDims(x.rank()) : reduceDims(ctx, 1, x.rank());
  bool keep = !full && optBool(ctx, 2);
  Value r = reduceNan(ctx.b, x, dims, is_max ? ReduceKind::Max : ReduceKind::Min);
  return {keepDims(ctx.b, r, x.shape(), dims, keep)};
}

// (values, indices) of the max/min along `dim`. Bool inputs are compared as integers.
std::vector<Value> argExtreme(Builder& b, Value x, int64_t dim, bool is_max) {
  Value xv = x.dtype() == DType::Pred ? b.convert(x, DType::S32) : x;
  Value idx = b.iota({DType::S64, xv.shape()}, dim);
  auto res = b.argReduce(xv, idx, dim, is_max);
  res[0] = b.convert(res[0], x.dtype());
  return res;
}

std::vector<Value> argRule(Context& ctx, bool is_max) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  bool keep = optBool(ctx, 2);
  if (!ctx.has(1)) {  // over the flattened tensor
    Value flat = b.reshape(x, {x.type.numel()});
    Value i = argExtreme(b, flat, 0, is_max)[1];
    return {keep ? b.reshape(i, Shape(x.rank(), 1)) : i};
  }
  if (x.rank() == 0) return {b.constantInt(0, DType::S64)};
  int64_t d = normDim(ctx, ctx.toInt(1), x.rank());
  Value i = argExtreme(b, x, d, is_max)[1];
  return {keepDims(b, i, x.shape(), {d}, keep)};
}

std::vector<Value> maxDimRule(Context& ctx, bool is_max) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  bool keep = optBool(ctx, 2);
  if (x.rank() == 0) return {x, b.constantInt(0, DType::S64)};
  int64_t d = normDim(ctx, ctx.toInt(1), x.rank());
  auto res = argExtreme(b, x, d, is_max);
  return {keepDims(b, res[0], x.shape(), {d}, keep), keepDims(b, res[1], x.shape(), {d}, keep)};
}

// any/all: (self), (self, int dim, keepdim), (self, int[]? dim, keepdim). uint8 inputs give uint8 (as PyTorch).
std::vector<Value> anyAllRule(Context& ctx, bool any, int form) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  Value p = x.dtype() == DType::Pred ? x : b.compare(x, b.zerosLike(x), Cmp::NE);
  std::vector<int64_t> dims = form == 0 ? allDims(x.rank()) : reduceDims(ctx, 1, x.rank());
  bool keep = form != 0 && optBool(ctx, 2);
  Value r = dims.empty() ? p : b.reduce(p, dims, any ? ReduceKind::Or : ReduceKind::And);
  r = keepDims(b, r, x.shape(), dims, keep);
  if (x.dtype() == DType::U8) r = b.convert(r, DType::U8);
  return {r};
}

// var/std with correction (self, dim?, correction?, keepdim): returns {var or std, mean}.
std::vector<Value> varRule(Context& ctx, bool take_sqrt) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  std::vector<int64_t> dims = reduceDims(ctx, 1, x.rank());
  bool keep = optBool(ctx, 3);
  DType out = x.dtype();
  DType c = accType(out);
  Value xc = b.convert(x, c);
  double n = double(reducedCount(x.shape(), dims));
  Value sum = dims.empty() ? xc : b.reduce(xc, dims, ReduceKind::Sum);
  Value mean = b.div(sum, b.constantF(n, c, sum.shape()));
  Value d = b.sub(xc, expandReduced(b, mean, x.shape(), dims));
  Value ss = b.mul(d, d);
  if (!dims.empty()) ss = b.reduce(ss, dims, ReduceKind::Sum);
  Value corr = ctx.has(2) ? scalarArg(ctx, 2, c) : b.constant(1, c);
  Value denom = b.max(b.sub(b.constant(n, c), corr), b.constant(0, c));
  Value var = b.div(ss, b.broadcastTo(denom, ss.shape()));
  if (take_sqrt) var = b.sqrt(var);
  return {keepDims(b, b.convert(var, out), x.shape(), dims, keep),
          keepDims(b, b.convert(mean, out), x.shape(), dims, keep)};
}

// Vector p-norm over dims, computed in accType(out).
Value vectorNorm(Builder& b, Value x, double ord, const std::vector<int64_t>& dims, DType out) {
  Value a = b.abs(b.convert(x, accType(out)));
  auto sum = [&](Value v) { return dims.empty() ? v : b.reduce(v, dims, ReduceKind::Sum); };
  Value r;
  if (std::isinf(ord)) r = reduceNan(b, a, dims, ord > 0 ? ReduceKind::Max : ReduceKind::Min);
  else if (ord == 0) r = sum(b.convert(b.compare(a, b.zerosLike(a), Cmp::NE), a.dtype()));
  else if (ord == 1) r = sum(a);
  else if (ord == 2) r = b.sqrt(sum(b.mul(a, a)));
  else r = b.pow(sum(b.pow(a, cst(b, ord, a))), b.constantF(1.0 / ord, a.dtype(), reducedShape(a.shape(), dims, false)));
  return b.convert(r, out);
}

// Inclusive scan along `dim` with a reduce_window (window = the dimension's size, padded low).
Value scan(Builder& b, Value x, int64_t dim, ReduceKind kind) {
  if (x.rank() == 0) return x;
  int64_t n = x.shape()[dim];
  if (n == 0) return x;
  std::vector<int64_t> window(x.rank(), 1), strides(x.rank(), 1), dil(x.rank(), 1);
  std::vector<std::pair<int64_t, int64_t>> pad(x.rank(), {0, 0});
  window[dim] = n;
  pad[dim] = {n - 1, 0};
  double init = kind == ReduceKind::Prod ? 1.0 : 0.0;
  return b.reduceWindow(x, b.constant(init, x.dtype()), kind, window, strides, dil, dil, pad);
}

std::vector<Value> cumRule(Context& ctx, ReduceKind kind) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  DType out = sumType(ctx, 2, x.dtype());
  DType acc = accType(out);
  if (acc == DType::Pred) acc = DType::S64;
  int64_t d = normDim(ctx, ctx.toInt(1), x.rank());
  return {b.convert(scan(b, b.convert(x, acc), d, kind), out)};
}

}  // namespace

void populateReduction(Registry& r) {
  addReal(r, "aten::sum.dim_IntList", [](Context& ctx) { return sumRule(ctx, false, ReduceKind::Sum, false); });
  addReal(r, "aten::sum", [](Context& ctx) { return sumRule(ctx, true, ReduceKind::Sum, false); });
  addMean(r, "aten::mean.dim", false);
  addMean(r, "aten::mean", true);
  addReal(r, "aten::prod", [](Context& ctx) { return sumRule(ctx, true, ReduceKind::Prod, false); });
  addReal(r, "aten::prod.dim_int", [](Context& ctx) -> std::vector<Value> {
    // prod.dim_int(self, int dim, keepdim, dtype?)
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    std::vector<int64_t> dims = x.rank() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{normDim(ctx, ctx.toInt(1), x.rank())};
    DType out = sumType(ctx, 3, x.dtype());
    DType acc = accType(out);
    if (acc == DType::Pred) acc = DType::S64;
    Value v = b.convert(x, acc);
    if (!dims.empty()) v = b.reduce(v, dims, ReduceKind::Prod);
    return {keepDims(b, b.convert(v, out), x.shape(), dims, optBool(ctx, 2))};
  });
  addReal(r, "aten::amax", [](Context& ctx) { return extremeRule(ctx, false, true); });
  addReal(r, "aten::amin", [](Context& ctx) { return extremeRule(ctx, false, false); });
  addReal(r, "aten::max", [](Context& ctx) { return extremeRule(ctx, true, true); });
  addReal(r, "aten::min", [](Context& ctx) { return extremeRule(ctx, true, false); });
  addReal(r, "aten::argmax", [](Context& ctx) { return argRule(ctx, true); });
  addReal(r, "aten::argmin", [](Context& ctx) { return argRule(ctx, false); });
  addReal(r, "aten::max.dim", [](Context& ctx) { return maxDimRule(ctx, true); });
  addReal(r, "aten::min.dim", [](Context& ctx) { return maxDimRule(ctx, false); });
  addReal(r, "aten::any", [](Context& ctx) { return anyAllRule(ctx, true, 0); });
  addReal(r, "aten::any.dim", [](Context& ctx) { return anyAllRule(ctx, true, 1); });
  addReal(r, "aten::any.dims", [](Context& ctx) { return anyAllRule(ctx, true, 2); });
  addReal(r, "aten::all", [](Context& ctx) { return anyAllRule(ctx, false, 0); });
  addReal(r, "aten::all.dim", [](Context& ctx) { return anyAllRule(ctx, false, 1); });
  addReal(r, "aten::all.dims", [](Context& ctx) { return anyAllRule(ctx, false, 2); });
  addReal(r, "aten::count_nonzero.dim_IntList", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    std::vector<int64_t> dims = reduceDims(ctx, 1, x.rank());
    Value nz = b.convert(x.dtype() == DType::Pred ? x : b.compare(x, b.zerosLike(x), Cmp::NE), DType::S64);
    return {dims.empty() ? nz : b.reduce(nz, dims, ReduceKind::Sum)};
  });

  auto addFloat = [&](const std::string& op, RuleFn fn, std::vector<std::string> statics = {}) {
    Rule rule;
    rule.op = op;
    rule.fn = std::move(fn);
    rule.static_args = std::move(statics);
    rule.accepts = floatInput;
    r.add(std::move(rule));
  };
  addFloat("aten::var.correction", [](Context& ctx) -> std::vector<Value> { return {varRule(ctx, false)[0]}; });
  addFloat("aten::std.correction", [](Context& ctx) -> std::vector<Value> { return {varRule(ctx, true)[0]}; });
  addFloat("aten::var_mean.correction", [](Context& ctx) { return varRule(ctx, false); });
  addFloat("aten::std_mean.correction", [](Context& ctx) { return varRule(ctx, true); });

  // linalg_vector_norm(self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)
  {
    Rule rule;
    rule.op = "aten::linalg_vector_norm";
    rule.static_args = {"ord"};
    rule.fn = [](Context& ctx) -> std::vector<Value> {
      Value x = ctx.tensor(0);
      double ord = ctx.has(1) ? ctx.staticDouble(1) : 2.0;
      std::vector<int64_t> dims = reduceDims(ctx, 2, x.rank());
      DType out = ctx.has(4) ? ctx.arg(4).dtype : toFloat(x.dtype());
      Value r = vectorNorm(ctx.b, x, ord, dims, out);
      return {keepDims(ctx.b, r, x.shape(), dims, optBool(ctx, 3))};
    };
    rule.accepts = floatInput;
    r.add(std::move(rule));
  }
  // norm.ScalarOpt_dim(self, Scalar? p, int[1] dim, bool keepdim=False)
  {
    Rule rule;
    rule.op = "aten::norm.ScalarOpt_dim";
    rule.static_args = {"p"};
    rule.fn = [](Context& ctx) -> std::vector<Value> {
      Value x = ctx.tensor(0);
      double ord = ctx.has(1) ? ctx.staticDouble(1) : 2.0;
      std::vector<int64_t> dims = reduceDims(ctx, 2, x.rank());
      Value r = vectorNorm(ctx.b, x, ord, dims, x.dtype());
      return {keepDims(ctx.b, r, x.shape(), dims, optBool(ctx, 3))};
    };
    rule.accepts = floatInput;
    r.add(std::move(rule));
  }
  addReal(r, "aten::logsumexp", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    DType out = toFloat(x.dtype());
    Value xc = b.convert(x, accType(out));
    std::vector<int64_t> dims = reduceDims(ctx, 1, x.rank());
    if (dims.empty()) return {b.convert(xc, out)};
    Value m = reduceNan(b, xc, dims, ReduceKind::Max);
    // an infinite max would give inf - inf = NaN: shift by 0 instead (PyTorch does the same)
    m = b.select(b.compare(b.abs(m), cst(b, INFINITY, m), Cmp::EQ), b.zerosLike(m), m);
    Value s = b.reduce(b.exp(b.sub(xc, expandReduced(b, m, x.shape(), dims))), dims, ReduceKind::Sum);
    Value res = b.add(b.log(s), m);
    return {keepDims(b, b.convert(res, out), x.shape(), dims, optBool(ctx, 2))};
  });
  addReal(r, "aten::cumsum", [](Context& ctx) { return cumRule(ctx, ReduceKind::Sum); });
  addReal(r, "aten::cumprod", [](Context& ctx) { return cumRule(ctx, ReduceKind::Prod); });
  addReal(r, "aten::trace", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    if (x.rank() != 2) ctx.fail("expected a matrix");
    DType out = sumType(ctx, 99, x.dtype());
    Value eye = b.compare(b.iota({DType::S64, x.shape()}, 0), b.iota({DType::S64, x.shape()}, 1), Cmp::EQ);
    Value v = b.convert(x, accType(out) == DType::Pred ? DType::S64 : accType(out));
    v = b.select(eye, v, b.zerosLike(v));
    return {b.convert(b.reduce(v, {0, 1}, ReduceKind::Sum), out)};
  });
}

}  // namespace torch_tpu::lowering
