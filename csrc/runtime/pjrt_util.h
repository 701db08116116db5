// Private to the runtime layer (do not include from other layers): PJRT C API plumbing.
//
//  * Args<T>: every args struct handed to the plugin is zero-initialized and padded with kArgsPad zero bytes;
//    struct_size claims the padded size, so newer plugins whose structs grew read zeros (= defaults) for fields
//    this header does not know. If the plugin rejects over-claiming (probed once in Client::init) struct_size
//    falls back to sizeof(T).
//  * TPU_PJRT(Name, args): checks that the PJRT_Api table is large enough to hold slot Name (else Error
//    "plugin too old for Name"), calls it and converts a returned PJRT_Error* via check().
//  * Client::Impl: the state shared by client.cpp, buffer.cpp and executable.cpp.
//
// Thread-safety: g_api and g_padded are written once in Client::init before the client is published and are
// read-only afterwards. Impl's mutable state is guarded by its own mutexes / atomics.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "pjrt_c_api.h"
#include "runtime/runtime.h"

namespace torch_tpu {
namespace runtime {
namespace detail {

extern const PJRT_Api* g_api;
extern bool g_padded;  // struct_size = sizeof(Args<T>) (true) or sizeof(T) (false)
// Set in a child forked after the client was created (pthread_atfork): the plugin's threads did not survive the fork,
// so every PJRT call would hang or abort there; slot() refuses them all instead.
extern bool g_forked;
[[noreturn]] void throwForked(const char* fn);
// Set by runtime::shutdown() at process exit, once nothing runs on the plugin any more: from then on no PJRT call is
// made (the plugin's own static destructors are about to run); objects still alive are left to the OS and every
// use throws.
extern std::atomic<bool> g_closed;
[[noreturn]] void throwClosed(const char* fn);
inline bool closed() { return g_closed.load(std::memory_order_relaxed); }

constexpr size_t kArgsPad = 256;

template <class T>
struct Args {
  T v;
  char pad[kArgsPad];
  Args() {
    std::memset(static_cast<void*>(this), 0, sizeof(*this));
    v.struct_size = g_padded ? sizeof(*this) : sizeof(T);
  }
  T* operator->() { return &v; }
  T* get() { return &v; }
};

// Converts `err` (owned) into runtime::Error("<fn>: <plugin message>", code) and throws; no-op for nullptr.
void check(PJRT_Error* err, const char* fn);
// Same, but returns the Error instead of throwing (err must be non-null).
Error toError(PJRT_Error* err, const char* fn);
// Like check(), but a RESOURCE_EXHAUSTED error becomes OutOfMemory(requested, device) (through the hook).
void checkAlloc(PJRT_Error* err, const char* fn, int64_t requested, int device);
[[noreturn]] void throwOutOfMemory(const Error& e, int64_t requested, int device);
// Returns the error code of `err` and destroys it.
int consumeErrorCode(PJRT_Error* err);

[[noreturn]] void throwTooOld(const char* fn);

template <class F>
inline F* slot(size_t offset, const char* name) {
  const PJRT_Api* api = g_api;
  if (api == nullptr) throw Error(std::string(name) + ": PJRT plugin not loaded", kErrorFailedPrecondition);
  if (g_forked) throwForked(name);
  if (closed()) throwClosed(name);
  if (offset + sizeof(void*) > api->struct_size) throwTooOld(name);
  F* f = *reinterpret_cast<F* const*>(reinterpret_cast<const char*>(api) + offset);
  if (f == nullptr) throwTooOld(name);
  return f;
}

inline bool hasSlot(size_t offset) {
  const PJRT_Api* api = g_api;
  if (api == nullptr || offset + sizeof(void*) > api->struct_size) return false;
  return *reinterpret_cast<void* const*>(reinterpret_cast<const char*>(api) + offset) != nullptr;
}

#define TPU_PJRT_FN(NAME) (::torch_tpu::runtime::detail::slot<::NAME>(offsetof(PJRT_Api, NAME), #NAME))
#define TPU_PJRT(NAME, ARGS) ::torch_tpu::runtime::detail::check(TPU_PJRT_FN(NAME)(ARGS), #NAME)
#define TPU_PJRT_HAS(NAME) (::torch_tpu::runtime::detail::hasSlot(offsetof(PJRT_Api, NAME)))

// Held around every compile (and deserialization): runtime::shutdown refuses new ones and waits for those running,
// whichever thread runs them (a daemon thread, a rank thread), before the runtime closes.
class CompileScope {
 public:
  explicit CompileScope(const char* fn);
  ~CompileScope();
  CompileScope(const CompileScope&) = delete;
  CompileScope& operator=(const CompileScope&) = delete;
};
// Refuses new compiles and waits for the running ones (runtime::shutdown).
void stopCompiles();

// Destroys the buffers whose destruction was deferred (on the CPU plugin) and stops that thread (runtime::shutdown).
void drainDeferredDestroys();

// Destroys an event, ignoring errors (used in destructors).
void destroyEvent(PJRT_Event* ev) noexcept;
// Awaits `ev` and throws its error, if any (does not destroy it).
void awaitEvent(PJRT_Event* ev, const char* what);

// Launch tracing (runtime.h; trace.cpp). A traced launch is begun before PJRT_LoadedExecutable_Execute (nullptr
// when tracing stopped meanwhile), ended with the execution's completion event (null: complete now) or abandoned
// when the execution could not be launched.
extern std::atomic<bool> g_tracing;
struct TracedLaunch;
TracedLaunch* beginTracedLaunch(int device);
void endTracedLaunch(TracedLaunch* t, PJRT_Event* done);
void abandonTracedLaunch(TracedLaunch* t) noexcept;

}  // namespace detail

struct Client::Impl {
  PluginInfo info;
  void* dl_handle = nullptr;
  PJRT_Client* client = nullptr;
  std::vector<PJRT_Device*> devices;  // addressable devices, index = torch device index
  std::vector<PJRT_DeviceDescription*> descriptions;

  struct DeviceState {
    std::atomic<int64_t> live{0};
    std::atomic<int64_t> peak{0};
    std::atomic<int64_t> reserved{0};  // part of `live`: Client::reserve
    std::atomic<int64_t> launches{0};  // programs executed on this device (Executable::execute)
    std::mutex mu;                     // guards pending
    std::vector<PJRT_Event*> pending;  // completion events of executions launched on this device
    size_t prune_at = 64;              // sweep completed events when pending reaches this size (amortized)
  };
  std::unique_ptr<DeviceState[]> state;

  PJRT_Device* device(int i) const {
    if (i < 0 || i >= static_cast<int>(devices.size()))
      throw Error("device index " + std::to_string(i) + " out of range (" + std::to_string(devices.size()) +
                      " addressable devices)",
                  kErrorInvalidArgument);
    return devices[i];
  }
  int indexOf(PJRT_Device* d) const {
    for (size_t i = 0; i < devices.size(); ++i)
      if (devices[i] == d) return static_cast<int>(i);
    return -1;
  }
  void addLive(int device, int64_t bytes);
  void trackExecution(int device, PJRT_Event* ev);
};

}  // namespace runtime
}  // namespace torch_tpu
