// What the compiler behind the loaded PJRT plugin offers beyond portable StableHLO, for the rules that emit a
// platform-specific form (e.g. chlo.ragged_dot for grouped matmuls on TPU and GPU, a tiled loop on CPU).
//
// Set once when the plugin is loaded (core/client.cpp); until then, and for an unknown platform, nothing beyond
// portable StableHLO is assumed. One plugin serves a process, so programs cached in process never mix targets,
// and the disk cache is keyed by the plugin.
#pragma once

#include <string>

namespace torch_tpu::lowering {

struct Target {
  std::string platform;     // PJRT platform name: "cpu", "cuda", "rocm", "tpu", or empty before a plugin is loaded
  bool ragged_dot = false;  // chlo.ragged_dot compiles natively (TPU, GPU)
};

const Target& target();
// Derives the features of `platform`. TORCH_TPU_RAGGED_DOT=0/1 overrides ragged_dot (tests, diagnostics).
void setTarget(const std::string& platform);
// Sets the features as given (the C++ tests).
void setTarget(const Target& t);

}  // namespace torch_tpu::lowering
