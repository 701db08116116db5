// Functional collectives (`_c10d_functional::*`, as DTensor, FSDP2 and tensor parallelism emit them) inside a
// compiled graph's program.
//
// A graph whose collectives address groups of the XLA transport (ranks as threads of this process, one device each)
// is ONE program per rank: the program runs over the group's devices as replicas (replica r = rank r's device), each
// collective a StableHLO collective with the replica groups of its process group and a channel id of its own. A
// collective over a subgroup (a mesh dimension) uses the replica groups of every sibling subgroup, which the ranks
// exchange when they meet (core/replicas.h). wait_tensor is the identity: the program's data flow orders everything.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "compile/graph.h"
#include "stablehlo/collectives.h"

namespace torch_tpu::compile {

// `_c10d_functional::<op>` (or the `_c10d_functional_autograd` form of one).
bool isCollectiveOp(const std::string& op);
// The c10d group name a collective node addresses ("" for wait_tensor).
std::string collectiveGroupName(const NodeDesc& n);

struct CollectiveEnv {
  std::map<std::string, shlo::ReplicaGroups> groups;  // per group name, in the program's replica numbering
  int64_t next_channel = 1;
};

// The results of collective node `n` (arguments are earlier values `vals`). Throws lowering::LoweringError for a
// call that cannot run inside a program (uneven all_to_all splits, an unknown reduce op).
std::vector<shlo::Value> lowerCollective(shlo::Builder& b, const NodeDesc& n, const std::vector<shlo::Value>& vals,
                                         CollectiveEnv& env);

}  // namespace torch_tpu::compile
