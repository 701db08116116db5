// Device buffers holding one number, cached by (device, dtype, value): buffers are immutable, so a learning rate
// or a storage offset used on every step is uploaded once.
#pragma once

#include <c10/core/Scalar.h>

#include "runtime/runtime.h"
#include "stablehlo/builder.h"

namespace torch_tpu {

runtime::BufferPtr scalarBuffer(const c10::Scalar& v, shlo::DType dtype, int device);

// Bytes held by the cache on `device` (reported as reserved, not allocated), and dropping it (empty_cache).
int64_t scalarCacheBytes(int device);
void clearScalarCache();

// Converts v to dtype's bytes (little endian, dense). Returns the byte count.
size_t encodeScalar(const c10::Scalar& v, shlo::DType dtype, void* out16);

}  // namespace torch_tpu
