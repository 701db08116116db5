// torch.compile: one FX graph (functionalized, core ATen) as ONE storage program.
//
// Python (torch_tpu/_dynamo_backend/_describe.py) flattens an ATen FX graph into a GraphDesc: graph inputs, nodes in
// topological order (the op's schema name; its arguments in schema order, each with its schema kind and name, tensor
// arguments referring to earlier values; the result types from node.meta['val']), graph outputs and input mutations
// (copy_ into a graph input). A CompiledGraph lowers every node with the same rules eager mode uses, through the same
// core (csrc/core): the graph's inputs form a Signature (storages, layouts, storage sharing, donation), the program is
// built once per signature and launched with the inputs' storage buffers. Strided inputs are read inside the program,
// never through the host; input mutations write the storages' new buffers.
//
// Executables come from core::executableFor: the process cache by program text and the disk cache.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/args.h"
#include "core/lru.h"
#include "core/program.h"
#include "core/replicas.h"

namespace torch_tpu::compile {

struct TensorMeta {
  bool defined = false;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> sizes;
  bool cpu = false;  // the value lives on the host in PyTorch's graph (returned to the CPU)
  std::vector<int64_t> strides;  // graph outputs: PyTorch's strides when not contiguous (dense); empty: contiguous
};

struct ArgDesc {
  core::ArgKind kind = core::ArgKind::Other;  // the schema argument's kind
  std::string name;                           // the schema argument's name
  enum class Src { Value, Values, Const } src = Src::Const;
  int value = -1;            // Value: the tensor value's index (-1: None)
  std::vector<int> values;   // Values: tensor value indices (-1: None)
  c10::IValue constant;      // Const: a host value (numbers, lists, strings, dtypes as ScalarType ints; None)
};

struct NodeDesc {
  std::string op;                  // "aten::add.Tensor"
  std::vector<ArgDesc> args;       // schema order, defaults filled in
  std::vector<TensorMeta> results; // one per result value (a Tensor[] result is flattened)
  std::vector<int> result_values;  // value index per result (-1: unused / None)
};

struct GraphDesc {
  std::string name;
  std::vector<TensorMeta> inputs;  // values 0..n-1
  std::vector<NodeDesc> nodes;
  std::vector<int> outputs;        // value index per graph output (-1: None)
  std::vector<TensorMeta> output_meta;
  std::vector<std::pair<int, int>> mutations;  // (input index, value index): the input's new contents
  int num_values = 0;
  bool inference = false;  // an inference graph (no autograd): parameters are expected to stay unchanged
  // Regions (the root graph only): the subgraphs of its higher-order nodes, every level's, numbered as the nodes'
  // subgraph arguments number them. A node "higher_order::invoke_subgraph" (subgraph, operands: Values) calls one;
  // "higher_order::scan" (combine_fn, init, xs, additional_inputs: Values) loops one over dimension 0 of xs. Each
  // subgraph becomes one private function of the program per argument types, lowered once however often it is
  // called (nested_compile_region: the body of a repeated block lowered once).
  std::vector<std::shared_ptr<const GraphDesc>> subgraphs;
};

struct CompileStats {
  int64_t graphs = 0;          // CompiledGraph objects created
  int64_t runs = 0;            // executions
  int64_t signature_hits = 0;  // runs whose input signature had a program already
  int64_t lowerings = 0;       // programs built (one per graph and input signature)
  int64_t compiles = 0;        // XLA compilations
  int64_t memory_hits = 0;     // executables found in the process cache (same program text)
  int64_t disk_hits = 0;       // executables loaded from the disk cache
  int64_t disk_writes = 0;
  double compile_seconds = 0;  // XLA compile (and deserialize) time
  double lower_seconds = 0;    // building programs
  int64_t packed_weights = 0;  // transposed copies of weights made for inference programs (see plan.h)
  int64_t fast_calls = 0;      // runs served by runCached (the C++ graph call of inference graphs), included in runs
  int64_t donated = 0;         // input storage buffers donated to the programs of runs (updated in place)
  int64_t region_functions = 0;  // private functions lowered for subgraphs (once per program and argument types)
  int64_t region_calls = 0;      // their call sites (func.call of invoke_subgraph, loops of scan)
  int64_t program_evictions = 0;  // programs a graph dropped beyond graphProgramLimit() (least recently used)
};
CompileStats compileStats();
void resetCompileStats();
// TORCH_TPU_GRAPH_PROGRAM_CACHE_SIZE: the most programs each compiled graph keeps, one per input signature (default
// 64; 0 = unbounded). Their executables stay in core's bounded cache, so a program dropped here and needed again is
// rebuilt (a lowering) but not recompiled while its executable is still there.
size_t graphProgramLimit();
void setGraphProgramLimit(size_t n);  // tests; takes effect at a graph's next new program
void clearCompileCache();
// The text of the latest program a graph built (tests and benchmarks inspect its functions).
std::string lastProgramText();  // the process cache of executables and packed weights (the disk cache stays)

// What the latest program build of a graph did (for logging).
struct CompileEvent {
  bool happened = false;
  std::string source;  // "compile", "memory", "disk"
  int64_t ops = 0;
  double seconds = 0;
  std::string key;
};

struct GraphProgram;
struct GraphPlan;
struct CollectiveEnv;

class CompiledGraph {
 public:
  explicit CompiledGraph(GraphDesc desc);
  ~CompiledGraph();
  const GraphDesc& desc() const { return desc_; }

  // Runs the graph. Inputs: tpu tensors of any layout (CPU tensors are uploaded). Returns the outputs (undefined
  // tensors for None outputs). On an input signature without a program, the graph is lowered (once per signature);
  // if nodes cannot be lowered nothing runs: `errors` receives (node index, message) for every such node and the
  // result is empty (the caller runs the graph another way). `event` reports a program build.
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs, CompileEvent* event,
                              std::vector<std::pair<int, std::string>>* errors);

  // The steady state of run(), for callers that keep no Python between Dynamo and the launch (the graph call of
  // inference graphs, python/compile_bindings.cpp): when every input is a tpu tensor and the graph already has a
  // program for this call's signature, launches it and fills `results` (undefined tensors for None outputs);
  // otherwise runs nothing and returns false (the caller takes the full path, which builds the program or reports
  // the error). Graphs with collectives inside, and retired graphs, always return false.
  bool runCached(const at::Tensor* const* inputs, size_t n, std::vector<at::Tensor>& results);
  // The graph's runs go another way from now on (its caller replaced it after a lowering error): runCached
  // declines every call.
  void retire() { retired_.store(true, std::memory_order_relaxed); }
  // The programs the graph keeps (one per input signature seen, at most graphProgramLimit()).
  size_t programCount();

  // Benchmarks: runs the steady state `n` times and returns the mean nanoseconds of its stages (signature, program
  // lookup, launch bookkeeping, PJRT execute, output tensors). Requires a program for the inputs' signature.
  std::vector<std::pair<std::string, double>> timeStages(const std::vector<at::Tensor>& inputs, int64_t n);

 private:
  GraphDesc desc_;
  std::unique_ptr<GraphPlan> plan_;
  // Graphs with collectives inside (compile/collectives.h): meets the other ranks of the group the program spans
  // (`main`); returns what the program's cache key adds (the devices and every group's replica groups).
  std::string meet(const core::Signature& sig, std::shared_ptr<core::ReplicaGroup>& main,
                   core::ReplicaGroup::Step& step, CollectiveEnv& coll);

  // The call's signature over tpu inputs (input i is tensor i): cache-key bytes, storages, donation.
  void sign(core::Signature& sig, const at::Tensor* const* inputs, int device) const;
  // Launches gp for the signed call; `given` are the caller's inputs (passthrough outputs).
  std::vector<at::Tensor> launch(const GraphProgram& gp, core::Signature& sig, const at::Tensor* const* given,
                                 int launch_id);
  std::shared_ptr<GraphProgram> cached(const std::string& key);

  std::vector<uint8_t> input_mutated_;           // per input: the graph writes it
  std::atomic<bool> retired_{false};
  std::vector<std::string> collective_groups_;  // the c10d group names its collectives address, in order
  size_t ops_hash_ = 0;                         // of the nodes' op names (ranks check they run the same graph)
  std::mutex mu_;
  core::LruMap<std::shared_ptr<GraphProgram>> programs_;  // by signature key, bounded by graphProgramLimit()
};

}  // namespace torch_tpu::compile
