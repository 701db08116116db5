// Reduction builders: reduce with a combiner, arg-max/arg-min (variadic reduce), reduce_window. Methods of
// shlo::Builder (builder.h).
#include <algorithm>
#include <limits>
#include <string>

#include "stablehlo/builder_impl.h"

namespace torch_tpu::shlo {

using namespace detail;

namespace {
Value identityOf(Builder& b, ReduceKind k, DType t) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (k) {
    case ReduceKind::Sum:
    case ReduceKind::Or:
    case ReduceKind::Xor:
      return b.constantInt(0, t);
    case ReduceKind::Prod:
      return b.constantInt(1, t);
    case ReduceKind::And:
      return b.constantInt(t == DType::Pred ? 1 : -1, t);  // all ones (wrapped for unsigned)
    case ReduceKind::Max:
      if (isFloat(t)) return b.constant(-inf, t);
      if (t == DType::Pred) return b.constantInt(0, t);
      if (isSigned(t)) return b.constantInt(std::numeric_limits<int64_t>::min() >> (64 - bitWidth(t)), t);
      return b.constantInt(0, t);
    case ReduceKind::Min:
      if (isFloat(t)) return b.constant(inf, t);
      if (t == DType::Pred) return b.constantInt(1, t);
      if (isSigned(t)) return b.constantInt(std::numeric_limits<int64_t>::max() >> (64 - bitWidth(t)), t);
      return b.constantInt(-1, t);  // wraps to the unsigned maximum
  }
  return b.constantInt(0, t);
}
}  // namespace

Value Builder::reduce(Value a, const std::vector<int64_t>& dims, ReduceKind kind) {
  impl_->check("reduce", a);
  checkDimsUnique("reduce", dims, a.rank(), "dimensions");
  const char* op = Impl::combinerOp("reduce", kind, a.dtype());  // validates dtype
  (void)op;
  if (dims.empty()) return a;
  Value init = identityOf(*this, kind, a.dtype());
  std::string region = impl_->combinerRegion("reduce", kind, a.dtype());
  std::vector<int64_t> sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  Shape out;
  for (int64_t i = 0; i < a.rank(); ++i)
    if (!contains(dims, i)) out.push_back(a.shape()[static_cast<size_t>(i)]);
  return impl_->emit("stablehlo.reduce", {a, init}, Attrs().array("dimensions", sorted), TensorType{a.dtype(), out},
                     region);
}

std::vector<Value> Builder::argReduce(Value a, Value indices, int64_t dim, bool is_max) {
  impl_->check("argReduce", a);
  impl_->check("argReduce", indices);
  if (dim < 0 || dim >= a.rank())
    fail("argReduce", "dimension " + std::to_string(dim) + " out of range for " + a.type.str());
  if (indices.shape() != a.shape() || !isInteger(indices.dtype()))
    fail("argReduce", "indices must be an integer tensor shaped like the values: values " + a.type.str() +
                          ", indices " + indices.type.str());
  requireDType("argReduce", a, kAll & ~kComplex);
  DType vt = a.dtype(), it = indices.dtype();
  Value vinit = identityOf(*this, is_max ? ReduceKind::Max : ReduceKind::Min, vt);
  Value iinit = constantInt(0, it);

  Impl::Region r(*impl_);
  std::string av = r.arg(vt), ai = r.arg(it), bv = r.arg(vt), bi = r.arg(it);
  // pick_a: a strictly better (or a NaN and b not); tie: equal (or both NaN) -> smaller index
  std::string better = r.cmp(av, bv, vt, is_max ? Cmp::GT : Cmp::LT);
  std::string tie = r.cmp(av, bv, vt, Cmp::EQ);
  if (isFloat(vt)) {
    std::string anan = r.cmp(av, av, vt, Cmp::NE);
    std::string bnan = r.cmp(bv, bv, vt, Cmp::NE);
    std::string bnum = r.op("stablehlo.not", {{bnan, DType::Pred}}, DType::Pred);
    std::string anan_only = r.bin("stablehlo.and", anan, bnum, DType::Pred);
    better = r.bin("stablehlo.or", better, anan_only, DType::Pred);
    std::string both = r.bin("stablehlo.and", anan, bnan, DType::Pred);
    tie = r.bin("stablehlo.or", tie, both, DType::Pred);
  }
  std::string val = r.select(better, av, bv, vt);
  std::string minidx = r.bin("stablehlo.minimum", ai, bi, it);
  std::string pickidx = r.select(better, ai, bi, it);
  std::string idx = r.select(tie, minidx, pickidx, it);
  std::string region = r.finish({{val, vt}, {idx, it}});

  Shape out;
  for (int64_t i = 0; i < a.rank(); ++i)
    if (i != dim) out.push_back(a.shape()[static_cast<size_t>(i)]);
  Value ops[4] = {a, indices, vinit, iinit};
  TensorType res[2] = {TensorType{vt, out}, TensorType{it, out}};
  return impl_->emitMulti("stablehlo.reduce", ops, 4, region, Attrs().array("dimensions", {dim}), res, 2);
}

Value Builder::reduceWindow(Value a, Value init, ReduceKind kind, const std::vector<int64_t>& window,
                            const std::vector<int64_t>& strides_in, const std::vector<int64_t>& base_dil_in,
                            const std::vector<int64_t>& win_dil_in,
                            const std::vector<std::pair<int64_t, int64_t>>& padding_in) {
  impl_->check("reduceWindow", a);
  impl_->check("reduceWindow", init);
  size_t r = static_cast<size_t>(a.rank());
  if (init.rank() != 0 || init.dtype() != a.dtype())
    fail("reduceWindow", "init must be a 0-d " + std::string(mlirName(a.dtype())) + ", got " + init.type.str());
  auto ones = [&](const std::vector<int64_t>& v) { return v.empty() ? std::vector<int64_t>(r, 1) : v; };
  std::vector<int64_t> strides = ones(strides_in), bd = ones(base_dil_in), wd = ones(win_dil_in);
  auto padding = padding_in.empty() ? std::vector<std::pair<int64_t, int64_t>>(r, {0, 0}) : padding_in;
  if (window.size() != r || strides.size() != r || bd.size() != r || wd.size() != r || padding.size() != r)
    fail("reduceWindow", "window " + dimsStr(window) + ", strides, dilations and padding need one entry per "
                         "dimension of " + a.type.str());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    if (window[i] <= 0 || strides[i] <= 0 || bd[i] <= 0 || wd[i] <= 0)
      fail("reduceWindow", "window sizes, strides and dilations must be positive");
    int64_t padded = (a.shape()[i] > 0 ? (a.shape()[i] - 1) * bd[i] + 1 : 0) + padding[i].first + padding[i].second;
    int64_t eff = (window[i] - 1) * wd[i] + 1;
    out[i] = padded < eff ? 0 : (padded - eff) / strides[i] + 1;
  }
  std::string region = impl_->combinerRegion("reduceWindow", kind, a.dtype());
  Attrs attrs;
  attrs.array("window_dimensions", window)
      .array("window_strides", strides)
      .array("base_dilations", bd)
      .array("window_dilations", wd)
      .padding("padding", padding);
  return impl_->emit("stablehlo.reduce_window", {a, init}, attrs, TensorType{a.dtype(), out}, region);
}

}  // namespace torch_tpu::shlo
