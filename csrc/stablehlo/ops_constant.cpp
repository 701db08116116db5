// Constant builders: splat and dense constants, iota, zeros/ones like a value. Methods of shlo::Builder (builder.h).
#include <string>

#include "stablehlo/builder_impl.h"

namespace torch_tpu::shlo {

using namespace detail;

Value Builder::constant(double v, DType t) { return constantF(v, t, {}); }

Value Builder::constantInt(int64_t v, DType t) {
  if (t == DType::Invalid) fail("constantInt", "invalid dtype");
  if (isFloat8(t)) return convert(constantInt(v, DType::F32), t);
  std::string lit;
  if (isFloat(t)) {
    appendFloatLit(lit, static_cast<double>(v), t);
  } else if (isComplex(t)) {
    appendElemLit(lit, static_cast<double>(v), t);
  } else {
    appendIntLit(lit, t == DType::Pred ? (v != 0) : v, t);
  }
  return impl_->constantLiteral(lit, TensorType{t, {}});
}

Value Builder::constantF(double v, DType t, const Shape& shape) {
  if (t == DType::Invalid) fail("constant", "invalid dtype");
  checkShape("constant", shape);
  if (isFloat8(t)) return convert(constantF(v, DType::F32, shape), t);  // PyTorch's rounding, through f32
  std::string lit;
  appendElemLit(lit, v, t);
  return impl_->constantLiteral(lit, TensorType{t, shape});
}

Value Builder::constantI64s(const std::vector<int64_t>& vals, DType t) {
  if (!(isInteger(t) || t == DType::Pred))
    fail("constantI64s", std::string("needs an integer or pred dtype, got ") + mlirName(t));
  std::string lit;
  lit.reserve(vals.size() * 4 + 4);
  if (!vals.empty()) {
    lit += '[';
    for (size_t i = 0; i < vals.size(); ++i) {
      if (i) lit += ", ";
      appendIntLit(lit, t == DType::Pred ? (vals[i] != 0) : vals[i], t);
    }
    lit += ']';
  }
  return impl_->constantLiteral(lit, TensorType{t, {static_cast<int64_t>(vals.size())}});
}

Value Builder::zeros(const TensorType& t) { return constantF(0.0, t.dtype, t.shape); }

Value Builder::iota(const TensorType& t, int64_t dim) {
  checkShape("iota", t.shape);
  if (dim < 0 || dim >= t.rank())
    fail("iota", "iota_dimension " + std::to_string(dim) + " out of range for " + t.str());
  if (t.dtype == DType::Pred || t.dtype == DType::Invalid) fail("iota", "needs a numeric dtype, got " + t.str());
  return impl_->emit("stablehlo.iota", {}, Attrs().i64("iota_dimension", dim), t);
}

Value Builder::scalarLike(double v, const Value& like) { return constantF(v, like.dtype(), like.shape()); }
Value Builder::zerosLike(const Value& like) { return constantF(0.0, like.dtype(), like.shape()); }
Value Builder::onesLike(const Value& like) { return constantF(1.0, like.dtype(), like.shape()); }

}  // namespace torch_tpu::shlo
