#include "lowering/collectives.h"

#include <cstring>

namespace torch_tpu::lowering {

const std::vector<ReduceOpRow>& reduceOps() {
  // name, c10d, combiner, bool combiner, bitwise, avg, premul, in_program
  static const std::vector<ReduceOpRow> rows = {
      {"sum", "SUM", "stablehlo.add", "stablehlo.or", false, false, false, true},
      {"avg", "AVG", "stablehlo.add", nullptr, false, true, false, true},
      {"product", "PRODUCT", "stablehlo.multiply", "stablehlo.and", false, false, false, true},
      {"min", "MIN", "stablehlo.minimum", "stablehlo.and", false, false, false, true},
      {"max", "MAX", "stablehlo.maximum", "stablehlo.or", false, false, false, true},
      {"band", "BAND", "stablehlo.and", "stablehlo.and", true, false, false, true},
      {"bor", "BOR", "stablehlo.or", "stablehlo.or", true, false, false, true},
      {"bxor", "BXOR", "stablehlo.xor", "stablehlo.xor", true, false, false, true},
      // The factor travels in c10d's ReduceOp, not in a functional collective's reduce_op string.
      {"premul_sum", "PREMUL_SUM", "stablehlo.add", "stablehlo.or", false, false, true, false},
  };
  return rows;
}

const ReduceOpRow* reduceOpByName(const std::string& name) {
  for (const ReduceOpRow& r : reduceOps())
    if (name == r.name) return &r;
  return nullptr;
}

const ReduceOpRow* reduceOpByC10d(const std::string& c10d) {
  for (const ReduceOpRow& r : reduceOps())
    if (c10d == r.c10d) return &r;
  return nullptr;
}

const char* reduceCombiner(const ReduceOpRow& r, shlo::DType t, std::string* why) {
  if (t == shlo::DType::Pred) {
    if (r.bool_combiner == nullptr) *why = "is not defined for bool tensors";
    return r.bool_combiner;
  }
  if (r.bitwise && !shlo::isInteger(t)) {
    *why = "needs integer or bool tensors";
    return nullptr;
  }
  return r.combiner;
}

const std::vector<CollectiveRow>& collectives() {
  // name, StableHLO form, reduces, in_program
  static const std::vector<CollectiveRow> rows = {
      {"all_reduce", "stablehlo.all_reduce", true, true},
      {"all_reduce_coalesced", "stablehlo.all_reduce (one per input)", true, true},
      {"all_gather_into_tensor", "stablehlo.all_gather (dimension 0)", false, true},
      {"all_gather_into_tensor_coalesced", "stablehlo.all_gather (one per input)", false, true},
      {"reduce_scatter_tensor", "stablehlo.reduce_scatter (dimension 0)", true, true},
      {"reduce_scatter_tensor_coalesced", "stablehlo.reduce_scatter (one per input)", true, true},
      {"all_to_all_single", "stablehlo.all_to_all (even splits only)", false, true},
      {"broadcast", "stablehlo.all_gather, then the root's slice", false, true},
      {"wait_tensor", "", false, true},  // the identity: the program's data flow orders everything
      // In-place and out= forms: run through the process group.
      {"all_reduce_", "", true, false},
      {"all_reduce_coalesced_", "", true, false},
      {"broadcast_", "", false, false},
      {"all_gather_into_tensor_out", "", false, false},
  };
  return rows;
}

const CollectiveRow* collectiveByName(const std::string& name) {
  for (const CollectiveRow& r : collectives())
    if (name == r.name) return &r;
  return nullptr;
}

std::vector<std::string> collectivesInProgram() {
  std::vector<std::string> out;
  for (const CollectiveRow& r : collectives())
    if (r.in_program) out.emplace_back(r.name);
  return out;
}

}  // namespace torch_tpu::lowering
