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
  Invalid = 0, Pred, S8, S16, S32, S64, U8, U16, U32, U64, F16, F32, F64, BF16, C64, C128
};
size_t elementSize(ElementType t);           // bytes per element (Pred = 1, Invalid = 0)
const char* elementTypeName(ElementType t);  // "f32", "bf16", "pred", "s64", ...; "invalid" for unknown values

// Error codes are PJRT_Error_Code values (absl status codes). Codes used by this layer itself:
constexpr int kErrorInvalidArgument = 3;
constexpr int kErrorNotFound = 5;
constexpr int kErrorFailedPrecondition = 9;
constexpr int kErrorUnimplemented = 12;
constexpr int kErrorInternal = 13;

class Error : public std::runtime_error {
 public:
  Error(std::string msg, int code);
  int code() const { return code_; }

 private:
  int code_;
};

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
  ElementType outputType(size_t i) const { return out_types_.at(i); }
  const std::vector<int64_t>& outputDims(size_t i) const { return out_dims_.at(i); }

  // Runs on device `device`. args are borrowed. `donate` (optional, same length as args) marks arguments that the
  // program aliases with an output (the caller wrote tf.aliasing_output attributes); all others are passed in
  // non_donatable_input_indices. A buffer passed more than once is never donated. Returns the outputs (untupled)
  // immediately; execution is asynchronous. The completion event is tracked for Client::synchronize(device).
  std::vector<BufferPtr> execute(int device, const std::vector<Buffer*>& args, const std::vector<bool>& donate = {});
  // PJRT_Executable_Serialize if available, else throws Error with code UNIMPLEMENTED.
  std::string serialize() const;
  PJRT_LoadedExecutable* raw() const { return exe_; }

 private:
  PJRT_LoadedExecutable* exe_;
  size_t num_outputs_ = 0;
  std::vector<ElementType> out_types_;
  std::vector<std::vector<int64_t>> out_dims_;
};
using ExecutablePtr = std::shared_ptr<Executable>;

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
  ExecutablePtr deserialize(const std::string& bytes);  // PJRT_Executable_DeserializeAndLoad
  BufferPtr copyToDevice(const Buffer& src, int device);  // PJRT_Buffer_CopyToDevice
  // Waits until every execution launched so far on `device` has finished; throws the first execution error.
  void synchronize(int device);

  // Accounting done by this layer: bytes of live Buffers per device and the peak since the last resetPeak.
  int64_t liveBytes(int device) const;
  int64_t peakLiveBytes(int device) const;
  void resetPeak(int device);

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  Client();
  ~Client();
  std::unique_ptr<Impl> impl_;
};

}  // namespace runtime
}  // namespace torch_tpu
