// The process-wide PJRT client and the devices it exposes.
//
// Python configures the plugin (torch_tpu/_plugin.py picks the path and create options) with setPlugin; the client
// is created on first use, so `import torch` stays cheap and a missing plugin only fails when the device is used.
#pragma once

#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace torch_tpu {

void setPlugin(const std::string& path, std::vector<runtime::CreateOption> options);
// Why the client could not be created ("" if it was, or was never tried).
const std::string& initError();
// Whether the plugin has been loaded (or its loading tried): from then on it has read its options (XLA_FLAGS).
bool pluginLoadTried();

// The client, created on first use from the plugin set by setPlugin (throws c10::Error with the reason otherwise).
runtime::Client& client();

// True in a child process forked after the client was created: any use of the device there raises
// runtime::kForkedMessage (a RuntimeError) instead of hanging on plugin threads that did not survive the fork.
bool inBadFork();

// Current device of this thread.
int currentDevice();
void setCurrentDevice(int d);
int deviceCount();  // never throws; 0 when the plugin can't load

}  // namespace torch_tpu
