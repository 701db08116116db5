#include "core/checks.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#include "core/client.h"
#include "core/config.h"
#include "core/executables.h"
#include "core/launch.h"
#include "settings/settings.h"
#include "stablehlo/builder.h"

namespace torch_tpu::core {

using shlo::DType;
using shlo::TensorType;
using shlo::Value;

namespace {

// -1: not read from the environment yet (read at first use: an invalid value must not fail the extension's load).
std::atomic<int> g_checks{-1};

// ---- the site registry: global site id (1-based) -> site

std::mutex g_registry_mu;
std::vector<CheckSites> g_tables;           // every registered table (keeps the sites alive)
std::vector<const CheckSite*> g_by_id;      // global id - 1 -> site

const CheckSite* siteById(int64_t id) {
  std::lock_guard<std::mutex> g(g_registry_mu);
  return id >= 1 && id <= static_cast<int64_t>(g_by_id.size()) ? g_by_id[id - 1] : nullptr;
}

// ---- pending flags

struct Pending {
  runtime::BufferPtr flag;
  int64_t base;  // global site id = base + the flag's site (a program's table base; 0 for a folded flag)
};

struct DeviceChecks {
  std::vector<Pending> pending;
};

constexpr size_t kFoldAt = 256;

std::mutex g_mu;
std::vector<DeviceChecks> g_devices;  // by device index, grown on demand
std::atomic<int64_t> g_count{0};      // pending flags over all devices

// The fold program for n (a power of two) flags: inputs n x tensor<2xs64> and their bases tensor<n x s64>; output
// the flag [global site of the first failing input, its value], or [0, 0].
runtime::ExecutablePtr foldProgram(int64_t n) {
  shlo::Builder b;
  std::vector<Value> rows;
  for (int64_t k = 0; k < n; ++k) rows.push_back(b.reshape(b.parameter(TensorType{DType::S64, {2}}), {1, 2}));
  Value bases = b.parameter(TensorType{DType::S64, {n}});
  Value all = n == 1 ? rows[0] : b.concatenate(rows, 0);
  Value site = b.reshape(b.sliceInDim(all, 0, 1, 1, 1), {n});
  Value val = b.reshape(b.sliceInDim(all, 1, 2, 1, 1), {n});
  Value zero = b.zerosLike(site);
  Value failing = b.compare(site, zero, shlo::Cmp::NE);
  Value k = b.iota(TensorType{DType::S64, {n}}, 0);
  Value first = b.reduce(b.select(failing, k, b.broadcastTo(b.constantInt(n, DType::S64), {n})), {0},
                         shlo::ReduceKind::Min);
  Value hit = b.compare(k, b.broadcastTo(first, {n}), shlo::Cmp::EQ);
  Value gsite = b.reduce(b.select(hit, b.select(failing, b.add(site, bases), zero), zero), {0}, shlo::ReduceKind::Sum);
  Value gval = b.reduce(b.select(hit, val, zero), {0}, shlo::ReduceKind::Sum);
  std::string text = b.finish({b.concatenate({b.reshape(gsite, {1}), b.reshape(gval, {1})}, 0)});
  return executableFor(text).exe;
}

// One flag for all of `list` (launched asynchronously). Called with g_mu held.
Pending fold(const std::vector<Pending>& list, int device) {
  if (list.size() == 1) return list[0];
  int64_t n = 2;
  while (n < static_cast<int64_t>(list.size())) n *= 2;
  static std::mutex progs_mu;
  static std::vector<runtime::ExecutablePtr> progs;  // by log2(n)
  static std::vector<runtime::BufferPtr> zero_flags;  // by device: pads the inputs to n
  runtime::ExecutablePtr exe;
  runtime::BufferPtr zero;
  {
    std::lock_guard<std::mutex> g(progs_mu);
    size_t lg = 0;
    while ((int64_t(1) << lg) < n) ++lg;
    if (progs.size() <= lg) progs.resize(lg + 1);
    if (!progs[lg]) progs[lg] = foldProgram(n);
    exe = progs[lg];
    if (static_cast<int>(zero_flags.size()) <= device) zero_flags.resize(device + 1);
    if (!zero_flags[device]) {
      int64_t z[2] = {0, 0};
      zero_flags[device] = client().fromHost(z, runtime::ElementType::S64, {2}, device);
    }
    zero = zero_flags[device];
  }
  std::vector<int64_t> bases(n, 0);
  std::vector<runtime::Buffer*> args;
  args.reserve(n + 1);
  for (int64_t k = 0; k < n; ++k) {
    if (k < static_cast<int64_t>(list.size())) {
      args.push_back(list[k].flag.get());
      bases[k] = list[k].base;
    } else {
      args.push_back(zero.get());
    }
  }
  runtime::BufferPtr b = client().fromHost(bases.data(), runtime::ElementType::S64, {n}, device);
  args.push_back(b.get());
  static const std::string kName = "combine device-side check flags";
  LaunchOptions label;
  label.kind = "checks";
  label.name = &kName;
  return Pending{launchExecutable(*exe, device, args, label)[0], 0};
}

struct Violation {
  std::string message;
  bool index_error;
};

// The violation a flag holding `v` reports, if any.
std::optional<Violation> decode(const int64_t v[2], int64_t base, int device) {
  if (v[0] == 0) return std::nullopt;
  const CheckSite* s = siteById(base + v[0]);
  if (s == nullptr) return Violation{"tpu: a device-side check failed (unknown site)", false};
  std::string msg = s->message;
  const size_t at = msg.find("{}");
  if (at != std::string::npos) msg.replace(at, 2, std::to_string(v[1]));
  msg += " (device-side check of " + s->op + " on tpu:" + std::to_string(device);
  if (!launchBlocking())
    msg += "; reported at the next synchronization, set TORCH_TPU_LAUNCH_BLOCKING=1 to raise at the failing call";
  msg += ")";
  return Violation{std::move(msg), s->index_error};
}

[[noreturn]] void raise(const Violation& v) {
  if (v.index_error) TORCH_CHECK_INDEX(false, v.message);
  TORCH_CHECK(false, v.message);
}

}  // namespace

bool deviceChecks() {
  int v = g_checks.load(std::memory_order_relaxed);
  if (v < 0) {
    int read = settings::switchOn("TORCH_TPU_DEVICE_CHECKS") ? 1 : 0;
    g_checks.compare_exchange_strong(v, read, std::memory_order_relaxed);
    v = g_checks.load(std::memory_order_relaxed);
  }
  return v == 1;
}

void setDeviceChecks(bool on) { g_checks.store(on ? 1 : 0); }

CheckSites registerCheckSites(std::vector<CheckSite> sites) {
  auto t = std::make_shared<SiteTable>();
  t->sites = std::move(sites);
  std::lock_guard<std::mutex> g(g_registry_mu);
  t->base = static_cast<int64_t>(g_by_id.size());
  for (const CheckSite& s : t->sites) g_by_id.push_back(&s);
  g_tables.push_back(t);
  return t;
}

void addPendingCheck(int device, runtime::BufferPtr flag, CheckSites sites) {
  std::lock_guard<std::mutex> g(g_mu);
  if (device >= static_cast<int>(g_devices.size())) g_devices.resize(device + 1);
  DeviceChecks& d = g_devices[device];
  d.pending.push_back({std::move(flag), sites->base});
  g_count++;
  if (d.pending.size() >= kFoldAt) {
    // Bounded memory without waiting: the pending flags become one (computed on the device).
    Pending one = fold(d.pending, device);
    g_count -= static_cast<int64_t>(d.pending.size()) - 1;
    d.pending.clear();
    d.pending.push_back(std::move(one));
  }
}

struct PendingChecks::Read {
  int device;
  Pending flag;
  int64_t v[2] = {0, 0};
  runtime::EventPtr done;
};

PendingChecks PendingChecks::start(int device) {
  PendingChecks r;
  if (g_count.load(std::memory_order_relaxed) == 0) return r;
  std::lock_guard<std::mutex> g(g_mu);
  for (int dev = 0; dev < static_cast<int>(g_devices.size()); ++dev) {
    if (device >= 0 && dev != device) continue;
    DeviceChecks& d = g_devices[dev];
    if (d.pending.empty()) continue;
    g_count -= static_cast<int64_t>(d.pending.size());
    std::vector<Pending> list = std::move(d.pending);
    d.pending.clear();
    auto read = std::make_shared<Read>();
    read->device = dev;
    read->flag = fold(list, dev);
    read->done = read->flag.flag->toHostAsync(read->v, sizeof(read->v));
    r.reads_.push_back(std::move(read));
  }
  return r;
}

void PendingChecks::finish() {
  std::vector<std::shared_ptr<Read>> reads = std::move(reads_);
  reads_.clear();
  std::optional<Violation> first;
  for (auto& r : reads) {
    r->done->await();
    std::optional<Violation> v = decode(r->v, r->flag.base, r->device);
    if (v && !first) first = std::move(v);
  }
  if (first) raise(*first);
}

PendingChecks::~PendingChecks() {
  for (auto& r : reads_) {
    try {
      r->done->await();
    } catch (...) {
    }
  }
}

void raisePendingChecks(int device) {
  if (g_count.load(std::memory_order_relaxed) == 0) return;
  PendingChecks::start(device).finish();
}

int64_t pendingCheckCount() { return g_count.load(); }

}  // namespace torch_tpu::core
