// Errors, element types and the single PJRT_Error -> runtime::Error conversion point. Stateless; thread-safe.
#include <string>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "runtime/pjrt_util.h"
#include "runtime/shutdown.h"
#include "settings/settings.h"

namespace torch_tpu {
namespace runtime {

Error::Error(std::string msg, int code) : std::runtime_error(std::move(msg)), code_(code) {}

size_t elementSize(ElementType t) {
  switch (t) {
    case ElementType::Pred: case ElementType::S8: case ElementType::U8: return 1;
    case ElementType::F8E5M2: case ElementType::F8E4M3FN: case ElementType::F8E5M2FNUZ: case ElementType::F8E4M3FNUZ:
    case ElementType::F8E8M0FNU: return 1;
    case ElementType::S16: case ElementType::U16: case ElementType::F16: case ElementType::BF16: return 2;
    case ElementType::S32: case ElementType::U32: case ElementType::F32: return 4;
    case ElementType::S64: case ElementType::U64: case ElementType::F64: case ElementType::C64: return 8;
    case ElementType::C128: return 16;
    default: return 0;
  }
}

const char* elementTypeName(ElementType t) {
  switch (t) {
    case ElementType::Pred: return "pred";
    case ElementType::S8: return "s8";
    case ElementType::S16: return "s16";
    case ElementType::S32: return "s32";
    case ElementType::S64: return "s64";
    case ElementType::U8: return "u8";
    case ElementType::U16: return "u16";
    case ElementType::U32: return "u32";
    case ElementType::U64: return "u64";
    case ElementType::F16: return "f16";
    case ElementType::F32: return "f32";
    case ElementType::F64: return "f64";
    case ElementType::BF16: return "bf16";
    case ElementType::C64: return "c64";
    case ElementType::C128: return "c128";
    case ElementType::F8E5M2: return "f8e5m2";
    case ElementType::F8E4M3FN: return "f8e4m3fn";
    case ElementType::F8E5M2FNUZ: return "f8e5m2fnuz";
    case ElementType::F8E4M3FNUZ: return "f8e4m3fnuz";
    case ElementType::F8E8M0FNU: return "f8e8m0fnu";
    default: return "invalid";
  }
}

static_assert(static_cast<int>(ElementType::Pred) == PJRT_Buffer_Type_PRED, "ElementType must match PJRT");
static_assert(static_cast<int>(ElementType::S64) == PJRT_Buffer_Type_S64, "ElementType must match PJRT");
static_assert(static_cast<int>(ElementType::U64) == PJRT_Buffer_Type_U64, "ElementType must match PJRT");
static_assert(static_cast<int>(ElementType::F32) == PJRT_Buffer_Type_F32, "ElementType must match PJRT");
static_assert(static_cast<int>(ElementType::BF16) == PJRT_Buffer_Type_BF16, "ElementType must match PJRT");
static_assert(static_cast<int>(ElementType::F8E5M2) == PJRT_Buffer_Type_F8E5M2, "ElementType must match PJRT");
static_assert(static_cast<int>(ElementType::F8E4M3FN) == PJRT_Buffer_Type_F8E4M3FN, "ElementType must match PJRT");
static_assert(static_cast<int>(ElementType::F8E5M2FNUZ) == PJRT_Buffer_Type_F8E5M2FNUZ, "ElementType must match PJRT");
static_assert(static_cast<int>(ElementType::F8E4M3FNUZ) == PJRT_Buffer_Type_F8E4M3FNUZ, "ElementType must match PJRT");
static_assert(static_cast<int>(ElementType::F8E8M0FNU) == PJRT_Buffer_Type_F8E8M0FNU, "ElementType must match PJRT");
static_assert(static_cast<int>(ElementType::C128) == PJRT_Buffer_Type_C128, "ElementType must match PJRT");
static_assert(kErrorUnimplemented == PJRT_Error_Code_UNIMPLEMENTED, "error codes must match PJRT");
static_assert(kErrorInvalidArgument == PJRT_Error_Code_INVALID_ARGUMENT, "error codes must match PJRT");

namespace detail {

const PJRT_Api* g_api = nullptr;
bool g_padded = true;
bool g_forked = false;
std::atomic<bool> g_closed{false};

void throwForked(const char* /*fn*/) {
  throw Error(kForkedMessage, kErrorFailedPrecondition);
}

void throwClosed(const char* fn) {
  throw Error(std::string(fn) + ": " + kClosedMessage, kErrorFailedPrecondition);
}

// Error_Destroy / Error_Message / Error_GetCode are slots 0-2, present in every PJRT_Api.
static void destroyError(PJRT_Error* err) {
  PJRT_Error_Destroy_Args a;
  std::memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
  a.error = err;
  g_api->PJRT_Error_Destroy(&a);
}

Error toError(PJRT_Error* err, const char* fn) {
  PJRT_Error_Message_Args m;
  std::memset(&m, 0, sizeof(m));
  m.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
  m.error = err;
  g_api->PJRT_Error_Message(&m);
  std::string msg(fn);
  msg += ": ";
  if (m.message != nullptr) msg.append(m.message, m.message_size);
  PJRT_Error_GetCode_Args c;
  std::memset(&c, 0, sizeof(c));
  c.struct_size = PJRT_Error_GetCode_Args_STRUCT_SIZE;
  c.error = err;
  int code = PJRT_Error_Code_UNKNOWN;
  if (g_api->PJRT_Error_GetCode(&c) == nullptr) code = static_cast<int>(c.code);
  destroyError(err);
  return Error(std::move(msg), code);
}

void check(PJRT_Error* err, const char* fn) {
  if (err != nullptr) throw toError(err, fn);
}

namespace {
OutOfMemoryHook g_oom_hook = nullptr;
}  // namespace

void throwOutOfMemory(const Error& e, int64_t requested, int device) {
  OutOfMemory oom(e.what(), requested, device);
  if (g_oom_hook != nullptr) g_oom_hook(oom);
  throw oom;
}

void checkAlloc(PJRT_Error* err, const char* fn, int64_t requested, int device) {
  if (err == nullptr) return;
  Error e = toError(err, fn);
  if (e.code() == kErrorResourceExhausted) throwOutOfMemory(e, requested, device);
  throw e;
}

int consumeErrorCode(PJRT_Error* err) {
  if (err == nullptr) return 0;
  return toError(err, "").code();
}

void throwTooOld(const char* fn) {
  throw Error(std::string("plugin too old for ") + fn + " (PJRT_Api has no such function)", kErrorUnimplemented);
}

void destroyEvent(PJRT_Event* ev) noexcept {
  if (ev == nullptr || g_api == nullptr || g_forked || closed()) return;
  try {
    Args<PJRT_Event_Destroy_Args> a;
    a->event = ev;
    PJRT_Error* err = TPU_PJRT_FN(PJRT_Event_Destroy)(a.get());
    if (err != nullptr) destroyError(err);
  } catch (...) {
  }
}

void awaitEvent(PJRT_Event* ev, const char* what) {
  // Spin briefly before blocking: a program launched just before the wait (a fused trace launched at its
  // synchronization point) often completes within microseconds, and waking a blocked thread costs more than that.
  static const int64_t spin_ns = [] {
    return settings::integer("TORCH_TPU_SPIN_WAIT_US") * 1000;
  }();
  if (spin_ns > 0) {
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      Args<PJRT_Event_IsReady_Args> r;
      r->event = ev;
      PJRT_Error* err = TPU_PJRT_FN(PJRT_Event_IsReady)(r.get());
      if (err != nullptr) throw toError(err, what);
      if (r->is_ready) break;
      if (std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count() > spin_ns)
        break;
      std::this_thread::yield();
    }
  }
  Args<PJRT_Event_Await_Args> a;
  a->event = ev;
  PJRT_Error* err = TPU_PJRT_FN(PJRT_Event_Await)(a.get());
  if (err != nullptr) throw toError(err, what);
}

}  // namespace detail

void setOutOfMemoryHook(OutOfMemoryHook hook) { detail::g_oom_hook = hook; }

// ---------------------------------------------------------------------------------------------------- Event

Event::~Event() { detail::destroyEvent(ev_); }

void Event::await() { detail::awaitEvent(ev_, "PJRT_Event_Await"); }

bool Event::isReady() {
  detail::Args<PJRT_Event_IsReady_Args> a;
  a->event = ev_;
  TPU_PJRT(PJRT_Event_IsReady, a.get());
  return a->is_ready;
}

}  // namespace runtime
}  // namespace torch_tpu
