// Data-movement family: the ops that copy data into a new layout without being views: cat/stack, padding
// (constant, reflection, replication, and the backward of the last two), flip, roll, tril/triu, repeat,
// channel_shuffle, the backward of slicing and unfold (slice_backward, select_backward, slice_scatter, select_scatter,
// unfold_backward), and the functional *_copy forms of views that compiled graphs contain.
//
// True view ops (view, transpose, expand, ...) are NOT here: eager mode implements them as aliases, and views.cpp
// lowers them for graphs.
#include <algorithm>

#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

using shlo::Cmp;

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

void populateMovement(Registry& r) {
  // cat(tensors, dim): legacy 1-d empty tensors are skipped; dtypes promote.
  r.add("aten::cat", [](Context& ctx) -> std::vector<Value> {
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
  }).dtypes(kRestricted);
  r.add("aten::stack", [](Context& ctx) -> std::vector<Value> {
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
  }).dtypes(kRestricted);
  // constant_pad_nd(self, pad, value=0): pairs from the last dimension backwards; negative pads crop.
  r.add("aten::constant_pad_nd", [](Context& ctx) -> std::vector<Value> {
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
  }).dtypes(kFloat8 | kWideUnsigned | kComplex);
  // reflection_pad{1,2,3}d / replication_pad{1,2,3}d (self, padding) and their backward (grad_output, self, padding):
  // padding pairs start at the last dimension; negative pads crop.
  for (bool reflect : {true, false})
    for (int nd = 1; nd <= 3; ++nd) {
      std::string base = std::string("aten::") + (reflect ? "reflection_pad" : "replication_pad") + std::to_string(nd) + "d";
      r.add(base, [reflect, nd](Context& ctx) -> std::vector<Value> {
        Builder& b = ctx.b;
        Value x = ctx.tensor(0);
        const auto& pad = ctx.toInts(1);
        for (int i = 0; i < nd; ++i) {
          int64_t d = x.rank() - 1 - i;
          x = takeAlong(b, x, d, padIndex(x.shape()[d], pad[2 * i], pad[2 * i + 1], reflect));
        }
        return {x};
        // PyTorch CPU has no bool reflection padding: declined, and its kernel raises
      }).accepts([reflect](const Context& ctx) { return realDTypes(ctx) && !(reflect && ctx.tensor(0).dtype() == DType::Pred); })
          .complex();
      r.add(base + "_backward", [reflect, nd](Context& ctx) -> std::vector<Value> {
        Builder& b = ctx.b;
        Value g = ctx.tensor(0);
        const Shape in = ctx.tensor(1).shape();
        const auto& pad = ctx.toInts(2);
        for (int i = nd - 1; i >= 0; --i) {
          int64_t d = g.rank() - 1 - i;
          g = scatterAddAlong(b, g, d, padIndex(in[d], pad[2 * i], pad[2 * i + 1], reflect), in[d]);
        }
        return {g};
      }).accepts(realDTypes).complex();
    }
  r.add("aten::flip", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    std::vector<int64_t> dims = normDims(ctx, ctx.toInts(1), x.rank());
    return {dims.empty() ? x : ctx.b.reverse(x, dims)};
  }).complex();
  // roll(self, shifts, dims=[])
  r.add("aten::roll", [](Context& ctx) -> std::vector<Value> {
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
  }).dtypes(kRestricted);
  for (bool lower : {true, false}) {
    r.add(lower ? "aten::tril" : "aten::triu", [lower](Context& ctx) -> std::vector<Value> {
      Builder& b = ctx.b;
      Value x = ctx.tensor(0);
      if (x.rank() < 2) ctx.fail("expected a tensor with at least 2 dimensions");
      int64_t diag = ctx.has(1) ? ctx.toInt(1) : 0;
      return {b.select(triMask(b, x.shape(), diag, lower), x, b.zerosLike(x))};
    }).accepts(realDTypes).complex();
  }
  // repeat(self, repeats)
  r.add("aten::repeat", [](Context& ctx) -> std::vector<Value> {
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
  }).dtypes(kRestricted);
  // channel_shuffle(self, groups): (N, g, C/g, ...) -> (N, C/g, g, ...)
  for (const char* op : {"aten::channel_shuffle", "aten::native_channel_shuffle"})
    r.add(op, [](Context& ctx) -> std::vector<Value> {
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
    }).accepts(realDTypes).complex();

  // ---- backward of slicing / scatter into slices ----
  // slice_backward(grad_output, input_sizes, dim, start, end, step)
  r.add("aten::slice_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value g = ctx.tensor(0);
    const auto& sizes = ctx.toInts(1);
    int64_t dim = normDim(ctx, ctx.toInt(2), int64_t(sizes.size()));
    auto [start, end] = normSlice(ctx, 3, 4, sizes[dim]);
    (void)end;
    return {unslice(b, g, b.constant(0, g.dtype()), dim, sizes[dim], start, ctx.toInt(5))};
  }).complex();
  // select_backward(grad_output, input_sizes, dim, index)
  r.add("aten::select_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value g = ctx.tensor(0);
    const auto& sizes = ctx.toInts(1);
    int64_t dim = normDim(ctx, ctx.toInt(2), int64_t(sizes.size()));
    int64_t index = ctx.toInt(3);
    if (index < 0) index += sizes[dim];
    Shape s = g.shape();
    s.insert(s.begin() + dim, 1);
    return {unslice(b, b.reshape(g, s), b.constant(0, g.dtype()), dim, sizes[dim], index, 1)};
  }).complex();
  // slice_scatter(self, src, dim=0, start=None, end=None, step=1)
  r.add("aten::slice_scatter", [](Context& ctx) -> std::vector<Value> {
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
  }).complex();
  // select_scatter(self, src, dim, index)
  r.add("aten::select_scatter", [](Context& ctx) -> std::vector<Value> {
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
  }).complex();
  // unfold_backward(grad_in, input_sizes, dim, size, step): window gradients summed back into place.
  r.add("aten::unfold_backward", [](Context& ctx) -> std::vector<Value> {
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
  }).accepts(realDTypes).complex();

  // ---- functional copies of views (compiled graphs); the result type comes from ctx.outputs ----
  auto reshapeToOut = [](Context& ctx) -> std::vector<Value> {
    return {ctx.b.reshape(ctx.tensor(0), ctx.outputs.at(0).shape)};
  };
  for (const char* op : {"aten::view_copy", "aten::_reshape_copy", "aten::unsqueeze_copy", "aten::squeeze_copy",
                         "aten::squeeze_copy.dim", "aten::squeeze_copy.dims"})
    r.add(op, reshapeToOut).accepts(realDTypes).dtypes(kRestricted);
  // In eager mode _unsafe_view is a view (PyTorch's kernel).
  r.add("aten::_unsafe_view", reshapeToOut).accepts(realDTypes).graphOnly().dtypes(kRestricted);
  r.add("aten::expand_copy", [](Context& ctx) -> std::vector<Value> {
    return {ctx.b.broadcastTo(ctx.tensor(0), ctx.outputs.at(0).shape)};
  }).dtypes(kRestricted);
  r.add("aten::permute_copy", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    std::vector<int64_t> perm;
    for (int64_t d : ctx.toInts(1)) perm.push_back(normDim(ctx, d, x.rank()));
    return {ctx.b.transpose(x, perm)};
  }).dtypes(kRestricted);
  r.add("aten::transpose_copy.int", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    if (x.rank() < 2) return {x};
    std::vector<int64_t> perm = range(0, x.rank());
    std::swap(perm[normDim(ctx, ctx.toInt(1), x.rank())], perm[normDim(ctx, ctx.toInt(2), x.rank())]);
    return {ctx.b.transpose(x, perm)};
  }).dtypes(kRestricted);
  r.add("aten::t_copy", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    return {x.rank() < 2 ? x : ctx.b.transpose(x, {1, 0})};
  }).dtypes(kRestricted);
  // slice_copy.Tensor(self, dim=0, start=None, end=None, step=1)
  r.add("aten::slice_copy.Tensor", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    int64_t dim = normDim(ctx, ctx.has(1) ? ctx.toInt(1) : 0, x.rank());
    auto [start, end] = normSlice(ctx, 2, 3, x.shape()[dim]);
    int64_t step = ctx.has(4) ? ctx.toInt(4) : 1;
    return {ctx.b.sliceInDim(x, start, end, step, dim)};
  }).dtypes(kRestricted);
  // narrow_copy(self, dim, start, length)
  r.add("aten::narrow_copy", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    int64_t dim = normDim(ctx, ctx.toInt(1), x.rank());
    int64_t size = x.shape()[dim], start = ctx.toInt(2), length = ctx.toInt(3);
    if (start < 0) start += size;
    if (start < 0 || start > size || length < 0 || start + length > size) ctx.fail("narrow_copy out of range");
    return {ctx.b.sliceInDim(x, start, start + length, 1, dim)};
  }).dtypes(kRestricted);
  // select_copy.int(self, dim, index)
  r.add("aten::select_copy.int", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    int64_t dim = normDim(ctx, ctx.toInt(1), x.rank());
    int64_t index = ctx.toInt(2);
    if (index < 0) index += x.shape()[dim];
    Value s = ctx.b.sliceInDim(x, index, index + 1, 1, dim);
    Shape out = x.shape();
    out.erase(out.begin() + dim);
    return {ctx.b.reshape(s, out)};
  }).dtypes(kRestricted);
}

}  // namespace torch_tpu::lowering
