// What the program of a graph does beyond lowering its nodes one by one, decided once per graph.
//
//  - Packed weights (inference graphs on the CPU plugin; TORCH_TPU_PACK_WEIGHTS=0/1 overrides): a 2-D weight read only
//    as the transposed right operand of mm/addmm (every nn.Linear), or a 3-D expert weight read only as the right
//    operand of _grouped_mm with its last two dimensions swapped (mixture-of-experts layers), enters the program as
//    that transposed copy, made once per weight buffer by an eager program and cached weakly by that buffer.
//  - Materialized transcendentals: results of transcendentals that are broadcast or read by several consumers are
//    computed into their own buffer instead of being recomputed per consumer element by XLA's fusion.
#pragma once

#include <cstdint>
#include <vector>

#include "compile/graph.h"
#include "runtime/runtime.h"
#include "stablehlo/builder.h"

namespace torch_tpu::compile {

// What the program of a graph does beyond lowering its nodes one by one (decided once per graph).
struct GraphPlan {
  // Per input: the program takes the input's transpose as its parameter (a packed weight, see packedTranspose).
  std::vector<bool> pack_transposed;
  // Per node: its results are computed into their own buffer (see materialized). XLA fuses elementwise producers
  // into their consumers by recomputing them per consumer element; for a transcendental whose result is broadcast
  // (the cos/sin of rotary embeddings) or read by several consumers, that multiplies its cost.
  std::vector<bool> materialize;
};

GraphPlan planGraph(const GraphDesc& g);

// `v` computed into its own buffer (see materialized transcendentals above).
shlo::Value materialized(shlo::Builder& b, shlo::Value v);

}  // namespace torch_tpu::compile
