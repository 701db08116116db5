// Process-wide configuration set from Python (plugin path and options).
#pragma once

#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace torch_tpu {

void setPlugin(const std::string& path, std::vector<runtime::CreateOption> options);
// Why the client could not be created ("" if it was, or was never tried).
const std::string& initError();
// Whether the PrivateUse1 hooks' isAvailable() (what torch._C._get_accelerator() consults) reports the device
// when it has devices. Set from Python (torch_tpu._plugin.reports_accelerator); default true.
void setAcceleratorReported(bool reported);

}  // namespace torch_tpu
