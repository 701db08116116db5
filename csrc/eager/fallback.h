// Ops without a lowering rule run on CPU through PyTorch's boxed CPU fallback: counted per op, warned once per op,
// and an error under TORCH_TPU_FALLBACK_STRICT=1.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <map>
#include <string>

namespace torch_tpu {

void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// PyTorch's meta kernel rejected the call: run it on CPU so the CPU kernel raises its own exception type.
void cpuRunForError(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// A rule exists but declined this call (reason recorded for fallback_report()).
void noteLoweringFallback(const std::string& op, const std::string& reason);

// A host round trip the user did not ask for (data of a dtype no program handles, complex, moved through the host
// by a clone, a copy or a partial write): counted per kind for fallback_report(), an error (NotImplementedError)
// under TORCH_TPU_FALLBACK_STRICT=1. Explicit transfers (.cpu(), .item(), printing, .to("tpu")) and the host
// round trip of a data-dependent output size are not counted.
void noteHostTransfer(const std::string& what);
std::map<std::string, int64_t> hostTransferCounts();

std::map<std::string, int64_t> fallbackCounts();
std::map<std::string, std::string> fallbackReasons();
void resetFallbackCounts();
bool fallbackStrict();
void setFallbackStrict(bool strict);

}  // namespace torch_tpu
