// Compressed sparse tensors on tpu (CSR and CSC: the SparseCsrPrivateUse1 key). Like COO tensors (eager/sparse.cpp)
// they are PyTorch's own SparseCsrTensorImpl over dense tpu tensors (compressed indices, plain indices, values), so
// construction, the accessors, clones and moves between devices are PyTorch's device-generic kernels. What needs the
// data goes through COO, written with dense tpu ops:
//  - compressed -> COO: each stored element's compressed index is a search of its position in the compressed index
//    tensor (searchsorted, on the device); CSR gives a coalesced COO tensor, CSC an uncoalesced one;
//  - COO -> compressed: coalesce, count the elements of each row (column) with index_add, cumsum; CSC sorts the
//    elements column-major first;
//  - to_dense, dense.to_sparse_csr()/to_sparse_csc(), sparse @ dense (mm, addmm, torch.sparse.mm), sums, add, mul,
//    div and neg through those conversions;
//  - the two CSR products GNN code uses, on the stored elements' row indices: torch.sparse.sampled_addmm (a dense
//    product evaluated at self's pattern) and torch.sparse.mm(csr, dense, reduce) (sum, mean, amax or amin over each
//    row's stored elements, with the arg indices autograd keeps for amax and amin).
// Block layouts (BSR, BSC) and batched compressed tensors raise NotImplementedError naming what is supported.
#include <ATen/ATen.h>
#include <ATen/SparseCsrTensorUtils.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorUtils.h>
#include <ATen/native/ReductionType.h>

#include <cmath>
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

namespace at::native::sparse {
// PyTorch's own argument checks of sampled_addmm (exported by libtorch_cpu; its header is not installed).
TORCH_API void sparse_sampled_addmm_check_inputs(const Tensor& self, const Tensor& mat1, const Tensor& mat2,
                                                 const Scalar& beta, const Scalar& alpha, const Tensor& result);
}  // namespace at::native::sparse

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

// The compressed index of each stored element (int64): stored element k lies in row (column) r when
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
  at::Tensor major = expandCompressed(comp, nnz);
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

// A COO tensor to another layout (Tensor.to_sparse(layout=...), to_dense's backward of a CSR input), as CPU's
// sparse_coo_to_sparse does.
at::Tensor cooToSparse(const at::Tensor& self, std::optional<at::Layout> layout, at::OptionalIntArrayRef blocksize,
                       std::optional<int64_t> dense_dim) {
  const at::Layout to = layout.value_or(at::kSparse);
  TORCH_CHECK_NOT_IMPLEMENTED(!blocksize.has_value() || to == at::kSparseBsr || to == at::kSparseBsc,
                              "tpu: conversion to ", to, " with a blocksize is not supported");
  switch (to) {
    case at::kStrided:
      return self.to_dense();
    case at::kSparseCsr:
    case at::kSparseCsc:
      return toCompressed(self, to, dense_dim);
    case at::kSparseBsr:
    case at::kSparseBsc:
      return toBlocked(self, {}, dense_dim);
    default:
      break;
  }
  TORCH_CHECK(false, "sparse_coo_to_sparse: ", self.layout(), " to ", to, " conversion not supported");
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

// torch.sparse.sampled_addmm: beta * self + alpha * (mat1 @ mat2), evaluated only at self's stored elements (the
// result has self's pattern): each stored (r, c) is the dot product of mat1's row r and mat2's column c.
at::Tensor sampledAddmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                        const at::Scalar& alpha) {
  at::Tensor result = at::empty({0, 0}, self.options());
  at::native::sparse::sparse_sampled_addmm_check_inputs(self, mat1, mat2, beta, alpha, result);
  checkSupported(self, "sampled_addmm");
  TORCH_CHECK_NOT_IMPLEMENTED(mat1.dim() == 2 && mat2.dim() == 2, "tpu: sampled_addmm of batched matrices is not "
                              "supported (compressed sparse tpu tensors have no batch dimensions)");
  at::Tensor crow = self.crow_indices(), col = self.col_indices();
  const int64_t nnz = self._nnz();
  at::Tensor values = self.values().mul(beta);
  if (mat1.numel() > 0 && mat2.numel() > 0 && nnz > 0) {
    at::Tensor rows = expandCompressed(crow, nnz);
    at::Tensor dots = mat1.index_select(0, rows).mul(mat2.t().index_select(0, col.to(at::kLong))).sum(-1);
    values = values.add(dots, alpha);
  }
  return at::_sparse_compressed_tensor_unsafe(crow.clone(), col.clone(), values, self.sizes(), self.options());
}

at::Tensor& sampledAddmmOut(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                            const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  at::Tensor r = sampledAddmm(self, mat1, mat2, beta, alpha);
  at::native::sparse::sparse_sampled_addmm_check_inputs(self, mat1, mat2, beta, alpha, out);
  at::sparse_csr::get_sparse_csr_impl(out)->set_member_tensors(r.crow_indices(), r.col_indices(), r.values(),
                                                              r.sizes());
  return out;
}

// CPU's checks of the dense operand of sparse.mm with reduce= (argument `pos` of `c`): strided, self's dtype, as
// many rows as self has columns.
void checkMmReduceOther(at::CheckedFrom c, const at::Tensor& self, const at::Tensor& other, int pos) {
  at::checkLayout(c, other, at::kStrided);
  at::checkScalarType(c, {other, "other", pos}, self.values().scalar_type());
  at::check_dim_size(other, 2, 0, self.size(1));
}

// torch.sparse.mm(csr, dense, reduce): out[m] = reduce over row m's stored elements e of values[e] * other[col[e]]
// (0 for an empty row), accumulated in the values' opmath type as CPU's kernel does. With autograd recording an
// amax or amin, also the stored element each result came from (CPU's rule: the first strictly greater, or smaller,
// than -inf, or inf, and every NaN after it; nnz for none), which the backward reads.
std::tuple<at::Tensor, at::Tensor> sparseMmReduce(const at::Tensor& self, const at::Tensor& other,
                                                  c10::string_view reduce) {
  TORCH_CHECK(self.layout() == at::kSparseCsr, "sparse_mm_reduce: expect self to be SparseCsr, got ", self.layout());
  TORCH_CHECK(self.dense_dim() == 0, "sparse_mm_reduce: expected non-hybrid self tensor.");
  TORCH_CHECK(self.dim() == 2, "sparse_mm_reduce: expected self to be a 2-D tensor, got ", self.dim(), "-D tensor.");
  checkMmReduceOther("sparse_mm_reduce", self, other, 1);
  const at::native::ReductionType op = at::native::get_reduction_enum(reduce);
  TORCH_CHECK(op != at::native::ReductionType::PROD, "sparse_mm_reduce: reduce type of prod has not been enabled.")
  using at::native::ReductionType;
  at::Tensor col = self.col_indices();
  const int64_t nnz = self._nnz(), m = self.size(0), n = other.size(1);
  const bool extreme = op == ReductionType::MAX || op == ReductionType::MIN;
  const bool need_arg = at::GradMode::is_enabled() && (self.requires_grad() || other.requires_grad()) && extreme;
  at::Tensor arg = need_arg ? at::full({m, n}, nnz, col.options()) : at::empty({0}, col.options());
  if (nnz == 0) return {at::zeros({m, n}, other.options()), arg};
  const at::ScalarType acc = at::toOpMathType(other.scalar_type());
  at::Tensor rows = expandCompressed(self.crow_indices(), nnz);
  at::Tensor contrib = self.values().to(acc).unsqueeze(1).mul(other.index_select(0, col.to(at::kLong)).to(acc));
  at::Tensor out = at::zeros({m, n}, contrib.options());
  if (op == ReductionType::SUM) {
    out.index_add_(0, rows, contrib);
  } else {
    out.index_reduce_(0, rows, contrib, op == ReductionType::MEAN ? "mean" : op == ReductionType::MAX ? "amax" : "amin",
                      /*include_self=*/false);
  }
  if (need_arg) {
    at::Tensor e = at::arange(nnz, contrib.options().dtype(at::kLong)).unsqueeze(1).expand({nnz, n});
    const double init = op == ReductionType::MAX ? -INFINITY : INFINITY;
    at::Tensor at_row = out.index_select(0, rows);
    at::Tensor wins = contrib.eq(at_row).logical_and(contrib.ne(init));
    at::Tensor first = at::full({m, n}, nnz, e.options())
                           .index_reduce_(0, rows, at::where(wins, e, nnz), "amin", /*include_self=*/true);
    at::Tensor last_nan = at::full({m, n}, -1, e.options())
                              .index_reduce_(0, rows, at::where(contrib.isnan(), e, -1), "amax", true);
    arg = at::where(out.isnan(), last_nan, first).to(col.scalar_type());
  }
  return {out.to(other.scalar_type()), arg};
}

// The backward of sparseMmReduce. Sum and mean: each stored element's gradient is the dot product of its row of
// grad_out (divided by the row's count for mean) and its column's row of `other`; other's gradient gathers the
// stored values times grad_out's rows. Amax and amin: only the stored element each result came from (arg_out)
// receives gradient.
std::tuple<at::Tensor, at::Tensor> sparseMmReduceBackward(const at::Tensor& self, const at::Tensor& grad_out,
                                                          const at::Tensor& other, c10::string_view reduce,
                                                          const at::Tensor& arg_out, std::array<bool, 2> mask) {
  TORCH_CHECK(self.layout() == at::kSparseCsr, "sparse_mm_reduce_backward: expect self to be SparseCsr, got ",
              self.layout());
  const at::CheckedFrom c = "sparse_mm_reduce_backward";
  at::checkLayout(c, grad_out, at::kStrided);
  at::checkScalarType(c, {grad_out, "grad_out", 1}, self.values().scalar_type());
  at::check_dim_size(grad_out, 2, 0, self.size(0));
  at::check_dim_size(grad_out, 2, 1, other.size(1));
  checkMmReduceOther(c, self, other, 2);
  using at::native::ReductionType;
  const ReductionType op = at::native::get_reduction_enum(reduce);
  at::Tensor crow = self.crow_indices(), col = self.col_indices(), values = self.values();
  const int64_t nnz = self._nnz();
  at::Tensor rows = expandCompressed(crow, nnz), cols = col.to(at::kLong);
  at::Tensor grad_values, grad_other;
  if (op == ReductionType::SUM || op == ReductionType::MEAN) {
    at::Tensor g = grad_out;
    if (op == ReductionType::MEAN) {
      at::Tensor counts = crow.slice(0, 1).sub(crow.slice(0, 0, -1)).clamp_min(1).to(grad_out.scalar_type());
      g = grad_out.div(counts.unsqueeze(1));
    }
    at::Tensor g_rows = g.index_select(0, rows);
    if (mask[0]) grad_values = g_rows.mul(other.index_select(0, cols)).sum(-1);
    if (mask[1]) grad_other = at::zeros_like(other).index_add_(0, cols, values.unsqueeze(1).mul(g_rows));
  } else {
    TORCH_CHECK(op == ReductionType::MAX || op == ReductionType::MIN,
                "sparse_mm_reduce_backward: reduce type of prod has not been enabled.");
    at::Tensor e = arg_out.to(at::kLong);
    at::Tensor valid = e.ne(nnz);
    e = at::where(valid, e, 0);
    at::Tensor col_e = cols.index_select(0, e.flatten()).view(e.sizes());  // other's row each result read
    if (mask[0]) {
      at::Tensor g = at::where(valid, grad_out.mul(other.gather(0, col_e)), 0);
      grad_values = at::zeros({nnz}, values.options()).index_add_(0, e.flatten(), g.flatten());
    }
    if (mask[1]) {
      at::Tensor g = at::where(valid, grad_out.mul(values.index_select(0, e.flatten()).view(e.sizes())), 0);
      grad_other = at::zeros_like(other).scatter_add_(0, col_e, g);
    }
  }
  at::Tensor grad_self;
  if (mask[0])
    grad_self = at::_sparse_compressed_tensor_unsafe(crow.clone(), col.clone(), grad_values, self.sizes(),
                                                     self.options());
  return {grad_self, grad_other};
}

// sparse_mask(self, mask) for a CSR or CSC mask: self's values at mask's stored elements, in mask's layout.
at::Tensor sparseMaskCompressed(const at::Tensor& self, const at::Tensor& mask) {
  checkSupported(mask, "sparse_mask");
  TORCH_CHECK(self.sizes() == mask.sizes(), "sparse_mask(): operands have incompatible sizes; self has size ",
              self.sizes(), " but mask has size ", mask.sizes());
  at::Tensor idx = toCoo(mask)._indices();  // in mask's storage order
  at::Tensor dense = self.layout() == at::kStrided ? self : self.to_dense();
  at::Tensor values = dense.index({idx.select(0, 0), idx.select(0, 1)});
  const bool csr = mask.layout() == at::kSparseCsr;
  at::Tensor comp = csr ? mask.crow_indices() : mask.ccol_indices();
  at::Tensor plain = csr ? mask.col_indices() : mask.row_indices();
  return at::_sparse_compressed_tensor_unsafe(comp.clone(), plain.clone(), values, mask.sizes(),
                                              values.options().layout(mask.layout()));
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
  m.impl("sparse_sampled_addmm", TORCH_FN(sampledAddmm));
  m.impl("sparse_sampled_addmm.out", TORCH_FN(sampledAddmmOut));
  m.impl("_sparse_mm_reduce_impl", TORCH_FN(sparseMmReduce));
  m.impl("_sparse_mm_reduce_impl_backward", TORCH_FN(sparseMmReduceBackward));
  m.impl("sparse_mask", TORCH_FN(sparseMaskCompressed));
}

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_to_sparse", TORCH_FN(cooToSparse));
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
