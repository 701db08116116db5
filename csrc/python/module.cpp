// torch_tpu._C: the Python bindings. Importing the module registers the device's kernels with PyTorch.
#include <torch/csrc/Generator.h>
#include <torch/extension.h>

#include <chrono>

#include "compile/plan.h"
#include "core/client.h"
#include "core/rng.h"
#include "core/scalars.h"
#include "core/storage.h"
#include "eager/copy.h"
#include "eager/device.h"
#include "eager/fallback.h"
#include "eager/kernel.h"
#include "python/bindings.h"

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
  client().synchronize(d);
  awaitPendingCopies(d);
}

// Marks every execution launched so far on a device; used by torch.tpu.Event / Stream.
struct Marker {
  int device = -1;
  bool recorded = false;
  bool done = false;
  double done_time = -1;
  void record(int d) {
    device = checkDevice(d);
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

}  // namespace

PYBIND11_MODULE(_C, m) {
  registerHooks();
  registerLoweringKernels();
  bindCompile(m);
  bindForeign(m);

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
    return d;
  });
  m.def("_set_accelerator_reported", &setAcceleratorReported);
  m.def("_device_count", []() { return deviceCount(); });
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
  m.def("_memory_stats", [](int d) {
    d = checkDevice(d);
    py::dict r;
    auto& c = client();
    auto ms = c.memoryStats(d);
    if (ms) {
      r["allocated"] = ms->bytes_in_use;
      r["peak_allocated"] = ms->peak_bytes_in_use;
      r["reserved"] = ms->bytes_in_use;
      r["limit"] = ms->bytes_limit;
      r["from_plugin"] = true;
    } else {
      // Device scalars cached for reuse are reserved by the backend, not allocated by tensors.
      int64_t cached = scalarCacheBytes(d);
      r["allocated"] = c.liveBytes(d) - cached;
      r["peak_allocated"] = std::max<int64_t>(c.peakLiveBytes(d) - cached, 0);
      r["reserved"] = c.liveBytes(d);
      r["limit"] = int64_t(-1);
      r["from_plugin"] = false;
    }
    return r;
  });
  m.def("_reset_peak_memory_stats", [](int d) { client().resetPeak(checkDevice(d)); });
  m.def("_empty_cache", []() {
    clearScalarCache();
    compile::clearPackedWeights();
  });
  m.def("_default_generator", [](int d) {
    d = checkDevice(d);
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(defaultGenerator(d)));
  });
  m.def("_cache_stats", []() {
    KernelCacheStats s = kernelCacheStats();
    py::dict d;
    d["requests"] = s.requests;
    d["hits"] = s.hits;
    d["compiles"] = s.compiles;
    d["compile_seconds"] = s.compile_seconds;
    d["entries"] = s.entries;
    return d;
  });
  m.def("_clear_cache", &clearKernelCache);
  m.def("_fallback_counts", []() { return fallbackCounts(); });
  m.def("_fallback_reasons", []() { return fallbackReasons(); });
  m.def("_reset_fallback_counts", &resetFallbackCounts);
  m.def("_set_fallback_strict", &setFallbackStrict);
  m.def("_fallback_strict", &fallbackStrict);
  m.def("_lowered_ops", []() { return registerLoweringKernels(); });
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
