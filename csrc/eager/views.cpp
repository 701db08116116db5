// Native tensor-metadata kernels: factories of uninitialized tensors, views, resize_ and set_.
// Views never go through the CPU fallback: they are metadata on the same storage.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/InferSize.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/is_set_to_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cstring>

#include "core/client.h"
#include "core/dtype.h"
#include "core/executables.h"
#include "core/launch.h"
#include "core/memory.h"
#include "core/storage.h"
#include "eager/fallback.h"
#include "eager/views.h"
#include "stablehlo/builder.h"

namespace torch_tpu {

namespace {

constexpr c10::DispatchKey kKey = c10::DispatchKey::PrivateUse1;

c10::DeviceGuard guardFor(std::optional<c10::Device> device) {
  c10::Device d = device.value_or(c10::Device(c10::DeviceType::PrivateUse1, currentDevice()));
  if (!d.has_index()) d = c10::Device(c10::DeviceType::PrivateUse1, currentDevice());
  return c10::DeviceGuard(d);
}

void checkDType(c10::ScalarType t) {
  TORCH_CHECK_TYPE(t != at::kComplexDouble || supportedDType(t),
                   "tpu: complex128 tensors are not supported by this plugin (TPUs have no complex128 arithmetic); "
                   "use complex64");
  TORCH_CHECK_TYPE(supportedDType(t), "tpu: tensors of dtype ", t, " are not supported on the tpu device");
}

// As PyTorch's CPU and CUDA factories: with torch.use_deterministic_algorithms(True) and
// torch.utils.deterministic.fill_uninitialized_memory (the default), uninitialized memory is NaN (integers: their
// maximum) instead of whatever the storage holds (here: zeros).
bool fillsUninitialized() {
  const at::Context& ctx = at::globalContext();
  return ctx.deterministicAlgorithms() && ctx.deterministicFillUninitializedMemory();
}

at::Tensor& fillDeterministic(at::Tensor& t) {
  if (C10_UNLIKELY(fillsUninitialized()) && t.numel() > 0) at::native::fill_empty_deterministic_(t);
  return t;
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");  // as CUDA's empty
  auto st = dtype.value_or(c10::get_default_dtype_as_scalartype());
  checkDType(st);
  auto g = guardFor(device);
  at::Tensor t = at::detail::empty_generic(size, tpuAllocator(), c10::DispatchKeySet(kKey), st, memory_format);
  return fillDeterministic(t);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device,
                         std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");  // as CUDA's empty
  auto st = dtype.value_or(c10::get_default_dtype_as_scalartype());
  checkDType(st);
  auto g = guardFor(device);
  at::Tensor t = at::detail::empty_strided_generic(size, stride, tpuAllocator(), c10::DispatchKeySet(kKey), st);
  return fillDeterministic(t);
}

}  // namespace

namespace {

// A buffer of `n` elements holding `old`'s elements first and zeros after (or its first n): a device program.
runtime::BufferPtr resizedBuffer(const runtime::BufferPtr& old, int64_t n, int device) {
  shlo::Builder b;
  const shlo::DType t = shlo::DType(old->type());
  const int64_t m = old->numElements();
  shlo::Value flat = b.reshape(b.parameter(shlo::TensorType{t, old->dims()}), {m});
  shlo::Value out = n >= m ? b.pad(flat, b.zeros(shlo::TensorType{t, {}}), {0}, {n - m}, {0})
                           : b.slice(flat, {0}, {n}, {1});
  runtime::ExecutablePtr exe = core::executableFor(b.finish({out}), core::ExecutableCaches{true, false}).exe;
  static const std::string kName = "grow storage";
  core::LaunchOptions label;
  label.kind = "eager";
  label.name = &kName;
  return core::launchExecutable(*exe, device, {old.get()}, label)[0];
}

}  // namespace

// Grows (or shrinks) a storage, keeping its bytes (resize_ beyond capacity, untyped_storage().resize_()): a device
// program pads or slices the buffer; dtypes no program handles (complex) go through the host, counted.
void resizeStorageBytes(const c10::Storage& storage, size_t newsize) {
  TpuStorage* s = storageOf(storage);
  runtime::BufferPtr old = s->get();
  if (old) {
    const size_t item = runtime::elementSize(old->type());
    const int64_t n = static_cast<int64_t>(newsize / item);
    if (newsize > old->byteSize()) core::checkAllocation(s->device, static_cast<int64_t>(newsize));
    const at::ScalarType st = toScalarType(shlo::DType(old->type()));
    if (supportedDType(st)) {
      s->set(resizedBuffer(old, n, s->device));
    } else {
      noteHostTransfer(std::string("resize_ of a storage of dtype ") + c10::toString(st));
      std::vector<char> bytes(std::max(newsize, old->byteSize()), 0);
      old->toHost(bytes.data(), old->byteSize());
      bytes.resize(newsize / item * item);
      s->set(client().fromHost(bytes.data(), old->type(), {n}, s->device));
    }
  }
  s->resize(newsize);
  storage.unsafeGetStorageImpl()->set_nbytes(newsize);
}

namespace {

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  const int64_t old_nbytes = self.storage().nbytes();
  // As CPU: resizing to the current sizes keeps the strides (an out= view that needs no resize stays a view).
  if (self.sizes() != size) impl->set_sizes_contiguous(size);
  if (memory_format.has_value() && *memory_format != at::MemoryFormat::Preserve)
    impl->empty_tensor_restride(*memory_format);
  if (self.numel() > 0) {
    size_t needed = at::detail::computeStorageNbytes(self.sizes(), self.strides(), self.element_size(),
                                                     static_cast<size_t>(self.storage_offset()));
    if (needed > self.storage().nbytes()) resizeStorageBytes(self.storage(), needed);
  }
  if (C10_UNLIKELY(fillsUninitialized())) at::native::fill_resize_deterministic_(self, old_nbytes);  // as CPU
  return self;
}

at::Tensor& set_storage_offset(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                               c10::IntArrayRef size, c10::IntArrayRef stride) {
  // A byte slice of a storage (core/storage.h): the tensor aliases the sliced storage at the slice's offset, within
  // the slice's bytes (slices are not resizable, as on CPU).
  if (SliceBase sb = sliceBase(source); sb.base.unsafeGetStorageImpl() != source.unsafeGetStorageImpl()) {
    const int64_t item = static_cast<int64_t>(self.element_size());
    TORCH_CHECK(static_cast<int64_t>(sb.offset) % item == 0, "tpu: a tensor of dtype ", self.scalar_type(),
                " cannot start at byte ", sb.offset, " of a storage (a slice's start must be a multiple of its ",
                item, "-byte elements)");
    TORCH_CHECK(storage_offset >= 0, "Tensor: invalid storage offset ", storage_offset);
    const c10::DimVector st = stride.data() != nullptr ? c10::DimVector(stride) : c10::contiguous_strides(size);
    const size_t needed = c10::multiply_integers(size) == 0
                              ? 0
                              : at::detail::computeStorageNbytes(size, st, static_cast<size_t>(item),
                                                                 static_cast<size_t>(storage_offset));
    TORCH_CHECK(needed <= source.nbytes(), "Trying to resize storage that is not resizable");
    return set_storage_offset(self, sb.base, storage_offset + static_cast<int64_t>(sb.offset) / item, size,
                              stride.data() != nullptr ? stride : c10::IntArrayRef(st));
  }
  at::native::checkSetStorage(self, source, storage_offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(storage_offset);
  std::optional<c10::IntArrayRef> st = stride.data() != nullptr ? std::optional<c10::IntArrayRef>(stride) : std::nullopt;
  if (st) self.unsafeGetTensorImpl()->set_sizes_and_strides(size, *st);
  else self.unsafeGetTensorImpl()->set_sizes_contiguous(size);
  if (self.numel() > 0) {
    size_t needed = at::detail::computeStorageNbytes(self.sizes(), self.strides(), self.element_size(),
                                                     static_cast<size_t>(storage_offset));
    if (needed > self.storage().nbytes()) resizeStorageBytes(self.storage(), needed);
  }
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source) {
  size_t n = source.nbytes() / self.element_size();
  return set_storage_offset(self, source, 0, {static_cast<int64_t>(n)}, {});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.unsafeGetTensorImpl() != source.unsafeGetTensorImpl())
    return set_storage_offset(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
  return self;
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, tpuAllocator(), true);
  return set_storage_offset(self, storage, 0, {0}, {});
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) { return at::native::view(self, size); }

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

at::Tensor unfold(const at::Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  return at::native::unfold(self, dimension, size, step);
}

// A complex tensor's float view with a trailing dimension of 2 and back: the same storage, another element type
// and size (programs reinterpret the storage's buffer, stablehlo/viewprog.h).
at::Tensor view_as_real(const at::Tensor& self) { return at::native::view_as_real(self); }
at::Tensor view_as_complex(const at::Tensor& self) { return at::native::view_as_complex(self); }

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  // `tensor.data = other` between cpu and tpu tensors swaps the whole TensorImpl metadata.
  return true;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  m.impl("unfold", TORCH_FN(unfold));
  m.impl("view_as_real", TORCH_FN(view_as_real));
  m.impl("view_as_complex", TORCH_FN(view_as_complex));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage", TORCH_FN(set_storage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage_offset));
  m.impl("set_.source_Tensor", TORCH_FN(set_tensor));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
  m.impl("is_set_to", TORCH_FN(at::native::is_set_to));  // storage, offset, sizes and strides: no data
}

}  // namespace torch_tpu
