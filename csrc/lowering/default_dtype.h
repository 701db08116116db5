// The dtype PyTorch gives a Python float: torch.get_default_dtype(), read through a source core installs (float32
// when none is installed, as in the torch-free tests); a Python complex number gets its complex counterpart. Every
// program cache keys on the setting (core/global_state.h), so a program built under one default never serves another.
#pragma once

#include "stablehlo/builder.h"

namespace torch_tpu::lowering {

using DefaultFloatSource = shlo::DType (*)();
void setDefaultFloatSource(DefaultFloatSource source);
shlo::DType defaultFloat();
shlo::DType defaultComplex();  // complex128 when the default is float64, else complex64

}  // namespace torch_tpu::lowering
