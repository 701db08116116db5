// Indexing family: gather and scatter (with their reduce forms), index_select, index_add/index_copy/index_fill/
// index_reduce along a dim, advanced indexing (index.Tensor, index_put and their _unsafe_ forms), take/put,
// masked_scatter, embedding and its backward.
#include <algorithm>
#include <cmath>
#include <optional>

#include "lowering/bounds.h"
#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

using shlo::Cmp;
using shlo::isFloat;

std::vector<int64_t> inversePerm(const std::vector<int64_t>& p) {
  std::vector<int64_t> inv(p.size());
  for (size_t k = 0; k < p.size(); ++k) inv[p[k]] = int64_t(k);
  return inv;
}

// Indices [*S, r] addressing every element of an index tensor of shape S along `dim` of a rank-r operand:
// coordinate k is the position itself, except coordinate `dim`, which is the index value.
Value fullIndices(Builder& b, Value index, int64_t dim) {
  int64_t r = index.rank();
  Shape s1 = index.shape();
  s1.push_back(1);
  std::vector<Value> parts;
  for (int64_t k = 0; k < r; ++k) {
    Value v = k == dim ? b.convert(index, DType::S64) : b.iota({DType::S64, index.shape()}, k);
    parts.push_back(b.reshape(v, s1));
  }
  return b.concatenate(parts, r);
}

Builder::ScatterDims pointScatterDims(int64_t r) {
  Builder::ScatterDims sd;
  sd.inserted_window_dims = range(0, r);
  sd.scatter_dims_to_operand_dims = range(0, r);
  sd.index_vector_dim = r;
  return sd;
}

// src restricted to the index tensor's shape (scatter reads only that corner of src).
Value corner(Builder& b, Value src, const Shape& shape) {
  if (src.shape() == shape) return src;
  return b.slice(src, std::vector<int64_t>(shape.size(), 0), shape, std::vector<int64_t>(shape.size(), 1));
}

double identityOf(ReduceKind k, DType t) {
  switch (k) {
    case ReduceKind::Prod: return 1;
    case ReduceKind::Max:
      return isFloat(t) ? -INFINITY : shlo::isSigned(t) ? -std::ldexp(1.0, shlo::bitWidth(t) - 1) : 0;
    case ReduceKind::Min:
      return isFloat(t) ? INFINITY : shlo::isSigned(t) ? std::ldexp(1.0, shlo::bitWidth(t) - 1) - 1
                                                       : std::ldexp(1.0, shlo::bitWidth(t)) - 1;
    default: return 0;
  }
}

// scatter along dim: (self, dim, index, src-or-value) with an optional combiner.
Value scatterAlong(Context& ctx, Value self, int64_t dim, Value index, Value updates,
                   std::optional<ReduceKind> combiner) {
  Builder& b = ctx.b;
  if (index.type.numel() == 0) return self;
  Value idx = fullIndices(b, index, dim);
  return b.scatter(self, idx, updates, pointScatterDims(self.rank()), combiner);
}

std::vector<Value> scatterRule(Context& ctx, bool value_form, std::optional<ReduceKind> combiner) {
  Builder& b = ctx.b;
  Value self = ctx.tensor(0), index = ctx.tensor(2);
  if (self.rank() == 0) {  // a 0-d scatter writes the one element when index is non-empty
    Value v = value_form ? scalarArg(ctx, 3, self.dtype()) : b.reshape(b.convert(ctx.tensor(3), self.dtype()), {});
    if (index.type.numel() == 0) return {self};
    if (!combiner) return {v};
    return {*combiner == ReduceKind::Sum ? b.add(self, v) : b.mul(self, v)};
  }
  int64_t dim = normDim(ctx, ctx.toInt(1), self.rank());
  checkIndexRange(ctx, index, self.shape()[dim], false, outOfBoundsMessage(dim, self.shape()[dim]),
                  Context::CheckError::Runtime);  // bounds check
  Value upd = value_form ? b.broadcastTo(scalarArg(ctx, 3, self.dtype()), index.shape())
                         : b.convert(corner(b, ctx.tensor(3), index.shape()), self.dtype());
  return {scatterAlong(ctx, self, dim, index, upd, combiner)};
}

// The index tensors of index/index_put, normalized: int64, negative indices wrapped, broadcast to one shape.
struct AdvIndex {
  std::vector<int64_t> dims;  // indexed dims of self, in order
  Shape bshape;               // broadcast shape of the index tensors
  std::vector<int64_t> perm;  // self permutation putting indexed dims first
  bool adjacent = true;       // indexed dims consecutive: result keeps them in place
  Value indices;              // [*bshape, dims.size()]
  Shape rest;                 // shape of the non-indexed dims (in perm order)
  bool none = false;          // no element selected (bshape or rest has a 0): no index is read
  // Result layout: gather gives bshape + rest; PyTorch's layout is before + bshape + after when adjacent.
  std::vector<int64_t> outPerm;  // gather layout -> PyTorch layout
  Shape outShape;                // PyTorch layout
};

AdvIndex advIndex(Context& ctx, Value self, const std::vector<Value>& tensors) {
  Builder& b = ctx.b;
  AdvIndex a;
  std::vector<Value> idx;
  for (size_t k = 0; k < tensors.size(); ++k)
    if (tensors[k].valid()) {
      a.dims.push_back(int64_t(k));
      idx.push_back(tensors[k]);
    }
  if (int64_t(tensors.size()) > self.rank()) ctx.fail("too many indices");
  std::vector<Shape> shapes;
  for (auto& v : idx) shapes.push_back(v.shape());
  a.bshape = broadcastShapes(shapes);
  for (size_t k = 1; k < a.dims.size(); ++k)
    if (a.dims[k] != a.dims[k - 1] + 1) a.adjacent = false;
  a.perm = a.dims;
  for (int64_t d = 0; d < self.rank(); ++d)
    if (std::find(a.dims.begin(), a.dims.end(), d) == a.dims.end()) {
      a.perm.push_back(d);
      a.rest.push_back(self.shape()[d]);
    }
  Shape s1 = a.bshape;
  s1.push_back(1);
  // No element selected (empty indices, or the other dims empty): CPU's kernel reads no index, so none is checked.
  Shape sel = a.bshape;
  sel.insert(sel.end(), a.rest.begin(), a.rest.end());
  a.none = std::find(sel.begin(), sel.end(), int64_t(0)) != sel.end();
  std::vector<Value> parts;
  for (size_t k = 0; k < idx.size(); ++k) {
    Value v = b.convert(idx[k], DType::S64);
    int64_t size = self.shape()[a.dims[k]];
    if (!a.none) checkIndexRange(ctx, v, size, true, outOfBoundsMessage(a.dims[k], size));  // bounds check
    Value sz = b.broadcastTo(b.constantInt(size, DType::S64), v.shape());
    v = b.select(b.compare(v, b.zerosLike(v), Cmp::LT), b.add(v, sz), v);
    parts.push_back(b.reshape(b.broadcastTo(v, a.bshape), s1));
  }
  a.indices = parts.size() == 1 ? parts[0] : b.concatenate(parts, int64_t(a.bshape.size()));
  int64_t nb = int64_t(a.bshape.size()), nrest = int64_t(a.rest.size());
  int64_t before = a.adjacent ? a.dims[0] : 0;
  // gather layout: [b..., rest...] where rest = [before dims..., after dims...]
  for (int64_t k = 0; k < before; ++k) a.outPerm.push_back(nb + k);
  for (int64_t k = 0; k < nb; ++k) a.outPerm.push_back(k);
  for (int64_t k = before; k < nrest; ++k) a.outPerm.push_back(nb + k);
  Shape gshape = a.bshape;
  gshape.insert(gshape.end(), a.rest.begin(), a.rest.end());
  for (int64_t p : a.outPerm) a.outShape.push_back(gshape[p]);
  return a;
}

bool isBoolIndex(const Value& v) { return v.valid() && (v.dtype() == DType::Pred || v.dtype() == DType::U8); }

bool intIndices(const Context& ctx, size_t i) {
  for (const Value& v : ctx.arg(i).tensors)
    if (isBoolIndex(v)) return false;
  return true;
}

std::vector<Value> indexRule(Context& ctx) {
  Builder& b = ctx.b;
  Value self = ctx.tensor(0);
  const auto& tensors = ctx.arg(1).tensors;
  bool any = false;
  for (auto& v : tensors) any |= v.valid();
  if (!any) return {self};
  AdvIndex a = advIndex(ctx, self, tensors);
  Value xt = b.transpose(self, a.perm);
  int64_t k = int64_t(a.dims.size()), nb = int64_t(a.bshape.size());
  Builder::GatherDims gd;
  gd.offset_dims = range(nb, nb + int64_t(a.rest.size()));
  gd.collapsed_slice_dims = range(0, k);
  gd.start_index_map = range(0, k);
  gd.index_vector_dim = nb;
  std::vector<int64_t> sizes(k, 1);
  sizes.insert(sizes.end(), a.rest.begin(), a.rest.end());
  Shape gshape = a.bshape;
  gshape.insert(gshape.end(), a.rest.begin(), a.rest.end());
  // An empty result (the indices, or the dims they leave, are empty): nothing to gather, and XLA's gather takes no
  // slice larger than an empty indexed dim.
  if (a.none)
    return {b.transpose(b.zeros(TensorType{self.dtype(), gshape}), a.outPerm)};
  Value g = b.gather(xt, a.indices, gd, sizes, gshape);
  return {b.transpose(g, a.outPerm)};
}

// index_put(self, indices, values, accumulate)
std::vector<Value> indexPutRule(Context& ctx) {
  Builder& b = ctx.b;
  Value self = ctx.tensor(0);
  const auto& tensors = ctx.arg(1).tensors;
  Value values = b.convert(ctx.tensor(2), self.dtype());
  bool accumulate = ctx.has(3) && ctx.toBool(3);
  // One boolean mask with values that do not depend on how many elements it selects (a single value, or a row
  // broadcast to every selected row, `x[mask] = pad_token`): a select.
  for (size_t k = 0; k < tensors.size(); ++k)
    if (isBoolIndex(tensors[k])) {
      Value m = tensors[k];
      if (m.dtype() != DType::Pred) m = b.compare(m, b.zerosLike(m), Cmp::NE);
      int64_t lo = int64_t(k), hi = lo + m.rank();
      Value mask = b.broadcastInDim(m, self.shape(), range(lo, hi));
      // values broadcast to the selection's shape with its selected dimension 1: self[:k] + (1,) + self[k+rank:]
      Shape one(self.shape().begin(), self.shape().begin() + lo), ones = one;
      one.push_back(1);
      ones.insert(ones.end(), size_t(m.rank()), 1);
      for (int64_t d = hi; d < self.rank(); ++d) {
        one.push_back(self.shape()[size_t(d)]);
        ones.push_back(self.shape()[size_t(d)]);
      }
      Value v = b.broadcastTo(b.reshape(b.broadcastTo(values, one), ones), self.shape());
      if (accumulate) return {b.select(mask, b.add(self, v), self)};
      return {b.select(mask, v, self)};
    }
  bool any = false;
  for (auto& v : tensors) any |= v.valid();
  if (!any) {
    Value v = b.broadcastTo(values, self.shape());
    return {accumulate ? b.add(self, v) : v};
  }
  AdvIndex a = advIndex(ctx, self, tensors);
  if (numel(a.outShape) == 0) return {self};
  Value xt = b.transpose(self, a.perm);
  Value upd = b.transpose(b.broadcastTo(values, a.outShape), inversePerm(a.outPerm));
  int64_t k = int64_t(a.dims.size()), nb = int64_t(a.bshape.size());
  Builder::ScatterDims sd;
  sd.update_window_dims = range(nb, nb + int64_t(a.rest.size()));
  sd.inserted_window_dims = range(0, k);
  sd.scatter_dims_to_operand_dims = range(0, k);
  sd.index_vector_dim = nb;
  std::optional<ReduceKind> comb;
  if (accumulate) comb = self.dtype() == DType::Pred ? ReduceKind::Or : ReduceKind::Sum;
  Value res = b.scatter(xt, a.indices, upd, sd, comb);
  return {b.transpose(res, inversePerm(a.perm))};
}

bool indexPutAccepts(const Context& ctx) {
  if (!realDTypes(ctx)) return false;
  // "Index put requires the source and destination dtypes match": declined, so that CPU's kernel raises it
  if (ctx.tensor(2).dtype() != ctx.tensor(0).dtype()) return false;
  int bools = 0, present = 0;
  for (const Value& v : ctx.arg(1).tensors) {
    if (!v.valid()) continue;
    ++present;
    if (isBoolIndex(v)) ++bools;
  }
  if (bools == 0) return true;
  // only a lone mask whose values do not depend on the number of selected elements is data-independent: values that
  // stop short of the selected dimension, or are 1 there (the dimensions after the mask's are `rest`)
  if (bools != 1 || present != 1) return false;
  if (ctx.tensor(2).type.numel() == 1) return true;
  const auto& tensors = ctx.arg(1).tensors;
  size_t k = 0;
  while (!tensors[k].valid()) ++k;
  const Shape vs = ctx.tensor(2).shape();
  int64_t rest = ctx.tensor(0).rank() - int64_t(k) - tensors[k].rank();
  int64_t at = int64_t(vs.size()) - 1 - rest;  // the values' dimension that meets the selected one
  return at < 0 || vs[size_t(at)] == 1;
}

// A reduction's mean from its sum and count (count >= 1): integer means floor, as PyTorch divides them with
// rounding_mode="floor".
Value meanOf(Builder& b, Value sum, Value count) {
  if (isFloat(sum.dtype()) || shlo::isComplex(sum.dtype())) return b.div(sum, count);
  Value q = b.div(sum, count), rm = b.rem(sum, count);
  Value adj = b.andOp(b.compare(rm, b.zerosLike(rm), Cmp::NE),
                      b.compare(b.compare(rm, b.zerosLike(rm), Cmp::LT), b.compare(count, b.zerosLike(count), Cmp::LT),
                                Cmp::NE));
  return b.select(adj, b.sub(q, b.onesLike(q)), q);
}

// index_add/index_copy/index_fill along dim with a 1-d (or 0-d) index: window scatter.
Value indexScatter(Context& ctx, Value self, int64_t dim, Value index, Value updates, std::optional<ReduceKind> comb) {
  Builder& b = ctx.b;
  int64_t k = index.type.numel();
  if (k == 0) return self;
  Value idx = b.reshape(b.convert(index, DType::S64), {k, 1});
  Value sz = b.broadcastTo(b.constantInt(self.shape()[dim], DType::S64), {k, 1});
  idx = b.select(b.compare(idx, b.zerosLike(idx), Cmp::LT), b.add(idx, sz), idx);
  if (k == 1 && (!comb || *comb == ReduceKind::Sum)) {
    // One index (a static KV cache's update): a dynamic_update_slice there, written only when the index is in
    // range as the scatter would be. XLA turns a one-index scatter into a select over the whole operand; this
    // touches only the slice.
    const int64_t n = self.shape()[dim];
    Value i0 = b.reshape(idx, {});
    Value valid = b.andOp(b.compare(i0, b.constantInt(0, DType::S64), Cmp::GE),
                          b.compare(i0, b.constantInt(n, DType::S64), Cmp::LT));
    Value at = b.clamp(b.constantInt(0, DType::S64), i0, b.constantInt(std::max<int64_t>(n - 1, 0), DType::S64));
    std::vector<Value> starts(static_cast<size_t>(self.rank()), b.constantInt(0, DType::S64));
    starts[static_cast<size_t>(dim)] = at;
    Shape window = self.shape();
    window[static_cast<size_t>(dim)] = 1;
    Value cur = b.dynamicSlice(self, starts, window);
    Value upd = b.reshape(updates, window);
    if (comb) upd = b.add(cur, upd);
    upd = b.select(b.broadcastInDim(valid, window, {}), upd, cur);
    return b.dynamicUpdateSlice(self, upd, starts);
  }
  Builder::ScatterDims sd;
  for (int64_t d = 0; d < self.rank(); ++d)
    if (d != dim) sd.update_window_dims.push_back(d);
  sd.inserted_window_dims = {dim};
  sd.scatter_dims_to_operand_dims = {dim};
  sd.index_vector_dim = 1;
  return b.scatter(self, idx, updates, sd, comb);
}

// index_select(self, dim, index): index 0-d or 1-d.
std::vector<Value> indexSelectRule(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0), index = ctx.tensor(2);
  int64_t k = index.type.numel();
  Value idx = b.reshape(index, {k});
  const int64_t dim = x.rank() == 0 ? 0 : normDim(ctx, ctx.toInt(1), x.rank());
  const int64_t size = x.rank() == 0 ? 1 : x.shape()[dim];
  checkIndexRange(ctx, idx, size, false, outOfRangeInSelf(dim, size));  // bounds check
  if (x.rank() == 0) return {b.reshape(b.broadcastTo(x, {k}), {})};
  return {takeAlong(b, x, dim, idx)};
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
std::vector<Value> embeddingBackwardRule(Context& ctx) {
  Builder& b = ctx.b;
  Value g = ctx.tensor(0), indices = ctx.tensor(1);
  int64_t num_weights = ctx.toInt(2), padding_idx = ctx.toInt(3);
  bool scale = ctx.toBool(4);
  int64_t m = indices.type.numel();
  int64_t dim = g.shape().empty() ? 1 : g.shape().back();
  DType c = accType(g.dtype());
  Value idx = b.convert(b.reshape(indices, {m}), DType::S64);
  Value rows = b.convert(b.reshape(g, {m, dim}), c);
  Value keep = b.compare(idx, b.broadcastTo(b.constantInt(padding_idx, DType::S64), {m}), Cmp::NE);
  Value w = b.convert(keep, c);  // 0 for padding rows
  Value idx2 = b.reshape(idx, {m, 1});
  if (scale) {
    Builder::ScatterDims sd1;
    sd1.update_window_dims = {};
    sd1.inserted_window_dims = {0};
    sd1.scatter_dims_to_operand_dims = {0};
    sd1.index_vector_dim = 1;
    Value counts = b.scatter(b.zeros({c, {num_weights}}), idx2, b.constantF(1, c, {m}), sd1, ReduceKind::Sum);
    Builder::GatherDims gd;
    gd.offset_dims = {};
    gd.collapsed_slice_dims = {0};
    gd.start_index_map = {0};
    gd.index_vector_dim = 1;
    Value cnt = b.gather(counts, idx2, gd, {1}, {m});
    w = b.div(w, b.max(cnt, b.constantF(1, c, {m})));
  }
  if (padding_idx >= 0 || scale) rows = b.mul(rows, b.broadcastInDim(w, {m, dim}, {0}));
  Builder::ScatterDims sd;
  sd.update_window_dims = {1};
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  Value out = b.scatter(b.zeros({c, {num_weights, dim}}), idx2, rows, sd, ReduceKind::Sum);
  return {b.convert(out, g.dtype())};
}

}  // namespace

void populateIndexing(Registry& r) {
  // gather(self, dim, index, sparse_grad)
  r.add("aten::gather", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0), index = ctx.tensor(2);
    if (x.rank() == 0) {
      checkIndexRange(ctx, index, 1, false, outOfBoundsMessage(0, 1), Context::CheckError::Runtime);  // bounds check
      return {b.broadcastTo(x, index.shape())};
    }
    int64_t dim = normDim(ctx, ctx.toInt(1), x.rank());
    if (index.type.numel() == 0) return {b.zeros({x.dtype(), index.shape()})};
    checkIndexRange(ctx, index, x.shape()[dim], false, outOfBoundsMessage(dim, x.shape()[dim]),
                    Context::CheckError::Runtime);  // bounds check
    Builder::GatherDims gd;
    gd.collapsed_slice_dims = range(0, x.rank());
    gd.start_index_map = range(0, x.rank());
    gd.index_vector_dim = index.rank();
    return {b.gather(x, fullIndices(b, index, dim), gd, std::vector<int64_t>(x.rank(), 1), index.shape())};
  }).complex();
  r.add("aten::scatter.src", [](Context& ctx) { return scatterRule(ctx, false, std::nullopt); }).complex();
  r.add("aten::scatter.value", [](Context& ctx) { return scatterRule(ctx, true, std::nullopt); }).complex();
  r.add("aten::scatter_add", [](Context& ctx) { return scatterRule(ctx, false, ReduceKind::Sum); }).complex();
  // scatter.reduce(self, dim, index, src, *, str reduce): "add" | "multiply"
  r.add("aten::scatter.reduce", [](Context& ctx) {
    const std::string& red = ctx.arg(4).s;
    return scatterRule(ctx, false, red == "multiply" ? ReduceKind::Prod : ReduceKind::Sum);
  }).accepts(realDTypes).complex();
  // scatter_reduce.two(self, dim, index, src, str reduce, *, bool include_self=True)
  r.add("aten::scatter_reduce.two", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0), index = ctx.tensor(2);
    if (self.rank() == 0) ctx.fail("0-d scatter_reduce is not lowered");
    int64_t dim = normDim(ctx, ctx.toInt(1), self.rank());
    checkIndexRange(ctx, index, self.shape()[dim], false, outOfBoundsMessage(dim, self.shape()[dim]),
                    Context::CheckError::Runtime);  // bounds check
    const std::string& red = ctx.arg(4).s;
    bool include_self = !ctx.has(5) || ctx.toBool(5);
    Value src = b.convert(corner(b, ctx.tensor(3), index.shape()), self.dtype());
    ReduceKind kind = red == "prod" ? ReduceKind::Prod : red == "amax" ? ReduceKind::Max
                      : red == "amin" ? ReduceKind::Min : ReduceKind::Sum;
    Value base = self;
    if (!include_self)
      base = scatterAlong(ctx, self, dim, index, b.constantF(identityOf(kind, self.dtype()), self.dtype(), index.shape()),
                          std::nullopt);
    Value res = scatterAlong(ctx, base, dim, index, src, kind);
    if (red == "mean") {  // counted in the real component type (complex numbers have no max)
      const DType ct = shlo::isComplex(self.dtype()) ? shlo::componentType(self.dtype()) : self.dtype();
      Value ones = b.constantF(1, ct, index.shape());
      Value cnt0 = include_self ? b.constantF(1, ct, self.shape()) : b.zeros({ct, self.shape()});
      Value cnt = scatterAlong(ctx, cnt0, dim, index, ones, ReduceKind::Sum);
      Value safe = b.max(cnt, b.onesLike(cnt));
      res = meanOf(b, res, b.convert(safe, self.dtype()));
    }
    return {res};
  }).accepts([](const Context& ctx) {
    if (!realDTypes(ctx)) return false;
    const std::string& red = ctx.arg(4).s;
    if (red == "mean" && ctx.tensor(0).dtype() == DType::Pred) return false;
    // complex numbers: sum, prod and mean (CPU raises for amax/amin)
    if (shlo::isComplex(ctx.tensor(0).dtype())) return red == "sum" || red == "prod" || red == "mean";
    return red == "sum" || red == "prod" || red == "mean" || red == "amax" || red == "amin";
  }).complex();
  // index_add(self, dim, index, source, *, alpha=1)
  r.add("aten::index_add", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0);
    int64_t dim = normDim(ctx, ctx.toInt(1), self.rank());
    Value src = b.convert(ctx.tensor(3), self.dtype());
    if (self.rank() == 0) src = b.reshape(src, {1});
    if (ctx.has(4)) src = b.mul(src, operand(ctx, 4, self.dtype(), src.shape()));
    if (self.rank() == 0) return {b.add(self, b.reshape(src, {}))};
    checkIndexRange(ctx, ctx.tensor(2), self.shape()[dim], false, outOfRangeInSelf(dim, self.shape()[dim]));
    return {indexScatter(ctx, self, dim, ctx.tensor(2), src, ReduceKind::Sum)};
  }).complex();
  r.add("aten::index_copy", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0);
    if (self.rank() == 0) return {b.reshape(b.convert(ctx.tensor(3), self.dtype()), {})};
    int64_t dim = normDim(ctx, ctx.toInt(1), self.rank());
    checkIndexRange(ctx, ctx.tensor(2), self.shape()[dim], false,
                    "index_copy_(): " + outOfBoundsMessage(dim, self.shape()[dim]));  // bounds check
    return {indexScatter(ctx, self, dim, ctx.tensor(2), b.convert(ctx.tensor(3), self.dtype()), std::nullopt)};
  }).complex();
  auto indexFill = [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0), index = ctx.tensor(2);
    if (self.rank() == 0) return {index.type.numel() ? scalarArg(ctx, 3, self.dtype()) : self};
    int64_t dim = normDim(ctx, ctx.toInt(1), self.rank());
    checkIndexRange(ctx, index, self.shape()[dim], true, outOfBoundsMessage(dim, self.shape()[dim]));  // bounds check
    Shape us = self.shape();
    us[dim] = index.type.numel();
    Value upd = b.broadcastTo(scalarArg(ctx, 3, self.dtype()), us);
    return {indexScatter(ctx, self, dim, index, upd, std::nullopt)};
  };
  r.add("aten::index_fill.int_Scalar", indexFill).complex();
  r.add("aten::index_fill.int_Tensor", indexFill).complex();
  // index.Tensor(self, Tensor?[] indices): integer advanced indexing (boolean masks are data-dependent: declined).
  // Eager mode implements index.Tensor / index_put / _index_put_impl natively (csrc/eager/dynamic.cpp: boolean
  // masks need the host to learn their size) and lowers integer indexing through the _unsafe_ forms; these rules
  // serve graphs.
  auto intIndexAccepts = [](const Context& ctx) { return realDTypes(ctx) && intIndices(ctx, 1); };
  r.add("aten::index.Tensor", indexRule).accepts(intIndexAccepts).graphOnly().dtypes(kRestricted);
  r.add("aten::_unsafe_index.Tensor", indexRule).accepts(intIndexAccepts).dtypes(kRestricted);
  r.add("aten::index_put", indexPutRule).accepts(indexPutAccepts).graphOnly().dtypes(kFloat8 | kComplex);
  r.add("aten::_index_put_impl", indexPutRule).accepts(indexPutAccepts).graphOnly().complex();
  r.add("aten::_unsafe_index_put", indexPutRule).accepts(indexPutAccepts).dtypes(kFloat8 | kComplex);
  // take(self, index): elements of the flattened self (negative indices wrap).
  r.add("aten::take", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0), index = ctx.tensor(1);
    int64_t n = x.type.numel(), k = index.type.numel();
    checkIndexRange(ctx, index, n, true, takeMessage(n));  // bounds check
    if (k == 0 || n == 0) return {b.zeros({x.dtype(), index.shape()})};
    Value idx = b.reshape(b.convert(index, DType::S64), {k, 1});
    Value sz = b.constantF(double(n), DType::S64, {k, 1});
    idx = b.select(b.compare(idx, b.zerosLike(idx), Cmp::LT), b.add(idx, sz), idx);
    Builder::GatherDims gd;
    gd.collapsed_slice_dims = {0};
    gd.start_index_map = {0};
    gd.index_vector_dim = 1;
    return {b.reshape(b.gather(b.reshape(x, {n}), idx, gd, {1}, {k}), index.shape())};
  }).complex();
  // put(self, index, source, accumulate=False): writes source's elements at flat positions of self.
  r.add("aten::put", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0), index = ctx.tensor(1);
    int64_t n = x.type.numel(), k = index.type.numel();
    checkIndexRange(ctx, index, n, true, takeMessage(n));  // bounds check
    if (k == 0 || n == 0) return {x};
    Value src = b.reshape(b.convert(ctx.tensor(2), x.dtype()), {k});
    Value idx = b.reshape(b.convert(index, DType::S64), {k, 1});
    Value sz = b.constantF(double(n), DType::S64, {k, 1});
    idx = b.select(b.compare(idx, b.zerosLike(idx), Cmp::LT), b.add(idx, sz), idx);
    Builder::ScatterDims sd;
    sd.inserted_window_dims = {0};
    sd.scatter_dims_to_operand_dims = {0};
    sd.index_vector_dim = 1;
    bool acc = ctx.has(3) && ctx.toBool(3);
    std::optional<ReduceKind> comb;
    if (acc) comb = x.dtype() == DType::Pred ? ReduceKind::Or : ReduceKind::Sum;
    return {b.reshape(b.scatter(b.reshape(x, {n}), idx, src, sd, comb), x.shape())};
  }).complex();
  // index_reduce(self, dim, index, source, reduce, *, include_self=True): prod / mean / amax / amin.
  r.add("aten::index_reduce", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0), index = ctx.tensor(2);
    Value src = b.convert(ctx.tensor(3), self.dtype());
    const std::string& red = ctx.arg(4).s;
    bool include_self = !ctx.has(5) || ctx.toBool(5);
    if (self.rank() == 0) {
      self = b.reshape(self, {1});
      src = b.reshape(src, {1});
    }
    int64_t dim = normDim(ctx, ctx.toInt(1), self.rank());
    checkIndexRange(ctx, index, self.shape()[dim], false, outOfRangeInSelf(dim, self.shape()[dim]));
    ReduceKind kind = red == "prod" ? ReduceKind::Prod : red == "amax" ? ReduceKind::Max
                      : red == "amin" ? ReduceKind::Min : ReduceKind::Sum;
    Value base = self;
    if (!include_self) {
      Value ident = b.constantF(identityOf(kind, self.dtype()), self.dtype(), src.shape());
      base = indexScatter(ctx, self, dim, index, ident, std::nullopt);
    }
    Value res = indexScatter(ctx, base, dim, index, src, kind);
    if (red == "mean") {
      Value cnt0 = include_self ? b.onesLike(self) : b.zerosLike(self);
      Value cnt = indexScatter(ctx, cnt0, dim, index, b.onesLike(src), ReduceKind::Sum);
      Value safe = b.max(cnt, b.onesLike(cnt));
      res = meanOf(b, res, safe);
      // rows nobody indexed keep self
      res = b.select(b.compare(cnt, b.zerosLike(cnt), Cmp::EQ), self, res);
    }
    if (ctx.tensor(0).rank() == 0) res = b.reshape(res, {});
    return {res};
  }).accepts([](const Context& ctx) {
    if (!realDTypes(ctx)) return false;
    const std::string& red = ctx.arg(4).s;
    return red == "prod" || red == "mean" || red == "amax" || red == "amin";
  });
  // masked_scatter(self, mask, source): the k-th true element of the (broadcast) mask takes source's k-th element.
  // a non-bool mask is an error in PyTorch: declined, so the CPU kernel raises it
  r.add("aten::masked_scatter", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Shape shape = broadcastShapes({ctx.tensor(0).shape(), ctx.tensor(1).shape()});
    Value self = b.broadcastTo(ctx.tensor(0), shape);
    Value mask = b.broadcastTo(ctx.tensor(1), shape);
    if (mask.dtype() != DType::Pred) mask = b.compare(mask, b.zerosLike(mask), Cmp::NE);
    Value src = ctx.tensor(2);
    int64_t n = self.type.numel(), ns = src.type.numel();
    if (n == 0) return {self};
    Value flat = b.convert(b.reshape(mask, {n}), DType::S64);
    // CPU's check: the mask may not select more elements than source has (a device-side check).
    Value ones = b.reduce(flat, {0}, ReduceKind::Sum);
    ctx.check(b.compare(ones, b.constantInt(ns, DType::S64), Cmp::LE),
              "Number of elements of source < number of ones in mask", Value(), Context::CheckError::Runtime);
    if (ns == 0) return {self};
    std::vector<int64_t> one{1};
    Value pos = b.reduceWindow(flat, b.constantInt(0, DType::S64), ReduceKind::Sum, {n}, one, one, one,
                               {{n - 1, 0}});
    pos = b.clamp(b.constantInt(0, DType::S64), b.sub(pos, b.onesLike(pos)), b.constantInt(ns - 1, DType::S64));
    Builder::GatherDims gd;
    gd.collapsed_slice_dims = {0};
    gd.start_index_map = {0};
    gd.index_vector_dim = 1;
    Value taken = b.gather(b.convert(b.reshape(src, {ns}), self.dtype()), b.reshape(pos, {n, 1}), gd, {1}, {n});
    return {b.select(mask, b.reshape(taken, self.shape()), self)};
  }).accepts([](const Context& ctx) { return realDTypes(ctx) && ctx.tensor(1).dtype() == DType::Pred; }).complex();
  r.add("aten::index_select", indexSelectRule).dtypes(kAllFloat8 | kComplex);
  // embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)
  r.add("aten::embedding", [](Context& ctx) -> std::vector<Value> {
    const Value weight = ctx.tensor(0);
    if (weight.rank() > 0)
      checkIndexRange(ctx, ctx.tensor(1), weight.shape()[0], false, outOfRangeInSelf(0, weight.shape()[0]));
    return {takeRows(ctx.b, weight, ctx.tensor(1))};
  }).accepts(realDTypes);
  r.add("aten::embedding_dense_backward", embeddingBackwardRule).accepts(realDTypes);
  // embedding_renorm_(self, indices, max_norm, norm_type) (nn.Embedding's max_norm): each row named by an index
  // (once, however often it is named) whose norm exceeds max_norm is scaled by max_norm / (norm + 1e-7), as CPU's
  // kernel does (the norm in the row's dtype, the scale in double, applied in the row's dtype).
  r.add("aten::embedding_renorm_", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0), idx = ctx.tensor(1);
    int64_t rows = self.shape()[0], dim = self.shape()[1];
    checkIndexRange(ctx, idx, rows, false, outOfBoundsMessage(0, rows));
    int64_t m = numel(idx.shape());
    Builder::ScatterDims sd;
    sd.inserted_window_dims = {0};
    sd.scatter_dims_to_operand_dims = {0};
    sd.index_vector_dim = 1;
    Value named = b.scatter(b.zeros({DType::S32, {rows}}), b.reshape(b.convert(idx, DType::S64), {m, 1}),
                            b.constantF(1, DType::S32, {m}), sd, ReduceKind::Max);
    DType c = accType(self.dtype());
    Value a = b.abs(b.convert(self, c));
    double p = ctx.arg(3).scalar.toDouble();
    Value norm;
    if (std::isinf(p)) {
      norm = b.reduce(a, {1}, p > 0 ? ReduceKind::Max : ReduceKind::Min);
    } else if (p == 0) {
      norm = b.reduce(b.convert(b.compare(a, b.zerosLike(a), Cmp::NE), c), {1}, ReduceKind::Sum);
    } else if (p == 1) {
      norm = b.reduce(a, {1}, ReduceKind::Sum);
    } else if (p == 2) {
      norm = b.sqrt(b.reduce(b.mul(a, a), {1}, ReduceKind::Sum));
    } else {
      norm = b.pow(b.reduce(b.pow(a, cst(b, p, a)), {1}, ReduceKind::Sum), b.constantF(1.0 / p, c, {rows}));
    }
    Value n64 = b.convert(norm, DType::F64);
    Value max_norm = b.broadcastTo(scalarArg(ctx, 2, DType::F64), {rows});
    Value scale = b.div(max_norm, b.add(n64, b.constantF(1e-7, DType::F64, {rows})));
    Value shrink = b.andOp(b.compare(named, b.zerosLike(named), Cmp::GT), b.compare(n64, max_norm, Cmp::GT));
    Value scaled = b.convert(b.mul(b.convert(self, c), b.broadcastInDim(b.convert(scale, c), {rows, dim}, {0})),
                             self.dtype());
    return {b.select(b.broadcastInDim(shrink, {rows, dim}, {0}), scaled, self)};
  }).staticArgs({"norm_type"}).accepts([](const Context& ctx) {
    DType it = ctx.tensor(1).dtype();
    return realDTypes(ctx) && shlo::isFloat(ctx.tensor(0).dtype()) && ctx.tensor(0).rank() == 2 &&
           (it == DType::S64 || it == DType::S32) && ctx.arg(3).scalar.known();
  });
}

}  // namespace torch_tpu::lowering
