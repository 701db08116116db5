// Device registration with PyTorch: the device guard (registered statically) and the PrivateUse1 hooks.
#pragma once

namespace torch_tpu {

// Registers the hooks interface (idempotent; called when the extension loads).
void registerHooks();

// Whether the hooks' isAvailable() (what torch._C._get_accelerator() consults) reports the device when it has
// devices. Set from Python (torch_tpu._plugin.reports_accelerator: not for the CPU plugin); default true.
void setAcceleratorReported(bool reported);

}  // namespace torch_tpu
