#include "eager/storage.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "eager/state.h"

namespace torch_tpu {

namespace {

void deleteStorage(void* ctx) { delete static_cast<TpuStorage*>(ctx); }

struct TpuAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    auto* s = new TpuStorage();
    s->device = currentDevice();
    s->nbytes = nbytes;
    // The address is the TpuStorage itself: unique per storage, never dereferenced.
    return {s, s, &deleteStorage, c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(s->device))};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    TORCH_CHECK(false, "tpu storages cannot be copied as raw memory; use tensor.copy_()");
  }
};

TpuAllocator g_allocator;

}  // namespace

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

c10::Allocator* tpuAllocator() { return &g_allocator; }

TpuStorage* storageOf(const c10::Storage& s) {
  auto* ctx = static_cast<TpuStorage*>(s.data_ptr().get_context());
  TORCH_CHECK(ctx != nullptr && s.data_ptr().get_deleter() == &deleteStorage,
              "internal error: storage is not a tpu storage");
  return ctx;
}

TpuStorage* storageOf(const at::Tensor& t) { return storageOf(t.storage()); }

runtime::BufferPtr bufferOf(const at::Tensor& t) {
  TpuStorage* s = storageOf(t);
  std::lock_guard<std::mutex> g(s->mu);
  if (!s->buffer) {
    size_t item = t.element_size();
    int64_t n = static_cast<int64_t>(s->nbytes / item);
    std::vector<char> zeros(s->nbytes, 0);
    s->buffer = client().fromHost(zeros.data(), static_cast<runtime::ElementType>(toDType(t.scalar_type())),
                                  {n}, s->device);
  }
  return s->buffer;
}

at::Tensor wrapBuffer(runtime::BufferPtr buffer, at::ScalarType dtype, c10::IntArrayRef sizes, int device) {
  size_t nbytes = buffer->byteSize();
  c10::DataPtr dp;
  {
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)));
    dp = g_allocator.allocate(nbytes);
  }
  static_cast<TpuStorage*>(dp.get_context())->buffer = std::move(buffer);
  auto storage = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), nbytes, std::move(dp),
                                                        &g_allocator, /*resizable=*/true);
  auto t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(std::move(storage)),
                                                    c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                    caffe2::TypeMeta::fromScalarType(dtype));
  t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  return t;
}

shlo::DType toDType(at::ScalarType t) {
  using D = shlo::DType;
  switch (t) {
    case at::kBool: return D::Pred;
    case at::kChar: return D::S8;
    case at::kShort: return D::S16;
    case at::kInt: return D::S32;
    case at::kLong: return D::S64;
    case at::kByte: return D::U8;
    case at::kUInt16: return D::U16;
    case at::kUInt32: return D::U32;
    case at::kUInt64: return D::U64;
    case at::kHalf: return D::F16;
    case at::kFloat: return D::F32;
    case at::kDouble: return D::F64;
    case at::kBFloat16: return D::BF16;
    case at::kComplexFloat: return D::C64;
    case at::kComplexDouble: return D::C128;
    default: break;
  }
  TORCH_CHECK_TYPE(false, "tpu: unsupported dtype ", t);
}

bool supportedDType(at::ScalarType t) {
  switch (t) {
    case at::kBool: case at::kChar: case at::kShort: case at::kInt: case at::kLong: case at::kByte:
    case at::kHalf: case at::kFloat: case at::kDouble: case at::kBFloat16:
      return true;
    default:
      return false;
  }
}

at::ScalarType toScalarType(shlo::DType t) {
  using D = shlo::DType;
  switch (t) {
    case D::Pred: return at::kBool;
    case D::S8: return at::kChar;
    case D::S16: return at::kShort;
    case D::S32: return at::kInt;
    case D::S64: return at::kLong;
    case D::U8: return at::kByte;
    case D::U16: return at::kUInt16;
    case D::U32: return at::kUInt32;
    case D::U64: return at::kUInt64;
    case D::F16: return at::kHalf;
    case D::F32: return at::kFloat;
    case D::F64: return at::kDouble;
    case D::BF16: return at::kBFloat16;
    case D::C64: return at::kComplexFloat;
    case D::C128: return at::kComplexDouble;
    default: break;
  }
  TORCH_CHECK(false, "tpu: no torch dtype for element type ", static_cast<int>(t));
}

// ---- client and devices ----

namespace {
std::mutex g_client_mu;
std::string g_plugin_path;
std::vector<runtime::CreateOption> g_plugin_options;
runtime::Client* g_client = nullptr;
std::string g_init_error;
bool g_init_tried = false;
thread_local int t_current_device = 0;
}  // namespace

void setPlugin(const std::string& path, std::vector<runtime::CreateOption> options) {
  std::lock_guard<std::mutex> g(g_client_mu);
  TORCH_CHECK(g_client == nullptr || path == g_plugin_path,
              "tpu: the PJRT plugin is already loaded from ", g_plugin_path);
  g_plugin_path = path;
  g_plugin_options = std::move(options);
}

const std::string& initError() {
  std::lock_guard<std::mutex> g(g_client_mu);
  return g_init_error;
}

runtime::Client& client() {
  runtime::Client* c = g_client;
  if (C10_LIKELY(c != nullptr)) return *c;
  std::lock_guard<std::mutex> g(g_client_mu);
  if (g_client) return *g_client;
  if (g_init_tried) TORCH_CHECK(false, g_init_error);
  g_init_tried = true;
  if (g_plugin_path.empty()) {
    g_init_error =
        "tpu: no PJRT plugin configured (import torch_tpu first; the default plugin comes from "
        "`pip install xla-cpu-pjrt`)";
    TORCH_CHECK(false, g_init_error);
  }
  // The plugins log through absl at INFO by default; keep start-up quiet unless asked otherwise.
  setenv("TF_CPP_MIN_LOG_LEVEL", "1", /*overwrite=*/0);
  try {
    g_client = &runtime::Client::init(g_plugin_path, g_plugin_options);
  } catch (const std::exception& e) {
    g_init_error = std::string("tpu: cannot start the PJRT plugin: ") + e.what();
    TORCH_CHECK(false, g_init_error);
  }
  return *g_client;
}

int currentDevice() { return t_current_device; }

void setCurrentDevice(int d) {
  TORCH_CHECK(d >= 0 && d < deviceCount(), "tpu: invalid device index ", d, " (", deviceCount(),
              " devices available)");
  t_current_device = d;
}

int deviceCount() {
  try {
    return client().deviceCount();
  } catch (...) {
    return 0;
  }
}

size_t donateMinBytes() {
  static const size_t v = [] {
    const char* e = std::getenv("TORCH_TPU_DONATE_MIN_BYTES");
    return e && *e ? static_cast<size_t>(std::strtoull(e, nullptr, 10)) : size_t(1) << 20;
  }();
  return v;
}

bool launchBlocking() {
  static const bool v = [] {
    const char* e = std::getenv("TORCH_TPU_LAUNCH_BLOCKING");
    return e && std::strcmp(e, "0") != 0 && *e;
  }();
  return v;
}

}  // namespace torch_tpu
