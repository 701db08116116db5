#include "compile/plan.h"

#include <algorithm>
#include <string>

#include "core/ops.h"
#include "core/packed.h"

namespace torch_tpu::compile {

using shlo::Value;
using core::packWeightsEnabled;

namespace {

int64_t numelOf(const TensorMeta& m) {
  int64_t n = 1;
  for (int64_t d : m.sizes) n *= d;
  return n;
}

// A node that swaps the last two dimensions of a value of rank `rank` (2 or 3), leaving the others: t, permute
// [1, 0] / [0, 2, 1], transpose(-2, -1).
bool swapsLastTwo(const NodeDesc& n, int64_t rank) {
  if (n.args.empty() || n.args[0].src != ArgDesc::Src::Value) return false;
  if (n.op == "aten::t") return rank == 2;
  auto constInt = [&](size_t j) { return n.args[j].constant.isInt() ? n.args[j].constant.toInt() : int64_t(-99); };
  if (n.op == "aten::permute" && n.args.size() >= 2 && n.args[1].constant.isIntList()) {
    std::vector<int64_t> want(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i) want[static_cast<size_t>(i)] = i;
    std::swap(want[static_cast<size_t>(rank - 2)], want[static_cast<size_t>(rank - 1)]);
    std::vector<int64_t> got = n.args[1].constant.toIntVector();
    for (int64_t& d : got)
      if (d < 0) d += rank;
    return got == want;
  }
  if (n.op == "aten::transpose.int" && n.args.size() >= 3) {
    int64_t a = constInt(1), c = constInt(2);
    if (a == -99 || c == -99) return false;
    a = a < 0 ? a + rank : a;
    c = c < 0 ? c + rank : c;
    return std::min(a, c) == rank - 2 && std::max(a, c) == rank - 1;
  }
  return false;
}

}  // namespace

// `v` computed into its own buffer. XLA:CPU removes optimization barriers before fusion and folds trivial
// reductions, but does not fuse a reduction into its consumers: v, padded with 1 along a new dimension of 2,
// reduced by product. Exact for every value (x * 1 is x, NaN and -0.0 included; max would lose NaN under XLA:CPU's
// fast min/max).
Value materialized(shlo::Builder& b, Value v) {
  shlo::Shape s = v.shape();
  const int64_t r = static_cast<int64_t>(s.size());
  s.push_back(1);
  std::vector<int64_t> low(r + 1, 0), high(r + 1, 0), interior(r + 1, 0);
  high[r] = 1;
  Value one = b.constant(1.0, v.dtype());
  return b.reduce(b.pad(b.reshape(v, s), one, low, high, interior), {r}, shlo::ReduceKind::Prod);
}

GraphPlan planGraph(const GraphDesc& g) {
  GraphPlan p;
  const int nin = static_cast<int>(g.inputs.size());
  p.pack_transposed.assign(nin, false);
  p.materialize.assign(g.nodes.size(), false);
  const size_t nv = static_cast<size_t>(std::max(g.num_values, nin));
  std::vector<std::vector<std::pair<int, int>>> uses(nv);  // value -> (node, argument)
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const NodeDesc& n = g.nodes[k];
    for (size_t j = 0; j < n.args.size(); ++j) {
      const ArgDesc& a = n.args[j];
      if (a.src == ArgDesc::Src::Value && a.value >= 0 && static_cast<size_t>(a.value) < nv)
        uses[a.value].emplace_back(static_cast<int>(k), static_cast<int>(j));
      if (a.src == ArgDesc::Src::Values)
        for (int v : a.values)
          if (v >= 0 && static_cast<size_t>(v) < nv) uses[v].emplace_back(static_cast<int>(k), static_cast<int>(j));
    }
  }
  std::vector<bool> is_output(nv, false), mutated(nin, false);
  for (int v : g.outputs)
    if (v >= 0 && static_cast<size_t>(v) < nv) is_output[v] = true;
  for (const auto& m : g.mutations) mutated[m.first] = true;

  // Results of transcendental rules (Rule::transcendental) read by several consumers, or by one at least twice as
  // large (a broadcast), are materialized.
  auto transcendental = [](const std::string& op) {
    core::OpRule r = core::ruleFor(op);
    return r.rule && r.variant == core::Variant::Own && r.rule->transcendental;
  };
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const NodeDesc& n = g.nodes[k];
    if (n.results.size() != 1 || n.result_values.size() != 1 || n.result_values[0] < 0 || !n.results[0].defined)
      continue;
    if (!transcendental(n.op)) continue;
    const auto& u = uses[n.result_values[0]];
    int64_t own = numelOf(n.results[0]), widest = 0;
    for (const auto& use : u)
      for (const TensorMeta& r : g.nodes[use.first].results)
        if (r.defined) widest = std::max(widest, numelOf(r));
    p.materialize[k] = u.size() > 1 || widest >= 2 * own;
  }

  // Inputs worth packing: floating weights of an inference graph, neither written nor returned, read only through
  // a transpose of their last two dimensions that feeds products as the operand their rule reads packed
  // (Rule::packed_operand): mm's and addmm's mat2 (nn.Linear after AOTAutograd), _grouped_mm's mat_b (the expert
  // weights of mixture-of-experts layers).
  if (!g.inference || !packWeightsEnabled()) return p;
  for (int i = 0; i < nin; ++i) {
    const TensorMeta& m = g.inputs[i];
    const int64_t rank = static_cast<int64_t>(m.sizes.size());
    if (!m.defined || (rank != 2 && rank != 3) || mutated[i] || is_output[i] || uses[i].empty()) continue;
    if (!c10::isFloatingType(m.dtype) || m.sizes[rank - 2] < 16 || m.sizes[rank - 1] < 16) continue;
    bool ok = true;
    for (const auto& use : uses[i]) {
      const NodeDesc& t = g.nodes[use.first];
      int tv = t.result_values.empty() ? -1 : t.result_values[0];
      if (use.second != 0 || !swapsLastTwo(t, rank) || tv < 0 || is_output[tv] || uses[tv].empty()) {
        ok = false;
        break;
      }
      for (const auto& mm : uses[tv]) {
        core::OpRule r = core::ruleFor(g.nodes[mm.first].op);
        if (!r.rule || r.variant != core::Variant::Own || r.rule->packed_operand != mm.second) ok = false;
      }
      if (!ok) break;
    }
    p.pack_transposed[i] = ok;
  }
  return p;
}

}  // namespace torch_tpu::compile
