// Device registration: the device guard and the PrivateUse1 hooks interface.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>

#include "core/checks.h"
#include "core/client.h"
#include "core/memory.h"
#include "core/rng.h"
#include "eager/device.h"
#include "eager/fused.h"
#include "eager/views.h"

namespace torch_tpu {

namespace {

// ---- device guard ----
struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;
  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    if (d.index() != old.index()) setCurrentDevice(d.index());
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kType, static_cast<c10::DeviceIndex>(currentDevice())); }
  void setDevice(c10::Device d) const override { setCurrentDevice(d.index()); }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    try {
      setCurrentDevice(d.index());
    } catch (...) {
    }
  }
  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kType, d.index()));
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  // One in-order queue per device: pool and new streams are that queue (futures' callbacks ask for them).
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kType, d.index()));
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kType, d.index()));
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(torch_tpu::deviceCount());
  }
  bool queryStream(const c10::Stream&) const override { return false; }
  void synchronizeStream(const c10::Stream& s) const override { synchronizeDevice(s.device_index()); }
  void synchronizeDevice(const c10::DeviceIndex d) const override {
    const int dev = d < 0 ? currentDevice() : d;
    fused::flush(dev);
    client().synchronize(dev);
    core::raisePendingChecks(dev);
  }
  // Events mark the device's queue. Programs on one device are ordered by their data dependencies, so `block`
  // needs no work; waiting on an event waits for everything launched on its device so far.
  struct Event {
    int device = -1;
  };
  void record(void** event, const c10::Stream& s, const c10::DeviceIndex, const c10::EventFlag) const override {
    if (*event == nullptr) *event = new Event();
    static_cast<Event*>(*event)->device = s.device_index() < 0 ? currentDevice() : s.device_index();
    fused::flush(static_cast<Event*>(*event)->device);  // the event marks what was recorded so far
  }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void* event) const override {
    synchronizeEvent(event);
    return true;
  }
  void synchronizeEvent(void* event) const override {
    auto* e = static_cast<Event*>(event);
    if (e && e->device >= 0) synchronizeDevice(static_cast<c10::DeviceIndex>(e->device));
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override { delete static_cast<Event*>(event); }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

// ---- pinned host memory ----
// Host allocations made for the device (`pin_memory()`, `empty(..., pin_memory=True)`, DataLoader's pinning, DDP's
// bitmap of used parameters): page-aligned host blocks whose address ranges are kept, so `is_pinned()` answers for
// any pointer into one, as CUDA's host allocator does. The PJRT plugins copy from any host memory; the blocks are
// what PyTorch's contracts for pinned tensors need (is_pinned, pin_memory returning a pinned copy).
class PinnedAllocator final : public c10::Allocator {
 public:
  static PinnedAllocator& get() {
    static PinnedAllocator* a = new PinnedAllocator();  // never destroyed: tensors may outlive static teardown
    return *a;
  }
  c10::DataPtr allocate(size_t n) override {
    constexpr size_t kAlign = 4096;
    size_t bytes = ((std::max<size_t>(n, 1) + kAlign - 1) / kAlign) * kAlign;
    void* p = std::aligned_alloc(kAlign, bytes);
    if (p == nullptr) throw c10::OutOfMemoryError(
        c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
        "tpu: cannot allocate " + std::to_string(n) + " bytes of pinned host memory");
    {
      std::lock_guard<std::mutex> g(mu_);
      blocks_[reinterpret_cast<uintptr_t>(p)] = bytes;
    }
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const final { default_copy_data(dest, src, count); }
  bool contains(const void* data) {
    uintptr_t a = reinterpret_cast<uintptr_t>(data);
    std::lock_guard<std::mutex> g(mu_);
    auto it = blocks_.upper_bound(a);
    if (it == blocks_.begin()) return false;
    --it;
    return a < it->first + it->second;
  }

 private:
  static void release(void* p) {
    if (p == nullptr) return;
    {
      PinnedAllocator& self = get();
      std::lock_guard<std::mutex> g(self.mu_);
      self.blocks_.erase(reinterpret_cast<uintptr_t>(p));
    }
    std::free(p);
  }
  std::mutex mu_;
  std::map<uintptr_t, size_t> blocks_;  // start -> length
};

// ---- hooks ----
std::atomic<bool> g_accelerator_reported{true};

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return g_accelerator_reported.load() && torch_tpu::deviceCount() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(torch_tpu::deviceCount()); }
  void setCurrentDevice(c10::DeviceIndex d) const override { torch_tpu::setCurrentDevice(d); }
  c10::DeviceIndex getCurrentDevice() const override { return static_cast<c10::DeviceIndex>(currentDevice()); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = getCurrentDevice();
    torch_tpu::setCurrentDevice(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override {
    return defaultGenerator(d < 0 ? currentDevice() : d);
  }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override {
    return at::make_generator<TpuGenerator>(d < 0 ? currentDevice() : d);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    // A tpu data pointer is the address of its TpuStorage (plus an offset for views).
    return c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(currentDevice()));
  }
  bool isPinnedPtr(const void* data) const override { return PinnedAllocator::get().contains(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &PinnedAllocator::get(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override;
};

}  // namespace

void TpuHooks::resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const {
  resizeStorageBytes(storage, newsize);
}

void setAcceleratorReported(bool reported) { g_accelerator_reported.store(reported); }

void registerHooks() {
  static bool done = [] {
    at::RegisterPrivateUse1HooksInterface(new TpuHooks());
    // What the recorded fused-eager ops allocate counts in torch.accelerator's memory statistics.
    core::setBeforeMemoryQuery([](int device) { fused::flush(device); });
    return true;
  }();
  (void)done;
}

}  // namespace torch_tpu
