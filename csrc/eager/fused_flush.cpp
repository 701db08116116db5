// Fused eager, the flush (eager/fused_internal.h): a synchronization point launches the trace, as its fused program
// or op by op, through core's launch (core/launch.h: memory check, launch count, profiler label), and hands the
// storages still alive their buffers.
#include <c10/util/Exception.h>

#include <algorithm>

#include "core/client.h"
#include "core/executables.h"
#include "core/launch.h"
#include "eager/fused_internal.h"

namespace torch_tpu::fused {

using namespace detail;

namespace {

// Runs the trace op by op with the per-op executables. Returns every value's buffer.
std::vector<runtime::BufferPtr> replay(const Trace& t) {
  std::vector<runtime::BufferPtr> bufs(t.vals.size());
  for (int e : t.externals) bufs[e] = t.vals[e].buf;
  std::vector<runtime::Buffer*> raw;
  static const std::string kReplayed = "recorded in fused eager mode, run op by op";
  for (const OpRec& op : t.ops) {
    raw.clear();
    for (int v : op.in) raw.push_back(bufs[v].get());
    std::vector<runtime::BufferPtr> outs;
    core::LaunchOptions label;
    label.kind = "eager";
    label.name = &op.p->op;
    label.detail = &kReplayed;
    try {
      outs = core::launchExecutable(*op.p->executable(), t.device, raw, label);
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

// Which program a flush launches.
struct Choice {
  std::shared_ptr<FusedProgram> fp;  // the trace's entry (null: none yet)
  uint64_t hash = 0;
  bool usable = false;     // fp covers the live values and is used
  bool from_disk = false;  // read from the disk cache now
  bool queued = false;     // a compile was queued now
  bool first = false;      // the trace's first sighting
  bool oneoff = false;     // see g_oneoff
  double secs = 0;         // spent reading the disk cache
};

// A dropped program is timed again after 64, 128, ... runs op by op.
void maybeRecheck(FusedProgram& fp) {
  if (!fp.slow || ++fp.slow_runs < fp.recheck_after) return;
  fp.slow = false;  // time it again
  fp.trials = 0;
  fp.by_steps = -1;
  fp.block = -1;
  fp.slow_runs = 0;
  fp.recheck_after = std::min<int64_t>(fp.recheck_after * 2, int64_t(1) << 20);
}

// No usable program: on a first sighting, look in the disk cache; from the second on, compile one in the background.
void findOrQueue(Choice& c, const std::vector<int>& live) {
  const Trace& t = g_trace;
  try {
    if (!c.fp && !g_seen.count(c.hash)) {
      auto t0 = std::chrono::steady_clock::now();
      core::ExecutableLookup ex =
          core::executableFor(fusedText(live), core::ExecutableCaches{false, true, /*compile=*/false});
      c.secs = secondsSince(t0);
      if (ex.exe) {
        c.fp = std::make_shared<FusedProgram>(FusedProgram{ex.exe, live});
        g_programs.insert(t.key, c.fp, fusedCacheLimit());
        c.usable = c.from_disk = true;
      } else {
        if (g_seen.size() > 65536) g_seen.clear();
        g_seen.insert(c.hash);
        c.first = true;
      }
    } else {
      // A second live set for the same trace (e.g. a loop cut at a period that falls at several places of its
      // step: the same trace, other Python variables alive): the program keeps every storage's final value,
      // so that one more compile covers every later launch (growing the union one live set at a time would
      // compile again and again, running op by op meanwhile).
      std::vector<int> want = c.fp ? finalValues() : live;
      Compiler::get().enqueue(CompileJob{t.key, c.hash, fusedText(want), std::move(want), t.ops.size()});
      g_compiling.insert(c.hash);
      g_seen.erase(c.hash);
      c.queued = true;
    }
  } catch (const std::exception&) {
    // No fused program for this trace: it runs op by op, where a failing op names itself.
    g_programs.insert(t.key, std::make_shared<FusedProgram>(), fusedCacheLimit());
  }
}

// The program: a cached one covering the live values, or (first sighting) one from the disk cache. Otherwise the
// trace runs op by op, and from its second sighting on a program is compiled in the background.
Choice chooseProgram(const std::vector<int>& live, bool at_limit) {
  const Trace& t = g_trace;
  Choice c;
  c.oneoff = g_oneoff;
  g_oneoff = false;
  c.hash = hashKey(t.key);
  if (auto* e = g_programs.find(t.key)) c.fp = *e;
  if (c.fp) maybeRecheck(*c.fp);
  c.usable = c.fp && c.fp->exe && !c.fp->slow &&
             std::includes(c.fp->outputs.begin(), c.fp->outputs.end(), live.begin(), live.end());
  if (!c.usable && !c.oneoff && !(c.fp && (!c.fp->exe || c.fp->slow)) && !g_compiling.count(c.hash))
    findOrQueue(c, live);
  // Traces cut at the loop period that keep being new (several in a row, none seen before): the loop changed; look
  // for its period again.
  if (at_limit && g_cut > 0 && t.ops.size() == g_cut) {
    if (c.first) {
      if (++g_cut_misses >= 8) g_cut = 0;
    } else {
      g_cut_misses = 0;
    }
  }
  return c;
}

void countFlush(const Choice& c, const SpeedTrial& s, bool at_limit) {
  std::lock_guard<std::mutex> g(g_stats_mu);
  g_stats.flushes++;
  if (at_limit) g_stats.limit_flushes++;
  if (c.usable && !s.replay) g_stats.fused_hits++;
  if (c.from_disk) g_stats.fused_disk_hits++;
  if (c.queued) g_stats.fused_compiles++;
  if (!c.usable || s.replay) g_stats.replays++;
  if (s.trial) g_stats.speed_trials++;
  g_stats.compile_seconds += c.secs;
  g_stats.entries = static_cast<int64_t>(g_programs.size());
  g_stats.evictions = g_programs.evictions();
}

// Launches the trace's fused program. False when the launch fails (nothing ran).
bool launchFused(const Trace& t, const FusedProgram& fp, std::vector<runtime::BufferPtr>& out_bufs) {
  std::vector<runtime::Buffer*> raw;
  raw.reserve(t.externals.size());
  for (int e : t.externals) raw.push_back(t.vals[e].buf.get());
  const std::vector<bool> donate = donatedInputs(t, fp);
  std::string name, ops;
  if (runtime::launchTraceActive()) {  // what a profiler names the program
    name = std::to_string(t.ops.size()) + " ops";
    ops = opList(t, 64);
  }
  core::LaunchOptions opts;
  opts.kind = "fused";
  opts.name = &name;
  opts.detail = &ops;
  opts.donate = donate.empty() ? nullptr : &donate;
  try {
    out_bufs = core::launchExecutable(*fp.exe, t.device, raw, opts);
  } catch (const std::exception&) {
    return false;
  }
  if (launchBlocking()) client().synchronize(t.device);
  return true;
}

// Launches the trace (as its program, or op by op). Returns the values launched and sets their buffers.
std::vector<int> launchTrace(Choice& c, SpeedTrial& s, const std::vector<int>& live,
                             std::vector<runtime::BufferPtr>& out_bufs) {
  const Trace& t = g_trace;
  std::vector<int> outputs = live;
  startSpeedTrial(s, t.device);
  if (c.usable && !s.replay) {
    if (launchFused(t, *c.fp, out_bufs)) {
      outputs = c.fp->outputs;  // values that died meanwhile are dropped by finishTrace
    } else {
      // Nothing ran. Run op by op: the op that fails names itself.
      c.usable = false;
      s.timed = false;
    }
  }
  if (!c.usable || s.replay) {
    outputs = live;
    std::vector<runtime::BufferPtr> all = replay(t);
    out_bufs.clear();
    for (int v : outputs) out_bufs.push_back(std::move(all[v]));
  }
  if (c.fp) endSpeedTrial(s, *c.fp, t.device);
  return outputs;
}

}  // namespace

namespace detail {

void flushLocked(bool at_limit) {
  Trace& t = g_trace;
  if (t.ops.empty()) {
    abandonTrace();
    return;
  }
  const std::vector<int> live = liveValues();  // the values to keep
  Choice c = chooseProgram(live, at_limit);
  SpeedTrial s = planSpeedTrial(c.fp.get(), c.usable, c.hash);
  countFlush(c, s, at_limit);
  std::vector<int> outputs;
  std::vector<runtime::BufferPtr> out_bufs;
  try {
    outputs = launchTrace(c, s, live, out_bufs);
  } catch (...) {
    abandonTrace();
    throw;
  }
  for (const auto& chk : t.checks) {
    auto it = std::lower_bound(outputs.begin(), outputs.end(), chk.first);
    if (it != outputs.end() && *it == chk.first)
      core::addPendingCheck(t.device, out_bufs[static_cast<size_t>(it - outputs.begin())], chk.second);
  }
  noteLaunch(t, c.hash, c.fp, !c.usable && !s.replay, c.oneoff, s);
  finishTrace(outputs, out_bufs);
}

}  // namespace detail

void flush(int device) {
  std::lock_guard<std::recursive_mutex> lk(g_mu);
  if (g_trace.ops.empty() && g_trace.recs.empty()) return;
  if (device >= 0 && g_trace.device >= 0 && g_trace.device != device) return;
  flushLocked(false);
}

}  // namespace torch_tpu::fused
