#include "core/config.h"

#include <ATen/Context.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "stablehlo/builder.h"
#include "settings/settings.h"

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
    return static_cast<size_t>(settings::bytes("TORCH_TPU_DONATE_MIN_BYTES"));
  }();
  return v;
}

bool envSwitchOn(const char* name) { return settings::switchOn(name); }

namespace {
// -1: not read from the environment yet; 0 / 1 afterwards (or once set).
std::atomic<int> g_launch_blocking{-1};
}  // namespace

bool launchBlocking() {
  int v = g_launch_blocking.load(std::memory_order_relaxed);
  if (v < 0) {
    int read = settings::switchOn("TORCH_TPU_LAUNCH_BLOCKING") ? 1 : 0;
    g_launch_blocking.compare_exchange_strong(v, read, std::memory_order_relaxed);
    v = g_launch_blocking.load(std::memory_order_relaxed);
  }
  return v == 1;
}

void setLaunchBlocking(bool on) { g_launch_blocking.store(on ? 1 : 0, std::memory_order_relaxed); }

}  // namespace torch_tpu
