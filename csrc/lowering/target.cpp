#include "lowering/target.h"

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
  if (const char* e = std::getenv("TORCH_TPU_RAGGED_DOT"); e && *e) t.ragged_dot = std::strcmp(e, "0") != 0;
  current() = t;
}

void setTarget(const Target& t) { current() = t; }

}  // namespace torch_tpu::lowering
