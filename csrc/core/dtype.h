// Mapping between torch dtypes and the element types of programs and buffers (shlo::DType, numbered like PJRT).
#pragma once

#include <c10/core/ScalarType.h>

#include "stablehlo/builder.h"

namespace torch_tpu {

// Throws c10::TypeError for dtypes the device cannot hold.
shlo::DType toDType(at::ScalarType t);
// Dtypes device programs compute on (complex tensors are stored on the device but computed on the host).
bool supportedDType(at::ScalarType t);
at::ScalarType toScalarType(shlo::DType t);

}  // namespace torch_tpu
