// Shape / data-movement family: cat, stack, constant_pad_nd, gather/scatter (+ reduce variants), index_select-like
// index_add/index_copy/index_fill, advanced indexing (index.Tensor, index_put), flip, roll, tril/triu, repeat,
// sort/topk, the backward of slicing (slice_backward, select_backward, slice_scatter, select_scatter) and the
// functional *_copy forms of views that compiled graphs contain.
//
// True view ops (view, transpose, expand, ...) are NOT here: eager mode implements them as aliases.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

using shlo::Cmp;
using shlo::isFloat;

std::vector<int64_t> range(int64_t lo, int64_t hi) {
  std::vector<int64_t> d;
  for (int64_t k = lo; k < hi; ++k) d.push_back(k);
  return d;
}

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
  std::vector<Value> parts;
  for (size_t k = 0; k < idx.size(); ++k) {
    Value v = b.convert(idx[k], DType::S64);
    int64_t size = self.shape()[a.dims[k]];
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
  // One boolean mask with a single value: a select.
  for (size_t k = 0; k < tensors.size(); ++k)
    if (isBoolIndex(tensors[k])) {
      Value m = tensors[k];
      if (m.dtype() != DType::Pred) m = b.compare(m, b.zerosLike(m), Cmp::NE);
      Value mask = b.broadcastInDim(m, self.shape(), range(int64_t(k), int64_t(k) + m.rank()));
      Value v = b.broadcastTo(b.reshape(values, {}), self.shape());
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
  // only a lone mask with a single value is data-independent
  return bools == 1 && present == 1 && ctx.tensor(2).type.numel() == 1;
}

// index_add/index_copy/index_fill along dim with a 1-d (or 0-d) index: window scatter.
Value indexScatter(Context& ctx, Value self, int64_t dim, Value index, Value updates, std::optional<ReduceKind> comb) {
  Builder& b = ctx.b;
  int64_t k = index.type.numel();
  if (k == 0) return self;
  Value idx = b.reshape(b.convert(index, DType::S64), {k, 1});
  Value sz = b.broadcastTo(b.constantInt(self.shape()[dim], DType::S64), {k, 1});
  idx = b.select(b.compare(idx, b.zerosLike(idx), Cmp::LT), b.add(idx, sz), idx);
  Builder::ScatterDims sd;
  for (int64_t d = 0; d < self.rank(); ++d)
    if (d != dim) sd.update_window_dims.push_back(d);
  sd.inserted_window_dims = {dim};
  sd.scatter_dims_to_operand_dims = {dim};
  sd.index_vector_dim = 1;
  return b.scatter(self, idx, updates, sd, comb);
}

// Pads `src` (a slice of a dim-`size` tensor taken with start/step) back to full size along dim with `fill`.
Value unslice(Builder& b, Value src, Value fill, int64_t dim, int64_t size, int64_t start, int64_t step) {
  int64_t len = src.shape()[dim];
  std::vector<int64_t> lo(src.rank(), 0), hi(src.rank(), 0), in(src.rank(), 0);
  if (len == 0) {
    Shape s = src.shape();
    s[dim] = size;
    return b.broadcastTo(fill, s);
  }
  lo[dim] = start;
  in[dim] = step - 1;
  hi[dim] = size - start - ((len - 1) * step + 1);
  return b.pad(src, fill, lo, hi, in);
}

// Python slice normalization of (start, end) for a dimension of `size` (PyTorch clamps out-of-range values).
std::pair<int64_t, int64_t> normSlice(const Context& ctx, size_t start_i, size_t end_i, int64_t size) {
  int64_t start = ctx.has(start_i) ? ctx.toInt(start_i) : 0;
  int64_t end = ctx.has(end_i) ? ctx.toInt(end_i) : size;
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  return {start, end};
}

Value triMask(Builder& b, const Shape& shape, int64_t diagonal, bool lower) {
  int64_t r = int64_t(shape.size());
  Value row = b.iota({DType::S64, shape}, r - 2), col = b.iota({DType::S64, shape}, r - 1);
  Value diff = b.sub(col, row);  // col - row
  Value dg = b.broadcastTo(b.constantInt(diagonal, DType::S64), shape);
  return b.compare(diff, dg, lower ? Cmp::LE : Cmp::GE);
}

std::vector<Value> sortRule(Context& ctx, int64_t dim, bool descending) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  if (x.rank() == 0) return {x, b.constantInt(0, DType::S64)};
  dim = normDim(ctx, dim, x.rank());
  Value key = x.dtype() == DType::Pred ? b.convert(x, DType::U8) : x;
  auto res = b.sort({key, b.iota({DType::S64, x.shape()}, dim)}, dim, descending, /*stable=*/true);
  return {b.convert(res[0], x.dtype()), res[1]};
}


// ---- reflection / replication padding: a static source index per output position along each padded dim ----

// The adjoint of takeAlong (constant positions): g's slices added into a zero tensor of size n along dim.
Value scatterAddAlong(Builder& b, Value g, int64_t dim, const std::vector<int64_t>& idx, int64_t n) {
  Shape out = g.shape();
  out[dim] = n;
  int64_t k = int64_t(idx.size());
  if (k == 0 || numel(out) == 0) return b.zeros({g.dtype(), out});
  Value ind = b.reshape(b.constantI64s(idx, DType::S64), {k, 1});
  Builder::ScatterDims sd;
  for (int64_t d = 0; d < g.rank(); ++d)
    if (d != dim) sd.update_window_dims.push_back(d);
  sd.inserted_window_dims = {dim};
  sd.scatter_dims_to_operand_dims = {dim};
  sd.index_vector_dim = 1;
  return b.scatter(b.zeros({g.dtype(), out}), ind, g, sd, ReduceKind::Sum);
}

std::vector<int64_t> padIndex(int64_t n, int64_t lo, int64_t hi, bool reflect) {
  std::vector<int64_t> idx;
  for (int64_t o = 0; o < n + lo + hi; ++o) {
    int64_t i = o - lo;
    if (reflect) {
      if (i < 0) i = -i;
      if (i >= n) i = 2 * (n - 1) - i;
    } else {
      i = std::clamp<int64_t>(i, 0, n - 1);
    }
    idx.push_back(i);
  }
  return idx;
}
}  // namespace

void populateShape(Registry& r) {
  // cat(tensors, dim): legacy 1-d empty tensors are skipped; dtypes promote.
  addReal(r, "aten::cat", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    const auto& ts = ctx.arg(0).tensors;
    DType t = DType::Invalid;
    for (auto& v : ts) t = t == DType::Invalid ? v.dtype() : promote(t, v.dtype());
    auto legacy = [](const Value& v) { return v.rank() == 1 && v.shape()[0] == 0; };
    const Value* ref = nullptr;
    for (auto& v : ts)
      if (!legacy(v)) {
        ref = &v;
        break;
      }
    if (!ref) return {b.zeros(ctx.outputs.at(0))};
    int64_t dim = normDim(ctx, ctx.has(1) ? ctx.toInt(1) : 0, ref->rank());
    std::vector<Value> keep;
    for (auto& v : ts)
      if (!legacy(v) && v.shape()[dim] != 0) keep.push_back(b.convert(v, t));
    if (keep.empty()) return {b.convert(*ref, t)};
    if (keep.size() == 1) return {keep[0]};
    return {b.concatenate(keep, dim)};
  });
  addReal(r, "aten::stack", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    const auto& ts = ctx.arg(0).tensors;
    if (ts.empty()) ctx.fail("stack expects a non-empty list");
    DType t = ts[0].dtype();
    for (auto& v : ts) t = promote(t, v.dtype());
    int64_t dim = normDim(ctx, ctx.has(1) ? ctx.toInt(1) : 0, ts[0].rank() + 1);
    std::vector<Value> parts;
    for (auto& v : ts) {
      Shape s = v.shape();
      s.insert(s.begin() + dim, 1);
      parts.push_back(b.reshape(b.convert(v, t), s));
    }
    return {parts.size() == 1 ? parts[0] : b.concatenate(parts, dim)};
  });
  // constant_pad_nd(self, pad, value=0): pairs from the last dimension backwards; negative pads crop.
  addReal(r, "aten::constant_pad_nd", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    const auto& pad = ctx.toInts(1);
    if (pad.size() % 2 || int64_t(pad.size() / 2) > x.rank()) ctx.fail("bad padding length");
    std::vector<int64_t> lo(x.rank(), 0), hi(x.rank(), 0), in(x.rank(), 0);
    for (size_t i = 0; i < pad.size() / 2; ++i) {
      int64_t d = x.rank() - 1 - int64_t(i);
      lo[d] = pad[2 * i];
      hi[d] = pad[2 * i + 1];
    }
    Value v = ctx.has(2) ? scalarArg(ctx, 2, x.dtype()) : b.constant(0, x.dtype());
    return {b.pad(x, v, lo, hi, in)};
  });
  // gather(self, dim, index, sparse_grad)
  addReal(r, "aten::gather", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0), index = ctx.tensor(2);
    if (x.rank() == 0) return {b.broadcastTo(x, index.shape())};
    int64_t dim = normDim(ctx, ctx.toInt(1), x.rank());
    if (index.type.numel() == 0) return {b.zeros({x.dtype(), index.shape()})};
    Builder::GatherDims gd;
    gd.collapsed_slice_dims = range(0, x.rank());
    gd.start_index_map = range(0, x.rank());
    gd.index_vector_dim = index.rank();
    return {b.gather(x, fullIndices(b, index, dim), gd, std::vector<int64_t>(x.rank(), 1), index.shape())};
  });
  addReal(r, "aten::scatter.src", [](Context& ctx) { return scatterRule(ctx, false, std::nullopt); });
  addReal(r, "aten::scatter.value", [](Context& ctx) { return scatterRule(ctx, true, std::nullopt); });
  addReal(r, "aten::scatter_add", [](Context& ctx) { return scatterRule(ctx, false, ReduceKind::Sum); });
  // scatter.reduce(self, dim, index, src, *, str reduce): "add" | "multiply"
  addReal(r, "aten::scatter.reduce", [](Context& ctx) {
    const std::string& red = ctx.arg(4).s;
    return scatterRule(ctx, false, red == "multiply" ? ReduceKind::Prod : ReduceKind::Sum);
  });
  // scatter_reduce.two(self, dim, index, src, str reduce, *, bool include_self=True)
  {
    Rule rule;
    rule.op = "aten::scatter_reduce.two";
    rule.fn = [](Context& ctx) -> std::vector<Value> {
      Builder& b = ctx.b;
      Value self = ctx.tensor(0), index = ctx.tensor(2);
      if (self.rank() == 0) ctx.fail("0-d scatter_reduce is not lowered");
      int64_t dim = normDim(ctx, ctx.toInt(1), self.rank());
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
      if (red == "mean") {
        Value ones = b.constantF(1, self.dtype(), index.shape());
        Value cnt0 = include_self ? b.onesLike(self) : b.zerosLike(self);
        Value cnt = scatterAlong(ctx, cnt0, dim, index, ones, ReduceKind::Sum);
        Value safe = b.max(cnt, b.onesLike(cnt));
        if (isFloat(self.dtype())) {
          res = b.div(res, safe);
        } else {  // integer mean floors (PyTorch divides with rounding_mode="floor")
          Value q = b.div(res, safe), rm = b.rem(res, safe);
          Value adj = b.andOp(b.compare(rm, b.zerosLike(rm), Cmp::NE),
                              b.compare(b.compare(rm, b.zerosLike(rm), Cmp::LT), b.compare(safe, b.zerosLike(safe), Cmp::LT),
                                        Cmp::NE));
          res = b.select(adj, b.sub(q, b.onesLike(q)), q);
        }
      }
      return {res};
    };
    rule.accepts = [](const Context& ctx) {
      if (!realDTypes(ctx)) return false;
      const std::string& red = ctx.arg(4).s;
      if (red == "mean" && ctx.tensor(0).dtype() == DType::Pred) return false;
      return red == "sum" || red == "prod" || red == "mean" || red == "amax" || red == "amin";
    };
    r.add(std::move(rule));
  }
  // index_add(self, dim, index, source, *, alpha=1)
  addReal(r, "aten::index_add", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0);
    int64_t dim = normDim(ctx, ctx.toInt(1), self.rank());
    Value src = b.convert(ctx.tensor(3), self.dtype());
    if (self.rank() == 0) src = b.reshape(src, {1});
    if (ctx.has(4)) src = b.mul(src, operand(ctx, 4, self.dtype(), src.shape()));
    if (self.rank() == 0) return {b.add(self, b.reshape(src, {}))};
    return {indexScatter(ctx, self, dim, ctx.tensor(2), src, ReduceKind::Sum)};
  });
  addReal(r, "aten::index_copy", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0);
    if (self.rank() == 0) return {b.reshape(b.convert(ctx.tensor(3), self.dtype()), {})};
    int64_t dim = normDim(ctx, ctx.toInt(1), self.rank());
    return {indexScatter(ctx, self, dim, ctx.tensor(2), b.convert(ctx.tensor(3), self.dtype()), std::nullopt)};
  });
  auto indexFill = [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0), index = ctx.tensor(2);
    if (self.rank() == 0) return {index.type.numel() ? scalarArg(ctx, 3, self.dtype()) : self};
    int64_t dim = normDim(ctx, ctx.toInt(1), self.rank());
    Shape us = self.shape();
    us[dim] = index.type.numel();
    Value upd = b.broadcastTo(scalarArg(ctx, 3, self.dtype()), us);
    return {indexScatter(ctx, self, dim, index, upd, std::nullopt)};
  };
  addReal(r, "aten::index_fill.int_Scalar", indexFill);
  addReal(r, "aten::index_fill.int_Tensor", indexFill);
  // index.Tensor(self, Tensor?[] indices): integer advanced indexing (boolean masks are data-dependent: declined).
  // Eager mode implements index.Tensor / index_put / _index_put_impl natively (csrc/eager/dynamic.cpp: boolean
  // masks need the host to learn their size) and lowers integer indexing through the _unsafe_ forms; these rules
  // serve graphs.
  for (const char* op : {"aten::index.Tensor", "aten::_unsafe_index.Tensor"}) {
    Rule rule;
    rule.op = op;
    rule.fn = indexRule;
    rule.accepts = [](const Context& ctx) { return realDTypes(ctx) && intIndices(ctx, 1); };
    rule.eager = std::string(op) != "aten::index.Tensor";
    r.add(std::move(rule));
  }
  for (const char* op : {"aten::index_put", "aten::_index_put_impl", "aten::_unsafe_index_put"}) {
    Rule rule;
    rule.op = op;
    rule.fn = indexPutRule;
    rule.accepts = indexPutAccepts;
    rule.eager = std::string(op) == "aten::_unsafe_index_put";
    r.add(std::move(rule));
  }
  // linalg_cross(self, other, *, dim=-1): both broadcast; dim has size 3.
  addReal(r, "aten::linalg_cross", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0), y = ctx.tensor(1);
    DType t = promote(x.dtype(), y.dtype());
    Shape shape = broadcastShapes({x.shape(), y.shape()});
    x = b.broadcastTo(b.convert(x, t), shape);
    y = b.broadcastTo(b.convert(y, t), shape);
    int64_t d = normDim(ctx, ctx.has(2) ? ctx.toInt(2) : -1, int64_t(shape.size()));
    auto at = [&](Value v, int64_t i) { return b.sliceInDim(v, i, i + 1, 1, d); };
    auto part = [&](int64_t i, int64_t j) { return b.sub(b.mul(at(x, i), at(y, j)), b.mul(at(x, j), at(y, i))); };
    return {b.concatenate({part(1, 2), part(2, 0), part(0, 1)}, d)};
  });
  // isin(elements, test_elements, *, assume_unique, invert): every element compared with every test element.
  for (const char* op : {"aten::isin.Tensor_Tensor", "aten::isin.Tensor_Scalar", "aten::isin.Scalar_Tensor"}) {
    addReal(r, op, [](Context& ctx) -> std::vector<Value> {
      Builder& b = ctx.b;
      DType t = resultTypeOf(ctx, {0, 1});
      auto val = [&](size_t i) {
        return ctx.arg(i).kind == Arg::Kind::Tensor && !ctx.arg(i).wrapped_number ? b.convert(ctx.tensor(i), t)
                                                                                  : scalarArg(ctx, i, t);
      };
      Value e = val(0), te = val(1);
      int64_t ne = e.type.numel(), nt = te.type.numel();
      bool invert = ctx.has(3) && ctx.toBool(3);
      if (nt == 0) return {b.constantF(invert ? 1 : 0, DType::Pred, e.shape())};
      if (ne == 0) return {b.constantF(0, DType::Pred, e.shape())};
      Value ef = b.broadcastInDim(b.reshape(e, {ne}), {ne, nt}, {0});
      Value tf = b.broadcastInDim(b.reshape(te, {nt}), {ne, nt}, {1});
      Value hit = b.reduce(b.compare(ef, tf, Cmp::EQ), {1}, ReduceKind::Or);
      if (invert) hit = b.notOp(hit);
      return {b.reshape(hit, e.shape())};
    });
  }
  // searchsorted(sorted_sequence, self, *, out_int32, right, side, sorter) / bucketize(self, boundaries, *,
  // out_int32, right): the count of boundaries below (left) or not above (right) each value. A 1-d sequence serves
  // every value; an N-d one is searched row by row (its leading dims match the values').
  auto search = [](Context& ctx, size_t seq_i, size_t val_i, bool right, int sorter_i) -> Value {
    Builder& b = ctx.b;
    Value seq = ctx.tensor(seq_i);
    DType t = promote(seq.dtype(), ctx.arg(val_i).kind == Arg::Kind::Tensor && !ctx.arg(val_i).wrapped_number
                                       ? ctx.tensor(val_i).dtype() : typeOperand(ctx, val_i).dtype);
    if (!isFloat(t) && typeOperand(ctx, val_i).dtype == DType::F64) t = DType::F64;
    Value v = ctx.arg(val_i).kind == Arg::Kind::Tensor && !ctx.arg(val_i).wrapped_number
                  ? b.convert(ctx.tensor(val_i), t) : scalarArg(ctx, val_i, t);
    seq = b.convert(seq, t);
    if (seq.type.numel() == 0) return b.zeros({DType::S64, v.shape()});
    if (sorter_i >= 0 && ctx.has(size_t(sorter_i))) {
      Value sorter = ctx.tensor(size_t(sorter_i));
      int64_t sd = seq.rank() - 1;
      Builder::GatherDims gd;
      for (int64_t k = 0; k < seq.rank(); ++k) gd.collapsed_slice_dims.push_back(k), gd.start_index_map.push_back(k);
      gd.index_vector_dim = sorter.rank();
      std::vector<Value> parts;
      Shape s1 = sorter.shape();
      s1.push_back(1);
      for (int64_t k = 0; k < seq.rank(); ++k)
        parts.push_back(b.reshape(k == sd ? b.convert(sorter, DType::S64) : b.iota({DType::S64, sorter.shape()}, k), s1));
      seq = b.gather(seq, b.concatenate(parts, sorter.rank()), gd, std::vector<int64_t>(seq.rank(), 1), sorter.shape());
    }
    int64_t n = seq.shape().empty() ? 1 : seq.shape().back();
    Shape vs = v.shape();
    Shape big = vs;
    big.push_back(n);
    std::vector<int64_t> vmap;
    for (int64_t k = 0; k < v.rank(); ++k) vmap.push_back(k);
    Value vb = b.broadcastInDim(v, big, vmap);
    Value sb;
    if (seq.rank() <= 1) {
      sb = b.broadcastInDim(b.reshape(seq, {n}), big, {int64_t(big.size()) - 1});
    } else {  // leading dims equal to v's leading dims
      std::vector<int64_t> smap;
      for (int64_t k = 0; k < seq.rank() - 1; ++k) smap.push_back(k);
      smap.push_back(int64_t(big.size()) - 1);
      sb = b.broadcastInDim(seq, big, smap);
    }
    // NaN sorts last: a NaN boundary is above every value; a NaN value is above every non-NaN boundary.
    Value below = b.compare(sb, vb, right ? Cmp::LE : Cmp::LT);
    if (isFloat(t)) {
      Value vnan = isNan(b, vb), snan = isNan(b, sb);
      below = b.select(snan, right ? b.andOp(vnan, snan) : b.constantF(0, DType::Pred, big),
                       b.orOp(below, vnan));
    }
    return b.reduce(b.convert(below, DType::S64), {int64_t(big.size()) - 1}, ReduceKind::Sum);
  };
  for (const char* op : {"aten::searchsorted.Tensor", "aten::searchsorted.Scalar"})
    addReal(r, op, [search](Context& ctx) -> std::vector<Value> {
      // PyTorch CPU has no bool searchsorted: the call goes to its kernel, which raises
      if (resultTypeOf(ctx, {0, 1}) == DType::Pred) ctx.fail("searchsorted of bool values");
      bool right = (ctx.has(3) && ctx.toBool(3)) || (ctx.has(4) && ctx.arg(4).s == "right");
      Value res = search(ctx, 0, 1, right, 5);
      return {ctx.b.convert(res, ctx.has(2) && ctx.toBool(2) ? DType::S32 : DType::S64)};
    });
  for (const char* op : {"aten::bucketize.Tensor", "aten::bucketize.Scalar"}) {
    Rule rule;
    rule.op = op;
    rule.fn = [search](Context& ctx) -> std::vector<Value> {
      Value res = search(ctx, 1, 0, ctx.has(3) && ctx.toBool(3), -1);
      return {ctx.b.convert(res, ctx.has(2) && ctx.toBool(2) ? DType::S32 : DType::S64)};
    };
    // boundaries must be 1-d: otherwise declined, and the CPU kernel raises PyTorch's error
    rule.accepts = [](const Context& ctx) {
      return realDTypes(ctx) && ctx.tensor(1).rank() == 1 && resultTypeOf(ctx, {0, 1}) != DType::Pred;
    };
    r.add(std::move(rule));
  }
  // take(self, index): elements of the flattened self (negative indices wrap).
  addReal(r, "aten::take", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0), index = ctx.tensor(1);
    int64_t n = x.type.numel(), k = index.type.numel();
    if (k == 0 || n == 0) return {b.zeros({x.dtype(), index.shape()})};
    Value idx = b.reshape(b.convert(index, DType::S64), {k, 1});
    Value sz = b.constantF(double(n), DType::S64, {k, 1});
    idx = b.select(b.compare(idx, b.zerosLike(idx), Cmp::LT), b.add(idx, sz), idx);
    Builder::GatherDims gd;
    gd.collapsed_slice_dims = {0};
    gd.start_index_map = {0};
    gd.index_vector_dim = 1;
    return {b.reshape(b.gather(b.reshape(x, {n}), idx, gd, {1}, {k}), index.shape())};
  });
  // put(self, index, source, accumulate=False): writes source's elements at flat positions of self.
  addReal(r, "aten::put", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0), index = ctx.tensor(1);
    int64_t n = x.type.numel(), k = index.type.numel();
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
  });
  // index_reduce(self, dim, index, source, reduce, *, include_self=True): prod / mean / amax / amin.
  {
    Rule rule;
    rule.op = "aten::index_reduce";
    rule.fn = [](Context& ctx) -> std::vector<Value> {
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
        res = isFloat(self.dtype()) ? b.div(res, safe) : b.div(res, safe);
        // rows nobody indexed keep self
        res = b.select(b.compare(cnt, b.zerosLike(cnt), Cmp::EQ), self, res);
      }
      if (ctx.tensor(0).rank() == 0) res = b.reshape(res, {});
      return {res};
    };
    rule.accepts = [](const Context& ctx) {
      if (!realDTypes(ctx)) return false;
      const std::string& red = ctx.arg(4).s;
      return red == "prod" || red == "mean" || red == "amax" || red == "amin";
    };
    r.add(std::move(rule));
  }
  // unfold_backward(grad_in, input_sizes, dim, size, step): window gradients summed back into place.
  addReal(r, "aten::unfold_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value g = ctx.tensor(0);
    Shape sizes = ctx.toInts(1);
    int64_t rk = int64_t(sizes.size());
    int64_t dim = normDim(ctx, ctx.toInt(2), rk);
    int64_t step = ctx.toInt(4);
    if (rk == 0) return {b.reshape(b.reduce(g, {0}, ReduceKind::Sum), {})};
    Value zeros = b.zeros({g.dtype(), sizes});
    if (g.type.numel() == 0) return {zeros};
    // g: sizes with dim -> windows, plus a trailing window-offset dim.
    Shape gs = g.shape();
    Shape s1 = gs;
    s1.push_back(1);
    std::vector<Value> parts;
    for (int64_t k = 0; k < rk; ++k) {
      Value v = b.iota({DType::S64, gs}, k);
      if (k == dim)
        v = b.add(b.mul(v, b.constantF(double(step), DType::S64, gs)), b.iota({DType::S64, gs}, rk));
      parts.push_back(b.reshape(v, s1));
    }
    Builder::ScatterDims sd;
    for (int64_t k = 0; k < rk; ++k) sd.inserted_window_dims.push_back(k), sd.scatter_dims_to_operand_dims.push_back(k);
    sd.index_vector_dim = rk + 1;
    return {b.scatter(zeros, b.concatenate(parts, rk + 1), g, sd, ReduceKind::Sum)};
  });
  // reflection_pad{1,2,3}d / replication_pad{1,2,3}d (self, padding) and their backward (grad_output, self, padding):
  // padding pairs start at the last dimension; negative pads crop.
  for (bool reflect : {true, false})
    for (int nd = 1; nd <= 3; ++nd) {
      std::string base = std::string("aten::") + (reflect ? "reflection_pad" : "replication_pad") + std::to_string(nd) + "d";
      addReal(r, base, [reflect, nd](Context& ctx) -> std::vector<Value> {
        Builder& b = ctx.b;
        Value x = ctx.tensor(0);
        if (reflect && x.dtype() == DType::Pred) ctx.fail("reflection padding of a bool tensor (CPU rejects it)");
        const auto& pad = ctx.toInts(1);
        for (int i = 0; i < nd; ++i) {
          int64_t d = x.rank() - 1 - i;
          x = takeAlong(b, x, d, padIndex(x.shape()[d], pad[2 * i], pad[2 * i + 1], reflect));
        }
        return {x};
      });
      addReal(r, base + "_backward", [reflect, nd](Context& ctx) -> std::vector<Value> {
        Builder& b = ctx.b;
        Value g = ctx.tensor(0);
        const Shape in = ctx.tensor(1).shape();
        const auto& pad = ctx.toInts(2);
        for (int i = nd - 1; i >= 0; --i) {
          int64_t d = g.rank() - 1 - i;
          g = scatterAddAlong(b, g, d, padIndex(in[d], pad[2 * i], pad[2 * i + 1], reflect), in[d]);
        }
        return {g};
      });
    }
  // channel_shuffle(self, groups): (N, g, C/g, ...) -> (N, C/g, g, ...)
  for (const char* op : {"aten::channel_shuffle", "aten::native_channel_shuffle"})
    addReal(r, op, [](Context& ctx) -> std::vector<Value> {
      Builder& b = ctx.b;
      Value x = ctx.tensor(0);
      int64_t g = ctx.toInt(1);
      if (x.rank() < 2 || x.type.numel() == 0 || g <= 0) return {x};
      int64_t c = x.shape()[1];
      Shape s = x.shape();
      Shape split = {s[0], g, c / g};
      split.insert(split.end(), s.begin() + 2, s.end());
      std::vector<int64_t> perm = {0, 2, 1};
      for (int64_t k = 3; k < int64_t(split.size()); ++k) perm.push_back(k);
      return {b.reshape(b.transpose(b.reshape(x, split), perm), s)};
    });
  // masked_scatter(self, mask, source): the k-th true element of the (broadcast) mask takes source's k-th element.
  Rule masked_scatter;
  masked_scatter.op = "aten::masked_scatter";
  // a non-bool mask is an error in PyTorch: declined, so the CPU kernel raises it
  masked_scatter.accepts = [](const Context& ctx) { return realDTypes(ctx) && ctx.tensor(1).dtype() == DType::Pred; };
  masked_scatter.fn = [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Shape shape = broadcastShapes({ctx.tensor(0).shape(), ctx.tensor(1).shape()});
    Value self = b.broadcastTo(ctx.tensor(0), shape);
    Value mask = b.broadcastTo(ctx.tensor(1), shape);
    if (mask.dtype() != DType::Pred) mask = b.compare(mask, b.zerosLike(mask), Cmp::NE);
    Value src = ctx.tensor(2);
    int64_t n = self.type.numel(), ns = src.type.numel();
    if (n == 0 || ns == 0) return {self};
    Value flat = b.convert(b.reshape(mask, {n}), DType::S64);
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
  };
  r.add(std::move(masked_scatter));
  addReal(r, "aten::flip", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    std::vector<int64_t> dims = normDims(ctx, ctx.toInts(1), x.rank());
    return {dims.empty() ? x : ctx.b.reverse(x, dims)};
  });
  // roll(self, shifts, dims=[])
  addReal(r, "aten::roll", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    const auto& shifts = ctx.toInts(1);
    std::vector<int64_t> dims = ctx.has(2) ? ctx.toInts(2) : std::vector<int64_t>{};
    auto roll1 = [&](Value v, int64_t shift, int64_t d) {
      int64_t n = v.shape()[d];
      if (n == 0) return v;
      int64_t s = ((shift % n) + n) % n;
      if (s == 0) return v;
      return b.concatenate({b.sliceInDim(v, n - s, n, 1, d), b.sliceInDim(v, 0, n - s, 1, d)}, d);
    };
    if (dims.empty()) {
      Value flat = b.reshape(x, {x.type.numel()});
      return {b.reshape(roll1(flat, shifts.at(0), 0), x.shape())};
    }
    if (dims.size() != shifts.size()) ctx.fail("shifts and dims must have the same length");
    Value v = x;
    for (size_t k = 0; k < dims.size(); ++k) v = roll1(v, shifts[k], normDim(ctx, dims[k], x.rank()));
    return {v};
  });
  for (bool lower : {true, false}) {
    addReal(r, lower ? "aten::tril" : "aten::triu", [lower](Context& ctx) -> std::vector<Value> {
      Builder& b = ctx.b;
      Value x = ctx.tensor(0);
      if (x.rank() < 2) ctx.fail("expected a tensor with at least 2 dimensions");
      int64_t diag = ctx.has(1) ? ctx.toInt(1) : 0;
      return {b.select(triMask(b, x.shape(), diag, lower), x, b.zerosLike(x))};
    });
  }
  // repeat(self, repeats)
  addReal(r, "aten::repeat", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    const auto& reps = ctx.toInts(1);
    int64_t n = int64_t(reps.size());
    if (n < x.rank()) ctx.fail("repeats must have at least as many entries as the tensor has dimensions");
    Shape padded(n - x.rank(), 1);
    padded.insert(padded.end(), x.shape().begin(), x.shape().end());
    Value v = b.reshape(x, padded);
    Shape big, out;
    std::vector<int64_t> map;
    for (int64_t d = 0; d < n; ++d) {
      big.push_back(reps[d]);
      big.push_back(padded[d]);
      map.push_back(2 * d + 1);
      out.push_back(reps[d] * padded[d]);
    }
    return {b.reshape(b.broadcastInDim(v, big, map), out)};
  });
  // sort(self, dim=-1, descending=False); sort.stable(self, *, stable, dim=-1, descending=False)
  addReal(r, "aten::sort", [](Context& ctx) {
    return sortRule(ctx, ctx.has(1) ? ctx.toInt(1) : -1, ctx.has(2) && ctx.toBool(2));
  });
  addReal(r, "aten::sort.stable", [](Context& ctx) {
    return sortRule(ctx, ctx.has(2) ? ctx.toInt(2) : -1, ctx.has(3) && ctx.toBool(3));
  });
  // topk(self, k, dim=-1, largest=True, sorted=True)
  addReal(r, "aten::topk", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    if (x.dtype() == DType::Pred) ctx.fail("topk of a bool tensor (PyTorch CPU rejects it)");
    int64_t k = ctx.toInt(1);
    bool largest = !ctx.has(3) || ctx.toBool(3);
    auto res = sortRule(ctx, ctx.has(2) ? ctx.toInt(2) : -1, largest);
    if (x.rank() == 0) return res;
    int64_t dim = normDim(ctx, ctx.has(2) ? ctx.toInt(2) : -1, x.rank());
    return {b.sliceInDim(res[0], 0, k, 1, dim), b.sliceInDim(res[1], 0, k, 1, dim)};
  });

  // ---- backward of slicing / scatter into slices ----
  // slice_backward(grad_output, input_sizes, dim, start, end, step)
  addReal(r, "aten::slice_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value g = ctx.tensor(0);
    const auto& sizes = ctx.toInts(1);
    int64_t dim = normDim(ctx, ctx.toInt(2), int64_t(sizes.size()));
    auto [start, end] = normSlice(ctx, 3, 4, sizes[dim]);
    (void)end;
    return {unslice(b, g, b.constant(0, g.dtype()), dim, sizes[dim], start, ctx.toInt(5))};
  });
  // select_backward(grad_output, input_sizes, dim, index)
  addReal(r, "aten::select_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value g = ctx.tensor(0);
    const auto& sizes = ctx.toInts(1);
    int64_t dim = normDim(ctx, ctx.toInt(2), int64_t(sizes.size()));
    int64_t index = ctx.toInt(3);
    if (index < 0) index += sizes[dim];
    Shape s = g.shape();
    s.insert(s.begin() + dim, 1);
    return {unslice(b, b.reshape(g, s), b.constant(0, g.dtype()), dim, sizes[dim], index, 1)};
  });
  // slice_scatter(self, src, dim=0, start=None, end=None, step=1)
  addReal(r, "aten::slice_scatter", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0), src = b.convert(ctx.tensor(1), ctx.tensor(0).dtype());
    int64_t dim = normDim(ctx, ctx.has(2) ? ctx.toInt(2) : 0, self.rank());
    auto [start, end] = normSlice(ctx, 3, 4, self.shape()[dim]);
    (void)end;
    int64_t step = ctx.has(5) ? ctx.toInt(5) : 1;
    Value padded = unslice(b, src, b.constant(0, self.dtype()), dim, self.shape()[dim], start, step);
    Value mask = unslice(b, b.constantF(1, DType::Pred, src.shape()), b.constant(0, DType::Pred), dim,
                         self.shape()[dim], start, step);
    return {b.select(mask, padded, self)};
  });
  // select_scatter(self, src, dim, index)
  addReal(r, "aten::select_scatter", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0), src = b.convert(ctx.tensor(1), ctx.tensor(0).dtype());
    int64_t dim = normDim(ctx, ctx.toInt(2), self.rank());
    int64_t index = ctx.toInt(3);
    if (index < 0) index += self.shape()[dim];
    Shape s = src.shape();
    s.insert(s.begin() + dim, 1);
    src = b.reshape(src, s);
    Value padded = unslice(b, src, b.constant(0, self.dtype()), dim, self.shape()[dim], index, 1);
    Value mask = unslice(b, b.constantF(1, DType::Pred, s), b.constant(0, DType::Pred), dim, self.shape()[dim], index, 1);
    return {b.select(mask, padded, self)};
  });

  // ---- functional copies of views (compiled graphs); the result type comes from ctx.outputs ----
  auto reshapeToOut = [](Context& ctx) -> std::vector<Value> {
    return {ctx.b.reshape(ctx.tensor(0), ctx.outputs.at(0).shape)};
  };
  for (const char* op : {"aten::view_copy", "aten::_reshape_copy", "aten::unsqueeze_copy", "aten::squeeze_copy",
                         "aten::squeeze_copy.dim", "aten::squeeze_copy.dims", "aten::_unsafe_view"})
    addReal(r, op, reshapeToOut);
  addReal(r, "aten::expand_copy", [](Context& ctx) -> std::vector<Value> {
    return {ctx.b.broadcastTo(ctx.tensor(0), ctx.outputs.at(0).shape)};
  });
  addReal(r, "aten::permute_copy", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    std::vector<int64_t> perm;
    for (int64_t d : ctx.toInts(1)) perm.push_back(normDim(ctx, d, x.rank()));
    return {ctx.b.transpose(x, perm)};
  });
  addReal(r, "aten::transpose_copy.int", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    if (x.rank() < 2) return {x};
    std::vector<int64_t> perm = range(0, x.rank());
    std::swap(perm[normDim(ctx, ctx.toInt(1), x.rank())], perm[normDim(ctx, ctx.toInt(2), x.rank())]);
    return {ctx.b.transpose(x, perm)};
  });
  addReal(r, "aten::t_copy", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    return {x.rank() < 2 ? x : ctx.b.transpose(x, {1, 0})};
  });
  // slice_copy.Tensor(self, dim=0, start=None, end=None, step=1)
  addReal(r, "aten::slice_copy.Tensor", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    int64_t dim = normDim(ctx, ctx.has(1) ? ctx.toInt(1) : 0, x.rank());
    auto [start, end] = normSlice(ctx, 2, 3, x.shape()[dim]);
    int64_t step = ctx.has(4) ? ctx.toInt(4) : 1;
    return {ctx.b.sliceInDim(x, start, end, step, dim)};
  });
  // select_copy.int(self, dim, index)
  addReal(r, "aten::select_copy.int", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    int64_t dim = normDim(ctx, ctx.toInt(1), x.rank());
    int64_t index = ctx.toInt(2);
    if (index < 0) index += x.shape()[dim];
    Value s = ctx.b.sliceInDim(x, index, index + 1, 1, dim);
    Shape out = x.shape();
    out.erase(out.begin() + dim);
    return {ctx.b.reshape(s, out)};
  });
}

}  // namespace torch_tpu::lowering
