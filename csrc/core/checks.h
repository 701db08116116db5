// Device-side checks: what a program asserts about its data (index bounds, integer division by zero) and how a
// violation reaches the user.
//
// A rule states a check with lowering::Context::check; ProgramBuilder folds the checks of a program into one extra
// output, a tensor<2xs64> flag [site, value]: 0 when every check held, else 1 + the index of the first failing check,
// with one offending value. Program::launch hands the flag to addPendingCheck. Like CUDA's device-side asserts, a
// violation is reported at the next synchronization point of its device (.item(), .cpu(), printing,
// torch.tpu.synchronize(), events), or at once under TORCH_TPU_LAUNCH_BLOCKING=1: raisePendingChecks reads the
// pending flags, forgets them, and raises the first violation as the exception the CPU kernel raises (IndexError,
// or RuntimeError), naming the op.
//
// TORCH_TPU_DEVICE_CHECKS=0 (or torch_tpu.set_device_checks(False)) turns the checks off: programs get no flag
// output, and out-of-range indices are then clamped or dropped silently, as XLA does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace torch_tpu::core {

// One check of a program.
struct CheckSite {
  std::string op;       // "aten::gather"
  std::string message;  // "{}" stands for the offending value
  bool index_error;     // IndexError, else RuntimeError
};
using CheckSites = std::shared_ptr<const std::vector<CheckSite>>;

// Whether programs carry device-side checks: TORCH_TPU_DEVICE_CHECKS (default on), or setDeviceChecks. The setting
// is part of every call's cache key (Signature::seal), so switching it takes effect at once.
bool deviceChecks();
void setDeviceChecks(bool on);

// The flag of a launched program on `device`, checked at the next synchronization.
void addPendingCheck(int device, runtime::BufferPtr flag, CheckSites sites);

// Reads the pending flags of `device` (-1: every device), forgets them and raises the first violation. Cheap when
// nothing is pending.
void raisePendingChecks(int device);

// Number of flags not yet read (tests, diagnostics).
int64_t pendingCheckCount();

}  // namespace torch_tpu::core
