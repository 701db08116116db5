// Histogram family: histc, histogram (a bin count or a tensor of bin edges) and histogramdd's parts
// (_histogramdd_bin_edges, _histogramdd_from_bin_cts, _histogramdd_from_bin_tensors), as PyTorch CPU computes them.
//
// CPU's histogram kernel (aten/src/ATen/native/cpu/HistogramKernel.cpp) reads the input as M points of D
// coordinates. Equal-width bins have linspace edges between the outer edges (the range, else the data's min and max
// per coordinate, else 0 and 1 for no data; a flat range widened by 0.5 each way); a coordinate's bin is
// (x - left) * bins / (right - left) truncated, then corrected by a binary search of the edges around it. Given edge
// tensors are searched whole (upper bound). The rightmost edge belongs to the last bin; coordinates outside the edges
// (and NaNs) drop their point. Counts (or weights) add up in the input's dtype; density divides by their total and
// then by each coordinate's bin lengths.
#include <cmath>
#include <optional>

#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

using shlo::isFloat;

// Adds weights [n] into `size` bins at idx [n] (S64; `size` drops the element), in the weights' dtype.
Value addIntoBins(Builder& b, Value idx, Value weights, int64_t size) {
  const int64_t n = idx.shape()[0];
  Builder::ScatterDims sd;
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  Value hist = b.scatter(b.zeros({weights.dtype(), {size + 1}}), b.reshape(idx, {n, 1}), weights, sd, ReduceKind::Sum);
  return b.sliceInDim(hist, 0, size, 1, 0);
}

// One coordinate's bins: the bin of each x [n] (dtype t) among edges [ne] (dtype t, ne >= 1) and whether x lies
// within the outer edges. `linear`: the edges are a linspace (the truncated interpolation, then an upper-bound
// search of the three edges around it, CPU's LINEAR_INTERPOLATION_WITH_LOCAL_SEARCH); else an upper-bound search
// of all edges.
std::pair<Value, Value> binOf(Builder& b, Value x, Value edges, bool linear) {
  const Shape& s = x.shape();
  const int64_t ne = edges.shape()[0];
  const DType t = x.dtype();
  Value left = b.broadcastTo(b.reshape(b.sliceInDim(edges, 0, 1, 1, 0), {}), s);
  Value right = b.broadcastTo(b.reshape(b.sliceInDim(edges, ne - 1, ne, 1, 0), {}), s);
  Value in = b.andOp(b.compare(x, left, Cmp::GE), b.compare(x, right, Cmp::LE));
  auto edgeAt = [&](Value i) { return takeRows(b, edges, i); };
  Value pos;
  if (linear) {
    // The divisor is opaque to XLA, so that it keeps CPU's division where the edges are constants instead of
    // multiplying by a reciprocal.
    Value width = opaque(b, b.sub(right, left));
    Value guess = b.div(b.mul(b.sub(x, left), b.constantF(double(ne - 1), t, s)), width);
    // (points outside the edges drop: their guess only needs to be a number)
    guess = b.convert(b.select(in, guess, b.zerosLike(guess)), DType::S64);
    Value lo = b.max(b.sub(guess, constantS64(b, 1, s)), b.zeros({DType::S64, s}));
    Value hi = b.min(b.add(guess, constantS64(b, 2, s)), constantS64(b, ne, s));
    pos = binarySearch(b, edgeAt, x, ne, lo, hi, 2, /*right=*/true);
  } else {
    pos = binarySearch(b, edgeAt, x, ne, /*right=*/true);
  }
  pos = b.sub(pos, constantS64(b, 1, s));
  // the rightmost edge belongs to the last bin
  pos = b.select(b.compare(pos, constantS64(b, ne - 1, s), Cmp::EQ), constantS64(b, ne - 2, s), pos);
  return {pos, in};
}

// The histogram of points [M, D] (dtype t) over the edges of each coordinate, with optional weights [M].
Value histogramOf(Context& ctx, Value pts, const std::vector<Value>& edges, std::optional<Value> weight,
                  bool density, bool linear) {
  Builder& b = ctx.b;
  const int64_t m = pts.shape()[0], d = pts.shape()[1];
  const DType t = pts.dtype();
  Shape hs;
  for (const Value& e : edges) hs.push_back(e.shape()[0] - 1);
  const int64_t size = numel(hs);
  Value idx = b.zeros({DType::S64, {m}}), in = b.constantF(1, DType::Pred, {m});
  int64_t stride = size;
  for (int64_t k = 0; k < d; ++k) {
    stride /= hs[size_t(k)];
    auto [pos, ok] = binOf(b, b.reshape(b.sliceInDim(pts, k, k + 1, 1, 1), {m}), edges[size_t(k)], linear);
    idx = b.add(idx, b.mul(pos, constantS64(b, stride, {m})));
    in = b.andOp(in, ok);
  }
  idx = b.select(in, idx, constantS64(b, size, {m}));
  Value w = weight ? b.convert(*weight, t) : b.constantF(1, t, {m});
  Value hist = b.reshape(addIntoBins(b, idx, w, size), hs);
  if (!density) return hist;
  hist = b.div(hist, b.broadcastTo(b.reduce(hist, range(0, d), ReduceKind::Sum), hs));
  for (int64_t k = 0; k < d; ++k) {
    const Value& e = edges[size_t(k)];
    const int64_t nb = hs[size_t(k)];
    Value len = b.sub(b.sliceInDim(e, 1, nb + 1, 1, 0), b.sliceInDim(e, 0, nb, 1, 0));
    hist = b.div(hist, b.broadcastInDim(len, hs, {k}));
  }
  return hist;
}

// Equal-width edges for points [M, D] (dtype t), bins[k] + 1 per coordinate: linspace between the range's pairs,
// else the coordinates' min and max (0 and 1 for no points), a flat range widened by 0.5 each way. Data ranges
// that are not finite raise as on CPU (a device-side check); a given range is checked when the call is built.
std::vector<Value> equalWidthEdges(Context& ctx, Value pts, const std::vector<int64_t>& bins, size_t range_arg) {
  Builder& b = ctx.b;
  const int64_t m = pts.shape()[0], d = pts.shape()[1];
  const DType t = pts.dtype();
  const DType f64 = DType::F64;
  Value lo, hi;  // [D] f64
  if (ctx.has(range_arg)) {
    const std::vector<double>& r = ctx.arg(range_arg).doubles;
    if (int64_t(r.size()) != 2 * d) throw InvalidCall(ctx.op(), "range needs two numbers per coordinate");
    std::vector<Value> los, his;
    for (int64_t k = 0; k < d; ++k) {
      const double a = r[size_t(2 * k)], z = r[size_t(2 * k + 1)];
      if (!std::isfinite(a) || !std::isfinite(z)) throw InvalidCall(ctx.op(), "range is not finite");
      if (a > z) throw InvalidCall(ctx.op(), "min exceeds max");
      los.push_back(b.constantF(a, f64, {1}));
      his.push_back(b.constantF(z, f64, {1}));
    }
    lo = b.concatenate(los, 0);
    hi = b.concatenate(his, 0);
  } else if (m > 0) {
    lo = b.convert(reduceNan(b, pts, {0}, ReduceKind::Min), f64);
    hi = b.convert(reduceNan(b, pts, {0}, ReduceKind::Max), f64);
    Value finite = b.reduce(b.andOp(b.isFinite(lo), b.isFinite(hi)), {0}, ReduceKind::And);
    ctx.check(finite, "torch.histogramdd: the range of the input is not finite", Value(),
              Context::CheckError::Runtime);
  } else {
    lo = b.zeros({f64, {d}});
    hi = b.constantF(1, f64, {d});
  }
  Value flat = b.compare(lo, hi, Cmp::EQ);
  Value half = b.constantF(0.5, f64, {d});
  lo = b.select(flat, b.sub(lo, half), lo);
  hi = b.select(flat, b.add(hi, half), hi);
  std::vector<Value> edges;
  for (int64_t k = 0; k < d; ++k) {
    const Shape es{bins[size_t(k)] + 1};
    // the outer edges in the result dtype, the steps computed in it (linspace_out into the input's dtype)
    auto outer = [&](Value v) {
      return b.broadcastTo(b.reshape(b.convert(b.sliceInDim(v, k, k + 1, 1, 0), t), {}), es);
    };
    Value start = outer(lo), end = outer(hi);
    edges.push_back(linspaceTwoSided(b, start, end, b.sub(end, start), es[0]));
  }
  return edges;
}

// The input as points [M, D] (histogram: [numel, 1]), checking the call as CPU does: weights of the input's dtype,
// one per point, and bin edge tensors (1-d, not empty, of the input's dtype).
Value pointsOf(Context& ctx, bool one_d) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  if (!one_d && x.rank() < 2) throw InvalidCall(ctx.op(), "input should have at least 2 dimensions");
  const int64_t d = one_d ? 1 : x.shape().back();
  if (d == 0) throw InvalidCall(ctx.op(), "no coordinates");
  return b.reshape(x, {x.type.numel() / d, d});
}

std::optional<Value> weightOf(Context& ctx, size_t i, Value pts) {
  if (!ctx.has(i)) return std::nullopt;
  Value w = ctx.tensor(i);
  if (w.dtype() != pts.dtype()) throw InvalidCall(ctx.op(), "weight of another dtype");
  if (w.type.numel() != pts.shape()[0]) throw InvalidCall(ctx.op(), "one weight per point");
  return ctx.b.reshape(w, {pts.shape()[0]});
}

void checkEdges(Context& ctx, const std::vector<Value>& edges, Value pts) {
  if (int64_t(edges.size()) != pts.shape()[1]) throw InvalidCall(ctx.op(), "one edge tensor per coordinate");
  for (const Value& e : edges)
    if (e.dtype() != pts.dtype() || e.rank() != 1 || e.shape()[0] == 0)
      throw InvalidCall(ctx.op(), "bin edges must be non-empty 1-d tensors of the input's dtype");
}

std::vector<int64_t> binCounts(Context& ctx, size_t i, int64_t d) {
  std::vector<int64_t> bins = ctx.arg(i).kind == Arg::Kind::Int ? std::vector<int64_t>(size_t(d), ctx.toInt(i))
                                                                : ctx.toInts(i);
  if (int64_t(bins.size()) != d) throw InvalidCall(ctx.op(), "one bin count per coordinate");
  for (int64_t n : bins)
    if (n <= 0) throw InvalidCall(ctx.op(), "bins must be > 0");
  return bins;
}

// CPU's histogram kernels take float32 and float64 here (its bin-range search has no half kernels, and half
// counts accumulate in half precision per thread).
bool histAccepts(const Context& ctx) {
  const DType t = ctx.tensor(0).dtype();
  return realDTypes(ctx) && (t == DType::F32 || t == DType::F64);
}

}  // namespace

void populateHistogram(Registry& r) {
  // histc(self, bins=100, min=0, max=0): min == max means the data's range (widened by 1 if flat).
  // Floating inputs as on CPU; integer inputs (not bool) as on CUDA, which takes them and bins in int64
  // arithmetic (Transformers' MoE layers count tokens per expert with an int32 histc on accelerators).
  r.add("aten::histc", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x0 = ctx.tensor(0);
    int64_t bins = ctx.has(1) ? ctx.toInt(1) : 100;
    DType t = x0.dtype();
    bool integral = shlo::isInteger(t);
    DType c = integral ? DType::S64 : DType::F64;
    int64_t n = x0.type.numel();
    Value x = b.reshape(b.convert(x0, c), {n});
    Value lo = ctx.has(2) ? scalarArg(ctx, 2, c) : b.constant(0, c);
    Value hi = ctx.has(3) ? scalarArg(ctx, 3, c) : b.constant(0, c);
    if (shlo::isInteger(t)) {
      lo = b.convert(b.convert(lo, DType::S64), c);
      hi = b.convert(b.convert(hi, DType::S64), c);
    }
    if (n > 0) {
      Value same = b.compare(lo, hi, Cmp::EQ);
      Value dmin = x, dmax = x;
      if (!integral) {
        Value finite = b.isFinite(x);
        dmin = b.select(finite, x, b.constantF(INFINITY, c, {n}));
        dmax = b.select(finite, x, b.constantF(-INFINITY, c, {n}));
      }
      lo = b.select(same, b.reduce(dmin, {0}, ReduceKind::Min), lo);
      hi = b.select(same, b.reduce(dmax, {0}, ReduceKind::Max), hi);
    }
    Value flat = b.compare(lo, hi, Cmp::EQ);
    lo = b.select(flat, b.sub(lo, b.constant(1, c)), lo);
    hi = b.select(flat, b.add(hi, b.constant(1, c)), hi);
    if (n == 0) return {b.zeros({t, {bins}})};
    Value lob = b.broadcastTo(lo, {n}), hib = b.broadcastTo(hi, {n});
    // (x - min) * bins / (max - min): integer division for integers (x >= min where it counts), floor otherwise
    Value pos = b.div(b.mul(b.sub(x, lob), b.constantF(double(bins), c, {n})), b.sub(hib, lob));
    Value idx = integral ? pos : b.convert(b.floor(pos), DType::S64);
    idx = b.select(b.compare(x, hib, Cmp::EQ), b.constantF(double(bins - 1), DType::S64, {n}), idx);
    Value in = b.andOp(b.compare(x, lob, Cmp::GE), b.compare(x, hib, Cmp::LE));
    idx = b.select(in, idx, b.constantF(double(bins), DType::S64, {n}));  // out of range: dropped
    return {addIntoBins(b, idx, b.convert(in, t), bins)};
  }).accepts([](const Context& ctx) {
    return realDTypes(ctx) && (isFloat(ctx.tensor(0).dtype()) || shlo::isInteger(ctx.tensor(0).dtype()));
  });

  // histogram.bin_ct(self, bins=100, *, range=None, weight=None, density=False) -> (hist, bin_edges)
  r.add("aten::histogram.bin_ct", [](Context& ctx) -> std::vector<Value> {
    Value pts = pointsOf(ctx, true);
    auto weight = weightOf(ctx, 3, pts);
    std::vector<Value> edges = equalWidthEdges(ctx, pts, binCounts(ctx, 1, 1), 2);
    return {histogramOf(ctx, pts, edges, weight, optBool(ctx, 4), true), edges[0]};
  }).accepts(histAccepts);
  // histogram.bins_tensor(self, bins, *, weight=None, density=False) -> (hist, bin_edges = bins)
  r.add("aten::histogram.bins_tensor", [](Context& ctx) -> std::vector<Value> {
    Value pts = pointsOf(ctx, true);
    auto weight = weightOf(ctx, 2, pts);
    std::vector<Value> edges{ctx.tensor(1)};
    checkEdges(ctx, edges, pts);
    return {histogramOf(ctx, pts, edges, weight, optBool(ctx, 3), false), edges[0]};
  }).accepts(histAccepts);
  // _histogramdd_bin_edges(self, int[] bins, *, range=None, weight=None, density=False) -> Tensor[] (weight and
  // density play no part)
  r.add("aten::_histogramdd_bin_edges", [](Context& ctx) -> std::vector<Value> {
    Value pts = pointsOf(ctx, false);
    return equalWidthEdges(ctx, pts, binCounts(ctx, 1, pts.shape()[1]), 2);
  }).accepts(histAccepts);
  // _histogramdd_from_bin_cts(self, int[] bins, *, range=None, weight=None, density=False) -> hist
  r.add("aten::_histogramdd_from_bin_cts", [](Context& ctx) -> std::vector<Value> {
    Value pts = pointsOf(ctx, false);
    auto weight = weightOf(ctx, 3, pts);
    std::vector<Value> edges = equalWidthEdges(ctx, pts, binCounts(ctx, 1, pts.shape()[1]), 2);
    return {histogramOf(ctx, pts, edges, weight, optBool(ctx, 4), true)};
  }).accepts(histAccepts);
  // _histogramdd_from_bin_tensors(self, Tensor[] bins, *, weight=None, density=False) -> hist
  r.add("aten::_histogramdd_from_bin_tensors", [](Context& ctx) -> std::vector<Value> {
    Value pts = pointsOf(ctx, false);
    auto weight = weightOf(ctx, 2, pts);
    std::vector<Value> edges = ctx.arg(1).tensors;
    checkEdges(ctx, edges, pts);
    return {histogramOf(ctx, pts, edges, weight, optBool(ctx, 3), false)};
  }).accepts(histAccepts);
}

}  // namespace torch_tpu::lowering
