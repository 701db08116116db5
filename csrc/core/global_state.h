// torch's global settings that change what a program computes or which result types an op gives.
//
// Every cache that decides a program or a result type (the eager call signature, fused traces through it, compiled
// graphs by input signature) appends globalStateKey() to its key, so flipping a setting between two identical calls
// builds (or finds) the program of the new setting instead of reusing the old one's:
//  - torch.get_float32_matmul_precision() (the precision_config of float32 products, matmulPrecisionKey()),
//  - torch.get_default_dtype() (the dtype of Python floats and complex numbers in type promotion, integer division,
//    factories without a dtype: the meta kernels' result types and the rules' defaultFloat()),
//  - torch.use_deterministic_algorithms (mode and warn_only) and torch.utils.deterministic.fill_uninitialized_memory.
// Autocast is applied by its own dispatch key before an eager op reaches the device kernel (the kernel sees the cast
// arguments), so it is not part of the eager key; compiled graphs add it (a graph's casts are traced under it).
#pragma once

#include <cstdint>
#include <string>

namespace torch_tpu::core {

// The settings above, packed into a few bytes (cheap enough for every eager call's hit path).
uint32_t globalStateKey();
inline void putGlobalStateKey(std::string& key) {
  const uint32_t v = globalStateKey();
  key.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

}  // namespace torch_tpu::core
