#include "compile/collectives.h"

#include "lowering/collectives.h"
#include "lowering/lowering.h"

namespace torch_tpu::compile {

namespace {

const std::string kPrefix = "_c10d_functional::";
const std::string kAutogradPrefix = "_c10d_functional_autograd::";

// "all_reduce" for "_c10d_functional::all_reduce" and its overloads.
std::string baseName(const std::string& op) {
  std::string s;
  if (op.compare(0, kPrefix.size(), kPrefix) == 0) s = op.substr(kPrefix.size());
  else if (op.compare(0, kAutogradPrefix.size(), kAutogradPrefix) == 0) s = op.substr(kAutogradPrefix.size());
  return s.substr(0, s.find('.'));
}

[[noreturn]] void fail(const NodeDesc& n, const std::string& why) {
  throw lowering::LoweringError(n.op, why);
}

const ArgDesc& arg(const NodeDesc& n, const char* name) {
  for (const ArgDesc& a : n.args)
    if (a.name == name) return a;
  fail(n, std::string("missing argument ") + name);
}

shlo::Value tensorArg(const NodeDesc& n, const char* name, const std::vector<shlo::Value>& vals) {
  const ArgDesc& a = arg(n, name);
  if (a.src != ArgDesc::Src::Value || a.value < 0 || a.value >= static_cast<int>(vals.size()) || !vals[a.value].valid())
    fail(n, std::string("argument ") + name + " is not a tensor value");
  return vals[a.value];
}

std::vector<shlo::Value> tensorListArg(const NodeDesc& n, const char* name, const std::vector<shlo::Value>& vals) {
  const ArgDesc& a = arg(n, name);
  if (a.src != ArgDesc::Src::Values) fail(n, std::string("argument ") + name + " is not a tensor list");
  std::vector<shlo::Value> out;
  for (int v : a.values) {
    if (v < 0 || v >= static_cast<int>(vals.size()) || !vals[v].valid()) fail(n, "undefined tensor in a list");
    out.push_back(vals[v]);
  }
  return out;
}

int64_t intArg(const NodeDesc& n, const char* name) {
  const ArgDesc& a = arg(n, name);
  if (a.src != ArgDesc::Src::Const || !a.constant.isInt()) fail(n, std::string("argument ") + name + " is not an int");
  return a.constant.toInt();
}

std::string strArg(const NodeDesc& n, const char* name) {
  const ArgDesc& a = arg(n, name);
  if (a.src != ArgDesc::Src::Const || !a.constant.isString())
    fail(n, std::string("argument ") + name + " is not a string");
  return a.constant.toStringRef();
}

std::vector<int64_t> intsArg(const NodeDesc& n, const char* name) {
  const ArgDesc& a = arg(n, name);
  if (a.src != ArgDesc::Src::Const) fail(n, std::string("argument ") + name + " is not constant");
  if (a.constant.isNone()) return {};
  if (!a.constant.isIntList()) fail(n, std::string("argument ") + name + " is not an int list");
  return a.constant.toIntVector();
}

// How a functional collective's reduce_op runs: the combiner, then a division by the group size for "avg".
struct Reduction {
  std::string combiner;
  bool avg = false;
};

Reduction reduction(const NodeDesc& n, const std::string& op, shlo::DType t) {
  const lowering::ReduceOpRow* row = lowering::reduceOpByName(op);
  if (row == nullptr || !row->in_program) fail(n, "reduce_op '" + op + "' cannot run inside a program");
  std::string why;
  const char* combiner = lowering::reduceCombiner(*row, t, &why);
  if (combiner == nullptr) fail(n, std::string(row->bitwise ? "bitwise " : "") + "reduce_op " + op + " " + why);
  return Reduction{combiner, row->avg};
}

const shlo::ReplicaGroups& groupsOf(const NodeDesc& n, const CollectiveEnv& env) {
  auto it = env.groups.find(collectiveGroupName(n));
  if (it == env.groups.end()) fail(n, "group '" + collectiveGroupName(n) + "' has no replica groups");
  return it->second;
}

int64_t groupSize(const shlo::ReplicaGroups& g) { return g.empty() ? 0 : static_cast<int64_t>(g[0].size()); }

// Collectives work on tensors of rank >= 1 along dimension 0: a 0-d operand becomes [1].
shlo::Value atLeast1d(shlo::Builder& b, shlo::Value x) { return x.shape().empty() ? b.reshape(x, {1}) : x; }

shlo::Value allReduceOne(shlo::Builder& b, const NodeDesc& n, shlo::Value x, const std::string& op,
                         const shlo::ReplicaGroups& g, CollectiveEnv& env) {
  Reduction r = reduction(n, op, x.dtype());
  shlo::Value y = shlo::allReduce(b, x, r.combiner, g, env.next_channel++);
  if (r.avg) y = b.div(y, b.scalarLike(static_cast<double>(groupSize(g)), y));
  return y;
}

shlo::Value allGatherOne(shlo::Builder& b, const NodeDesc& n, shlo::Value x, int64_t group_size,
                         const shlo::ReplicaGroups& g, CollectiveEnv& env) {
  if (group_size != groupSize(g))
    fail(n, "group_size " + std::to_string(group_size) + " does not match the group (" +
                std::to_string(groupSize(g)) + " ranks)");
  return shlo::allGather(b, atLeast1d(b, x), 0, g, env.next_channel++);
}

shlo::Value reduceScatterOne(shlo::Builder& b, const NodeDesc& n, shlo::Value x, const std::string& op,
                             int64_t group_size, const shlo::ReplicaGroups& g, CollectiveEnv& env) {
  if (group_size != groupSize(g))
    fail(n, "group_size " + std::to_string(group_size) + " does not match the group (" +
                std::to_string(groupSize(g)) + " ranks)");
  if (x.shape().empty() || x.shape()[0] % group_size != 0)
    fail(n, "dimension 0 of " + x.type.str() + " is not divisible by the group size");
  Reduction r = reduction(n, op, x.dtype());
  shlo::Value y = shlo::reduceScatter(b, x, 0, r.combiner, g, env.next_channel++);
  if (r.avg) y = b.div(y, b.scalarLike(static_cast<double>(group_size), y));
  return y;
}

}  // namespace

bool isCollectiveOp(const std::string& op) {
  return op.compare(0, kPrefix.size(), kPrefix) == 0 || op.compare(0, kAutogradPrefix.size(), kAutogradPrefix) == 0;
}

std::string collectiveGroupName(const NodeDesc& n) {
  for (const ArgDesc& a : n.args)
    if (a.name == "group_name" && a.src == ArgDesc::Src::Const && a.constant.isString()) return a.constant.toStringRef();
  return "";
}

std::vector<shlo::Value> lowerCollective(shlo::Builder& b, const NodeDesc& n, const std::vector<shlo::Value>& vals,
                                         CollectiveEnv& env) {
  const std::string op = baseName(n.op);
  const lowering::CollectiveRow* row = lowering::collectiveByName(op);
  if (row == nullptr || !row->in_program) fail(n, "this collective cannot run inside a program");
  if (op == "wait_tensor") return {tensorArg(n, "tensor", vals)};
  const shlo::ReplicaGroups& g = groupsOf(n, env);
  const int64_t size = groupSize(g);
  if (op == "all_reduce") return {allReduceOne(b, n, tensorArg(n, "input", vals), strArg(n, "reduce_op"), g, env)};
  if (op == "all_reduce_coalesced") {
    std::vector<shlo::Value> out;
    for (shlo::Value x : tensorListArg(n, "inputs", vals)) out.push_back(allReduceOne(b, n, x, strArg(n, "reduce_op"), g, env));
    return out;
  }
  if (op == "all_gather_into_tensor")
    return {allGatherOne(b, n, tensorArg(n, "input", vals), intArg(n, "group_size"), g, env)};
  if (op == "all_gather_into_tensor_coalesced") {
    std::vector<shlo::Value> out;
    for (shlo::Value x : tensorListArg(n, "inputs", vals)) out.push_back(allGatherOne(b, n, x, intArg(n, "group_size"), g, env));
    return out;
  }
  if (op == "reduce_scatter_tensor")
    return {reduceScatterOne(b, n, tensorArg(n, "input", vals), strArg(n, "reduce_op"), intArg(n, "group_size"), g,
                             env)};
  if (op == "reduce_scatter_tensor_coalesced") {
    std::vector<shlo::Value> out;
    for (shlo::Value x : tensorListArg(n, "inputs", vals))
      out.push_back(reduceScatterOne(b, n, x, strArg(n, "reduce_op"), intArg(n, "group_size"), g, env));
    return out;
  }
  if (op == "all_to_all_single") {
    shlo::Value x = tensorArg(n, "input", vals);
    if (x.shape().empty()) fail(n, "a 0-d input");
    const int64_t rows = x.shape()[0];
    if (rows % size != 0) fail(n, "dimension 0 (" + std::to_string(rows) + ") is not divisible by the group size");
    for (const char* which : {"output_split_sizes", "input_split_sizes"})
      for (int64_t s : intsArg(n, which))
        if (s != rows / size) fail(n, "uneven split sizes run through the process group, not inside a program");
    // Programs over replicas address all_to_all without a channel (see stablehlo/collectives.h).
    return {shlo::allToAll(b, x, 0, 0, g, 0)};
  }
  if (op == "broadcast") {
    shlo::Value x = tensorArg(n, "input", vals);
    const int64_t src = intArg(n, "src");
    if (src < 0 || src >= size) fail(n, "src " + std::to_string(src) + " is not a rank of the group");
    // Every rank gathers every rank's value and keeps the root's: exact for every dtype.
    shlo::Shape one = x.shape();
    one.insert(one.begin(), 1);
    shlo::Value all = shlo::allGather(b, b.reshape(x, one), 0, g, env.next_channel++);
    return {b.reshape(b.sliceInDim(all, src, src + 1, 1, 0), x.shape())};
  }
  fail(n, "this collective cannot run inside a program");
}

}  // namespace torch_tpu::compile
