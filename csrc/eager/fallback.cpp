#include "eager/fallback.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/native/CPUFallback.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/client.h"
#include "eager/overlap.h"
#include "lowering/lowering.h"
#include "settings/settings.h"

namespace torch_tpu {

namespace {
std::mutex g_mu;
std::map<std::string, int64_t> g_counts;
std::map<std::string, std::string> g_reasons;
std::map<std::string, int64_t> g_transfers;
std::atomic<int> g_strict{-1};

std::string opName(const c10::OperatorHandle& op) {
  const auto& n = op.schema().operator_name();
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}
}  // namespace

bool fallbackStrict() {
  int s = g_strict.load();
  if (s < 0) {
    s = settings::switchOn("TORCH_TPU_FALLBACK_STRICT") ? 1 : 0;
    g_strict = s;
  }
  return s == 1;
}

void setFallbackStrict(bool strict) { g_strict = strict ? 1 : 0; }

void noteLoweringFallback(const std::string& op, const std::string& reason) {
  std::lock_guard<std::mutex> g(g_mu);
  g_reasons[op] = reason;
}

void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // In a child forked after the runtime started, the copies to the host cannot run: the fork error, not a fallback.
  if (C10_UNLIKELY(inBadFork())) TORCH_CHECK(false, runtime::kForkedMessage);
  std::string name = opName(op);
  std::string reason;
  bool first = false;
  {
    std::lock_guard<std::mutex> g(g_mu);
    first = g_counts[name]++ == 0;
    auto it = g_reasons.find(name);
    if (it != g_reasons.end()) reason = it->second;
  }
  if (fallbackStrict()) {
    {
      std::lock_guard<std::mutex> g(g_mu);
      if (--g_counts[name] == 0) g_counts.erase(name);
    }
    TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu: ", lowering::noLowering(name, reason),
                                "; TORCH_TPU_FALLBACK_STRICT=1 forbids the CPU fallback");
  }
  if (first) {
    TORCH_WARN("tpu: ", lowering::noLowering(name, reason),
               ": it runs on the CPU, which costs two host round trips per call");
  }
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true, c10::DispatchKey::CPU);
}

void cpuRunForError(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // Raises the CPU kernel's own error, which is the user's error, not a fallback: nothing is counted or warned.
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true, c10::DispatchKey::CPU);
  // The CPU kernel accepted what PyTorch's meta kernel rejected: the call did run on the CPU.
  std::lock_guard<std::mutex> g(g_mu);
  g_counts[opName(op)]++;
  g_reasons[opName(op)] = "the meta kernel rejected a call the CPU kernel accepts";
}

void noteHostTransfer(const std::string& what) {
  TORCH_CHECK_NOT_IMPLEMENTED(!fallbackStrict(), "tpu: ", what,
                              " goes through the host, and TORCH_TPU_FALLBACK_STRICT=1 forbids host round trips");
  std::lock_guard<std::mutex> g(g_mu);
  g_transfers[what]++;
}

std::map<std::string, int64_t> hostTransferCounts() {
  std::lock_guard<std::mutex> g(g_mu);
  return g_transfers;
}

std::map<std::string, int64_t> fallbackCounts() {
  std::lock_guard<std::mutex> g(g_mu);
  return g_counts;
}

std::map<std::string, std::string> fallbackReasons() {
  std::lock_guard<std::mutex> g(g_mu);
  return g_reasons;
}

void resetFallbackCounts() {
  std::lock_guard<std::mutex> g(g_mu);
  g_counts.clear();
  g_transfers.clear();
}

namespace {
// A written tensor that overlaps itself or shares memory with another argument: the CPU kernel's overlap error is
// found on host twins that alias as the tpu tensors do (the fallback's copies to the host lose that aliasing, and
// the kernel would raise another error first, or compute on separate copies).
bool writesThroughAlias(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t base) {
  const auto& args = op.schema().arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::AliasInfo* ai = args[i].alias_info();
    if (!ai || !ai->isWrite() || !stack[base + i].isTensor()) continue;
    const at::Tensor& w = stack[base + i].toTensor();
    if (!w.defined()) continue;
    if (!w.is_non_overlapping_and_dense() && at::has_internal_overlap(w) == at::MemOverlap::Yes) return true;
    for (size_t j = 0; j < args.size(); ++j) {
      if (j == i || !stack[base + j].isTensor()) continue;
      const at::Tensor& o = stack[base + j].toTensor();
      if (o.defined() && o.has_storage() && w.has_storage() && o.storage().is_alias_of(w.storage())) return true;
    }
  }
  return false;
}

void boxedFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t base = stack->size() - op.schema().arguments().size();
  if (C10_UNLIKELY(writesThroughAlias(op, *stack, base))) checkWriteOverlap(op, *stack, base);
  cpuFallback(op, stack);
}
}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&boxedFallback>()); }

}  // namespace torch_tpu
