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
// Cost: a flag read is a device-to-host transfer (tens of microseconds on the CPU plugin), so flags are not read
// one by one. Every program's sites are registered once under a process-wide id range; pending flags are combined
// on the device by a small fold program (into one flag holding the global site id of the first violation) when 256
// are pending and at a synchronization point, which then reads a single flag. Nothing blocks between
// synchronizations, and memory stays bounded however long a program runs without one.
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
// The checks of one program, registered process-wide: site k of the program is global site base + k + 1.
struct SiteTable {
  std::vector<CheckSite> sites;
  int64_t base = 0;
};
using CheckSites = std::shared_ptr<const SiteTable>;
// Registers the checks of a new program (kept for the life of the process, like the program's executable).
CheckSites registerCheckSites(std::vector<CheckSite> sites);

// Whether programs carry device-side checks: TORCH_TPU_DEVICE_CHECKS (default on), or setDeviceChecks. The setting
// is part of every call's cache key (Signature::seal), so switching it takes effect at once.
bool deviceChecks();
void setDeviceChecks(bool on);

// The flag of a launched program on `device`, checked at the next synchronization.
void addPendingCheck(int device, runtime::BufferPtr flag, CheckSites sites);

// Reads the pending flags of `device` (-1: every device), forgets them and raises the first violation. Cheap when
// nothing is pending.
void raisePendingChecks(int device);

// The same in two halves, so that reading the flags overlaps the caller's own device-to-host transfer: start() takes
// the pending flags and starts reading them; finish() waits and raises the first violation.
class PendingChecks {
 public:
  static PendingChecks start(int device);
  void finish();
  PendingChecks() = default;
  PendingChecks(PendingChecks&&) = default;
  PendingChecks& operator=(PendingChecks&&) = default;
  ~PendingChecks();  // waits for reads still in flight (their host memory is ours)

  struct Read;

 private:
  std::vector<std::shared_ptr<Read>> reads_;
};

// Number of flags not yet read (tests, diagnostics).
int64_t pendingCheckCount();

}  // namespace torch_tpu::core
