// Reduction family: sum/mean/prod, amax/amin/max/min (NaN-propagating), argmax/argmin, any/all, var/std,
// vector norms, logsumexp, cumulative sums/products, hash_tensor.
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
// (complex calls reach a predicate only for rows listing kComplex)
bool floatOrComplexInput(const Context& ctx) { return floatInput(ctx) || shlo::isComplex(ctx.tensor(0).dtype()); }

// mean of integers raises in PyTorch; let CPU say so. A float dtype argument makes it legal.
AcceptsFn meanAccepts(bool full) {
  return [full](const Context& ctx) {
    size_t di = full ? 1 : 3;
    auto fc = [](DType t) { return isFloat(t) || shlo::isComplex(t); };
    return realDTypes(ctx) && (fc(ctx.tensor(0).dtype()) ||
                               (ctx.has(di) && ctx.arg(di).kind == Arg::Kind::ScalarType && fc(ctx.arg(di).dtype)));
  };
}

// ---- calls PyTorch CPU rejects although its meta kernels accept them (bool inputs of order statistics, reductions
// over an empty dimension, bool cumulative sums): declined, so the call goes to the CPU kernel and the user gets
// PyTorch's own error ----

bool nonBoolInput(const Context& ctx) { return realDTypes(ctx) && ctx.tensor(0).dtype() != DType::Pred; }

// max()/min() over everything: not of an empty tensor.
bool nonEmptyInput(const Context& ctx) { return realDTypes(ctx) && ctx.tensor(0).type.numel() != 0; }

// Reductions along one dim (argument dim_i, `dflt` when absent): not over an empty dimension, and not of bool
// values unless `bools`.
AcceptsFn alongNonEmptyDim(size_t dim_i, int64_t dflt, bool bools) {
  return [dim_i, dflt, bools](const Context& ctx) {
    if (!realDTypes(ctx)) return false;
    const Value& x = ctx.tensor(0);
    if (!bools && x.dtype() == DType::Pred) return false;
    int64_t d = ctx.has(dim_i) ? ctx.toInt(dim_i) : dflt, r = x.rank();
    if (r == 0 || d < -r || d >= r) return true;  // 0-d, or a bad dim the rule reports
    return x.shape()[size_t(d < 0 ? d + r : d)] != 0;
  };
}

// cumsum/cumprod(self, dim, dtype?): not with a bool result.
bool cumAccepts(const Context& ctx) {
  return realDTypes(ctx) && sumType(ctx, 2, ctx.tensor(0).dtype()) != DType::Pred;
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
  // complex: |d|^2 = re^2 + im^2, and the variance is real
  Value ss = shlo::isComplex(c) ? b.add(b.mul(b.realPart(d), b.realPart(d)), b.mul(b.imagPart(d), b.imagPart(d)))
                                : b.mul(d, d);
  const DType rc = ss.dtype();
  if (!dims.empty()) ss = b.reduce(ss, dims, ReduceKind::Sum);
  Value corr = ctx.has(2) ? scalarArg(ctx, 2, rc) : b.constant(1, rc);
  Value denom = b.max(b.sub(b.constant(n, rc), corr), b.constant(0, rc));
  Value var = b.div(ss, b.broadcastTo(denom, ss.shape()));
  if (take_sqrt) var = b.sqrt(var);
  return {keepDims(b, b.convert(var, shlo::isComplex(out) ? rc : out), x.shape(), dims, keep),
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


Value signOp(Builder& b, Value x) {
  Value zero = b.zerosLike(x);
  return b.select(b.compare(x, zero, Cmp::GT), b.onesLike(x), b.select(b.compare(x, zero, Cmp::LT), b.neg(b.onesLike(x)), zero));
}

// The gradient term of a p-norm distance for one coordinate difference d (dist: the distance, g: its gradient, all
// of d's shape), as CPU's cdist and pdist backward kernels compute it: p = 1: g sign(d); p = 2: g d / dist (0 where
// dist is 0); p = inf: g sign(d) where |d| is the distance; else g sign(d) |d|^(p-1) / dist^(p-1), 0 where dist is 0
// and, for p < 1, where d is 0 (|d|^(p-1) is infinite there).
Value distanceGradTerm(Builder& b, Value g, Value d, Value dist, double p) {
  Value zero = b.zerosLike(d);
  if (p == 1) return b.mul(g, signOp(b, d));
  if (p == 2) return b.select(b.compare(dist, zero, Cmp::EQ), zero, b.div(b.mul(g, d), dist));
  if (std::isinf(p)) return b.mul(b.mul(g, signOp(b, d)), b.convert(b.compare(b.abs(d), dist, Cmp::EQ), d.dtype()));
  Value num = b.mul(signOp(b, d), b.pow(b.abs(d), cst(b, p - 1, d)));
  Value none = b.compare(dist, zero, Cmp::EQ);
  if (p < 1) none = b.orOp(none, b.compare(d, zero, Cmp::EQ));
  return b.select(none, zero, b.div(b.mul(g, num), b.pow(dist, cst(b, p - 1, d))));
}

// The p-norm of coordinate differences d over `dims` as CPU's cdist and pdist kernels take it: vectorNorm, except
// that for p = 0 a NaN difference makes the distance NaN (vector_norm's ord 0 counts a NaN as nonzero), and that
// cdist's infinity norm (`nan_free_max`) skips NaN differences, as CPU's (and CUDA's) running max does.
Value distanceNorm(Builder& b, Value d, double p, const std::vector<int64_t>& dims, DType out,
                   bool nan_free_max = false) {
  if (std::isinf(p) && p > 0 && nan_free_max) d = b.select(isNan(b, d), b.zerosLike(d), d);
  if (p != 0) return vectorNorm(b, d, p, dims, out);
  Value nz = b.select(isNan(b, d), b.constantF(NAN, d.dtype(), d.shape()),
                      b.convert(b.compare(d, b.zerosLike(d), Cmp::NE), d.dtype()));
  return b.convert(b.reduce(nz, dims, ReduceKind::Sum), out);
}

// The rows' pairwise differences x[i] - x[j] for i < j ([K, M], pairs in row-major order) and each pair's (i, j).
std::pair<Value, std::pair<Value, Value>> pairDifferences(Builder& b, Value x) {
  const int64_t n = x.shape()[0], k = n * (n - 1) / 2;
  const Shape ks{k};
  Value pos = b.iota({DType::S64, ks}, 0);
  auto s64 = [&](int64_t v) { return b.broadcastTo(b.constantInt(v, DType::S64), ks); };
  auto rowStart = [&](Value r) {  // r N - r (r + 1) / 2
    return b.sub(b.mul(r, s64(n)), b.div(b.mul(r, b.add(r, s64(1))), s64(2)));
  };
  Value i = b.sub(binarySearch(b, rowStart, pos, n - 1, /*right=*/true), s64(1));
  Value j = b.add(b.sub(pos, rowStart(i)), b.add(i, s64(1)));
  Value d = b.sub(takeRows(b, x, i), takeRows(b, x, j));
  return {d, {i, j}};
}

// _pdist_forward/_backward: CPU's kernel computes float32 and float64 rows of a 2-d tensor, p >= 0 (otherwise it
// raises, or PyTorch's checks do); `p_arg` is p's argument index.
AcceptsFn pdistAccepts(size_t p_arg) {
  return [p_arg](const Context& ctx) {
    const Value x = ctx.tensor(p_arg == 1 ? 0 : 1);
    return (x.dtype() == DType::F32 || x.dtype() == DType::F64) && x.rank() == 2 && ctx.staticDouble(p_arg) >= 0;
  };
}


// ---- prefix (cumulative) ops with indices, and order statistics ----

// x with `dim` moved last: returns {moved, permutation}.
std::pair<Value, std::vector<int64_t>> moveLast(Builder& b, Value x, int64_t dim) {
  std::vector<int64_t> perm;
  for (int64_t k = 0; k < x.rank(); ++k)
    if (k != dim) perm.push_back(k);
  perm.push_back(dim);
  return {b.transpose(x, perm), perm};
}
Value moveBack(Builder& b, Value x, const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inv[perm[k]] = int64_t(k);
  return b.transpose(x, inv);
}

// The lowest value of a dtype (for masked max reductions).
double lowest(DType t) {
  if (isFloat(t)) return -INFINITY;
  if (t == DType::Pred || !shlo::isSigned(t)) return 0;
  return -std::ldexp(1.0, shlo::bitWidth(t) - 1);
}
double highest(DType t) {
  if (isFloat(t)) return INFINITY;
  if (t == DType::Pred) return 1;
  return shlo::isSigned(t) ? std::ldexp(1.0, shlo::bitWidth(t) - 1) - 1 : std::ldexp(1.0, shlo::bitWidth(t)) - 1;
}

// cummax/cummin along `dim` as PyTorch CPU computes them: a NaN wins from its position on (and later NaNs take
// the index); otherwise the latest position equal to the running extreme. Pairwise over [.., i, j<=i].
std::vector<Value> cumExtreme(Builder& b, Value x, int64_t dim, bool is_max) {
  if (x.rank() == 0) return {x, b.constantInt(0, DType::S64)};
  int64_t n = x.shape()[dim];
  if (n == 0) return {x, b.zeros({DType::S64, x.shape()})};
  DType orig = x.dtype();
  Value xv = orig == DType::Pred ? b.convert(x, DType::U8) : x;
  auto [xt, perm] = moveLast(b, xv, dim);
  Shape s = xt.shape();
  int64_t r = xt.rank();
  Shape s2 = s;
  s2.push_back(n);  // [..., i, j]
  std::vector<int64_t> map;
  for (int64_t k = 0; k < r - 1; ++k) map.push_back(k);
  map.push_back(r);
  Value a = b.broadcastInDim(xt, s2, map);  // a[..., i, j] = x[..., j]
  Value ii = b.iota({DType::S64, s2}, r - 1), jj = b.iota({DType::S64, s2}, r);
  Value valid = b.compare(jj, ii, Cmp::LE);
  Value fill = b.constantF(is_max ? lowest(a.dtype()) : highest(a.dtype()), a.dtype(), s2);
  Value ext = reduceNan(b, b.select(valid, a, fill), {r}, is_max ? ReduceKind::Max : ReduceKind::Min);  // [..., i]
  Value nan_here = b.andOp(valid, isNan(b, a));
  Value any_nan = b.reduce(nan_here, {r}, ReduceKind::Or);
  std::vector<int64_t> keep;
  for (int64_t k = 0; k < r; ++k) keep.push_back(k);
  Value eq = b.andOp(valid, b.compare(a, b.broadcastInDim(ext, s2, keep), Cmp::EQ));
  Value match = b.select(b.broadcastInDim(any_nan, s2, keep), nan_here, eq);
  Value idx = b.reduce(b.select(match, jj, b.constantF(-1, DType::S64, s2)), {r}, ReduceKind::Max);
  Value vals = moveBack(b, ext, perm), inds = moveBack(b, idx, perm);
  return {b.convert(vals, orig), inds};
}

// logcumsumexp along dim (pairwise, shifted by the prefix max).
Value logCumSumExp(Builder& b, Value x, int64_t dim) {
  if (x.rank() == 0) return x;
  int64_t n = x.shape()[dim];
  if (n == 0) return x;
  auto [xt, perm] = moveLast(b, x, dim);
  Shape s = xt.shape();
  int64_t r = xt.rank();
  Shape s2 = s;
  s2.push_back(n);
  std::vector<int64_t> map, keep;
  for (int64_t k = 0; k < r - 1; ++k) map.push_back(k);
  map.push_back(r);
  for (int64_t k = 0; k < r; ++k) keep.push_back(k);
  Value a = b.broadcastInDim(xt, s2, map);
  Value valid = b.compare(b.iota({DType::S64, s2}, r), b.iota({DType::S64, s2}, r - 1), Cmp::LE);
  Value ninf = b.constantF(-INFINITY, a.dtype(), s2);
  Value am = b.select(valid, a, ninf);
  Value m = b.reduce(am, {r}, ReduceKind::Max);
  m = b.select(b.compare(b.abs(m), cst(b, INFINITY, m), Cmp::EQ), b.zerosLike(m), m);
  Value e = b.exp(b.sub(am, b.broadcastInDim(m, s2, keep)));
  Value res = b.add(b.log(b.reduce(e, {r}, ReduceKind::Sum)), m);
  return moveBack(b, res, perm);
}

// The 64 bits of a float's double (IEEE bits `bits` with `e_bits` exponent and `m_bits` mantissa bits, in u64)
// computed in integer arithmetic: subnormals normalized, a NaN quieted with its payload kept, as x86 widens.
Value widenFloatBits(Builder& b, Value bits, int e_bits, int m_bits) {
  const Shape& s = bits.shape();
  auto u = [&](uint64_t v) { return b.broadcastTo(b.constantInt(int64_t(v), DType::U64), s); };
  const uint64_t bias = (uint64_t(1) << (e_bits - 1)) - 1, emax = (uint64_t(1) << e_bits) - 1;
  Value sign = b.shiftLeft(b.shiftRightLogical(bits, u(e_bits + m_bits)), u(63));
  Value e = b.andOp(b.shiftRightLogical(bits, u(m_bits)), u(emax));
  Value m = b.andOp(bits, u((uint64_t(1) << m_bits) - 1));
  Value frac = b.shiftLeft(m, u(52 - m_bits));
  Value normal = b.orOp(sign, b.orOp(b.shiftLeft(b.add(e, u(1023 - bias)), u(52)), frac));
  // subnormal m 2^(1 - bias - m_bits): its top bit p becomes the implicit one
  Value p = b.sub(u(63), b.clz(m));
  Value sub = b.orOp(sign, b.orOp(b.shiftLeft(b.add(p, u(1023 + 1 - bias - m_bits)), u(52)),
                                  b.andOp(b.shiftLeft(m, b.sub(u(52), p)), u((uint64_t(1) << 52) - 1))));
  Value zero_m = b.compare(m, u(0), Cmp::EQ);
  Value special = b.orOp(b.orOp(sign, u(uint64_t(0x7ff) << 52)),
                         b.orOp(frac, b.select(zero_m, u(0), u(uint64_t(1) << 51))));
  Value res = b.select(b.compare(e, u(0), Cmp::EQ), b.select(zero_m, sign, sub), normal);
  return b.select(b.compare(e, u(emax), Cmp::EQ), special, res);
}

// The 64 bits PyTorch CPU's hash_tensor (mode 0) XORs together per element: a floating value's double (its bits),
// a bool's 0 or 1, an integer sign-extended to 64 bits.
Value hashBits(Builder& b, Value x) {
  const DType t = x.dtype();
  if (t == DType::Pred || t == DType::U8) return b.convert(x, DType::U64);
  if (shlo::isInteger(t)) return b.bitcastConvert(b.convert(x, DType::S64), DType::U64);
  if (t == DType::F64) return b.bitcastConvert(x, DType::U64);
  if (t == DType::F32) return widenFloatBits(b, b.convert(b.bitcastConvert(x, DType::U32), DType::U64), 8, 23);
  Value h = b.convert(b.bitcastConvert(x, DType::U16), DType::U64);
  return t == DType::BF16 ? widenFloatBits(b, h, 8, 7) : widenFloatBits(b, h, 5, 10);
}

// ---- complex logcumsumexp: PyTorch CPU's sequential log-add-exp (aten/src/ATen/native/cpu/LogAddExp.h) ----
//
// CPU accumulates complex values one at a time in complex<double> (acc_type), cum = log_add_exp(x[i], cum) from
// cum = -inf, storing each cum in the result's dtype. The imaginary part is not reduced to (-pi, pi]: it follows the
// larger real part's, so any other order of additions lands on other branches. The helpers below compute on
// (real, imaginary) pairs of f64 Values with glibc's special values of cexp and clog and c10's complex arithmetic.
struct Cx {
  Value re, im;
};

Value cxNan(Builder& b, const Cx& z) { return b.orOp(isNan(b, z.re), isNan(b, z.im)); }
Cx cxSelect(Builder& b, Value p, const Cx& x, const Cx& y) {
  return {b.select(p, x.re, y.re), b.select(p, x.im, y.im)};
}
Cx cxMul(Builder& b, const Cx& x, const Cx& y) {
  return {b.sub(b.mul(x.re, y.re), b.mul(x.im, y.im)), b.add(b.mul(x.re, y.im), b.mul(x.im, y.re))};
}
// c10::complex division (numpy's scaled form)
Cx cxDiv(Builder& b, const Cx& x, const Cx& y) {
  Value ac = b.abs(y.re), ad = b.abs(y.im), one = cst(b, 1, ac);
  Value rat1 = b.div(y.im, y.re), scl1 = b.div(one, b.add(y.re, b.mul(y.im, rat1)));
  Cx r1{b.mul(b.add(x.re, b.mul(x.im, rat1)), scl1), b.mul(b.sub(x.im, b.mul(x.re, rat1)), scl1)};
  Cx zero{b.div(x.re, ac), b.div(x.im, ad)};
  Value rat2 = b.div(y.re, y.im), scl2 = b.div(one, b.add(y.im, b.mul(y.re, rat2)));
  Cx r2{b.mul(b.add(b.mul(x.re, rat2), x.im), scl2), b.mul(b.sub(b.mul(x.im, rat2), x.re), scl2)};
  Value both0 = b.andOp(b.compare(ac, cst(b, 0, ac), Cmp::EQ), b.compare(ad, cst(b, 0, ad), Cmp::EQ));
  return cxSelect(b, b.compare(ac, ad, Cmp::GE), cxSelect(b, both0, zero, r1), r2);
}
// glibc cexp (for the values log-add-exp meets: a NaN real part never reaches it)
Cx cxExp(Builder& b, const Cx& z) {
  Value zero = cst(b, 0, z.re), inf = cst(b, INFINITY, z.re), nan = cst(b, NAN, z.re);
  Value e = b.exp(z.re), c = b.cos(z.im), s = b.sin(z.im);
  Value im0 = b.compare(z.im, zero, Cmp::EQ), imfin = b.isFinite(z.im);
  Cx fin = cxSelect(b, im0, Cx{e, b.mul(e, z.im)}, Cx{b.mul(e, c), b.mul(e, s)});
  fin = cxSelect(b, imfin, fin, Cx{nan, nan});
  Value v = b.select(b.compare(z.re, zero, Cmp::GT), inf, zero);  // the infinite real part's exp
  Cx infi = cxSelect(b, im0, Cx{v, z.im}, Cx{copySign(b, v, c), copySign(b, v, s)});
  Cx infn = cxSelect(b, b.compare(z.re, zero, Cmp::GT), Cx{inf, nan}, Cx{zero, copySign(b, zero, z.im)});
  infi = cxSelect(b, imfin, infi, infn);
  return cxSelect(b, b.isFinite(z.re), fin, infi);
}
// glibc clog: log|z| (through log1p near |z| = 1, where log-add-exp's 1 + z lies), arg z
Cx cxLog(Builder& b, const Cx& z) {
  Value ar = b.abs(z.re), ai = b.abs(z.im);
  Value hi = b.max(ar, ai), lo = b.min(ar, ai), zero = cst(b, 0, ar), one = cst(b, 1, ar);
  Value q = b.div(lo, b.select(b.compare(hi, zero, Cmp::EQ), one, hi));
  Value h = b.mul(hi, b.sqrt(b.add(one, b.mul(q, q))));
  Value near1 = b.andOp(b.compare(h, cst(b, 0.7, h), Cmp::GT), b.compare(h, cst(b, 1.5, h), Cmp::LT));
  Value m1 = b.add(b.mul(b.sub(ar, one), b.add(ar, one)), b.mul(ai, ai));  // |z|^2 - 1 (ar near 1 where used)
  Value re = b.select(near1, b.mul(cst(b, 0.5, m1), b.log1p(m1)), b.log(h));
  Value inf = b.orOp(b.compare(ar, cst(b, INFINITY, ar), Cmp::EQ), b.compare(ai, cst(b, INFINITY, ai), Cmp::EQ));
  re = b.select(inf, cst(b, INFINITY, re), re);
  return {re, b.atan2(z.im, z.re)};
}
// c10's CPU complex log1p: u = 1 + z; z if u == 1, log u if u - 1 == z, else log(u) z / (u - 1)
Cx cxLog1p(Builder& b, const Cx& z) {
  Value one = cst(b, 1, z.re);
  Cx u{b.add(z.re, one), z.im};
  Cx lu = cxLog(b, u);
  Cx um1{b.sub(u.re, one), u.im};
  Cx scaled = cxMul(b, lu, cxDiv(b, z, um1));
  Value same = b.andOp(b.compare(um1.re, z.re, Cmp::EQ), b.compare(um1.im, z.im, Cmp::EQ));
  Value unit = b.andOp(b.compare(u.re, one, Cmp::EQ), b.compare(u.im, cst(b, 0, z.im), Cmp::EQ));
  return cxSelect(b, unit, z, cxSelect(b, same, lu, scaled));
}
// _log_add_exp_helper(x, y) for complex numbers
Cx cxLogAddExp(Builder& b, const Cx& x, const Cx& y) {
  Value ynan = cxNan(b, y), xnan = cxNan(b, x), lt = b.compare(x.re, y.re, Cmp::LT);
  Cx mn = cxSelect(b, ynan, y, cxSelect(b, xnan, x, cxSelect(b, lt, x, y)));
  Cx mx = cxSelect(b, ynan, y, cxSelect(b, xnan, x, cxSelect(b, lt, y, x)));
  Cx general = cxLog1p(b, cxExp(b, Cx{b.sub(mn.re, mx.re), b.sub(mn.im, mx.im)}));
  general = {b.add(general.re, mx.re), b.add(general.im, mx.im)};
  Cx emn = cxExp(b, mn), emx = cxExp(b, mx);
  Cx both_inf = cxLog(b, Cx{b.add(emn.re, emx.re), b.add(emn.im, emx.im)});
  Value zero = cst(b, 0, mn.re), nan = cst(b, NAN, mn.re);
  Value inf_case = b.andOp(b.notOp(b.isFinite(mn.re)), b.compare(mn.re, mx.re, Cmp::EQ));
  Cx res = cxSelect(b, inf_case, cxSelect(b, b.compare(mn.re, zero, Cmp::LT), mn, both_inf), general);
  return cxSelect(b, cxNan(b, mn), Cx{nan, nan}, res);
}

// Complex logcumsumexp along dim: a loop over the dim, every other position at once.
Value complexLogCumSumExp(Builder& b, Value x, int64_t dim) {
  if (x.rank() == 0 || x.shape()[dim] == 0) return x;
  const int64_t n = x.shape()[dim];
  const DType ct = shlo::componentType(x.dtype());
  auto [xt, perm] = moveLast(b, x, dim);
  Shape s = xt.shape();
  Shape row(s.begin(), s.end() - 1);
  const int64_t r = xt.rank();
  Value xre = b.convert(b.realPart(xt), DType::F64), xim = b.convert(b.imagPart(xt), DType::F64);
  std::vector<Value> init = {b.constantF(-INFINITY, DType::F64, row), b.zeros({DType::F64, row}),
                             b.zeros({ct, s}), b.zeros({ct, s}), xre, xim};
  auto out = b.forLoop(n, init, [&](Builder& bb, Value i, const std::vector<Value>& a) {
    std::vector<Value> at(size_t(r), bb.constantInt(0, DType::S32));
    at.back() = i;
    Shape one = row;
    one.push_back(1);
    auto pick = [&](Value v) { return bb.reshape(bb.dynamicSlice(v, at, one), row); };
    Cx cum = cxLogAddExp(bb, Cx{pick(a[4]), pick(a[5])}, Cx{a[0], a[1]});
    Value ore = bb.dynamicUpdateSlice(a[2], bb.reshape(bb.convert(cum.re, ct), one), at);
    Value oim = bb.dynamicUpdateSlice(a[3], bb.reshape(bb.convert(cum.im, ct), one), at);
    return std::vector<Value>{cum.re, cum.im, ore, oim, a[4], a[5]};
  });
  return moveBack(b, b.complex(out[2], out[3]), perm);
}

// Sorted values and their (stable) original indices along dim.
std::vector<Value> sortAlong(Builder& b, Value x, int64_t dim) {
  Value key = x.dtype() == DType::Pred ? b.convert(x, DType::U8) : x;
  auto res = b.sort({key, b.iota({DType::S64, x.shape()}, dim)}, dim, false, true);
  res[0] = b.convert(res[0], x.dtype());
  return res;
}

// Picks position `pos` (a Value broadcastable to the reduced shape, int64) along dim of sorted values/indices.
std::vector<Value> pickAlong(Builder& b, const std::vector<Value>& sorted, int64_t dim, Value pos) {
  std::vector<Value> out;
  Shape s = sorted[0].shape();
  Shape red = s;
  red.erase(red.begin() + dim);
  std::vector<int64_t> keep;
  for (int64_t k = 0; k < int64_t(s.size()); ++k)
    if (k != dim) keep.push_back(k);
  Value p = b.broadcastInDim(b.broadcastTo(pos, red), s, keep);
  Value sel = b.compare(b.iota({DType::S64, s}, dim), p, Cmp::EQ);
  for (const Value& v : sorted) {
    Value z = v.dtype() == DType::Pred ? b.convert(v, DType::U8) : v;
    Value picked = b.reduce(b.select(sel, z, b.zerosLike(z)), {dim}, v.dtype() == DType::Pred ? ReduceKind::Max
                                                                       : ReduceKind::Sum);
    out.push_back(b.convert(picked, v.dtype()));
  }
  return out;
}

// median (lower) / nanmedian along dim: {values, indices}. median: a NaN in the row gives NaN (index of the first
// NaN); nanmedian ignores NaNs (all-NaN rows give NaN).
std::vector<Value> medianAlong(Builder& b, Value x, int64_t dim, bool ignore_nan) {
  int64_t n = x.shape()[dim];
  auto sorted = sortAlong(b, x, dim);  // NaNs sort last
  Shape red = x.shape();
  red.erase(red.begin() + dim);
  Value nan_count = b.reduce(b.convert(isNan(b, x), DType::S64), {dim}, ReduceKind::Sum);
  Value pos;
  if (ignore_nan) {
    Value valid = b.sub(b.constantF(double(n), DType::S64, red), nan_count);
    Value half = b.div(b.sub(valid, b.constantF(1, DType::S64, red)), b.constantF(2, DType::S64, red));
    pos = b.max(half, b.zeros({DType::S64, red}));
  } else {
    Value lower = b.constantF(double((n - 1) / 2), DType::S64, red);
    Value first_nan = b.sub(b.constantF(double(n), DType::S64, red), nan_count);
    pos = b.select(b.compare(nan_count, b.zeros({DType::S64, red}), Cmp::GT), first_nan, lower);
  }
  return pickAlong(b, sorted, dim, pos);
}
}  // namespace

void populateReduction(Registry& r) {
  r.add("aten::sum.dim_IntList", [](Context& ctx) { return sumRule(ctx, false, ReduceKind::Sum, false); })
      .dtypes(kWideUnsigned | kComplex);
  r.add("aten::sum", [](Context& ctx) { return sumRule(ctx, true, ReduceKind::Sum, false); }).dtypes(kWideUnsigned | kComplex);
  r.add("aten::mean.dim", [](Context& ctx) { return sumRule(ctx, false, ReduceKind::Sum, true); })
      .accepts(meanAccepts(false)).complex();
  r.add("aten::mean", [](Context& ctx) { return sumRule(ctx, true, ReduceKind::Sum, true); })
      .accepts(meanAccepts(true)).complex();
  r.add("aten::prod", [](Context& ctx) { return sumRule(ctx, true, ReduceKind::Prod, false); }).dtypes(kWideUnsigned | kComplex);
  r.add("aten::prod.dim_int", [](Context& ctx) -> std::vector<Value> {
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
  }).accepts(realDTypes).dtypes(kWideUnsigned | kComplex);
  r.add("aten::amax", [](Context& ctx) { return extremeRule(ctx, false, true); }).accepts(realDTypes);
  r.add("aten::amin", [](Context& ctx) { return extremeRule(ctx, false, false); }).accepts(realDTypes);
  r.add("aten::max", [](Context& ctx) { return extremeRule(ctx, true, true); }).accepts(nonEmptyInput);
  r.add("aten::min", [](Context& ctx) { return extremeRule(ctx, true, false); }).accepts(nonEmptyInput);
  r.add("aten::argmax", [](Context& ctx) { return argRule(ctx, true); }).accepts(nonBoolInput);
  r.add("aten::argmin", [](Context& ctx) { return argRule(ctx, false); }).accepts(nonBoolInput);
  r.add("aten::max.dim", [](Context& ctx) { return maxDimRule(ctx, true); }).accepts(alongNonEmptyDim(1, 0, true));
  r.add("aten::min.dim", [](Context& ctx) { return maxDimRule(ctx, false); }).accepts(alongNonEmptyDim(1, 0, true));
  r.add("aten::any", [](Context& ctx) { return anyAllRule(ctx, true, 0); }).accepts(realDTypes).dtypes(kRestricted);
  r.add("aten::any.dim", [](Context& ctx) { return anyAllRule(ctx, true, 1); }).accepts(realDTypes).dtypes(kRestricted);
  r.add("aten::any.dims", [](Context& ctx) { return anyAllRule(ctx, true, 2); }).accepts(realDTypes).dtypes(kRestricted);
  r.add("aten::all", [](Context& ctx) { return anyAllRule(ctx, false, 0); }).accepts(realDTypes).complex();
  r.add("aten::all.dim", [](Context& ctx) { return anyAllRule(ctx, false, 1); }).accepts(realDTypes).complex();
  r.add("aten::all.dims", [](Context& ctx) { return anyAllRule(ctx, false, 2); }).accepts(realDTypes).complex();
  // aminmax(self, *, dim=None, keepdim=False) -> (min, max)
  r.add("aten::aminmax", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    std::vector<int64_t> dims = ctx.has(1) ? normDims(ctx, {ctx.toInt(1)}, x.rank()) : allDims(x.rank());
    bool keep = optBool(ctx, 2);
    Value mn = reduceNan(ctx.b, x, dims, ReduceKind::Min), mx = reduceNan(ctx.b, x, dims, ReduceKind::Max);
    return {keepDims(ctx.b, mn, x.shape(), dims, keep), keepDims(ctx.b, mx, x.shape(), dims, keep)};
  }).accepts(realDTypes);
  // nansum(self, dim=None, keepdim=False, *, dtype=None): NaNs count as zero.
  r.add("aten::nansum", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    std::vector<int64_t> dims = reduceDims(ctx, 1, x.rank());
    DType out = sumType(ctx, 3, x.dtype());
    DType acc = accType(out) == DType::Pred ? DType::S64 : accType(out);
    Value v = b.convert(x, acc);
    if (isFloat(x.dtype())) v = b.select(isNan(b, v), b.zerosLike(v), v);
    if (!dims.empty()) v = b.reduce(v, dims, ReduceKind::Sum);
    return {keepDims(b, b.convert(v, out), x.shape(), dims, optBool(ctx, 2))};
  }).accepts(realDTypes);
  // hash_tensor(self, dim=[], *, keepdim=False, mode=0) -> uint64: the XOR of every element's 64 bits (hashBits)
  // over dim (empty: all). CPU raises for other modes, for an empty tensor without dims, for a dim of size 0 and for
  // complex and uint16/32/64 inputs (no kernel): those calls are left to it. (The row lists kWideUnsigned for the
  // uint64 result, kComplex so that complex inputs reach CPU's error.)
  r.add("aten::hash_tensor", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    if (ctx.has(3) && ctx.toInt(3) != 0) throw InvalidCall(ctx.op(), "unknown hash_tensor mode");
    const DType t = x.dtype();
    if (shlo::isComplex(t) || (shlo::isInteger(t) && !shlo::isSigned(t) && t != DType::U8))
      throw InvalidCall(ctx.op(), "CPU's hash_tensor has no kernel for this dtype");
    const bool all = !ctx.has(1) || ctx.toInts(1).empty();
    std::vector<int64_t> dims = reduceDims(ctx, 1, x.rank());
    if (all && x.type.numel() == 0) throw InvalidCall(ctx.op(), "hash_tensor of an empty tensor needs its dims");
    for (int64_t d : dims)
      if (x.shape()[size_t(d)] == 0) throw InvalidCall(ctx.op(), "hash_tensor over a dimension of size 0");
    Value r = b.reduce(hashBits(b, x), dims, ReduceKind::Xor);
    return {keepDims(b, r, x.shape(), dims, optBool(ctx, 2))};
  }).accepts(realDTypes).dtypes(kWideUnsigned | kComplex);
  // renorm(self, p, dim, maxnorm): each slice along dim rescaled to norm <= maxnorm.
  r.add("aten::renorm", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    DType t = x.dtype(), c = accType(t);
    const bool cplx = shlo::isComplex(t);
    int64_t d = normDim(ctx, ctx.toInt(2), x.rank());
    std::vector<int64_t> dims;
    for (int64_t k = 0; k < x.rank(); ++k)
      if (k != d) dims.push_back(k);
    // complex: the norms of the moduli, a real factor scaling both parts
    Value xa = cplx ? b.abs(b.convert(x, c)) : x;
    DType rc = cplx ? xa.dtype() : c;
    Value nrm = vectorNorm(b, xa, ctx.staticDouble(1), dims, rc);
    Value maxnorm = b.broadcastTo(scalarArg(ctx, 3, rc), nrm.shape());
    Value factor = b.select(b.compare(nrm, maxnorm, Cmp::GT),
                            b.div(maxnorm, b.add(nrm, b.constantF(1e-7, rc, nrm.shape()))), b.onesLike(nrm));
    Value f = expandReduced(b, factor, x.shape(), dims);
    if (cplx) f = b.complex(f, b.zerosLike(f));
    return {b.convert(b.mul(b.convert(x, c), f), t)};
  }).staticArgs({"p"}).accepts(floatOrComplexInput).complex();
  r.add("aten::count_nonzero.dim_IntList", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    std::vector<int64_t> dims = reduceDims(ctx, 1, x.rank());
    Value nz = b.convert(x.dtype() == DType::Pred ? x : b.compare(x, b.zerosLike(x), Cmp::NE), DType::S64);
    return {dims.empty() ? nz : b.reduce(nz, dims, ReduceKind::Sum)};
  }).accepts(realDTypes).complex();

  auto addFloat = [&](const std::string& op, RuleFn fn, std::vector<std::string> statics = {}) {
    r.add(op, std::move(fn)).staticArgs(std::move(statics)).accepts(floatOrComplexInput).complex();
  };
  addFloat("aten::var.correction", [](Context& ctx) -> std::vector<Value> { return {varRule(ctx, false)[0]}; });
  addFloat("aten::std.correction", [](Context& ctx) -> std::vector<Value> { return {varRule(ctx, true)[0]}; });
  addFloat("aten::var_mean.correction", [](Context& ctx) { return varRule(ctx, false); });
  addFloat("aten::std_mean.correction", [](Context& ctx) { return varRule(ctx, true); });

  // linalg_vector_norm(self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)
  r.add("aten::linalg_vector_norm", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    double ord = ctx.has(1) ? ctx.staticDouble(1) : 2.0;
    std::vector<int64_t> dims = reduceDims(ctx, 2, x.rank());
    // the norm of complex numbers is the norm of their moduli (a real result)
    Value v = shlo::isComplex(x.dtype()) ? ctx.b.abs(x) : x;
    DType out = ctx.has(4) ? ctx.arg(4).dtype : toFloat(v.dtype());
    out = shlo::componentType(out);  // (a complex dtype= argument)
    Value r = vectorNorm(ctx.b, v, ord, dims, out);
    return {keepDims(ctx.b, r, x.shape(), dims, optBool(ctx, 3))};
  }).staticArgs({"ord"}).accepts(floatOrComplexInput).complex();
  // norm.ScalarOpt_dim(self, Scalar? p, int[1] dim, bool keepdim=False)
  r.add("aten::norm.ScalarOpt_dim", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    double ord = ctx.has(1) ? ctx.staticDouble(1) : 2.0;
    std::vector<int64_t> dims = reduceDims(ctx, 2, x.rank());
    Value v = shlo::isComplex(x.dtype()) ? ctx.b.abs(x) : x;
    Value r = vectorNorm(ctx.b, v, ord, dims, v.dtype());
    return {keepDims(ctx.b, r, x.shape(), dims, optBool(ctx, 3))};
  }).staticArgs({"p"}).accepts(floatOrComplexInput).complex();
  r.add("aten::logsumexp", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    DType out = shlo::isComplex(x.dtype()) ? x.dtype() : toFloat(x.dtype());
    Value xc = b.convert(x, accType(out));
    std::vector<int64_t> dims = reduceDims(ctx, 1, x.rank());
    const bool cplx = shlo::isComplex(xc.dtype());
    // reducing nothing (a 0-d input): the value itself, but for complex numbers CPU's log(exp(z - m)) + m, whose
    // imaginary part is z's wrapped into (-pi, pi] (the barrier keeps XLA from folding log(exp(.)) away)
    if (dims.empty() && !cplx) return {b.convert(xc, out)};
    // complex numbers shift by the largest real part (PyTorch's choice)
    Value m = dims.empty() ? b.realPart(xc) : reduceNan(b, cplx ? b.realPart(xc) : xc, dims, ReduceKind::Max);
    // an infinite max would give inf - inf = NaN: shift by 0 instead (PyTorch does the same)
    m = b.select(b.compare(b.abs(m), cst(b, INFINITY, m), Cmp::EQ), b.zerosLike(m), m);
    Value mc = cplx ? b.complex(m, b.zerosLike(m)) : m;
    Value s = dims.empty() ? opaque(b, b.exp(b.sub(xc, mc)))
                           : b.reduce(b.exp(b.sub(xc, expandReduced(b, mc, x.shape(), dims))), dims, ReduceKind::Sum);
    Value res = b.add(b.log(s), mc);
    return {keepDims(b, b.convert(res, out), x.shape(), dims, optBool(ctx, 2))};
  }).accepts(realDTypes).complex();
  // ---- cumulative extremes, logcumsumexp, order statistics ----
  r.add("aten::cummax", [](Context& ctx) {
    Value x = ctx.tensor(0);
    return cumExtreme(ctx.b, x, normDim(ctx, ctx.toInt(1), x.rank()), true);
  }).accepts(realDTypes);
  r.add("aten::cummin", [](Context& ctx) {
    Value x = ctx.tensor(0);
    return cumExtreme(ctx.b, x, normDim(ctx, ctx.toInt(1), x.rank()), false);
  }).accepts(realDTypes);
  // logcumsumexp(self, dim): real inputs pairwise (logCumSumExp), complex ones sequentially as CPU
  // (complexLogCumSumExp: their imaginary parts depend on the order of additions).
  r.add("aten::logcumsumexp", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    const int64_t d = normDim(ctx, ctx.toInt(1), x.rank());
    if (shlo::isComplex(x.dtype())) return {complexLogCumSumExp(ctx.b, x, d)};
    return {ctx.b.convert(logCumSumExp(ctx.b, ctx.b.convert(x, accType(x.dtype())), d), x.dtype())};
  }).accepts(floatOrComplexInput).complex();
  // kthvalue(self, k, dim=-1, keepdim=False) -> (values, indices)
  r.add("aten::kthvalue", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    int64_t k = ctx.toInt(1);
    bool keep = optBool(ctx, 3);
    if (x.rank() == 0) return {x, b.constantInt(0, DType::S64)};
    int64_t d = normDim(ctx, ctx.has(2) ? ctx.toInt(2) : -1, x.rank());
    auto res = pickAlong(b, sortAlong(b, x, d), d, b.constantInt(k - 1, DType::S64));
    return {keepDims(b, res[0], x.shape(), {d}, keep), keepDims(b, res[1], x.shape(), {d}, keep)};
  }).accepts(alongNonEmptyDim(2, -1, false));
  for (bool ignore : {false, true}) {
    std::string base = ignore ? "aten::nanmedian" : "aten::median";
    r.add(base, [ignore](Context& ctx) -> std::vector<Value> {
      Builder& b = ctx.b;
      Value x = ctx.tensor(0);
      if (x.type.numel() == 0) return {b.constantF(NAN, x.dtype(), {})};
      Value flat = b.reshape(x, {x.type.numel()});
      return {medianAlong(b, flat, 0, ignore)[0]};
    }).accepts(nonBoolInput);
    r.add(base + ".dim", [ignore](Context& ctx) -> std::vector<Value> {
      Builder& b = ctx.b;
      Value x = ctx.tensor(0);
      bool keep = optBool(ctx, 2);
      if (x.rank() == 0) return {x, b.constantInt(0, DType::S64)};
      int64_t d = normDim(ctx, ctx.toInt(1), x.rank());
      auto res = medianAlong(b, x, d, ignore);
      return {keepDims(b, res[0], x.shape(), {d}, keep), keepDims(b, res[1], x.shape(), {d}, keep)};
    }).accepts(alongNonEmptyDim(1, 0, false));
  }
  // _cdist_forward(x1 [..., P, M], x2 [..., R, M], p, compute_mode) -> [..., P, R]: pairwise p-norm distances.
  r.add("aten::_cdist_forward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    const TensorType& ot = ctx.outputs.at(0);
    DType c = accType(ot.dtype);
    Value x1 = b.convert(ctx.tensor(0), c), x2 = b.convert(ctx.tensor(1), c);
    double p = ctx.staticDouble(2);
    int64_t m = x1.shape().back();
    Shape big = ot.shape;  // [..., P, R]
    big.push_back(m);
    int64_t r = int64_t(ot.shape.size());
    Shape b1(ot.shape.begin(), ot.shape.end() - 2);
    Shape s1 = b1, s2 = b1;
    s1.push_back(x1.shape()[x1.rank() - 2]);
    s1.push_back(m);
    s2.push_back(x2.shape()[x2.rank() - 2]);
    s2.push_back(m);
    x1 = b.broadcastTo(x1, s1);
    x2 = b.broadcastTo(x2, s2);
    std::vector<int64_t> m1, m2;
    for (int64_t k = 0; k < r - 2; ++k) m1.push_back(k), m2.push_back(k);
    m1.push_back(r - 2);
    m1.push_back(r);
    m2.push_back(r - 1);
    m2.push_back(r);
    Value d = b.sub(b.broadcastInDim(x1, big, m1), b.broadcastInDim(x2, big, m2));
    if (m == 0) return {b.zeros(ot)};
    return {distanceNorm(b, d, p, {r}, ot.dtype, /*nan_free_max=*/true)};
    // PyTorch CPU's cdist implements float32/float64 only (half types raise there)
  }).staticArgs({"p"}).accepts([](const Context& ctx) {
    return realDTypes(ctx) && (ctx.tensor(0).dtype() == DType::F32 || ctx.tensor(0).dtype() == DType::F64);
  });
  // _cdist_backward(grad [..., P, R], x1 [..., P, M], x2 [..., R, M], p, cdist) -> grad of x1.
  r.add("aten::_cdist_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    const TensorType& ot = ctx.outputs.at(0);  // x1's shape
    DType c = accType(ot.dtype);
    Value g = b.convert(ctx.tensor(0), c), x1 = b.convert(ctx.tensor(1), c), x2 = b.convert(ctx.tensor(2), c);
    Value dist = b.convert(ctx.tensor(4), c);
    double p = ctx.staticDouble(3);
    int64_t r = g.rank(), m = x1.shape().back();
    if (p == 0 || ot.numel() == 0 || g.type.numel() == 0) return {b.zeros(ot)};
    Shape big = g.shape();
    big.push_back(m);
    Shape s1(g.shape().begin(), g.shape().end() - 2), s2 = s1;
    s1.push_back(x1.shape()[x1.rank() - 2]);
    s1.push_back(m);
    s2.push_back(x2.shape()[x2.rank() - 2]);
    s2.push_back(m);
    x1 = b.broadcastTo(x1, s1);
    x2 = b.broadcastTo(x2, s2);
    std::vector<int64_t> m1, m2, mg;
    for (int64_t k = 0; k < r - 2; ++k) m1.push_back(k), m2.push_back(k), mg.push_back(k);
    m1.push_back(r - 2), m1.push_back(r);
    m2.push_back(r - 1), m2.push_back(r);
    mg.push_back(r - 2), mg.push_back(r - 1);
    Value d = b.sub(b.broadcastInDim(x1, big, m1), b.broadcastInDim(x2, big, m2));
    Value gb = b.broadcastInDim(g, big, mg), db = b.broadcastInDim(dist, big, mg);
    Value term = distanceGradTerm(b, gb, d, db, p);
    Value res = b.reduce(term, {r - 1}, ReduceKind::Sum);  // [..., P, M]
    return {b.convert(b.reshape(res, ot.shape), ot.dtype)};
  })
      .staticArgs({"p"})
      .accepts(floatInput);
  // _pdist_forward(self [N, M], p) -> [N (N - 1) / 2]: the p-norm distance of rows i < j, pair by pair in row-major
  // order. Pair k's first row i is found by PyTorch's binary search of the pairs' row starts (row r starts at
  // r N - r (r + 1) / 2), computed rather than read, so no table of pairs enters the program.
  r.add("aten::_pdist_forward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    const int64_t n = x.shape()[0], k = n * (n - 1) / 2;
    if (k == 0 || x.shape()[1] == 0) return {b.zeros({x.dtype(), {k}})};
    auto [d, pairs] = pairDifferences(b, b.convert(x, accType(x.dtype())));
    return {distanceNorm(b, d, ctx.staticDouble(1), {1}, x.dtype())};
  }).staticArgs({"p"}).accepts(pdistAccepts(1));
  // _pdist_backward(grad [K], self [N, M], p, pdist [K]) -> grad of self: each pair's term added to its first row
  // and subtracted from its second.
  r.add("aten::_pdist_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(1);
    const DType c = accType(x.dtype());
    const int64_t n = x.shape()[0], m = x.shape()[1], k = n * (n - 1) / 2;
    const double p = ctx.staticDouble(2);
    if (k == 0 || m == 0 || p == 0) return {b.zeros(x.type)};
    auto [d, pairs] = pairDifferences(b, b.convert(x, c));
    const Shape ks{k, m};
    Value term = distanceGradTerm(b, b.broadcastInDim(b.convert(ctx.tensor(0), c), ks, {0}), d,
                                  b.broadcastInDim(b.convert(ctx.tensor(3), c), ks, {0}), p);
    Builder::ScatterDims sd;
    sd.update_window_dims = {1};
    sd.inserted_window_dims = {0};
    sd.scatter_dims_to_operand_dims = {0};
    sd.index_vector_dim = 1;
    Value gx = b.scatter(b.zeros({c, {n, m}}), b.reshape(pairs.first, {k, 1}), term, sd, ReduceKind::Sum);
    gx = b.scatter(gx, b.reshape(pairs.second, {k, 1}), b.neg(term), sd, ReduceKind::Sum);
    return {b.convert(gx, x.dtype())};
  }).staticArgs({"p"}).accepts(pdistAccepts(2));
  // mode(self, dim=-1, keepdim=False) -> (values, indices): the smallest most frequent value and the last position
  // holding it (what PyTorch CPU's sort-and-scan returns for rows of up to 16 elements, where its sort is stable).
  r.add("aten::mode", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x0 = ctx.tensor(0);
    bool keep = optBool(ctx, 2);
    if (x0.rank() == 0) return {x0, b.constantInt(0, DType::S64)};
    int64_t d = normDim(ctx, ctx.has(1) ? ctx.toInt(1) : -1, x0.rank());
    Value x = x0.dtype() == DType::Pred ? b.convert(x0, DType::U8) : x0;
    int64_t n = x.shape()[d];
    if (n == 0) ctx.fail("mode of an empty dimension");
    auto [xt, perm] = moveLast(b, x, d);
    int64_t r = xt.rank();
    Shape s2 = xt.shape();
    s2.push_back(n);  // [..., i, j]
    std::vector<int64_t> mi, mj, keepd;
    for (int64_t k = 0; k < r - 1; ++k) mi.push_back(k), mj.push_back(k), keepd.push_back(k);
    mi.push_back(r - 1);
    mj.push_back(r);
    keepd.push_back(r - 1);
    Value xi = b.broadcastInDim(xt, s2, mi), xj = b.broadcastInDim(xt, s2, mj);
    Value freq = b.reduce(b.convert(b.compare(xi, xj, Cmp::EQ), DType::S64), {r}, ReduceKind::Sum);  // [..., i]
    Value maxf = b.reduce(freq, {r - 1}, ReduceKind::Max);
    std::vector<int64_t> bm;
    for (int64_t k = 0; k < r - 1; ++k) bm.push_back(k);
    Value best = b.compare(freq, b.broadcastInDim(maxf, freq.shape(), bm), Cmp::EQ);
    Value big = b.constantF(highest(xt.dtype()), xt.dtype(), xt.shape());
    Value val = b.reduce(b.select(best, xt, big), {r - 1}, ReduceKind::Min);  // [...]
    Value at = b.compare(xt, b.broadcastInDim(val, xt.shape(), bm), Cmp::EQ);
    Value pos = b.iota({DType::S64, xt.shape()}, r - 1);
    Value idx = b.reduce(b.select(at, pos, b.constantF(-1, DType::S64, xt.shape())), {r - 1}, ReduceKind::Max);
    val = b.convert(val, x0.dtype());
    return {keepDims(b, val, x0.shape(), {d}, keep), keepDims(b, idx, x0.shape(), {d}, keep)};
  }).accepts(realDTypes);
  r.add("aten::cumsum", [](Context& ctx) { return cumRule(ctx, ReduceKind::Sum); })
      .accepts(cumAccepts).dtypes(kWideUnsigned | kComplex);
  r.add("aten::cumprod", [](Context& ctx) { return cumRule(ctx, ReduceKind::Prod); }).accepts(cumAccepts).complex();
  r.add("aten::trace", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    if (x.rank() != 2) ctx.fail("expected a matrix");
    DType out = sumType(ctx, 99, x.dtype());
    Value eye = b.compare(b.iota({DType::S64, x.shape()}, 0), b.iota({DType::S64, x.shape()}, 1), Cmp::EQ);
    Value v = b.convert(x, accType(out) == DType::Pred ? DType::S64 : accType(out));
    v = b.select(eye, v, b.zerosLike(v));
    return {b.convert(b.reduce(v, {0, 1}, ReduceKind::Sum), out)};
  }).accepts(realDTypes).complex();
}

}  // namespace torch_tpu::lowering
