#include "core/config.h"

#include <cstdlib>
#include <cstring>

namespace torch_tpu {

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
    return e && *e && std::strcmp(e, "0") != 0;
  }();
  return v;
}

}  // namespace torch_tpu
