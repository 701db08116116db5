// Mapping between torch dtypes and the element types of programs and buffers (shlo::DType, numbered like PJRT).
#pragma once

#include <c10/core/ScalarType.h>

#include "stablehlo/builder.h"

namespace torch_tpu {

// Throws c10::TypeError for dtypes the device cannot hold.
shlo::DType toDType(at::ScalarType t);
// Dtypes device programs compute on: every dtype toDType maps except complex128 on plugins without it.
bool supportedDType(at::ScalarType t);
// Whether the loaded plugin computes on complex128 (not TPUs).
bool complex128Supported();
at::ScalarType toScalarType(shlo::DType t);

}  // namespace torch_tpu
