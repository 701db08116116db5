// The collectives table: one row per collective and per reduce op, read by the eager transport
// (distributed/xla.cpp), compiled graphs (compile/collectives.cpp) and Python (torch_tpu._C._collectives_in_program,
// which decides which functional collectives a compiled graph keeps inside its program). docs/adding_a_collective.md
// says how to add one.
//
// Layer: lowering (torch-free): names are strings, as `_c10d_functional` ops and c10d::ReduceOp spell them.
#pragma once

#include <string>
#include <vector>

#include "stablehlo/builder.h"

namespace torch_tpu::lowering {

// A reduce op of all_reduce / reduce_scatter / reduce.
struct ReduceOpRow {
  const char* name;           // the functional reduce_op string ("sum")
  const char* c10d;           // the c10d::ReduceOp name ("SUM")
  const char* combiner;       // the StableHLO op combining two values of a numeric type
  const char* bool_combiner;  // ... of bool values (null: undefined for bool)
  bool bitwise;               // integer and bool tensors only
  bool avg;                   // divided by the group size after the sum
  bool premul;                // scaled by a factor before the sum (c10d's PREMUL_SUM carries it)
  bool in_program;            // a compiled graph's program can run it
};
const std::vector<ReduceOpRow>& reduceOps();
const ReduceOpRow* reduceOpByName(const std::string& name);  // functional name; null: unknown
const ReduceOpRow* reduceOpByC10d(const std::string& c10d);  // c10d name; null: unknown
// The combiner of `r` for element type `t`, or null with `why` set ("is not defined for bool tensors", "needs
// integer or bool tensors"): callers raise their own exception type with their own prefix.
const char* reduceCombiner(const ReduceOpRow& r, shlo::DType t, std::string* why);

// A collective.
struct CollectiveRow {
  const char* name;  // the `_c10d_functional` op (overload dropped): "all_reduce"
  const char* form;  // its StableHLO form inside a program ("" when it has none)
  bool reduces;      // takes a reduce_op (a ReduceOpRow)
  bool in_program;   // a compiled graph may keep it inside its program (compile/collectives.cpp lowers it)
};
const std::vector<CollectiveRow>& collectives();
const CollectiveRow* collectiveByName(const std::string& name);  // null: unknown
// The names of the collectives with in_program set.
std::vector<std::string> collectivesInProgram();

}  // namespace torch_tpu::lowering
