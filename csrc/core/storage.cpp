#include "core/storage.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include "core/client.h"
#include "core/dtype.h"
#include "core/memory.h"

namespace torch_tpu {

namespace {

void (*g_flush_hook)(TpuStorage*) = nullptr;
void (*g_died_hook)(TpuStorage*) = nullptr;

void deleteStorage(void* ctx) {
  auto* s = static_cast<TpuStorage*>(ctx);
  if (s->trace.load(std::memory_order_acquire) != nullptr && g_died_hook) g_died_hook(s);
  if (s->reserved) s->unreserve();
  delete s;
}

c10::DataPtr dataPtrOf(TpuStorage* s) {
  // The address is the TpuStorage itself: unique per storage, never dereferenced.
  return {s, s, &deleteStorage, c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(s->device))};
}

struct TpuAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    const int device = currentDevice();
    if (nbytes > 0) {
      // The allocating call fails when the device cannot hold the tensor (core/memory.h), although the buffer is
      // made lazily; the bytes count as allocated from now on.
      core::checkAllocation(device, static_cast<int64_t>(nbytes));
      client().reserve(device, static_cast<int64_t>(nbytes));
    }
    auto* s = new TpuStorage();
    s->device = device;
    s->nbytes = nbytes;
    s->reserved = nbytes > 0;
    return dataPtrOf(s);
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    TORCH_CHECK(false, "tpu storages cannot be copied as raw memory; use tensor.copy_()");
  }
};

TpuAllocator g_allocator;

}  // namespace

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

c10::Allocator* tpuAllocator() { return &g_allocator; }

void TpuStorage::setPendingHooks(void (*flush)(TpuStorage*), void (*died)(TpuStorage*)) {
  g_flush_hook = flush;
  g_died_hook = died;
}

void TpuStorage::flushPending(TpuStorage* s) {
  if (g_flush_hook) g_flush_hook(s);
}

TpuStorage* storageOf(const c10::Storage& s) {
  auto* ctx = static_cast<TpuStorage*>(s.data_ptr().get_context());
  TORCH_CHECK(ctx != nullptr && s.data_ptr().get_deleter() == &deleteStorage,
              "internal error: storage is not a tpu storage");
  return ctx;
}

TpuStorage* storageOf(const at::Tensor& t) { return storageOf(t.storage()); }

void TpuStorage::unreserve() noexcept {
  reserved = false;
  try {
    client().reserve(device, -static_cast<int64_t>(nbytes));
  } catch (...) {
  }
}

void TpuStorage::resize(size_t n) {
  std::lock_guard<std::mutex> g(mu);
  if (reserved && n > nbytes) core::checkAllocation(device, static_cast<int64_t>(n - nbytes));
  if (reserved) client().reserve(device, static_cast<int64_t>(n) - static_cast<int64_t>(nbytes));
  nbytes = n;
}

runtime::BufferPtr bufferOf(const at::Tensor& t) {
  TpuStorage* s = storageOf(t);
  if (s->pending.load(std::memory_order_acquire)) TpuStorage::flushPending(s);
  std::lock_guard<std::mutex> g(s->mu);
  if (!s->buffer) {
    size_t item = t.element_size();
    int64_t n = static_cast<int64_t>(s->nbytes / item);
    std::vector<char> zeros(s->nbytes, 0);
    s->buffer = client().fromHost(zeros.data(), static_cast<runtime::ElementType>(toDType(t.scalar_type())),
                                  {n}, s->device);
    if (s->reserved) s->unreserve();
  }
  return s->buffer;
}

at::Tensor emptyTensor(size_t nbytes, at::ScalarType dtype, c10::IntArrayRef sizes, int device) {
  // Not reserved: the storage gets its buffer when the fused-eager trace that computes it launches (or wrapBuffer
  // sets it at once); memory queries flush pending traces first.
  auto* s = new TpuStorage();
  s->device = device;
  s->nbytes = nbytes;
  c10::DataPtr dp = dataPtrOf(s);
  auto storage = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), nbytes, std::move(dp),
                                                        &g_allocator, /*resizable=*/true);
  auto t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(std::move(storage)),
                                                    c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                    caffe2::TypeMeta::fromScalarType(dtype));
  t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  return t;
}

at::Tensor wrapBuffer(runtime::BufferPtr buffer, at::ScalarType dtype, c10::IntArrayRef sizes, int device) {
  const size_t nbytes = buffer->byteSize();
  at::Tensor t = emptyTensor(nbytes, dtype, sizes, device);
  static_cast<TpuStorage*>(t.storage().data_ptr().get_context())->buffer = std::move(buffer);
  return t;
}

}  // namespace torch_tpu
