#include "core/storage.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include "core/client.h"
#include "core/dtype.h"

namespace torch_tpu {

namespace {

void deleteStorage(void* ctx) { delete static_cast<TpuStorage*>(ctx); }

struct TpuAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    auto* s = new TpuStorage();
    s->device = currentDevice();
    s->nbytes = nbytes;
    // The address is the TpuStorage itself: unique per storage, never dereferenced.
    return {s, s, &deleteStorage, c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(s->device))};
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

TpuStorage* storageOf(const c10::Storage& s) {
  auto* ctx = static_cast<TpuStorage*>(s.data_ptr().get_context());
  TORCH_CHECK(ctx != nullptr && s.data_ptr().get_deleter() == &deleteStorage,
              "internal error: storage is not a tpu storage");
  return ctx;
}

TpuStorage* storageOf(const at::Tensor& t) { return storageOf(t.storage()); }

runtime::BufferPtr bufferOf(const at::Tensor& t) {
  TpuStorage* s = storageOf(t);
  std::lock_guard<std::mutex> g(s->mu);
  if (!s->buffer) {
    size_t item = t.element_size();
    int64_t n = static_cast<int64_t>(s->nbytes / item);
    std::vector<char> zeros(s->nbytes, 0);
    s->buffer = client().fromHost(zeros.data(), static_cast<runtime::ElementType>(toDType(t.scalar_type())),
                                  {n}, s->device);
  }
  return s->buffer;
}

at::Tensor wrapBuffer(runtime::BufferPtr buffer, at::ScalarType dtype, c10::IntArrayRef sizes, int device) {
  size_t nbytes = buffer->byteSize();
  c10::DataPtr dp;
  {
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)));
    dp = g_allocator.allocate(nbytes);
  }
  static_cast<TpuStorage*>(dp.get_context())->buffer = std::move(buffer);
  auto storage = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), nbytes, std::move(dp),
                                                        &g_allocator, /*resizable=*/true);
  auto t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(std::move(storage)),
                                                    c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                    caffe2::TypeMeta::fromScalarType(dtype));
  t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  return t;
}

}  // namespace torch_tpu
