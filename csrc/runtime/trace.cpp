// Launch tracing: the record of every execution while a profiler asks for it (runtime.h). A traced launch lives on
// the heap from execute() until its completion event's OnReady callback, which stamps the time, files the record
// under the trace's mutex and frees it; records of a trace that was stopped or restarted meanwhile (another
// generation) are dropped. Thread-safe: launches from any thread, callbacks on the plugin's threads.
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>

#include "runtime/pjrt_util.h"

namespace torch_tpu {
namespace runtime {

namespace {

thread_local LaunchLabel t_label;

std::mutex g_mu;
std::condition_variable g_cv;
uint64_t g_generation = 0;  // guarded by g_mu: bumped by every start and stop
int64_t g_inflight = 0;     // guarded by g_mu: traced launches of the current generation not finished
std::vector<LaunchRecord> g_records;
CorrelationSource g_correlation = nullptr;
uint64_t g_seq = 0;

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

namespace detail {

std::atomic<bool> g_tracing{false};

struct TracedLaunch {
  LaunchRecord r;
  uint64_t generation = 0;
};

TracedLaunch* beginTracedLaunch(int device) {
  auto* t = new TracedLaunch();
  CorrelationSource corr = nullptr;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (!g_tracing.load(std::memory_order_relaxed)) {
      delete t;
      return nullptr;
    }
    t->generation = g_generation;
    t->r.seq = g_seq++;
    ++g_inflight;
    corr = g_correlation;
  }
  LaunchRecord& r = t->r;
  r.device = device;
  const LaunchLabel& l = t_label;
  if (l.kind) r.kind = l.kind;
  if (l.name) r.name = *l.name;
  if (l.detail) r.detail = *l.detail;
  r.correlation = corr ? corr() : 0;
  r.thread = static_cast<uint64_t>(::syscall(SYS_gettid));
  r.launch_ns = nowNs();
  return t;
}

namespace {

void finish(TracedLaunch* t, bool keep) noexcept {
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (t->generation == g_generation) {
      if (keep) g_records.push_back(std::move(t->r));
      if (--g_inflight == 0) g_cv.notify_all();
    }
  }
  delete t;
}

void onReady(PJRT_Error* error, void* arg) {
  auto* t = static_cast<TracedLaunch*>(arg);
  t->r.done_ns = nowNs();
  if (error != nullptr) {
    t->r.failed = true;
    consumeErrorCode(error);
  }
  finish(t, true);
}

}  // namespace

void endTracedLaunch(TracedLaunch* t, PJRT_Event* done) {
  t->r.queued_ns = nowNs();
  if (done == nullptr || !TPU_PJRT_HAS(PJRT_Event_OnReady)) {
    // No completion event to wait for: the launch returned when the program was done.
    t->r.done_ns = t->r.queued_ns;
    finish(t, true);
    return;
  }
  Args<PJRT_Event_OnReady_Args> a;
  a->event = done;
  a->callback = &onReady;
  a->user_arg = t;  // the callback may run (and free t) before OnReady returns
  PJRT_Error* err = nullptr;
  try {
    err = TPU_PJRT_FN(PJRT_Event_OnReady)(a.get());
  } catch (...) {
    abandonTracedLaunch(t);
    throw;
  }
  if (err != nullptr) {
    consumeErrorCode(err);
    abandonTracedLaunch(t);
  }
}

void abandonTracedLaunch(TracedLaunch* t) noexcept { finish(t, false); }

}  // namespace detail

LaunchScope::LaunchScope(const char* kind, const std::string* name, const std::string* detail) : prev_(t_label) {
  t_label = LaunchLabel{kind, name, detail};
}

LaunchScope::~LaunchScope() { t_label = prev_; }

const LaunchLabel& currentLaunchLabel() { return t_label; }

void startLaunchTrace(CorrelationSource correlation) {
  std::lock_guard<std::mutex> lk(g_mu);
  ++g_generation;
  g_inflight = 0;
  g_records.clear();
  g_correlation = correlation;
  g_seq = 0;
  detail::g_tracing.store(true, std::memory_order_relaxed);
}

std::vector<LaunchRecord> stopLaunchTrace(int64_t wait_ms) {
  std::unique_lock<std::mutex> lk(g_mu);
  detail::g_tracing.store(false, std::memory_order_relaxed);
  g_cv.wait_for(lk, std::chrono::milliseconds(std::max<int64_t>(wait_ms, 0)), [] { return g_inflight == 0; });
  std::vector<LaunchRecord> out;
  out.swap(g_records);
  ++g_generation;  // launches still running belong to no trace now
  g_inflight = 0;
  g_correlation = nullptr;
  lk.unlock();
  std::sort(out.begin(), out.end(), [](const LaunchRecord& a, const LaunchRecord& b) { return a.seq < b.seq; });
  return out;
}

bool launchTraceActive() { return detail::g_tracing.load(std::memory_order_relaxed); }

}  // namespace runtime
}  // namespace torch_tpu
