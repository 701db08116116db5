// Device arguments of ops that reach the tpu kernel through an input tensor.
//
// The dispatcher picks the tpu kernel from the call's tensors, but an op with TensorOptions (`dtype`, `layout`,
// `device`, `pin_memory`) or a `device` argument (full_like, zeros_like, new_ones, linspace.Tensor_Tensor, ...) may
// ask for its result elsewhere: `torch.full_like(x_tpu, 3, device="cpu")`, `x_tpu0.new_zeros(2, device="tpu:1")`,
// `device="meta"`. A lowering rule computes on the inputs' device only, so the lowering kernel asks here first:
// when the call names another device (a device without an index means the current one, as on CUDA), a pinned
// result, or a layout other than strided, the result is produced where asked, as PyTorch's CPU and CUDA kernels
// produce it: by the op's CompositeExplicitAutograd kernel (an empty tensor made where asked, then filled; the
// input's values are read only where the op reads them), else by computing on the input's device and copying.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace torch_tpu {

// Stack positions of an op's device, layout and pin_memory arguments (-1: none). Computed once per schema.
struct DeviceArgs {
  int device = -1;
  int layout = -1;
  int pin_memory = -1;
  // No `self` argument (linspace.Tensor_Tensor, ...): the op is a factory whose numbers may be tensors, and its
  // result is on the device argument's device, the default device (cpu) when none is given, as PyTorch's kernel has
  // it; ops with `self` (*_like, new_*) default to self's device.
  bool factory = false;
  bool any() const { return device >= 0 || layout >= 0 || pin_memory >= 0; }
};
DeviceArgs deviceArgsOf(const c10::FunctionSchema& schema);

// If the call on `stack` asks for its result on another device than its tpu inputs' (or pinned, or in another
// layout), produces the result there, leaves it on the stack as the op's returns and returns true; else returns
// false and leaves the stack alone (the lowering kernel runs the op).
bool runWhereAsked(const c10::OperatorHandle& op, const DeviceArgs& da, torch::jit::Stack* stack);

}  // namespace torch_tpu
