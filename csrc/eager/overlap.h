// Writes through overlapping memory: PyTorch's CPU kernels reject an in-place or out= write whose tensor overlaps
// itself (a stride-0 dimension) or partially overlaps one of the op's inputs (b[1:].add_(b[:-1])), each op in its own
// way (fill_ and index_put_ accept what add_ rejects), and meta kernels do not check. A device program would compute
// such a write as if every read happened first; instead, a call whose Signature flags the hazard is checked by the
// CPU kernel itself on zero-filled host twins that alias the way the tpu tensors do.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace torch_tpu {

// Raises the CPU kernel's overlap error (RuntimeError "unsupported operation: ...") if it has one for this call.
void checkWriteOverlap(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t base);

}  // namespace torch_tpu
