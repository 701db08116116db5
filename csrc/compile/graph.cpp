// One FX graph as one storage program: lowering with the eager rules, the signature cache, launch.
#include "compile/graph.h"

#include <ATen/autocast_mode.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "compile/collectives.h"
#include "compile/plan.h"
#include "core/client.h"
#include "core/config.h"
#include "core/dtype.h"
#include "core/executables.h"
#include "core/global_state.h"
#include "core/ops.h"
#include "core/packed.h"
#include "core/program.h"
#include "core/replicas.h"
#include "settings/settings.h"

namespace torch_tpu::compile {

using core::ArgKind;
using lowering::Arg;
using shlo::DType;
using shlo::TensorType;
using shlo::Value;

// ---------------------------------------------------------------------------------------------------------------
// Statistics.

namespace {

std::mutex g_stats_mu;
CompileStats g_stats;
int64_t g_packed_base = 0;  // core::packedWeightsMade() at the last reset
// Counted on every run without the lock (a graph call's steady state takes no lock for its statistics).
std::atomic<int64_t> g_runs{0}, g_signature_hits{0}, g_fast_calls{0}, g_donated{0};

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

CompileStats compileStats() {
  std::lock_guard<std::mutex> g(g_stats_mu);
  CompileStats s = g_stats;
  s.packed_weights = core::packedWeightsMade() - g_packed_base;
  s.runs = g_runs.load(std::memory_order_relaxed);
  s.signature_hits = g_signature_hits.load(std::memory_order_relaxed);
  s.fast_calls = g_fast_calls.load(std::memory_order_relaxed);
  s.donated = g_donated.load(std::memory_order_relaxed);
  return s;
}

namespace {
std::atomic<int64_t> g_graph_program_limit{-1};
}  // namespace

size_t graphProgramLimit() {
  int64_t v = g_graph_program_limit.load(std::memory_order_relaxed);
  if (v < 0) {
    v = settings::integer("TORCH_TPU_GRAPH_PROGRAM_CACHE_SIZE");
    g_graph_program_limit = v;
  }
  return static_cast<size_t>(v);
}

void setGraphProgramLimit(size_t n) { g_graph_program_limit = static_cast<int64_t>(n); }

void resetCompileStats() {
  std::lock_guard<std::mutex> g(g_stats_mu);
  g_stats = CompileStats();
  g_packed_base = core::packedWeightsMade();
  g_runs = 0;
  g_signature_hits = 0;
  g_fast_calls = 0;
  g_donated = 0;
}

namespace {
std::mutex g_text_mu;
std::string g_last_text;
}  // namespace

std::string lastProgramText() {
  std::lock_guard<std::mutex> g(g_text_mu);
  return g_last_text;
}

void clearCompileCache() {
  core::clearExecutables();
  core::clearPackedWeights();
}

// ---------------------------------------------------------------------------------------------------------------
// Programs.

// The program of a graph for one input signature.
struct GraphProgram {
  core::Program prog;
  std::vector<int> fresh_out;    // per fresh result: the graph output it is
  std::vector<bool> fresh_cpu;   // per fresh result: returned to the host
  std::vector<int> passthrough;  // per graph output: the input index returned as is, else -1
  int64_t ops = 0;
};

namespace {

TensorType typeOf(const TensorMeta& m) { return TensorType{toDType(m.dtype), m.sizes}; }

// The arguments of one node. Throws LoweringError for what the rules cannot take.
void buildArgs(lowering::Context& ctx, const NodeDesc& n, const std::vector<Value>& vals) {
  auto valueOf = [&](int v) -> Value {
    if (v < 0) return Value();
    if (v >= static_cast<int>(vals.size()) || !vals[v].valid()) ctx.fail("argument refers to an undefined value");
    return vals[v];
  };
  for (const ArgDesc& d : n.args) {
    Arg a;
    switch (d.src) {
      case ArgDesc::Src::Value:
        a.name = d.name;
        a.kind = d.value < 0 ? Arg::Kind::None : Arg::Kind::Tensor;
        a.tensor = valueOf(d.value);
        break;
      case ArgDesc::Src::Values:
        a.name = d.name;
        a.kind = Arg::Kind::TensorList;
        for (int v : d.values) a.tensors.push_back(valueOf(v));
        break;
      case ArgDesc::Src::Const:
        if (d.kind == ArgKind::ScalarType && d.constant.isInt() &&
            !supportedDType(static_cast<at::ScalarType>(d.constant.toInt())))
          ctx.fail(std::string("unsupported dtype ") + c10::toString(static_cast<at::ScalarType>(d.constant.toInt())));
        a = core::hostArg(ctx.b, d.name, d.kind, d.constant, /*dynamic=*/false);
        break;
    }
    ctx.args.push_back(std::move(a));
  }
}

// ---- regions: subgraphs (invoke_subgraph, scan's combine function) as private functions of the program ----

// The Context of a node inside a region's function: no program state is reachable from there (a function is
// isolated from the program's parameters), so random ops and device-side checks decline; the graph then inlines
// the region (torch_tpu/_dynamo_backend/_partition.py).
class RegionContext final : public lowering::Context {
 public:
  RegionContext(shlo::Builder& b, const std::string& op) : Context(b, op) {}
  Value scalar(size_t i, DType dtype) override {
    const Arg& a = arg(i);
    if (a.kind == Arg::Kind::Tensor && a.tensor.valid()) {
      if (a.tensor.rank() != 0) fail("argument '" + a.name + "' is not a scalar");
      return b.convert(a.tensor, dtype);
    }
    if (a.kind == Arg::Kind::Int) return b.constantInt(a.i, dtype);
    if (a.kind == Arg::Kind::Bool) return b.constantInt(a.b, dtype);
    if ((a.kind == Arg::Kind::Scalar || a.kind == Arg::Kind::Double) && a.scalar.known()) {
      if (a.scalar.kind == lowering::HostScalar::Kind::Int) return b.constantInt(a.scalar.i, dtype);
      if (a.scalar.kind == lowering::HostScalar::Kind::Bool) return b.constantInt(a.scalar.b, dtype);
      if (a.scalar.kind != lowering::HostScalar::Kind::Complex) return b.constant(a.scalar.f, dtype);
    }
    fail("argument '" + a.name + "' is not a number a compiled region can take");
  }
  Value rngState() override { fail("a random op inside a compiled region"); }
  void check(Value, const std::string&, Value, CheckError) override {
    fail("a device-side check inside a compiled region");
  }
};

// The functions of one program: one per (subgraph, argument types), lowered once however often it is called.
struct Regions {
  const GraphDesc& root;  // holds every subgraph (GraphDesc::subgraphs)
  std::map<std::string, std::pair<std::string, std::vector<TensorType>>> funcs;  // key -> (name, result types)
  int64_t calls = 0;
};

int64_t lowerNodes(shlo::Builder& b, core::ProgramBuilder* pb, const GraphDesc& g, const GraphPlan& plan,
                   std::vector<Value>& vals, Regions& regions, std::vector<std::pair<int, std::string>>* errors,
                   CollectiveEnv* coll);

const GraphDesc& subgraphOf(const Regions& r, const NodeDesc& n, const ArgDesc& a) {
  if (a.src != ArgDesc::Src::Const || !a.constant.isInt())
    throw lowering::LoweringError(n.op, "its subgraph argument is not a subgraph index");
  int64_t k = a.constant.toInt();
  if (k < 0 || k >= static_cast<int64_t>(r.root.subgraphs.size()))
    throw lowering::LoweringError(n.op, "subgraph index " + std::to_string(k) + " out of range");
  return *r.root.subgraphs[static_cast<size_t>(k)];
}

// The function of subgraph `k` for arguments of `types` (defined on first use). Returns its name and result types;
// `out_pos` receives, per result, the subgraph output it is (None outputs are not returned).
std::pair<std::string, std::vector<TensorType>> regionFunction(shlo::Builder& b, Regions& r, int64_t k,
                                                               const std::vector<TensorType>& types,
                                                               std::vector<int>* out_pos) {
  const GraphDesc& sub = *r.root.subgraphs[static_cast<size_t>(k)];
  const std::string op = "higher_order::subgraph";
  if (types.size() != sub.inputs.size())
    throw lowering::LoweringError(op, "subgraph " + sub.name + " takes " + std::to_string(sub.inputs.size()) +
                                          " inputs, called with " + std::to_string(types.size()));
  if (!sub.mutations.empty()) throw lowering::LoweringError(op, "subgraph " + sub.name + " mutates its inputs");
  if (out_pos) {
    out_pos->clear();
    for (size_t j = 0; j < sub.outputs.size(); ++j)
      if (sub.outputs[j] >= 0) out_pos->push_back(static_cast<int>(j));
  }
  std::string key = std::to_string(k);
  for (const TensorType& t : types) key += "," + t.str();
  auto it = r.funcs.find(key);
  if (it != r.funcs.end()) return it->second;
  for (size_t i = 0; i < types.size(); ++i)
    if (types[i] != typeOf(sub.inputs[i]))
      throw lowering::LoweringError(op, "input " + std::to_string(i) + " of subgraph " + sub.name + " is " +
                                            types[i].str() + ", it was traced with " + typeOf(sub.inputs[i]).str());
  std::string name = "region" + std::to_string(k) + "_" + std::to_string(r.funcs.size());
  GraphPlan plan = planGraph(sub);
  std::vector<TensorType> res = b.function(name, types, [&](shlo::Builder& fb, const std::vector<Value>& args) {
    std::vector<Value> vals(std::max<size_t>(static_cast<size_t>(sub.num_values), args.size()));
    for (size_t i = 0; i < args.size(); ++i) vals[i] = args[i];
    lowerNodes(fb, nullptr, sub, plan, vals, r, nullptr, nullptr);
    std::vector<Value> outs;
    for (size_t j = 0; j < sub.outputs.size(); ++j) {
      int v = sub.outputs[j];
      if (v < 0) continue;
      if (v >= static_cast<int>(vals.size()) || !vals[v].valid())
        throw lowering::LoweringError(op, "output " + std::to_string(j) + " of subgraph " + sub.name + " has no value");
      Value o = vals[v];
      const TensorMeta& m = sub.output_meta[j];
      if (m.defined) {
        o = fb.convert(o, toDType(m.dtype));
        if (o.shape() != m.sizes) o = fb.reshape(o, m.sizes);
      }
      outs.push_back(o);
    }
    if (outs.empty()) throw lowering::LoweringError(op, "subgraph " + sub.name + " returns nothing");
    return outs;
  });
  auto entry = std::make_pair(name, res);
  r.funcs.emplace(key, entry);
  return entry;
}

std::vector<Value> valuesArg(const NodeDesc& n, const ArgDesc& a, const std::vector<Value>& vals) {
  if (a.src != ArgDesc::Src::Values) throw lowering::LoweringError(n.op, "argument '" + a.name + "' is not a list");
  std::vector<Value> out;
  for (int v : a.values) {
    if (v < 0 || v >= static_cast<int>(vals.size()) || !vals[v].valid())
      throw lowering::LoweringError(n.op, "argument '" + a.name + "' refers to an undefined value");
    out.push_back(vals[v]);
  }
  return out;
}

// invoke_subgraph(subgraph, operands): one func.call of the subgraph's function.
std::vector<Value> lowerInvokeSubgraph(shlo::Builder& b, const NodeDesc& n, const std::vector<Value>& vals,
                                       Regions& r) {
  if (n.args.size() != 2) throw lowering::LoweringError(n.op, "expects (subgraph, operands)");
  subgraphOf(r, n, n.args[0]);
  std::vector<Value> operands = valuesArg(n, n.args[1], vals);
  std::vector<TensorType> types;
  for (const Value& v : operands) types.push_back(v.type);
  std::vector<int> pos;
  auto f = regionFunction(b, r, n.args[0].constant.toInt(), types, &pos);
  std::vector<Value> called = b.call(f.first, operands, f.second);
  r.calls++;
  std::vector<Value> results(n.results.size());
  for (size_t j = 0; j < pos.size(); ++j)
    if (static_cast<size_t>(pos[j]) < results.size()) results[static_cast<size_t>(pos[j])] = called[j];
  return results;
}

// scan(combine, init, xs, additional_inputs) over dimension 0 of xs: a counted stablehlo.while whose body slices
// the xs at the step, calls combine's function on (carry, x slices, additional inputs) -> (next carry, ys) and
// writes the ys into their stacked results. Results: the final carry, then the stacked ys.
std::vector<Value> lowerScan(shlo::Builder& b, const NodeDesc& n, const std::vector<Value>& vals, Regions& r) {
  if (n.args.size() != 4) throw lowering::LoweringError(n.op, "expects (combine_fn, init, xs, additional_inputs)");
  subgraphOf(r, n, n.args[0]);
  std::vector<Value> init = valuesArg(n, n.args[1], vals);
  std::vector<Value> xs = valuesArg(n, n.args[2], vals);
  std::vector<Value> extra = valuesArg(n, n.args[3], vals);
  if (xs.empty()) throw lowering::LoweringError(n.op, "a scan without xs");
  const int64_t len = xs[0].rank() > 0 ? xs[0].shape()[0] : -1;
  std::vector<TensorType> types;
  for (const Value& v : init) types.push_back(v.type);
  for (const Value& x : xs) {
    if (x.rank() == 0 || x.shape()[0] != len) throw lowering::LoweringError(n.op, "xs of different lengths");
    types.push_back(TensorType{x.dtype(), shlo::Shape(x.shape().begin() + 1, x.shape().end())});
  }
  for (const Value& v : extra) types.push_back(v.type);
  std::vector<int> pos;
  auto f = regionFunction(b, r, n.args[0].constant.toInt(), types, &pos);
  const size_t ni = init.size(), nres = n.results.size();
  if (pos.size() != nres || nres < ni)
    throw lowering::LoweringError(n.op, "combine_fn returns " + std::to_string(pos.size()) + " values, the scan has " +
                                            std::to_string(nres) + " results");
  for (size_t j = 0; j < nres; ++j) {
    if (static_cast<size_t>(pos[j]) != j) throw lowering::LoweringError(n.op, "combine_fn returns None");
    if (!n.results[j].defined) throw lowering::LoweringError(n.op, "a scan result without a type");
  }
  // Loop values: carry, stacked ys, xs, additional inputs.
  std::vector<Value> loop(init);
  for (size_t j = ni; j < nres; ++j) loop.push_back(b.zeros(typeOf(n.results[j])));
  for (size_t j = 0; j < ni; ++j)
    if (f.second[j] != init[j].type)
      throw lowering::LoweringError(n.op, "combine_fn's carry " + std::to_string(j) + " is " + f.second[j].str() +
                                              ", init is " + init[j].type.str());
  loop.insert(loop.end(), xs.begin(), xs.end());
  loop.insert(loop.end(), extra.begin(), extra.end());
  const size_t ny = nres - ni;
  std::vector<Value> out = b.forLoop(len, loop, [&](shlo::Builder& lb, Value i, const std::vector<Value>& cur) {
    Value zero = lb.constantInt(0, DType::S32);
    std::vector<Value> args(cur.begin(), cur.begin() + static_cast<std::ptrdiff_t>(ni));
    for (size_t k = 0; k < xs.size(); ++k) {
      const Value& x = cur[ni + ny + k];
      std::vector<Value> starts(static_cast<size_t>(x.rank()), zero);
      starts[0] = i;
      shlo::Shape sizes = x.shape();
      sizes[0] = 1;
      args.push_back(lb.reshape(lb.dynamicSlice(x, starts, sizes), types[ni + k].shape));
    }
    for (size_t k = 0; k < extra.size(); ++k) args.push_back(cur[ni + ny + xs.size() + k]);
    std::vector<Value> res = lb.call(f.first, args, f.second);
    std::vector<Value> next(res.begin(), res.begin() + static_cast<std::ptrdiff_t>(ni));
    for (size_t j = 0; j < ny; ++j) {
      const Value& ys = cur[ni + j];
      shlo::Shape one = ys.shape();
      one[0] = 1;
      Value y = lb.reshape(lb.convert(res[ni + j], ys.dtype()), one);
      std::vector<Value> starts(static_cast<size_t>(ys.rank()), zero);
      starts[0] = i;
      next.push_back(lb.dynamicUpdateSlice(ys, y, starts));
    }
    next.insert(next.end(), cur.begin() + static_cast<std::ptrdiff_t>(ni + ny), cur.end());
    return next;
  });
  r.calls++;
  out.resize(nres);
  return out;
}

// Lowers g's nodes in order over `vals`. `pb`: the program's builder (null inside a region's function). With
// `errors`, every node that cannot be lowered is recorded there and its results replaced by zeros so the build goes
// on; without, the first such node throws. Returns the number of nodes lowered.
int64_t lowerNodes(shlo::Builder& b, core::ProgramBuilder* pb, const GraphDesc& g, const GraphPlan& plan,
                   std::vector<Value>& vals, Regions& regions, std::vector<std::pair<int, std::string>>* errors,
                   CollectiveEnv* coll) {
  int64_t ops = 0;
  for (size_t idx = 0; idx < g.nodes.size(); ++idx) {
    const NodeDesc& n = g.nodes[idx];
    auto record = [&](const std::string& msg) {
      errors->emplace_back(static_cast<int>(idx), msg);
      for (size_t k = 0; k < n.results.size(); ++k)
        if (n.result_values[k] >= 0 && n.results[k].defined) vals[n.result_values[k]] = b.zeros(typeOf(n.results[k]));
    };
    // The node's results: a collective of the program's group, a region, or the node's lowering rule. One handler
    // turns what cannot be lowered into the node's error (the graph is then split or partitioned by the caller).
    auto lowerNode = [&]() -> std::vector<Value> {
      if (isCollectiveOp(n.op)) {
        if (coll == nullptr) throw lowering::LoweringError(n.op, "a collective outside a group of the XLA transport");
        return lowerCollective(b, n, vals, *coll);
      }
      if (n.op == "higher_order::invoke_subgraph") return lowerInvokeSubgraph(b, n, vals, regions);
      if (n.op == "higher_order::scan") return lowerScan(b, n, vals, regions);
      const lowering::Rule* rule = core::ruleFor(n.op).rule;
      if (!rule) throw lowering::LoweringError(n.op, "");
      std::unique_ptr<lowering::Context> owned;
      if (pb) owned = std::make_unique<core::CallContext>(*pb, n.op);
      else owned = std::make_unique<RegionContext>(b, n.op);
      lowering::Context& ctx = *owned;
      buildArgs(ctx, n, vals);
      for (const auto& m : n.results) ctx.outputs.push_back(m.defined ? typeOf(m) : TensorType{});
      if (std::string why = lowering::declineReason(*rule, ctx); !why.empty()) ctx.fail(why);
      return lowering::lower(*rule, ctx);
    };
    std::vector<Value> results;
    if (!errors) {
      try {
        results = lowerNode();
      } catch (const lowering::LoweringError&) {
        throw;
      } catch (const shlo::BuildError& e) {
        throw lowering::LoweringError(n.op, e.what());
      } catch (const c10::Error& e) {
        throw lowering::LoweringError(n.op, e.what_without_backtrace());
      }
    } else {
      try {
        results = lowerNode();
      } catch (const lowering::LoweringError& e) {
        record(e.what());
        continue;
      } catch (const shlo::BuildError& e) {
        record(lowering::noLowering(n.op, e.what()));
        continue;
      } catch (const c10::Error& e) {
        record(lowering::noLowering(n.op, e.what_without_backtrace()));
        continue;
      }
    }
    ops++;
    if (plan.materialize[idx])
      for (auto& r : results)
        if (r.valid() && shlo::isFloat(r.dtype())) r = materialized(b, r);
    for (size_t k = 0; k < n.results.size() && k < results.size(); ++k)
      if (n.result_values[k] >= 0) vals[n.result_values[k]] = results[k];
  }
  return ops;
}

struct BuildResult {
  std::shared_ptr<GraphProgram> prog;
  std::string text;
};

// Lowers the whole graph for one signature (input i is the signature's tensor i). Every node a rule cannot lower is
// recorded in `errors` (its results replaced by zeros so the build goes on; index -1 for the graph as a whole); the
// text is only usable without errors.
// `coll` (graphs with collectives inside): the replica groups of every process group; the program then spans
// `num_replicas` devices.
BuildResult buildProgram(const GraphDesc& g, const GraphPlan& plan, const core::Signature& sig,
                         std::vector<std::pair<int, std::string>>& errors, CollectiveEnv* coll = nullptr,
                         int num_replicas = 1, Regions* regions_out = nullptr) {
  auto gp = std::make_shared<GraphProgram>();
  const int nin = static_cast<int>(g.inputs.size());

  // Which storages the graph writes (input mutations), in order.
  std::vector<int> written;
  for (const auto& m : g.mutations) {
    int slot = sig.tensors[m.first].slot;
    if (std::find(written.begin(), written.end(), slot) == written.end()) written.push_back(slot);
  }
  core::ProgramBuilder pb(sig, written);
  shlo::Builder& b = pb.b;

  std::vector<Value> vals(std::max(g.num_values, nin));
  std::vector<int> slot_readers(sig.storages.size(), 0);
  for (int i = 0; i < nin; ++i) slot_readers[sig.tensors[i].slot]++;
  for (int i = 0; i < nin; ++i) {
    const core::Signature::Entry& in = sig.tensors[i];
    const auto& sizes = g.inputs[i].sizes;
    if (plan.pack_transposed[i] && in.identity && in.t.scalar_type() != at::kComplexHalf && sig.buffers[in.slot] && slot_readers[in.slot] == 1 &&
        sig.bdims[in.slot] == sizes && std::find(written.begin(), written.end(), in.slot) == written.end()) {
      // The program reads the weight's copy with its last two dimensions transposed (row-major [in, out]) and
      // transposes it back: the two transposes cancel and the product reads its right operand in the fast layout.
      std::vector<int64_t> swapped(sizes.begin(), sizes.end()), perm(sizes.size());
      std::iota(perm.begin(), perm.end(), 0);
      std::swap(swapped[swapped.size() - 2], swapped[swapped.size() - 1]);
      std::swap(perm[perm.size() - 2], perm[perm.size() - 1]);
      Value packed = pb.hostParam(TensorType{sig.btype[in.slot], swapped}, i);
      vals[i] = b.transpose(packed, perm);
      continue;
    }
    vals[i] = pb.read(i);
  }
  Regions regions{g};
  gp->ops += lowerNodes(b, &pb, g, plan, vals, regions, &errors, coll);
  if (regions_out) {
    regions_out->funcs = regions.funcs;
    regions_out->calls = regions.calls;
  }
  if (!errors.empty()) return BuildResult{gp, ""};

  // Outputs: the written storages' new buffers (input mutations), then the computed graph outputs.
  for (const auto& m : g.mutations) {
    if (!vals[m.second].valid()) {
      errors.emplace_back(-1, "mutation of input " + std::to_string(m.first) + " has no value");
      return BuildResult{gp, ""};
    }
    pb.write(m.first, vals[m.second]);
  }
  std::vector<Value> fresh;
  std::vector<core::Program::Result> fresh_types;
  gp->passthrough.assign(g.outputs.size(), -1);
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    int v = g.outputs[k];
    if (v < 0) continue;
    if (v < nin) {  // an input returned as is (after its mutation, if any: the storage has the new buffer)
      gp->passthrough[k] = v;
      continue;
    }
    if (!vals[v].valid()) {
      errors.emplace_back(-1, "graph output " + std::to_string(k) + " has no value");
      return BuildResult{gp, ""};
    }
    const TensorMeta& m = g.output_meta[k];
    Value r = vals[v];
    if (m.defined) {
      r = core::toStorage(b, r, m.dtype);  // complex32 results are stored packed (core/program.h)
      if (r.shape() != m.sizes) r = b.reshape(r, m.sizes);
    }
    core::Program::Result rt{m.defined ? m.dtype : toScalarType(r.dtype()), r.shape()};
    if (m.defined && !m.cpu && m.strides.size() == m.sizes.size() && m.sizes.size() > 1) {
      rt.strides = m.strides;  // stored in PyTorch's memory order, as eager stores it
      r = b.transpose(r, core::memoryOrder(m.strides));
    }
    fresh.push_back(r);
    fresh_types.push_back(std::move(rt));
    gp->fresh_out.push_back(static_cast<int>(k));
    gp->fresh_cpu.push_back(m.cpu);
  }
  BuildResult res;
  res.text = pb.finish(fresh, std::move(fresh_types), gp->prog, num_replicas);
  res.prog = gp;
  return res;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------

CompiledGraph::CompiledGraph(GraphDesc desc)
    : desc_(std::move(desc)), plan_(std::make_unique<GraphPlan>(planGraph(desc_))) {
  input_mutated_.assign(desc_.inputs.size(), 0);
  for (const auto& m : desc_.mutations) input_mutated_[static_cast<size_t>(m.first)] = 1;
  std::string ops;
  for (const NodeDesc& n : desc_.nodes) ops += n.op + ";";
  ops_hash_ = std::hash<std::string>{}(ops);
  for (const NodeDesc& n : desc_.nodes) {
    if (!isCollectiveOp(n.op)) continue;
    std::string name = collectiveGroupName(n);
    if (!name.empty() && std::find(collective_groups_.begin(), collective_groups_.end(), name) == collective_groups_.end())
      collective_groups_.push_back(name);
  }
  std::lock_guard<std::mutex> g(g_stats_mu);
  g_stats.graphs++;
}

CompiledGraph::~CompiledGraph() = default;

namespace {

std::string joinInts(const std::vector<int>& v, char sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? std::string(1, sep) : "") + std::to_string(v[i]);
  return s;
}

std::vector<int> splitInts(const std::string& s, char sep) {
  std::vector<int> v;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(sep, pos);
    if (end == std::string::npos) end = s.size();
    if (end > pos) v.push_back(std::stoi(s.substr(pos, end - pos)));
    pos = end + 1;
  }
  return v;
}

std::vector<std::string> splitStrings(const std::string& s, char sep) {
  std::vector<std::string> v;
  size_t pos = 0;
  while (true) {
    size_t end = s.find(sep, pos);
    v.push_back(s.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return v;
}

}  // namespace

// A group of the graph's collectives cannot run them inside a program (the graph was compiled for another group
// of the same name: dynamo's guards do not see process groups).
struct NotReplicated : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string CompiledGraph::meet(const core::Signature& sig, std::shared_ptr<core::ReplicaGroup>& main,
                                core::ReplicaGroup::Step& step, CollectiveEnv& coll) {
  const GraphDesc& g = desc_;
  // The calling rank's side of every group the graph's collectives address; the program runs over the largest,
  // which must contain the others (a mesh and its dimensions).
  std::vector<std::shared_ptr<core::ReplicaGroup>> groups;
  for (const std::string& name : collective_groups_) {
    auto rg = core::resolveReplicaGroup(name);
    if (rg == nullptr)
      throw NotReplicated("process group '" + name +
                          "' cannot run collectives inside a program (its tpu backend is not tpu_dist with the XLA "
                          "transport)");
    groups.push_back(rg);
    if (!main || rg->size() > main->size()) main = rg;
  }
  const std::vector<int>& md = main->devices();
  TORCH_CHECK(md[static_cast<size_t>(main->rank())] == sig.device, "tpu compiled graph '", g.name, "': this rank runs on tpu:",
              md[static_cast<size_t>(main->rank())], " in its process group, its inputs are on tpu:", sig.device);
  std::string info;
  for (size_t k = 0; k < groups.size(); ++k) {
    for (int d : groups[k]->devices())
      TORCH_CHECK(std::find(md.begin(), md.end(), d) != md.end(), "tpu compiled graph '", g.name,
                  "': its collectives address process groups that are not subgroups of one group ('",
                  collective_groups_[k], "' has tpu:", d, ")");
    info += (k ? ";" : "") + joinInts(groups[k]->devices(), ',');
  }
  // Every rank must run the same program: the graph's ops and the signature decide it (neither holds the device;
  // the graph's name does not take part, ranks may have compiled the graph separately).
  const std::string what = "compiled graph " + g.name;
  std::ostringstream os;
  os << "compiled graph (" << g.inputs.size() << " inputs, " << g.nodes.size() << " ops " << std::hex
     << ops_hash_ << ", signature " << std::hash<std::string>{}(sig.key) << ")";
  step = main->meet(what, os.str(), info);

  // The replica groups of each process group: the distinct member lists of all ranks (siblings of a mesh dimension
  // included), in the program's replica numbering (a rank's position in the main group).
  std::string key = "|replicas " + joinInts(md, ',');
  for (size_t k = 0; k < groups.size(); ++k) {
    shlo::ReplicaGroups rg;
    std::vector<int> seen(md.size(), 0);
    for (const std::string& rinfo : step.infos) {
      std::vector<std::string> parts = splitStrings(rinfo, ';');
      TORCH_CHECK(parts.size() == groups.size(), "tpu compiled graph '", g.name, "': ranks disagree on its groups");
      std::vector<int64_t> members;
      for (int d : splitInts(parts[k], ','))
        members.push_back(std::find(md.begin(), md.end(), d) - md.begin());
      if (std::find(rg.begin(), rg.end(), members) != rg.end()) continue;
      for (int64_t m : members) seen[static_cast<size_t>(m)]++;
      rg.push_back(members);
    }
    for (size_t r = 0; r < md.size(); ++r)
      TORCH_CHECK(seen[r] == 1 && rg[0].size() == rg.back().size(), "tpu compiled graph '", g.name,
                  "': process group '", collective_groups_[k], "' and its siblings do not partition the ranks of ",
                  "the program's group");
    key += "|";
    for (const auto& members : rg) {
      key += "{";
      for (int64_t m : members) key += std::to_string(m) + ",";
      key += "}";
    }
    coll.groups[collective_groups_[k]] = std::move(rg);
  }
  return key;
}

std::vector<at::Tensor> CompiledGraph::run(const std::vector<at::Tensor>& given, CompileEvent* event,
                                           std::vector<std::pair<int, std::string>>* errors) {
  const GraphDesc& g = desc_;
  const size_t nin = g.inputs.size();
  TORCH_CHECK(given.size() == nin, "tpu compiled graph '", g.name, "' expects ", nin, " inputs, got ", given.size());

  // 1. The signature: device, storages, layouts.
  int device = -1;
  for (const auto& t : given)
    if (t.defined() && t.is_privateuseone()) {
      device = t.device().index();
      break;
    }
  if (device < 0) device = currentDevice();
  std::vector<at::Tensor> inputs;
  inputs.reserve(nin);
  for (size_t i = 0; i < nin; ++i) {
    const at::Tensor& t = given[i];
    TORCH_CHECK(t.defined(), "tpu compiled graph '", g.name, "': input ", i, " is undefined");
    TORCH_CHECK(t.scalar_type() == g.inputs[i].dtype && t.sizes() == c10::IntArrayRef(g.inputs[i].sizes),
                "tpu compiled graph '", g.name, "': input ", i, " has type ", t.scalar_type(), t.sizes(),
                ", the graph was traced with ", g.inputs[i].dtype, c10::IntArrayRef(g.inputs[i].sizes));
    if (t.is_privateuseone()) {
      inputs.push_back(t);
    } else {
      // A host tensor (a constant, a CPU scalar): uploaded for this call.
      inputs.push_back(t.to(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device))));
    }
  }
  core::Signature sig;
  std::vector<const at::Tensor*> ptrs(nin);
  for (size_t i = 0; i < nin; ++i) ptrs[i] = &inputs[i];
  sign(sig, ptrs.data(), device);

  // 2. Graphs with collectives inside: the ranks meet, and the program spans their devices.
  std::shared_ptr<core::ReplicaGroup> main;
  core::ReplicaGroup::Step step;
  CollectiveEnv coll;
  std::string prog_key = sig.key;
  if (!collective_groups_.empty()) {
    try {
      prog_key += meet(sig, main, step, coll);
    } catch (const NotReplicated& e) {
      // The caller splits the graph at its collectives (they run through their process group).
      TORCH_CHECK(errors != nullptr, "tpu compiled graph '", g.name, "': ", e.what());
      for (size_t i = 0; i < g.nodes.size(); ++i)
        if (isCollectiveOp(g.nodes[i].op)) errors->emplace_back(static_cast<int>(i), e.what());
      return {};
    }
  }

  // 3. The program for this signature.
  std::shared_ptr<GraphProgram> gp = cached(prog_key);
  g_runs.fetch_add(1, std::memory_order_relaxed);
  if (gp) g_signature_hits.fetch_add(1, std::memory_order_relaxed);
  if (!gp) {
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(sig.device)));
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::pair<int, std::string>> errs;
    Regions regions{g};
    BuildResult br = buildProgram(g, *plan_, sig, errs, main ? &coll : nullptr, main ? main->size() : 1, &regions);
    double lower_s = secondsSince(t0);
    {
      std::lock_guard<std::mutex> lk(g_stats_mu);
      g_stats.lowerings++;
      g_stats.lower_seconds += lower_s;
      if (errs.empty()) {
        g_stats.region_functions += static_cast<int64_t>(regions.funcs.size());
        g_stats.region_calls += regions.calls;
      }
    }
    if (errs.empty()) {
      std::lock_guard<std::mutex> lk(g_text_mu);
      g_last_text = br.text;
    }
    if (!errs.empty()) {
      TORCH_CHECK(errors != nullptr, "tpu compiled graph '", g.name, "': ", errs.front().second);
      *errors = std::move(errs);
      return {};
    }
    core::ExecutableLookup ex;
    if (main) {
      runtime::DeviceAssignment da;
      da.num_replicas = main->size();
      da.devices = main->devices();
      ex = core::executableFor(br.text, da);
    } else {
      ex = core::executableFor(br.text);
    }
    br.prog->prog.exe = ex.exe;
    {
      std::lock_guard<std::mutex> lk(g_stats_mu);
      switch (ex.source) {
        case core::ExecutableLookup::Source::Memory: g_stats.memory_hits++; break;
        case core::ExecutableLookup::Source::Disk: g_stats.disk_hits++; break;
        case core::ExecutableLookup::Source::Compiled: g_stats.compiles++; break;
      }
      if (ex.disk_written) g_stats.disk_writes++;
      g_stats.compile_seconds += ex.seconds;
    }
    if (event) {
      event->happened = true;
      event->ops = br.prog->ops;
      event->source = ex.source == core::ExecutableLookup::Source::Memory ? "memory"
                      : ex.source == core::ExecutableLookup::Source::Disk ? "disk"
                                                                           : "compile";
      event->seconds = ex.seconds + lower_s;
      event->key = ex.disk_key;
    }
    gp = br.prog;
    std::lock_guard<std::mutex> lk(mu_);
    if (programs_.find(prog_key) == nullptr) {  // another thread may have built it meanwhile: the first one stays
      const int64_t before = programs_.evictions();
      programs_.insert(prog_key, gp, graphProgramLimit());
      if (const int64_t dropped = programs_.evictions() - before) {
        std::lock_guard<std::mutex> sl(g_stats_mu);
        g_stats.program_evictions += dropped;
      }
    }
  }

  // 4. Launch (a program over several devices: with the launch id of the ranks' meeting).
  std::vector<const at::Tensor*> given_ptrs(nin);
  for (size_t i = 0; i < nin; ++i) given_ptrs[i] = &given[i];
  std::vector<at::Tensor> results = launch(*gp, sig, given_ptrs.data(), main ? step.launch_id : 0);
  // Host inputs were uploaded for this call: their mutations are copied back.
  for (const auto& m : g.mutations)
    if (!given[m.first].is_privateuseone()) given[m.first].copy_(inputs[m.first]);
  return results;
}

void CompiledGraph::sign(core::Signature& sig, const at::Tensor* const* inputs, int device) const {
  const size_t nin = desc_.inputs.size();
  sig.key.reserve(64 + nin * 24);
  // The graph's input mutations (a static KV cache's index_copy_, running statistics) update their storages in
  // place: a written storage nobody else holds is donated to the program whatever its size. Otherwise XLA copies
  // the whole buffer into the program's new output on every call before updating a few elements of it.
  sig.donate_any_size = true;
  // torch's settings the program and its result types depend on (core/global_state.h), and autocast, under which the
  // graph's casts were traced
  core::putGlobalStateKey(sig.key);
  core::put<uint8_t>(sig.key, at::autocast::is_autocast_enabled(c10::DeviceType::PrivateUse1));
  core::put<int8_t>(sig.key, static_cast<int8_t>(at::autocast::get_autocast_dtype(c10::DeviceType::PrivateUse1)));
  for (size_t i = 0; i < nin; ++i) sig.add(*inputs[i], input_mutated_[i] != 0);
  sig.seal();
  // A graph without tensor inputs (only creation ops, e.g. a rotary-embedding grid built from sizes) runs on the
  // current device.
  if (sig.device < 0) sig.device = device;
}

std::shared_ptr<GraphProgram> CompiledGraph::cached(const std::string& key) {
  std::lock_guard<std::mutex> lk(mu_);
  std::shared_ptr<GraphProgram>* p = programs_.find(key);
  return p == nullptr ? nullptr : *p;
}

size_t CompiledGraph::programCount() {
  std::lock_guard<std::mutex> lk(mu_);
  return programs_.size();
}

std::vector<at::Tensor> CompiledGraph::launch(const GraphProgram& gp, core::Signature& sig,
                                              const at::Tensor* const* given, int launch_id) {
  const GraphDesc& g = desc_;
  // Host parameters are packed weights (the input index).
  auto host = [&](const core::Param& p) -> runtime::BufferPtr {
    return core::packedTranspose(sig.tensors[p.index].t, sig.buffers[sig.tensors[p.index].slot]);
  };
  std::string ops;
  if (runtime::launchTraceActive()) ops = std::to_string(gp.ops) + " ops";  // for a profiler
  int64_t donated = 0;
  for (uint8_t d : sig.donatable) donated += d;
  if (donated) g_donated.fetch_add(donated, std::memory_order_relaxed);
  core::LaunchOptions label;  // named by core's launch (core/launch.h), as every launch is
  label.kind = "compiled";
  label.name = &g.name;
  label.detail = &ops;
  std::vector<at::Tensor> fresh = gp.prog.launch(sig, host, std::nullopt, launch_id, label);
  std::vector<at::Tensor> results(g.outputs.size());
  for (size_t k = 0; k < g.outputs.size(); ++k)
    if (gp.passthrough[k] >= 0) results[k] = *given[gp.passthrough[k]];
  for (size_t j = 0; j < fresh.size(); ++j)
    results[gp.fresh_out[j]] = gp.fresh_cpu[j] ? fresh[j].cpu() : std::move(fresh[j]);
  return results;
}

namespace {

// The signature of the current graph call on this thread, reused from call to call (its capacity kept; emptied
// after each call, so no tensor outlives the call). A call nested in another's launch gets a fresh one.
class SignatureScope {
 public:
  SignatureScope() {
    thread_local core::Signature reused;
    thread_local bool busy = false;
    busy_ = &busy;
    if (!busy) {
      busy = true;
      sig_ = &reused;
      mine_ = true;
    } else {
      own_ = std::make_unique<core::Signature>();
      sig_ = own_.get();
    }
  }
  ~SignatureScope() {
    sig_->clear();
    if (mine_) *busy_ = false;
  }
  core::Signature& get() { return *sig_; }

 private:
  core::Signature* sig_ = nullptr;
  std::unique_ptr<core::Signature> own_;
  bool* busy_ = nullptr;
  bool mine_ = false;
};

}  // namespace

bool CompiledGraph::runCached(const at::Tensor* const* inputs, size_t n, std::vector<at::Tensor>& results) {
  if (n != desc_.inputs.size() || !collective_groups_.empty() || retired_.load(std::memory_order_relaxed))
    return false;
  for (size_t i = 0; i < n; ++i)
    if (!inputs[i]->defined() || !inputs[i]->is_privateuseone()) return false;
  SignatureScope scope;
  core::Signature& sig = scope.get();
  sign(sig, inputs, n ? -1 : currentDevice());
  std::shared_ptr<GraphProgram> gp = cached(sig.key);
  if (!gp) return false;
  g_runs.fetch_add(1, std::memory_order_relaxed);
  g_signature_hits.fetch_add(1, std::memory_order_relaxed);
  g_fast_calls.fetch_add(1, std::memory_order_relaxed);
  results = launch(*gp, sig, inputs, 0);
  return true;
}

std::vector<std::pair<std::string, double>> CompiledGraph::timeStages(const std::vector<at::Tensor>& inputs,
                                                                      int64_t n) {
  using clock = std::chrono::steady_clock;
  const size_t nin = inputs.size();
  TORCH_CHECK(nin == desc_.inputs.size() && collective_groups_.empty(), "tpu compiled graph '", desc_.name,
              "': _time_stages needs the graph's inputs and no collectives");
  std::vector<const at::Tensor*> ptrs(nin);
  for (size_t i = 0; i < nin; ++i) ptrs[i] = &inputs[i];
  double sign_ns = 0, lookup_ns = 0, launch_ns = 0;
  runtime::startLaunchTrace();
  for (int64_t it = 0; it < n; ++it) {
    SignatureScope scope;
    core::Signature& sig = scope.get();
    auto t0 = clock::now();
    sign(sig, ptrs.data(), -1);
    auto t1 = clock::now();
    std::shared_ptr<GraphProgram> gp = cached(sig.key);
    TORCH_CHECK(gp != nullptr, "tpu compiled graph '", desc_.name, "': no program for these inputs yet");
    auto t2 = clock::now();
    std::vector<at::Tensor> results = launch(*gp, sig, ptrs.data(), 0);
    auto t3 = clock::now();
    sign_ns += std::chrono::duration<double, std::nano>(t1 - t0).count();
    lookup_ns += std::chrono::duration<double, std::nano>(t2 - t1).count();
    launch_ns += std::chrono::duration<double, std::nano>(t3 - t2).count();
  }
  std::vector<runtime::LaunchRecord> recs = runtime::stopLaunchTrace();
  double exec_ns = 0;
  for (const auto& r : recs) exec_ns += static_cast<double>(r.queued_ns - r.launch_ns);
  const double k = static_cast<double>(std::max<int64_t>(n, 1));
  return {{"signature", sign_ns / k},
          {"program lookup", lookup_ns / k},
          {"launch bookkeeping and output tensors", (launch_ns - exec_ns) / k},
          {"PJRT execute (traced)", exec_ns / k}};
}

}  // namespace torch_tpu::compile
