// Compressed sparse tensors on tpu (CSR and CSC: the SparseCsrPrivateUse1 key). Like COO tensors (eager/sparse.cpp)
// they are PyTorch's own SparseCsrTensorImpl over dense tpu tensors (compressed indices, plain indices, values), so
// construction, the accessors, clones and moves between devices are PyTorch's device-generic kernels. What needs the
// data goes through COO, written with dense tpu ops:
//  - compressed -> COO: each stored element's compressed index is a search of its position in the compressed index
//    tensor (searchsorted, on the device); CSR gives a coalesced COO tensor, CSC an uncoalesced one;
//  - COO -> compressed: coalesce, count the elements of each row (column) with index_add, cumsum; CSC sorts the
//    elements column-major first;
//  - to_dense, dense.to_sparse_csr()/to_sparse_csc(), sparse @ dense (mm, addmm, torch.sparse.mm), sums, add, mul,
//    div and neg through those conversions.
// Block layouts (BSR, BSC) and batched compressed tensors raise NotImplementedError naming what is supported.
#include <ATen/ATen.h>
#include <ATen/SparseCsrTensorUtils.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/ccol_indices_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/col_indices_native.h>
#include <ATen/ops/crow_indices_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/row_indices_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/values_native.h>
#include <torch/library.h>

namespace torch_tpu {

namespace {

bool compressed(const at::Tensor& t) {
  const at::Layout l = t.layout();
  return l == at::kSparseCsr || l == at::kSparseCsc || l == at::kSparseBsr || l == at::kSparseBsc;
}

// The layouts and shapes handled here: CSR and CSC without batch dimensions (dense dimensions allowed).
void checkSupported(const at::Tensor& t, const char* what) {
  TORCH_CHECK_NOT_IMPLEMENTED(t.layout() == at::kSparseCsr || t.layout() == at::kSparseCsc, "tpu: ", what, " of a ",
                              t.layout(), " tensor is not supported; compressed sparse tpu tensors are CSR or CSC "
                              "(block layouts: convert to CSR, COO or dense)");
  TORCH_CHECK_NOT_IMPLEMENTED(at::sparse_csr::numBatchDimensions(t) == 0, "tpu: ", what, " of a batched ",
                              t.layout(), " tensor is not supported (compressed sparse tpu tensors have no batch "
                              "dimensions)");
}

// The compressed index of each stored element: stored element k lies in row (column) r when
// compressed[r] <= k < compressed[r + 1].
at::Tensor expandCompressed(const at::Tensor& compressed_indices, int64_t nnz) {
  at::Tensor pos = at::arange(nnz, compressed_indices.options());
  return at::searchsorted(compressed_indices.slice(0, 1), pos, /*out_int32=*/false, /*right=*/true);
}

at::Tensor toCoo(const at::Tensor& self) {
  checkSupported(self, "conversion to COO");
  const bool csr = self.layout() == at::kSparseCsr;
  at::Tensor comp = csr ? self.crow_indices() : self.ccol_indices();
  at::Tensor plain = (csr ? self.col_indices() : self.row_indices()).to(at::kLong);
  at::Tensor values = self.values();
  const int64_t nnz = self._nnz();
  at::Tensor major = expandCompressed(comp, nnz).to(at::kLong);
  at::Tensor indices = csr ? at::stack({major, plain}) : at::stack({plain, major});
  const int64_t dense_dim = self.dense_dim();
  return at::_sparse_coo_tensor_with_dims_and_tensors(2, dense_dim, self.sizes(), indices, values,
                                                      values.options().layout(at::kSparse),
                                                      /*is_coalesced=*/csr);
}

// A COO tensor with two sparse dimensions as CSR (or CSC), int64 indices.
at::Tensor fromCoo(const at::Tensor& coo, at::Layout layout) {
  TORCH_CHECK_NOT_IMPLEMENTED(layout == at::kSparseCsr || layout == at::kSparseCsc, "tpu: conversion to ", layout,
                              " is not supported; compressed sparse tpu tensors are CSR or CSC");
  TORCH_CHECK_NOT_IMPLEMENTED(coo.sparse_dim() == 2, "tpu: conversion to ", layout, " needs a sparse tensor with two sparse "
              "dimensions (batched compressed tensors are not supported), got ", coo.sparse_dim());
  at::Tensor c = coo.coalesce();
  at::Tensor indices = c._indices(), values = c._values();
  const bool csr = layout == at::kSparseCsr;
  at::Tensor major = indices.select(0, csr ? 0 : 1), plain = indices.select(0, csr ? 1 : 0);
  if (!csr) {  // column-major order: sort by (column, row)
    at::Tensor order = major.mul(coo.size(0)).add(plain).argsort();
    major = major.index_select(0, order);
    plain = plain.index_select(0, order);
    values = values.index_select(0, order);
  }
  const int64_t n = coo.size(csr ? 0 : 1);
  at::Tensor counts = at::zeros({n}, indices.options()).index_add_(0, major, at::ones_like(major));
  at::Tensor comp = at::cat({at::zeros({1}, indices.options()), counts.cumsum(0)});
  return at::_sparse_compressed_tensor_unsafe(comp, plain.contiguous(), values, coo.sizes(),
                                              values.options().layout(layout));
}

at::Tensor compressedToDense(const at::Tensor& self, std::optional<at::ScalarType> dtype,
                             std::optional<bool> masked_grad) {
  return toCoo(self)._to_dense(dtype, masked_grad);
}

at::Tensor compressedToSparseDim(const at::Tensor& self, int64_t sparse_dim) {
  TORCH_CHECK(sparse_dim == 2, "sparse dim 1 is not supported by sparse_csr_to_dense");  // CPU's own limit
  return toCoo(self);
}

at::Tensor compressedToSparse(const at::Tensor& self, std::optional<at::Layout> layout,
                              at::OptionalIntArrayRef blocksize, std::optional<int64_t> dense_dim) {
  const at::Layout to = layout.value_or(at::kSparse);
  if (to == at::kSparse) return toCoo(self);
  TORCH_CHECK_NOT_IMPLEMENTED(!blocksize.has_value() && !dense_dim.has_value(), "tpu: conversion to ", to,
                              " with a blocksize or dense_dim is not supported");
  if (to == self.layout()) return self;
  return fromCoo(toCoo(self), to);
}

at::Tensor compressedToCsr(const at::Tensor& self, std::optional<int64_t> dense_dim) {
  TORCH_CHECK_NOT_IMPLEMENTED(!dense_dim.has_value(), "tpu: to_sparse_csr with dense_dim is not supported");
  if (self.layout() == at::kSparseCsr) return self;
  return fromCoo(toCoo(self), at::kSparseCsr);
}

at::Tensor compressedToCsc(const at::Tensor& self, std::optional<int64_t> dense_dim) {
  TORCH_CHECK_NOT_IMPLEMENTED(!dense_dim.has_value(), "tpu: to_sparse_csc with dense_dim is not supported");
  if (self.layout() == at::kSparseCsc) return self;
  return fromCoo(toCoo(self), at::kSparseCsc);
}

// dense or COO -> CSR / CSC (the PrivateUse1 and SparsePrivateUse1 kernels).
at::Tensor toCompressed(const at::Tensor& self, at::Layout layout, std::optional<int64_t> dense_dim) {
  TORCH_CHECK_NOT_IMPLEMENTED(!dense_dim.has_value() || *dense_dim == 0, "tpu: conversion to ", layout,
                              " with dense dimensions is not supported");
  if (self.layout() == at::kSparse) return fromCoo(self, layout);
  TORCH_CHECK_NOT_IMPLEMENTED(self.dim() == 2, "tpu: conversion of a ", self.dim(), "-d tensor to ", layout, " is not supported "
              "(compressed sparse tpu tensors are 2-d, without batch dimensions)");
  return fromCoo(self._to_sparse(2), layout);
}

at::Tensor toCsr(const at::Tensor& self, std::optional<int64_t> dense_dim) {
  return toCompressed(self, at::kSparseCsr, dense_dim);
}
at::Tensor toCsc(const at::Tensor& self, std::optional<int64_t> dense_dim) {
  return toCompressed(self, at::kSparseCsc, dense_dim);
}

at::Tensor toBlocked(const at::Tensor& self, at::IntArrayRef /*blocksize*/, std::optional<int64_t> /*dense_dim*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu: block sparse layouts (BSR, BSC) are not supported; sparse tpu tensors "
                                     "are COO, CSR or CSC");
}

at::Tensor& copyCompressed(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  TORCH_CHECK(self.layout() == src.layout(), "copy_: a ", src.layout(), " tensor cannot be copied into a ",
              self.layout(), " tensor");
  TORCH_CHECK(self.sizes() == src.sizes(), "copy_sparse_compressed_: self and src have different sizes");
  TORCH_CHECK(self._nnz() == src._nnz(), "copy_sparse_compressed_: self and src have different number of specified "
              "elements, ", self._nnz(), " and ", src._nnz());
  checkSupported(self, "copy_");
  const bool csr = self.layout() == at::kSparseCsr;
  (csr ? self.crow_indices() : self.ccol_indices()).copy_(csr ? src.crow_indices() : src.ccol_indices(), non_blocking);
  (csr ? self.col_indices() : self.row_indices()).copy_(csr ? src.col_indices() : src.row_indices(), non_blocking);
  self.values().copy_(src.values(), non_blocking);
  return self;
}

at::Tensor compressedMm(const at::Tensor& self, const at::Tensor& mat2) {
  TORCH_CHECK_NOT_IMPLEMENTED(!(compressed(self) && compressed(mat2)), "tpu: the product of two compressed sparse "
                              "tensors is not supported (convert one to dense)");
  if (compressed(self)) return at::mm(toCoo(self), mat2);
  return at::mm(self, mat2.to_dense());
}

at::Tensor compressedAddmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                           const at::Scalar& beta, const at::Scalar& alpha) {
  TORCH_CHECK_NOT_IMPLEMENTED(!compressed(self) && !(compressed(mat1) && compressed(mat2)),
                              "tpu: addmm with a compressed sparse result is not supported (its input must be dense)");
  return at::addmm(self, compressed(mat1) ? toCoo(mat1) : mat1, compressed(mat2) ? mat2.to_dense() : mat2, beta,
                   alpha);
}

at::Tensor& compressedAddmmOut(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                               const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  TORCH_CHECK_NOT_IMPLEMENTED(!compressed(out), "tpu: addmm into a compressed sparse tensor is not supported");
  at::Tensor r = compressedAddmm(self, mat1, mat2, beta, alpha);
  if (out.sizes() != r.sizes()) out.resize_(r.sizes());
  return out.copy_(r);
}

// Elementwise ops: through COO, the result back in the compressed operand's layout when it is sparse.
at::Tensor backTo(const at::Tensor& r, at::Layout layout) { return r.layout() == at::kSparse ? fromCoo(r, layout) : r; }
at::Tensor asCoo(const at::Tensor& t) { return compressed(t) ? toCoo(t) : t; }
at::Layout layoutOf(const at::Tensor& a, const at::Tensor& b) { return compressed(a) ? a.layout() : b.layout(); }

at::Tensor compressedAdd(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return backTo(at::add(asCoo(self), asCoo(other), alpha), layoutOf(self, other));
}
at::Tensor compressedMul(const at::Tensor& self, const at::Tensor& other) {
  return backTo(at::mul(asCoo(self), asCoo(other)), layoutOf(self, other));
}
at::Tensor compressedDiv(const at::Tensor& self, const at::Tensor& other) {
  return backTo(at::div(asCoo(self), asCoo(other)), layoutOf(self, other));
}
at::Tensor compressedNeg(const at::Tensor& self) { return backTo(at::neg(toCoo(self)), self.layout()); }
at::Tensor compressedSum(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  return self.values().sum(dtype);
}

// torch.sparse_csr_tensor(..., check_invariants=True) and friends: PyTorch's index checks, on host copies.
void validateIndices(bool is_crow, const at::Tensor& compressed_idx, const at::Tensor& plain_idx, int64_t cdim,
                     int64_t dim, int64_t nnz) {
  at::_validate_compressed_sparse_indices(is_crow, compressed_idx.cpu(), plain_idx.cpu(), cdim, dim, nnz);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("crow_indices", TORCH_FN(at::native::crow_indices_sparse_csr));
  m.impl("col_indices", TORCH_FN(at::native::col_indices_sparse_csr));
  m.impl("ccol_indices", TORCH_FN(at::native::ccol_indices_sparse_csr));
  m.impl("row_indices", TORCH_FN(at::native::row_indices_sparse_csr));
  m.impl("values", TORCH_FN(at::native::values_sparse_csr));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse_csr));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse_csr));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse_csr));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse_compressed_symint));
  m.impl("clone", TORCH_FN(at::native::clone_sparse_compressed));
  m.impl("copy_", TORCH_FN(copyCompressed));
  m.impl("_to_dense", TORCH_FN(compressedToDense));
  m.impl("_to_sparse.sparse_dim", TORCH_FN(compressedToSparseDim));
  m.impl("_to_sparse", TORCH_FN(compressedToSparse));
  m.impl("_to_sparse_csr", TORCH_FN(compressedToCsr));
  m.impl("_to_sparse_csc", TORCH_FN(compressedToCsc));
  m.impl("_to_sparse_bsr", TORCH_FN(toBlocked));
  m.impl("_to_sparse_bsc", TORCH_FN(toBlocked));
  m.impl("mm", TORCH_FN(compressedMm));
  m.impl("addmm", TORCH_FN(compressedAddmm));
  m.impl("addmm.out", TORCH_FN(compressedAddmmOut));
  m.impl("add.Tensor", TORCH_FN(compressedAdd));
  m.impl("mul.Tensor", TORCH_FN(compressedMul));
  m.impl("div.Tensor", TORCH_FN(compressedDiv));
  m.impl("neg", TORCH_FN(compressedNeg));
  m.impl("sum", TORCH_FN(compressedSum));
}

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_to_sparse_csr", TORCH_FN(toCsr));
  m.impl("_to_sparse_csc", TORCH_FN(toCsc));
  m.impl("_to_sparse_bsr", TORCH_FN(toBlocked));
  m.impl("_to_sparse_bsc", TORCH_FN(toBlocked));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_to_sparse_csr", TORCH_FN(toCsr));
  m.impl("_to_sparse_csc", TORCH_FN(toCsc));
  m.impl("_to_sparse_bsr", TORCH_FN(toBlocked));
  m.impl("_to_sparse_bsc", TORCH_FN(toBlocked));
  m.impl("_validate_compressed_sparse_indices", TORCH_FN(validateIndices));
}

}  // namespace torch_tpu
