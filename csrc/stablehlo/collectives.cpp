// See collectives.h. Ops are emitted through Builder::raw with their region and attributes spelled out.
#include "stablehlo/collectives.h"

#include <atomic>
#include <set>

namespace torch_tpu::shlo {

namespace {

[[noreturn]] void fail(const char* op, const std::string& msg) {
  throw BuildError(std::string("stablehlo collectives: ") + op + ": " + msg);
}

std::string scalarType(DType t) { return std::string("tensor<") + mlirName(t) + ">"; }

// "dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>"; every group must have the same size.
std::string denseGroups(const char* op, const ReplicaGroups& groups) {
  if (groups.empty() || groups[0].empty()) fail(op, "empty replica groups");
  const size_t n = groups[0].size();
  std::set<int64_t> seen;
  std::string s = "dense<[";
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].size() != n) fail(op, "replica groups must all have the same size");
    s += g ? ", [" : "[";
    for (size_t i = 0; i < n; ++i) {
      if (!seen.insert(groups[g][i]).second) fail(op, "replica " + std::to_string(groups[g][i]) + " is in two groups");
      if (i) s += ", ";
      s += std::to_string(groups[g][i]);
    }
    s += "]";
  }
  s += "]> : tensor<" + std::to_string(groups.size()) + "x" + std::to_string(n) + "xi64>";
  return s;
}

std::string channelAttr(int64_t channel) {
  if (channel <= 0) return "";
  return ", channel_handle = #stablehlo.channel_handle<handle = " + std::to_string(channel) + ", type = 1>";
}

// A region combining two scalars with `combiner`, with names unique in the module.
std::string combinerRegion(const std::string& combiner, DType t) {
  static std::atomic<int64_t> counter{0};
  const std::string id = std::to_string(counter.fetch_add(1));
  const std::string st = scalarType(t);
  const std::string a = "%cra" + id, c = "%crb" + id, r = "%crr" + id;
  return "({\n    ^bb0(" + a + ": " + st + ", " + c + ": " + st + "):\n      " + r + " = \"" + combiner + "\"(" + a +
         ", " + c + ") : (" + st + ", " + st + ") -> " + st + "\n      \"stablehlo.return\"(" + r + ") : (" + st +
         ") -> ()\n    })";
}

size_t groupSize(const ReplicaGroups& groups) { return groups.empty() ? 0 : groups[0].size(); }

void checkDim(const char* op, const Value& x, int64_t dim) {
  if (dim < 0 || dim >= x.rank()) fail(op, "dimension " + std::to_string(dim) + " out of range for " + x.type.str());
}

}  // namespace

const char* combinerName(ReduceKind kind, DType t) {
  const bool pred = t == DType::Pred;
  switch (kind) {
    case ReduceKind::Sum: return pred ? "stablehlo.or" : "stablehlo.add";
    case ReduceKind::Prod: return pred ? "stablehlo.and" : "stablehlo.multiply";
    case ReduceKind::Max: return pred ? "stablehlo.or" : "stablehlo.maximum";
    case ReduceKind::Min: return pred ? "stablehlo.and" : "stablehlo.minimum";
    case ReduceKind::And:
      if (!pred && !isInteger(t)) fail("combiner", "bitwise AND needs an integer or bool type");
      return "stablehlo.and";
    case ReduceKind::Or:
      if (!pred && !isInteger(t)) fail("combiner", "bitwise OR needs an integer or bool type");
      return "stablehlo.or";
    case ReduceKind::Xor:
      if (!pred && !isInteger(t)) fail("combiner", "bitwise XOR needs an integer or bool type");
      return "stablehlo.xor";
  }
  fail("combiner", "unknown reduction");
}

Value allReduce(Builder& b, Value x, const std::string& combiner, const ReplicaGroups& groups, int64_t channel) {
  const std::string t = x.type.str();
  std::string text = "\"stablehlo.all_reduce\"(" + b.ref(x) + ") " + combinerRegion(combiner, x.dtype()) +
                     " {replica_groups = " + denseGroups("all_reduce", groups) + channelAttr(channel) + "}";
  return b.raw(text, "(" + t + ") -> " + t, x.type);
}

Value allGather(Builder& b, Value x, int64_t dim, const ReplicaGroups& groups, int64_t channel) {
  checkDim("all_gather", x, dim);
  TensorType out = x.type;
  out.shape[static_cast<size_t>(dim)] *= static_cast<int64_t>(groupSize(groups));
  std::string text = "\"stablehlo.all_gather\"(" + b.ref(x) + ") {all_gather_dim = " + std::to_string(dim) +
                     " : i64, replica_groups = " + denseGroups("all_gather", groups) + channelAttr(channel) + "}";
  return b.raw(text, "(" + x.type.str() + ") -> " + out.str(), out);
}

Value reduceScatter(Builder& b, Value x, int64_t dim, const std::string& combiner, const ReplicaGroups& groups,
                    int64_t channel) {
  checkDim("reduce_scatter", x, dim);
  const int64_t n = static_cast<int64_t>(groupSize(groups));
  TensorType out = x.type;
  if (n == 0 || out.shape[static_cast<size_t>(dim)] % n != 0)
    fail("reduce_scatter", "dimension " + std::to_string(dim) + " of " + x.type.str() + " is not divisible by " +
                               std::to_string(n));
  out.shape[static_cast<size_t>(dim)] /= n;
  std::string text = "\"stablehlo.reduce_scatter\"(" + b.ref(x) + ") " + combinerRegion(combiner, x.dtype()) +
                     " {replica_groups = " + denseGroups("reduce_scatter", groups) + ", scatter_dimension = " +
                     std::to_string(dim) + " : i64" + channelAttr(channel) + "}";
  return b.raw(text, "(" + x.type.str() + ") -> " + out.str(), out);
}

Value allToAll(Builder& b, Value x, int64_t split_dim, int64_t concat_dim, const ReplicaGroups& groups,
               int64_t channel) {
  checkDim("all_to_all", x, split_dim);
  checkDim("all_to_all", x, concat_dim);
  const int64_t n = static_cast<int64_t>(groupSize(groups));
  TensorType out = x.type;
  if (n == 0 || out.shape[static_cast<size_t>(split_dim)] % n != 0)
    fail("all_to_all", "dimension " + std::to_string(split_dim) + " of " + x.type.str() + " is not divisible by " +
                           std::to_string(n));
  out.shape[static_cast<size_t>(split_dim)] /= n;
  out.shape[static_cast<size_t>(concat_dim)] *= n;
  std::string text = "\"stablehlo.all_to_all\"(" + b.ref(x) + ") {concat_dimension = " + std::to_string(concat_dim) +
                     " : i64, replica_groups = " + denseGroups("all_to_all", groups) + ", split_count = " +
                     std::to_string(n) + " : i64, split_dimension = " + std::to_string(split_dim) + " : i64" +
                     channelAttr(channel) + "}";
  return b.raw(text, "(" + x.type.str() + ") -> " + out.str(), out);
}

Value collectivePermute(Builder& b, Value x, const std::vector<std::pair<int64_t, int64_t>>& pairs,
                        int64_t channel) {
  if (pairs.empty()) fail("collective_permute", "no source/target pairs");
  std::set<int64_t> sources, targets;
  std::string s = "dense<[";
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (!sources.insert(pairs[i].first).second) fail("collective_permute", "a replica sends twice");
    if (!targets.insert(pairs[i].second).second) fail("collective_permute", "a replica receives twice");
    s += (i ? ", [" : "[") + std::to_string(pairs[i].first) + ", " + std::to_string(pairs[i].second) + "]";
  }
  s += "]> : tensor<" + std::to_string(pairs.size()) + "x2xi64>";
  std::string text = "\"stablehlo.collective_permute\"(" + b.ref(x) + ") {source_target_pairs = " + s +
                     channelAttr(channel) + "}";
  return b.raw(text, "(" + x.type.str() + ") -> " + x.type.str(), x.type);
}

std::string finishReplicated(Builder& b, const std::vector<Value>& results, int num_replicas, int num_partitions) {
  return b.finish(results, nullptr, num_replicas, num_partitions);
}

}  // namespace torch_tpu::shlo
