#include "lowering/helpers.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "lowering/default_dtype.h"

namespace torch_tpu::lowering {

namespace {
std::atomic<DefaultFloatSource> g_default_float_source{nullptr};
}  // namespace

void setDefaultFloatSource(DefaultFloatSource source) { g_default_float_source.store(source); }

DType defaultFloat() {
  DefaultFloatSource s = g_default_float_source.load(std::memory_order_relaxed);
  return s ? s() : DType::F32;
}

DType defaultComplex() { return defaultFloat() == DType::F64 ? DType::C128 : DType::C64; }

Category categoryOf(DType t) {
  if (t == DType::Pred) return Category::Bool;
  if (shlo::isComplex(t)) return Category::Complex;
  if (shlo::isFloat(t) || shlo::isFloat8(t)) return Category::Float;
  return Category::Int;
}

namespace {

DType signedOfWidth(int bits) {
  switch (bits) {
    case 8: return DType::S8;
    case 16: return DType::S16;
    case 32: return DType::S32;
    default: return DType::S64;
  }
}

}  // namespace

DType promote(DType a, DType b) {
  if (a == DType::Invalid) return b;
  if (b == DType::Invalid || a == b) return a;
  if (a == DType::Pred) return b;
  if (b == DType::Pred) return a;
  Category ca = categoryOf(a), cb = categoryOf(b);
  if (ca == Category::Complex || cb == Category::Complex) {
    bool wide = a == DType::C128 || b == DType::C128 || a == DType::F64 || b == DType::F64;
    return wide ? DType::C128 : DType::C64;
  }
  if (ca == Category::Float && cb == Category::Float) {
    bool ah = a == DType::F16 || a == DType::BF16, bh = b == DType::F16 || b == DType::BF16;
    if (ah && bh) return DType::F32;  // f16 + bf16
    return shlo::bitWidth(a) >= shlo::bitWidth(b) ? a : b;
  }
  if (ca == Category::Float) return a;
  if (cb == Category::Float) return b;
  // both integers
  bool sa = shlo::isSigned(a), sb = shlo::isSigned(b);
  if (sa == sb) return shlo::bitWidth(a) >= shlo::bitWidth(b) ? a : b;
  DType s = sa ? a : b, u = sa ? b : a;
  if (shlo::bitWidth(s) > shlo::bitWidth(u)) return s;
  return signedOfWidth(std::min(64, 2 * shlo::bitWidth(u)));
}

namespace {

// PyTorch's combine_categories(higher, lower).
DType combineCategories(DType higher, DType lower) {
  if (higher == DType::Invalid) return lower;
  if (lower == DType::Invalid) return higher;
  if (shlo::isComplex(higher)) return higher;
  if (shlo::isComplex(lower)) {
    if (shlo::isFloat(higher)) return higher == DType::F64 ? DType::C128 : DType::C64;
    return lower;
  }
  if (shlo::isFloat(higher) || shlo::isFloat8(higher)) return higher;
  if (higher == DType::Pred || shlo::isFloat(lower)) return promote(higher, lower);
  return higher;
}

}  // namespace

DType resultType(const std::vector<TypeOperand>& operands) {
  DType dim = DType::Invalid, zero = DType::Invalid, wrapped = DType::Invalid;
  for (const TypeOperand& o : operands) {
    if (o.dtype == DType::Invalid) continue;
    switch (o.priority) {
      case TypeOperand::Dim: dim = promote(dim, o.dtype); break;
      case TypeOperand::ZeroDim: zero = promote(zero, o.dtype); break;
      case TypeOperand::Wrapped: {
        DType t = o.dtype;
        if (shlo::isFloat(t)) t = defaultFloat();
        else if (shlo::isComplex(t)) t = defaultComplex();
        wrapped = promote(wrapped, t);
        break;
      }
    }
  }
  return combineCategories(dim, combineCategories(zero, wrapped));
}

bool isNumberArg(const Context& ctx, size_t i) {
  const Arg& a = ctx.arg(i);
  return a.kind == Arg::Kind::Scalar || a.kind == Arg::Kind::Double ||
         (a.kind == Arg::Kind::Tensor && a.wrapped_number);
}

TypeOperand typeOperand(const Context& ctx, size_t i) {
  const Arg& a = ctx.arg(i);
  TypeOperand o;
  switch (a.kind) {
    case Arg::Kind::Tensor:
      if (a.wrapped_number) {
        o.priority = TypeOperand::Wrapped;
        o.dtype = a.tensor.valid() ? a.tensor.dtype() : a.scalar.dtype();
      } else {
        o.dtype = a.tensor.dtype();
        o.priority = a.tensor.rank() == 0 ? TypeOperand::ZeroDim : TypeOperand::Dim;
      }
      break;
    case Arg::Kind::Scalar:
      o.priority = TypeOperand::Wrapped;
      o.dtype = a.scalar.kind != HostScalar::Kind::None ? a.scalar.dtype() : DType::F64;  // kind always set
      break;
    case Arg::Kind::Double:
      o.priority = TypeOperand::Wrapped;
      o.dtype = DType::F64;
      break;
    case Arg::Kind::Int:
      o.priority = TypeOperand::Wrapped;
      o.dtype = DType::S64;
      break;
    case Arg::Kind::Bool:
      o.priority = TypeOperand::Wrapped;
      o.dtype = DType::Pred;
      break;
    default:
      o.dtype = DType::Invalid;
  }
  return o;
}

DType resultTypeOf(const Context& ctx, const std::vector<size_t>& args) {
  std::vector<TypeOperand> ops;
  for (size_t i : args)
    if (ctx.has(i)) ops.push_back(typeOperand(ctx, i));
  return resultType(ops);
}

DType accType(DType t) { return (t == DType::BF16 || t == DType::F16 || shlo::isFloat8(t)) ? DType::F32 : t; }
DType toFloat(DType t) { return shlo::isFloat(t) || shlo::isComplex(t) ? t : defaultFloat(); }
bool halfOrFloat(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

Shape broadcastShapes(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (auto& s : shapes) {
    size_t off = rank - s.size();
    for (size_t k = 0; k < s.size(); ++k) {
      int64_t& o = out[off + k];
      int64_t d = s[k];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      throw shlo::BuildError("shapes are not broadcastable (dimension " + std::to_string(off + k) + ": " +
                             std::to_string(o) + " vs " + std::to_string(d) + ")");
    }
  }
  return out;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape argShape(const Context& ctx, size_t i) {
  const Arg& a = ctx.arg(i);
  if (a.kind == Arg::Kind::Tensor && !a.wrapped_number && a.tensor.valid()) return a.tensor.shape();
  return {};
}

Value scalarArg(Context& ctx, size_t i, DType t) {
  const Arg& a = ctx.arg(i);
  Builder& b = ctx.b;
  switch (a.kind) {
    case Arg::Kind::Int: return b.constantInt(a.i, t);
    case Arg::Kind::Bool: return b.constant(a.b ? 1 : 0, t);
    case Arg::Kind::Scalar:
    case Arg::Kind::Double:
      // Arg::scalar's kind is always set but its value only for static args: the context decides (it returns a
      // constant for a static argument, a program input otherwise).
      return ctx.scalar(i, t);
    case Arg::Kind::Tensor:
      if (a.wrapped_number) return ctx.scalar(i, t);
      if (a.tensor.rank() != 0) ctx.fail("argument '" + a.name + "' must be a number or a 0-d tensor");
      return b.convert(a.tensor, t);
    default: ctx.fail("argument '" + a.name + "' is not a number");
  }
}

Value operand(Context& ctx, size_t i, DType t, const Shape& shape) {
  const Arg& a = ctx.arg(i);
  Value v;
  if (a.kind == Arg::Kind::Tensor && !a.wrapped_number) {
    v = ctx.b.convert(ctx.tensor(i), t);
  } else {
    v = scalarArg(ctx, i, t);
  }
  return ctx.b.broadcastTo(v, shape);
}

std::vector<int64_t> range(int64_t lo, int64_t hi) {
  std::vector<int64_t> d;
  for (int64_t k = lo; k < hi; ++k) d.push_back(k);
  return d;
}

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

Value constantS64(Builder& b, int64_t v, const Shape& shape) {
  return b.broadcastTo(b.constantInt(v, DType::S64), shape);
}

Value binarySearch(Builder& b, const std::function<Value(Value)>& boundaryAt, Value v, int64_t n, bool right) {
  int steps = 0;
  while ((int64_t(1) << steps) <= n) ++steps;
  return binarySearch(b, boundaryAt, v, n, b.zeros({DType::S64, v.shape()}), constantS64(b, n, v.shape()), steps,
                      right);
}

Value binarySearch(Builder& b, const std::function<Value(Value)>& boundaryAt, Value v, int64_t n, Value lo, Value hi,
                   int steps, bool right) {
  const Shape vs = v.shape();
  Value one = constantS64(b, 1, vs);
  Value last = constantS64(b, std::max<int64_t>(n - 1, 0), vs);
  for (int i = 0; i < steps; ++i) {
    Value active = b.compare(lo, hi, Cmp::LT);
    Value mid = b.add(lo, b.shiftRightLogical(b.sub(hi, lo), one));
    Value bm = boundaryAt(b.clamp(b.zerosLike(mid), mid, last));
    Value go_right = b.notOp(b.compare(bm, v, right ? Cmp::GT : Cmp::GE));
    lo = b.select(b.andOp(active, go_right), b.add(mid, one), lo);
    hi = b.select(b.andOp(active, b.notOp(go_right)), mid, hi);
  }
  return lo;
}

Value opaque(Builder& b, Value v) { return b.genericOp("stablehlo.optimization_barrier", {v}, "", {v.type})[0]; }

namespace {
// a k + c rounded once, as CPU's compiled `c + a * k` (a fused multiply-add) gives it, for float32 and float64 a and
// c and integers k (as a's dtype) below 2^26. float32 computes in float64 (exact product). float64: the product's
// rounding error from a split of a (its low 27 bits masked off, exact), the sum's by TwoSum; the product passes an
// optimization barrier so that XLA does not fuse it into the sum itself.
Value fusedMulAdd(Builder& b, Value a, Value k, Value c) {
  if (a.dtype() == DType::F32) {
    auto f64 = [&](Value v) { return b.convert(v, DType::F64); };
    return b.convert(b.add(b.mul(f64(a), f64(k)), f64(c)), DType::F32);
  }
  const Shape& s = a.shape();
  Value ah = b.bitcastConvert(b.andOp(b.bitcastConvert(a, DType::S64), constantS64(b, ~int64_t((1 << 27) - 1), s)),
                              DType::F64);
  Value al = b.sub(a, ah);
  Value p = opaque(b, b.mul(a, k));
  Value e = b.add(b.sub(b.mul(ah, k), p), b.mul(al, k));
  Value sum = b.add(p, c);
  Value bb = b.sub(sum, p);
  Value t = b.add(b.sub(p, b.sub(sum, bb)), b.sub(c, bb));
  return b.add(sum, b.add(t, e));
}
}  // namespace

Value linspaceTwoSided(Builder& b, Value start, Value end, Value diff, int64_t steps) {
  const Shape& s = start.shape();
  const DType c = start.dtype();
  // XLA turns a division by a constant into a multiplication by its reciprocal, which rounds differently from
  // CPU's division (linspace(1, 127, 50, dtype=int16)[21] gave 54 for CPU's 55): the divisor passes an optimization
  // barrier, so that it is no constant to XLA (start and end may be constants too, as histogram's given range).
  Value step = b.div(diff, opaque(b, b.constantF(double(steps - 1), c, s)));
  Value idx = b.iota({DType::S64, s}, 0);
  Value fi = b.convert(idx, c);
  Value back = b.convert(b.sub(constantS64(b, steps - 1, s), idx), c);
  Value lo, hi;
  if ((c == DType::F32 || c == DType::F64) && steps < (int64_t(1) << 26)) {
    // CPU's kernel compiles start + step * i into a fused multiply-add
    lo = fusedMulAdd(b, step, fi, start);
    hi = fusedMulAdd(b, b.neg(step), back, end);
  } else {
    lo = b.add(start, b.mul(step, fi));
    hi = b.sub(end, b.mul(step, back));
  }
  return b.select(b.compare(idx, constantS64(b, steps / 2, s), Cmp::LT), lo, hi);
}

int64_t normDim(const Context& ctx, int64_t d, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (d < -r || d >= r)
    ctx.fail("dimension " + std::to_string(d) + " out of range for a tensor of rank " + std::to_string(rank));
  if (d < 0) d += r;
  return rank == 0 ? 0 : d;
}

std::vector<int64_t> normDims(const Context& ctx, const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t d : dims) out.push_back(normDim(ctx, d, rank));
  if (rank == 0) return {};
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int64_t> reduceDims(const Context& ctx, size_t arg, int64_t rank) {
  const Arg& a = ctx.arg(arg);
  std::vector<int64_t> dims;
  if (a.kind == Arg::Kind::Int) dims = {a.i};
  else if (a.kind == Arg::Kind::IntList) dims = a.ints;
  if (a.isNone() || (a.kind == Arg::Kind::IntList && a.ints.empty())) {
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
    return dims;
  }
  return normDims(ctx, dims, rank);
}

Shape reducedShape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    bool red = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!red) out.push_back(shape[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

int64_t reducedCount(const Shape& shape, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= shape[d];
  return n;
}

Value cst(Builder& b, double v, const Value& like) { return b.scalarLike(v, like); }

Value copySign(Builder& b, Value mag, Value sgn) {
  const int bits = shlo::bitWidth(sgn.dtype());
  const DType it = bits == 64 ? DType::S64 : bits == 32 ? DType::S32 : DType::S16;
  Value sbits = b.bitcastConvert(sgn, it);
  Value neg = b.compare(sbits, b.zerosLike(sbits), Cmp::LT);
  Value a = b.abs(mag);
  return b.select(neg, b.neg(a), a);
}

Value isNan(Builder& b, Value x) {  // complex: either component NaN
  if (shlo::isFloat8(x.dtype())) x = b.convert(x, DType::F32);
  if (!shlo::isFloat(x.dtype()) && !shlo::isComplex(x.dtype())) return b.constantF(0, DType::Pred, x.shape());
  return b.compare(x, x, shlo::Cmp::NE);
}

Value nanMax(Builder& b, Value x, Value y) {
  if (x.dtype() == DType::Pred) return b.orOp(x, y);
  Value m = b.max(x, y);
  if (!shlo::isFloat(x.dtype())) return m;
  m = b.select(isNan(b, y), y, m);
  return b.select(isNan(b, x), x, m);
}

Value nanMin(Builder& b, Value x, Value y) {
  if (x.dtype() == DType::Pred) return b.andOp(x, y);
  Value m = b.min(x, y);
  if (!shlo::isFloat(x.dtype())) return m;
  m = b.select(isNan(b, y), y, m);
  return b.select(isNan(b, x), x, m);
}

Value reduceNan(Builder& b, Value x, const std::vector<int64_t>& dims, ReduceKind kind) {
  if (x.dtype() == DType::Pred) {
    if (kind == ReduceKind::Max) kind = ReduceKind::Or;
    else if (kind == ReduceKind::Min) kind = ReduceKind::And;
    else if (kind == ReduceKind::Sum) kind = ReduceKind::Or;
    else if (kind == ReduceKind::Prod) kind = ReduceKind::And;
  }
  if (dims.empty()) return x;
  Value r = b.reduce(x, dims, kind);
  if ((kind == ReduceKind::Max || kind == ReduceKind::Min) && shlo::isFloat(x.dtype())) {
    Value any_nan = b.reduce(isNan(b, x), dims, ReduceKind::Or);
    r = b.select(any_nan, b.constantF(std::numeric_limits<double>::quiet_NaN(), r.dtype(), r.shape()), r);
  }
  return r;
}

Value sumDims(Builder& b, Value x, const std::vector<int64_t>& dims) {
  return dims.empty() ? x : b.reduce(x, dims, ReduceKind::Sum);
}

Value reduceSumAs(Builder& b, Value x, const std::vector<int64_t>& dims, DType out) {
  DType acc = accType(out);
  Value v = b.convert(x, acc);
  if (acc == DType::Pred) v = b.convert(v, DType::S64);
  if (!dims.empty()) v = b.reduce(v, dims, ReduceKind::Sum);
  return b.convert(v, out);
}

Value keepDims(Builder& b, Value reduced, const Shape& orig, const std::vector<int64_t>& dims, bool keepdim) {
  if (!keepdim) return reduced;
  return b.reshape(reduced, reducedShape(orig, dims, true));
}

Value gatherDim(Builder& b, Value x, int64_t dim, Value idx) {
  const Shape os = idx.shape();
  int64_t r = x.rank();
  Shape cs = os;
  cs.push_back(1);
  std::vector<Value> comps;
  for (int64_t d = 0; d < r; ++d)
    comps.push_back(b.reshape(d == dim ? b.convert(idx, DType::S64) : b.iota({DType::S64, os}, d), cs));
  Builder::GatherDims gd;
  gd.collapsed_slice_dims = range(0, r);
  gd.start_index_map = range(0, r);
  gd.index_vector_dim = r;
  return b.gather(x, b.concatenate(comps, r), gd, std::vector<int64_t>(size_t(r), 1), os);
}

Value takeAlong(Builder& b, Value x, int64_t dim, Value index) {
  Builder::GatherDims gd;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != dim) gd.offset_dims.push_back(d);
  gd.collapsed_slice_dims = {dim};
  gd.start_index_map = {dim};
  gd.index_vector_dim = 1;
  std::vector<int64_t> sizes = x.shape();
  sizes[size_t(dim)] = 1;
  Shape out = x.shape();
  out[size_t(dim)] = index.type.numel();
  return b.gather(x, b.reshape(index, {index.type.numel()}), gd, sizes, out);
}

Value takeAlong(Builder& b, Value x, int64_t dim, const std::vector<int64_t>& idx) {
  Shape out = x.shape();
  out[size_t(dim)] = int64_t(idx.size());
  if (idx.empty() || x.type.numel() == 0) return b.zeros({x.dtype(), out});
  return takeAlong(b, x, dim, b.constantI64s(idx, DType::S64));
}

Value expandReduced(Builder& b, Value reduced, const Shape& shape, const std::vector<int64_t>& dims) {
  Shape red = reducedShape(shape, dims, false);
  Value r = b.reshape(reduced, red);
  std::vector<int64_t> map;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) map.push_back(d);
  return b.broadcastInDim(r, shape, map);
}

Value logSigmoid(Builder& b, Value x) {
  return b.sub(b.min(x, b.zerosLike(x)), b.log1p(b.exp(b.neg(b.abs(x)))));
}

Value cubicConvolution1(Builder& b, Value x, double A) {
  return b.add(b.mul(b.sub(b.mul(cst(b, A + 2, x), x), cst(b, A + 3, x)), b.mul(x, x)), cst(b, 1, x));
}

Value cubicConvolution2(Builder& b, Value x, double A) {
  return b.sub(b.mul(b.add(b.mul(b.sub(b.mul(cst(b, A, x), x), cst(b, 5 * A, x)), x), cst(b, 8 * A, x)), x),
               cst(b, 4 * A, x));
}

Value gelu(Builder& b, Value x, const std::string& approximate) {
  Value half = cst(b, 0.5, x), one = cst(b, 1, x);
  if (approximate == "tanh") {
    const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715;
    Value cube = b.mul(b.mul(x, x), x);
    Value inner = b.mul(cst(b, kBeta, x), b.add(x, b.mul(cst(b, kKappa, x), cube)));
    return b.mul(b.mul(half, x), b.add(one, b.tanh(inner)));
  }
  return b.mul(b.mul(x, half), b.add(one, b.chlo("erf", b.mul(x, cst(b, M_SQRT1_2, x)))));
}

Value inAcc(Builder& b, Value x, DType out, const std::function<Value(Value)>& fn) {
  DType acc = accType(x.dtype());
  return b.convert(fn(b.convert(x, acc)), out);
}

bool realDTypes(const Context& ctx) {
  // Complex tensors reach a rule only when its row is listing kComplex (declineReason), so this checks the rest.
  for (const Arg& a : ctx.args) {
    if (a.kind == Arg::Kind::Tensor && a.tensor.valid() && a.tensor.dtype() == DType::Invalid) return false;
    if (a.kind == Arg::Kind::TensorList)
      for (const Value& v : a.tensors)
        if (v.valid() && v.dtype() == DType::Invalid) return false;
  }
  return true;
}

}  // namespace torch_tpu::lowering
