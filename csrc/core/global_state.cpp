#include "core/global_state.h"

#include <ATen/Context.h>
#include <c10/core/DefaultDtype.h>

#include "core/config.h"
#include "core/dtype.h"
#include "lowering/default_dtype.h"

namespace torch_tpu::core {

namespace {

shlo::DType torchDefaultFloat() { return toDType(c10::get_default_dtype_as_scalartype()); }

// The rules' defaultFloat() reads torch's setting (the lowering layer is torch-free).
const bool g_default_float_installed = (lowering::setDefaultFloatSource(&torchDefaultFloat), true);

}  // namespace

uint32_t globalStateKey() {
  (void)g_default_float_installed;
  const at::Context& ctx = at::globalContext();
  uint32_t k = matmulPrecisionKey();                                                        // bits 0-7
  k |= static_cast<uint32_t>(static_cast<uint8_t>(c10::get_default_dtype_as_scalartype())) << 8;  // bits 8-15
  k |= static_cast<uint32_t>(ctx.deterministicAlgorithms()) << 16;
  k |= static_cast<uint32_t>(ctx.deterministicAlgorithmsWarnOnly()) << 17;
  k |= static_cast<uint32_t>(ctx.deterministicFillUninitializedMemory()) << 18;
  return k;
}

}  // namespace torch_tpu::core
