// One populate function per rule family (csrc/lowering/rules/<family>.cpp). registry() calls each once.
// Adding a family: declare it here, add it to kFamilies in registry.cpp.
#pragma once

#include "lowering/lowering.h"

namespace torch_tpu::lowering {

// Declared weak so a family can be developed (or left out) without breaking the link; registry() skips absent ones.
#define TPU_FAMILY __attribute__((weak))

TPU_FAMILY void populateElementwise(Registry& r);  // pointwise math, comparisons, where, casts
TPU_FAMILY void populateReduction(Registry& r);    // sum, mean, amax, ...
TPU_FAMILY void populateLinalg(Registry& r);       // mm, bmm, addmm, ...
TPU_FAMILY void populateFactory(Registry& r);      // full, arange, random, fill, clone, _to_copy
TPU_FAMILY void populateNN(Registry& r);           // activations and their backward, softmax, layer norm, embedding
TPU_FAMILY void populateShape(Registry& r);        // cat and other data-movement ops that are not views
TPU_FAMILY void populateCopy(Registry& r);         // copy (eager copy_ into views)
TPU_FAMILY void populateViews(Registry& r);        // view ops as values (graphs only); compile_extra: graph-only ops
TPU_FAMILY void populateCompileExtra(Registry& r);
TPU_FAMILY void populateForeach(Registry& r);      // _foreach_* list ops, fused optimizers (after the per-tensor families)
TPU_FAMILY void populateConv(Registry& r);         // convolution (1-3d, groups, transposed) and its backward
TPU_FAMILY void populatePooling(Registry& r);      // avg/max/adaptive pooling, upsampling, and their backward
TPU_FAMILY void populateNorm(Registry& r);         // group norm, batch norm, rms norm, and their backward
TPU_FAMILY void populateFused(Registry& r);        // the project's own fused kernels (tpu::swiglu, ...)
TPU_FAMILY void populateForeign(Registry& r);      // tpu::stablehlo_call: registered foreign programs (JAX, Pallas)

}  // namespace torch_tpu::lowering
