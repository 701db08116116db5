// The boxed lowering kernel and its program cache.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string>
#include <vector>

namespace torch_tpu {

void loweringKernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);

// Registers loweringKernel for PrivateUse1 on every op that has a rule (and its in-place / out= variants).
// Idempotent; returns the registered op names.
std::vector<std::string> registerLoweringKernels();

struct KernelCacheStats {
  int64_t requests = 0;   // calls of ops with a lowering rule
  int64_t hits = 0;       // served by the process cache of programs (memory hits)
  int64_t misses = 0;     // programs built (meta kernels + lowering)
  int64_t compiles = 0;   // executables compiled
  int64_t disk_hits = 0;  // executables read from the disk cache instead
  int64_t entries = 0, evictions = 0;
  double compile_seconds = 0, disk_seconds = 0, lower_seconds = 0;
};
KernelCacheStats kernelCacheStats();
void clearKernelCache();

}  // namespace torch_tpu
