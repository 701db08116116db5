// Process-wide configuration set from Python (plugin path and options).
#pragma once

#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace torch_tpu {

void setPlugin(const std::string& path, std::vector<runtime::CreateOption> options);
// Why the client could not be created ("" if it was, or was never tried).
const std::string& initError();

}  // namespace torch_tpu
