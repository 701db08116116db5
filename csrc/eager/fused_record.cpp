// Fused eager, recording (eager/fused_internal.h): the trace, the storages it touches, and the mode.
#include <c10/util/Exception.h>

#include "core/cache_key.h"
#include "core/client.h"
#include "core/dtype.h"
#include "eager/fused_internal.h"

namespace torch_tpu::fused {

using core::put;
using namespace detail;

namespace detail {

std::recursive_mutex g_mu;
Trace g_trace;
size_t g_cut = 0;
int g_cut_misses = 0;
bool g_oneoff = false;
std::mutex g_live_mu;
std::mutex g_stats_mu;
Stats g_stats;
std::atomic<int64_t> g_ops{0};

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

size_t loopPeriod(const std::vector<uint64_t>& seq) {
  const size_t n = seq.size();
  for (size_t p = 1; 2 * p <= n; ++p) {
    bool same = true;
    for (size_t i = 0; i < p && same; ++i) same = seq[n - p + i] == seq[n - 2 * p + i];
    if (same) return p;
  }
  return 0;
}

}  // namespace detail

namespace {

std::atomic<int> g_mode{-1};  // -1: not read yet, 0 strict, 1 fused

int readMode() {
  return settings::choice("TORCH_TPU_EAGER_MODE") == "fused" ? 1 : 0;
}

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

int addExternal(runtime::BufferPtr buf, const std::string* type) {
  Val v;
  v.buf = std::move(buf);
  v.type = type;
  g_trace.vals.push_back(std::move(v));
  const int id = static_cast<int>(g_trace.vals.size() - 1);
  g_trace.externals.push_back(id);
  core::KeyWriter(g_trace.key).tag(core::KeyTag::TraceExternal);
  return id;
}


// Records op `p`'s parameters: storages read (their value in the trace, or their buffer captured as an input), and
// the other parameters bound as at a launch (core::bindParam) and captured as inputs.
void recordInputs(OpRec& op, const EagerProgram::Function& fn, core::Signature& sig, core::Program::HostFn host,
                  const std::optional<at::Generator>& gen) {
  Trace& t = g_trace;
  const core::Program& prog = op.p->prog;
  op.in.reserve(prog.params.size());
  for (size_t i = 0; i < prog.params.size(); ++i) {
    const core::Param& prm = prog.params[i];
    const std::string* type = &fn.arg_types[i];
    if (prm.kind != core::Param::Kind::Storage) {
      op.in.push_back(addExternal(core::bindParam(prm, sig, host, gen), type));
      continue;
    }
    StorageRec& r = recOf(sig.storages[prm.index]);
    if (r.value < 0) {
      TORCH_INTERNAL_ASSERT(!sig.pending[prm.index], "tpu: a pending storage outside the trace");
      r.value = addExternal(sig.buffers[prm.index], type);
      t.vals[r.value].rec = r.index;
    } else {
      core::KeyWriter k(t.key);
      k.tag(core::KeyTag::TraceValue);
      k.value<int32_t>(r.value);
    }
    op.in.push_back(r.value);
  }
}

// Records op `k`'s outputs: written storages' new buffers, then fresh results (returned as pending tensors), then
// the flag of its device-side checks. Their storages become pending.
std::vector<at::Tensor> recordOutputs(OpRec& op, int k, const EagerProgram::Function& fn, const core::Signature& sig) {
  Trace& t = g_trace;
  const core::Program& prog = op.p->prog;
  op.first_out = static_cast<int>(t.vals.size());
  op.num_out = static_cast<int>(fn.result_types.size());
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
  auto pend = [&](TpuStorage* st, std::vector<int64_t> dims, runtime::ElementType type) {
    StorageRec& r = recOf(st);
    r.value = produce(r.index);
    st->pending_dims = std::move(dims);
    st->pending_type = type;
    st->pending.store(TpuStorage::kPending, std::memory_order_release);
  };
  for (int slot : prog.written_slots)
    pend(sig.storages[slot], sig.bdims[slot], static_cast<runtime::ElementType>(sig.btype[slot]));
  std::vector<at::Tensor> fresh;
  fresh.reserve(prog.results.size());
  for (const core::Program::Result& res : prog.results) {
    at::Tensor out = core::Program::wrapResult(nullptr, res, sig.device);
    pend(storageOf(out), res.dims(), static_cast<runtime::ElementType>(storageDType(res.dtype)));
    fresh.push_back(std::move(out));
  }
  while (j < op.num_out) {
    const int id = produce(-1);
    // The last output of a program with device-side checks is their flag.
    if (prog.checks && j == op.num_out) t.checks.emplace_back(id, prog.checks);
  }
  return fresh;
}

// Cuts the trace when due: at the loop period found earlier, or at the size limit (then looks for a period).
void cutIfDue() {
  const size_t n = g_trace.ops.size();
  if (launchBlocking()) {
    flushLocked(false);
  } else if (g_cut > 0 && n >= g_cut) {
    flushLocked(true);
  } else if (n >= maxOps()) {
    size_t p_len = loopPeriod(g_trace.seq);
    g_cut = p_len ? p_len * ((kMinCut + p_len - 1) / p_len) : 0;
    if (g_cut > maxOps()) g_cut = 0;
    g_oneoff = g_cut > 0;
    g_cut_misses = 0;
    flushLocked(true);
  }
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

Pause::Pause() : prev_(t_paused) { t_paused = true; }
Pause::~Pause() { t_paused = prev_; }

std::string mode() { return active() ? "fused" : "strict"; }

void setMode(const std::string& m) {
  TORCH_CHECK_VALUE(m == "strict" || m == "fused", "eager mode must be 'strict' or 'fused', got '", m, "'");
  flush(-1);
  {
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    endBypassLocked();
    endSpeedBlockLocked();
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
  const int k = static_cast<int>(t.ops.size());
  OpRec op;
  op.p = p;
  put<uint64_t>(t.key, p->id);
  recordInputs(op, fn, sig, host, gen);
  std::vector<at::Tensor> fresh = recordOutputs(op, k, fn, sig);
  t.ops.push_back(std::move(op));
  t.seq.push_back(p->id);
  sig.buffers.clear();
  g_ops.fetch_add(1, std::memory_order_relaxed);
  cutIfDue();
  return fresh;
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

}  // namespace torch_tpu::fused
