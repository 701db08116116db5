#include "core/launch.h"

#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>

#include "core/memory.h"

namespace torch_tpu::core {

namespace {

// Launch counts by label kind: the kinds in use are few and fixed (string literals of the callers), so a short
// append-only table with lock-free reads serves every launch.
constexpr int kMaxKinds = 32;
struct KindCount {
  std::atomic<const char*> kind{nullptr};
  std::atomic<int64_t> n{0};
};
KindCount g_counts[kMaxKinds];
std::atomic<int> g_num_kinds{0};
std::mutex g_kinds_mu;

void countLaunch(const char* kind) {
  if (kind == nullptr) kind = "";
  const int n = g_num_kinds.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    const char* k = g_counts[i].kind.load(std::memory_order_relaxed);
    if (k == kind || std::strcmp(k, kind) == 0) {
      g_counts[i].n.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  std::lock_guard<std::mutex> g(g_kinds_mu);
  const int m = g_num_kinds.load(std::memory_order_relaxed);
  for (int i = n; i < m; ++i)
    if (std::strcmp(g_counts[i].kind.load(std::memory_order_relaxed), kind) == 0) {
      g_counts[i].n.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  const int slot = m < kMaxKinds ? m : kMaxKinds - 1;  // more kinds than slots: the last one takes the rest
  if (m < kMaxKinds) {
    g_counts[slot].kind.store(kind, std::memory_order_relaxed);
    g_num_kinds.store(m + 1, std::memory_order_release);
  }
  g_counts[slot].n.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

std::vector<runtime::BufferPtr> launchExecutable(runtime::Executable& exe, int device,
                                                 const std::vector<runtime::Buffer*>& args,
                                                 const LaunchOptions& opts) {
  std::optional<runtime::LaunchScope> label;
  if (opts.kind != nullptr) label.emplace(opts.kind, opts.name, opts.detail);
  static const std::vector<bool> kNone;
  const std::vector<bool>& donate = opts.donate ? *opts.donate : kNone;
  int64_t need = exe.outputBytes() - opts.covered_bytes;
  for (size_t i = 0; i < donate.size() && i < args.size(); ++i)
    if (donate[i]) need -= static_cast<int64_t>(args[i]->byteSize());
  checkLaunchMemory(device, need);
  std::vector<runtime::BufferPtr> outs = exe.execute(device, args, donate, opts.launch_id);
  countLaunch(runtime::currentLaunchLabel().kind);
  return outs;
}

std::vector<std::pair<std::string, int64_t>> launchCounts() {
  std::vector<std::pair<std::string, int64_t>> out;
  const int n = g_num_kinds.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i)
    out.emplace_back(g_counts[i].kind.load(std::memory_order_relaxed), g_counts[i].n.load(std::memory_order_relaxed));
  return out;
}

}  // namespace torch_tpu::core
