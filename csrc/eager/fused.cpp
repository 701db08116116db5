#include "eager/fused.h"

#include <c10/util/Exception.h>

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <iterator>
#include <thread>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "core/checks.h"
#include "core/client.h"
#include "core/config.h"
#include "core/dtype.h"
#include "core/executables.h"
#include "core/lru.h"
#include "core/rng.h"
#include "core/scalars.h"
#include "settings/settings.h"

namespace torch_tpu::fused {

using core::put;

namespace {

// ---------------------------------------------------------------------------------------------------------------
// Settings.

std::atomic<int> g_mode{-1};  // -1: not read yet, 0 strict, 1 fused

int readMode() {
  return settings::choice("TORCH_TPU_EAGER_MODE") == "fused" ? 1 : 0;
}

size_t maxOps() {
  static const size_t v = [] {
    return static_cast<size_t>(settings::integer("TORCH_TPU_FUSED_MAX_OPS"));
  }();
  return v;
}

// A trace shorter than this is not worth cutting at a loop period of its own: a cut covers whole periods.
constexpr size_t kMinCut = 32;

// Fused programs are large (a whole step each): keep a sixteenth as many as the per-op caches.
size_t fusedCacheLimit() {
  const size_t n = core::programCacheLimit();
  return n == 0 ? 0 : std::max<size_t>(16, n / 16);
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---------------------------------------------------------------------------------------------------------------
// The trace.

// A value of the trace: an input read from outside (a buffer captured when recorded) or an output of a recorded op.
struct Val {
  runtime::BufferPtr buf;        // external input
  int op = -1, out = -1;         // produced: op index, output index
  int rec = -1;                  // the storage record this value belongs to (-1: none)
  const std::string* type = nullptr;  // MLIR type
};

struct OpRec {
  std::shared_ptr<EagerProgram> p;
  std::vector<int> in;  // value per program parameter
  int first_out = 0;    // outputs are values first_out ..
  int num_out = 0;
};

// A storage the trace touched. `st` is cleared (under g_live_mu) when the storage is destroyed.
struct StorageRec {
  TpuStorage* st = nullptr;
  int value = -1;  // the storage's current value in the trace
  int index = 0;   // position in Trace::recs
};

struct Trace {
  int device = -1;
  std::vector<Val> vals;
  std::vector<OpRec> ops;
  std::deque<StorageRec> recs;  // stable addresses: storages point at their record
  std::vector<int> externals;   // value ids of the program inputs, in order
  std::string key;
  std::vector<uint64_t> seq;    // entry id per op (loop period)
  // Flags of the recorded programs' device-side checks (core/checks.h): value id and sites. Always outputs of the
  // trace; handed to addPendingCheck when it launches.
  std::vector<std::pair<int, core::CheckSites>> checks;
};

std::recursive_mutex g_mu;  // the trace and the fused program cache
Trace g_trace;
size_t g_cut = 0;           // cut traces at this length (a whole number of loop periods); 0: at the size limit
int g_cut_misses = 0;       // consecutive cut traces seen for the first time
bool g_oneoff = false;      // the trace being flushed was cut at the size limit when its loop period was found: it
                            // is not a step of the loop (the next ones are), so it gets no fused program

// Launches timed by the speed check (each kind); 0: no check (every fused program is used).
int speedTrials() {
  static const int v = [] {
    return static_cast<int>(settings::integer("TORCH_TPU_FUSED_SPEED_CHECK"));
  }();
  return v;
}
constexpr int kSpeedWarmup = 3;
std::atomic<int> g_speed_trials{-1};  // -1: from the environment; set by tests
double g_speed_bias = 0;              // tests: seconds added to each timed fused launch (negative: taken off)

// Guards StorageRec::st and TpuStorage::trace against a storage being destroyed on another thread. Never held while
// taking another lock but a storage's own mutex.
std::mutex g_live_mu;

// The fused program of a trace key. Its outputs are a superset of the values alive at any launch seen so far (what
// is alive can vary between otherwise identical steps, e.g. with the timing of Python's garbage collector): a launch
// whose live values it covers uses it, another one makes a program with the union.
struct FusedProgram {
  runtime::ExecutablePtr exe;  // null: none could be built (the trace always runs op by op)
  std::vector<int> outputs;    // value ids, ascending
  // The speed check: its first launches alternate between the fused program and the trace op by op, each timed
  // from an idle device to completion; a program no faster than op by op is dropped (`slow`: the trace runs op by
  // op from then on, as strict mode would).
  int trials = 0;
  double best_fused = 0, best_replay = 0;  // seconds, the fastest of each kind so far
  bool slow = false;
  // A slow program is checked again after 64 runs op by op, then 128, 256, ... (the machine's load may have misled
  // the check).
  int64_t slow_runs = 0, recheck_after = 64;
};
core::LruMap<std::shared_ptr<FusedProgram>> g_programs;  // by trace key
std::unordered_set<uint64_t> g_seen;       // hashes of trace keys run once without a fused program
std::unordered_set<uint64_t> g_compiling;  // hashes of trace keys whose program is being compiled

// ---------------------------------------------------------------------------------------------------------------
// Fused programs are compiled in the background: meanwhile the trace runs op by op, as strict mode would.

struct CompileJob {
  std::string key;
  uint64_t hash;
  std::string text;
  std::vector<int> outputs;
  size_t ops = 0;  // the smallest trace compiles first: the steps of a loop are usually its shortest traces
};

class Compiler {
 public:
  static Compiler& get() {
    static Compiler* c = new Compiler();  // leaked: joined at exit, never destroyed
    return *c;
  }
  void enqueue(CompileJob job) {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopped_) return;
    q_.push_back(std::move(job));
    if (!thread_) {
      owner_ = ::getpid();
      thread_ = new std::thread([this] { run(); });
      std::atexit([] { Compiler::get().shutdown(); });
    }
    cv_.notify_one();
  }
  // No compile queued or running.
  bool idle() {
    std::lock_guard<std::mutex> lk(mu_);
    return (q_.empty() && !busy_) || !thread_;
  }
  // Waits until every queued compile is done.
  void wait() {
    std::unique_lock<std::mutex> lk(mu_);
    idle_.wait(lk, [&] { return (q_.empty() && !busy_) || !thread_; });
  }
  void shutdown() {
    std::unique_lock<std::mutex> lk(mu_);
    stopped_ = true;  // no compile is queued from now on
    q_.clear();       // a compile not started is not worth delaying exit
    if (!thread_ || joined_ || owner_ != ::getpid()) return;
    joined_ = true;
    cv_.notify_all();
    lk.unlock();
    thread_->join();
  }

 private:
  Compiler() {
    pthread_atfork([] { Compiler::get().mu_.lock(); }, [] { Compiler::get().mu_.unlock(); },
                   [] {
                     Compiler& c = Compiler::get();
                     c.mu_.unlock();
                     c.thread_ = nullptr;  // no compile thread in a forked child
                     c.q_.clear();
                     c.busy_ = false;
                   });
  }
  void run();

  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<CompileJob> q_;
  bool busy_ = false, stopped_ = false, joined_ = false;
  std::thread* thread_ = nullptr;
  pid_t owner_ = 0;
};

std::mutex g_stats_mu;
Stats g_stats;
std::atomic<int64_t> g_ops{0};

// Bypass: a trace that has to run op by op (its fused program is compiling, was found slower than its ops, or could
// not be built) costs its recording on top of what strict mode pays for the same ops. So when such a trace repeats
// the trace before it (a loop of one trace), the ops that follow run as in strict mode, not recorded, until the
// compiles are done (or g_bypass_limit ops have run: then a trace is recorded again, to try its program). For a loop
// cut at its period, the bypass ends at a whole number of periods, so the next recorded trace starts where the
// loop's traces start. Guarded by g_mu but for the flag and the count, which every op reads.
std::atomic<bool> g_bypass{false};
std::atomic<int64_t> g_bypass_ops{0};        // ops run since the bypass began
int64_t g_bypass_limit = 0;                  // record again after this many ops
size_t g_bypass_period = 0;                  // g_cut when it began
int64_t g_bypass_trace_ops = 1;              // length of the trace that began it
bool g_bypass_for_compile = false;           // ends once the background compiles are done
std::shared_ptr<FusedProgram> g_bypass_slow;  // a dropped program: the bypassed runs count as its runs op by op
uint64_t g_prev_hash = 0;                    // key hash of the trace launched last
int64_t g_prev_run = 0;                      // launches in a row of that trace
constexpr int64_t kBypassTraces = 64;        // traces' worth of ops before a trace is recorded again

void died(TpuStorage* st) {
  std::lock_guard<std::mutex> g(g_live_mu);
  auto* rec = static_cast<StorageRec*>(st->trace.load(std::memory_order_acquire));
  if (rec) {
    rec->st = nullptr;
    st->trace.store(nullptr, std::memory_order_release);
  }
}

void flushFor(TpuStorage* st) {
  if (st->pending.load(std::memory_order_acquire) == TpuStorage::kLost)
    TORCH_CHECK(false, "tpu: this tensor's value was lost: the fused eager ops computing it failed (the error was "
                       "raised at the synchronization point that launched them)");
  flush(-1);
}

struct HookInstaller {
  HookInstaller() { TpuStorage::setPendingHooks(&flushFor, &died); }
} g_hooks;

// The record of `st` in the trace (created on first touch).
StorageRec& recOf(TpuStorage* st) {
  auto* rec = static_cast<StorageRec*>(st->trace.load(std::memory_order_acquire));
  if (!rec) {
    g_trace.recs.push_back(StorageRec{st, -1, static_cast<int>(g_trace.recs.size())});
    rec = &g_trace.recs.back();
    std::lock_guard<std::mutex> g(g_live_mu);
    st->trace.store(rec, std::memory_order_release);
  }
  return *rec;
}

int addExternal(runtime::BufferPtr buf, const std::string* type) {
  Val v;
  v.buf = std::move(buf);
  v.type = type;
  g_trace.vals.push_back(std::move(v));
  const int id = static_cast<int>(g_trace.vals.size() - 1);
  g_trace.externals.push_back(id);
  put<uint8_t>(g_trace.key, 'x');
  return id;
}

// ---------------------------------------------------------------------------------------------------------------
// Building the fused program of a trace.

// Donation (TORCH_TPU_FUSED_DONATE, default on): a storage the trace overwrites gives its old buffer to the program,
// which writes the storage's final value into it in place, as compiled graphs do (XLA's input-output aliasing).
bool donateWritten() {
  static const bool v = envSwitchOn("TORCH_TPU_FUSED_DONATE");
  return v;
}

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

std::string opList(const Trace& t, size_t max = 8) {
  std::string s;
  for (size_t i = 0; i < t.ops.size() && i < max; ++i) s += (i ? ", " : "") + t.ops[i].p->op;
  if (t.ops.size() > max) s += ", ... (" + std::to_string(t.ops.size()) + " ops)";
  return s;
}

// Runs the trace op by op with the per-op executables. Returns every value's buffer.
std::vector<runtime::BufferPtr> replay(const Trace& t) {
  std::vector<runtime::BufferPtr> bufs(t.vals.size());
  for (int e : t.externals) bufs[e] = t.vals[e].buf;
  std::vector<runtime::Buffer*> raw;
  for (const OpRec& op : t.ops) {
    raw.clear();
    for (int v : op.in) raw.push_back(bufs[v].get());
    std::vector<runtime::BufferPtr> outs;
    try {
      static const std::string kReplayed = "recorded in fused eager mode, run op by op";
      runtime::LaunchScope label("eager", &op.p->op, &kReplayed);
      outs = op.p->executable()->execute(t.device, raw);
    } catch (c10::Error& e) {
      e.add_context("tpu: in " + op.p->op + " (recorded in fused eager mode)");
      throw;
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "tpu: ", op.p->op, " (recorded in fused eager mode) failed: ", e.what());
    }
    for (int j = 0; j < op.num_out; ++j) bufs[op.first_out + j] = std::move(outs[j]);
    if (launchBlocking()) client().synchronize(t.device);
  }
  return bufs;
}

// Gives the trace's live storages their buffers and forgets the trace.
void finishTrace(const std::vector<int>& outputs, std::vector<runtime::BufferPtr>& out_bufs) {
  Trace& t = g_trace;
  {
    std::lock_guard<std::mutex> g(g_live_mu);
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Val& v = t.vals[outputs[i]];
      TpuStorage* st = v.rec >= 0 ? t.recs[v.rec].st : nullptr;
      if (!st || t.recs[v.rec].value != outputs[i]) continue;  // destroyed meanwhile, or not its final value
      std::lock_guard<std::mutex> sg(st->mu);
      st->buffer = std::move(out_bufs[i]);
    }
    for (StorageRec& r : t.recs) {
      if (!r.st) continue;
      r.st->pending.store(0, std::memory_order_release);
      r.st->trace.store(nullptr, std::memory_order_release);
    }
  }
  t = Trace();
}

// Forgets the trace after a failure: the storages it was computing lose their value (reading them raises).
void abandonTrace() {
  Trace& t = g_trace;
  {
    std::lock_guard<std::mutex> g(g_live_mu);
    for (StorageRec& r : t.recs) {
      if (!r.st) continue;
      if (r.st->pending.load(std::memory_order_acquire) == TpuStorage::kPending)
        r.st->pending.store(TpuStorage::kLost, std::memory_order_release);
      r.st->trace.store(nullptr, std::memory_order_release);
    }
  }
  t = Trace();
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

// TORCH_TPU_FUSED_BYPASS=0: traces that run op by op are recorded all the same (benchmarks compare).
bool bypassAllowed() {
  static const bool v = envSwitchOn("TORCH_TPU_FUSED_BYPASS");
  return v;
}

void flushLocked(bool at_limit) {
  Trace& t = g_trace;
  if (t.ops.empty()) {
    abandonTrace();
    return;
  }
  // 1. The values to keep.
  std::vector<int> live = liveValues();

  // 2. The program: a cached one covering the live values, or (first sighting) one from the disk cache. Otherwise
  //    the trace runs op by op, and from its second sighting on a program is compiled in the background.
  const bool oneoff = g_oneoff;
  g_oneoff = false;
  const uint64_t h = hashKey(t.key);
  std::shared_ptr<FusedProgram> fp;
  if (auto* e = g_programs.find(t.key)) fp = *e;
  if (fp && fp->slow && ++fp->slow_runs >= fp->recheck_after) {
    fp->slow = false;  // time it again
    fp->trials = 0;
    fp->slow_runs = 0;
    fp->recheck_after = std::min<int64_t>(fp->recheck_after * 2, int64_t(1) << 20);
  }
  bool usable = fp && fp->exe && !fp->slow &&
                std::includes(fp->outputs.begin(), fp->outputs.end(), live.begin(), live.end());
  bool from_disk = false, queued = false, first = false;
  double secs = 0;
  if (!usable && !oneoff && !(fp && (!fp->exe || fp->slow))) {
    if (!g_compiling.count(h)) {
      try {
        if (!fp && !g_seen.count(h)) {
          auto t0 = std::chrono::steady_clock::now();
          core::ExecutableLookup ex =
              core::executableFor(fusedText(live), core::ExecutableCaches{false, true, /*compile=*/false});
          secs = secondsSince(t0);
          if (ex.exe) {
            fp = std::make_shared<FusedProgram>(FusedProgram{ex.exe, live});
            g_programs.insert(t.key, fp, fusedCacheLimit());
            usable = from_disk = true;
          } else {
            if (g_seen.size() > 65536) g_seen.clear();
            g_seen.insert(h);
            first = true;
          }
        } else {
          // A second live set for the same trace (e.g. a loop cut at a period that falls at several places of its
          // step: the same trace, other Python variables alive): the program keeps every storage's final value,
          // so that one more compile covers every later launch (growing the union one live set at a time would
          // compile again and again, running op by op meanwhile).
          std::vector<int> want = fp ? finalValues() : live;
          Compiler::get().enqueue(CompileJob{t.key, h, fusedText(want), std::move(want), t.ops.size()});
          g_compiling.insert(h);
          g_seen.erase(h);
          queued = true;
        }
      } catch (const std::exception&) {
        // No fused program for this trace: it runs op by op, where a failing op names itself.
        g_programs.insert(t.key, std::make_shared<FusedProgram>(), fusedCacheLimit());
      }
    }
  }
  // Traces cut at the loop period that keep being new (several in a row, none seen before): the loop changed; look
  // for its period again.
  if (at_limit && g_cut > 0 && t.ops.size() == g_cut) {
    if (first) {
      if (++g_cut_misses >= 8) g_cut = 0;
    } else {
      g_cut_misses = 0;
    }
  }
  // The speed check: the program's first launches alternate with runs op by op, each timed to completion.
  const int set_trials = g_speed_trials.load(std::memory_order_relaxed);
  const int trials = set_trials < 0 ? speedTrials() : set_trials;
  // The first kSpeedWarmup launches are not timed (a new executable's first runs pay one-time costs: they can be
  // ten times slower); then launches alternate, op by op first.
  const bool trial = usable && trials > 0 && fp->trials < kSpeedWarmup + 2 * trials;
  const bool trial_replay = trial && fp->trials >= kSpeedWarmup && (fp->trials - kSpeedWarmup) % 2 == 0;
  {
    std::lock_guard<std::mutex> g(g_stats_mu);
    g_stats.flushes++;
    if (at_limit) g_stats.limit_flushes++;
    if (usable && !trial_replay) g_stats.fused_hits++;
    if (from_disk) g_stats.fused_disk_hits++;
    if (queued) g_stats.fused_compiles++;
    if (!usable || trial_replay) g_stats.replays++;
    if (trial) g_stats.speed_trials++;
    g_stats.compile_seconds += secs;
    g_stats.entries = static_cast<int64_t>(g_programs.size());
    g_stats.evictions = g_programs.evictions();
  }

  // 3. Launch.
  std::vector<int> outputs = live;
  std::vector<runtime::BufferPtr> out_bufs;
  bool timed = trial && fp->trials >= kSpeedWarmup;  // false when the fused launch fails (nothing to compare)
  if (trial && !timed) fp->trials++;
  std::chrono::steady_clock::time_point t0;
  try {
    if (timed) {
      client().synchronize(t.device);  // the timed launch runs alone
      t0 = std::chrono::steady_clock::now();
    }
    if (usable && !trial_replay) {
      std::vector<runtime::Buffer*> raw;
      raw.reserve(t.externals.size());
      for (int e : t.externals) raw.push_back(t.vals[e].buf.get());
      // Inputs the program aliases are donated when nobody but the trace and their storage holds the buffer.
      std::vector<bool> donate;
      const std::vector<int> alias = aliasedOutputs(fp->outputs);
      int64_t donated = 0;
      std::unique_lock<std::mutex> live_lk(g_live_mu, std::defer_lock);  // a storage may die on another thread
      if (std::find_if(alias.begin(), alias.end(), [](int a) { return a >= 0; }) != alias.end()) live_lk.lock();
      for (size_t i = 0; i < alias.size(); ++i) {
        if (alias[i] < 0) continue;
        const Val& in = t.vals[t.externals[i]];
        long holders = 1;  // the trace
        TpuStorage* st = t.recs[in.rec].st;
        if (st) {
          std::lock_guard<std::mutex> sg(st->mu);
          if (st->buffer.get() != in.buf.get()) continue;  // held elsewhere too
          holders = 2;
        }
        if (in.buf.use_count() > holders) continue;
        if (donate.empty()) donate.assign(raw.size(), false);
        donate[i] = true;
        ++donated;
      }
      if (live_lk.owns_lock()) live_lk.unlock();
      if (donated) {
        std::lock_guard<std::mutex> g(g_stats_mu);
        g_stats.donated += donated;
      }
      try {
        std::string name, ops;
        if (runtime::launchTraceActive()) {  // what a profiler names the program
          name = std::to_string(t.ops.size()) + " ops";
          ops = opList(t, 64);
        }
        runtime::LaunchScope label("fused", &name, &ops);
        out_bufs = fp->exe->execute(t.device, raw, donate);
        outputs = fp->outputs;  // values that died meanwhile are dropped by finishTrace
      } catch (const std::exception&) {
        // Nothing ran. Run op by op: the op that fails names itself.
        usable = false;
        timed = false;
      }
      if (usable && launchBlocking()) client().synchronize(t.device);
    }
    if (!usable || trial_replay) {
      outputs = live;
      std::vector<runtime::BufferPtr> all = replay(t);
      out_bufs.clear();
      for (int v : outputs) out_bufs.push_back(std::move(all[v]));
    }
    if (timed) {
      client().synchronize(t.device);
      const double dt = secondsSince(t0);
      if (trial_replay) {
        fp->best_replay = fp->trials == kSpeedWarmup ? dt : std::min(fp->best_replay, dt);
      } else {
        const double f = std::max(0.0, dt + g_speed_bias);
        fp->best_fused = fp->trials == kSpeedWarmup + 1 ? f : std::min(fp->best_fused, f);
      }
      if (++fp->trials == kSpeedWarmup + 2 * trials && fp->best_fused >= fp->best_replay) {
        fp->slow = true;  // no faster than op by op: stop fusing this trace
        std::lock_guard<std::mutex> g(g_stats_mu);
        g_stats.slow_programs++;
      }
    }
  } catch (...) {
    abandonTrace();
    throw;
  }
  for (const auto& c : t.checks) {
    auto it = std::lower_bound(outputs.begin(), outputs.end(), c.first);
    if (it != outputs.end() && *it == c.first)
      core::addPendingCheck(t.device, out_bufs[static_cast<size_t>(it - outputs.begin())], c.second);
  }
  // Ran op by op with no program to wait for here (compiling, dropped as slow, or none could be built): the next
  // ops run as in strict mode (see g_bypass). A first sighting, a speed-check run and a one-off trace do not.
  // Only when the trace repeats the one before it (a loop whose every step, or cut, is this trace): a loop of several
  // different traces keeps recording, so that each of them is seen and compiled.
  g_prev_run = h == g_prev_hash ? g_prev_run + 1 : 1;
  g_prev_hash = h;
  if (!usable && !trial_replay && !oneoff && g_prev_run >= 2 && !launchBlocking() && bypassAllowed()) {
    // Waiting for a first program: once the trace was launched three times in a row (seen, queued, still
    // compiling), in a loop whose steps end at synchronization points. Not in a loop cut at its period (where the
    // cut falls can vary the trace and what is alive at its end: those variants are still to be seen), nor while a
    // program covering more live values compiles.
    const bool compiling = !fp && g_prev_run >= 3 && g_cut == 0 && g_compiling.count(h) > 0;
    if (compiling || (fp && (!fp->exe || fp->slow))) {
      g_bypass_trace_ops = static_cast<int64_t>(std::max<size_t>(t.ops.size(), 1));
      g_bypass_limit = kBypassTraces * g_bypass_trace_ops;
      g_bypass_period = g_cut;
      g_bypass_for_compile = compiling;
      g_bypass_slow = fp && fp->exe && fp->slow ? fp : nullptr;
      g_bypass_ops.store(0, std::memory_order_relaxed);
      g_bypass.store(true, std::memory_order_release);
    }
  }
  finishTrace(outputs, out_bufs);
}

void endBypassLocked() {
  if (!g_bypass.load(std::memory_order_relaxed)) return;
  const int64_t n = g_bypass_ops.load(std::memory_order_relaxed);
  if (g_bypass_slow) g_bypass_slow->slow_runs += n / g_bypass_trace_ops;  // the traces it ran as strict mode would
  g_bypass_slow.reset();
  g_bypass.store(false, std::memory_order_release);
  std::lock_guard<std::mutex> g(g_stats_mu);
  g_stats.bypassed += n;
}

void Compiler::run() {
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

// The smallest period p of the recorded op sequence (its last 2p entries repeat), 0 if none.
size_t loopPeriod(const std::vector<uint64_t>& seq) {
  const size_t n = seq.size();
  for (size_t p = 1; 2 * p <= n; ++p) {
    bool same = true;
    for (size_t i = 0; i < p && same; ++i) same = seq[n - p + i] == seq[n - 2 * p + i];
    if (same) return p;
  }
  return 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------

thread_local bool t_paused = false;

bool active() {
  int m = g_mode.load(std::memory_order_relaxed);
  if (m < 0) {
    m = readMode();
    g_mode = m;
  }
  return m == 1 && !t_paused;
}

bool recordNext() {
  if (!active()) return false;
  if (C10_LIKELY(!g_bypass.load(std::memory_order_acquire))) return true;
  const int64_t n = g_bypass_ops.fetch_add(1, std::memory_order_relaxed);
  const size_t period = g_bypass_period;
  if (period > 0 && n % static_cast<int64_t>(period) != 0) return false;  // inside a period of the loop
  if (n < g_bypass_limit && !(g_bypass_for_compile && Compiler::get().idle())) return false;
  std::lock_guard<std::recursive_mutex> lk(g_mu);
  g_bypass_ops.fetch_sub(1, std::memory_order_relaxed);  // this op is recorded
  endBypassLocked();
  return true;
}

Pause::Pause() : prev_(t_paused) { t_paused = true; }
Pause::~Pause() { t_paused = prev_; }

std::string mode() { return active() ? "fused" : "strict"; }

void setMode(const std::string& m) {
  TORCH_CHECK_VALUE(m == "strict" || m == "fused", "eager mode must be 'strict' or 'fused', got '", m, "'");
  flush(-1);
  {
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    endBypassLocked();
  }
  g_mode = m == "fused" ? 1 : 0;
}

std::recursive_mutex& mutex() { return g_mu; }

std::vector<at::Tensor> record(const std::shared_ptr<EagerProgram>& p, core::Signature& sig, core::Program::HostFn host,
                               const std::optional<at::Generator>& gen) {
  std::lock_guard<std::recursive_mutex> lk(g_mu);
  const EagerProgram::Function& fn = p->function();
  TORCH_INTERNAL_ASSERT(fn.arg_types.size() == p->prog.params.size(), "tpu: fused eager: parameter count mismatch");
  if (g_trace.device >= 0 && g_trace.device != sig.device) flushLocked(false);
  Trace& t = g_trace;
  t.device = sig.device;
  const core::Program& prog = p->prog;
  const int k = static_cast<int>(t.ops.size());
  OpRec op;
  op.p = p;
  op.in.reserve(prog.params.size());
  put<uint64_t>(t.key, p->id);
  for (size_t i = 0; i < prog.params.size(); ++i) {
    const core::Param& prm = prog.params[i];
    const std::string* type = &fn.arg_types[i];
    switch (prm.kind) {
      case core::Param::Kind::Storage: {
        TpuStorage* st = sig.storages[prm.index];
        StorageRec& r = recOf(st);
        if (r.value < 0) {
          TORCH_INTERNAL_ASSERT(!sig.pending[prm.index], "tpu: a pending storage outside the trace");
          r.value = addExternal(sig.buffers[prm.index], type);
          t.vals[r.value].rec = r.index;
        } else {
          put<uint8_t>(t.key, 'v');
          put<int32_t>(t.key, r.value);
        }
        op.in.push_back(r.value);
        break;
      }
      case core::Param::Kind::Offset:
        op.in.push_back(addExternal(
            scalarBuffer(c10::Scalar(sig.tensors[prm.index].t.storage_offset()), shlo::DType::S64, sig.device), type));
        break;
      case core::Param::Kind::Rng: {
        uint64_t state[2] = {nextRngKey(gen, sig.device), 0};
        op.in.push_back(addExternal(client().fromHost(state, runtime::ElementType::U64, {2}, sig.device), type));
        break;
      }
      case core::Param::Kind::Host:
        op.in.push_back(addExternal(host(prm), type));
        break;
    }
  }
  // Outputs: written storages' new buffers, then fresh results.
  op.first_out = static_cast<int>(t.vals.size());
  op.num_out = static_cast<int>(fn.result_types.size());
  std::vector<at::Tensor> fresh;
  fresh.reserve(prog.results.size());
  int j = 0;
  auto produce = [&](int ri) {
    Val v;
    v.op = k;
    v.out = j;
    v.rec = ri;
    v.type = &fn.result_types[j];
    t.vals.push_back(std::move(v));
    ++j;
    return static_cast<int>(t.vals.size() - 1);
  };
  for (int slot : prog.written_slots) {
    TpuStorage* st = sig.storages[slot];
    StorageRec& r = recOf(st);
    r.value = produce(r.index);
    st->pending_dims = sig.bdims[slot];
    st->pending_type = static_cast<runtime::ElementType>(sig.btype[slot]);
    st->pending.store(TpuStorage::kPending, std::memory_order_release);
  }
  for (const core::Program::Result& res : prog.results) {
    int64_t n = 1;
    for (int64_t d : res.sizes) n *= d;
    at::Tensor out = emptyTensor(static_cast<size_t>(n) * c10::elementSize(res.dtype), res.dtype, res.sizes, sig.device);
    TpuStorage* st = storageOf(out);
    StorageRec& r = recOf(st);
    r.value = produce(r.index);
    st->pending_dims = res.sizes;
    st->pending_type = static_cast<runtime::ElementType>(toDType(res.dtype));
    st->pending.store(TpuStorage::kPending, std::memory_order_release);
    fresh.push_back(std::move(out));
  }
  while (j < op.num_out) {
    const int id = produce(-1);
    // The last output of a program with device-side checks is their flag.
    if (prog.checks && j == op.num_out) t.checks.emplace_back(id, prog.checks);
  }
  t.ops.push_back(std::move(op));
  t.seq.push_back(p->id);
  sig.buffers.clear();
  g_ops.fetch_add(1, std::memory_order_relaxed);

  // Cut: at the loop period found earlier, or at the size limit (then look for a period).
  const size_t n = t.ops.size();
  if (launchBlocking()) {
    flushLocked(false);
  } else if (g_cut > 0 && n >= g_cut) {
    flushLocked(true);
  } else if (n >= maxOps()) {
    size_t p_len = loopPeriod(t.seq);
    g_cut = p_len ? p_len * ((kMinCut + p_len - 1) / p_len) : 0;
    if (g_cut > maxOps()) g_cut = 0;
    g_oneoff = g_cut > 0;
    g_cut_misses = 0;
    flushLocked(true);
  }
  return fresh;
}

void flush(int device) {
  std::lock_guard<std::recursive_mutex> lk(g_mu);
  if (g_trace.ops.empty() && g_trace.recs.empty()) return;
  if (device >= 0 && g_trace.device >= 0 && g_trace.device != device) return;
  flushLocked(false);
}

std::string pendingText() {
  std::lock_guard<std::recursive_mutex> lk(g_mu);
  if (g_trace.ops.empty()) return "";
  return fusedText(liveValues());
}

size_t pendingOps() {
  std::lock_guard<std::recursive_mutex> lk(g_mu);
  return g_trace.ops.size();
}

Stats stats() {
  std::lock_guard<std::mutex> g(g_stats_mu);
  Stats s = g_stats;
  s.ops = g_ops.load();
  if (g_bypass.load(std::memory_order_acquire)) s.bypassed += g_bypass_ops.load(std::memory_order_relaxed);
  return s;
}

void clearCache() {
  Compiler::get().wait();
  std::lock_guard<std::recursive_mutex> lk(g_mu);
  g_programs.clear();
  g_seen.clear();
}

void waitForCompiles() { Compiler::get().wait(); }

void setSpeedCheck(int trials, double bias_seconds) {
  std::lock_guard<std::recursive_mutex> lk(g_mu);
  g_speed_trials = trials;
  g_speed_bias = bias_seconds;
}

void shutdown() { Compiler::get().shutdown(); }

}  // namespace torch_tpu::fused
