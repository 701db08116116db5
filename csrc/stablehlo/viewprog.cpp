#include "stablehlo/viewprog.h"

#include <algorithm>
#include <numeric>

namespace torch_tpu::viewprog {

using shlo::Builder;
using shlo::DType;
using shlo::TensorType;
using shlo::Value;

namespace {

int64_t product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<int64_t>());
}

Value flatten(Builder& b, const Value& buf) { return b.reshape(buf, {buf.type.numel()}); }

// Reinterprets `v` as `to` (the tensor's vs the buffer's element type). Equal widths bitcast in any shape; other
// widths need a flat (1-d) value and change its length (e.g. f32[n] <-> ui8[4n], as storage byte views do).
Value retype(Builder& b, const Value& v, DType to) {
  if (v.dtype() == to) return v;
  const int wf = shlo::bitWidth(v.dtype()), wt = shlo::bitWidth(to);
  // XLA bitcasts no complex type: a complex element is its two components in memory (real first), so complex
  // values go through a flat run of components (view_as_real / view_as_complex, byte views of complex storages).
  if (shlo::isComplex(v.dtype()) != shlo::isComplex(to)) {
    Value flat = b.reshape(v, {v.type.numel()});
    Value r;
    if (shlo::isComplex(v.dtype())) {
      const int64_t n = flat.type.numel();
      Value re = b.reshape(b.realPart(flat), {n, 1}), im = b.reshape(b.imagPart(flat), {n, 1});
      r = retype(b, b.reshape(b.concatenate({re, im}, 1), {2 * n}), to);
    } else {
      Value comps = retype(b, flat, shlo::bitWidth(to) == 128 ? DType::F64 : DType::F32);
      const int64_t m = comps.type.numel();
      if (m % 2 != 0) throw shlo::BuildError("a complex view needs an even number of components");
      Value pairs = b.reshape(comps, {m / 2, 2});
      r = b.complex(b.reshape(b.sliceInDim(pairs, 0, 1, 1, 1), {m / 2}),
                    b.reshape(b.sliceInDim(pairs, 1, 2, 1, 1), {m / 2}));
    }
    return wf == wt ? b.reshape(r, v.shape()) : r;
  }
  // A bool is one byte holding 0 or 1 (XLA bitcasts no pred): through ui8.
  if (v.dtype() == DType::Pred) return wt == 8 ? b.convert(v, to) : retype(b, b.convert(v, DType::U8), to);
  if (to == DType::Pred) return b.convert(wf == 8 ? v : retype(b, v, DType::U8), to);
  if (wf == wt) return b.bitcastConvert(v, to);
  if (v.rank() != 1) throw shlo::BuildError("byte-reinterpreting views need a flat buffer");
  const int64_t n = v.shape()[0];
  if (wf > wt) {  // wider -> narrower: [n] -> [n, k] -> [n*k]
    int64_t k = wf / wt;
    Value r = b.raw("\"stablehlo.bitcast_convert\"(" + b.ref(v) + ")",
                    "(" + v.type.str() + ") -> " + TensorType{to, {n, k}}.str(), TensorType{to, {n, k}});
    return b.reshape(r, {n * k});
  }
  int64_t k = wt / wf;  // narrower -> wider: [m] -> [m/k, k] -> [m/k]
  if (n % k != 0) throw shlo::BuildError("byte view length is not a multiple of the element size");
  Value r = b.reshape(v, {n / k, k});
  return b.raw("\"stablehlo.bitcast_convert\"(" + b.ref(r) + ")",
               "(" + r.type.str() + ") -> " + TensorType{to, {n / k}}.str(), TensorType{to, {n / k}});
}

// Flat s64 indices (shape v.sizes) of the view's elements: offset + sum(iota_d * stride_d).
Value flatIndices(Builder& b, const Layout& v, const Value& offset) {
  TensorType t{DType::S64, v.sizes};
  Value idx = b.broadcastInDim(offset, v.sizes, {});
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    if (v.sizes[d] == 1 || v.strides[d] == 0) continue;
    Value term = b.iota(t, static_cast<int64_t>(d));
    if (v.strides[d] != 1) term = b.mul(term, b.constantF(double(v.strides[d]), DType::S64, v.sizes));
    idx = b.add(idx, term);
  }
  return idx;
}

}  // namespace

bool isContiguous(const Layout& v) {
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(v.sizes.size()) - 1; d >= 0; --d) {
    if (v.sizes[d] == 1) continue;
    if (v.strides[d] != expected) return false;
    expected *= v.sizes[d];
  }
  return true;
}

bool isIdentity(const std::vector<int64_t>& buffer_dims, const Layout& v) {
  return v.offset == 0 && product(buffer_dims) == product(v.sizes) && isContiguous(v);
}

Value read(Builder& b, const Value& buf, const Layout& v, const Value& offset, DType dtype) {
  const int64_t n = product(v.sizes);
  if (offset.id < 0 || (v.offset == 0 && n == buf.type.numel() && isContiguous(v) &&
                        shlo::bitWidth(buf.dtype()) == shlo::bitWidth(dtype)))
    return retype(b, b.reshape(buf, v.sizes), dtype);
  if (n == 0) return b.zeros(TensorType{dtype, v.sizes});
  Value flat = retype(b, flatten(b, buf), dtype);
  const size_t rank = v.sizes.size();

  // Dimensions that move through memory, by decreasing stride.
  std::vector<int64_t> real;
  for (size_t d = 0; d < rank; ++d)
    if (v.sizes[d] != 1 && v.strides[d] != 0) real.push_back(static_cast<int64_t>(d));
  std::stable_sort(real.begin(), real.end(), [&](int64_t a, int64_t c) { return v.strides[a] > v.strides[c]; });
  bool nested = true;
  for (size_t k = 0; k + 1 < real.size(); ++k) {
    int64_t s = v.strides[real[k]], s2 = v.strides[real[k + 1]];
    if (s2 <= 0 || s % s2 != 0 || s < s2 * v.sizes[real[k + 1]]) nested = false;
  }
  if (!real.empty() && v.strides[real.back()] <= 0) nested = false;

  if (!nested) {
    Value idx = flatIndices(b, v, offset);
    std::vector<int64_t> ishape = v.sizes;
    ishape.push_back(1);
    shlo::Builder::GatherDims g;
    g.collapsed_slice_dims = {0};
    g.start_index_map = {0};
    g.index_vector_dim = static_cast<int64_t>(rank);
    return b.gather(flat, b.reshape(idx, ishape), g, {1}, v.sizes);
  }

  // Window [offset, offset + L) reshaped to [size0, s0/s1, ..., s_{k-1}] then sliced down to the view.
  std::vector<int64_t> shape, limit;
  int64_t L = 1, extent = 1;
  if (real.empty()) {
    shape = {1};
    limit = {1};
  } else {
    L = v.strides[real[0]] * v.sizes[real[0]];
    shape.push_back(v.sizes[real[0]]);
    limit.push_back(v.sizes[real[0]]);
    for (size_t k = 1; k < real.size(); ++k) {
      shape.push_back(v.strides[real[k - 1]] / v.strides[real[k]]);
      limit.push_back(v.sizes[real[k]]);
    }
    shape.push_back(v.strides[real.back()]);
    limit.push_back(1);
  }
  for (int64_t d : real) extent += (v.sizes[d] - 1) * v.strides[d];
  if (L > extent) {
    Value zero = b.zeros(TensorType{dtype, {}});
    flat = b.pad(flat, zero, {0}, {L - extent}, {0});
  }
  Value win = b.dynamicSlice(flat, {offset}, {L});
  Value r = b.reshape(win, shape);
  std::vector<int64_t> starts(shape.size(), 0), steps(shape.size(), 1);
  r = b.slice(r, starts, limit, steps);
  // r: real dims in stride order (+ trailing 1). Reorder to the view's order.
  std::vector<int64_t> real_sizes;
  for (int64_t d : real) real_sizes.push_back(v.sizes[d]);
  r = b.reshape(r, real_sizes);
  std::vector<int64_t> order(real.begin(), real.end());
  std::vector<int64_t> perm(real.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::sort(perm.begin(), perm.end(), [&](int64_t a, int64_t c) { return order[a] < order[c]; });
  r = b.transpose(r, perm);
  std::vector<int64_t> sorted_dims(order);
  std::sort(sorted_dims.begin(), sorted_dims.end());
  return b.broadcastInDim(r, v.sizes, sorted_dims);
}

Value write(Builder& b, const Value& buf, const Layout& v, const Value& offset, Value update) {
  const int64_t n = product(v.sizes);
  const DType bdt = buf.dtype();
  if (n == 0) return buf;
  if (offset.id < 0 || (v.offset == 0 && n == buf.type.numel() && isContiguous(v) &&
                        shlo::bitWidth(update.dtype()) == shlo::bitWidth(bdt)))
    return b.reshape(retype(b, update, bdt), buf.shape());
  // Work in the tensor's element type (a byte view of a float buffer indexes bytes), then back.
  const DType tdt = update.dtype();
  Value flat = retype(b, flatten(b, buf), tdt);
  Value out;
  if (isContiguous(v)) {
    out = b.dynamicUpdateSlice(flat, b.reshape(update, {n}), {offset});
  } else {
    Value idx = b.reshape(flatIndices(b, v, offset), {n, 1});
    shlo::Builder::ScatterDims s;
    s.inserted_window_dims = {0};
    s.scatter_dims_to_operand_dims = {0};
    s.index_vector_dim = 1;
    out = b.scatter(flat, idx, b.reshape(update, {n}), s, std::nullopt);
  }
  return b.reshape(retype(b, out, bdt), buf.shape());
}

}  // namespace torch_tpu::viewprog
