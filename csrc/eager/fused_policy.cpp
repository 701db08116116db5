// Fused eager, policy (eager/fused_internal.h): the speed check (is a trace's fused program faster than strict mode?),
// the bypass (when recording would only cost) and donation (which buffers a fused program takes over).
#include <c10/macros/Macros.h>

#include <algorithm>

#include "core/client.h"
#include "eager/fused_internal.h"

namespace torch_tpu::fused {

using namespace detail;

namespace {

// ---------------------------------------------------------------------------------------------------------------
// Speed check.

// Launches timed by the speed check (each kind); 0: no check (every fused program is used).
int speedTrials() {
  static const int v = [] {
    return static_cast<int>(settings::integer("TORCH_TPU_FUSED_SPEED_CHECK"));
  }();
  return v;
}
constexpr int kSpeedWarmup = 3;
// Steps per timed block of the check by steps (FusedProgram::by_steps).
constexpr int kBlockSteps = 8;
std::atomic<int> g_speed_trials{-1};  // -1: from the environment; set by tests
double g_speed_bias = 0;              // tests: seconds added to each timed fused launch or step (negative: taken off)

int checkTrials() {
  const int set_trials = g_speed_trials.load(std::memory_order_relaxed);
  return set_trials < 0 ? speedTrials() : set_trials;
}

// The program whose timed fused block is under way (by steps): a launch of another trace ends that block, and the
// program is checked by launches instead (its trace is not a loop of its own).
std::shared_ptr<FusedProgram> g_block_fp;

// ---------------------------------------------------------------------------------------------------------------
// Bypass.

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
std::shared_ptr<FusedProgram> g_bypass_check; // the speed check's strict block (by steps): timed where it ends
std::chrono::steady_clock::time_point g_bypass_t0;
int g_bypass_device = -1;
uint64_t g_prev_hash = 0;                    // key hash of the trace launched last
int64_t g_prev_run = 0;                      // launches in a row of that trace
constexpr int64_t kBypassTraces = 64;        // traces' worth of ops before a trace is recorded again

// TORCH_TPU_FUSED_BYPASS=0: traces that run op by op are recorded all the same (benchmarks compare).
bool bypassAllowed() {
  static const bool v = envSwitchOn("TORCH_TPU_FUSED_BYPASS");
  return v;
}

// The next ops run as in strict mode (see g_bypass), `traces` of the trace `t`'s length at most.
void beginBypass(const Trace& t, int64_t traces, bool for_compile, std::shared_ptr<FusedProgram> slow,
                 std::shared_ptr<FusedProgram> check) {
  g_bypass_trace_ops = static_cast<int64_t>(std::max<size_t>(t.ops.size(), 1));
  g_bypass_limit = traces * g_bypass_trace_ops;
  g_bypass_period = g_cut;
  g_bypass_for_compile = for_compile;
  g_bypass_slow = std::move(slow);
  g_bypass_check = std::move(check);
  g_bypass_device = t.device;
  g_bypass_ops.store(0, std::memory_order_relaxed);
  g_bypass.store(true, std::memory_order_release);
  g_bypass_t0 = std::chrono::steady_clock::now();
}

// A finished check: a program no faster than what it is compared with is dropped.
void decide(FusedProgram& fp) {
  std::lock_guard<std::mutex> g(g_stats_mu);
  g_stats.speed_checks++;
  if (fp.best_fused < fp.best_replay) return;
  fp.slow = true;  // no faster: stop fusing this trace
  g_stats.slow_programs++;
}

// By steps: a launch of the program in a timed block. The block begins after the first such launch (from an idle
// device) and ends after kBlockSteps more; then kBlockSteps steps run as strict mode runs them (a bypass, timed
// where it ends: endBypassLocked).
void blockStep(const Trace& t, const std::shared_ptr<FusedProgram>& fp) {
  FusedProgram& p = *fp;
  if (p.block < 0) {
    client().synchronize(t.device);
    p.block = 0;
    p.block_t0 = std::chrono::steady_clock::now();
    g_block_fp = fp;
    return;
  }
  if (++p.block < kBlockSteps) return;
  client().synchronize(t.device);
  const double step = std::max(0.0, secondsSince(p.block_t0) / kBlockSteps + g_speed_bias);
  p.best_fused = p.trials == kSpeedWarmup ? step : std::min(p.best_fused, step);
  p.block = -1;
  g_block_fp.reset();
  beginBypass(t, kBlockSteps, false, nullptr, fp);
}

// A timed block of the check by steps ends unfinished. Another trace ran: the program is checked by launches from its
// next launch on (its trace is not a loop of its own). Its own trace ran op by op (e.g. its live values changed): the
// block begins again at the program's next launch.
void abandonBlock(bool other_trace) {
  FusedProgram& p = *g_block_fp;
  p.block = -1;
  if (other_trace) {
    p.by_steps = 0;
    p.trials = kSpeedWarmup;
  }
  g_block_fp.reset();
}

}  // namespace

namespace detail {

SpeedTrial planSpeedTrial(FusedProgram* fp, bool usable, uint64_t hash) {
  SpeedTrial s;
  const int trials = checkTrials();
  s.trials = trials;
  if (!usable || trials <= 0) return s;
  // The first kSpeedWarmup launches are not timed (a new executable's first runs pay one-time costs: they can be
  // ten times slower).
  if (fp->trials < kSpeedWarmup) {
    s.trial = true;
    fp->trials++;
    return s;
  }
  // Then by steps when the trace repeats back to back and its steps can run as strict mode runs them; else by
  // launches, alternating, op by op first.
  if (fp->by_steps < 0) fp->by_steps = hash == g_prev_hash && bypassAllowed() && !launchBlocking() ? 1 : 0;
  if (fp->by_steps == 1) {
    s.trial = s.steps = fp->trials < kSpeedWarmup + trials;
    return s;
  }
  s.trial = s.timed = fp->trials < kSpeedWarmup + 2 * trials;
  s.replay = s.timed && (fp->trials - kSpeedWarmup) % 2 == 0;
  return s;
}

void startSpeedTrial(SpeedTrial& s, int device) {
  if (!s.timed) return;
  client().synchronize(device);  // the timed launch runs alone
  s.t0 = std::chrono::steady_clock::now();
}

void endSpeedTrial(SpeedTrial& s, FusedProgram& fp, int device) {
  if (!s.timed) return;
  client().synchronize(device);
  const double dt = secondsSince(s.t0);
  if (s.replay) {
    fp.best_replay = fp.trials == kSpeedWarmup ? dt : std::min(fp.best_replay, dt);
  } else {
    const double f = std::max(0.0, dt + g_speed_bias);
    fp.best_fused = fp.trials == kSpeedWarmup + 1 ? f : std::min(fp.best_fused, f);
  }
  if (++fp.trials == kSpeedWarmup + 2 * s.trials) decide(fp);
}

std::vector<bool> donatedInputs(const Trace& t, const FusedProgram& fp) {
  // Inputs the program aliases are donated when nobody but the trace and their storage holds the buffer.
  std::vector<bool> donate;
  const std::vector<int> alias = aliasedOutputs(fp.outputs);
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
    if (donate.empty()) donate.assign(t.externals.size(), false);
    donate[i] = true;
    ++donated;
  }
  if (live_lk.owns_lock()) live_lk.unlock();
  if (donated) {
    std::lock_guard<std::mutex> g(g_stats_mu);
    g_stats.donated += donated;
  }
  return donate;
}

void noteLaunch(const Trace& t, uint64_t h, const std::shared_ptr<FusedProgram>& fp, bool ran_op_by_op,
                bool oneoff, const SpeedTrial& s) {
  if (g_block_fp && (g_block_fp != fp || !s.steps)) abandonBlock(g_block_fp != fp);
  // Ran op by op with no program to wait for here (compiling, dropped as slow, or none could be built): the next
  // ops run as in strict mode (see g_bypass). A first sighting, a speed-check run and a one-off trace do not.
  // Only when the trace repeats the one before it (a loop whose every step, or cut, is this trace): a loop of several
  // different traces keeps recording, so that each of them is seen and compiled.
  g_prev_run = h == g_prev_hash ? g_prev_run + 1 : 1;
  g_prev_hash = h;
  if (s.steps) {
    blockStep(t, fp);
    return;
  }
  if (!ran_op_by_op || oneoff || g_prev_run < 2 || launchBlocking() || !bypassAllowed()) return;
  // Waiting for a first program: once the trace was launched three times in a row (seen, queued, still
  // compiling), in a loop whose steps end at synchronization points. Not in a loop cut at its period (where the
  // cut falls can vary the trace and what is alive at its end: those variants are still to be seen), nor while a
  // program covering more live values compiles.
  const bool compiling = !fp && g_prev_run >= 3 && g_cut == 0 && g_compiling.count(h) > 0;
  if (!compiling && !(fp && (!fp->exe || fp->slow))) return;
  beginBypass(t, kBypassTraces, compiling, fp && fp->exe && fp->slow ? fp : nullptr, nullptr);
}

void endSpeedBlockLocked() {
  if (!g_block_fp) return;
  g_block_fp->block = -1;  // begins again at the program's next launch
  g_block_fp.reset();
}

void endBypassLocked() {
  if (!g_bypass.load(std::memory_order_relaxed)) return;
  const int64_t n = g_bypass_ops.load(std::memory_order_relaxed);
  if (g_bypass_slow) g_bypass_slow->slow_runs += n / g_bypass_trace_ops;  // the traces it ran as strict mode would
  g_bypass_slow.reset();
  if (g_bypass_check && n >= g_bypass_limit) {
    // The check's strict block ran its steps: the time per step from the idle device it began at to an idle one.
    client().synchronize(g_bypass_device);
    FusedProgram& p = *g_bypass_check;
    const double step = secondsSince(g_bypass_t0) / (n / g_bypass_trace_ops);
    p.best_replay = p.trials == kSpeedWarmup ? step : std::min(p.best_replay, step);
    // Decided after every round, or after two when one mode is clearly (25%) faster: the strict blocks and the
    // synchronizations at each block's ends cost the loop what fusing would have saved.
    const int rounds = ++p.trials - kSpeedWarmup, all = checkTrials();
    const bool clear = rounds >= 2 && (p.best_fused * 1.25 < p.best_replay || p.best_replay * 1.25 < p.best_fused);
    if (rounds >= all || clear) {
      p.trials = kSpeedWarmup + all;
      decide(p);
    }
    std::lock_guard<std::mutex> g(g_stats_mu);
    g_stats.speed_trials += n / g_bypass_trace_ops;
  }
  g_bypass_check.reset();
  g_bypass.store(false, std::memory_order_release);
  std::lock_guard<std::mutex> g(g_stats_mu);
  g_stats.bypassed += n;
}

}  // namespace detail

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

Stats stats() {
  std::lock_guard<std::mutex> g(g_stats_mu);
  Stats s = g_stats;
  s.ops = g_ops.load();
  if (g_bypass.load(std::memory_order_acquire)) s.bypassed += g_bypass_ops.load(std::memory_order_relaxed);
  return s;
}

void setSpeedCheck(int trials, double bias_seconds) {
  std::lock_guard<std::recursive_mutex> lk(g_mu);
  g_speed_trials = trials;
  g_speed_bias = bias_seconds;
}

}  // namespace torch_tpu::fused
