// Foreign programs: StableHLO modules registered at run time under a kernel name, one per input signature (JAX
// functions exported by torch_tpu.jax_op, Pallas kernels from inductor's code generator). The rule of
// tpu::stablehlo_call (rules/foreign.cpp) resolves its `kernel` argument and argument types to one of them and
// emits a call of it (shlo::callForeign), in eager programs and compiled graphs alike.
//
// Part of layer 3 (lowering): no torch. Thread-safe; registered programs live for the process: one per kernel and
// input types its callers use, never evicted (an eager or graph program dropped from its bounded cache and
// rebuilt later must find its foreign program again; the Python kernel, not this registry, makes them).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "stablehlo/foreign.h"

namespace torch_tpu::lowering {

// Parses `text` (see shlo::ForeignModule) and registers it for `kernel` and the entry's input types, replacing an
// earlier program of the same kernel and signature. Throws shlo::BuildError for text that cannot be embedded.
std::shared_ptr<const shlo::ForeignModule> registerForeignProgram(const std::string& kernel, const std::string& text,
                                                                  const std::string& entry = "main");
// Drops the program of `kernel` registered from `text`'s input types (a program cache's eviction); false when none.
bool unregisterForeignProgram(const std::string& kernel, const std::vector<shlo::TensorType>& inputs);
// The program of `kernel` taking `inputs`, or null.
std::shared_ptr<const shlo::ForeignModule> findForeignProgram(const std::string& kernel,
                                                              const std::vector<shlo::TensorType>& inputs);
// Input signatures registered for `kernel` ("(tensor<4xf32>) -> (tensor<4xf32>)"), for error messages.
std::vector<std::string> foreignSignatures(const std::string& kernel);
size_t foreignProgramCount();

}  // namespace torch_tpu::lowering
