// Client: plugin loading, PJRT_Client lifetime, devices, host->device transfers, compilation, synchronization and
// live-bytes accounting. The process-wide client is created once under g_init_mu and then published through an
// atomic pointer; it is never destroyed (see runtime.h). All methods are thread-safe.
#include <dlfcn.h>
#include <pthread.h>
#include <sys/stat.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <set>

#include "runtime/pjrt_util.h"
#include "runtime/shutdown.h"
#include "settings/settings.h"

namespace torch_tpu {
namespace runtime {

namespace {

std::mutex g_init_mu;
std::atomic<Client*> g_client{nullptr};
std::set<const PJRT_Api*> g_initialized_apis;  // PJRT_Plugin_Initialize is called at most once per plugin

std::string installHint(const std::string& path) {
  auto has = [&](const char* s) { return path.find(s) != std::string::npos; };
  if (has("tpu")) return "install the TPU plugin with: pip install torch-tpu[tpu] (libtpu)";
  if (has("cuda") || has("gpu"))
    return "install the NVIDIA plugin with: pip install torch-tpu[cuda13] (jax-cuda13-pjrt and its nvidia-* CUDA "
           "libraries; torch-tpu[cuda12] for CUDA 12 drivers)";
  if (has("cpu")) return "install the CPU plugin with: pip install xla-cpu-pjrt";
  return "install a PJRT plugin: pip install xla-cpu-pjrt (CPU), pip install torch-tpu[tpu] (TPU) or "
         "pip install torch-tpu[cuda13] (NVIDIA)";
}

std::vector<PreloadLibrary> g_preload;  // guarded by g_init_mu

// Loads the preload libraries (see runtime.h). Returns a sentence naming the ones that failed ("" if none).
std::string preloadLibraries(PluginInfo& info) {
  std::string failed;
  for (const PreloadLibrary& lib : g_preload) {
    if (::dlopen(lib.path.c_str(), RTLD_NOW | RTLD_GLOBAL) != nullptr) {
      info.preloaded.push_back(lib.path);
      continue;
    }
    const char* e = ::dlerror();
    std::string why = e ? e : "unknown error";
    if (lib.required) throw Error(lib.hint + " (" + why + ")", kErrorFailedPrecondition);
    info.preload_failed.push_back(lib.path + ": " + why);
    failed += (failed.empty() ? "" : "; ") + lib.path + " (" + lib.hint + ")";
  }
  return failed.empty() ? failed : " [libraries the plugin needs that failed to load: " + failed + "]";
}

std::string str(const char* p, size_t n) { return p == nullptr ? std::string() : std::string(p, n); }

std::string renderNamedValue(const PJRT_NamedValue& nv) {
  char buf[64];
  switch (nv.type) {
    case PJRT_NamedValue_kString: return str(nv.string_value, nv.value_size);
    case PJRT_NamedValue_kInt64: return std::to_string(nv.int64_value);
    case PJRT_NamedValue_kInt64List: {
      std::string s;
      for (size_t i = 0; i < nv.value_size; ++i) {
        if (i) s += '.';
        s += std::to_string(nv.int64_array_value[i]);
      }
      return s;
    }
    case PJRT_NamedValue_kFloat: std::snprintf(buf, sizeof(buf), "%g", nv.float_value); return buf;
    case PJRT_NamedValue_kBool: return nv.bool_value ? "true" : "false";
  }
  return "?";
}

// Protobuf wire-format helpers for xla.CompileOptionsProto.
void putVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void putVarintField(std::string& out, int field, uint64_t v) {
  putVarint(out, (static_cast<uint64_t>(field) << 3) | 0);
  putVarint(out, v);
}
void putBytesField(std::string& out, int field, const std::string& bytes) {
  putVarint(out, (static_cast<uint64_t>(field) << 3) | 2);
  putVarint(out, bytes.size());
  out += bytes;
}

// CompileOptionsProto { executable_build_options(3) { num_replicas(4): 1, num_partitions(5): 1 },
//                       compile_portable_executable(4): true }
// A portable executable has no fixed device assignment: PJRT_LoadedExecutable_Execute's execute_device picks
// the device per call. Encodes as 1A 04 20 01 28 01 20 01.
const std::string& portableCompileOptions() {
  static const std::string bytes = [] {
    std::string build;
    putVarintField(build, 4, 1);  // num_replicas
    putVarintField(build, 5, 1);  // num_partitions
    std::string opts;
    putBytesField(opts, 3, build);  // executable_build_options
    putVarintField(opts, 4, 1);     // compile_portable_executable
    return opts;
  }();
  return bytes;
}

std::string extensionName(int type) {
  switch (type) {
    case PJRT_Extension_Type_Gpu_Custom_Call: return "gpu_custom_call";
    case PJRT_Extension_Type_Profiler: return "profiler";
    case PJRT_Extension_Type_Custom_Partitioner: return "custom_partitioner";
    case PJRT_Extension_Type_Stream: return "stream";
    case PJRT_Extension_Type_Layouts: return "layouts";
    case PJRT_Extension_Type_FFI: return "ffi";
    case PJRT_Extension_Type_MemoryDescriptions: return "memory_descriptions";
    case PJRT_Extension_Type_Triton: return "triton";
    case PJRT_Extension_Type_RawBuffer: return "raw_buffer";
    case PJRT_Extension_Type_PhaseCompile: return "phase_compile";
    default: return "type " + std::to_string(type);
  }
}

PJRT_DeviceDescription* describe(PJRT_Device* d) {
  detail::Args<PJRT_Device_GetDescription_Args> a;
  a->device = d;
  TPU_PJRT(PJRT_Device_GetDescription, a.get());
  return a->device_description;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------- Impl

void Client::Impl::addLive(int device, int64_t bytes) {
  if (device < 0 || device >= static_cast<int>(devices.size()) || bytes == 0) return;
  DeviceState& s = state[device];
  int64_t now = s.live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  if (bytes > 0) {
    int64_t peak = s.peak.load(std::memory_order_relaxed);
    while (now > peak && !s.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }
}

static bool eventReady(PJRT_Event* ev) {
  detail::Args<PJRT_Event_IsReady_Args> a;
  a->event = ev;
  PJRT_Error* err = TPU_PJRT_FN(PJRT_Event_IsReady)(a.get());
  if (err != nullptr) {
    detail::consumeErrorCode(err);
    return false;
  }
  return a->is_ready;
}

void Client::Impl::trackExecution(int device, PJRT_Event* ev) {
  DeviceState& s = state[device];
  std::lock_guard<std::mutex> lock(s.mu);
  // Prune completed events now and then so the list stays short without a per-launch sweep. A completed event
  // whose execution failed is kept so that synchronize() reports the failure.
  if (s.pending.size() >= s.prune_at) {
    size_t keep = 0;
    for (size_t i = 0; i < s.pending.size(); ++i) {
      PJRT_Event* e = s.pending[i];
      bool drop = false;
      if (eventReady(e)) {
        detail::Args<PJRT_Event_Error_Args> a;
        a->event = e;
        PJRT_Error* err = TPU_PJRT_FN(PJRT_Event_Error)(a.get());
        if (err == nullptr) drop = true;
        else detail::consumeErrorCode(err);
      }
      if (drop) detail::destroyEvent(e);
      else s.pending[keep++] = e;
    }
    s.pending.resize(keep);
    s.prune_at = std::max<size_t>(64, 2 * keep);
  }
  s.pending.push_back(ev);
}

// ---------------------------------------------------------------------------------------------------- Client

Client::Client() : impl_(new Impl) {}
Client::~Client() = default;  // never runs: the process-wide client is leaked on purpose

bool Client::initialized() { return g_client.load(std::memory_order_acquire) != nullptr; }

bool Client::inForkedChild() { return detail::g_forked; }

bool isShutDown() { return detail::closed(); }

namespace detail {
namespace {
struct Compiles {
  std::mutex mu;
  std::condition_variable idle;
  int running = 0;
  bool stopped = false;
};
Compiles& compiles() {
  static Compiles* c = new Compiles();  // leaked: used until the very end
  return *c;
}
}  // namespace

CompileScope::CompileScope(const char* fn) {
  Compiles& c = compiles();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.stopped) throwClosed(fn);
  ++c.running;
}

CompileScope::~CompileScope() {
  Compiles& c = compiles();
  std::lock_guard<std::mutex> lock(c.mu);
  if (--c.running == 0) c.idle.notify_all();
}

void stopCompiles() {
  Compiles& c = compiles();
  std::unique_lock<std::mutex> lock(c.mu);
  c.stopped = true;
  c.idle.wait(lock, [&] { return c.running == 0; });
}
}  // namespace detail

void shutdown() {
  static std::mutex mu;  // leaked objects only below: safe to call from any exit path
  std::lock_guard<std::mutex> lock(mu);
  if (detail::closed()) return;
  Client* c = g_client.load(std::memory_order_acquire);
  if (c != nullptr && !detail::g_forked) {
    // A compile may still run on a thread nobody joined (a daemon thread): it finishes first.
    detail::stopCompiles();
    // Executions still running read buffers and run on the plugin's threads: wait for them (whatever they report;
    // nobody is left to read it).
    for (int d = 0; d < c->deviceCount(); ++d) {
      try {
        c->synchronize(d);
      } catch (...) {
      }
    }
    detail::drainDeferredDestroys();
  }
  detail::g_closed.store(true, std::memory_order_relaxed);
}

namespace {
void markForkedChild() { detail::g_forked = true; }
}  // namespace

Client& Client::get() {
  Client* c = g_client.load(std::memory_order_acquire);
  if (c == nullptr)
    throw Error("torch_tpu runtime: Client::init() has not been called (no PJRT plugin loaded)",
                kErrorFailedPrecondition);
  return *c;
}

std::string Client::pluginPathFromEnv() {
  return settings::pathValue("TORCH_TPU_PJRT_PLUGIN").value_or(std::string());
}

void setPreloadLibraries(std::vector<PreloadLibrary> libs) {
  std::lock_guard<std::mutex> lock(g_init_mu);
  g_preload = std::move(libs);
}

Client& Client::init(const std::string& plugin_path, const std::vector<CreateOption>& options) {
  std::lock_guard<std::mutex> lock(g_init_mu);
  if (Client* c = g_client.load(std::memory_order_acquire)) {
    if (c->impl_->info.path == plugin_path) return *c;
    throw Error("torch_tpu runtime: already initialized with plugin '" + c->impl_->info.path +
                    "', cannot switch to '" + plugin_path + "'",
                kErrorFailedPrecondition);
  }

  // Settings the runtime reads later, possibly on other threads (awaitEvent's spin wait): an invalid value raises
  // here, on the thread that creates the client.
  (void)settings::integer("TORCH_TPU_SPIN_WAIT_US");

  // --- load the plugin
  struct stat st;
  if (plugin_path.empty() || ::stat(plugin_path.c_str(), &st) != 0)
    throw Error("PJRT plugin not found at '" + plugin_path + "'; " + installHint(plugin_path) +
                    " (or set TORCH_TPU_PJRT_PLUGIN to the plugin's .so)",
                kErrorNotFound);
  PluginInfo preload_info;
  const std::string preload_failures = preloadLibraries(preload_info);
  void* handle = ::dlopen(plugin_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = ::dlerror();
    throw Error("cannot dlopen PJRT plugin '" + plugin_path + "': " + (e ? e : "unknown error") + "; " +
                    installHint(plugin_path) + preload_failures,
                kErrorFailedPrecondition);
  }
  using GetApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetApiFn>(::dlsym(handle, "GetPjrtApi"));
  if (get_api == nullptr)
    throw Error("'" + plugin_path + "' is not a PJRT plugin (no GetPjrtApi symbol); " + installHint(plugin_path) + preload_failures,
                kErrorFailedPrecondition);
  const PJRT_Api* api = get_api();
  if (api == nullptr || api->struct_size < offsetof(PJRT_Api, PJRT_Plugin_Attributes))
    throw Error("PJRT plugin '" + plugin_path + "' returned an invalid PJRT_Api table" + preload_failures, kErrorFailedPrecondition);
  if (api->pjrt_api_version.major_version != PJRT_API_MAJOR)
    throw Error("PJRT plugin '" + plugin_path + "' has C API version " +
                    std::to_string(api->pjrt_api_version.major_version) + "." +
                    std::to_string(api->pjrt_api_version.minor_version) + ", torch_tpu needs major version " +
                    std::to_string(PJRT_API_MAJOR) + "; " + installHint(plugin_path) + preload_failures,
                kErrorFailedPrecondition);
  detail::g_api = api;

  Client* client = new Client();  // ~Client is private: deleted by hand on failure below
  Impl& im = *client->impl_;
  im.dl_handle = handle;
  im.info.preloaded = std::move(preload_info.preloaded);
  im.info.preload_failed = std::move(preload_info.preload_failed);
  im.info.path = plugin_path;
  im.info.api_major = api->pjrt_api_version.major_version;
  im.info.api_minor = api->pjrt_api_version.minor_version;

  try {
    // --- PJRT_Plugin_Initialize, once per plugin. It is also the probe for padded args structs: a plugin that
    // rejects a struct_size larger than its own makes us fall back to exact sizes.
    if (!g_initialized_apis.count(api)) {
      detail::g_padded = true;
      PJRT_Error* err;
      {
        detail::Args<PJRT_Plugin_Initialize_Args> a;
        err = TPU_PJRT_FN(PJRT_Plugin_Initialize)(a.get());
      }
      if (err != nullptr) {
        Error e = detail::toError(err, "PJRT_Plugin_Initialize");
        if (e.code() != kErrorInvalidArgument) throw e;
        detail::g_padded = false;
        detail::Args<PJRT_Plugin_Initialize_Args> a;
        TPU_PJRT(PJRT_Plugin_Initialize, a.get());
      }
      g_initialized_apis.insert(api);
    }
    im.info.padded_structs = detail::g_padded;

    if (TPU_PJRT_HAS(PJRT_Plugin_Attributes)) {
      detail::Args<PJRT_Plugin_Attributes_Args> a;
      TPU_PJRT(PJRT_Plugin_Attributes, a.get());
      for (size_t i = 0; i < a->num_attributes; ++i) {
        const PJRT_NamedValue& nv = a->attributes[i];
        im.info.attributes.emplace_back(str(nv.name, nv.name_size), renderNamedValue(nv));
      }
    }

    // The extensions the plugin offers (its PJRT_Api's extension chain), by name.
    for (const PJRT_Extension_Base* e = api->extension_start; e != nullptr && im.info.extensions.size() < 64;
         e = e->next)
      im.info.extensions.push_back(extensionName(static_cast<int>(e->type)));

    // --- PJRT_Client_Create. PJRT_NamedValue travels in an array, so it uses its exact size.
    std::vector<PJRT_NamedValue> nvs(options.size());
    for (size_t i = 0; i < options.size(); ++i) {
      PJRT_NamedValue& nv = nvs[i];
      std::memset(&nv, 0, sizeof(nv));
      nv.struct_size = PJRT_NamedValue_STRUCT_SIZE;
      nv.name = options[i].name.c_str();
      nv.name_size = options[i].name.size();
      const auto& v = options[i].value;
      if (auto* s = std::get_if<std::string>(&v)) {
        nv.type = PJRT_NamedValue_kString;
        nv.string_value = s->c_str();
        nv.value_size = s->size();
      } else if (auto* n = std::get_if<int64_t>(&v)) {
        nv.type = PJRT_NamedValue_kInt64;
        nv.int64_value = *n;
        nv.value_size = 1;
      } else if (auto* l = std::get_if<std::vector<int64_t>>(&v)) {
        nv.type = PJRT_NamedValue_kInt64List;
        nv.int64_array_value = l->data();
        nv.value_size = l->size();
      } else if (auto* f = std::get_if<float>(&v)) {
        nv.type = PJRT_NamedValue_kFloat;
        nv.float_value = *f;
        nv.value_size = 1;
      } else {
        nv.type = PJRT_NamedValue_kBool;
        nv.bool_value = std::get<bool>(v);
        nv.value_size = 1;
      }
    }
    {
      detail::Args<PJRT_Client_Create_Args> a;
      a->create_options = nvs.data();
      a->num_options = nvs.size();
      TPU_PJRT(PJRT_Client_Create, a.get());
      im.client = a->client;
    }

    {
      detail::Args<PJRT_Client_PlatformName_Args> a;
      a->client = im.client;
      TPU_PJRT(PJRT_Client_PlatformName, a.get());
      im.info.platform_name = str(a->platform_name, a->platform_name_size);
    }
    {
      detail::Args<PJRT_Client_PlatformVersion_Args> a;
      a->client = im.client;
      TPU_PJRT(PJRT_Client_PlatformVersion, a.get());
      im.info.platform_version = str(a->platform_version, a->platform_version_size);
    }
    {
      detail::Args<PJRT_Client_AddressableDevices_Args> a;
      a->client = im.client;
      TPU_PJRT(PJRT_Client_AddressableDevices, a.get());
      im.devices.assign(a->addressable_devices, a->addressable_devices + a->num_addressable_devices);
    }
    for (PJRT_Device* d : im.devices) im.descriptions.push_back(describe(d));
    im.state.reset(new Impl::DeviceState[im.devices.size()]);
  } catch (const Error& e) {
    if (im.client != nullptr) {
      detail::Args<PJRT_Client_Destroy_Args> a;
      a->client = im.client;
      PJRT_Error* err = TPU_PJRT_FN(PJRT_Client_Destroy)(a.get());
      detail::consumeErrorCode(err);
    }
    delete client;
    if (preload_failures.empty()) throw;
    throw Error(e.what() + preload_failures, e.code());
  } catch (...) {
    if (im.client != nullptr) {
      detail::Args<PJRT_Client_Destroy_Args> a;
      a->client = im.client;
      PJRT_Error* err = TPU_PJRT_FN(PJRT_Client_Destroy)(a.get());
      detail::consumeErrorCode(err);
    }
    delete client;
    throw;
  }

  Client* c = client;  // leaked on purpose
  g_client.store(c, std::memory_order_release);
  static const bool registered = [] {
    ::pthread_atfork(nullptr, nullptr, &markForkedChild);
    // For programs without the Python extension (which shuts down earlier, once the interpreter has finalized).
    // Registered after the plugin was loaded, so it runs before the static destructors the plugin registered then.
    std::atexit([] { shutdown(); });
    return true;
  }();
  (void)registered;
  return *c;
}

const PluginInfo& Client::plugin() const { return impl_->info; }

int Client::deviceCount() const { return static_cast<int>(impl_->devices.size()); }

std::string Client::deviceKind(int device) const {
  impl_->device(device);
  detail::Args<PJRT_DeviceDescription_Kind_Args> a;
  a->device_description = impl_->descriptions[device];
  TPU_PJRT(PJRT_DeviceDescription_Kind, a.get());
  return str(a->device_kind, a->device_kind_size);
}

std::string Client::deviceDebugString(int device) const {
  impl_->device(device);
  detail::Args<PJRT_DeviceDescription_DebugString_Args> a;
  a->device_description = impl_->descriptions[device];
  TPU_PJRT(PJRT_DeviceDescription_DebugString, a.get());
  return str(a->debug_string, a->debug_string_size);
}

std::optional<MemoryStats> Client::memoryStats(int device) const {
  PJRT_Device* d = impl_->device(device);
  if (!TPU_PJRT_HAS(PJRT_Device_MemoryStats)) return std::nullopt;
  detail::Args<PJRT_Device_MemoryStats_Args> a;
  a->device = d;
  PJRT_Error* err = TPU_PJRT_FN(PJRT_Device_MemoryStats)(a.get());
  if (err != nullptr) {
    Error e = detail::toError(err, "PJRT_Device_MemoryStats");
    if (e.code() == kErrorUnimplemented) return std::nullopt;
    throw e;
  }
  MemoryStats m;
  m.from_plugin = true;
  m.bytes_in_use = a->bytes_in_use;
  m.peak_bytes_in_use = a->peak_bytes_in_use_is_set ? a->peak_bytes_in_use : a->bytes_in_use;
  m.bytes_limit = a->bytes_limit_is_set ? a->bytes_limit : -1;
  return m;
}

BufferPtr Client::fromHost(const void* data, ElementType type, const std::vector<int64_t>& dims, int device) {
  PJRT_Device* d = impl_->device(device);
  if (elementSize(type) == 0)
    throw Error(std::string("fromHost: unsupported element type ") + elementTypeName(type), kErrorInvalidArgument);
  static const char kEmpty[16] = {};
  detail::Args<PJRT_Client_BufferFromHostBuffer_Args> a;
  a->client = impl_->client;
  a->data = data != nullptr ? data : kEmpty;
  a->type = static_cast<PJRT_Buffer_Type>(type);
  a->dims = dims.data();
  a->num_dims = dims.size();
  a->host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  a->device = d;
  int64_t bytes = static_cast<int64_t>(elementSize(type));
  for (int64_t e : dims) bytes *= e;
  detail::checkAlloc(TPU_PJRT_FN(PJRT_Client_BufferFromHostBuffer)(a.get()), "PJRT_Client_BufferFromHostBuffer", bytes,
                     device);
  // With kImmutableOnlyDuringCall the plugin is done with `data` on return; the event is only released.
  detail::destroyEvent(a->done_with_host_buffer);
  return std::make_shared<Buffer>(a->buffer, type, dims, device);
}

ExecutablePtr Client::compile(const std::string& stablehlo_text, int num_devices_hint) {
  if (num_devices_hint != 1)
    throw Error("compile: num_devices_hint=" + std::to_string(num_devices_hint) +
                    " (SPMD programs) is not supported yet; compile single-device programs",
                kErrorUnimplemented);
  static const char kFormat[] = "mlir";
  detail::Args<PJRT_Program> prog;
  prog->code = const_cast<char*>(stablehlo_text.data());
  prog->code_size = stablehlo_text.size();
  prog->format = kFormat;
  prog->format_size = sizeof(kFormat) - 1;
  const std::string& opts = portableCompileOptions();
  detail::CompileScope scope("PJRT_Client_Compile");
  detail::Args<PJRT_Client_Compile_Args> a;
  a->client = impl_->client;
  a->program = prog.get();
  a->compile_options = opts.data();
  a->compile_options_size = opts.size();
  TPU_PJRT(PJRT_Client_Compile, a.get());
  return std::make_shared<Executable>(a->executable);
}

ExecutablePtr Client::deserialize(const std::string& bytes) {
  detail::CompileScope scope("PJRT_Executable_DeserializeAndLoad");
  detail::Args<PJRT_Executable_DeserializeAndLoad_Args> a;
  a->client = impl_->client;
  a->serialized_executable = bytes.data();
  a->serialized_executable_size = bytes.size();
  TPU_PJRT(PJRT_Executable_DeserializeAndLoad, a.get());
  return std::make_shared<Executable>(a->loaded_executable);
}

BufferPtr Client::copyToDevice(const Buffer& src, int device) {
  PJRT_Device* d = impl_->device(device);
  detail::Args<PJRT_Buffer_CopyToDevice_Args> a;
  a->buffer = src.raw();
  a->dst_device = d;
  detail::checkAlloc(TPU_PJRT_FN(PJRT_Buffer_CopyToDevice)(a.get()), "PJRT_Buffer_CopyToDevice",
                     static_cast<int64_t>(src.byteSize()), device);
  return std::make_shared<Buffer>(a->dst_buffer, src.type(), src.dims(), device);
}

void Client::synchronize(int device) {
  if (detail::g_forked) detail::throwForked("Client::synchronize");
  impl_->device(device);
  Impl::DeviceState& s = impl_->state[device];
  std::vector<PJRT_Event*> events;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    events.swap(s.pending);
  }
  std::optional<Error> first;
  for (PJRT_Event* ev : events) {
    try {
      detail::awaitEvent(ev, "execution (Client::synchronize)");
    } catch (const Error& e) {
      if (!first) first = e;
    }
    detail::destroyEvent(ev);
  }
  if (first && first->code() == kErrorResourceExhausted) detail::throwOutOfMemory(*first, 0, device);
  if (first) throw *first;
}

void Client::reserve(int device, int64_t delta) {
  impl_->device(device);
  impl_->state[device].reserved.fetch_add(delta, std::memory_order_relaxed);
  impl_->addLive(device, delta);
}

int64_t Client::reservedBytes(int device) const {
  impl_->device(device);
  return impl_->state[device].reserved.load(std::memory_order_relaxed);
}

int64_t Client::liveBytes(int device) const {
  impl_->device(device);
  return impl_->state[device].live.load(std::memory_order_relaxed);
}

int64_t Client::peakLiveBytes(int device) const {
  impl_->device(device);
  return impl_->state[device].peak.load(std::memory_order_relaxed);
}

int64_t Client::launchCount(int device) const {
  impl_->device(device);
  return impl_->state[device].launches.load(std::memory_order_relaxed);
}

void Client::resetPeak(int device) {
  impl_->device(device);
  auto& s = impl_->state[device];
  s.peak.store(s.live.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

}  // namespace runtime
}  // namespace torch_tpu
