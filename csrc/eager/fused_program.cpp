// Fused eager, the fused program of a trace (eager/fused_internal.h): its StableHLO text (each recorded op's program
// a private function, called in order), the values it outputs, its process cache and the background compiler.
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>

#include "core/executables.h"
#include "core/pressure.h"
#include "eager/fused_internal.h"

namespace torch_tpu::fused {

using namespace detail;

namespace detail {

core::LruMap<std::shared_ptr<FusedProgram>> g_programs;
namespace {
const bool g_programs_trimmer = [] {
  core::registerExecutableHolder([] {
    std::unique_lock<std::recursive_mutex> g(g_mu, std::try_to_lock);
    if (g.owns_lock()) g_programs.trimOldestHalf();
  });
  return true;
}();
}  // namespace
std::unordered_set<uint64_t> g_seen;
std::unordered_set<uint64_t> g_compiling;

namespace {

// Donation (TORCH_TPU_FUSED_DONATE, default on): a storage the trace overwrites gives its old buffer to the program,
// which writes the storage's final value into it in place, as compiled graphs do (XLA's input-output aliasing).
bool donateWritten() {
  static const bool v = envSwitchOn("TORCH_TPU_FUSED_DONATE");
  return v;
}

}  // namespace

// Per program input (external value): the index among `outputs` (ascending value ids) of the value that overwrites
// its storage, when the program may take its buffer for it (same type: the storage keeps its buffer's shape), else -1.
// A function of the trace and the outputs only, so a program's text and its launches agree.
std::vector<int> aliasedOutputs(const std::vector<int>& outputs) {
  const Trace& t = g_trace;
  std::vector<int> alias(t.externals.size(), -1);
  if (!donateWritten()) return alias;
  for (size_t i = 0; i < t.externals.size(); ++i) {
    const Val& in = t.vals[t.externals[i]];
    if (in.rec < 0) continue;  // storage offsets, random keys, numbers: no storage to overwrite
    const int last = t.recs[in.rec].value;
    if (last == t.externals[i] || t.vals[last].op < 0 || *t.vals[last].type != *in.type) continue;
    auto it = std::lower_bound(outputs.begin(), outputs.end(), last);
    if (it != outputs.end() && *it == last) alias[i] = static_cast<int>(it - outputs.begin());
  }
  return alias;
}

std::string fusedText(const std::vector<int>& outputs) {
  const Trace& t = g_trace;
  const std::vector<int> alias = aliasedOutputs(outputs);
  std::string s = "module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n";
  std::unordered_set<uint64_t> emitted;
  std::unordered_set<std::string> tops;  // a foreign kernel's functions, once even when several programs call it
  for (const OpRec& op : t.ops)
    if (emitted.insert(op.p->id).second) {
      const EagerProgram::Function& fn = op.p->function();
      s += fn.text;
      if (!fn.top.empty() && tops.insert(fn.top).second) s += fn.top;
    }
  std::vector<int> ext_index(t.vals.size(), -1);
  for (size_t i = 0; i < t.externals.size(); ++i) ext_index[t.externals[i]] = static_cast<int>(i);
  auto ref = [&](int v) {
    const Val& val = t.vals[v];
    if (val.op < 0) return "%arg" + std::to_string(ext_index[v]);
    const OpRec& op = t.ops[val.op];
    std::string r = "%c" + std::to_string(val.op);
    if (op.num_out > 1) r += "#" + std::to_string(val.out);
    return r;
  };
  s += "  func.func public @main(";
  for (size_t i = 0; i < t.externals.size(); ++i) {
    if (i) s += ", ";
    s += "%arg" + std::to_string(i) + ": " + *t.vals[t.externals[i]].type;
    if (alias[i] >= 0) s += " {tf.aliasing_output = " + std::to_string(alias[i]) + " : i32}";
  }
  s += ") -> (";
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (i) s += ", ";
    s += *t.vals[outputs[i]].type;
  }
  s += ") {\n";
  for (size_t k = 0; k < t.ops.size(); ++k) {
    const OpRec& op = t.ops[k];
    const EagerProgram::Function& fn = op.p->function();
    s += "    ";
    if (op.num_out == 1) s += "%c" + std::to_string(k) + " = ";
    else if (op.num_out > 1) s += "%c" + std::to_string(k) + ":" + std::to_string(op.num_out) + " = ";
    s += "func.call @e" + std::to_string(op.p->id) + "(";
    for (size_t i = 0; i < op.in.size(); ++i) {
      if (i) s += ", ";
      s += ref(op.in[i]);
    }
    s += ") : (";
    for (size_t i = 0; i < fn.arg_types.size(); ++i) {
      if (i) s += ", ";
      s += fn.arg_types[i];
    }
    s += ") -> ";
    if (fn.result_types.size() == 1) {
      s += fn.result_types[0];
    } else {
      s += "(";
      for (size_t i = 0; i < fn.result_types.size(); ++i) {
        if (i) s += ", ";
        s += fn.result_types[i];
      }
      s += ")";
    }
    s += "\n";
  }
  s += "    return";
  for (size_t i = 0; i < outputs.size(); ++i) s += (i ? ", " : " ") + ref(outputs[i]);
  if (!outputs.empty()) {
    s += " : ";
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (i) s += ", ";
      s += *t.vals[outputs[i]].type;
    }
  }
  s += "\n  }\n}\n";
  return s;
}

uint64_t hashKey(const std::string& k) { return std::hash<std::string>()(k); }

std::string opList(const Trace& t, size_t max) {
  std::string s;
  for (size_t i = 0; i < t.ops.size() && i < max; ++i) s += (i ? ", " : "") + t.ops[i].p->op;
  if (t.ops.size() > max) s += ", ... (" + std::to_string(t.ops.size()) + " ops)";
  return s;
}

// The values a launch keeps: the current values of storages still alive, and the device-side check flags.
std::vector<int> liveValues() {
  const Trace& t = g_trace;
  std::vector<int> live;
  {
    std::lock_guard<std::mutex> g(g_live_mu);
    for (size_t v = 0; v < t.vals.size(); ++v) {
      const Val& val = t.vals[v];
      if (val.op >= 0 && val.rec >= 0 && t.recs[val.rec].st != nullptr &&
          t.recs[val.rec].value == static_cast<int>(v))
        live.push_back(static_cast<int>(v));
    }
  }
  if (!t.checks.empty()) {
    for (const auto& c : t.checks) live.push_back(c.first);
    std::sort(live.begin(), live.end());
  }
  return live;
}

// Every storage's final value in the trace (alive or not), and the device-side check flags: what any launch of the
// trace could keep.
std::vector<int> finalValues() {
  const Trace& t = g_trace;
  std::vector<int> out;
  for (size_t v = 0; v < t.vals.size(); ++v) {
    const Val& val = t.vals[v];
    if (val.op >= 0 && val.rec >= 0 && t.recs[val.rec].value == static_cast<int>(v)) out.push_back(static_cast<int>(v));
  }
  for (const auto& c : t.checks) out.push_back(c.first);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}


// The compile thread yields to the threads running the model: on a machine whose other cores are busy, a background
// compile at the same priority would take half of the core the model's thread runs on (TORCH_TPU_FUSED_COMPILE_NICE
// added to the thread's niceness; best effort: a failure leaves it as it is). Threads it starts inherit it.
void lowerCompileThreadPriority() {
  const int add = static_cast<int>(settings::integer("TORCH_TPU_FUSED_COMPILE_NICE"));
  if (add <= 0) return;
  const id_t tid = static_cast<id_t>(::syscall(SYS_gettid));
  errno = 0;
  const int now = ::getpriority(PRIO_PROCESS, tid);
  if (errno != 0) return;
  (void)::setpriority(PRIO_PROCESS, tid, std::min(19, now + add));
}

void Compiler::run() {
  lowerCompileThreadPriority();
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return !q_.empty() || stopped_; });
    if (q_.empty()) break;
    auto next = std::min_element(q_.begin(), q_.end(),
                                 [](const CompileJob& a, const CompileJob& b) { return a.ops < b.ops; });
    CompileJob job = std::move(*next);
    q_.erase(next);
    busy_ = true;
    lk.unlock();
    std::shared_ptr<FusedProgram> fp = std::make_shared<FusedProgram>();
    auto t0 = std::chrono::steady_clock::now();
    try {
      fp->exe = core::executableFor(job.text, core::ExecutableCaches{false, true}).exe;
      fp->outputs = std::move(job.outputs);
    } catch (const std::exception&) {
      fp->exe = nullptr;  // the trace keeps running op by op
    }
    const double secs = secondsSince(t0);
    {
      std::lock_guard<std::recursive_mutex> g(g_mu);
      g_programs.insert(job.key, fp, fusedCacheLimit());
      g_compiling.erase(job.hash);
    }
    {
      std::lock_guard<std::mutex> g(g_stats_mu);
      g_stats.compile_seconds += secs;
    }
    lk.lock();
    busy_ = false;
    idle_.notify_all();
  }
  busy_ = false;
  idle_.notify_all();
}

}  // namespace detail

void clearCache() {
  Compiler::get().wait();
  std::lock_guard<std::recursive_mutex> lk(g_mu);
  g_programs.clear();
  g_seen.clear();
}

void waitForCompiles() { Compiler::get().wait(); }

void shutdown() { Compiler::get().shutdown(); }

}  // namespace torch_tpu::fused
