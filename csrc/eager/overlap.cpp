#include "eager/overlap.h"

#include <cstring>

#include "eager/twins.h"

namespace torch_tpu {

void checkWriteOverlap(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t base) {
  AliasTwins twin(c10::kCPU);  // zero-filled host twins aliasing as the tpu tensors do
  torch::jit::Stack cpu;
  for (size_t i = base; i < stack.size(); ++i) cpu.push_back(twin(stack[i]));
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu);
  } catch (const c10::Error& e) {
    // Only the overlap errors: anything else the zero-filled twins provoke is not the call's error.
    if (std::strncmp(e.msg().c_str(), "unsupported operation:", 22) == 0) throw;
  }
}

}  // namespace torch_tpu
