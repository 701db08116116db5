#include "core/memory.h"

#include <c10/util/Exception.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include "core/client.h"
#include "core/scalars.h"
#include "settings/settings.h"

namespace torch_tpu::core {

namespace {

// TORCH_TPU_MEMORY_LIMIT (a byte size: "123456", "512M", "8GiB", "1.5G"). -1 when unset.
int64_t envLimit() { return settings::bytesValue("TORCH_TPU_MEMORY_LIMIT").value_or(-1); }

int64_t hostTotal() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : -1;
}

// MemAvailable from /proc/meminfo (-1 if unknown).
int64_t hostAvailable() {
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return -1;
  char line[256];
  int64_t kb = -1;
  while (std::fgets(line, sizeof(line), f)) {
    if (std::strncmp(line, "MemAvailable:", 13) == 0) {
      kb = std::strtoll(line + 13, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kb < 0 ? -1 : kb * 1024;
}

struct Limits {
  std::vector<int64_t> limit;
  std::vector<std::string> source;
  bool host_backed = false;  // the CPU plugin: device memory is host memory
  bool explicit_limit = false;
};

const Limits& limits() {
  static std::once_flag once;
  static Limits l;
  std::call_once(once, [] {
    runtime::Client& c = client();
    std::string platform = c.plugin().platform_name;
    std::transform(platform.begin(), platform.end(), platform.begin(), ::tolower);
    l.host_backed = platform == "cpu";
    const int64_t env = envLimit();
    l.explicit_limit = env >= 0;
    for (int d = 0; d < c.deviceCount(); ++d) {
      int64_t lim = -1;
      std::string src;
      if (env >= 0) {
        lim = env;
        src = "TORCH_TPU_MEMORY_LIMIT";
      } else {
        std::optional<runtime::MemoryStats> ms;
        try {
          ms = c.memoryStats(d);
        } catch (...) {
        }
        if (ms && ms->bytes_limit > 0) {
          lim = ms->bytes_limit;
          src = "the plugin's bytes_limit";
        } else if (l.host_backed) {
          lim = hostTotal();
          src = "the host's memory";
        }
      }
      l.limit.push_back(lim);
      l.source.push_back(src);
    }
  });
  return l;
}

std::string human(int64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof(buf), "%lld bytes", static_cast<long long>(bytes));
  else std::snprintf(buf, sizeof(buf), "%.2f %s", v, units[u]);
  return buf;
}

// Storage counters, per device (at most kMaxDevices; devices beyond are not counted).
constexpr int kMaxDevices = 64;
struct Counters {
  std::atomic<int64_t> live{0}, peak_live{0}, made{0}, freed{0}, bytes_made{0}, bytes_freed{0}, ooms{0};
};
Counters g_counters[kMaxDevices];
void (*g_before_query)(int) = nullptr;

Counters* countersOf(int device) { return device >= 0 && device < kMaxDevices ? &g_counters[device] : nullptr; }

[[noreturn]] void raiseOutOfMemory(int device, int64_t bytes, const std::string& why) {
  if (Counters* c = countersOf(device)) c->ooms.fetch_add(1, std::memory_order_relaxed);
  TORCH_CHECK_WITH(OutOfMemoryError, false, "tpu out of memory. Tried to allocate ", human(bytes), " (", bytes,
                   " bytes) on tpu:", device, ": ", why,
                   ". Free tensors you no longer need or use smaller batches; TORCH_TPU_MEMORY_LIMIT sets the limit.");
}

void inUseMessage(std::string& why, int device, int64_t used, int64_t limit, const std::string& source) {
  why = human(used) + " already in use of a limit of " + human(limit) + " (" + source + ")";
}

// A plugin RESOURCE_EXHAUSTED: torch.OutOfMemoryError.
void pluginOutOfMemory(const runtime::OutOfMemory& e) {
  raiseOutOfMemory(e.device(), e.requested(), std::string("the plugin refused: ") + e.what());
}

const bool g_hook = [] {
  runtime::setOutOfMemoryHook(&pluginOutOfMemory);
  return true;
}();

}  // namespace

void setBeforeMemoryQuery(void (*hook)(int device)) { g_before_query = hook; }

void beforeMemoryQuery(int device) {
  if (g_before_query) g_before_query(device);
}

void noteStorageMade(int device, int64_t nbytes) {
  Counters* c = countersOf(device);
  if (!c) return;
  const int64_t now = c->live.fetch_add(1, std::memory_order_relaxed) + 1;
  int64_t peak = c->peak_live.load(std::memory_order_relaxed);
  while (now > peak && !c->peak_live.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  c->made.fetch_add(1, std::memory_order_relaxed);
  c->bytes_made.fetch_add(nbytes, std::memory_order_relaxed);
}

void noteStorageFreed(int device, int64_t nbytes) {
  Counters* c = countersOf(device);
  if (!c) return;
  c->live.fetch_sub(1, std::memory_order_relaxed);
  c->freed.fetch_add(1, std::memory_order_relaxed);
  c->bytes_freed.fetch_add(nbytes, std::memory_order_relaxed);
}

void noteStorageResized(int device, int64_t old_bytes, int64_t new_bytes) {
  Counters* c = countersOf(device);
  if (!c) return;
  if (new_bytes > old_bytes) c->bytes_made.fetch_add(new_bytes - old_bytes, std::memory_order_relaxed);
  else c->bytes_freed.fetch_add(old_bytes - new_bytes, std::memory_order_relaxed);
}

StorageCounts storageCounts(int device) {
  StorageCounts s;
  if (Counters* c = countersOf(device)) {
    s.live = c->live.load(std::memory_order_relaxed);
    s.peak_live = std::max(c->peak_live.load(std::memory_order_relaxed), s.live);
    s.made = c->made.load(std::memory_order_relaxed);
    s.freed = c->freed.load(std::memory_order_relaxed);
    s.bytes_made = c->bytes_made.load(std::memory_order_relaxed);
    s.bytes_freed = c->bytes_freed.load(std::memory_order_relaxed);
    s.ooms = c->ooms.load(std::memory_order_relaxed);
  }
  return s;
}

void resetAccumulatedCounts(int device) {
  if (Counters* c = countersOf(device)) {
    c->made = 0;
    c->freed = 0;
    c->bytes_made = 0;
    c->bytes_freed = 0;
    c->ooms = 0;
  }
}

void resetPeakCounts(int device) {
  if (Counters* c = countersOf(device)) c->peak_live.store(c->live.load(std::memory_order_relaxed));
}

void checkLaunchMemory(int device, int64_t bytes) {
  const Limits& l = limits();
  if (device < 0 || device >= static_cast<int>(l.limit.size())) return;
  const int64_t limit = l.limit[device];
  if (limit < 0) return;
  const int64_t used = client().liveBytes(device);
  if (used + bytes <= limit) return;
  std::string why;
  inUseMessage(why, device, used, limit, l.source[device]);
  raiseOutOfMemory(device, bytes, why);
}

void checkAllocation(int device, int64_t bytes) {
  if (bytes <= 0) return;
  checkLaunchMemory(device, bytes);
  const Limits& l = limits();
  if (l.host_backed && !l.explicit_limit && bytes >= (int64_t(64) << 20)) {
    const int64_t avail = hostAvailable();
    if (avail >= 0 && bytes > avail)
      raiseOutOfMemory(device, bytes, "the host (the CPU plugin's memory) has " + human(avail) + " available");
  }
}

MemoryInfo memoryInfo(int device) {
  runtime::Client& c = client();
  MemoryInfo m;
  const int64_t cached = scalarCacheBytes(device);
  std::optional<runtime::MemoryStats> ms = c.memoryStats(device);
  if (ms) {
    m.from_plugin = true;
    m.allocated = ms->bytes_in_use + c.reservedBytes(device);
    m.peak = std::max(ms->peak_bytes_in_use + c.reservedBytes(device), m.allocated);
    m.reserved = m.allocated;
  } else {
    m.allocated = std::max<int64_t>(c.liveBytes(device) - cached, 0);
    m.peak = std::max<int64_t>(c.peakLiveBytes(device) - cached, 0);
    m.reserved = c.liveBytes(device);
  }
  const Limits& l = limits();
  if (device >= 0 && device < static_cast<int>(l.limit.size())) {
    m.limit = l.limit[device];
    m.limit_source = l.source[device];
  }
  m.total = m.limit > 0 ? m.limit : std::max<int64_t>(hostTotal(), 0);
  m.free = std::max<int64_t>(m.total - m.reserved, 0);
  if (l.host_backed) {
    const int64_t avail = hostAvailable();
    if (avail >= 0) m.free = std::min(m.free, avail);
  }
  return m;
}

}  // namespace torch_tpu::core
