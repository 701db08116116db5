// Ops whose result size depends on the data: nonzero, masked_select, bincount, and advanced indexing with boolean
// masks (index, index_put). Each synchronizes with the host once to learn the size (a count computed on the device),
// then computes the result on the device with lowered ATen ops of known size (cumsum, where, scatter, gather):
// no CPU fallback. Integer indexing takes no detour: index goes to the lowered _unsafe_index, index_put to the
// lowered _unsafe_index_put (the lowering rules of index.Tensor / index_put / _index_put_impl serve graphs only).
//
// Also: a Meta kernel for _fused_sgd_ (PyTorch has none), so its lowering rule can run (the lowering kernel asks
// the meta kernels for argument checks).
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <c10/util/irange.h>
#include <torch/library.h>

namespace torch_tpu {
namespace {

at::TensorOptions longOpts(const at::Tensor& like) { return like.options().dtype(at::kLong); }

// Flat positions (int64, ascending) of the `count` true elements of a 1-d bool tensor on the device.
at::Tensor trueFlatPositions(const at::Tensor& flat_mask, int64_t count) {
  const int64_t n = flat_mask.numel();
  auto opts = longOpts(flat_mask);
  if (count == 0 || n == 0) return at::empty({0}, opts);
  at::Tensor pos = at::cumsum(flat_mask, 0, at::kLong).sub_(1);
  // False elements go to a scratch slot past the end, dropped below.
  at::Tensor target = at::where(flat_mask, pos, at::scalar_tensor(count, opts));
  at::Tensor out = at::zeros({count + 1}, opts).scatter_(0, target, at::arange(n, opts));
  return out.narrow(0, 0, count);
}

// Multi-dimensional coordinates [count, rank] of flat positions in a tensor of `sizes`.
at::Tensor unflatten(const at::Tensor& flat, c10::IntArrayRef sizes) {
  const int64_t rank = static_cast<int64_t>(sizes.size());
  if (rank == 0) return at::zeros({flat.size(0), 0}, flat.options());
  std::vector<at::Tensor> cols;
  int64_t stride = 1;
  std::vector<int64_t> strides(rank);
  for (int64_t d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= sizes[d];
  }
  for (int64_t d = 0; d < rank; ++d) {
    at::Tensor c = strides[d] == 1 ? flat : at::div(flat, strides[d], "floor");
    if (d > 0) c = at::remainder(c, sizes[d]);
    cols.push_back(c);
  }
  return at::stack(cols, 1);
}

int64_t countTrue(const at::Tensor& flat_mask) { return flat_mask.sum().item<int64_t>(); }

at::Tensor tpu_nonzero(const at::Tensor& self) {
  at::Tensor flat = (self.dim() == 0 ? self.reshape({1}) : self.reshape({-1})).ne(0);
  int64_t count = countTrue(flat);
  at::Tensor pos = trueFlatPositions(flat, count);
  return unflatten(pos, self.sizes());
}

// bincount(self, weights, minlength): the number of bins is max(self) + 1 (at least minlength), read from the
// device together with min(self) for CPU's check (one host read); the counts are an index_add on the device. As on
// CPU, an empty input gives minlength int64 zeros, and the result is int64 counts, float32 sums of float32 weights,
// float64 sums of any other weights.
at::Tensor tpu_bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights_opt, int64_t minlength) {
  TORCH_CHECK_NOT_IMPLEMENTED(!c10::isFloatingType(self.scalar_type()) && !c10::isComplexType(self.scalar_type()) &&
                                  self.scalar_type() != at::kBool,
              "\"bincount_cpu\" not implemented for '", c10::toString(self.scalar_type()), "'");
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  if (self.dim() == 1 && self.numel() == 0) return at::zeros({minlength}, longOpts(self));
  at::Tensor host = self.dim() == 1 ? at::stack({self.min(), self.max()}).to(at::kLong).cpu() : at::Tensor();
  TORCH_CHECK(self.dim() == 1 && host[0].item<int64_t>() >= 0,
              "bincount only supports 1-d non-negative integral inputs.");
  const bool has_weights = weights_opt.has_value() && weights_opt->defined();
  if (has_weights)
    TORCH_CHECK(weights_opt->dim() == 1 && weights_opt->size(0) == self.size(0),
                "weights should be 1-d and have the same length as input");
  const int64_t nbins = std::max(host[1].item<int64_t>() + 1, minlength);
  if (!has_weights) return at::zeros({nbins}, longOpts(self)).index_add_(0, self, at::ones_like(self, at::kLong));
  const at::ScalarType t = weights_opt->scalar_type() == at::kFloat ? at::kFloat : at::kDouble;
  return at::zeros({nbins}, weights_opt->options().dtype(t)).index_add_(0, self, weights_opt->to(t));
}

at::Tensor& tpu_nonzero_out(const at::Tensor& self, at::Tensor& out) {
  at::Tensor r = tpu_nonzero(self);
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero: Expected out tensor to have scalar type Long but got scalar type",
              out.scalar_type());
  if (out.sizes() != r.sizes()) out.resize_(r.sizes());
  out.copy_(r);
  return out;
}

at::Tensor tpu_masked_select(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  TORCH_CHECK(self.device() == mask.device() || mask.dim() == 0,
              "Expected all tensors to be on the same device, but found at least two devices, ", self.device(), " and ",
              mask.device(), "!");
  auto [s, m] = at::expand_outplace(self, mask.device() == self.device() ? mask : mask.to(self.device()));
  at::Tensor flat_mask = m->reshape({-1});
  int64_t count = countTrue(flat_mask);
  at::Tensor pos = trueFlatPositions(flat_mask, count);
  at::Tensor flat = s->reshape({-1});
  if (count == 0) return at::empty({0}, self.options());
  return at::gather(flat, 0, pos);
}

at::Tensor& tpu_masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, mask);
  at::Tensor r = tpu_masked_select(self, mask);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "masked_select(): self and result must have the same scalar type");
  if (out.sizes() != r.sizes()) out.resize_(r.sizes());
  out.copy_(r);
  return out;
}

// nonzero_static(self, size, fill_value): the first `size` coordinates, padded with fill_value. The size is known:
// no host round trip.
at::Tensor tpu_nonzero_static(const at::Tensor& self, int64_t size, int64_t fill_value) {
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer");
  auto opts = longOpts(self);
  at::Tensor flat = (self.dim() == 0 ? self.reshape({1}) : self.reshape({-1})).ne(0);
  const int64_t n = flat.numel();
  if (size == 0) return at::empty({0, self.dim()}, opts);
  at::Tensor buf = at::full({size + 1}, -1, opts);
  if (n > 0) {
    at::Tensor pos = at::cumsum(flat, 0, at::kLong).sub_(1);
    at::Tensor keep = at::logical_and(flat, pos.lt(size));
    at::Tensor target = at::where(keep, pos, at::scalar_tensor(size, opts));
    buf = buf.scatter(0, target, at::arange(n, opts));
  }
  at::Tensor idx = buf.narrow(0, 0, size);
  at::Tensor coords = unflatten(idx.clamp_min(0), self.sizes());
  return at::where(idx.lt(0).unsqueeze(1), at::scalar_tensor(fill_value, opts), coords);
}

// Boolean (and uint8) masks in an index list become the integer coordinates of their true elements.
c10::List<std::optional<at::Tensor>> expandMasks(const at::Tensor& self,
                                                 const c10::List<std::optional<at::Tensor>>& indices) {
  c10::List<std::optional<at::Tensor>> out;
  int64_t dim = 0;
  for (const std::optional<at::Tensor>& o : indices) {
    if (!o.has_value() || !o->defined()) {
      out.push_back(std::nullopt);
      ++dim;
      continue;
    }
    at::Tensor idx = o->device() == self.device() ? *o : o->to(self.device());
    if (idx.scalar_type() == at::kBool || idx.scalar_type() == at::kByte) {
      for (int64_t j = 0; j < idx.dim(); ++j) {
        TORCH_CHECK_INDEX(dim + j < self.dim(), "too many indices for tensor of dimension ", self.dim());
        TORCH_CHECK_INDEX(idx.size(j) == self.size(dim + j), "The shape of the mask ", idx.sizes(), " at index ", j,
                          " does not match the shape of the indexed tensor ", self.sizes(), " at index ", dim + j);
      }
      at::Tensor coords = tpu_nonzero(idx.scalar_type() == at::kBool ? idx : idx.ne(0));
      for (int64_t j = 0; j < idx.dim(); ++j) out.push_back(coords.select(1, j));
      dim += idx.dim();
    } else {
      out.push_back(idx);
      ++dim;
    }
  }
  return out;
}

bool hasMask(const c10::List<std::optional<at::Tensor>>& indices) {
  for (const std::optional<at::Tensor>& o : indices)
    if (o.has_value() && o->defined() && (o->scalar_type() == at::kBool || o->scalar_type() == at::kByte)) return true;
  return false;
}

bool hasZeroDimMask(const c10::List<std::optional<at::Tensor>>& indices) {
  for (const std::optional<at::Tensor>& o : indices)
    if (o.has_value() && o->defined() && o->dim() == 0 &&
        (o->scalar_type() == at::kBool || o->scalar_type() == at::kByte))
      return true;
  return false;
}

// A lone mask with one value is a select: the lowered rule does it without a host round trip.
bool loneMaskOneValue(const c10::List<std::optional<at::Tensor>>& indices, const at::Tensor& values) {
  int present = 0, masks = 0;
  for (const std::optional<at::Tensor>& o : indices) {
    if (!o.has_value() || !o->defined()) continue;
    ++present;
    if (o->scalar_type() == at::kBool || o->scalar_type() == at::kByte) ++masks;
  }
  return present == 1 && masks == 1 && values.numel() == 1;
}

c10::List<std::optional<at::Tensor>> onDevice(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& in) {
  c10::List<std::optional<at::Tensor>> out;
  for (const std::optional<at::Tensor>& o : in) {
    if (o.has_value() && o->defined() && o->device() != self.device()) out.push_back(o->to(self.device()));
    else out.push_back(o);
  }
  return out;
}

// Index tensors must be integers or masks (IndexError, as on CPU); uint8 masks are deprecated (CPU's warning, once
// per mask). Without masks, index i indexes dimension i: any index of a non-empty index tensor into a dimension of
// size 0 is out of bounds, which CPU's kernel reports as an IndexError (no device check can: there is no element to
// read).
void checkIndexTypes(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  bool masks = false;
  for (const std::optional<at::Tensor>& o : indices) {
    if (!o.has_value() || !o->defined()) continue;
    // PyTorch's rule: indices on the CPU or on the indexed tensor's device (a CPU tensor indexed by tpu indices).
    TORCH_CHECK(o->device() == self.device() || o->is_cpu(),
                "indices should be either on ", c10::kCPU, " or on the same device as the indexed tensor (",
                self.device(), ")");
    const at::ScalarType t = o->scalar_type();
    TORCH_CHECK_INDEX(t == at::kLong || t == at::kInt || t == at::kByte || t == at::kBool,
                      "tensors used as indices must be long, int, byte or bool tensors");
    if (t == at::kByte)
      TORCH_WARN("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead.");
    masks = masks || t == at::kByte || t == at::kBool;
  }
  if (masks) return;
  for (size_t d = 0; d < indices.size() && static_cast<int64_t>(d) < self.dim(); ++d) {
    const std::optional<at::Tensor>& o = indices.get(d);
    if (o.has_value() && o->defined() && o->numel() > 0 && self.size(static_cast<int64_t>(d)) == 0)
      TORCH_CHECK_INDEX(false, "index is out of bounds for dimension with size 0");
  }
}

at::Tensor tpu_index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  checkIndexTypes(self, indices);
  TORCH_CHECK_INDEX(indices.size() <= static_cast<size_t>(self.dim()) || hasMask(indices),
                    "too many indices for tensor of dimension ", self.dim(), " (got ", indices.size(), ")");
  if (!hasMask(indices)) return at::_unsafe_index(self, onDevice(self, indices));
  if (hasZeroDimMask(indices)) {
    // x[True] / x[False]: a new leading dimension of size 1 or 0 (PyTorch semantics).
    c10::List<std::optional<at::Tensor>> rest;
    at::Tensor keep;
    for (const std::optional<at::Tensor>& o : indices) {
      if (o.has_value() && o->defined() && o->dim() == 0 &&
          (o->scalar_type() == at::kBool || o->scalar_type() == at::kByte) && !keep.defined())
        keep = *o;
      else
        rest.push_back(o);
    }
    at::Tensor base = self.unsqueeze(0);
    c10::List<std::optional<at::Tensor>> all;
    all.push_back(tpu_nonzero(keep.reshape({1}).to(self.device())).select(1, 0));
    for (const auto& o : rest) all.push_back(o);
    return tpu_index(base, all);
  }
  return at::_unsafe_index(self, expandMasks(self, indices));
}

at::Tensor tpu_index_put(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                     const at::Tensor& values, bool accumulate) {
  checkIndexTypes(self, indices);
  if (!hasMask(indices) || loneMaskOneValue(indices, values))
    return at::_unsafe_index_put(self, onDevice(self, indices), values, accumulate);
  TORCH_CHECK(!hasZeroDimMask(indices), "tpu: index_put with a 0-d boolean index is not supported");
  return at::_unsafe_index_put(self, expandMasks(self, indices), values, accumulate);
}

at::Tensor& tpu_index_put_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                       const at::Tensor& values, bool accumulate) {
  // PyTorch's checks: neither the values nor an index may overlap self.
  at::assert_no_overlap(self, values);
  for (const std::optional<at::Tensor>& i : indices)
    if (i.has_value() && i->defined()) at::assert_no_overlap(self, *i);
  if (self.numel() > 0 && at::has_internal_overlap(self) == at::MemOverlap::Yes) {
    // An expanded self: PyTorch writes through the aliasing (deprecated, with a warning). The elements written share
    // memory, so the write is done on the host on the storage range self spans, by the CPU kernel itself.
    int64_t extent = 1;
    for (int64_t d = 0; d < self.dim(); ++d) extent += (self.size(d) - 1) * self.stride(d);
    at::Tensor span = self.as_strided({extent}, {1}, self.storage_offset());
    at::Tensor host = span.cpu();
    at::Tensor host_self = host.as_strided(self.sizes(), self.strides(), 0);
    c10::List<std::optional<at::Tensor>> host_indices;
    for (const std::optional<at::Tensor>& i : indices)
      host_indices.push_back(i.has_value() && i->defined() ? std::optional<at::Tensor>(i->cpu()) : i);
    host_self.index_put_(host_indices, values.cpu(), accumulate);
    span.copy_(host);
    return self;
  }
  at::Tensor r = tpu_index_put(self, indices, values, accumulate);
  self.copy_(r);
  return self;
}

at::Tensor& tpu_index_put_impl_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                            const at::Tensor& values, bool accumulate, bool /*unsafe*/) {
  return tpu_index_put_(self, indices, values, accumulate);
}

// unique / unique_consecutive over the flattened tensor: groups start where a (sorted) element differs from its
// predecessor (NaNs never equal, so each is its own group, as on CPU). One host round trip for the group count.
std::tuple<at::Tensor, at::Tensor, at::Tensor> uniqueFlat(const at::Tensor& self, bool sort, bool return_inverse,
                                                          bool return_counts) {
  auto lopts = longOpts(self);
  at::Tensor flat = self.reshape({-1});
  const int64_t n = flat.numel();
  at::Tensor none = at::empty({0}, lopts);
  if (n == 0)
    return {at::empty({0}, self.options()), return_inverse ? at::empty(self.sizes(), lopts) : none,
            return_counts ? at::empty({0}, lopts) : none};
  at::Tensor vals = flat, perm;
  if (sort) std::tie(vals, perm) = flat.sort(/*stable=*/true, 0, false);
  at::Tensor first = at::ones({1}, self.options().dtype(at::kBool));
  at::Tensor is_first = n == 1 ? first : at::cat({first, vals.narrow(0, 1, n - 1).ne(vals.narrow(0, 0, n - 1))}, 0);
  int64_t count = countTrue(is_first);
  at::Tensor starts = trueFlatPositions(is_first, count);
  at::Tensor values = at::gather(vals, 0, starts);
  at::Tensor inverse = none, counts = none;
  if (return_inverse) {
    at::Tensor group = at::cumsum(is_first, 0, at::kLong).sub_(1);
    inverse = sort ? at::zeros({n}, lopts).scatter_(0, perm, group) : group;
    inverse = inverse.reshape(self.sizes());
  }
  if (return_counts) {
    at::Tensor ends = at::cat({starts.narrow(0, 1, count - 1), at::full({1}, n, lopts)}, 0);
    counts = ends.sub(starts);
  }
  return {values, inverse, counts};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_unique2(const at::Tensor& self, bool /*sorted*/,
                                                           bool return_inverse, bool return_counts) {
  return uniqueFlat(self, true, return_inverse, return_counts);
}

std::tuple<at::Tensor, at::Tensor> tpu_unique(const at::Tensor& self, bool /*sorted*/, bool return_inverse) {
  auto r = uniqueFlat(self, true, return_inverse, false);
  return {std::get<0>(r), std::get<1>(r)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_unique_consecutive(const at::Tensor& self, bool return_inverse,
                                                                      bool return_counts, std::optional<int64_t> dim) {
  if (!dim.has_value() || self.dim() <= 1) return uniqueFlat(self, false, return_inverse, return_counts);
  // Along a dimension: a slice starts a group where any of its elements differs from the previous slice.
  const int64_t d = c10::maybe_wrap_dim(*dim, self.dim());
  const int64_t n = self.size(d);
  auto lopts = longOpts(self);
  at::Tensor none = at::empty({0}, lopts);
  if (n == 0) return {self.clone(), return_inverse ? at::empty({0}, lopts) : none, return_counts ? at::empty({0}, lopts) : none};
  at::Tensor first = at::ones({1}, self.options().dtype(at::kBool));
  at::Tensor is_first = first;
  if (n > 1) {
    at::Tensor diff = self.narrow(d, 1, n - 1).ne(self.narrow(d, 0, n - 1)).movedim(d, 0).reshape({n - 1, -1});
    is_first = at::cat({first, diff.numel() ? diff.any(1) : at::zeros({n - 1}, first.options())}, 0);
  }
  int64_t count = countTrue(is_first);
  at::Tensor starts = trueFlatPositions(is_first, count);
  at::Tensor values = at::index_select(self, d, starts);
  at::Tensor inverse = return_inverse ? at::cumsum(is_first, 0, at::kLong).sub_(1) : none;
  at::Tensor counts = none;
  if (return_counts)
    counts = at::cat({starts.narrow(0, 1, count - 1), at::full({1}, n, lopts)}, 0).sub(starts);
  return {values, inverse, counts};
}

// repeat_interleave.Tensor(repeats, *, output_size=None): index k repeated repeats[k] times. The size is the sum of
// repeats (one host round trip unless output_size is given); position j holds the count of cumulative sums <= j.
at::Tensor tpu_repeat_interleave(const at::Tensor& repeats, std::optional<c10::SymInt> output_size) {
  TORCH_CHECK(repeats.dim() == 1 || repeats.dim() == 0, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
              "repeats has to be Long or Int tensor");
  at::Tensor r = repeats.reshape({-1});
  auto lopts = r.options();
  if (r.numel() == 0) return at::empty({0}, lopts);
  at::Tensor cum = at::cumsum(r, 0);
  int64_t total;
  if (output_size.has_value()) {
    total = output_size->guard_int(__FILE__, __LINE__);  // as CPU: no check of the values, no round trip
  } else {
    // One host round trip for the size and CPU's check that no repeat is negative.
    at::Tensor host = at::stack({cum.select(0, r.numel() - 1).to(at::kLong), r.min().to(at::kLong)}).cpu();
    total = host[0].item<int64_t>();
    TORCH_CHECK(host[1].item<int64_t>() >= 0, "repeats can not be negative");
  }
  if (total == 0) return at::empty({0}, lopts);
  return at::searchsorted(cum, at::arange(total, lopts), /*out_int32=*/false, /*right=*/true);
}

// equal(self, other) -> bool: same sizes and every element equal, computed on the device.
bool tpu_equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(), "Cannot compare two tensors on different devices. Got: ", self.device(),
              " and ", other.device());
  TORCH_CHECK(self.dtype() == other.dtype(), "Expected object of scalar type ", self.dtype(), " but got scalar type ",
              other.dtype(), " for argument 'other'");
  if (!self.sizes().equals(other.sizes())) return false;
  if (self.numel() == 0) return true;
  return at::eq(self, other).all().item<bool>();
}

// _fused_sgd_ has no meta kernel in PyTorch: check the list lengths, write nothing.
void fused_sgd_meta(at::TensorList self, at::TensorList grads, at::TensorList momentum_buffer_list,
                    double /*weight_decay*/, double /*momentum*/, double /*lr*/, double /*dampening*/,
                    bool /*nesterov*/, bool /*maximize*/, bool /*is_first_step*/,
                    const std::optional<at::Tensor>& /*grad_scale*/, const std::optional<at::Tensor>& /*found_inf*/) {
  TORCH_CHECK(self.size() == grads.size(), "_fused_sgd_: params and grads must have the same length");
  TORCH_CHECK(momentum_buffer_list.empty() || momentum_buffer_list.size() == self.size(),
              "_fused_sgd_: momentum_buffer_list must be empty or as long as params");
}

void fused_sgd_tensor_lr_meta(at::TensorList self, at::TensorList grads, at::TensorList momentum_buffer_list,
                              double weight_decay, double momentum, const at::Tensor& /*lr*/, double dampening,
                              bool nesterov, bool maximize, bool is_first_step,
                              const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  fused_sgd_meta(self, grads, momentum_buffer_list, weight_decay, momentum, 0.0, dampening, nesterov, maximize,
                 is_first_step, grad_scale, found_inf);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nonzero", TORCH_FN(tpu_nonzero));
  m.impl("nonzero.out", TORCH_FN(tpu_nonzero_out));
  m.impl("bincount", TORCH_FN(tpu_bincount));
  m.impl("equal", TORCH_FN(tpu_equal));
  m.impl("repeat_interleave.Tensor", TORCH_FN(tpu_repeat_interleave));
  m.impl("_unique2", TORCH_FN(tpu_unique2));
  m.impl("_unique", TORCH_FN(tpu_unique));
  m.impl("unique_consecutive", TORCH_FN(tpu_unique_consecutive));
  m.impl("nonzero_static", TORCH_FN(tpu_nonzero_static));
  m.impl("masked_select", TORCH_FN(tpu_masked_select));
  m.impl("masked_select.out", TORCH_FN(tpu_masked_select_out));
  m.impl("index.Tensor", TORCH_FN(tpu_index));
  m.impl("index_put", TORCH_FN(tpu_index_put));
  m.impl("index_put_", TORCH_FN(tpu_index_put_));
  m.impl("_index_put_impl_", TORCH_FN(tpu_index_put_impl_));
}

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("_fused_sgd_", TORCH_FN(fused_sgd_meta));
  m.impl("_fused_sgd_.tensor_lr", TORCH_FN(fused_sgd_tensor_lr_meta));
}

}  // namespace torch_tpu
