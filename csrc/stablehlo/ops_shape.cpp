// Shape builders: reshape, broadcasts, transpose, static and dynamic slices, concatenate, pad, reverse. Methods of
// shlo::Builder (builder.h).
#include <algorithm>
#include <string>

#include "stablehlo/builder_impl.h"

namespace torch_tpu::shlo {

using namespace detail;

Value Builder::reshape(Value a, const Shape& shape) {
  impl_->check("reshape", a);
  checkShape("reshape", shape);
  if (a.shape() == shape) return a;
  TensorType t{a.dtype(), shape};
  if (t.numel() != a.type.numel())
    fail("reshape", "element count differs: " + a.type.str() + " cannot become " + t.str());
  return impl_->emit("stablehlo.reshape", {a}, {}, t);
}

Value Builder::broadcastInDim(Value a, const Shape& shape, const std::vector<int64_t>& dims) {
  impl_->check("broadcastInDim", a);
  checkShape("broadcastInDim", shape);
  if (static_cast<int64_t>(dims.size()) != a.rank())
    fail("broadcastInDim", "broadcast_dimensions " + dimsStr(dims) + " must have one entry per operand dimension of " +
                               a.type.str());
  checkDimsUnique("broadcastInDim", dims, static_cast<int64_t>(shape.size()), "broadcast_dimensions");
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t src = a.shape()[i], dst = shape[static_cast<size_t>(dims[i])];
    if (src != 1 && src != dst)
      fail("broadcastInDim", "operand " + a.type.str() + " dimension " + std::to_string(i) + " (size " +
                                 std::to_string(src) + ") cannot broadcast to result " + shapeStr(shape) +
                                 " dimension " + std::to_string(dims[i]));
  }
  bool identity = a.shape() == shape;
  for (size_t i = 0; identity && i < dims.size(); ++i) identity = dims[i] == static_cast<int64_t>(i);
  if (identity) return a;
  return impl_->emit("stablehlo.broadcast_in_dim", {a}, Attrs().array("broadcast_dimensions", dims),
                     TensorType{a.dtype(), shape});
}

Value Builder::broadcastTo(Value a, const Shape& shape) {
  impl_->check("broadcastTo", a);
  if (a.shape() == shape) return a;
  int64_t r = a.rank(), R = static_cast<int64_t>(shape.size());
  if (r > R) fail("broadcastTo", "cannot broadcast " + a.type.str() + " to lower-rank shape " + shapeStr(shape));
  std::vector<int64_t> dims(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) {
    dims[static_cast<size_t>(i)] = R - r + i;
    int64_t src = a.shape()[static_cast<size_t>(i)], dst = shape[static_cast<size_t>(R - r + i)];
    if (src != 1 && src != dst)
      fail("broadcastTo", "shape " + shapeStr(a.shape()) + " is not broadcastable to " + shapeStr(shape));
  }
  return broadcastInDim(a, shape, dims);
}

Value Builder::transpose(Value a, const std::vector<int64_t>& perm) {
  impl_->check("transpose", a);
  if (static_cast<int64_t>(perm.size()) != a.rank())
    fail("transpose", "permutation " + dimsStr(perm) + " does not match rank of " + a.type.str());
  checkDimsUnique("transpose", perm, a.rank(), "permutation");
  bool identity = true;
  Shape out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    identity = identity && perm[i] == static_cast<int64_t>(i);
    out[i] = a.shape()[static_cast<size_t>(perm[i])];
  }
  if (identity) return a;
  Impl& I = *impl_;
  auto prior = I.transposes.find(a.id);
  if (prior != I.transposes.end() && prior->second.region == I.region) {
    // a = transpose(src, p0): the result is transpose(src, p0 o perm).
    const Impl::TransposeOf t = prior->second;
    std::vector<int64_t> composed(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) composed[i] = t.perm[static_cast<size_t>(perm[i])];
    return transpose(t.src, composed);
  }
  Value r = I.emit("stablehlo.transpose", {a}, Attrs().array("permutation", perm), TensorType{a.dtype(), out});
  I.transposes[r.id] = Impl::TransposeOf{a, perm, I.region};
  return r;
}

bool Builder::isTranspose(Value a) const {
  auto it = impl_->transposes.find(a.id);
  return it != impl_->transposes.end() && it->second.region == impl_->region;
}

Value Builder::slice(Value a, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
                     const std::vector<int64_t>& strides_in) {
  impl_->check("slice", a);
  size_t r = static_cast<size_t>(a.rank());
  std::vector<int64_t> strides = strides_in.empty() ? std::vector<int64_t>(r, 1) : strides_in;
  if (start.size() != r || limit.size() != r || strides.size() != r)
    fail("slice", "start " + dimsStr(start) + " / limit " + dimsStr(limit) + " / strides " + dimsStr(strides) +
                      " must each have one entry per dimension of " + a.type.str());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    if (strides[i] <= 0) fail("slice", "strides must be positive, got " + dimsStr(strides));
    if (start[i] < 0 || start[i] > limit[i] || limit[i] > a.shape()[i])
      fail("slice", "need 0 <= start <= limit <= dim size in dimension " + std::to_string(i) + ": start " +
                        dimsStr(start) + ", limit " + dimsStr(limit) + ", operand " + a.type.str());
    out[i] = (limit[i] - start[i] + strides[i] - 1) / strides[i];
  }
  Attrs attrs;
  attrs.array("start_indices", start).array("limit_indices", limit).array("strides", strides);
  return impl_->emit("stablehlo.slice", {a}, attrs, TensorType{a.dtype(), out});
}

Value Builder::sliceInDim(Value a, int64_t start, int64_t limit, int64_t stride, int64_t dim) {
  impl_->check("sliceInDim", a);
  if (dim < 0 || dim >= a.rank())
    fail("sliceInDim", "dimension " + std::to_string(dim) + " out of range for " + a.type.str());
  size_t r = static_cast<size_t>(a.rank());
  std::vector<int64_t> st(r, 0), li(a.shape().begin(), a.shape().end()), sd(r, 1);
  st[static_cast<size_t>(dim)] = start;
  li[static_cast<size_t>(dim)] = limit;
  sd[static_cast<size_t>(dim)] = stride;
  return slice(a, st, li, sd);
}

namespace {
// All start indices must share one integer type; unify to s64 when they differ (or s32 if all fit).
std::vector<Value> unifyStarts(Builder& b, const char* op, const std::vector<Value>& starts) {
  bool same = true;
  for (const Value& s : starts) {
    if (s.rank() != 0 || !isInteger(s.dtype())) fail(op, "start indices must be 0-d integers, got " + s.type.str());
    same = same && s.dtype() == starts[0].dtype();
  }
  if (same) return starts;
  std::vector<Value> out;
  for (const Value& s : starts) out.push_back(b.convert(s, DType::S64));
  return out;
}
}  // namespace

Value Builder::dynamicSlice(Value a, const std::vector<Value>& starts_in, const std::vector<int64_t>& sizes) {
  impl_->check("dynamicSlice", a);
  for (const Value& s : starts_in) impl_->check("dynamicSlice", s);
  if (static_cast<int64_t>(starts_in.size()) != a.rank() || static_cast<int64_t>(sizes.size()) != a.rank())
    fail("dynamicSlice", "need one start index and one size per dimension of " + a.type.str() + " (got " +
                             std::to_string(starts_in.size()) + " starts, sizes " + dimsStr(sizes) + ")");
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] < 0 || sizes[i] > a.shape()[i])
      fail("dynamicSlice", "slice sizes " + dimsStr(sizes) + " exceed operand " + a.type.str());
  std::vector<Value> ops;
  ops.reserve(starts_in.size() + 1);
  ops.push_back(a);
  for (const Value& s : unifyStarts(*this, "dynamicSlice", starts_in)) ops.push_back(s);
  return impl_->emitVec("stablehlo.dynamic_slice", ops, Attrs().array("slice_sizes", sizes),
                        TensorType{a.dtype(), sizes});
}

Value Builder::dynamicUpdateSlice(Value a, Value update, const std::vector<Value>& starts_in) {
  impl_->check("dynamicUpdateSlice", a);
  impl_->check("dynamicUpdateSlice", update);
  for (const Value& s : starts_in) impl_->check("dynamicUpdateSlice", s);
  if (update.dtype() != a.dtype() || update.rank() != a.rank())
    fail("dynamicUpdateSlice", "update " + update.type.str() + " must have the dtype and rank of operand " +
                                   a.type.str());
  for (size_t i = 0; i < a.shape().size(); ++i)
    if (update.shape()[i] > a.shape()[i])
      fail("dynamicUpdateSlice", "update " + update.type.str() + " is larger than operand " + a.type.str());
  if (static_cast<int64_t>(starts_in.size()) != a.rank())
    fail("dynamicUpdateSlice", "need one start index per dimension of " + a.type.str());
  std::vector<Value> ops{a, update};
  for (const Value& s : unifyStarts(*this, "dynamicUpdateSlice", starts_in)) ops.push_back(s);
  return impl_->emitVec("stablehlo.dynamic_update_slice", ops, {}, a.type);
}

Value Builder::concatenate(const std::vector<Value>& vals, int64_t dim) {
  if (vals.empty()) fail("concatenate", "needs at least one operand");
  for (const Value& v : vals) impl_->check("concatenate", v);
  const Value& f = vals[0];
  if (dim < 0 || dim >= f.rank())
    fail("concatenate", "dimension " + std::to_string(dim) + " out of range for " + f.type.str());
  if (vals.size() == 1) return f;
  Shape out = f.shape();
  out[static_cast<size_t>(dim)] = 0;
  for (const Value& v : vals) {
    bool ok = v.dtype() == f.dtype() && v.rank() == f.rank();
    for (int64_t i = 0; ok && i < f.rank(); ++i)
      ok = i == dim || v.shape()[static_cast<size_t>(i)] == f.shape()[static_cast<size_t>(i)];
    if (!ok)
      fail("concatenate", "operand " + v.type.str() + " does not match " + f.type.str() +
                              " outside dimension " + std::to_string(dim));
    out[static_cast<size_t>(dim)] += v.shape()[static_cast<size_t>(dim)];
  }
  return impl_->emitVec("stablehlo.concatenate", vals, Attrs().i64("dimension", dim), TensorType{f.dtype(), out});
}

Value Builder::pad(Value a, Value pad_value, const std::vector<int64_t>& low, const std::vector<int64_t>& high,
                   const std::vector<int64_t>& interior_in) {
  impl_->check("pad", a);
  impl_->check("pad", pad_value);
  size_t r = static_cast<size_t>(a.rank());
  std::vector<int64_t> interior = interior_in.empty() ? std::vector<int64_t>(r, 0) : interior_in;
  if (pad_value.rank() != 0 || pad_value.dtype() != a.dtype())
    fail("pad", "padding value must be a 0-d " + std::string(mlirName(a.dtype())) + ", got " + pad_value.type.str());
  if (low.size() != r || high.size() != r || interior.size() != r)
    fail("pad", "low " + dimsStr(low) + " / high " + dimsStr(high) + " / interior " + dimsStr(interior) +
                    " must each have one entry per dimension of " + a.type.str());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    if (interior[i] < 0) fail("pad", "interior padding must be >= 0, got " + dimsStr(interior));
    int64_t d = a.shape()[i];
    out[i] = low[i] + high[i] + d + std::max<int64_t>(d - 1, 0) * interior[i];
    if (out[i] < 0) fail("pad", "negative padding makes dimension " + std::to_string(i) + " negative");
  }
  Attrs attrs;
  attrs.array("edge_padding_low", low).array("edge_padding_high", high).array("interior_padding", interior);
  return impl_->emit("stablehlo.pad", {a, pad_value}, attrs, TensorType{a.dtype(), out});
}

Value Builder::reverse(Value a, const std::vector<int64_t>& dims) {
  impl_->check("reverse", a);
  checkDimsUnique("reverse", dims, a.rank(), "dimensions");
  if (dims.empty()) return a;
  return impl_->emit("stablehlo.reverse", {a}, Attrs().array("dimensions", dims), a.type);
}

}  // namespace torch_tpu::shlo
