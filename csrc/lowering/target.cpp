#include "lowering/target.h"

#include "settings/settings.h"
#include <cstdlib>
#include <cstring>

namespace torch_tpu::lowering {

namespace {
Target& current() {
  static Target t;
  return t;
}
}  // namespace

const Target& target() { return current(); }

void setTarget(const std::string& platform) {
  Target t;
  t.platform = platform;
  t.ragged_dot = platform == "tpu" || platform == "cuda" || platform == "gpu";
  if (std::optional<bool> on = settings::switchValue("TORCH_TPU_RAGGED_DOT")) t.ragged_dot = *on;
  current() = t;
}

void setTarget(const Target& t) { current() = t; }

}  // namespace torch_tpu::lowering
