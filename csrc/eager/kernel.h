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
  int64_t requests = 0, hits = 0, compiles = 0, entries = 0;
  double compile_seconds = 0;
};
KernelCacheStats kernelCacheStats();
void clearKernelCache();

}  // namespace torch_tpu
