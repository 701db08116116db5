#include "core/scalars.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e4m3fnuz.h>
#include <c10/util/Float8_e5m2.h>
#include <c10/util/Float8_e5m2fnuz.h>
#include <c10/util/Float8_e8m0fnu.h>
#include <c10/util/Half.h>
#include <c10/util/complex.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "core/client.h"

namespace torch_tpu {

size_t encodeScalar(const c10::Scalar& v, shlo::DType dtype, void* out) {
  using D = shlo::DType;
  auto w = [&](auto x) {
    std::memcpy(out, &x, sizeof(x));
    return sizeof(x);
  };
  switch (dtype) {
    case D::Pred: return w(static_cast<uint8_t>(v.toBool() ? 1 : 0));
    case D::S8: return w(static_cast<int8_t>(v.toLong()));
    case D::S16: return w(static_cast<int16_t>(v.toLong()));
    case D::S32: return w(static_cast<int32_t>(v.toLong()));
    case D::S64: return w(static_cast<int64_t>(v.toLong()));
    case D::U8: return w(static_cast<uint8_t>(v.toLong()));
    case D::U16: return w(static_cast<uint16_t>(v.toLong()));
    case D::U32: return w(static_cast<uint32_t>(v.toLong()));
    case D::U64: return w(v.type() == c10::ScalarType::UInt64 ? v.toUInt64() : static_cast<uint64_t>(v.toLong()));
    case D::F16: return w(static_cast<c10::Half>(static_cast<float>(v.toDouble())));
    case D::BF16: return w(static_cast<c10::BFloat16>(static_cast<float>(v.toDouble())));
    case D::F32: return w(static_cast<float>(v.toDouble()));
    case D::F64: return w(v.toDouble());
    // float8: through float, as PyTorch converts a number to float8
    case D::F8E4M3FN: return w(c10::Float8_e4m3fn(static_cast<float>(v.toDouble())));
    case D::F8E5M2: return w(c10::Float8_e5m2(static_cast<float>(v.toDouble())));
    case D::F8E4M3FNUZ: return w(c10::Float8_e4m3fnuz(static_cast<float>(v.toDouble())));
    case D::F8E5M2FNUZ: return w(c10::Float8_e5m2fnuz(static_cast<float>(v.toDouble())));
    case D::F8E8M0FNU: return w(c10::Float8_e8m0fnu(static_cast<float>(v.toDouble())));
    case D::C64: return w(c10::complex<float>(v.toComplexDouble()));
    case D::C128: return w(v.toComplexDouble());
    default: break;
  }
  TORCH_CHECK_TYPE(false, "tpu: cannot pass a number as ", shlo::mlirName(dtype));
}

namespace {

constexpr int kMaxDevices = 64;

struct Key {
  uint64_t bits, bits2;  // bits2: the second half of a complex128
  int32_t dtype, device;
  bool operator==(const Key& o) const {
    return bits == o.bits && bits2 == o.bits2 && dtype == o.dtype && device == o.device;
  }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    return std::hash<uint64_t>()(k.bits * 1315423911u + k.bits2 * 2654435761u + static_cast<uint64_t>(k.dtype) * 31 +
                                 k.device);
  }
};

std::mutex g_mu;
std::unordered_map<Key, runtime::BufferPtr, KeyHash> g_cache;  // bounded: cleared when it passes 4096 entries
int64_t g_cached_bytes[kMaxDevices] = {};

void clearLocked() {
  g_cache.clear();
  std::fill(std::begin(g_cached_bytes), std::end(g_cached_bytes), 0);
}

}  // namespace

int64_t scalarCacheBytes(int device) {
  std::lock_guard<std::mutex> g(g_mu);
  return device >= 0 && device < kMaxDevices ? g_cached_bytes[device] : 0;
}

void clearScalarCache() {
  std::lock_guard<std::mutex> g(g_mu);
  clearLocked();
}

runtime::BufferPtr scalarBuffer(const c10::Scalar& v, shlo::DType dtype, int device) {
  uint64_t bits[2] = {0, 0};
  encodeScalar(v, dtype, bits);
  Key key{bits[0], bits[1], static_cast<int32_t>(dtype), device};
  {
    std::lock_guard<std::mutex> g(g_mu);
    auto it = g_cache.find(key);
    if (it != g_cache.end()) return it->second;
  }
  auto buf = client().fromHost(bits, static_cast<runtime::ElementType>(dtype), {}, device);
  std::lock_guard<std::mutex> g(g_mu);
  if (g_cache.size() > 4096) clearLocked();
  if (g_cache.emplace(key, buf).second && device >= 0 && device < kMaxDevices) g_cached_bytes[device] += buf->byteSize();
  return buf;
}

}  // namespace torch_tpu
