// Sparse COO tensors on tpu (the SparsePrivateUse1 key). A COO tensor is PyTorch's own SparseTensorImpl holding two
// dense tpu tensors, its indices (sparse_dim x nnz, int64) and values (nnz x dense dims), so construction, the
// accessors, resizing, copies and clones are PyTorch's device-generic kernels. What needs the data is written here
// with dense tpu ops (gathers and scatters), the way graph code uses sparse adjacency matrices:
//  - coalesce: linear indices, their sorted unique values (one host round trip for the count), index_add of values;
//  - to_dense: index_put_ with accumulation; dense.to_sparse(): nonzero (one host round trip), then gathers;
//  - sparse @ dense (mm, addmm, torch.sparse.mm): gather the dense rows of each nonzero's column, scale, index_add
//    into each nonzero's row;
//  - add (sparse + sparse: concatenated entries, uncoalesced, as on CPU; dense + sparse: index_put_ accumulate),
//    mul and div by a scalar or a dense tensor, neg, sum (whole, and over dims).
// Anything else on a sparse tpu tensor raises PyTorch's NotImplementedError for the Sparsetpu backend. Compressed
// layouts (CSR, CSC): eager/sparse_compressed.cpp.
#include <ATen/ATen.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_to_sparse_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/zero_native.h>
#include <torch/library.h>

#include <vector>

namespace torch_tpu {

namespace {

at::Tensor makeCoo(at::IntArrayRef sizes, int64_t sparse_dim, const at::Tensor& indices,
                   const at::Tensor& values, bool coalesced) {
  return at::_sparse_coo_tensor_with_dims_and_tensors(sparse_dim, static_cast<int64_t>(sizes.size()) - sparse_dim,
                                                      sizes, indices, values, values.options().layout(at::kSparse),
                                                      coalesced);
}

// The flat position of each nonzero among the sparse dims (row-major).
at::Tensor linearIndex(const at::Tensor& indices, at::IntArrayRef sizes, int64_t sparse_dim) {
  at::Tensor lin = indices.select(0, 0).clone();
  for (int64_t d = 1; d < sparse_dim; ++d) lin = lin.mul(sizes[d]).add_(indices.select(0, d));
  return lin;
}

// The index of each entry's position along every sparse dim, for index / index_put_.
c10::List<std::optional<at::Tensor>> indexList(const at::Tensor& indices, int64_t sparse_dim) {
  c10::List<std::optional<at::Tensor>> idx;
  for (int64_t d = 0; d < sparse_dim; ++d) idx.push_back(indices.select(0, d));
  return idx;
}

at::Tensor sparseCoalesce(const at::Tensor& self) {
  const int64_t sd = self.sparse_dim();
  at::Tensor indices = self._indices(), values = self._values();
  if (self._nnz() == 0 || sd == 0) {
    at::Tensor v = sd == 0 && self._nnz() > 1 ? values.sum(0, true) : values.clone();
    at::Tensor i = sd == 0 && self._nnz() > 1 ? indices.narrow(1, 0, 1).clone() : indices.clone();
    return makeCoo(self.sizes(), sd, i, v, true);
  }
  at::Tensor lin = linearIndex(indices, self.sizes(), sd);
  auto [uniq, inverse, counts] = at::_unique2(lin, /*sorted=*/true, /*return_inverse=*/true, false);
  std::vector<int64_t> vshape = values.sizes().vec();
  vshape[0] = uniq.numel();
  at::Tensor new_values = at::zeros(vshape, values.options()).index_add_(0, inverse, values);
  std::vector<at::Tensor> rows(static_cast<size_t>(sd));
  at::Tensor rest = uniq;
  for (int64_t d = sd - 1; d >= 0; --d) {
    rows[static_cast<size_t>(d)] = d == 0 ? rest : rest.remainder(self.size(d));
    if (d > 0) rest = rest.div(self.size(d), "floor");
  }
  return makeCoo(self.sizes(), sd, at::stack(rows, 0), new_values, true);
}

at::Tensor toDense(const at::Tensor& self, std::optional<at::ScalarType> dtype, std::optional<bool> /*masked_grad*/) {
  at::Tensor values = self._values();
  if (dtype) values = values.to(*dtype);
  at::Tensor dense = at::zeros(self.sizes(), values.options().layout(at::kStrided));
  if (self._nnz() == 0) return dense;
  const int64_t sd = self.sparse_dim();
  if (sd == 0) return dense.add_(values.sum(0));
  return dense.index_put_(indexList(self._indices(), sd), values, /*accumulate=*/true);
}

// dense -> COO with `sparse_dim` sparse dims: an entry per position of the sparse dims where any value is nonzero.
at::Tensor denseToCoo(const at::Tensor& self, int64_t sparse_dim) {
  TORCH_CHECK(sparse_dim > 0 || self.dim() == 0, "sparse_dim must be positive, got ", sparse_dim);
  TORCH_CHECK(sparse_dim <= self.dim(), "sparse_dim must be less than or equal to self.dim()");
  at::Tensor mask = self.ne(0);
  for (int64_t d = self.dim() - 1; d >= sparse_dim; --d) mask = mask.any(d);
  at::Tensor indices = sparse_dim == 0 ? at::zeros({0, 1}, self.options().dtype(at::kLong))
                                       : at::nonzero(mask).t().contiguous();
  at::Tensor values;
  if (sparse_dim == 0) {
    values = self.unsqueeze(0).clone();
  } else {
    values = at::index(self, indexList(indices, sparse_dim));
  }
  return makeCoo(self.sizes(), sparse_dim, indices, values, true);
}

at::Tensor toSparseSparseDim(const at::Tensor& self, int64_t sparse_dim) { return denseToCoo(self, sparse_dim); }

at::Tensor toSparse(const at::Tensor& self, std::optional<at::Layout> layout, at::OptionalIntArrayRef blocksize,
                    std::optional<int64_t> dense_dim) {
  const at::Layout l = layout.value_or(at::kSparse);
  TORCH_CHECK_NOT_IMPLEMENTED(l == at::kSparse, "tpu: conversion to the ", l,
                              " layout is not supported; sparse tpu tensors are COO (layout torch.sparse_coo)");
  TORCH_CHECK(!blocksize.has_value(), "to_sparse: blocksize is not supported for the COO layout");
  return denseToCoo(self, self.dim() - dense_dim.value_or(0));
}

// result = beta * self + alpha * (sparse @ dense), for a 2-d sparse (2 sparse dims) and a 2-d dense matrix.
at::Tensor spmm(const at::Tensor& sparse, const at::Tensor& dense) {
  TORCH_CHECK(sparse.sparse_dim() == 2 && sparse.dense_dim() == 0,
              "addmm: matrices expected, got ", sparse.sparse_dim(), "D sparse tensor with ", sparse.dense_dim(),
              " dense dims");
  TORCH_CHECK(dense.dim() == 2, "addmm: matrices expected, got ", dense.dim(), "D tensor");
  TORCH_CHECK(sparse.size(1) == dense.size(0), "mat1 and mat2 shapes cannot be multiplied (", sparse.size(0), "x",
              sparse.size(1), " and ", dense.size(0), "x", dense.size(1), ")");
  at::Tensor out = at::zeros({sparse.size(0), dense.size(1)}, dense.options());
  if (sparse._nnz() == 0) return out;
  at::Tensor indices = sparse._indices();
  at::Tensor values = sparse._values().to(dense.scalar_type());
  at::Tensor contrib = dense.index_select(0, indices.select(0, 1)).mul(values.unsqueeze(1));
  return out.index_add_(0, indices.select(0, 0), contrib);
}

at::Tensor sparseMm(const at::Tensor& self, const at::Tensor& mat2) {
  TORCH_CHECK_NOT_IMPLEMENTED(self.is_sparse() && !mat2.is_sparse(),
                              "tpu: sparse matrix products need a sparse COO left operand and a dense right one");
  return spmm(self, mat2);
}

at::Tensor sparseAddmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_sparse() && mat1.is_sparse() && !mat2.is_sparse(),
                              "tpu: sparse addmm needs a dense input, a sparse COO mat1 and a dense mat2");
  at::Tensor prod = spmm(mat1, mat2);
  at::Tensor base = self.expand({mat1.size(0), mat2.size(1)});
  if (beta.toComplexDouble() == 0.0) return prod.mul(alpha);
  return base.mul(beta).add(prod, alpha);
}

at::Tensor& addmmOut(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                     const at::Scalar& alpha, at::Tensor& out) {
  at::Tensor r = sparseAddmm(self, mat1, mat2, beta, alpha);
  out.resize_(r.sizes());
  return out.copy_(r);
}

at::Tensor sparseAdd(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (self.is_sparse() && other.is_sparse()) {
    TORCH_CHECK(self.sizes() == other.sizes(), "add: expected 'self' and 'other' to have same size, but self has size ",
                self.sizes(), " while other has size ", other.sizes(),
                " (FYI: dense-sparse addition does not currently support broadcasting)");
    TORCH_CHECK(self.sparse_dim() == other.sparse_dim(), "add: expected same number of sparse dims");
    // The values keep the promoted dtype: scaling by alpha must not promote them further (bool * 1 is int64).
    const at::ScalarType t = at::promote_types(self.scalar_type(), other.scalar_type());
    at::native::alpha_check(t, alpha);
    at::Tensor scaled = other._values().to(t);
    if (!(alpha.isIntegral(true) && alpha.toLong() == 1)) scaled = scaled.mul(alpha).to(t);
    at::Tensor values = at::cat({self._values().to(t), scaled}, 0);
    at::Tensor indices = at::cat({self._indices(), other._indices()}, 1);
    return makeCoo(self.sizes(), self.sparse_dim(), indices, values, false);
  }
  TORCH_CHECK(!self.is_sparse(), "add(sparse, dense) is not supported. Use add(dense, sparse) instead.");
  const at::Tensor& dense = self;
  const at::Tensor& sparse = other;
  TORCH_CHECK(dense.sizes() == sparse.sizes(), "add: expected 'self' and 'other' to have same size, but self has size ",
              self.sizes(), " while other has size ", other.sizes(),
              " (FYI: dense-sparse addition does not currently support broadcasting)");
  return self.add(toDense(sparse, std::nullopt, std::nullopt), alpha);
}

// In-place results must be castable to self's dtype, as TensorIterator requires on CPU.
void checkInPlaceResult(const at::Tensor& self, const at::Tensor& other, const char* op) {
  const at::ScalarType t = at::result_type(self, other);
  TORCH_CHECK(c10::canCast(t, self.scalar_type()), "Can't convert result type ", t, " to output ",
              self.scalar_type(), " in ", op, " operation");
}

at::Tensor& addInPlace(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!self.is_sparse()) return self.add_(toDense(other, std::nullopt, std::nullopt), alpha);
  checkInPlaceResult(self, other, "add");
  at::Tensor r = sparseAdd(self, other, alpha);
  return self.copy_(r.to(self.scalar_type()));
}

// sub: add with -alpha, after CPU's check on bool operands.
void checkSub(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.scalar_type() != at::kBool || other.scalar_type() != at::kBool,
              "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
              "operator instead.");
  TORCH_CHECK(self.scalar_type() != at::kBool && other.scalar_type() != at::kBool,
              "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a "
              "mask, use the `~` or `logical_not()` operator instead.");
}

at::Tensor sparseSub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  checkSub(self, other);
  return sparseAdd(self, other, -alpha);
}

at::Tensor& subInPlace(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  checkSub(self, other);
  return addInPlace(self, other, -alpha);
}

// sparse * (scalar or dense), sparse * sparse; the same for division by a scalar or dense tensor.
at::Tensor mulOrDiv(const at::Tensor& self, const at::Tensor& other, bool div) {
  TORCH_CHECK(!div || (self.is_sparse() && !other.is_sparse() && other.dim() == 0),
              "Sparse division requires a scalar or zero-dim dense tensor divisor (got shape ", other.sizes(),
              " for divisor)");
  if (self.is_sparse() && other.is_sparse()) {
    at::Tensor prod = toDense(self, std::nullopt, std::nullopt).mul(toDense(other, std::nullopt, std::nullopt));
    return denseToCoo(prod, self.sparse_dim());
  }
  if (!self.is_sparse()) return mulOrDiv(other, self, false);  // dense * sparse is sparse, as on CPU
  at::Tensor values = self._values();
  at::Tensor factor = other;
  if (other.dim() > 0) {
    // A dense factor broadcasts to self's shape; each entry takes the factor at its position.
    at::Tensor full = other.expand(self.sizes());
    factor = at::index(full, indexList(self._indices(), self.sparse_dim()));
  }
  at::Tensor v = div ? values.div(factor) : values.mul(factor);
  return makeCoo(self.sizes(), self.sparse_dim(), self._indices().clone(), v, self.is_coalesced());
}

at::Tensor sparseMul(const at::Tensor& self, const at::Tensor& other) { return mulOrDiv(self, other, false); }
at::Tensor sparseDiv(const at::Tensor& self, const at::Tensor& other) { return mulOrDiv(self, other, true); }
at::Tensor& mulInPlace(at::Tensor& self, const at::Tensor& other) {
  checkInPlaceResult(self, other, "mul");
  at::Tensor r = mulOrDiv(self, other, false).to(self.scalar_type());
  // dense.mul_(sparse): the product is sparse (zero where `other` has no entry, as on CPU), self takes its dense form
  return self.copy_(self.is_sparse() ? r : toDense(r, std::nullopt, std::nullopt));
}
at::Tensor& divInPlace(at::Tensor& self, const at::Tensor& other) {
  checkInPlaceResult(self, other, "div");
  return self.copy_(mulOrDiv(self, other, true).to(self.scalar_type()));
}

// self's values at mask's entries, as a sparse tensor with mask's indices.
at::Tensor sparseMask(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.sizes() == self.sizes(), "sparse_mask(): operands have incompatible sizes; self has size ",
              self.sizes(), " but mask has size ", mask.sizes());
  const at::Tensor dense = self.is_sparse() ? toDense(self, std::nullopt, std::nullopt) : self;
  at::Tensor values;
  if (mask.sparse_dim() == 0) {
    values = dense.unsqueeze(0).expand(mask._values().sizes()).clone();
  } else {
    values = at::index(dense, indexList(mask._indices(), mask.sparse_dim()));
  }
  return makeCoo(self.sizes(), mask.sparse_dim(), mask._indices().clone(), values, mask.is_coalesced());
}

// _sparse_mask_projection(self, mask, accumulate_matches) (the backward of sparse_mask): self's entries, indices as
// they are, each value kept where its index is one of mask's and zero elsewhere, as CPU computes it.
at::Tensor sparseMaskProjection(const at::Tensor& self, const at::Tensor& mask, bool accumulate_matches) {
  (void)accumulate_matches;  // duplicates of self stay separate entries either way
  TORCH_CHECK(mask.sizes() == self.sizes(), "_sparse_mask_projection(): operands have incompatible sizes; self has size ",
              self.sizes(), " but mask has size ", mask.sizes());
  int64_t sd = self.sparse_dim();
  at::Tensor keep = at::isin(linearIndex(self._indices(), self.sizes(), sd),
                             linearIndex(mask._indices(), mask.sizes(), mask.sparse_dim()));
  at::Tensor values = self._values();
  std::vector<int64_t> shape(size_t(values.dim()), 1);
  shape[0] = values.size(0);
  values = at::where(keep.view(shape), values, at::zeros({}, values.options()));
  return makeCoo(self.sizes(), sd, self._indices().clone(), values, self.is_coalesced());
}

at::Tensor sparseNeg(const at::Tensor& self) {
  return makeCoo(self.sizes(), self.sparse_dim(), self._indices().clone(), self._values().neg(),
                 self.is_coalesced());
}

at::Tensor sumAll(const at::Tensor& self, std::optional<at::ScalarType> dtype) { return self._values().sum(dtype); }

// torch.sparse.sum(x, dim): summed over every sparse dim, a dense tensor; else a sparse one over the sparse dims
// left (PyTorch's rule), computed through the dense form.
at::Tensor sparseSumDim(const at::Tensor& self, at::IntArrayRef dim) {
  const int64_t sd = self.sparse_dim();
  std::vector<int64_t> dims;
  int64_t sparse_summed = 0;
  for (int64_t d : dim) {
    d = c10::maybe_wrap_dim(d, self.dim());
    dims.push_back(d);
    if (d < sd) ++sparse_summed;
  }
  at::Tensor dense = toDense(self, std::nullopt, std::nullopt).sum(dims);
  if (sparse_summed == sd) return dense;
  return denseToCoo(dense, sd - sparse_summed);
}

at::Tensor sparseSumDimDtype(const at::Tensor& self, at::IntArrayRef dim, at::ScalarType dtype) {
  return sparseSumDim(self.to(dtype), dim);
}

at::Tensor& copySparse(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  if (self.is_sparse() && src.is_sparse()) return at::native::copy_sparse_wrapper_(self, src, non_blocking);
  TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu: copying between a sparse and a dense tensor is not supported; use "
                                     "to_dense() or to_sparse()");
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  // PyTorch's device-generic kernels of the COO tensor itself.
  m.impl("_sparse_coo_tensor_with_dims_and_tensors", TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint));
  m.impl("_sparse_coo_tensor_with_dims", TORCH_FN(at::native::new_with_dims_sparse));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse_symint));
  m.impl("_indices", TORCH_FN(at::native::_indices_sparse));
  m.impl("_values", TORCH_FN(at::native::_values_sparse));
  m.impl("indices", TORCH_FN(at::native::indices_sparse));
  m.impl("values", TORCH_FN(at::native::values_sparse));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("_dimI", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("_dimV", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("is_coalesced", TORCH_FN(at::native::is_coalesced_sparse));
  m.impl("_coalesced_", TORCH_FN(at::native::_coalesced_sparse_));
  m.impl("sparse_resize_", TORCH_FN(at::native::sparse_resize_));
  m.impl("sparse_resize_and_clear_", TORCH_FN(at::native::sparse_resize_and_clear_));
  m.impl("zero_", TORCH_FN(at::native::zero_sparse_));
  m.impl("clone", TORCH_FN(at::native::clone_sparse));
  m.impl("copy_", TORCH_FN(copySparse));
  m.impl("_to_sparse.sparse_dim",
         static_cast<at::Tensor (*)(const at::Tensor&, int64_t)>(&at::native::sparse_coo_to_sparse));
  // Data: dense tpu ops on indices and values.
  m.impl("_coalesce", TORCH_FN(sparseCoalesce));
  m.impl("_to_dense", TORCH_FN(toDense));
  m.impl("mm", TORCH_FN(sparseMm));
  m.impl("addmm", TORCH_FN(sparseAddmm));
  m.impl("addmm.out", TORCH_FN(addmmOut));
  m.impl("add.Tensor", TORCH_FN(sparseAdd));
  m.impl("add_.Tensor", TORCH_FN(addInPlace));
  m.impl("sub.Tensor", TORCH_FN(sparseSub));
  m.impl("sub_.Tensor", TORCH_FN(subInPlace));
  m.impl("copy_sparse_to_sparse_", TORCH_FN(at::native::copy_sparse_));
  m.impl("mul.Tensor", TORCH_FN(sparseMul));
  m.impl("mul_.Tensor", TORCH_FN(mulInPlace));
  m.impl("div.Tensor", TORCH_FN(sparseDiv));
  m.impl("div_.Tensor", TORCH_FN(divInPlace));
  m.impl("neg", TORCH_FN(sparseNeg));
  m.impl("sparse_mask", TORCH_FN(sparseMask));
  m.impl("_sparse_mask_projection", TORCH_FN(sparseMaskProjection));
  m.impl("sum", TORCH_FN(sumAll));
  m.impl("_sparse_sum.dim", TORCH_FN(sparseSumDim));
  m.impl("_sparse_sum.dim_dtype", TORCH_FN(sparseSumDimDtype));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_to_sparse.sparse_dim", TORCH_FN(toSparseSparseDim));
  m.impl("_to_sparse", TORCH_FN(toSparse));
}

}  // namespace torch_tpu
