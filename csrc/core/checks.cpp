#include "core/checks.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#include "core/config.h"

namespace torch_tpu::core {

namespace {

struct Pending {
  runtime::BufferPtr flag;
  CheckSites sites;
};

struct Violation {
  std::string message;
  bool index_error;
};

struct DeviceChecks {
  std::vector<Pending> pending;
  size_t sweep_at = 256;                // read the flags that are ready when the list reaches this size
  std::optional<Violation> found;       // a violation a sweep found, raised at the next synchronization
};

std::mutex g_mu;
std::vector<DeviceChecks> g_devices;  // by device index, grown on demand
std::atomic<int64_t> g_count{0};      // pending flags plus found violations, over all devices

// The violation a flag reports, if any (waits for the flag).
std::optional<Violation> readFlag(const Pending& p, int device) {
  int64_t v[2] = {0, 0};
  p.flag->toHost(v, sizeof(v));
  if (v[0] == 0) return std::nullopt;
  const auto& sites = *p.sites;
  const size_t k = static_cast<size_t>(v[0] - 1);
  if (k >= sites.size()) return Violation{"tpu: a device-side check failed (unknown site)", false};
  const CheckSite& s = sites[k];
  std::string msg = s.message;
  const size_t at = msg.find("{}");
  if (at != std::string::npos) msg.replace(at, 2, std::to_string(v[1]));
  msg += " (device-side check of " + s.op + " on tpu:" + std::to_string(device);
  if (!launchBlocking())
    msg += "; reported at the next synchronization, set TORCH_TPU_LAUNCH_BLOCKING=1 to raise at the failing call";
  msg += ")";
  return Violation{std::move(msg), s.index_error};
}

[[noreturn]] void raise(const Violation& v) {
  if (v.index_error) TORCH_CHECK_INDEX(false, v.message);
  TORCH_CHECK(false, v.message);
}

// Reads the flags that are already computed, keeps the first violation in `d.found`, drops the clean ones.
// Called with g_mu held.
void sweep(DeviceChecks& d, int device) {
  size_t keep = 0;
  for (size_t i = 0; i < d.pending.size(); ++i) {
    Pending& p = d.pending[i];
    bool ready = false;
    try {
      ready = p.flag->isReady();
    } catch (...) {
      ready = false;
    }
    if (!ready) {
      d.pending[keep++] = std::move(p);
      continue;
    }
    std::optional<Violation> v;
    try {
      v = readFlag(p, device);
    } catch (...) {
      // The program failed; synchronize() reports its error.
    }
    g_count--;
    if (v && !d.found) {
      d.found = std::move(v);
      g_count++;
    }
  }
  d.pending.resize(keep);
  d.sweep_at = std::max<size_t>(256, 2 * keep);
}

}  // namespace

namespace {
std::atomic<bool> g_checks{[] {
  const char* e = std::getenv("TORCH_TPU_DEVICE_CHECKS");
  return !(e && *e && std::strcmp(e, "0") == 0);
}()};
}  // namespace

bool deviceChecks() { return g_checks.load(std::memory_order_relaxed); }

void setDeviceChecks(bool on) { g_checks.store(on); }

void addPendingCheck(int device, runtime::BufferPtr flag, CheckSites sites) {
  std::lock_guard<std::mutex> g(g_mu);
  if (device >= static_cast<int>(g_devices.size())) g_devices.resize(device + 1);
  DeviceChecks& d = g_devices[device];
  d.pending.push_back({std::move(flag), std::move(sites)});
  g_count++;
  if (d.pending.size() >= d.sweep_at) sweep(d, device);
}

void raisePendingChecks(int device) {
  if (g_count.load(std::memory_order_relaxed) == 0) return;
  std::vector<std::pair<int, std::vector<Pending>>> todo;
  std::optional<Violation> found;
  {
    std::lock_guard<std::mutex> g(g_mu);
    for (int dev = 0; dev < static_cast<int>(g_devices.size()); ++dev) {
      if (device >= 0 && dev != device) continue;
      DeviceChecks& d = g_devices[dev];
      if (d.found) {
        if (!found) found = std::move(d.found);
        d.found.reset();
        g_count--;
      }
      if (!d.pending.empty()) {
        g_count -= static_cast<int64_t>(d.pending.size());
        todo.emplace_back(dev, std::move(d.pending));
        d.pending.clear();
        d.sweep_at = 256;
      }
    }
  }
  if (found) raise(*found);
  for (auto& [dev, list] : todo)
    for (const Pending& p : list)
      if (std::optional<Violation> v = readFlag(p, dev)) raise(*v);
}

int64_t pendingCheckCount() { return g_count.load(); }

}  // namespace torch_tpu::core
