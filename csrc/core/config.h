// Settings read once from the environment, and torch's own settings programs depend on.
#pragma once

#include <cstddef>
#include <cstdint>

namespace torch_tpu {

// Smallest buffer worth donating to a program that overwrites it: waiting until the plugin is done with a donated
// buffer costs about 0.1 ms on the CPU plugin, more than copying a small one. TORCH_TPU_DONATE_MIN_BYTES
// (default 1 MiB).
size_t donateMinBytes();

// A switch of the settings table with a fixed default (settings::switchOn; an invalid value throws
// settings::SettingError). Read on each call: callers that read it per launch keep it in a static.
bool envSwitchOn(const char* name);

// Debug: every program launch waits for its results (TORCH_TPU_LAUNCH_BLOCKING=1, read at the first launch, or
// setLaunchBlocking: TorchTPU's DEFER_NEVER_AND_LAUNCH_BLOCKING eager mode).
bool launchBlocking();
void setLaunchBlocking(bool on);

// torch.get_float32_matmul_precision() as the precision of float32 products in programs (shlo::Precision): every
// Builder reads it when constructed (the source is installed when the extension loads), and every program cache
// keys on it (matmulPrecisionKey), so changing the setting builds new programs.
uint8_t matmulPrecisionKey();

}  // namespace torch_tpu
