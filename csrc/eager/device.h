// Device registration with PyTorch: the device guard (registered statically) and the PrivateUse1 hooks.
#pragma once

namespace torch_tpu {

// Registers the hooks interface (idempotent; called when the extension loads).
void registerHooks();

}  // namespace torch_tpu
