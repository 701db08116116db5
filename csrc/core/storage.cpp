#include "core/storage.h"
#include "core/storage_alias.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <map>

#include "core/client.h"
#include "core/dtype.h"
#include "core/memory.h"
#include "core/packed.h"
#include "core/scalars.h"

namespace torch_tpu {

namespace {

void (*g_flush_hook)(TpuStorage*) = nullptr;
void (*g_died_hook)(TpuStorage*) = nullptr;

// Storage addresses: ranges of [2^56, 2^63), above any user-space mapping (a stray dereference faults), handed out
// in increasing order and never reused; each range is the storage's bytes rounded up to kAddressAlign plus one
// kAddressAlign gap, so a pointer one past a storage's end never names the next one.
constexpr uintptr_t kAddressBase = uintptr_t(1) << 56;
constexpr size_t kAddressAlign = 256;
std::atomic<uintptr_t> g_next_address{kAddressBase};

// Every TpuStorage is one of these (made here only): the storage and its address range.
struct AddressedStorage final : TpuStorage {
  uintptr_t address = 0;
  size_t span = 0;
  // Ranges it had before growing past them (resize_): tensors imported over those addresses still name it.
  std::vector<uintptr_t> earlier;
};

std::mutex g_ranges_mu;
std::map<uintptr_t, AddressedStorage*> g_ranges;  // address -> live storage

AddressedStorage* addressed(TpuStorage* s) { return static_cast<AddressedStorage*>(s); }

void assignAddress(AddressedStorage* s, size_t nbytes) {
  const size_t span = (std::max<size_t>(nbytes, 1) + 2 * kAddressAlign - 1) / kAddressAlign * kAddressAlign;
  const uintptr_t a = g_next_address.fetch_add(span, std::memory_order_relaxed);
  std::lock_guard<std::mutex> g(g_ranges_mu);
  if (s->address) s->earlier.push_back(s->address);
  s->address = a;
  s->span = span;
  g_ranges.emplace(a, s);
}

void deleteStorage(void* ctx) {
  auto* s = addressed(static_cast<TpuStorage*>(ctx));
  {
    std::lock_guard<std::mutex> g(g_ranges_mu);
    g_ranges.erase(s->address);
    for (uintptr_t a : s->earlier) g_ranges.erase(a);
  }
  if (s->trace.load(std::memory_order_acquire) != nullptr && g_died_hook) g_died_hook(s);
  if (s->reserved) s->unreserve();
  core::noteStorageFreed(s->device, static_cast<int64_t>(s->nbytes));
  delete s;
}

c10::Device deviceOf(const TpuStorage* s) {
  return c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(s->device));
}

c10::DataPtr dataPtrOf(AddressedStorage* s) {
  if (!s->address) assignAddress(s, s->nbytes);
  return {reinterpret_cast<void*>(s->address), static_cast<TpuStorage*>(s), &deleteStorage, deviceOf(s)};
}

// The context of a StorageImpl adopted from a foreign address (storageOf): the storage it names, and what kept the
// foreign memory alive (the DataPtr from_blob made: its deleter releases the DLPack capsule, which holds the
// exporting tensor and so the storage; or, for a tensor moved onto a fresh alias StorageImpl, that foreign storage).
struct AliasContext {
  TpuStorage* storage;
  c10::DataPtr owned;
  c10::Storage held;
};

void deleteAlias(void* ctx) { delete static_cast<AliasContext*>(ctx); }

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
    auto* s = new AddressedStorage();
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

[[noreturn]] void foreignStorage(const c10::Storage& s, const char* why) {
  TORCH_CHECK(false, "tpu: a tensor's storage at address ", s.data(), " (", s.nbytes(),
              " bytes) was not made by torch_tpu: ", why,
              ". tpu tensors can only be made over tpu storages (torch.from_dlpack / torch.asarray of a capsule "
              "exported from a live tpu tensor alias it; host memory must be copied with .to('tpu'))");
}

// The storage a foreign StorageImpl's address names, and the byte offset in it.
TpuStorage* foreignTarget(const c10::Storage& s, size_t* offset) {
  TpuStorage* target = storageAt(reinterpret_cast<uintptr_t>(s.data()), offset);
  if (!target) foreignStorage(s, "its address is in no live tpu storage");
  if (target->device != s.device().index())
    foreignStorage(s, "it names a storage of another tpu device");
  return target;
}

// A foreign StorageImpl whose address is the start of a tpu storage becomes an alias of it, for every tensor that
// shares it: its DataPtr is replaced by one over the storage, owning the foreign DataPtr.
TpuStorage* adoptWhole(const c10::Storage& s, TpuStorage* target) {
  c10::StorageImpl* impl = s.unsafeGetStorageImpl();
  auto* alias = new AliasContext{target, {}, {}};
  void* address = reinterpret_cast<void*>(addressed(target)->address);
  alias->owned = impl->set_data_ptr(c10::DataPtr(address, alias, &deleteAlias, deviceOf(target)));
  return target;
}

inline TpuStorage* ownStorage(const c10::Storage& s) {
  const c10::DataPtr& dp = s.data_ptr();
  if (dp.get_deleter() == &deleteStorage) return static_cast<TpuStorage*>(dp.get_context());
  if (dp.get_deleter() == &deleteAlias) return static_cast<AliasContext*>(dp.get_context())->storage;
  return nullptr;
}

}  // namespace

TpuStorage* storageAt(uintptr_t address, size_t* offset) {
  std::lock_guard<std::mutex> g(g_ranges_mu);
  auto it = g_ranges.upper_bound(address);
  if (it == g_ranges.begin()) return nullptr;
  --it;
  AddressedStorage* s = it->second;
  if (address - it->first >= s->span) return nullptr;
  *offset = address - it->first;
  return s;
}

TpuStorage* storageOf(const c10::Storage& s) {
  if (TpuStorage* own = ownStorage(s)) return own;
  TORCH_CHECK(s.device_type() == c10::DeviceType::PrivateUse1, "internal error: storage is not a tpu storage");
  size_t offset = 0;
  TpuStorage* target = foreignTarget(s, &offset);
  if (offset != 0) foreignStorage(s, "it starts inside a tpu storage, and only its tensors can view it there");
  return adoptWhole(s, target);
}

void adoptForeignStorage(const at::Tensor& t) {
  if (!t.has_storage() || ownStorage(t.storage())) return;
  const c10::Storage& s = t.storage();
  if (s.device_type() != c10::DeviceType::PrivateUse1) return;
  size_t offset = 0;
  TpuStorage* target = foreignTarget(s, &offset);
  if (offset == 0) {
    adoptWhole(s, target);
    return;
  }
  // The tensor moves onto an alias StorageImpl over the whole storage, at the element offset the address had.
  const size_t item = t.element_size();
  if (offset % item != 0) foreignStorage(s, "its address is not a whole number of elements into its tpu storage");
  auto* alias = new AliasContext{target, {}, s};
  c10::DataPtr dp(reinterpret_cast<void*>(addressed(target)->address), alias, &deleteAlias, deviceOf(target));
  c10::Storage whole(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), target->nbytes,
                                                            std::move(dp), nullptr, /*resizable=*/false));
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  const int64_t storage_offset = t.storage_offset() + static_cast<int64_t>(offset / item);
  impl->set_storage_keep_dtype(std::move(whole));
  impl->set_storage_offset(storage_offset);
}

TpuStorage* storageOf(const at::Tensor& t) {
  if (TpuStorage* own = ownStorage(t.storage())) return own;
  adoptForeignStorage(t);
  return storageOf(t.storage());
}

void resizeStorage(const c10::Storage& storage, size_t n) {
  AddressedStorage* s = addressed(storageOf(storage));
  s->resize(n);
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  impl->set_nbytes(n);
  if (n + kAddressAlign > s->span && impl->data_ptr().get_deleter() == &deleteStorage) {
    // Past its address range: a new range, so no other storage's addresses name these bytes.
    assignAddress(s, n);
    impl->mutable_data_ptr().release_context();
    impl->set_data_ptr_noswap(dataPtrOf(s));
  }
}

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
    s->buffer = client().fromHost(zeros.data(), static_cast<runtime::ElementType>(toDType(t.scalar_type())),
                                  {n}, s->device);
    if (s->reserved) s->unreserve();
  }
  return s->buffer;
}

at::Tensor emptyTensor(size_t nbytes, at::ScalarType dtype, c10::IntArrayRef sizes, int device) {
  // Not reserved: the storage gets its buffer when the fused-eager trace that computes it launches (or wrapBuffer
  // sets it at once); memory queries flush pending traces first.
  auto* s = new AddressedStorage();
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
  storageOf(t)->buffer = std::move(buffer);
  return t;
}

}  // namespace torch_tpu
