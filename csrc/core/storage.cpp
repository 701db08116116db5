#include "core/storage.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include "core/client.h"
#include "core/dtype.h"
#include "core/memory.h"
#include "core/packed.h"
#include "core/scalars.h"

namespace torch_tpu {

namespace {

void (*g_flush_hook)(TpuStorage*) = nullptr;
void (*g_died_hook)(TpuStorage*) = nullptr;

void deleteStorage(void* ctx) {
  auto* s = static_cast<TpuStorage*>(ctx);
  if (s->trace.load(std::memory_order_acquire) != nullptr && g_died_hook) g_died_hook(s);
  if (s->reserved) s->unreserve();
  core::noteStorageFreed(s->device, static_cast<int64_t>(s->nbytes));
  delete s;
}

c10::DataPtr dataPtrOf(TpuStorage* s) {
  // The address is the TpuStorage itself: unique per storage, never dereferenced.
  return {s, s, &deleteStorage, c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(s->device))};
}

// The allocator PyTorch's device-generic memory API (torch.accelerator.memory_stats(), memory_allocated(),
// max_memory_allocated(), memory_reserved(), reset_peak_memory_stats(), empty_cache(), get_memory_info()) reaches
// through c10::getDeviceAllocator: a c10::DeviceAllocator whose statistics are torch.tpu's (core/memory.h), so both
// APIs report the same bytes, peaks and limit.
struct TpuAllocator final : public c10::DeviceAllocator {
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
    core::noteStorageMade(device, static_cast<int64_t>(nbytes));
    return dataPtrOf(s);
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    TORCH_CHECK(false, "tpu storages cannot be copied as raw memory; use tensor.copy_()");
  }

  // c10::DeviceAllocator
  bool initialized() override { return runtime::Client::initialized() && !inBadFork(); }
  void emptyCache(c10::MempoolId_t) override {
    if (!initialized()) return;
    clearScalarCache();
    core::clearPackedWeights();
  }
  void recordStream(const c10::DataPtr&, c10::Stream) override {}  // one ordered queue per device
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    const int d = checkedDevice(device);
    core::beforeMemoryQuery(d);
    const core::MemoryInfo m = core::memoryInfo(d);
    const core::StorageCounts n = core::storageCounts(d);
    using c10::CachingAllocator::Stat;
    auto fill = [](c10::CachingAllocator::StatArray& a, int64_t current, int64_t peak, int64_t made,
                   int64_t freed) {
      // One pool: "all" and "large_pool" report it, "small_pool" is empty (all = small + large, as on CUDA).
      for (auto type : {c10::CachingAllocator::StatType::AGGREGATE, c10::CachingAllocator::StatType::LARGE_POOL}) {
        Stat& s = a[static_cast<size_t>(type)];
        s.current = current;
        s.peak = std::max(peak, current);
        s.allocated = made;
        s.freed = freed;
      }
    };
    c10::CachingDeviceAllocator::DeviceStats st;
    fill(st.allocated_bytes, m.allocated, m.peak, n.bytes_made, n.bytes_freed);
    fill(st.active_bytes, m.allocated, m.peak, n.bytes_made, n.bytes_freed);
    fill(st.requested_bytes, m.allocated, m.peak, n.bytes_made, n.bytes_freed);
    fill(st.reserved_bytes, m.reserved, std::max(m.peak, m.reserved), n.bytes_made, n.bytes_freed);
    fill(st.allocation, n.live, n.peak_live, n.made, n.freed);
    fill(st.active, n.live, n.peak_live, n.made, n.freed);
    fill(st.segment, n.live, n.peak_live, n.made, n.freed);
    fill(st.inactive_split, 0, 0, 0, 0);
    fill(st.inactive_split_bytes, 0, 0, 0, 0);
    st.num_ooms = n.ooms;
    st.num_device_alloc = n.made;
    st.num_device_free = n.freed;
    return st;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override { core::resetAccumulatedCounts(checkedDevice(device)); }
  void resetPeakStats(c10::DeviceIndex device) override {
    const int d = checkedDevice(device);
    core::beforeMemoryQuery(d);
    client().resetPeak(d);
    core::resetPeakCounts(d);
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    const int d = checkedDevice(device);
    core::beforeMemoryQuery(d);
    const core::MemoryInfo m = core::memoryInfo(d);
    return {static_cast<size_t>(m.free), static_cast<size_t>(m.total)};
  }

 private:
  static int checkedDevice(c10::DeviceIndex device) {
    const int d = device < 0 ? currentDevice() : static_cast<int>(device);
    TORCH_CHECK_INDEX(d >= 0 && d < deviceCount(), "tpu: invalid device index ", static_cast<int>(device), " (",
                      deviceCount(), " devices available)");
    return d;
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

namespace {
std::atomic<c10::DeleterFnPtr> g_slice_deleter{nullptr};
}  // namespace

void noteSliceDeleter(c10::DeleterFnPtr deleter) { g_slice_deleter.store(deleter); }

SliceBase sliceBase(const c10::Storage& s) {
  SliceBase r{s, 0};
  const c10::DeleterFnPtr slice = g_slice_deleter.load();
  // A slice of a slice holds the outer slice: follow the chain to the storage with the bytes.
  while (slice != nullptr && r.base.data_ptr().get_deleter() == slice) {
    const auto* p = static_cast<const char*>(r.base.data_ptr().get());
    auto* outer = static_cast<c10::StorageImpl*>(r.base.data_ptr().get_context());
    c10::Storage next(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(outer));
    r.offset += static_cast<size_t>(p - static_cast<const char*>(next.data_ptr().get()));
    r.base = std::move(next);
  }
  return r;
}

TpuStorage* storageOf(const c10::Storage& s) {
  auto* ctx = static_cast<TpuStorage*>(s.data_ptr().get_context());
  TORCH_CHECK(g_slice_deleter.load() == nullptr || s.data_ptr().get_deleter() != g_slice_deleter.load(),
              "tpu: this operation does not take a byte slice of a tpu storage (UntypedStorage[a:b]); read and write "
              "the slice through a tensor: torch.empty(0, dtype=torch.uint8, device='tpu').set_(slice)");
  TORCH_CHECK(ctx != nullptr && s.data_ptr().get_deleter() == &deleteStorage,
              "tpu: this tensor's storage was not allocated by torch_tpu (a tensor made on device tpu from a raw "
              "pointer: torch.from_blob, or a DLPack capsule another producer exported for an extension device); "
              "create tpu tensors with torch_tpu, or import DLPack capsules through torch.from_dlpack");
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
  core::noteStorageResized(device, static_cast<int64_t>(nbytes), static_cast<int64_t>(n));
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
    s->buffer = client().fromHost(zeros.data(), static_cast<runtime::ElementType>(storageDType(t.scalar_type())),
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
  core::noteStorageMade(device, static_cast<int64_t>(nbytes));
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
