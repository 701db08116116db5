// Fused eager's internals, shared by its parts (eager/fused.h describes the mode):
//  - fused_record.cpp: the trace, and recording ops into it (the public API of fused.h but the flush);
//  - fused_program.cpp: a trace's fused program (its text, its cache, the background compiler);
//  - fused_policy.cpp: whether to use it (speed check), whether to record at all (bypass), which buffers it takes
//    (donation);
//  - fused_flush.cpp: launching a trace (as its fused program or op by op) and handing storages their buffers.
// Everything here is guarded by g_mu unless noted.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include <pthread.h>
#include <unistd.h>

#include "core/checks.h"
#include "core/config.h"
#include "core/lru.h"
#include "eager/fused.h"
#include "settings/settings.h"

namespace torch_tpu::fused::detail {

// ---------------------------------------------------------------------------------------------------------------
// Settings.

inline size_t maxOps() {
  static const size_t v = [] {
    return static_cast<size_t>(settings::integer("TORCH_TPU_FUSED_MAX_OPS"));
  }();
  return v;
}

// A trace shorter than this is not worth cutting at a loop period of its own: a cut covers whole periods.
constexpr size_t kMinCut = 32;

// Fused programs are large (a whole step each): keep a sixteenth as many as the per-op caches.
inline size_t fusedCacheLimit() {
  const size_t n = core::programCacheLimit();
  return n == 0 ? 0 : std::max<size_t>(16, n / 16);
}

inline double secondsSince(std::chrono::steady_clock::time_point t0) {
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

extern std::recursive_mutex g_mu;  // the trace and the fused program cache
extern Trace g_trace;
extern size_t g_cut;      // cut traces at this length (a whole number of loop periods); 0: at the size limit
extern int g_cut_misses;  // consecutive cut traces seen for the first time
extern bool g_oneoff;     // the trace being flushed was cut at the size limit when its loop period was found: it
                          // is not a step of the loop (the next ones are), so it gets no fused program
// Guards StorageRec::st and TpuStorage::trace against a storage being destroyed on another thread. Never held while
// taking another lock but a storage's own mutex.
extern std::mutex g_live_mu;

extern std::mutex g_stats_mu;
extern Stats g_stats;            // guarded by g_stats_mu
extern std::atomic<int64_t> g_ops;

// The fused program of a trace key. Its outputs are a superset of the values alive at any launch seen so far (what
// is alive can vary between otherwise identical steps, e.g. with the timing of Python's garbage collector): a launch
// whose live values it covers uses it, another one makes a program with the union.
struct FusedProgram {
  runtime::ExecutablePtr exe;  // null: none could be built (the trace always runs op by op)
  std::vector<int> outputs;    // value ids, ascending
  // The speed check (fused_policy.cpp): after kSpeedWarmup untimed launches, is the program faster than strict
  // mode? A program no faster is dropped (`slow`: the trace runs as strict mode would from then on).
  //  - By steps, when the trace repeats back to back (a loop of this one trace): blocks of kBlockSteps steps
  //    recorded and launched as the program alternate with blocks run as strict mode runs them (bypassed, not
  //    recorded), each timed from an idle device to an idle device; what is compared is a whole step of each mode,
  //    recording included.
  //  - By launches otherwise (other traces run between this one's launches, so its steps cannot be run apart): the
  //    program's launches alternate with launches of the recorded trace op by op, each timed from an idle device.
  int trials = 0;    // launches so far (warm-up, then timed launches by launches; rounds of two blocks by steps)
  int by_steps = -1; // the check's kind: -1 undecided (warm-up), 1 by steps, 0 by launches
  int block = -1;    // by steps: program launches in the current timed block (-1: none begun)
  std::chrono::steady_clock::time_point block_t0;
  double best_fused = 0, best_replay = 0;  // seconds, the fastest of each kind so far (per step by steps)
  bool slow = false;
  // A slow program is checked again after 64 runs op by op, then 128, 256, ... (the machine's load may have misled
  // the check).
  int64_t slow_runs = 0, recheck_after = 64;
};
extern core::LruMap<std::shared_ptr<FusedProgram>> g_programs;  // by trace key
extern std::unordered_set<uint64_t> g_seen;       // hashes of trace keys run once without a fused program
extern std::unordered_set<uint64_t> g_compiling;  // hashes of trace keys whose program is being compiled

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

// ---- recording (fused_record.cpp) ----
// The record of `st` in the trace (created on first touch).
StorageRec& recOf(TpuStorage* st);
// The smallest period p of the recorded op sequence (its last 2p entries repeat), 0 if none.
size_t loopPeriod(const std::vector<uint64_t>& seq);

// ---- the fused program (fused_program.cpp) ----
// Per program input (external value): the index among `outputs` (ascending value ids) of the value that overwrites
// its storage, when the program may take its buffer for it, else -1.
std::vector<int> aliasedOutputs(const std::vector<int>& outputs);
// The StableHLO text of the trace's program with these outputs (ascending value ids).
std::string fusedText(const std::vector<int>& outputs);
uint64_t hashKey(const std::string& k);
// The trace's ops, for a profiler ("add, mul, ... (N ops)").
std::string opList(const Trace& t, size_t max = 8);
// The values a launch keeps: the current values of storages still alive, and the device-side check flags.
std::vector<int> liveValues();
// Every storage's final value in the trace (alive or not), and the check flags: what any launch could keep.
std::vector<int> finalValues();

// ---- policy (fused_policy.cpp) ----
// Speed check: whether this launch is timed, and which kind it runs.
struct SpeedTrial {
  bool trial = false;   // one of the program's first launches (warm-up or checked)
  bool replay = false;  // by launches: this one runs op by op, to compare
  bool timed = false;   // by launches: this launch is timed
  bool steps = false;   // by steps: this launch is one of a timed block's (noteLaunch times the block)
  int trials = 0;       // timed launches of each kind (by launches), rounds of two blocks (by steps)
  std::chrono::steady_clock::time_point t0;
};
SpeedTrial planSpeedTrial(FusedProgram* fp, bool usable, uint64_t hash);
// Times the launch from an idle device (when timed).
void startSpeedTrial(SpeedTrial& s, int device);
// Waits for the launch and records its time; a program no faster than op by op is dropped (FusedProgram::slow).
void endSpeedTrial(SpeedTrial& s, FusedProgram& fp, int device);
// Donation: per program input, whether the fused program takes its buffer (counted in the stats).
std::vector<bool> donatedInputs(const Trace& t, const FusedProgram& fp);
// Bypass: after a launch that ran op by op (`ran_op_by_op`, not a speed-check run), the next ops may run as in strict
// mode (see fused_policy.cpp).
// By steps, the speed check's fused blocks are timed here too (a launch of the program with `s.steps`), and a
// strict block begins (a bypass of kBlockSteps steps, timed where it ends in recordNext).
void noteLaunch(const Trace& t, uint64_t hash, const std::shared_ptr<FusedProgram>& fp, bool ran_op_by_op,
                bool oneoff, const SpeedTrial& s);
void endBypassLocked();
// A timed block of the speed check by steps under way ends untimed (the mode changes: what follows is not the loop).
void endSpeedBlockLocked();

// ---- flush (fused_flush.cpp) ----
// Launches the trace (g_mu held). `at_limit`: cut at the size limit or the loop period.
void flushLocked(bool at_limit);

}  // namespace torch_tpu::fused::detail
