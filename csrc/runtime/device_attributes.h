// The attributes of an addressable device's description (PJRT_DeviceDescription_Attributes).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "runtime/runtime.h"

namespace torch_tpu {
namespace runtime {

// TPU plugins give "coords", "core_on_chip", "slice_index", ...; each value rendered as text (integer lists joined
// by '.'). Empty when the plugin reports none.
std::vector<std::pair<std::string, std::string>> deviceAttributes(const Client& client, int device);

}  // namespace runtime
}  // namespace torch_tpu
