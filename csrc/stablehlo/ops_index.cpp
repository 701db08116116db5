// Indexing builders: gather, scatter (replace or combine) and multi-operand sort. Methods of shlo::Builder
// (builder.h).
#include <algorithm>
#include <string>

#include "stablehlo/builder_impl.h"

namespace torch_tpu::shlo {

using namespace detail;

Value Builder::gather(Value operand, Value indices, const GatherDims& d, const std::vector<int64_t>& slice_sizes,
                      const Shape& result_shape, bool indices_are_sorted) {
  impl_->check("gather", operand);
  impl_->check("gather", indices);
  if (!isInteger(indices.dtype())) fail("gather", "indices must be integers, got " + indices.type.str());
  if (static_cast<int64_t>(slice_sizes.size()) != operand.rank())
    fail("gather", "slice_sizes " + dimsStr(slice_sizes) + " needs one entry per dimension of " + operand.type.str());
  if (d.index_vector_dim < 0 || d.index_vector_dim > indices.rank())
    fail("gather", "index_vector_dim " + std::to_string(d.index_vector_dim) + " out of range for indices " +
                       indices.type.str());
  int64_t ivsize = d.index_vector_dim == indices.rank() ? 1 : indices.shape()[static_cast<size_t>(d.index_vector_dim)];
  if (static_cast<int64_t>(d.start_index_map.size()) != ivsize)
    fail("gather", "start_index_map " + dimsStr(d.start_index_map) + " must have " + std::to_string(ivsize) +
                       " entries (index vector size of " + indices.type.str() + ")");
  checkDimsUnique("gather", d.start_index_map, operand.rank(), "start_index_map");
  checkDimsUnique("gather", d.collapsed_slice_dims, operand.rank(), "collapsed_slice_dims");
  checkDimsUnique("gather", d.operand_batching_dims, operand.rank(), "operand_batching_dims");
  for (size_t i = 0; i < slice_sizes.size(); ++i)
    if (slice_sizes[i] < 0 || slice_sizes[i] > operand.shape()[i])
      fail("gather", "slice_sizes " + dimsStr(slice_sizes) + " exceed operand " + operand.type.str());
  for (int64_t c : d.collapsed_slice_dims)
    if (slice_sizes[static_cast<size_t>(c)] > 1)
      fail("gather", "collapsed dimension " + std::to_string(c) + " must have slice size <= 1");
  // expected result shape
  Shape batch;
  for (int64_t i = 0; i < indices.rank(); ++i)
    if (i != d.index_vector_dim) batch.push_back(indices.shape()[static_cast<size_t>(i)]);
  Shape offs;
  for (int64_t i = 0; i < operand.rank(); ++i)
    if (!contains(d.collapsed_slice_dims, i) && !contains(d.operand_batching_dims, i))
      offs.push_back(slice_sizes[static_cast<size_t>(i)]);
  if (offs.size() != d.offset_dims.size())
    fail("gather", "offset_dims " + dimsStr(d.offset_dims) + " must have " + std::to_string(offs.size()) +
                       " entries (operand rank minus collapsed/batching dims)");
  size_t rr = batch.size() + offs.size();
  checkDimsUnique("gather", d.offset_dims, static_cast<int64_t>(rr), "offset_dims");
  Shape expect(rr);
  size_t bi = 0, oi = 0;
  std::vector<int64_t> od = d.offset_dims;
  std::sort(od.begin(), od.end());
  for (size_t i = 0; i < rr; ++i) expect[i] = contains(od, static_cast<int64_t>(i)) ? offs[oi++] : batch[bi++];
  if (expect != result_shape)
    fail("gather", "result shape " + shapeStr(result_shape) + " does not match the computed " + shapeStr(expect));
  Attrs dn;
  dn.list("offset_dims", d.offset_dims)
      .listIfAny("collapsed_slice_dims", d.collapsed_slice_dims)
      .listIfAny("operand_batching_dims", d.operand_batching_dims)
      .listIfAny("start_indices_batching_dims", d.start_indices_batching_dims)
      .list("start_index_map", d.start_index_map)
      .integer("index_vector_dim", d.index_vector_dim);
  Attrs attrs;
  attrs.nested("dimension_numbers", "#stablehlo.gather<", dn)
      .boolean("indices_are_sorted", indices_are_sorted)
      .array("slice_sizes", slice_sizes);
  return impl_->emit("stablehlo.gather", {operand, indices}, attrs, TensorType{operand.dtype(), result_shape});
}

Value Builder::scatter(Value operand, Value indices, Value updates, const ScatterDims& d,
                       std::optional<ReduceKind> combiner, bool indices_are_sorted, bool unique_indices) {
  impl_->check("scatter", operand);
  impl_->check("scatter", indices);
  impl_->check("scatter", updates);
  if (!isInteger(indices.dtype())) fail("scatter", "indices must be integers, got " + indices.type.str());
  if (updates.dtype() != operand.dtype())
    fail("scatter", "updates " + updates.type.str() + " must have the dtype of operand " + operand.type.str());
  if (d.index_vector_dim < 0 || d.index_vector_dim > indices.rank())
    fail("scatter", "index_vector_dim " + std::to_string(d.index_vector_dim) + " out of range for indices " +
                        indices.type.str());
  int64_t ivsize = d.index_vector_dim == indices.rank() ? 1 : indices.shape()[static_cast<size_t>(d.index_vector_dim)];
  if (static_cast<int64_t>(d.scatter_dims_to_operand_dims.size()) != ivsize)
    fail("scatter", "scatter_dims_to_operand_dims " + dimsStr(d.scatter_dims_to_operand_dims) + " must have " +
                        std::to_string(ivsize) + " entries");
  int64_t scatter_rank = indices.rank() - (d.index_vector_dim < indices.rank() ? 1 : 0);
  if (updates.rank() != scatter_rank + static_cast<int64_t>(d.update_window_dims.size()))
    fail("scatter", "updates " + updates.type.str() + " rank must be " +
                        std::to_string(scatter_rank + static_cast<int64_t>(d.update_window_dims.size())) +
                        " (scatter batch rank + update_window_dims)");
  if (static_cast<int64_t>(d.update_window_dims.size() + d.inserted_window_dims.size() +
                           d.input_batching_dims.size()) != operand.rank())
    fail("scatter", "update_window_dims + inserted_window_dims + input_batching_dims must cover operand rank " +
                        std::to_string(operand.rank()));
  checkDimsUnique("scatter", d.update_window_dims, updates.rank(), "update_window_dims");
  checkDimsUnique("scatter", d.inserted_window_dims, operand.rank(), "inserted_window_dims");
  checkDimsUnique("scatter", d.scatter_dims_to_operand_dims, operand.rank(), "scatter_dims_to_operand_dims");
  DType t = operand.dtype();
  std::string region;
  if (combiner && (*combiner == ReduceKind::Max || *combiner == ReduceKind::Min) && isFloat(t)) {
    // max/min that propagate a NaN from either side (XLA's CPU backend may lower maximum/minimum with the
    // NaN-ignoring maxnum/minnum): scatter_reduce, index_reduce and segment reductions keep PyTorch's NaN
    Impl::Region r(*impl_);
    std::string a = r.arg(t), b = r.arg(t);
    std::string m = r.bin(Impl::combinerOp("scatter", *combiner, t), a, b, t);
    m = r.select(r.cmp(b, b, t, Cmp::NE), b, m, t);
    m = r.select(r.cmp(a, a, t, Cmp::NE), a, m, t);
    region = r.finish({{m, t}});
  } else if (combiner) {
    region = impl_->combinerRegion("scatter", *combiner, t);
  } else {
    Impl::Region r(*impl_);
    r.arg(t);
    std::string b = r.arg(t);
    region = r.finish({{b, t}});
  }
  Attrs dn;
  dn.list("update_window_dims", d.update_window_dims)
      .listIfAny("inserted_window_dims", d.inserted_window_dims)
      .listIfAny("input_batching_dims", d.input_batching_dims)
      .listIfAny("scatter_indices_batching_dims", d.scatter_indices_batching_dims)
      .list("scatter_dims_to_operand_dims", d.scatter_dims_to_operand_dims)
      .integer("index_vector_dim", d.index_vector_dim);
  Attrs attrs;
  attrs.boolean("indices_are_sorted", indices_are_sorted)
      .nested("scatter_dimension_numbers", "#stablehlo.scatter<", dn)
      .boolean("unique_indices", unique_indices);
  return impl_->emit("stablehlo.scatter", {operand, indices, updates}, attrs, operand.type, region);
}

std::vector<Value> Builder::sort(const std::vector<Value>& operands, int64_t dim, bool descending, bool stable) {
  return sort(operands, dim, descending, stable, 1);
}

std::vector<Value> Builder::sort(const std::vector<Value>& operands, int64_t dim, bool descending, bool stable,
                                 int num_keys) {
  if (operands.empty()) fail("sort", "needs at least one operand");
  for (const Value& v : operands) impl_->check("sort", v);
  const Value& k = operands[0];
  for (const Value& v : operands)
    if (v.shape() != k.shape())
      fail("sort", "all operands must have the same shape: " + k.type.str() + " vs " + v.type.str());
  if (dim < 0 || dim >= k.rank()) fail("sort", "dimension " + std::to_string(dim) + " out of range for " + k.type.str());
  if (num_keys < 1 || num_keys > static_cast<int>(operands.size()))
    fail("sort", "num_keys " + std::to_string(num_keys) + " must be in [1, " + std::to_string(operands.size()) + "]");
  for (int i = 0; i < num_keys; ++i) requireDType("sort", operands[static_cast<size_t>(i)], kAll & ~kComplex);
  Impl::Region r(*impl_);
  std::vector<std::string> xs, ys;
  for (const Value& v : operands) {
    xs.push_back(r.arg(v.dtype()));
    ys.push_back(r.arg(v.dtype()));
  }
  // Per key: ascending "x before y" = x < y, or (x is a number and y is NaN); descending: x > y, or (x is NaN and y
  // is a number). Ties (x == y, or both NaN) defer to the next key.
  std::string res;
  for (int i = num_keys - 1; i >= 0; --i) {
    DType kt = operands[static_cast<size_t>(i)].dtype();
    const std::string& x = xs[static_cast<size_t>(i)];
    const std::string& y = ys[static_cast<size_t>(i)];
    std::string before = r.cmp(x, y, kt, descending ? Cmp::GT : Cmp::LT);
    std::string xnan, ynan;
    if (isFloat(kt)) {
      xnan = r.cmp(x, x, kt, Cmp::NE);
      ynan = r.cmp(y, y, kt, Cmp::NE);
      std::string nanpart =
          descending ? r.bin("stablehlo.and", xnan, r.op("stablehlo.not", {{ynan, DType::Pred}}, DType::Pred),
                             DType::Pred)
                     : r.bin("stablehlo.and", r.op("stablehlo.not", {{xnan, DType::Pred}}, DType::Pred), ynan,
                             DType::Pred);
      before = r.bin("stablehlo.or", before, nanpart, DType::Pred);
    }
    if (!res.empty()) {
      std::string eq = r.cmp(x, y, kt, Cmp::EQ);
      if (isFloat(kt)) eq = r.bin("stablehlo.or", eq, r.bin("stablehlo.and", xnan, ynan, DType::Pred), DType::Pred);
      before = r.bin("stablehlo.or", before, r.bin("stablehlo.and", eq, res, DType::Pred), DType::Pred);
    }
    res = before;
  }
  std::string region = r.finish({{res, DType::Pred}});
  Attrs attrs;
  attrs.i64("dimension", dim).boolean("is_stable", stable);
  std::vector<TensorType> res_types;
  res_types.reserve(operands.size());
  for (const Value& v : operands) res_types.push_back(v.type);
  return impl_->emitMulti("stablehlo.sort", operands.data(), operands.size(), region, attrs, res_types.data(),
                          res_types.size());
}

}  // namespace torch_tpu::shlo
