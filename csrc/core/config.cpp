#include "core/config.h"

#include <ATen/Context.h>

#include <cstdlib>
#include <cstring>

#include "stablehlo/builder.h"

namespace torch_tpu {

namespace {

shlo::Precision torchMatmulPrecision() {
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGHEST: return shlo::Precision::Highest;
    case at::Float32MatmulPrecision::HIGH: return shlo::Precision::High;
    case at::Float32MatmulPrecision::MEDIUM: return shlo::Precision::Default;
  }
  return shlo::Precision::Highest;
}

const bool g_precision_installed = (shlo::setMatmulPrecisionSource(&torchMatmulPrecision), true);

}  // namespace

uint8_t matmulPrecisionKey() {
  (void)g_precision_installed;
  return static_cast<uint8_t>(shlo::matmulPrecision());
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
    return e && *e && std::strcmp(e, "0") != 0;
  }();
  return v;
}

}  // namespace torch_tpu
