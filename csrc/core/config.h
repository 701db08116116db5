// Settings read once from the environment.
#pragma once

#include <cstddef>

namespace torch_tpu {

// Smallest buffer worth donating to a program that overwrites it: waiting until the plugin is done with a donated
// buffer costs about 0.1 ms on the CPU plugin, more than copying a small one. TORCH_TPU_DONATE_MIN_BYTES
// (default 1 MiB).
size_t donateMinBytes();

// Debug: every program launch waits for its results (TORCH_TPU_LAUNCH_BLOCKING=1, read at the first launch, or
// setLaunchBlocking: TorchTPU's DEFER_NEVER_AND_LAUNCH_BLOCKING eager mode).
bool launchBlocking();
void setLaunchBlocking(bool on);

}  // namespace torch_tpu
