// torch_tpu._C: the Python bindings. Importing the module registers the device's kernels with PyTorch.
#include <pthread.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/device_lazy_init.h>
#include <torch/extension.h>

#include <chrono>

#include "compile/plan.h"
#include "core/checks.h"
#include "core/config.h"
#include "core/client.h"
#include "core/executables.h"
#include "core/launch.h"
#include "core/lru.h"
#include "core/pressure.h"
#include "core/memory.h"
#include "core/packed.h"
#include "core/rng.h"
#include "core/scalars.h"
#include "core/storage.h"
#include "eager/copy.h"
#include "eager/device.h"
#include "eager/fallback.h"
#include "eager/fused.h"
#include "eager/kernel.h"
#include "eager/profiler.h"
#include "lowering/lowering.h"
#include "python/bindings.h"
#include "runtime/device_attributes.h"
#include "runtime/shutdown.h"

namespace py = pybind11;

namespace {

using namespace torch_tpu;

runtime::CreateOption toOption(const std::string& name, const py::handle& v) {
  runtime::CreateOption o;
  o.name = name;
  if (py::isinstance<py::bool_>(v)) o.value = v.cast<bool>();
  else if (py::isinstance<py::int_>(v)) o.value = v.cast<int64_t>();
  else if (py::isinstance<py::float_>(v)) o.value = v.cast<float>();
  else if (py::isinstance<py::str>(v)) o.value = v.cast<std::string>();
  else o.value = v.cast<std::vector<int64_t>>();
  return o;
}

int checkDevice(int d) {
  int n = deviceCount();
  if (d < 0) d = currentDevice();
  if (d >= n) throw py::value_error("tpu: invalid device index " + std::to_string(d) + " (" + std::to_string(n) +
                                    " devices available)");
  return d;
}

void synchronize(int d) {
  d = checkDevice(d);
  py::gil_scoped_release nogil;
  fused::flush(d);
  client().synchronize(d);
  awaitPendingCopies(d);
  core::raisePendingChecks(d);
}

// Marks every execution launched so far on a device; used by torch.tpu.Event / Stream.
struct Marker {
  int device = -1;
  bool recorded = false;
  bool done = false;
  double done_time = -1;
  void record(int d) {
    device = checkDevice(d);
    {
      py::gil_scoped_release nogil;
      fused::flush(device);  // the marker covers what was recorded so far
    }
    recorded = true;
    done = false;
    done_time = -1;
  }
  void wait() {
    if (!recorded || done) return;
    {
      py::gil_scoped_release nogil;
      client().synchronize(device);
      awaitPendingCopies(device);
      core::raisePendingChecks(device);
    }
    done = true;
    done_time = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  bool query() {
    if (!recorded || done) return true;
    // The CPU plugin completes small programs almost at once; waiting here keeps query() honest.
    wait();
    return true;
  }
  py::object time() const { return done ? py::object(py::float_(done_time)) : py::none(); }
};

// In a child forked after the runtime started, PyTorch must ask torch.tpu._lazy_init again before creating a tpu
// tensor (it raises there, as torch.cuda does), instead of treating the device as initialized.
void afterForkInChild() {
  if (runtime::Client::initialized()) torch::utils::set_requires_device_init(at::kPrivateUse1, true);
}

// Process exit. Runs once the interpreter has finalized (Py_AtExit), before exit() runs any static destructor:
// the plugin's static destructors tear down LLVM's and XLA's global state (command-line options, registries), so
// nothing may run on the plugin by then (a background compile crashed, or printed "LLVM ERROR", there), and nothing
// may call it afterwards (the static caches of programs and buffers are destroyed after the plugin's statics: they
// destroyed executables and buffers in a torn-down plugin). So: no more background compiles (the running one
// finishes), the queued disk-cache writes finish, copies and executions in flight are awaited, then the runtime
// closes (runtime::shutdown): objects destroyed later leave their PJRT objects to the OS.
void shutdownAtExit() {
  try {
    fused::shutdown();
    core::shutdownDiskCache();
    if (runtime::Client::initialized() && !runtime::Client::inForkedChild() && !runtime::isShutDown())
      for (int d = 0; d < runtime::Client::get().deviceCount(); ++d) {
        try {
          awaitPendingCopies(d);
        } catch (...) {
        }
      }
  } catch (...) {
  }
  runtime::shutdown();
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  static const bool once = [] {
    ::pthread_atfork(nullptr, nullptr, &afterForkInChild);
    Py_AtExit(&shutdownAtExit);
    return true;
  }();
  (void)once;
  registerHooks();
  registerLoweringKernels();
  bindCompile(m);
  bindForeign(m);
  bindDistributed(m);
  bindSettings(m);
  bindDLPack(m);

  m.def(
      "_set_plugin",
      [](const std::string& path, const py::dict& options, const py::list& preload) {
        std::vector<runtime::CreateOption> opts;
        for (auto item : options) opts.push_back(toOption(item.first.cast<std::string>(), item.second));
        // (path or soname, required, hint) per library to load before the plugin (the CUDA plugin's libraries).
        std::vector<runtime::PreloadLibrary> libs;
        for (auto item : preload) {
          auto t = item.cast<py::tuple>();
          libs.push_back({t[0].cast<std::string>(), t[1].cast<bool>(), t[2].cast<std::string>()});
        }
        setPlugin(path, std::move(opts));
        runtime::setPreloadLibraries(std::move(libs));
      },
      py::arg("path"), py::arg("options"), py::arg("preload") = py::list());
  m.def("_plugin_info", []() {
    const runtime::PluginInfo& p = client().plugin();
    py::dict d;
    d["path"] = p.path;
    d["api_version"] = std::to_string(p.api_major) + "." + std::to_string(p.api_minor);
    d["platform_name"] = p.platform_name;
    d["platform_version"] = p.platform_version;
    py::dict attrs;
    for (const auto& kv : p.attributes) attrs[py::str(kv.first)] = kv.second;
    d["attributes"] = attrs;
    d["preloaded"] = p.preloaded;
    d["preload_failed"] = p.preload_failed;
    d["extensions"] = p.extensions;
    return d;
  });
  // Whether torch.profiler shows device activity (csrc/eager/profiler.h).
  m.def("_kineto_plugin_built", &kinetoPluginBuilt);
  m.def("_set_accelerator_reported", &setAcceleratorReported);
  m.def("_device_count", []() { return deviceCount(); });
  m.def("_is_in_bad_fork", []() { return inBadFork(); });
  m.def("_bad_fork_message", []() { return std::string(runtime::kForkedMessage); });
  m.def("_init_error", []() -> py::object {
    deviceCount();
    const std::string& e = initError();
    if (e.empty()) return py::none();
    return py::str(e);
  });
  m.def("_get_device", []() { return currentDevice(); });
  m.def("_set_device", [](int d) { setCurrentDevice(checkDevice(d)); });
  m.def("_synchronize", &synchronize, py::arg("device") = -1);
  m.def("_device_kind", [](int d) { return client().deviceKind(checkDevice(d)); });
  // TorchTPU's get_local_device_attributes(): the PJRT device's global id, process index, kind and description
  // attributes (strings; integer lists joined by '.').
  m.def("_device_attributes", [](int d) {
    d = checkDevice(d);
    py::dict out;
    out["id"] = client().globalDeviceId(d);
    out["process_index"] = client().processIndex(d);
    out["device_kind"] = client().deviceKind(d);
    py::dict attrs;
    for (const auto& kv : runtime::deviceAttributes(client(), d)) attrs[py::str(kv.first)] = kv.second;
    out["attributes"] = attrs;
    return out;
  });
  m.def("_memory_stats", [](int d) {
    d = checkDevice(d);
    {
      py::gil_scoped_release nogil;
      fused::flush(d);  // what the recorded ops allocate counts
    }
    core::MemoryInfo mi = core::memoryInfo(d);
    py::dict r;
    r["allocated"] = mi.allocated;
    r["peak_allocated"] = mi.peak;
    r["reserved"] = mi.reserved;
    r["limit"] = mi.limit;
    r["limit_source"] = mi.limit_source;
    r["free"] = mi.free;
    r["total"] = mi.total;
    r["from_plugin"] = mi.from_plugin;
    return r;
  });
  m.def("_launch_count", [](int d) { return client().launchCount(checkDevice(d)); });
  // Launches through core's launch per label kind ("eager", "fused", "compiled", "collective", "checks", ...).
  m.def("_launch_counts", []() {
    py::dict r;
    for (const auto& [kind, n] : core::launchCounts()) r[py::str(kind)] = n;
    return r;
  });
  m.def("_reset_peak_memory_stats", [](int d) { client().resetPeak(checkDevice(d)); });
  m.def("_empty_cache", []() {
    clearScalarCache();
    core::clearPackedWeights();
  });
  m.def("_default_generator", [](int d) {
    d = checkDevice(d);
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(defaultGenerator(d)));
  });
  // Debugging and tests: the text of every program looked up while recording is on (core/executables.h).
  m.def("_record_program_texts", [](bool on) { core::recordProgramTexts(on); });
  m.def("_recorded_program_texts", []() {
    py::list out;
    for (const std::string& t : core::takeRecordedTexts()) out.append(py::str(t));
    return out;
  });
  // TorchTPU's per_entry_stats: (key hash, launches, last launch ns since the epoch, compile seconds, from disk).
  m.def("_executable_entries", []() {
    py::list out;
    for (const core::ExecutableEntry& e : core::executableEntries())
      out.append(py::make_tuple(e.key_hash, e.read_count, e.last_read_ns, e.compile_seconds, e.from_disk));
    return out;
  });
  m.def("_cache_stats", []() {
    KernelCacheStats s = kernelCacheStats();
    core::DiskCacheStats d = core::diskCacheStats();
    fused::Stats f = fused::stats();
    py::dict r;
    r["requests"] = s.requests;
    r["hits"] = s.hits;
    r["memory_hits"] = s.hits;
    r["misses"] = s.misses;
    r["compiles"] = s.compiles;
    r["disk_hits"] = s.disk_hits;
    r["compile_seconds"] = s.compile_seconds;
    r["disk_seconds"] = s.disk_seconds;
    r["lower_seconds"] = s.lower_seconds;
    r["entries"] = s.entries;
    r["evictions"] = s.evictions;
    r["entry_limit"] = static_cast<int64_t>(core::programCacheLimit());
    r["packed_weights"] = core::packedWeightsMade();
    py::dict disk;
    disk["dir"] = core::cacheDir();
    disk["max_bytes"] = core::cacheMaxBytes();
    disk["hits"] = d.hits;
    disk["misses"] = d.misses;
    disk["writes"] = d.writes;
    disk["write_bytes"] = d.write_bytes;
    disk["write_failures"] = d.write_failures;
    disk["corrupt"] = d.corrupt;
    disk["evictions"] = d.evictions;
    disk["evicted_bytes"] = d.evicted_bytes;
    disk["pending_writes"] = d.pending;
    disk["load_seconds"] = d.load_seconds;
    r["disk"] = disk;
    py::dict fu;
    fu["mode"] = fused::mode();
    fu["ops"] = f.ops;
    fu["flushes"] = f.flushes;
    fu["hits"] = f.fused_hits;
    fu["compiles"] = f.fused_compiles;
    fu["disk_hits"] = f.fused_disk_hits;
    fu["replays"] = f.replays;
    fu["limit_flushes"] = f.limit_flushes;
    fu["speed_trials"] = f.speed_trials;
    fu["speed_checks"] = f.speed_checks;
    fu["slow_programs"] = f.slow_programs;
    fu["donated"] = f.donated;
    fu["bypassed"] = f.bypassed;
    fu["entries"] = f.entries;
    fu["evictions"] = f.evictions;
    fu["compile_seconds"] = f.compile_seconds;
    r["fused"] = fu;
    core::MapPressureStats mp = core::mapPressureStats();
    py::dict maps;
    maps["checks"] = mp.checks;
    maps["trims"] = mp.trims;
    maps["last_mappings"] = mp.last_mappings;
    maps["max_mappings"] = mp.max_mappings;
    r["map_pressure"] = maps;
    return r;
  });
  m.def("_set_map_limit_for_testing", &core::setMapLimitForTesting);
  // The deleter of PyTorch's storage byte slices, read from a slice of a CPU storage (core/storage.h sliceBase).
  m.def("_note_storage_slice", [](uintptr_t cdata) {
    auto* impl = reinterpret_cast<c10::StorageImpl*>(cdata);
    noteSliceDeleter(impl->data_ptr().get_deleter());
  });
  // What process exit does (tests): afterwards every tpu use raises.
  m.def("_shutdown", []() {
    py::gil_scoped_release nogil;
    shutdownAtExit();
  });
  m.def("_flush_disk_cache", []() {
    py::gil_scoped_release nogil;
    core::flushDiskCache();
  });
  m.def("_trim_disk_cache", []() {
    py::gil_scoped_release nogil;
    core::trimDiskCache();
  });
  m.def("_set_cache_max_bytes", &core::setCacheMaxBytes);
  m.def("_set_program_cache_limit", [](int64_t n) { core::setProgramCacheLimit(static_cast<size_t>(std::max<int64_t>(n, 0))); });
  m.def("_executable_evictions", &core::executableEvictions);
  m.def("_set_eager_mode", [](const std::string& mode) {
    py::gil_scoped_release nogil;
    fused::setMode(mode);
  });
  m.def("_eager_mode", &fused::mode);
  m.def("_fused_flush", []() {
    py::gil_scoped_release nogil;
    fused::flush(-1);
  });
  m.def("_plugin_load_tried", []() { return pluginLoadTried(); });
  m.def("_fused_pending_text", []() { return fused::pendingText(); });
  m.def("_fused_set_speed_check", [](int trials, double bias) { fused::setSpeedCheck(trials, bias); });
  m.def("_fused_pending_ops", []() { return static_cast<int64_t>(fused::pendingOps()); });
  m.def("_set_launch_blocking", [](bool on) { setLaunchBlocking(on); });
  m.def("_launch_blocking", []() { return launchBlocking(); });
  m.def("_clear_fused_cache", []() {
    py::gil_scoped_release nogil;
    fused::clearCache();
  });
  m.def("_fused_wait", []() {
    py::gil_scoped_release nogil;
    fused::waitForCompiles();
  });
  m.def("_clear_cache", &clearKernelCache);
  m.def("_fallback_counts", []() { return fallbackCounts(); });
  m.def("_fallback_reasons", []() { return fallbackReasons(); });
  m.def("_host_transfer_counts", []() { return hostTransferCounts(); });
  m.def("_pending_device_checks", []() { return core::pendingCheckCount(); });
  m.def("_set_device_checks", &core::setDeviceChecks);
  m.def("_device_checks", &core::deviceChecks);
  m.def("_reset_fallback_counts", &resetFallbackCounts);
  m.def("_set_fallback_strict", &setFallbackStrict);
  m.def("_fallback_strict", &fallbackStrict);
  m.def("_lowered_ops", []() { return registerLoweringKernels(); });
  m.def("_no_lowering", &lowering::noLowering, py::arg("op"), py::arg("reason") = "");
  // TorchTPU's sync.is_materialized / is_ready: 0 while fused eager mode only recorded the tensor's value (no
  // program launched for it), 1 launched and still computing, 2 computed (or never written: no program owes it).
  m.def("_materialization_state", [](const at::Tensor& t) -> int {
    if (!t.defined() || !t.device().is_privateuseone() || !t.has_storage()) return 2;
    TpuStorage* s = storageOf(t);
    if (s->pending.load(std::memory_order_acquire) == TpuStorage::kPending) return 0;
    runtime::BufferPtr b = s->peek();
    if (!b) return 2;
    py::gil_scoped_release nogil;
    return b->isReady() ? 2 : 1;
  });
  m.def("_storage_buffer_dims", [](const at::Tensor& t) -> py::object {
    auto b = storageOf(t)->get();
    if (!b) return py::none();
    return py::cast(b->dims());
  });

  py::class_<Marker>(m, "_Marker")
      .def(py::init<>())
      .def("record", &Marker::record, py::arg("device") = -1)
      .def("wait", &Marker::wait)
      .def("query", &Marker::query)
      .def("time", &Marker::time);
}
