#include "eager/scalars.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

#include <cstring>
#include <mutex>
#include <unordered_map>

#include "eager/storage.h"

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
    case D::U64: return w(static_cast<uint64_t>(v.toLong()));
    case D::F16: return w(static_cast<c10::Half>(static_cast<float>(v.toDouble())));
    case D::BF16: return w(static_cast<c10::BFloat16>(static_cast<float>(v.toDouble())));
    case D::F32: return w(static_cast<float>(v.toDouble()));
    case D::F64: return w(v.toDouble());
    default: break;
  }
  TORCH_CHECK_TYPE(false, "tpu: cannot pass a number as ", shlo::mlirName(dtype));
}

runtime::BufferPtr scalarBuffer(const c10::Scalar& v, shlo::DType dtype, int device) {
  uint64_t bits = 0;
  // Integral scalars converted to a float dtype, and vice versa, go through the Scalar's own conversions.
  size_t n = encodeScalar(v, dtype, &bits);
  struct Key {
    uint64_t bits;
    int32_t dtype, device;
    bool operator==(const Key& o) const { return bits == o.bits && dtype == o.dtype && device == o.device; }
  };
  struct Hash {
    size_t operator()(const Key& k) const { return std::hash<uint64_t>()(k.bits * 1315423911u + k.dtype * 31 + k.device); }
  };
  static std::mutex mu;
  static std::unordered_map<Key, runtime::BufferPtr, Hash> cache;
  Key key{bits, static_cast<int32_t>(dtype), device};
  {
    std::lock_guard<std::mutex> g(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  auto buf = client().fromHost(&bits, static_cast<runtime::ElementType>(dtype), {}, device);
  (void)n;
  std::lock_guard<std::mutex> g(mu);
  if (cache.size() > 4096) cache.clear();
  cache.emplace(key, buf);
  return buf;
}

}  // namespace torch_tpu
