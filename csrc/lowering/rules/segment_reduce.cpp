// Segment reductions (torch.segment_reduce): segment_reduce and _segment_reduce_backward, with lengths or offsets.
//
// The data's dims before `axis` are rows (flattened to L), `axis` holds A positions, the dims after it are carried
// (flattened to T); lengths [..., S] (or offsets [..., S + 1]) split each row's positions into S segments. A
// position's segment is found by PyTorch's binary search of its row's segment starts (empty segments cost nothing),
// and the values are combined by a scatter into [L, S, T] (positions outside every segment, possible with offsets,
// go nowhere). As CPU computes them: an empty segment gives `initial` when given, else 0 (sum), 1 (prod), -inf
// (max), inf (min) or NaN (mean); `initial` joins every segment's sum, product or extreme, and a mean is
// (sum + initial) / length. Gradients: sum and mean spread the segment's gradient (mean divided by the length), max
// and min share it among the elements equal to the result (a NaN matching a NaN result), prod gives output / x, or for
// a zero or NaN the product of the others (and initial). Half types compute in f32.
//
// CPU's checks of the lengths (not negative, adding up to the axis' size, unless `unsafe`) read them back, as CPU's
// and CUDA's kernels do: eager mode makes them before the rule runs (eager/call_checks.cpp).
#include <cmath>
#include <limits>

#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

using shlo::Cmp;

// A row's positions and their segments.
struct Segments {
  int64_t L = 1, A = 0, T = 1, S = 0;
  int64_t axis = 0;
  Value index;  // [L, A, 2] S64: (row, segment), the segment S (outside the result) for a position in none
  Value valid;  // [L, A] pred: the position is in a segment
  Value count;  // [L, S] S64: each segment's length
};

Segments segmentsOf(Context& ctx, const Shape& data, int64_t axis, Value lengths, Value offsets) {
  Builder& b = ctx.b;
  Segments g;
  g.axis = axis;
  for (int64_t d = 0; d < axis; ++d) g.L *= data[size_t(d)];
  g.A = data[size_t(axis)];
  for (size_t d = size_t(axis) + 1; d < data.size(); ++d) g.T *= data[d];
  const int64_t L = g.L, A = g.A;
  Value bounds;  // [L, S + 1]: each segment's start, and the end of the last
  if (lengths.valid()) {
    g.S = lengths.shape().back();
    Value lens = b.reshape(b.convert(lengths, DType::S64), {L, g.S});
    // the exclusive prefix sums, and the total: a window of S over S zeros and the lengths
    std::vector<int64_t> one{1, 1};
    bounds = b.reduceWindow(lens, b.constantInt(0, DType::S64), ReduceKind::Sum, {1, g.S}, one, one, one,
                            {{0, 0}, {g.S, 0}});
  } else {
    g.S = offsets.shape().back() - 1;
    bounds = b.reshape(b.convert(offsets, DType::S64), {L, g.S + 1});
  }
  const int64_t S = g.S;
  const Shape la{L, A};
  g.count = b.sub(b.sliceInDim(bounds, 1, S + 1, 1, 1), b.sliceInDim(bounds, 0, S, 1, 1));
  Value row = b.iota({DType::S64, la}, 0), pos = b.iota({DType::S64, la}, 1);
  Value starts = b.sliceInDim(bounds, 0, S, 1, 1);
  auto startAt = [&](Value mid) {  // starts[row, mid]
    Builder::GatherDims gd;
    gd.collapsed_slice_dims = {0, 1};
    gd.start_index_map = {0, 1};
    gd.index_vector_dim = 2;
    Value at = b.concatenate({b.reshape(row, {L, A, 1}), b.reshape(mid, {L, A, 1})}, 2);
    return b.gather(starts, at, gd, {1, 1}, la);
  };
  Value seg = S == 0 ? constantS64(b, -1, la)
                     : b.sub(binarySearch(b, startAt, pos, S, /*right=*/true), constantS64(b, 1, la));
  Value first = b.broadcastInDim(b.reshape(b.sliceInDim(bounds, 0, 1, 1, 1), {L}), la, {0});
  Value last = b.broadcastInDim(b.reshape(b.sliceInDim(bounds, S, S + 1, 1, 1), {L}), la, {0});
  g.valid = b.andOp(b.andOp(b.compare(pos, first, Cmp::GE), b.compare(pos, last, Cmp::LT)),
                    b.compare(seg, constantS64(b, 0, la), Cmp::GE));
  seg = b.select(g.valid, seg, constantS64(b, S, la));
  g.index = b.concatenate({b.reshape(row, {L, A, 1}), b.reshape(seg, {L, A, 1})}, 2);
  return g;
}

// Values [L, A, T] combined into [L, S, T] by segment (init: `into`).
Value scatterSegments(Builder& b, const Segments& g, Value into, Value x, ReduceKind kind) {
  Builder::ScatterDims sd;
  sd.update_window_dims = {2};
  sd.inserted_window_dims = {0, 1};
  sd.scatter_dims_to_operand_dims = {0, 1};
  sd.index_vector_dim = 2;
  return b.scatter(into, g.index, x, sd, kind);
}

// Each position's entry of a per-segment value [L, S, T] (clamped: callers mask positions in no segment).
Value atSegments(Builder& b, const Segments& g, Value v) {
  Builder::GatherDims gd;
  gd.offset_dims = {2};
  gd.collapsed_slice_dims = {0, 1};
  gd.start_index_map = {0, 1};
  gd.index_vector_dim = 2;
  const Shape la{g.L, g.A};
  Value seg = b.reshape(b.sliceInDim(g.index, 1, 2, 1, 2), la);
  seg = b.clamp(constantS64(b, 0, la), seg, constantS64(b, std::max<int64_t>(g.S - 1, 0), la));
  Value at = b.concatenate({b.sliceInDim(g.index, 0, 1, 1, 2), b.reshape(seg, {g.L, g.A, 1})}, 2);
  return b.gather(v, at, gd, {1, 1, g.T}, {g.L, g.A, g.T});
}

Value countAt(Builder& b, const Segments& g, Value count, DType c) {
  return b.convert(b.broadcastInDim(count, {g.L, g.S, g.T}, {0, 1}), c);
}

Shape outShape(const Shape& data, int64_t axis, int64_t S) {
  Shape s = data;
  s[size_t(axis)] = S;
  return s;
}

bool isKnownReduce(const std::string& r) {
  return r == "sum" || r == "mean" || r == "max" || r == "min" || r == "prod";
}

// data, lengths/offsets (one of them, integer, with data's dims before axis and the segments' dim last), initial
// known when given.
AcceptsFn segmentAccepts(size_t data_i, size_t reduce_i, size_t lengths_i, size_t offsets_i, size_t axis_i,
                         size_t initial_i) {
  return [=](const Context& ctx) {
    const Value data = ctx.tensor(data_i);
    if (!shlo::isFloat(data.dtype()) || !isKnownReduce(ctx.arg(reduce_i).s)) return false;
    if (ctx.has(lengths_i) == ctx.has(offsets_i)) return false;
    const Value seg = ctx.tensor(ctx.has(lengths_i) ? lengths_i : offsets_i);
    if (seg.dtype() != DType::S64 && seg.dtype() != DType::S32) return false;
    int64_t axis = ctx.has(axis_i) ? ctx.toInt(axis_i) : 0;
    if (axis < 0) axis += data.rank();
    if (axis < 0 || axis >= data.rank() || seg.rank() != axis + 1) return false;
    for (int64_t d = 0; d < axis; ++d)
      if (seg.shape()[size_t(d)] != data.shape()[size_t(d)]) return false;
    if (!ctx.has(lengths_i) && seg.shape().back() < 1) return false;
    return !ctx.has(initial_i) || ctx.arg(initial_i).scalar.known();
  };
}

// The segments of a call: data at `data_i`, lengths/offsets/axis at the given argument indices.
Segments segmentsOfCall(Context& ctx, size_t data_i, size_t lengths_i, size_t offsets_i, size_t axis_i) {
  const Value data = ctx.tensor(data_i);
  const int64_t axis = normDim(ctx, ctx.has(axis_i) ? ctx.toInt(axis_i) : 0, data.rank());
  return segmentsOf(ctx, data.shape(), axis, ctx.has(lengths_i) ? ctx.tensor(lengths_i) : Value(),
                    ctx.has(offsets_i) ? ctx.tensor(offsets_i) : Value());
}

}  // namespace

void populateSegmentReduce(Registry& r) {
  // segment_reduce(data, reduce, *, lengths, indices, offsets, axis, unsafe, initial)
  r.add("aten::segment_reduce", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value data = ctx.tensor(0);
    const std::string reduce = ctx.arg(1).s;
    Segments g = segmentsOfCall(ctx, 0, 2, 4, 5);
    const DType c = accType(data.dtype());
    const bool has_initial = ctx.has(7);
    const double initial = has_initial ? ctx.arg(7).scalar.toDouble() : 0;
    const double inf = std::numeric_limits<double>::infinity();
    ReduceKind kind = ReduceKind::Sum;
    double init = 0;
    if (reduce == "prod") kind = ReduceKind::Prod, init = 1;
    if (reduce == "max") kind = ReduceKind::Max, init = -inf;
    if (reduce == "min") kind = ReduceKind::Min, init = inf;
    if (has_initial) init = initial;
    const Shape lst{g.L, g.S, g.T};
    Value x = b.reshape(b.convert(data, c), {g.L, g.A, g.T});
    Value out = scatterSegments(b, g, b.constantF(init, c, lst), x, kind);
    if (reduce == "mean") {
      Value n = countAt(b, g, g.count, c);
      out = b.div(out, n);
      if (has_initial) out = b.select(b.compare(n, b.zerosLike(n), Cmp::EQ), b.constantF(initial, c, lst), out);
    }
    return {b.convert(b.reshape(out, outShape(data.shape(), g.axis, g.S)), data.dtype())};
  }).staticArgs({"initial"}).accepts(segmentAccepts(0, 1, 2, 4, 5, 7));
  // _segment_reduce_backward(grad, output, data, reduce, *, lengths, offsets, axis, initial)
  r.add("aten::_segment_reduce_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value data = ctx.tensor(2);
    const std::string reduce = ctx.arg(3).s;
    Segments g = segmentsOfCall(ctx, 2, 4, 5, 6);
    const DType c = accType(data.dtype());
    const Shape lst{g.L, g.S, g.T}, lat{g.L, g.A, g.T};
    Value x = b.reshape(b.convert(data, c), lat);
    Value grad = atSegments(b, g, b.reshape(b.convert(ctx.tensor(0), c), lst));
    Value zero = b.zerosLike(x);
    Value res = grad;
    if (reduce == "mean") {
      res = b.div(grad, atSegments(b, g, countAt(b, g, g.count, c)));
    } else if (reduce == "max" || reduce == "min") {
      // the elements equal to the result (NaN counting as equal to a NaN result) share its gradient
      Value out = atSegments(b, g, b.reshape(b.convert(ctx.tensor(1), c), lst));
      Value same = b.orOp(b.compare(x, out, Cmp::EQ), b.andOp(isNan(b, x), isNan(b, out)));
      Value hit = b.andOp(same, b.broadcastInDim(g.valid, lat, {0, 1}));
      Value ties = scatterSegments(b, g, b.zeros({c, lst}), b.convert(hit, c), ReduceKind::Sum);
      res = b.select(hit, b.div(grad, atSegments(b, g, ties)), zero);
    } else if (reduce == "prod") {
      // output / x, except for zeros and NaNs: the product of the others (and initial), which is 0 (or NaN) when
      // another zero (or NaN) is among them
      Value out = atSegments(b, g, b.reshape(b.convert(ctx.tensor(1), c), lst));
      Value nan = isNan(b, x);
      Value special = b.orOp(b.compare(x, zero, Cmp::EQ), nan);
      const double initial = ctx.has(7) ? ctx.arg(7).scalar.toDouble() : 1.0;
      Value others = scatterSegments(b, g, b.constantF(initial, c, lst), b.select(special, b.onesLike(x), x),
                                     ReduceKind::Prod);
      auto flagsAt = [&](Value flag) {  // each element's segment's number of `flag` elements
        return atSegments(b, g, scatterSegments(b, g, b.zeros({c, lst}), b.convert(flag, c), ReduceKind::Sum));
      };
      Value specials = flagsAt(special), nans = flagsAt(nan);
      Value other_nan = b.compare(b.sub(nans, b.convert(nan, c)), zero, Cmp::GT);
      Value exclusive = b.select(b.compare(specials, b.onesLike(x), Cmp::EQ), atSegments(b, g, others),
                                 b.select(other_nan, b.constantF(NAN, c, lat), zero));
      res = b.select(special, b.mul(grad, exclusive), b.div(b.mul(grad, out), b.select(special, b.onesLike(x), x)));
    }
    res = b.select(b.broadcastInDim(g.valid, lat, {0, 1}), res, zero);
    return {b.convert(b.reshape(res, data.shape()), data.dtype())};
  }).staticArgs({"initial"}).accepts(segmentAccepts(2, 3, 4, 5, 6, 7));
}

}  // namespace torch_tpu::lowering
