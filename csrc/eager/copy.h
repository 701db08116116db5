// Copies between cpu and tpu, between tpu devices, and the host round trips of tensors no program handles.
#pragma once

#include <ATen/ATen.h>

namespace torch_tpu {

// A tensor with t's values whose storage buffer is exactly those values, in row-major order (t itself if it is).
at::Tensor dense(const at::Tensor& t);

// clone of a tensor no program handles (complex): through the host.
at::Tensor hostClone(const at::Tensor& self);

// Waits for the non_blocking device->host copies made so far on `device` (all devices if < 0).
void awaitPendingCopies(int device);

}  // namespace torch_tpu
