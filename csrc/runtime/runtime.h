// torch-tpu runtime layer: a thin, thread-safe C++17 client of the PJRT C API.
//
// No torch headers. One process-wide Client owns the dlopen'ed plugin and the PJRT_Client; Buffers, Events and
// Executables each own exactly one PJRT object and release it in their destructor.
//
// Ownership:
//  * Client: created by Client::init(), lives until process exit (intentionally never destroyed, so that Buffers
//    held by static objects can still be released safely at exit; the plugin is never dlclose'd).
//  * Buffer owns one PJRT_Buffer* (PJRT_Buffer_Destroy in ~Buffer). Executable owns one PJRT_LoadedExecutable*.
//    Event owns one PJRT_Event*. None of them may outlive the Client (they cannot: it is never destroyed).
//  * Every PJRT_Error* is converted into runtime::Error by one check helper (detail::check in pjrt_util.h); no
//    PJRT_Error* ever leaves this layer.
//
// Thread-safety: every public method of Client, Buffer, Executable and Event may be called concurrently from any
// thread, except that a Buffer must not be destroyed while another thread uses it (shared_ptr takes care of that)
// and a donated Buffer must not be used concurrently with the execute() that donates it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

extern "C" {
typedef struct PJRT_Buffer PJRT_Buffer;
typedef struct PJRT_Event PJRT_Event;
typedef struct PJRT_LoadedExecutable PJRT_LoadedExecutable;
}

namespace torch_tpu {
namespace runtime {

// Same values as PJRT_Buffer_Type.
enum class ElementType : int32_t {
  Invalid = 0, Pred, S8, S16, S32, S64, U8, U16, U32, U64, F16, F32, F64, BF16, C64, C128,
  F8E5M2 = 16, F8E4M3FN = 17, F8E5M2FNUZ = 19, F8E4M3FNUZ = 20, F8E8M0FNU = 28
};
size_t elementSize(ElementType t);           // bytes per element (Pred = 1, Invalid = 0)
const char* elementTypeName(ElementType t);  // "f32", "bf16", "pred", "s64", ...; "invalid" for unknown values

// Error codes are PJRT_Error_Code values (absl status codes). Codes used by this layer itself:
constexpr int kErrorInvalidArgument = 3;
constexpr int kErrorNotFound = 5;
constexpr int kErrorResourceExhausted = 8;
constexpr int kErrorFailedPrecondition = 9;
constexpr int kErrorUnimplemented = 12;
constexpr int kErrorInternal = 13;

// What every use of the runtime raises in a process forked after the client was created.
constexpr const char* kForkedMessage =
    "cannot re-initialize tpu in a forked subprocess; use the 'spawn' start method (torch.multiprocessing / "
    "multiprocessing.get_context('spawn'), DataLoader(multiprocessing_context='spawn'))";

class Error : public std::runtime_error {
 public:
  Error(std::string msg, int code);
  int code() const { return code_; }

 private:
  int code_;
};

// The plugin could not allocate (RESOURCE_EXHAUSTED) a buffer upload, an execution's outputs or a device copy.
class OutOfMemory : public Error {
 public:
  OutOfMemory(std::string msg, int64_t requested, int device)
      : Error(std::move(msg), kErrorResourceExhausted), requested_(requested), device_(device) {}
  int64_t requested() const { return requested_; }  // bytes asked for (0 if unknown)
  int device() const { return device_; }

 private:
  int64_t requested_;
  int device_;
};
// Called with every OutOfMemory before it is thrown; a hook that throws replaces it (the torch layers turn it into
// torch.OutOfMemoryError). Not thread-safe to set while the runtime is in use: set it once at start-up.
using OutOfMemoryHook = void (*)(const OutOfMemory&);
void setOutOfMemoryHook(OutOfMemoryHook hook);

struct PluginInfo {
  std::string path;
  int api_major = 0, api_minor = 0;
  std::string platform_name, platform_version;
  // PJRT_Plugin_Attributes rendered as strings: strings as-is, ints in decimal, int lists joined with '.'
  // (they are versions, e.g. stablehlo_current_version = "1.13.0"), floats with %g, bools as true/false.
  std::vector<std::pair<std::string, std::string>> attributes;
  // How args structs are sized: true when every args struct claims sizeof(T) + padding (zeroed), false when the
  // plugin rejected that and exact sizes are used.
  bool padded_structs = true;
  // The PJRT extensions the plugin offers ("profiler", "layouts", "ffi", ...; unknown ones as "type N").
  std::vector<std::string> extensions;
  // Libraries loaded before the plugin (setPreloadLibraries), and those that failed ("name: dlerror").
  std::vector<std::string> preloaded, preload_failed;
};

// A library to dlopen (RTLD_GLOBAL) before the plugin: the CUDA plugin does not ship its CUDA libraries, which
// come from the nvidia-* wheels and must be loaded first. `path` is absolute or a soname (then the system's
// library path is searched). A `required` library that fails to load fails Client::init with `hint`; others
// are recorded, and named in the error should the plugin then fail to load or start.
struct PreloadLibrary {
  std::string path;
  bool required = false;
  std::string hint;
};
// Libraries the next Client::init loads first (once per process; loaded libraries stay loaded).
void setPreloadLibraries(std::vector<PreloadLibrary> libs);

struct CreateOption {
  std::string name;
  std::variant<std::string, int64_t, std::vector<int64_t>, float, bool> value;
};

struct MemoryStats {
  int64_t bytes_in_use = 0, peak_bytes_in_use = 0, bytes_limit = -1;
  bool from_plugin = false;
};

// Owns a PJRT_Event* (destroyed in the destructor). await() throws Error if the event carries an error.
class Event {
 public:
  explicit Event(PJRT_Event* ev) : ev_(ev) {}
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void await();
  bool isReady();
  PJRT_Event* raw() const { return ev_; }

 private:
  PJRT_Event* ev_;
};
using EventPtr = std::shared_ptr<Event>;

class Buffer {
 public:
  // Takes ownership of `raw`; counts byteSize() into the Client's live-bytes accounting for `device`.
  Buffer(PJRT_Buffer* raw, ElementType type, std::vector<int64_t> dims, int device);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  ElementType type() const { return type_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int device() const { return device_; }  // index into Client devices
  int64_t numElements() const;
  size_t byteSize() const;  // dense, numElements * elementSize

  void toHost(void* dst, size_t nbytes);           // blocking copy of the whole buffer, dense row-major
  EventPtr toHostAsync(void* dst, size_t nbytes);  // caller keeps dst alive until the event is awaited
  void awaitReady();
  bool isReady();
  PJRT_Buffer* raw() const { return raw_; }

  // Asks the plugin which device holds this buffer (PJRT_Buffer_Device); -1 if not addressable. For tests/debug.
  int queryDevice() const;
  // True once the device memory is gone (donated to an execution or deleted).
  bool isDeleted() const;
  // Address of the buffer's memory (PJRT_Buffer_UnsafePointer). Only meaningful to the host where
  // Client::deviceMemoryIsHostMemory(); the caller awaits readiness first and must not write a buffer that others
  // may read.
  void* unsafePointer() const;

 private:
  friend class Executable;
  void releaseAccounting();  // idempotent

  PJRT_Buffer* raw_;
  ElementType type_;
  std::vector<int64_t> dims_;
  int device_;
  int64_t accounted_bytes_;  // bytes counted in the live accounting; 0 once released
};
using BufferPtr = std::shared_ptr<Buffer>;

class Executable {
 public:
  // Takes ownership of `exe`. Output element types and dims are read once here (outputs must be static shapes).
  explicit Executable(PJRT_LoadedExecutable* exe);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  size_t numOutputs() const { return num_outputs_; }
  int64_t outputBytes() const { return out_bytes_; }  // dense bytes of all outputs
  ElementType outputType(size_t i) const { return out_types_.at(i); }
  const std::vector<int64_t>& outputDims(size_t i) const { return out_dims_.at(i); }

  // Runs on device `device`. args are borrowed. `donate` (optional, same length as args) marks arguments that the
  // program aliases with an output (the caller wrote tf.aliasing_output attributes); all others are passed in
  // non_donatable_input_indices. A buffer passed more than once is never donated. Returns the outputs (untupled)
  // immediately; execution is asynchronous. The completion event is tracked for Client::synchronize(device).
  // `launch_id` (PJRT_ExecuteOptions.launch_id) identifies one run of a program spanning several devices: the
  // launches of all participants of a collective must carry the same value, distinct from their previous runs.
  std::vector<BufferPtr> execute(int device, const std::vector<Buffer*>& args, const std::vector<bool>& donate = {},
                                 int launch_id = 0);
  // PJRT_Executable_Serialize if available, else throws Error with code UNIMPLEMENTED.
  std::string serialize() const;
  PJRT_LoadedExecutable* raw() const { return exe_; }
  // Launch telemetry (the per-program cache statistics): launches so far (counted with the device's launch count,
  // once the plugin accepted them), and the wall-clock time of the latest one in nanoseconds since the epoch (a coarse clock, a few ms of resolution; 0 before the first).
  int64_t launches() const { return launches_.load(std::memory_order_relaxed); }
  int64_t lastLaunchNs() const { return last_launch_ns_.load(std::memory_order_relaxed); }

 private:
  PJRT_LoadedExecutable* exe_;
  std::atomic<int64_t> launches_{0};
  std::atomic<int64_t> last_launch_ns_{0};
  size_t num_outputs_ = 0;
  std::vector<ElementType> out_types_;
  std::vector<std::vector<int64_t>> out_dims_;
  int64_t out_bytes_ = 0;
};
using ExecutablePtr = std::shared_ptr<Executable>;

// How a program spanning several devices is compiled: num_replicas x num_partitions logical devices, mapped
// replica-major onto addressable device indices `devices` (empty: the first replicas*partitions devices). With
// `spmd`, the program is partitioned by XLA's SPMD partitioner from its sharding annotations.
struct DeviceAssignment {
  int num_replicas = 1;
  int num_partitions = 1;
  std::vector<int> devices;
  bool spmd = false;
};

// A buffer whose contents are supplied after it has been handed out (PJRT_Client_CreateAliasBuffer): programs may
// be launched on it at once and run when it is fulfilled. fulfill() must be called exactly once; a PendingBuffer
// destroyed unfulfilled is fulfilled with uninitialized memory, so nothing waiting on it hangs.
class PendingBuffer {
 public:
  PendingBuffer(BufferPtr buffer, void* callback) : buffer_(std::move(buffer)), callback_(callback) {}
  ~PendingBuffer();
  PendingBuffer(const PendingBuffer&) = delete;
  PendingBuffer& operator=(const PendingBuffer&) = delete;
  const BufferPtr& buffer() const { return buffer_; }
  // `value` must have the buffer's type, dims and device. It is consumed: its memory becomes the pending
  // buffer's and `value` is deleted, so pass a buffer nobody else uses.
  void fulfill(const BufferPtr& value);
  bool fulfilled() const { return callback_ == nullptr; }

 private:
  BufferPtr buffer_;
  void* callback_;  // PJRT_FulfillAliasBufferCallback*, null once fulfilled
};
using PendingBufferPtr = std::shared_ptr<PendingBuffer>;

// ---- Launch tracing (profilers) ----
//
// While a trace is active every Executable::execute is recorded: which device, what the launch came from (the
// calling thread's LaunchScope), when it was called, when it returned (the program is queued) and when its
// completion event became ready (PJRT_Event_OnReady). Off, a launch pays one relaxed atomic load.
//
// What a launch came from, set by the layers above around their launches (kind: "eager", "fused", "compiled",
// ...; name: the op or graph; detail: more, e.g. the ops of a fused program). The strings must outlive the scope.
struct LaunchLabel {
  const char* kind = nullptr;
  const std::string* name = nullptr;
  const std::string* detail = nullptr;
};
class LaunchScope {
 public:
  LaunchScope(const char* kind, const std::string* name, const std::string* detail = nullptr);
  ~LaunchScope();
  LaunchScope(const LaunchScope&) = delete;
  LaunchScope& operator=(const LaunchScope&) = delete;

 private:
  LaunchLabel prev_;
};

// The calling thread's current label (kind null when no scope is open).
const LaunchLabel& currentLaunchLabel();

struct LaunchRecord {
  uint64_t seq = 0;          // launch order within the trace
  int device = 0;
  std::string kind, name, detail;  // the label at launch ("" when none was set)
  uint64_t correlation = 0;  // the trace's correlation source at launch, on the launching thread (0: none)
  uint64_t thread = 0;       // the launching thread (system thread id)
  int64_t launch_ns = 0;     // system clock, nanoseconds since the epoch: execute() called
  int64_t queued_ns = 0;     // execute() returned: the program is queued on the device
  int64_t done_ns = 0;       // the completion event became ready
  bool failed = false;       // the execution reported an error
};
// Called on the launching thread while a trace is active: the id the profiler above gives the current host op.
using CorrelationSource = uint64_t (*)();
// Starts a trace (a running one is restarted, its records dropped).
void startLaunchTrace(CorrelationSource correlation = nullptr);
// Stops the trace and returns its records in launch order, after waiting (at most `wait_ms`) for traced launches
// still running on a device; those that do not finish in time are left out.
std::vector<LaunchRecord> stopLaunchTrace(int64_t wait_ms = 60000);
bool launchTraceActive();

class Client {
 public:
  // Loads the plugin at `plugin_path` (dlopen, dlsym GetPjrtApi, check the major version, PJRT_Plugin_Initialize
  // once), creates the client with the create options. Missing file / dlopen failure / no GetPjrtApi / major
  // mismatch -> Error whose message names the path and the package to install. Calling init again returns the
  // existing client if the path is the same, else throws FAILED_PRECONDITION. A failed init leaves the process
  // uninitialized (init may be retried).
  static Client& init(const std::string& plugin_path, const std::vector<CreateOption>& options = {});
  static Client& get();  // the process-wide client; throws Error if init was not called
  static bool initialized();
  // True in a child forked after the client was created: the plugin cannot be used there (every call throws an
  // Error with kForkedMessage instead of hanging on threads that did not survive the fork).
  static bool inForkedChild();
  // $TORCH_TPU_PJRT_PLUGIN if set, else "" (callers decide on a default).
  static std::string pluginPathFromEnv();

  const PluginInfo& plugin() const;
  int deviceCount() const;  // addressable devices
  std::string deviceKind(int device) const;  // PJRT_DeviceDescription_Kind
  std::string deviceDebugString(int device) const;
  std::optional<MemoryStats> memoryStats(int device) const;  // nullopt where the plugin says UNIMPLEMENTED

  // Dense row-major; data may be reused by the caller after return.
  BufferPtr fromHost(const void* data, ElementType type, const std::vector<int64_t>& dims, int device);
  // StableHLO (text or bytecode), format "mlir". The executable is portable: execute() runs it on any device.
  // num_devices_hint > 1 (SPMD) is not supported yet (UNIMPLEMENTED).
  ExecutablePtr compile(const std::string& stablehlo_text, int num_devices_hint = 1);
  // A program spanning several devices (collectives). Run it with execute() on each participating device, from
  // one thread per device (a launch may wait for the other participants), with a common launch_id.
  ExecutablePtr compile(const std::string& stablehlo_text, const DeviceAssignment& assignment);
  ExecutablePtr deserialize(const std::string& bytes);  // PJRT_Executable_DeserializeAndLoad
  BufferPtr copyToDevice(const Buffer& src, int device);  // PJRT_Buffer_CopyToDevice
  // A buffer of unspecified contents (PJRT_Client_CreateUninitializedBuffer), ready at once.
  BufferPtr uninitialized(ElementType type, const std::vector<int64_t>& dims, int device);
  // A buffer to be fulfilled later (see PendingBuffer); nullptr where the plugin cannot make one.
  PendingBufferPtr pending(ElementType type, const std::vector<int64_t>& dims, int device);
  // The plugin's global id of an addressable device (PJRT_DeviceDescription_Id) and its process index.
  int64_t globalDeviceId(int device) const;
  int processIndex(int device) const;
  // True when device buffers live in host memory the host may read and write through Buffer::unsafePointer()
  // (the CPU plugin).
  bool deviceMemoryIsHostMemory() const;

  // Waits until every execution launched so far on `device` has finished; throws the first execution error.
  void synchronize(int device);

  // Accounting done by this layer: bytes of live Buffers per device, plus the bytes callers reserve for buffers
  // they will create (reserve: lazily materialized tensor storages), and the peak since the last resetPeak.
  void reserve(int device, int64_t delta);
  int64_t reservedBytes(int device) const;
  int64_t liveBytes(int device) const;
  int64_t peakLiveBytes(int device) const;
  void resetPeak(int device);
  // Programs launched on `device` so far (every Executable::execute on it, of any program).
  int64_t launchCount(int device) const;

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  Client();
  ~Client();
  std::unique_ptr<Impl> impl_;
};

}  // namespace runtime
}  // namespace torch_tpu
