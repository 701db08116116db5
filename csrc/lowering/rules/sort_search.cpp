// Sort and search family: sort, topk, searchsorted/bucketize, isin.
#include <limits>

#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

using shlo::Cmp;
using shlo::isFloat;

std::vector<Value> sortRule(Context& ctx, int64_t dim, bool descending) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  if (x.rank() == 0) return {x, b.constantInt(0, DType::S64)};
  dim = normDim(ctx, dim, x.rank());
  Value key = x.dtype() == DType::Pred ? b.convert(x, DType::U8) : x;
  auto res = b.sort({key, b.iota({DType::S64, x.shape()}, dim)}, dim, descending, /*stable=*/true);
  return {b.convert(res[0], x.dtype()), res[1]};
}

// topk of a floating tensor through chlo.top_k (XLA's TopK: a partial sort per row, far cheaper on the CPU
// plugin than the full sort for k much smaller than the row). Its order is total over the float bits: NaN are
// made positive first (PyTorch ranks every NaN above +inf), and the k smallest are the k largest of -x. Ties
// keep the lower index first, one of the orders PyTorch allows.
std::vector<Value> topkPartial(Context& ctx, Value x, int64_t k, int64_t dim, bool largest) {
  Builder& b = ctx.b;
  int64_t r = x.rank();
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < r; ++i)
    if (i != dim) perm.push_back(i);
  perm.push_back(dim);
  std::vector<int64_t> back(static_cast<size_t>(r), 0);
  for (int64_t i = 0; i < r; ++i) back[size_t(perm[size_t(i)])] = i;
  Value xf = b.transpose(b.convert(x, DType::F32), perm);
  Value nan = b.constantF(std::numeric_limits<double>::quiet_NaN(), DType::F32, xf.shape());
  xf = b.select(b.compare(xf, xf, Cmp::NE), nan, xf);
  if (!largest) xf = b.neg(xf);
  Shape rs = xf.shape();
  rs.back() = k;
  std::vector<Value> res = b.genericOp("chlo.top_k", {xf}, "k = " + std::to_string(k) + " : i64",
                                       {TensorType{DType::F32, rs}, TensorType{DType::S32, rs}});
  Value v = largest ? res[0] : b.neg(res[0]);
  return {b.transpose(b.convert(v, x.dtype()), back), b.transpose(b.convert(res[1], DType::S64), back)};
}

}  // namespace

void populateSortSearch(Registry& r) {
  // sort(self, dim=-1, descending=False); sort.stable(self, *, stable, dim=-1, descending=False)
  r.add("aten::sort", [](Context& ctx) {
    return sortRule(ctx, ctx.has(1) ? ctx.toInt(1) : -1, ctx.has(2) && ctx.toBool(2));
  }).accepts(realDTypes).dtypes(kWideUnsigned);
  r.add("aten::sort.stable", [](Context& ctx) {
    return sortRule(ctx, ctx.has(2) ? ctx.toInt(2) : -1, ctx.has(3) && ctx.toBool(3));
  }).accepts(realDTypes).dtypes(kWideUnsigned);
  // topk(self, k, dim=-1, largest=True, sorted=True)
  r.add("aten::topk", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    int64_t k = ctx.toInt(1);
    bool largest = !ctx.has(3) || ctx.toBool(3);
    if (x.rank() > 0 && k > 0 && isFloat(x.dtype()) && x.dtype() != DType::F64) {
      int64_t dim = normDim(ctx, ctx.has(2) ? ctx.toInt(2) : -1, x.rank());
      if (k <= x.shape()[size_t(dim)]) return topkPartial(ctx, x, k, dim, largest);
    }
    auto res = sortRule(ctx, ctx.has(2) ? ctx.toInt(2) : -1, largest);
    if (x.rank() == 0) return res;
    int64_t dim = normDim(ctx, ctx.has(2) ? ctx.toInt(2) : -1, x.rank());
    return {b.sliceInDim(res[0], 0, k, 1, dim), b.sliceInDim(res[1], 0, k, 1, dim)};
    // PyTorch CPU has no bool topk: declined, and its kernel raises
  }).accepts([](const Context& ctx) { return realDTypes(ctx) && ctx.tensor(0).dtype() != DType::Pred; });
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
    const Shape vs = v.shape();
    const int64_t r = static_cast<int64_t>(vs.size());
    Shape s1 = vs;
    s1.push_back(1);
    // The boundary at position idx (shape of v) of each value's row: a 1-d sequence serves every value; an N-d one
    // is read in the row of the value's leading indices.
    auto boundaryAt = [&](Value idx) -> Value {
      Builder::GatherDims gd;
      if (seq.rank() <= 1) {
        gd.collapsed_slice_dims = {0};
        gd.start_index_map = {0};
        gd.index_vector_dim = r;
        return b.gather(b.reshape(seq, {n}), b.reshape(idx, s1), gd, {1}, vs);
      }
      std::vector<Value> parts;
      for (int64_t k = 0; k < r; ++k) {
        gd.collapsed_slice_dims.push_back(k);
        gd.start_index_map.push_back(k);
        parts.push_back(b.reshape(k == r - 1 ? idx : b.iota({DType::S64, vs}, k), s1));
      }
      gd.index_vector_dim = r;
      return b.gather(seq, b.concatenate(parts, r), gd, std::vector<int64_t>(size_t(r), 1), vs);
    };
    return binarySearch(b, boundaryAt, v, n, right);
  };
  // PyTorch CPU has no bool searchsorted: declined, and its kernel raises
  for (const char* op : {"aten::searchsorted.Tensor", "aten::searchsorted.Scalar"})
    r.add(op, [search](Context& ctx) -> std::vector<Value> {
      bool right = (ctx.has(3) && ctx.toBool(3)) || (ctx.has(4) && ctx.arg(4).s == "right");
      Value res = search(ctx, 0, 1, right, 5);
      return {ctx.b.convert(res, ctx.has(2) && ctx.toBool(2) ? DType::S32 : DType::S64)};
    }).accepts([](const Context& ctx) {
      // side 'left' or 'right', not opposite to right=True; a sorter of int64 indices shaped as the sequence.
      // Otherwise declined, and the CPU kernel raises PyTorch's error.
      if (ctx.has(4) && ctx.arg(4).s != "left" && ctx.arg(4).s != "right") return false;
      if (ctx.has(4) && ctx.arg(4).s == "left" && ctx.has(3) && ctx.toBool(3)) return false;
      if (ctx.has(5) && (ctx.tensor(5).dtype() != DType::S64 || ctx.tensor(5).shape() != ctx.tensor(0).shape()))
        return false;
      return realDTypes(ctx) && resultTypeOf(ctx, {0, 1}) != DType::Pred;
    });
  for (const char* op : {"aten::bucketize.Tensor", "aten::bucketize.Scalar"}) {
    // boundaries must be 1-d and the values not bool: otherwise declined, and the CPU kernel raises PyTorch's error
    r.add(op, [search](Context& ctx) -> std::vector<Value> {
      Value res = search(ctx, 1, 0, ctx.has(3) && ctx.toBool(3), -1);
      return {ctx.b.convert(res, ctx.has(2) && ctx.toBool(2) ? DType::S32 : DType::S64)};
    }).accepts([](const Context& ctx) {
      return realDTypes(ctx) && ctx.tensor(1).rank() == 1 && resultTypeOf(ctx, {0, 1}) != DType::Pred;
    });
  }
  // isin(elements, test_elements, *, assume_unique, invert): every element compared with every test element.
  for (const char* op : {"aten::isin.Tensor_Tensor", "aten::isin.Tensor_Scalar", "aten::isin.Scalar_Tensor"}) {
    r.add(op, [](Context& ctx) -> std::vector<Value> {
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
    }).accepts(realDTypes);
  }
}

}  // namespace torch_tpu::lowering
