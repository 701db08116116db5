// Linear algebra builders: dot_general, convolution and the Hermitian eigensolver. Methods of shlo::Builder (builder.h).
#include <string>

#include "stablehlo/builder_impl.h"

namespace torch_tpu::shlo {

using namespace detail;

Value Builder::dotGeneral(Value lhs, Value rhs, const std::vector<int64_t>& lb, const std::vector<int64_t>& rb,
                          const std::vector<int64_t>& lc, const std::vector<int64_t>& rc, DType result) {
  impl_->check("dotGeneral", lhs);
  impl_->check("dotGeneral", rhs);
  if (lhs.dtype() != rhs.dtype())
    fail("dotGeneral", "operand dtypes differ: " + lhs.type.str() + " vs " + rhs.type.str());
  if (lb.size() != rb.size() || lc.size() != rc.size())
    fail("dotGeneral", "batching/contracting dimension lists must pair up: lhs_batch " + dimsStr(lb) +
                           ", rhs_batch " + dimsStr(rb) + ", lhs_contract " + dimsStr(lc) + ", rhs_contract " +
                           dimsStr(rc));
  std::vector<int64_t> lall = lb, rall = rb;
  lall.insert(lall.end(), lc.begin(), lc.end());
  rall.insert(rall.end(), rc.begin(), rc.end());
  checkDimsUnique("dotGeneral", lall, lhs.rank(), "lhs batching+contracting dimensions");
  checkDimsUnique("dotGeneral", rall, rhs.rank(), "rhs batching+contracting dimensions");
  for (size_t i = 0; i < lall.size(); ++i)
    if (lhs.shape()[static_cast<size_t>(lall[i])] != rhs.shape()[static_cast<size_t>(rall[i])])
      fail("dotGeneral", "size mismatch between lhs dimension " + std::to_string(lall[i]) + " and rhs dimension " +
                             std::to_string(rall[i]) + ": " + lhs.type.str() + " vs " + rhs.type.str());
  Shape out;
  for (int64_t d : lb) out.push_back(lhs.shape()[static_cast<size_t>(d)]);
  for (int64_t i = 0; i < lhs.rank(); ++i)
    if (!contains(lall, i)) out.push_back(lhs.shape()[static_cast<size_t>(i)]);
  for (int64_t i = 0; i < rhs.rank(); ++i)
    if (!contains(rall, i)) out.push_back(rhs.shape()[static_cast<size_t>(i)]);
  Attrs dn;
  dn.listIfAny("lhs_batching_dimensions", lb)
      .listIfAny("rhs_batching_dimensions", rb)
      .listIfAny("lhs_contracting_dimensions", lc)
      .listIfAny("rhs_contracting_dimensions", rc);
  Attrs attrs;
  attrs.nested("dot_dimension_numbers", "#stablehlo.dot<", dn);
  if (lhs.dtype() == DType::F32) attrs.entryText(precisionConfig(lhs.dtype()));  // others: DEFAULT, implied
  return impl_->emit("stablehlo.dot_general", {lhs, rhs}, attrs,
                     TensorType{result == DType::Invalid ? lhs.dtype() : result, out});
}

Value Builder::convolution(Value lhs, Value rhs, const ConvDims& d, const std::vector<int64_t>& strides_in,
                           const std::vector<std::pair<int64_t, int64_t>>& padding_in,
                           const std::vector<int64_t>& lhs_dil_in, const std::vector<int64_t>& rhs_dil_in,
                           int64_t feature_group_count, int64_t batch_group_count, const Shape& result_shape,
                           DType result) {
  impl_->check("convolution", lhs);
  impl_->check("convolution", rhs);
  if (lhs.dtype() != rhs.dtype())
    fail("convolution", "operand dtypes differ: " + lhs.type.str() + " vs " + rhs.type.str());
  size_t ns = d.input_spatial.size();
  if (d.kernel_spatial.size() != ns || d.output_spatial.size() != ns || lhs.rank() != static_cast<int64_t>(ns + 2) ||
      rhs.rank() != static_cast<int64_t>(ns + 2) || static_cast<int64_t>(result_shape.size()) != lhs.rank())
    fail("convolution", "ranks do not match the " + std::to_string(ns) + " spatial dimensions: input " +
                            lhs.type.str() + ", kernel " + rhs.type.str() + ", result " + shapeStr(result_shape));
  std::vector<int64_t> in = {d.input_batch, d.input_feature}, kn = {d.kernel_output_feature, d.kernel_input_feature},
                       on = {d.output_batch, d.output_feature};
  in.insert(in.end(), d.input_spatial.begin(), d.input_spatial.end());
  kn.insert(kn.end(), d.kernel_spatial.begin(), d.kernel_spatial.end());
  on.insert(on.end(), d.output_spatial.begin(), d.output_spatial.end());
  checkDimsUnique("convolution", in, lhs.rank(), "input dimension numbers");
  checkDimsUnique("convolution", kn, rhs.rank(), "kernel dimension numbers");
  checkDimsUnique("convolution", on, lhs.rank(), "output dimension numbers");
  auto ones = [&](const std::vector<int64_t>& v) { return v.empty() ? std::vector<int64_t>(ns, 1) : v; };
  std::vector<int64_t> strides = ones(strides_in), ld = ones(lhs_dil_in), rd = ones(rhs_dil_in);
  auto padding = padding_in.empty() ? std::vector<std::pair<int64_t, int64_t>>(ns, {0, 0}) : padding_in;
  if (strides.size() != ns || ld.size() != ns || rd.size() != ns || padding.size() != ns)
    fail("convolution", "strides/padding/dilations need one entry per spatial dimension (" + std::to_string(ns) + ")");
  if (feature_group_count < 1 || batch_group_count < 1) fail("convolution", "group counts must be >= 1");
  const Shape& L = lhs.shape();
  const Shape& K = rhs.shape();
  auto at = [](const Shape& s, int64_t i) { return s[static_cast<size_t>(i)]; };
  if (at(L, d.input_feature) != at(K, d.kernel_input_feature) * feature_group_count)
    fail("convolution", "input features (" + std::to_string(at(L, d.input_feature)) +
                            ") must equal kernel input features (" + std::to_string(at(K, d.kernel_input_feature)) +
                            ") * feature_group_count (" + std::to_string(feature_group_count) + ")");
  Shape expect(static_cast<size_t>(lhs.rank()));
  expect[static_cast<size_t>(d.output_batch)] = at(L, d.input_batch) / batch_group_count;
  expect[static_cast<size_t>(d.output_feature)] = at(K, d.kernel_output_feature);
  for (size_t i = 0; i < ns; ++i) {
    int64_t x = at(L, d.input_spatial[i]);
    int64_t padded = (x > 0 ? (x - 1) * ld[i] + 1 : 0) + padding[i].first + padding[i].second;
    int64_t eff = (at(K, d.kernel_spatial[i]) - 1) * rd[i] + 1;
    expect[static_cast<size_t>(d.output_spatial[i])] = padded < eff ? 0 : (padded - eff) / strides[i] + 1;
  }
  if (expect != result_shape)
    fail("convolution", "result shape " + shapeStr(result_shape) + " does not match the computed " +
                            shapeStr(expect) + " (input " + lhs.type.str() + ", kernel " + rhs.type.str() + ")");
  Attrs dn;  // the "raw" form lists every dimension number by name
  dn.integer("input_batch_dimension", d.input_batch)
      .integer("input_feature_dimension", d.input_feature)
      .list("input_spatial_dimensions", d.input_spatial)
      .integer("kernel_input_feature_dimension", d.kernel_input_feature)
      .integer("kernel_output_feature_dimension", d.kernel_output_feature)
      .list("kernel_spatial_dimensions", d.kernel_spatial)
      .integer("output_batch_dimension", d.output_batch)
      .integer("output_feature_dimension", d.output_feature)
      .list("output_spatial_dimensions", d.output_spatial);
  Attrs attrs;
  attrs.i64("batch_group_count", batch_group_count)
      .nested("dimension_numbers", "#stablehlo.conv<raw ", dn)
      .i64("feature_group_count", feature_group_count)
      .array("lhs_dilation", ld)
      .padding("padding", padding)
      .array("rhs_dilation", rd)
      .array("window_strides", strides);
  if (lhs.dtype() == DType::F32) attrs.entryText(precisionConfig(lhs.dtype()));
  return impl_->emit("stablehlo.convolution", {lhs, rhs}, attrs,
                     TensorType{result == DType::Invalid ? lhs.dtype() : result, result_shape});
}

std::vector<Value> Builder::eigh(Value a) {
  impl_->check("eigh", a);
  const DType t = a.dtype();
  if (!isFloat(t) && !isComplex(t)) fail("eigh", "needs a floating or complex operand, got " + a.type.str());
  const int64_t r = a.rank();
  if (r < 2 || a.shape()[size_t(r - 1)] != a.shape()[size_t(r - 2)])
    fail("eigh", "needs square matrices [..., n, n], got " + a.type.str());
  Shape ws(a.shape().begin(), a.shape().end() - 1);
  // backend_config: lower, sort_eigenvalues (ascending), max_iter, tolerance of the Jacobi sweeps
  Attrs attrs;
  attrs.entryText("api_version = 1 : i32")
      .entryText("backend_config = \"1,1,100,1e-6\"")
      .entryText("call_target_name = \"Eigh\"");
  const TensorType results[2] = {a.type, TensorType{componentType(t), ws}};
  return impl_->emitMulti("stablehlo.custom_call", &a, 1, {}, attrs.str(), results, 2);
}

}  // namespace torch_tpu::shlo
