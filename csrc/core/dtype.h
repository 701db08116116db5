// Mapping between torch dtypes and the element types of programs and buffers (shlo::DType, numbered like PJRT).
#pragma once

#include <c10/core/ScalarType.h>

#include "stablehlo/builder.h"

namespace torch_tpu {

// The element type programs compute a dtype in. Throws c10::TypeError for dtypes the device cannot hold.
// complex32 (ComplexHalf) computes as complex64, rounded to complex32 where it is stored (core/program.h).
shlo::DType toDType(at::ScalarType t);
// Dtypes device programs compute on: every dtype toDType maps except complex128 on plugins without it.
bool supportedDType(at::ScalarType t);
// Whether the loaded plugin computes on complex128 (not TPUs).
bool complex128Supported();
at::ScalarType toScalarType(shlo::DType t);
// The element type of a storage's buffer: toDType, and for complex32 (ComplexHalf), which no plugin has, 32-bit words
// holding its raw bytes (the real half in the low 16 bits, as c10::complex<Half> lays them out in memory).
shlo::DType storageDType(at::ScalarType t);

}  // namespace torch_tpu
