// One FX graph as one StableHLO program: lowering with the eager rules, the signature cache, launch.
#include "compile/graph.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include <unordered_set>

#include "eager/generator.h"
#include "eager/scalars.h"
#include "eager/storage.h"
#include "eager/viewprog.h"

namespace torch_tpu::compile {

using lowering::Arg;
using lowering::HostScalar;
using shlo::DType;
using shlo::TensorType;
using shlo::Value;

// ---------------------------------------------------------------------------------------------------------------
// Rules.

const lowering::Rule* ruleFor(const std::string& op) {
  const auto& reg = lowering::registry();
  if (const lowering::Rule* r = reg.find(op)) return r;
  // Functional names of ops whose rules are registered in their in-place form.
  static const std::unordered_map<std::string, std::string> kAliases = {
      {"aten::normal_functional", "aten::normal_"},
      {"aten::bernoulli.p", "aten::bernoulli_.float"},
  };
  auto a = kAliases.find(op);
  if (a != kAliases.end()) return reg.find(a->second);
  std::string base = op, overload;
  auto dot = op.find('.');
  if (dot != std::string::npos) {
    base = op.substr(0, dot);
    overload = op.substr(dot);
  }
  if (!base.empty() && base.back() != '_') {
    if (const lowering::Rule* r = reg.find(base + "_" + overload)) return r;
    if (overload.empty())
      if (const lowering::Rule* r = reg.find(base + "_.default")) return r;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------------------------
// Statistics and the executable caches.

namespace {

std::mutex g_stats_mu;
CompileStats g_stats;

std::mutex g_exe_mu;
std::unordered_map<std::string, runtime::ExecutablePtr> g_exes;  // program text -> executable

std::mutex g_dir_mu;
std::string g_cache_dir;
bool g_cache_dir_set = false;

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// What besides the program text decides the executable: the plugin, its version and attributes, the format, and
// the compiler options the plugin reads from XLA_FLAGS.
const std::string& pluginFingerprint() {
  static std::string fp = [] {
    const runtime::PluginInfo& p = client().plugin();
    std::string s = "torch_tpu-exe-v1|" + p.path + "|" + std::to_string(p.api_major) + "." +
                    std::to_string(p.api_minor) + "|" + p.platform_name + "|" + p.platform_version;
    for (const auto& kv : p.attributes) s += "|" + kv.first + "=" + kv.second;
    struct stat st;
    if (::stat(p.path.c_str(), &st) == 0) s += "|" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtime);
    if (const char* flags = std::getenv("XLA_FLAGS")) s += std::string("|XLA_FLAGS=") + flags;  // compiler options
    return s;
  }();
  return fp;
}

std::string diskKey(const std::string& text) {
  std::string all = pluginFingerprint() + "\n" + text;
  return hex(fnv1a(all, 14695981039346656037ULL)) + hex(fnv1a(all, 0x84222325cbf29ce4ULL ^ all.size()));
}

void mkdirs(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty()) ::mkdir(cur.c_str(), 0755);
    }
    if (i < path.size()) cur += path[i];
  }
}

constexpr char kMagic[] = "TORCH_TPU_EXE_1\n";

runtime::ExecutablePtr diskLoad(const std::string& dir, const std::string& key, const std::string& text) {
  std::ifstream f(dir + "/" + key + ".exe", std::ios::binary);
  if (!f) return nullptr;
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t m = sizeof(kMagic) - 1;
  if (data.size() < m + 16 || data.compare(0, m, kMagic) != 0) return nullptr;
  uint64_t len = 0, h = 0;
  std::memcpy(&len, data.data() + m, 8);
  std::memcpy(&h, data.data() + m + 8, 8);
  if (len != text.size() || h != fnv1a(text, 1469598103934665603ULL)) return nullptr;  // a hash collision
  try {
    return client().deserialize(data.substr(m + 16));
  } catch (const std::exception&) {
    return nullptr;
  }
}

bool diskStore(const std::string& dir, const std::string& key, const std::string& text,
               const runtime::Executable& exe) {
  std::string bytes;
  try {
    bytes = exe.serialize();
  } catch (const std::exception&) {
    return false;  // the plugin cannot serialize: the program is recompiled in the next process
  }
  mkdirs(dir);
  std::string tmp = dir + "/." + key + "." + std::to_string(::getpid()) + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return false;
    uint64_t len = text.size(), h = fnv1a(text, 1469598103934665603ULL);
    f.write(kMagic, sizeof(kMagic) - 1);
    f.write(reinterpret_cast<const char*>(&len), 8);
    f.write(reinterpret_cast<const char*>(&h), 8);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  return std::rename(tmp.c_str(), (dir + "/" + key + ".exe").c_str()) == 0;
}

// The executable of a program text: process cache, then disk cache, then the compiler.
runtime::ExecutablePtr executableFor(const std::string& text, CompileEvent* ev) {
  {
    std::lock_guard<std::mutex> g(g_exe_mu);
    auto it = g_exes.find(text);
    if (it != g_exes.end()) {
      std::lock_guard<std::mutex> g2(g_stats_mu);
      g_stats.memory_hits++;
      if (ev) ev->source = "memory";
      return it->second;
    }
  }
  std::string dir = cacheDir();
  std::string key;
  auto t0 = std::chrono::steady_clock::now();
  runtime::ExecutablePtr exe;
  if (!dir.empty()) {
    key = diskKey(text);
    exe = diskLoad(dir, key, text);
    if (exe) {
      std::lock_guard<std::mutex> g(g_stats_mu);
      g_stats.disk_hits++;
      g_stats.compile_seconds += secondsSince(t0);
      if (ev) ev->source = "disk";
    }
  }
  if (!exe) {
    exe = client().compile(text);
    double s = secondsSince(t0);
    bool stored = !dir.empty() && diskStore(dir, key, text, *exe);
    std::lock_guard<std::mutex> g(g_stats_mu);
    g_stats.compiles++;
    g_stats.compile_seconds += s;
    if (stored) g_stats.disk_writes++;
    if (ev) ev->source = "compile";
  }
  if (ev) {
    ev->seconds = secondsSince(t0);
    ev->key = key;
  }
  std::lock_guard<std::mutex> g(g_exe_mu);
  g_exes.emplace(text, exe);
  return exe;
}

}  // namespace

CompileStats compileStats() {
  std::lock_guard<std::mutex> g(g_stats_mu);
  return g_stats;
}

void resetCompileStats() {
  std::lock_guard<std::mutex> g(g_stats_mu);
  g_stats = CompileStats();
}

void clearCompileCache() {
  {
    std::lock_guard<std::mutex> g(g_exe_mu);
    g_exes.clear();
  }
  clearPackedWeights();
}

void setCacheDir(const std::string& dir) {
  std::lock_guard<std::mutex> g(g_dir_mu);
  g_cache_dir = dir;
  g_cache_dir_set = true;
}

std::string cacheDir() {
  std::lock_guard<std::mutex> g(g_dir_mu);
  if (!g_cache_dir_set) {
    g_cache_dir_set = true;
    if (const char* e = std::getenv("TORCH_TPU_CACHE_DIR")) {
      g_cache_dir = e;
    } else {
      const char* xdg = std::getenv("XDG_CACHE_HOME");
      const char* home = std::getenv("HOME");
      if (xdg && *xdg) g_cache_dir = std::string(xdg) + "/torch_tpu";
      else if (home && *home) g_cache_dir = std::string(home) + "/.cache/torch_tpu";
    }
  }
  return g_cache_dir;
}

// ---------------------------------------------------------------------------------------------------------------
// Programs.

enum class Src : uint8_t { Storage, Offset, Rng, Packed };
struct Param {
  Src kind;
  int index;  // Storage: slot; Offset, Packed: input index
};

struct Program {
  runtime::ExecutablePtr exe;
  std::vector<Param> params;
  std::vector<bool> donated;      // per param: donated to an output
  bool any_donation = false;
  std::vector<int> written_slots; // the first outputs: these storages' new buffers
  struct Out {
    int graph_out;
    at::ScalarType dtype;
    std::vector<int64_t> sizes;
    bool cpu;
  };
  std::vector<Out> outs;          // then one program result per computed graph output
  std::vector<int> passthrough;   // per graph output: the input index returned as is, else -1
  int64_t ops = 0;
};

namespace {

// The layout of the actual inputs of one call: which storage each reads, and how.
struct InputSig {
  int slot = -1;
  bool identity = true;
  viewprog::Layout layout;
};
struct Signature {
  std::vector<InputSig> inputs;
  std::vector<std::vector<int64_t>> bdims;  // per storage slot
  std::vector<DType> btype;
  std::vector<bool> has_buffer;
  std::vector<bool> donatable;              // nobody else holds the buffer
  int device = 0;
  std::string key;
};

inline void put(std::string& k, const void* p, size_t n) { k.append(static_cast<const char*>(p), n); }
template <class T>
inline void put(std::string& k, T v) {
  put(k, &v, sizeof(v));
}
inline void putInts(std::string& k, c10::IntArrayRef v) {
  put<uint32_t>(k, static_cast<uint32_t>(v.size()));
  put(k, v.data(), v.size() * sizeof(int64_t));
}

bool isOptionalOf(const c10::TypePtr& t, c10::TypeKind k) {
  if (t->kind() == k) return true;
  return t->kind() == c10::TypeKind::OptionalType && t->containedType(0)->kind() == k;
}

// Schema facts per op name: which arguments are Scalar (Number), float, Tensor.
struct OpSchema {
  std::vector<c10::TypeKind> kinds;  // element kind (Optional unwrapped)
  std::vector<std::string> names;    // argument names (rules may look arguments up by name)
  bool found = false;
};

const OpSchema& schemaOf(const std::string& op) {
  static std::mutex mu;
  static std::unordered_map<std::string, OpSchema> cache;
  std::lock_guard<std::mutex> g(mu);
  auto it = cache.find(op);
  if (it != cache.end()) return it->second;
  OpSchema s;
  std::string name = op, overload;
  auto dot = op.find('.');
  if (dot != std::string::npos) {
    name = op.substr(0, dot);
    overload = op.substr(dot + 1);
  }
  auto h = c10::Dispatcher::singleton().findOp(c10::OperatorName(name, overload));
  if (h) {
    s.found = true;
    for (const auto& a : h->schema().arguments()) {
      auto t = a.real_type();
      if (t->kind() == c10::TypeKind::OptionalType) t = t->containedType(0);
      s.kinds.push_back(t->kind());
      s.names.push_back(a.name());
    }
  }
  return cache.emplace(op, std::move(s)).first->second;
}

HostScalar hostScalar(const ArgDesc& d, bool as_float) {
  HostScalar h;
  h.has_value = true;
  if (as_float) {
    h.kind = HostScalar::Kind::Float;
    h.f = d.k == ArgDesc::K::Float ? d.f : d.k == ArgDesc::K::Int ? double(d.i) : double(d.b);
    return h;
  }
  switch (d.k) {
    case ArgDesc::K::Bool: h.kind = HostScalar::Kind::Bool; h.b = d.b; break;
    case ArgDesc::K::Int: h.kind = HostScalar::Kind::Int; h.i = d.i; break;
    default: h.kind = HostScalar::Kind::Float; h.f = d.f; break;
  }
  return h;
}

class GraphContext final : public lowering::Context {
 public:
  GraphContext(shlo::Builder& b, const std::string& op, Program& prog) : Context(b, op), prog_(prog) {}

  Value scalar(size_t i, DType dtype) override {
    const Arg& a = arg(i);
    if (a.kind == Arg::Kind::Tensor && a.tensor.valid()) {
      if (a.tensor.rank() != 0) fail("argument '" + a.name + "' is not a scalar");
      return b.convert(a.tensor, dtype);
    }
    if (a.kind == Arg::Kind::Int) return b.constantInt(a.i, dtype);
    if (a.kind == Arg::Kind::Bool) return b.constantInt(a.b, dtype);
    if ((a.kind == Arg::Kind::Scalar || a.kind == Arg::Kind::Double) && a.scalar.known()) {
      if (a.scalar.kind == HostScalar::Kind::Int) return b.constantInt(a.scalar.i, dtype);
      if (a.scalar.kind == HostScalar::Kind::Bool) return b.constantInt(a.scalar.b, dtype);
      return b.constant(a.scalar.f, dtype);
    }
    fail("argument '" + a.name + "' is not a number");
  }

  Value rngState() override {
    Value p = b.parameter(TensorType{DType::U64, {2}});
    prog_.params.push_back({Src::Rng, 0});
    return p;
  }

 private:
  Program& prog_;
};

TensorType typeOf(const TensorMeta& m) { return TensorType{toDType(m.dtype), m.sizes}; }

// Builds the arguments of one node. Throws LoweringError for what the rules cannot take.
void buildArgs(GraphContext& ctx, const NodeDesc& n, const std::vector<Value>& vals) {
  const OpSchema& sch = schemaOf(n.op);
  shlo::Builder& b = ctx.b;
  for (size_t j = 0; j < n.args.size(); ++j) {
    const ArgDesc& d = n.args[j];
    c10::TypeKind sk = sch.found && j < sch.kinds.size() ? sch.kinds[j] : c10::TypeKind::AnyType;
    Arg a;
    if (sch.found && j < sch.names.size()) a.name = sch.names[j];
    auto valueOf = [&](int v) -> Value {
      if (v < 0) return Value();
      if (v >= static_cast<int>(vals.size()) || !vals[v].valid())
        ctx.fail("argument refers to an undefined value");
      return vals[v];
    };
    switch (d.k) {
      case ArgDesc::K::None: a.kind = Arg::Kind::None; break;
      case ArgDesc::K::Tensor:
        a.kind = Arg::Kind::Tensor;
        a.tensor = valueOf(d.value);
        break;
      case ArgDesc::K::TensorList:
        a.kind = Arg::Kind::TensorList;
        for (int v : d.values) a.tensors.push_back(valueOf(v));
        break;
      case ArgDesc::K::Int:
      case ArgDesc::K::Float:
      case ArgDesc::K::Bool:
        if (sk == c10::TypeKind::TensorType) {  // a Python number where the schema takes a Tensor: wrapped
          a.kind = Arg::Kind::Tensor;
          a.wrapped_number = true;
          a.scalar = hostScalar(d, false);
          DType t = a.scalar.dtype();
          a.tensor = d.k == ArgDesc::K::Float ? b.constant(d.f, t) : b.constantInt(d.k == ArgDesc::K::Int ? d.i : d.b, t);
        } else if (sk == c10::TypeKind::NumberType) {
          a.kind = Arg::Kind::Scalar;
          a.scalar = hostScalar(d, false);
        } else if (sk == c10::TypeKind::FloatType) {
          a.kind = Arg::Kind::Double;
          a.scalar = hostScalar(d, true);
        } else if (d.k == ArgDesc::K::Int) {
          a.kind = Arg::Kind::Int;
          a.i = d.i;
        } else if (d.k == ArgDesc::K::Bool) {
          a.kind = Arg::Kind::Bool;
          a.b = d.b;
        } else {
          a.kind = Arg::Kind::Double;
          a.scalar = hostScalar(d, true);
        }
        break;
      case ArgDesc::K::IntList: a.kind = Arg::Kind::IntList; a.ints = d.ints; break;
      case ArgDesc::K::FloatList: a.kind = Arg::Kind::DoubleList; a.doubles = d.floats; break;
      case ArgDesc::K::BoolList: a.kind = Arg::Kind::BoolList; a.bools = d.bools; break;
      case ArgDesc::K::Str: a.kind = Arg::Kind::String; a.s = d.s; break;
      case ArgDesc::K::DType:
        if (!supportedDType(d.dtype)) ctx.fail(std::string("unsupported dtype ") + c10::toString(d.dtype));
        a.kind = Arg::Kind::ScalarType;
        a.dtype = toDType(d.dtype);
        break;
      case ArgDesc::K::Other: a.kind = Arg::Kind::Other; break;
    }
    ctx.args.push_back(std::move(a));
  }
}

}  // namespace

// What the program of a graph does beyond lowering its nodes one by one (decided once per graph).
struct GraphPlan {
  // Per input: the program takes the input's transpose as its parameter (a packed weight, see packedTranspose).
  std::vector<bool> pack_transposed;
  // Per node: its results are computed into their own buffer (see materialized). XLA fuses elementwise producers
  // into their consumers by recomputing them per consumer element; for a transcendental whose result is broadcast
  // (the cos/sin of rotary embeddings) or read by several consumers, that multiplies its cost.
  std::vector<bool> materialize;
};

namespace {

// Whether inference programs on this plugin read transposed copies of their weights: on XLA:CPU a product whose
// right operand contracts its minor dimension (x @ W.T, the form of every nn.Linear) runs at about 60% of the speed
// of the row-major form. TPU and GPU compilers choose operand layouts themselves. TORCH_TPU_PACK_WEIGHTS=0/1
// overrides the choice.
bool packWeightsEnabled() {
  static const bool on = [] {
    const char* e = std::getenv("TORCH_TPU_PACK_WEIGHTS");
    if (e && *e) return std::strcmp(e, "0") != 0;
    return client().plugin().platform_name == "cpu";
  }();
  return on;
}

int64_t numelOf(const TensorMeta& m) {
  int64_t n = 1;
  for (int64_t d : m.sizes) n *= d;
  return n;
}

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

// A node that swaps the two dimensions of a 2-D value: t, permute [1, 0], transpose(0, 1).
bool swapsMatrix(const NodeDesc& n) {
  if (n.args.empty() || n.args[0].k != ArgDesc::K::Tensor) return false;
  if (n.op == "aten::t") return true;
  if (n.op == "aten::permute" && n.args.size() >= 2) return n.args[1].ints == std::vector<int64_t>{1, 0};
  if (n.op == "aten::transpose.int" && n.args.size() >= 3) {
    int64_t a = n.args[1].i < 0 ? n.args[1].i + 2 : n.args[1].i, c = n.args[2].i < 0 ? n.args[2].i + 2 : n.args[2].i;
    return a != c;
  }
  return false;
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
      if (a.k == ArgDesc::K::Tensor && a.value >= 0 && static_cast<size_t>(a.value) < nv)
        uses[a.value].emplace_back(static_cast<int>(k), static_cast<int>(j));
      if (a.k == ArgDesc::K::TensorList)
        for (int v : a.values)
          if (v >= 0 && static_cast<size_t>(v) < nv) uses[v].emplace_back(static_cast<int>(k), static_cast<int>(j));
    }
  }
  std::vector<bool> is_output(nv, false), mutated(nin, false);
  for (int v : g.outputs)
    if (v >= 0 && static_cast<size_t>(v) < nv) is_output[v] = true;
  for (const auto& m : g.mutations) mutated[m.first] = true;

  // Transcendentals read by several consumers, or by one at least twice as large (a broadcast), are materialized.
  static const std::unordered_set<std::string> kTranscendental = {
      "aten::sin", "aten::cos", "aten::tan", "aten::sinh", "aten::cosh", "aten::asin", "aten::acos", "aten::atan",
      "aten::atan2", "aten::exp", "aten::exp2", "aten::expm1", "aten::log", "aten::log2", "aten::log10",
      "aten::log1p", "aten::pow", "aten::erf", "aten::erfc", "aten::erfinv", "aten::lgamma", "aten::digamma"};
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const NodeDesc& n = g.nodes[k];
    if (n.results.size() != 1 || n.result_values.size() != 1 || n.result_values[0] < 0 || !n.results[0].defined)
      continue;
    if (!kTranscendental.count(n.op.substr(0, n.op.find('.')))) continue;
    const auto& u = uses[n.result_values[0]];
    int64_t own = numelOf(n.results[0]), widest = 0;
    for (const auto& use : u)
      for (const TensorMeta& r : g.nodes[use.first].results)
        if (r.defined) widest = std::max(widest, numelOf(r));
    p.materialize[k] = u.size() > 1 || widest >= 2 * own;
  }

  // Inputs worth packing: 2-D floating weights of an inference graph, neither written nor returned, read only
  // through a transpose that feeds products as their right operand (mm's and addmm's mat2): nn.Linear after
  // AOTAutograd.
  if (!g.inference || !packWeightsEnabled()) return p;
  for (int i = 0; i < nin; ++i) {
    const TensorMeta& m = g.inputs[i];
    if (!m.defined || m.sizes.size() != 2 || mutated[i] || is_output[i] || uses[i].empty()) continue;
    if (!c10::isFloatingType(m.dtype) || m.sizes[0] < 16 || m.sizes[1] < 16) continue;
    bool ok = true;
    for (const auto& use : uses[i]) {
      const NodeDesc& t = g.nodes[use.first];
      int tv = t.result_values.empty() ? -1 : t.result_values[0];
      if (use.second != 0 || !swapsMatrix(t) || tv < 0 || is_output[tv] || uses[tv].empty()) {
        ok = false;
        break;
      }
      for (const auto& mm : uses[tv]) {
        const std::string& op = g.nodes[mm.first].op;
        if (!((op == "aten::mm" && mm.second == 1) || (op == "aten::addmm" && mm.second == 2))) ok = false;
      }
      if (!ok) break;
    }
    p.pack_transposed[i] = ok;
  }
  return p;
}

// Transposed copies of weights, made once per weight buffer. Keyed by the storage's current buffer, held weakly:
// writing the weight gives its storage a new buffer (the old entry expires and is dropped), and the cache neither
// keeps a weight alive nor prevents its donation.
struct PackEntry {
  std::weak_ptr<runtime::Buffer> src;
  at::Tensor packed;
};
std::mutex g_pack_mu;
std::unordered_map<const runtime::Buffer*, PackEntry> g_packs;

runtime::BufferPtr packedTranspose(const at::Tensor& weight, const runtime::BufferPtr& src) {
  {
    std::lock_guard<std::mutex> lk(g_pack_mu);
    auto it = g_packs.find(src.get());
    // A live entry is src itself (src is alive, so no other buffer has its address); an expired one is stale.
    if (it != g_packs.end() && !it->second.src.expired()) return storageOf(it->second.packed)->get();
  }
  at::Tensor packed = weight.t().contiguous();  // an eager program, run outside the lock
  {
    std::lock_guard<std::mutex> lk(g_pack_mu);
    for (auto it = g_packs.begin(); it != g_packs.end();)  // copies of weights written or freed since
      it = it->second.src.expired() ? g_packs.erase(it) : std::next(it);
    g_packs[src.get()] = PackEntry{src, packed};
  }
  {
    std::lock_guard<std::mutex> lk(g_stats_mu);
    g_stats.packed_weights++;
  }
  return storageOf(packed)->get();
}

struct BuildResult {
  std::shared_ptr<Program> prog;
  std::string text;
};

// Lowers the whole graph for one signature. With `errors`, a node that fails is recorded and its results replaced
// by zeros (the check mode); otherwise the first failure throws LoweringError naming the op.
BuildResult buildProgram(const GraphDesc& g, const GraphPlan& plan, const Signature& sig,
                         std::vector<std::pair<int, std::string>>* errors) {
  auto prog = std::make_shared<Program>();
  shlo::Builder b;
  const int nin = static_cast<int>(g.inputs.size());

  // Which storages the graph writes (input mutations), in order.
  std::vector<int> written;
  for (const auto& m : g.mutations) {
    int slot = sig.inputs[m.first].slot;
    if (std::find(written.begin(), written.end(), slot) == written.end()) written.push_back(slot);
  }
  prog->written_slots = written;

  std::vector<Value> storage_vals(sig.bdims.size());
  auto storageValue = [&](int slot) -> Value {
    if (!storage_vals[slot].valid()) {
      TensorType bt{sig.btype[slot], sig.bdims[slot]};
      if (!sig.has_buffer[slot]) {
        storage_vals[slot] = b.zeros(bt);
      } else {
        int donate = -1;
        auto w = std::find(written.begin(), written.end(), slot);
        if (w != written.end() && sig.donatable[slot]) donate = static_cast<int>(w - written.begin());
        storage_vals[slot] = b.parameter(bt, donate);
        prog->params.push_back({Src::Storage, slot});
        prog->donated.push_back(donate >= 0);
        prog->any_donation |= donate >= 0;
      }
    }
    return storage_vals[slot];
  };
  std::vector<Value> offsets(nin);
  auto offsetValue = [&](int i) -> Value {
    if (sig.inputs[i].identity) return Value();
    if (!offsets[i].valid()) {
      offsets[i] = b.parameter(TensorType{DType::S64, {}});
      prog->params.push_back({Src::Offset, i});
      prog->donated.push_back(false);
    }
    return offsets[i];
  };

  std::vector<Value> vals(std::max(g.num_values, nin));
  std::vector<int> slot_readers(sig.bdims.size(), 0);
  for (int i = 0; i < nin; ++i) slot_readers[sig.inputs[i].slot]++;
  for (int i = 0; i < nin; ++i) {
    const InputSig& in = sig.inputs[i];
    const auto& sizes = g.inputs[i].sizes;
    if (plan.pack_transposed[i] && in.identity && sig.has_buffer[in.slot] && slot_readers[in.slot] == 1 &&
        sig.bdims[in.slot] == sizes && std::find(written.begin(), written.end(), in.slot) == written.end()) {
      // The program reads the weight's transposed copy (row-major [in, out]) and transposes it back: XLA folds
      // the two transposes and the product reads its right operand in the fast layout.
      Value packed = b.parameter(TensorType{sig.btype[in.slot], {sizes[1], sizes[0]}});
      prog->params.push_back({Src::Packed, i});
      prog->donated.push_back(false);
      vals[i] = b.transpose(packed, {1, 0});
      continue;
    }
    Value buf = storageValue(in.slot);
    vals[i] = viewprog::read(b, buf, in.layout, offsetValue(i), toDType(g.inputs[i].dtype));
  }
  for (size_t idx = 0; idx < g.nodes.size(); ++idx) {
    const NodeDesc& n = g.nodes[idx];
    auto record = [&](const std::string& msg) {
      errors->emplace_back(static_cast<int>(idx), msg);
      for (size_t k = 0; k < n.results.size(); ++k)
        if (n.result_values[k] >= 0 && n.results[k].defined) vals[n.result_values[k]] = b.zeros(typeOf(n.results[k]));
    };
    const lowering::Rule* rule = ruleFor(n.op);
    if (!rule) {
      std::string msg = "no lowering rule for " + n.op;
      if (errors) {
        record(msg);
        continue;
      }
      throw lowering::LoweringError(msg);
    }
    std::vector<Value> results;
    try {
      GraphContext ctx(b, n.op, *prog);
      buildArgs(ctx, n, vals);
      for (const auto& m : n.results) ctx.outputs.push_back(m.defined ? typeOf(m) : TensorType{});
      if (rule->accepts && !rule->accepts(ctx)) ctx.fail("the rule declines this call");
      results = lowering::lower(*rule, ctx);
    } catch (const lowering::LoweringError& e) {
      if (!errors) throw;
      record(e.what());
      continue;
    } catch (const shlo::BuildError& e) {
      if (!errors) throw lowering::LoweringError(n.op + ": " + e.what());
      record(n.op + ": " + e.what());
      continue;
    } catch (const c10::Error& e) {
      if (!errors) throw lowering::LoweringError(n.op + ": " + e.what_without_backtrace());
      record(n.op + ": " + e.what_without_backtrace());
      continue;
    }
    prog->ops++;
    if (plan.materialize[idx])
      for (auto& r : results)
        if (r.valid() && shlo::isFloat(r.dtype())) r = materialized(b, r);
    for (size_t k = 0; k < n.results.size() && k < results.size(); ++k)
      if (n.result_values[k] >= 0) vals[n.result_values[k]] = results[k];
  }

  // Outputs: the written storages' new buffers, then the computed graph outputs.
  std::vector<Value> outs;
  for (int slot : written) {
    Value cur;
    for (const auto& m : g.mutations) {
      const InputSig& in = sig.inputs[m.first];
      if (in.slot != slot) continue;
      Value v = vals[m.second];
      if (!v.valid()) throw lowering::LoweringError("mutation of input " + std::to_string(m.first) + " has no value");
      v = b.convert(v, toDType(g.inputs[m.first].dtype));
      v = b.broadcastTo(v, g.inputs[m.first].sizes);
      if (in.identity) {
        cur = b.reshape(b.convert(v, sig.btype[slot]), sig.bdims[slot]);
      } else {
        if (!cur.valid()) cur = storageValue(slot);
        cur = viewprog::write(b, cur, in.layout, offsetValue(m.first), v);
      }
    }
    outs.push_back(cur);
  }
  prog->passthrough.assign(g.outputs.size(), -1);
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    int v = g.outputs[k];
    if (v < 0) continue;
    if (v < nin) {  // an input returned as is (after its mutation, if any: the storage has the new buffer)
      prog->passthrough[k] = v;
      continue;
    }
    if (!vals[v].valid()) throw lowering::LoweringError("graph output " + std::to_string(k) + " has no value");
    const TensorMeta& m = g.output_meta[k];
    Value r = vals[v];
    if (m.defined) {
      r = b.convert(r, toDType(m.dtype));
      if (r.shape() != m.sizes) r = b.reshape(r, m.sizes);
    }
    outs.push_back(r);
    prog->outs.push_back({static_cast<int>(k), m.defined ? m.dtype : toScalarType(r.dtype()), r.shape(), m.cpu});
  }
  BuildResult res;
  res.text = b.finish(outs);
  res.prog = prog;
  return res;
}


// Signature of a contiguous, unaliased call (check / text).
Signature plainSignature(const GraphDesc& g) {
  Signature s;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const TensorMeta& m = g.inputs[i];
    InputSig in;
    in.slot = static_cast<int>(i);
    in.identity = true;
    in.layout.sizes = m.sizes;
    {
      auto cs = c10::contiguous_strides(m.sizes);
      in.layout.strides.assign(cs.begin(), cs.end());
    }
    s.inputs.push_back(in);
    s.bdims.push_back(m.sizes);
    s.btype.push_back(toDType(m.dtype));
    s.has_buffer.push_back(true);
    s.donatable.push_back(false);
  }
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------

CompiledGraph::CompiledGraph(GraphDesc desc)
    : desc_(std::move(desc)), plan_(std::make_unique<GraphPlan>(planGraph(desc_))) {
  std::lock_guard<std::mutex> g(g_stats_mu);
  g_stats.graphs++;
}

CompiledGraph::~CompiledGraph() = default;

std::vector<std::pair<int, std::string>> CompiledGraph::check() const {
  std::vector<std::pair<int, std::string>> errors;
  try {
    buildProgram(desc_, *plan_, plainSignature(desc_), &errors);
  } catch (const std::exception& e) {
    errors.emplace_back(-1, e.what());
  }
  return errors;
}

std::string CompiledGraph::text() const { return buildProgram(desc_, *plan_, plainSignature(desc_), nullptr).text; }

std::vector<at::Tensor> CompiledGraph::run(const std::vector<at::Tensor>& given, CompileEvent* event) {
  const GraphDesc& g = desc_;
  const size_t nin = g.inputs.size();
  TORCH_CHECK(given.size() == nin, "tpu compiled graph '", g.name, "' expects ", nin, " inputs, got ", given.size());

  // 1. Signature: device, storages, layouts.
  Signature sig;
  sig.device = -1;
  for (const auto& t : given)
    if (t.defined() && t.is_privateuseone()) {
      sig.device = t.device().index();
      break;
    }
  if (sig.device < 0) sig.device = currentDevice();
  std::vector<at::Tensor> inputs;
  inputs.reserve(nin);
  for (size_t i = 0; i < nin; ++i) {
    const at::Tensor& t = given[i];
    TORCH_CHECK(t.defined(), "tpu compiled graph '", g.name, "': input ", i, " is undefined");
    if (t.is_privateuseone()) {
      TORCH_CHECK(t.device().index() == sig.device, "Expected all tensors to be on the same device, but found "
                  "at least two devices, tpu:", sig.device, " and ", t.device(), "!");
      inputs.push_back(t);
    } else {
      // A host tensor (a constant, a CPU scalar): uploaded for this call.
      inputs.push_back(t.to(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(sig.device))));
    }
  }
  std::vector<TpuStorage*> storages;
  std::vector<runtime::BufferPtr> buffers;
  std::string& key = sig.key;
  key.reserve(64 + nin * 24);
  put<int8_t>(key, static_cast<int8_t>(sig.device));
  std::vector<bool> mutated_slot;
  std::vector<bool> input_mutated(nin, false);
  for (const auto& m : g.mutations) input_mutated[m.first] = true;
  for (size_t i = 0; i < nin; ++i) {
    const at::Tensor& t = inputs[i];
    TORCH_CHECK(t.scalar_type() == g.inputs[i].dtype && t.sizes() == c10::IntArrayRef(g.inputs[i].sizes),
                "tpu compiled graph '", g.name, "': input ", i, " has type ", t.scalar_type(), t.sizes(),
                ", the graph was traced with ", g.inputs[i].dtype, c10::IntArrayRef(g.inputs[i].sizes));
    TpuStorage* st = storageOf(t);
    int slot = -1;
    for (size_t k = 0; k < storages.size(); ++k)
      if (storages[k] == st) slot = static_cast<int>(k);
    if (slot < 0) {
      slot = static_cast<int>(storages.size());
      storages.push_back(st);
      runtime::BufferPtr buf = st->get();
      if (buf) {
        sig.bdims.push_back(buf->dims());
        sig.btype.push_back(DType(buf->type()));
      } else {
        sig.bdims.push_back({static_cast<int64_t>(st->nbytes / t.element_size())});
        sig.btype.push_back(toDType(t.scalar_type()));
      }
      sig.has_buffer.push_back(buf != nullptr);
      sig.donatable.push_back(false);
      buffers.push_back(std::move(buf));
      mutated_slot.push_back(false);
    }
    if (input_mutated[i]) mutated_slot[slot] = true;
    InputSig in;
    in.slot = slot;
    in.layout = viewprog::Layout{t.sizes().vec(), t.strides().vec(), t.storage_offset()};
    in.identity = viewprog::isIdentity(sig.bdims[slot], in.layout) && toDType(t.scalar_type()) == sig.btype[slot];
    put<int8_t>(key, static_cast<int8_t>(slot));
    put<uint8_t>(key, in.identity);
    if (!in.identity) {
      putInts(key, t.strides());
      putInts(key, sig.bdims[slot]);
      put<int8_t>(key, static_cast<int8_t>(sig.btype[slot]));
    } else if (sig.bdims[slot] != g.inputs[i].sizes) {
      putInts(key, sig.bdims[slot]);
    }
    sig.inputs.push_back(std::move(in));
  }
  for (size_t s = 0; s < storages.size(); ++s) {
    put<uint8_t>(key, sig.has_buffer[s] ? 'b' : 'z');
    if (mutated_slot[s] && sig.has_buffer[s]) {
      // Donated when nobody but the storage (and this call) holds the buffer.
      sig.donatable[s] = buffers[s].use_count() <= 2 && buffers[s]->byteSize() >= donateMinBytes();
      put<uint8_t>(key, sig.donatable[s]);
    }
  }

  // 2. The program for this signature.
  std::shared_ptr<Program> prog;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = programs_.find(key);
    if (it != programs_.end()) prog = it->second;
  }
  {
    std::lock_guard<std::mutex> lk(g_stats_mu);
    g_stats.runs++;
    if (prog) g_stats.signature_hits++;
  }
  if (!prog) {
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(sig.device)));
    auto t0 = std::chrono::steady_clock::now();
    BuildResult br = buildProgram(g, *plan_, sig, nullptr);
    double lower_s = secondsSince(t0);
    {
      std::lock_guard<std::mutex> lk(g_stats_mu);
      g_stats.lowerings++;
      g_stats.lower_seconds += lower_s;
    }
    CompileEvent ev;
    ev.happened = true;
    ev.ops = br.prog->ops;
    br.prog->exe = executableFor(br.text, &ev);
    ev.seconds += lower_s;
    if (event) *event = ev;
    prog = br.prog;
    std::lock_guard<std::mutex> lk(mu_);
    programs_.emplace(key, prog);
  }

  // 3. Launch.
  std::vector<runtime::BufferPtr> held;
  std::vector<runtime::Buffer*> raw;
  raw.reserve(prog->params.size());
  for (const Param& p : prog->params) {
    switch (p.kind) {
      case Src::Storage:
        raw.push_back(buffers[p.index].get());
        continue;
      case Src::Offset:
        held.push_back(scalarBuffer(c10::Scalar(inputs[p.index].storage_offset()), DType::S64, sig.device));
        break;
      case Src::Packed:
        held.push_back(packedTranspose(inputs[p.index], buffers[sig.inputs[p.index].slot]));
        break;
      case Src::Rng: {
        uint64_t state[2] = {nextRngKey(std::nullopt, sig.device), 0};
        held.push_back(client().fromHost(state, runtime::ElementType::U64, {2}, sig.device));
        break;
      }
    }
    raw.push_back(held.back().get());
  }
  std::vector<runtime::BufferPtr> outs =
      prog->exe->execute(sig.device, raw, prog->any_donation ? prog->donated : std::vector<bool>{});
  held.clear();
  buffers.clear();
  size_t o = 0;
  for (int slot : prog->written_slots) storages[slot]->set(std::move(outs[o++]));
  // Host inputs were uploaded for this call: their mutations are copied back.
  for (const auto& m : g.mutations)
    if (!given[m.first].is_privateuseone()) given[m.first].copy_(inputs[m.first]);
  std::vector<at::Tensor> results(g.outputs.size());
  for (size_t k = 0; k < g.outputs.size(); ++k)
    if (prog->passthrough[k] >= 0) results[k] = given[prog->passthrough[k]];
  for (const auto& r : prog->outs) {
    at::Tensor t = wrapBuffer(std::move(outs[o++]), r.dtype, r.sizes, sig.device);
    if (r.cpu) t = t.cpu();
    results[r.graph_out] = std::move(t);
  }
  if (launchBlocking()) client().synchronize(sig.device);
  return results;
}

void clearPackedWeights() {
  std::lock_guard<std::mutex> lk(g_pack_mu);
  g_packs.clear();
}

}  // namespace torch_tpu::compile
