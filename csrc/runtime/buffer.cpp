// Buffer: owns one PJRT_Buffer*. Metadata (type, dims, device) is immutable after construction; PJRT buffer
// calls are thread-safe in the plugin, so every method may be called concurrently. Live-bytes accounting is
// updated on construction and on destruction/donation (atomically, at most once).
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <unistd.h>

#include "runtime/pjrt_util.h"

namespace torch_tpu {
namespace runtime {

Buffer::Buffer(PJRT_Buffer* raw, ElementType type, std::vector<int64_t> dims, int device)
    : raw_(raw), type_(type), dims_(std::move(dims)), device_(device), accounted_bytes_(0) {
  accounted_bytes_ = static_cast<int64_t>(byteSize());
  if (Client::initialized()) Client::get().impl().addLive(device_, accounted_bytes_);
}

namespace {

void destroyRaw(PJRT_Buffer* raw) {
  try {
    detail::Args<PJRT_Buffer_Destroy_Args> a;
    a->buffer = raw;
    PJRT_Error* err = TPU_PJRT_FN(PJRT_Buffer_Destroy)(a.get());
    detail::consumeErrorCode(err);
  } catch (...) {
  }
}

// Destroys buffers on a thread of its own. A plugin may make PJRT_Buffer_Destroy wait for the launches still
// reading the buffer (the CPU plugin does): a tensor freed while its readers are queued would otherwise stall the
// thread that queues work, and the device would run dry. The bytes leave the live-bytes accounting at once.
class Reaper {
 public:
  static Reaper& get() {
    static Reaper* r = [] {
      auto* p = new Reaper();  // leaked on purpose: it outlives every buffer
      g_reaper.store(p, std::memory_order_release);
      return p;
    }();
    return *r;
  }
  // The reaper if one was started (runtime::shutdown drains it; it must not start one).
  static Reaper* existing() { return g_reaper.load(std::memory_order_acquire); }

  void push(PJRT_Buffer* raw) {
    std::unique_lock<std::mutex> lk(mu_);
    if (stopped_) {
      lk.unlock();
      destroyRaw(raw);
      return;
    }
    queue_.push_back(raw);
    // Woken only for a large batch; otherwise the thread looks every kPeriod by itself. Waking it per buffer would
    // cost the caller a context switch each time on a machine with few cores.
    bool wake = queue_.size() == kBatch;
    lk.unlock();
    if (wake) cv_.notify_one();
  }

  // At exit (runtime::shutdown): no more deferral; what is queued is destroyed now, before the runtime closes.
  // In a forked child the thread does not exist (and the plugin cannot be called): nothing to do.
  void drain() {
    std::unique_lock<std::mutex> lk(mu_);
    if (joined_ || owner_ != ::getpid()) return;
    stopped_ = true;
    joined_ = true;
    lk.unlock();
    cv_.notify_one();
    thread_.join();
  }

 private:
  Reaper() : owner_(::getpid()), thread_([this] { run(); }) {}
  static std::atomic<Reaper*> g_reaper;

  void run() {
    std::vector<PJRT_Buffer*> batch;
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait_for(lk, kPeriod, [&] { return stopped_ || queue_.size() >= kBatch; });
      if (queue_.empty() && !stopped_) continue;
      batch.assign(queue_.begin(), queue_.end());
      queue_.clear();
      bool stop = stopped_;
      lk.unlock();
      for (PJRT_Buffer* raw : batch) destroyRaw(raw);
      lk.lock();
      if (stop && queue_.empty()) return;
    }
  }

  static constexpr size_t kBatch = 256;
  static constexpr std::chrono::milliseconds kPeriod{2};

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<PJRT_Buffer*> queue_;
  bool stopped_ = false, joined_ = false;
  pid_t owner_;
  std::thread thread_;
};

std::atomic<Reaper*> Reaper::g_reaper{nullptr};

// Whether this plugin's PJRT_Buffer_Destroy waits for pending readers (the CPU plugin); TPU and GPU plugins free a
// buffer once its readers are done by themselves, and deferring there would only hold device memory longer.
bool destroyWaits() {
  static const bool waits = Client::initialized() && Client::get().plugin().platform_name == "cpu";
  return waits;
}

}  // namespace

Buffer::~Buffer() {
  releaseAccounting();
  // A forked child (the plugin's threads are gone) or a closed runtime (exit): the buffer is left to the OS.
  if (raw_ == nullptr || detail::g_api == nullptr || detail::g_forked || detail::closed()) return;
  if (destroyWaits())
    Reaper::get().push(raw_);
  else
    destroyRaw(raw_);
}

namespace detail {
void drainDeferredDestroys() {
  if (Reaper* r = Reaper::existing()) r->drain();
}
}  // namespace detail

void Buffer::releaseAccounting() {
  // Only called from the destructor and from the execute() that donates this buffer (never concurrently with
  // another use of the buffer), so a plain exchange is enough.
  int64_t bytes = accounted_bytes_;
  accounted_bytes_ = 0;
  if (bytes != 0 && Client::initialized()) Client::get().impl().addLive(device_, -bytes);
}

int64_t Buffer::numElements() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

size_t Buffer::byteSize() const { return static_cast<size_t>(numElements()) * elementSize(type_); }

namespace {
// PJRT_Buffer_ToHostBuffer with an explicit dense row-major host layout (minor_to_major = rank-1 .. 0), so the
// result is row-major whatever the device layout is (TPU tiles on device).
PJRT_Event* startToHost(PJRT_Buffer* raw, const std::vector<int64_t>& dims, size_t need, void* dst, size_t nbytes) {
  if (nbytes < need)
    throw Error("Buffer::toHost: destination has " + std::to_string(nbytes) + " bytes, buffer needs " +
                    std::to_string(need),
                kErrorInvalidArgument);
  int64_t m2m_small[8];
  std::vector<int64_t> m2m_big;
  int64_t* m2m = m2m_small;
  size_t rank = dims.size();
  if (rank > 8) {
    m2m_big.resize(rank);
    m2m = m2m_big.data();
  }
  for (size_t i = 0; i < rank; ++i) m2m[i] = static_cast<int64_t>(rank - 1 - i);
  detail::Args<PJRT_Buffer_MemoryLayout> layout;
  layout->type = PJRT_Buffer_MemoryLayout_Type_Tiled;
  layout->tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
  layout->tiled.minor_to_major = m2m;
  layout->tiled.minor_to_major_size = rank;
  static char dummy[16];
  detail::Args<PJRT_Buffer_ToHostBuffer_Args> a;
  a->src = raw;
  a->host_layout = layout.get();
  a->dst = dst != nullptr ? dst : dummy;
  a->dst_size = need == 0 ? sizeof(dummy) : nbytes;
  TPU_PJRT(PJRT_Buffer_ToHostBuffer, a.get());
  return a->event;
}
}  // namespace

void Buffer::toHost(void* dst, size_t nbytes) {
  PJRT_Event* ev = startToHost(raw_, dims_, byteSize(), dst, nbytes);
  Event holder(ev);  // destroyed on every path
  detail::awaitEvent(ev, "PJRT_Buffer_ToHostBuffer");
}

EventPtr Buffer::toHostAsync(void* dst, size_t nbytes) {
  return std::make_shared<Event>(startToHost(raw_, dims_, byteSize(), dst, nbytes));
}

void Buffer::awaitReady() {
  detail::Args<PJRT_Buffer_ReadyEvent_Args> a;
  a->buffer = raw_;
  TPU_PJRT(PJRT_Buffer_ReadyEvent, a.get());
  Event holder(a->event);
  detail::awaitEvent(a->event, "PJRT_Buffer_ReadyEvent");
}

bool Buffer::isReady() {
  detail::Args<PJRT_Buffer_ReadyEvent_Args> a;
  a->buffer = raw_;
  TPU_PJRT(PJRT_Buffer_ReadyEvent, a.get());
  Event holder(a->event);
  return holder.isReady();
}

int Buffer::queryDevice() const {
  detail::Args<PJRT_Buffer_Device_Args> a;
  a->buffer = raw_;
  TPU_PJRT(PJRT_Buffer_Device, a.get());
  return Client::get().impl().indexOf(a->device);
}

bool Buffer::isDeleted() const {
  detail::Args<PJRT_Buffer_IsDeleted_Args> a;
  a->buffer = raw_;
  TPU_PJRT(PJRT_Buffer_IsDeleted, a.get());
  return a->is_deleted;
}

}  // namespace runtime
}  // namespace torch_tpu
