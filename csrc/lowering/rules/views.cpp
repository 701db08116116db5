// Views family: PyTorch's view ops (view, permute, expand, slice, select, as_strided, split, ...) as values.
//
// Eager mode implements views natively as aliases of a storage (csrc/eager/views.cpp); these rules serve
// functionalized graphs only (torch.compile), where a view is just a new value computed from its base. Every rule
// here is registered with Rule::eager = false. Result shapes come from ctx.outputs (PyTorch's own meta results), so
// -1 entries, implicit sizes and squeezed dims need no re-derivation.
#include <algorithm>

#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

std::vector<int64_t> iotaVec(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

std::vector<int64_t> contiguousStrides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t d = int64_t(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * std::max<int64_t>(s[d + 1], 1);
  return st;
}

// out[i...] = flat(x)[offset + sum_d i_d * strides[d]]: a strided read of x's row-major elements.
Value stridedRead(Builder& b, Value x, const Shape& sizes, const std::vector<int64_t>& strides, int64_t offset) {
  const int64_t n = x.type.numel();
  Value flat = b.reshape(x, {n});
  // A contiguous range: one slice.
  if (strides == contiguousStrides(sizes)) {
    int64_t cnt = numel(sizes);
    return b.reshape(b.sliceInDim(flat, offset, offset + cnt, 1, 0), sizes);
  }
  TensorType it{DType::S64, sizes};
  Value idx = b.constantF(double(offset), DType::S64, sizes);
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1 || strides[d] == 0) continue;
    Value term = b.iota(it, static_cast<int64_t>(d));
    if (strides[d] != 1) term = b.mul(term, b.constantF(double(strides[d]), DType::S64, sizes));
    idx = b.add(idx, term);
  }
  Shape ishape = sizes;
  ishape.push_back(1);
  idx = b.reshape(idx, ishape);
  Builder::GatherDims gd;
  gd.offset_dims = {};
  gd.collapsed_slice_dims = {0};
  gd.start_index_map = {0};
  gd.index_vector_dim = static_cast<int64_t>(sizes.size());
  return b.gather(flat, idx, gd, {1}, sizes);
}

// Consecutive pieces of x along dim with the given lengths.
std::vector<Value> pieces(Builder& b, Value x, int64_t dim, const std::vector<int64_t>& lens) {
  std::vector<Value> out;
  int64_t at = 0;
  for (int64_t len : lens) {
    out.push_back(b.sliceInDim(x, at, at + len, 1, dim));
    at += len;
  }
  return out;
}

int64_t dimArg(const Context& ctx, size_t i, int64_t rank) { return normDim(ctx, ctx.has(i) ? ctx.toInt(i) : 0, rank); }

}  // namespace

void populateViews(Registry& r) {
  auto reshapeToOut = [](Context& ctx) -> std::vector<Value> {
    return {ctx.b.reshape(ctx.tensor(0), ctx.outputs.at(0).shape)};
  };
  for (const char* op : {"aten::view", "aten::reshape", "aten::_reshape_alias", "aten::squeeze", "aten::squeeze.dim",
                         "aten::squeeze.dims", "aten::unsqueeze", "aten::flatten.using_ints", "aten::unflatten.int",
                         "aten::view_as"})
    r.add(op, reshapeToOut).graphOnly().dtypes(kRestricted);
  auto identity = [](Context& ctx) -> std::vector<Value> { return {ctx.tensor(0)}; };
  // In a graph a value is a tensor's logical value: conj() is the conjugate's, resolve_conj/resolve_neg change
  // nothing.
  for (const char* op : {"aten::detach", "aten::lift_fresh", "aten::lift_fresh_copy", "aten::resolve_conj",
                         "aten::resolve_neg", "aten::contiguous"})
    r.add(op, identity).graphOnly().dtypes(kRestricted);
  auto conjugate = [](Context& ctx) -> std::vector<Value> { return {ctx.b.conj(ctx.tensor(0))}; };
  r.add("aten::_conj", conjugate).graphOnly().complex();
  r.add("aten::conj", conjugate).graphOnly().complex();
  r.add("aten::_neg_view", [](Context& ctx) -> std::vector<Value> { return {ctx.b.neg(ctx.tensor(0))}; }).graphOnly().complex();
  // view_as_real: [..., 2] of (real, imag); view_as_complex: back.
  r.add("aten::view_as_real", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    Shape one = x.shape();
    one.push_back(1);
    return {b.concatenate({b.reshape(b.realPart(x), one), b.reshape(b.imagPart(x), one)}, x.rank())};
  }).graphOnly().complex();
  r.add("aten::view_as_complex", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    const Shape& out = ctx.outputs.at(0).shape;
    const int64_t last = x.rank() - 1;
    return {b.complex(b.reshape(b.sliceInDim(x, 0, 1, 1, last), out), b.reshape(b.sliceInDim(x, 1, 2, 1, last), out))};
  }).accepts([](const Context& ctx) {
    DType t = ctx.tensor(0).dtype();
    return t == DType::F32 || t == DType::F64;
  }).graphOnly().complex();

  auto expandToOut = [](Context& ctx) -> std::vector<Value> {
    return {ctx.b.broadcastTo(ctx.tensor(0), ctx.outputs.at(0).shape)};
  };
  r.add("aten::expand", expandToOut).graphOnly().dtypes(kRestricted);
  r.add("aten::expand_as", expandToOut).graphOnly().dtypes(kRestricted);

  r.add("aten::permute", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    std::vector<int64_t> perm;
    for (int64_t d : ctx.toInts(1)) perm.push_back(normDim(ctx, d, x.rank()));
    return {ctx.b.transpose(x, perm)};
  }).graphOnly().dtypes(kRestricted);
  auto swap = [](Context& ctx, Value x, int64_t a, int64_t c) -> Value {
    if (x.rank() < 2) return x;
    std::vector<int64_t> perm = iotaVec(x.rank());
    std::swap(perm[normDim(ctx, a, x.rank())], perm[normDim(ctx, c, x.rank())]);
    return ctx.b.transpose(x, perm);
  };
  r.add("aten::transpose.int", [swap](Context& ctx) -> std::vector<Value> {
    return {swap(ctx, ctx.tensor(0), ctx.toInt(1), ctx.toInt(2))};
  }).graphOnly().dtypes(kRestricted);
  r.add("aten::swapaxes", [swap](Context& ctx) -> std::vector<Value> {
    return {swap(ctx, ctx.tensor(0), ctx.toInt(1), ctx.toInt(2))};
  }).graphOnly().dtypes(kRestricted);
  r.add("aten::t", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    return {x.rank() < 2 ? x : ctx.b.transpose(x, {1, 0})};
  }).graphOnly().dtypes(kRestricted);
  r.add("aten::movedim.int", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    int64_t src = normDim(ctx, ctx.toInt(1), x.rank()), dst = normDim(ctx, ctx.toInt(2), x.rank());
    std::vector<int64_t> rest;
    for (int64_t d = 0; d < x.rank(); ++d)
      if (d != src) rest.push_back(d);
    rest.insert(rest.begin() + dst, src);
    return {ctx.b.transpose(x, rest)};
  }).graphOnly().dtypes(kRestricted);

  // slice.Tensor(self, dim=0, start=None, end=None, step=1)
  r.add("aten::slice.Tensor", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    int64_t dim = dimArg(ctx, 1, x.rank());
    int64_t size = x.shape()[dim];
    int64_t start = ctx.has(2) ? ctx.toInt(2) : 0, end = ctx.has(3) ? ctx.toInt(3) : size;
    if (start < 0) start += size;
    if (end < 0) end += size;
    start = std::clamp<int64_t>(start, 0, size);
    end = std::clamp<int64_t>(end, start, size);
    int64_t step = ctx.has(4) ? ctx.toInt(4) : 1;
    return {ctx.b.sliceInDim(x, start, end, step, dim)};
  }).graphOnly().dtypes(kRestricted);
  // narrow(self, dim, start, length)
  r.add("aten::narrow", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    int64_t dim = dimArg(ctx, 1, x.rank());
    int64_t start = ctx.toInt(2);
    if (start < 0) start += x.shape()[dim];
    return {ctx.b.sliceInDim(x, start, start + ctx.toInt(3), 1, dim)};
  }).graphOnly().dtypes(kRestricted);
  // select.int(self, dim, index)
  r.add("aten::select.int", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    int64_t dim = dimArg(ctx, 1, x.rank());
    int64_t index = ctx.toInt(2);
    if (index < 0) index += x.shape()[dim];
    if (index < 0 || index >= x.shape()[dim]) ctx.fail("index out of range");
    return {ctx.b.reshape(ctx.b.sliceInDim(x, index, index + 1, 1, dim), ctx.outputs.at(0).shape)};
  }).graphOnly().dtypes(kRestricted);

  // as_strided(self, size, stride, storage_offset=None): strides over self's row-major elements.
  auto asStrided = [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    int64_t off = ctx.has(3) ? ctx.toInt(3) : 0;
    return {stridedRead(ctx.b, x, ctx.toInts(1), ctx.toInts(2), off)};
  };
  r.add("aten::as_strided", asStrided).graphOnly().dtypes(kRestricted);
  r.add("aten::as_strided_copy", asStrided).graphOnly().dtypes(kRestricted);
  // diagonal(self, offset=0, dim1=0, dim2=1)
  r.add("aten::diagonal", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    int64_t offset = ctx.has(1) ? ctx.toInt(1) : 0;
    int64_t d1 = normDim(ctx, ctx.has(2) ? ctx.toInt(2) : 0, x.rank());
    int64_t d2 = normDim(ctx, ctx.has(3) ? ctx.toInt(3) : 1, x.rank());
    std::vector<int64_t> st = contiguousStrides(x.shape());
    Shape sizes;
    std::vector<int64_t> strides;
    for (int64_t d = 0; d < x.rank(); ++d)
      if (d != d1 && d != d2) {
        sizes.push_back(x.shape()[d]);
        strides.push_back(st[d]);
      }
    int64_t start = offset >= 0 ? offset * st[d2] : -offset * st[d1];
    sizes.push_back(ctx.outputs.at(0).shape.back());
    strides.push_back(st[d1] + st[d2]);
    if (sizes.back() == 0) return {ctx.b.zeros(ctx.outputs.at(0))};
    return {stridedRead(ctx.b, x, sizes, strides, start)};
  }).graphOnly().dtypes(kRestricted);
  // unfold(self, dimension, size, step)
  r.add("aten::unfold", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    std::vector<int64_t> st = contiguousStrides(x.shape());
    const Shape& out = ctx.outputs.at(0).shape;
    if (x.rank() == 0) return {ctx.b.reshape(x, out)};
    int64_t dim = normDim(ctx, ctx.toInt(1), x.rank());
    std::vector<int64_t> strides = st;
    strides[dim] = st[dim] * ctx.toInt(3);
    strides.push_back(st[dim]);
    return {stridedRead(ctx.b, x, out, strides, 0)};
  }).graphOnly().dtypes(kRestricted);

  // ---- views with several results: consecutive pieces along `dim` (lengths from the result types) ----
  auto split = [](size_t dim_arg) {
    return [dim_arg](Context& ctx) -> std::vector<Value> {
      Value x = ctx.tensor(0);
      int64_t dim = dimArg(ctx, dim_arg, x.rank());
      std::vector<int64_t> lens;
      for (const auto& o : ctx.outputs) lens.push_back(o.shape.at(dim));
      return pieces(ctx.b, x, dim, lens);
    };
  };
  r.add("aten::split.Tensor", split(2)).graphOnly().dtypes(kRestricted);
  r.add("aten::split_with_sizes", split(2)).graphOnly().dtypes(kRestricted);
  r.add("aten::chunk", split(2)).graphOnly().dtypes(kRestricted);
  r.add("aten::tensor_split.sections", split(2)).graphOnly().dtypes(kRestricted);
  r.add("aten::unsafe_split.Tensor", split(2)).graphOnly().dtypes(kRestricted);
  r.add("aten::unsafe_split_with_sizes", split(2)).graphOnly().dtypes(kRestricted);
  // (the _copy forms are what functionalization leaves in higher-order-op bodies: scan, invoke_subgraph)
  r.add("aten::split_copy.Tensor", split(2)).graphOnly().dtypes(kRestricted);
  r.add("aten::split_with_sizes_copy", split(2)).graphOnly().dtypes(kRestricted);
  auto unbind = [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    int64_t dim = dimArg(ctx, 1, x.rank());
    std::vector<Value> out;
    for (int64_t i = 0; i < x.shape()[dim]; ++i)
      out.push_back(ctx.b.reshape(ctx.b.sliceInDim(x, i, i + 1, 1, dim), ctx.outputs.at(i).shape));
    return out;
  };
  r.add("aten::unbind.int", unbind).graphOnly().dtypes(kRestricted);
  r.add("aten::unbind_copy.int", unbind).graphOnly().dtypes(kRestricted);
}

}  // namespace torch_tpu::lowering
