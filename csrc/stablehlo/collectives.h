// Collective operations for programs spanning several devices (replicas), emitted into a shlo::Builder.
//
// Layer 2 (no torch, no PJRT). Each function appends one StableHLO collective (generic syntax) and returns its
// result. `groups` lists replica ids per group (every replica in exactly one group); `channel` > 0 attaches a
// channel handle (distinct per collective of one program). With a channel handle, all_reduce / all_gather /
// reduce_scatter still address replicas (cross-replica-and-partition mode), but all_to_all and collective_permute
// address partitions: programs over replicas pass channel 0 to those two. finishReplicated() closes the module
// with the replica/partition counts in its attributes.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "stablehlo/builder.h"

namespace torch_tpu::shlo {

using ReplicaGroups = std::vector<std::vector<int64_t>>;

// The combiner of a reduction collective: stablehlo op name applied elementwise ("stablehlo.add",
// "stablehlo.multiply", "stablehlo.maximum", "stablehlo.minimum", "stablehlo.and", "stablehlo.or",
// "stablehlo.xor").
const char* combinerName(ReduceKind kind, DType t);  // And/Or on pred or integers; Sum/Prod/Max/Min on numbers

Value allReduce(Builder& b, Value x, const std::string& combiner, const ReplicaGroups& groups, int64_t channel);
// Concatenates the group's operands along `dim` in group order.
Value allGather(Builder& b, Value x, int64_t dim, const ReplicaGroups& groups, int64_t channel);
// Reduces across the group, then keeps the group-rank-th of `group size` equal slices along `dim`.
Value reduceScatter(Builder& b, Value x, int64_t dim, const std::string& combiner, const ReplicaGroups& groups,
                    int64_t channel);
// Splits along split_dim into group-size blocks, sends block j to the j-th member, concatenates the received
// blocks along concat_dim in group order.
Value allToAll(Builder& b, Value x, int64_t split_dim, int64_t concat_dim, const ReplicaGroups& groups,
               int64_t channel);
// Sends the operand of replica `first` to replica `second` for each pair; replicas that receive nothing get zeros.
Value collectivePermute(Builder& b, Value x, const std::vector<std::pair<int64_t, int64_t>>& pairs,
                        int64_t channel);

// Builder::finish, with mhlo.num_replicas / mhlo.num_partitions set in the module attributes.
std::string finishReplicated(Builder& b, const std::vector<Value>& results, int num_replicas, int num_partitions = 1);

}  // namespace torch_tpu::shlo
