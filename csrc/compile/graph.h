// torch.compile: one FX graph (functionalized, core ATen) as ONE StableHLO program.
//
// Python (torch_tpu/_dynamo_backend.py) flattens an ATen FX graph into a GraphDesc: graph inputs, nodes in
// topological order (the op's schema name, its arguments in schema order with tensor arguments referring to earlier
// values, and the result types from node.meta['val']), graph outputs and input mutations (copy_ into a graph input).
// A CompiledGraph lowers every node with the same lowering rules eager mode uses (lowering::registry()) through a
// graph Context, compiles the program once per input signature (dtypes, shapes, strided layouts and storage sharing
// of the actual input tensors), and runs it with the inputs' storage buffers: strided inputs are read inside the
// program (viewprog::read), never through the host. Input mutations write the storages' new buffers.
//
// Executables are cached per process by program text, and on disk (serialized, keyed by the program text, the
// plugin and its version) when the plugin can serialize them.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "lowering/lowering.h"

namespace torch_tpu::compile {

struct TensorMeta {
  bool defined = false;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> sizes;
  bool cpu = false;  // the value lives on the host in PyTorch's graph (returned to the CPU)
};

struct ArgDesc {
  enum class K { None, Tensor, TensorList, Int, Float, Bool, IntList, FloatList, BoolList, Str, DType, Other };
  K k = K::None;
  int value = -1;            // Tensor: value index
  std::vector<int> values;   // TensorList: value indices (-1 = None)
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<bool> bools;
  std::string s;
  at::ScalarType dtype = at::kFloat;
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
};

// The rule serving `op` in graphs: the op's own rule, else the rule of its in-place form (random ops are registered
// under uniform_, normal_, ... and functionalization gives their functional names), else nullptr.
const lowering::Rule* ruleFor(const std::string& op);

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
  int64_t packed_weights = 0;  // transposed copies of weights made for inference programs (see packedTranspose)
};
CompileStats compileStats();
void resetCompileStats();
void clearCompileCache();  // the process cache of executables and packed weights (the disk cache stays)
void clearPackedWeights();  // the transposed weight copies kept for inference programs
void setCacheDir(const std::string& dir);  // "" disables the disk cache
std::string cacheDir();

// What the latest program build of a graph did (for logging).
struct CompileEvent {
  bool happened = false;
  std::string source;  // "compile", "memory", "disk"
  int64_t ops = 0;
  double seconds = 0;
  std::string key;
};

struct Program;
struct GraphPlan;

class CompiledGraph {
 public:
  explicit CompiledGraph(GraphDesc desc);
  ~CompiledGraph();
  const GraphDesc& desc() const { return desc_; }

  // Runs the graph. Inputs: tpu tensors of any layout (CPU tensors are uploaded). Returns the outputs (undefined
  // tensors for None outputs). `event` reports a program build on a signature miss.
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs, CompileEvent* event = nullptr);

  // Lowers the graph with contiguous inputs without compiling it: returns (node index, message) for every node a
  // rule cannot lower (their results are replaced by zeros so the check continues).
  std::vector<std::pair<int, std::string>> check() const;

  // The program text for contiguous, unaliased inputs (debugging, tests).
  std::string text() const;

 private:
  GraphDesc desc_;
  std::unique_ptr<GraphPlan> plan_;
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Program>> programs_;
};

}  // namespace torch_tpu::compile
