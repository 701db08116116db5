#include "distributed/host.h"

#include <Python.h>
#include <ATen/Dispatch.h>
#include <c10/core/DeviceGuard.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <type_traits>

#include "distributed/programs.h"
#include "core/client.h"
#include "core/config.h"
#include "core/dtype.h"
#include "core/storage.h"
#include "settings/settings.h"

namespace torch_tpu::dist {

struct HostEngine::Staged {
  Role role;
  at::Tensor t;                       // the caller's tensor
  runtime::BufferPtr src;             // input snapshot (In / InView / InOut)
  runtime::BufferPtr own;             // a buffer only this collective holds (In / InOut on host memory)
  runtime::PendingBufferPtr pending;  // published output (Out / InOut)
  runtime::BufferPtr out;             // the buffer behind an output mirror (host memory)
  at::Tensor mirror;
};

struct HostEngine::Job {
  std::string name;
  c10::intrusive_ptr<TpuWork> work;
  std::vector<Staged> args;
  Call call;
  Hook pre, post;
  c10::intrusive_ptr<c10d::Work> gloo_work;
  bool cpu = false;  // every tensor is a CPU tensor: the mirrors are the tensors
  Signature sig;
  int direct_op = -1;    // see HostEngine::submit
  bool direct = false;   // ran on the direct path (no Gloo work to wait for)
};

namespace {

constexpr size_t kSigWords = 12;  // op, extra, dtype, count, numel, rank, dims[6]
constexpr size_t kSigDims = 6;

std::string describeSignature(const int64_t* w) {
  std::string s = c10d::opTypeToString(static_cast<c10d::OpType>(w[0]));
  s += "(";
  s += c10::toString(static_cast<c10::ScalarType>(w[2]));
  s += "[";
  for (int64_t i = 0; i < std::min<int64_t>(w[5], static_cast<int64_t>(kSigDims)); ++i)
    s += (i ? ", " : "") + std::to_string(w[6 + i]);
  if (w[5] > static_cast<int64_t>(kSigDims)) s += ", ...";
  s += "]";
  if (w[3] != 1) s += " x" + std::to_string(w[3]) + " tensors, " + std::to_string(w[4]) + " elements";
  if (w[1] >= 0) s += ", " + std::to_string(w[1]);
  return s + ")";
}

// Smallest buffer worth taking over with a donating identity program rather than copying.
constexpr size_t kTakeOverMinBytes = 64 << 10;

// A CPU tensor over the memory of `buf` (host memory), keeping `buf` alive.
at::Tensor hostView(const runtime::BufferPtr& buf, const at::Tensor& like) {
  if (like.numel() == 0) return at::empty(like.sizes(), like.options().device(at::kCPU));
  buf->awaitReady();
  void* p = buf->unsafePointer();
  auto keep = new runtime::BufferPtr(buf);
  return at::from_blob(
      p, like.sizes(), [keep](void*) { delete keep; }, like.options().device(at::kCPU));
}

at::Tensor hostCopy(const runtime::BufferPtr& buf, const at::Tensor& like) {
  at::Tensor h = at::empty(like.sizes(), like.options().device(at::kCPU));
  if (h.numel() > 0) buf->toHost(h.data_ptr(), static_cast<size_t>(h.nbytes()));
  return h;
}

// Smallest all_reduce (bytes) worth the direct path's three flag exchanges; smaller ones go through Gloo.
constexpr size_t kDirectMinBytes = 256 << 10;
// A peer's slice is read and reduced in pieces of this size (stays in cache between the read and the reduction).
constexpr size_t kDirectPiece = 256 << 10;

bool directDtype(c10::ScalarType t, c10d::ReduceOp::RedOpType op) {
  using c10::ScalarType;
  const bool integral = t == ScalarType::Byte || t == ScalarType::Char || t == ScalarType::Short ||
                        t == ScalarType::Int || t == ScalarType::Long;
  const bool floating =
      t == ScalarType::Float || t == ScalarType::Double || t == ScalarType::Half || t == ScalarType::BFloat16;
  switch (op) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::PRODUCT:
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::MAX:
      return integral || floating;
    case c10d::ReduceOp::AVG:
      return floating;  // summed, then divided by the group size (as Gloo); Gloo has no integer average
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      return integral;
    default:
      return false;  // PREMUL_SUM (already a SUM here), UNUSED: Gloo's answer
  }
}

// Reads `len` bytes at address `src` of process `pid` into `dst` (cross-memory attach). Returns 0 or an errno.
int readPeer(int64_t pid, void* dst, uint64_t src, size_t len) {
  char* d = static_cast<char*>(dst);
  while (len > 0) {
    struct iovec local {d, len};
    struct iovec remote {reinterpret_cast<void*>(src), len};
    ssize_t got = process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (got == 0) return EFAULT;
    d += got;
    src += static_cast<uint64_t>(got);
    len -= static_cast<size_t>(got);
  }
  return 0;
}

// The reduction loops are vectorized (-O2 alone leaves them scalar with GCC).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap")
#endif

template <typename T, typename F>
void combine(T* __restrict d, const T* __restrict s, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) d[i] = f(d[i], s[i]);
}

// d[i] = d[i] (op) s[i] for n elements of `type`, on the calling thread: plain loops the compiler vectorizes. (ATen's
// kernels would fan out to the intra-op pool, whose threads busy-wait: with every rank's process doing so on the
// same cores, under load a 64 MiB reduce-scatter took seconds instead of tens of milliseconds.) MIN and MAX
// propagate NaN as torch.minimum / torch.maximum do.
template <typename scalar_t>
void reduceTyped(scalar_t* d, const scalar_t* s, int64_t n, c10d::ReduceOp::RedOpType op) {
  using acc_t = std::conditional_t<std::is_integral_v<scalar_t>, scalar_t,
                                   std::conditional_t<std::is_same_v<scalar_t, double>, double, float>>;
  switch (op) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::AVG:
      combine(d, s, n, [](scalar_t a, scalar_t b) { return static_cast<scalar_t>(static_cast<acc_t>(a) + static_cast<acc_t>(b)); });
      return;
    case c10d::ReduceOp::PRODUCT:
      combine(d, s, n, [](scalar_t a, scalar_t b) { return static_cast<scalar_t>(static_cast<acc_t>(a) * static_cast<acc_t>(b)); });
      return;
    case c10d::ReduceOp::MIN:
      combine(d, s, n, [](scalar_t a, scalar_t b) {
        const acc_t x = static_cast<acc_t>(a), y = static_cast<acc_t>(b);
        return x != x ? a : (y != y || y < x) ? b : a;
      });
      return;
    case c10d::ReduceOp::MAX:
      combine(d, s, n, [](scalar_t a, scalar_t b) {
        const acc_t x = static_cast<acc_t>(a), y = static_cast<acc_t>(b);
        return x != x ? a : (y != y || y > x) ? b : a;
      });
      return;
    default:
      break;
  }
  if constexpr (std::is_integral_v<scalar_t>) {
    switch (op) {
      case c10d::ReduceOp::BAND: combine(d, s, n, [](scalar_t a, scalar_t b) { return static_cast<scalar_t>(a & b); }); return;
      case c10d::ReduceOp::BOR: combine(d, s, n, [](scalar_t a, scalar_t b) { return static_cast<scalar_t>(a | b); }); return;
      case c10d::ReduceOp::BXOR: combine(d, s, n, [](scalar_t a, scalar_t b) { return static_cast<scalar_t>(a ^ b); }); return;
      default: break;
    }
  }
  TORCH_CHECK(false, "tpu_dist: reduce op ", static_cast<int>(op), " has no direct path for this dtype");
}

void reduceInto(void* dst, const void* src, int64_t n, c10::ScalarType type, c10d::ReduceOp::RedOpType op) {
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, type, "tpu_dist_direct_reduce", [&] {
    reduceTyped(static_cast<scalar_t*>(dst), static_cast<const scalar_t*>(src), n, op);
  });
}

// d[i] /= n (AVG, floating types).
void divideBy(void* dst, int64_t count, c10::ScalarType type, int64_t n) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, type, "tpu_dist_direct_avg", [&] {
    auto* d = static_cast<scalar_t*>(dst);
    using acc_t = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    const acc_t k = static_cast<acc_t>(n);
    for (int64_t i = 0; i < count; ++i) d[i] = static_cast<scalar_t>(static_cast<acc_t>(d[i]) / k);
  });
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

}  // namespace

HostEngine::Signature HostEngine::signature(c10d::OpType op, const at::Tensor& ref, int64_t count, int64_t numel,
                                            int64_t extra) {
  Signature sig;
  sig.words.assign(kSigWords, 0);
  sig.words[0] = static_cast<int64_t>(op);
  sig.words[1] = extra;
  sig.words[2] = ref.defined() ? static_cast<int64_t>(ref.scalar_type()) : -1;
  sig.words[3] = count;
  sig.words[4] = numel;
  sig.words[5] = ref.defined() ? ref.dim() : 0;
  for (int64_t i = 0; ref.defined() && i < std::min<int64_t>(ref.dim(), static_cast<int64_t>(kSigDims)); ++i)
    sig.words[static_cast<size_t>(6 + i)] = ref.size(i);
  return sig;
}

HostEngine::HostEngine(c10::intrusive_ptr<c10d::Backend> gloo, int rank, std::vector<int64_t> peer_pids)
    : gloo_(std::move(gloo)),
      rank_(rank),
      host_memory_(client().deviceMemoryIsHostMemory()),
      check_(settings::switchOn("TORCH_TPU_DIST_CHECK")),
      trace_(settings::switchOn("TORCH_TPU_DIST_TRACE")) {
  if (static_cast<int64_t>(peer_pids.size()) == gloo_->getSize() && gloo_->getSize() > 1) peer_pids_ = std::move(peer_pids);
  direct_wanted_ = settings::switchOn("TORCH_TPU_DIST_DIRECT");  // read when the group is created
  probe_word_ = static_cast<int64_t>(0x7470755f64697374ULL ^ (static_cast<uint64_t>(getpid()) << 20) ^
                                     reinterpret_cast<uintptr_t>(this));
  // A thread that fails to start (std::system_error, e.g. under a thread limit) must not leave the other one
  // joinable: destroying a joinable std::thread calls std::terminate (the process aborts).
  stager_ = std::thread([this] { stagerLoop(); });
  try {
    completer_ = std::thread([this] { completerLoop(); });
  } catch (...) {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    stager_.join();
    throw;
  }
}

HostEngine::~HostEngine() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // The engine threads may be completing a future whose callbacks need the GIL (DDP communication hooks).
  PyThreadState* saved = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  // The last reference may be dropped on an engine thread itself (a future callback holding the process group):
  // joining a thread from itself throws (std::terminate in a destructor); that thread ends on its own (stop_).
  for (std::thread* t : {&stager_, &completer_}) {
    if (!t->joinable()) continue;
    if (t->get_id() == std::this_thread::get_id())
      t->detach();
    else
      t->join();
  }
  if (saved != nullptr) PyEval_RestoreThread(saved);
}

c10::intrusive_ptr<TpuWork> HostEngine::submit(const std::string& name, c10d::OpType op, std::vector<Arg> args,
                                               std::vector<at::Tensor> outputs, Call call, Hook pre, Hook post,
                                               Signature sig, int direct_op) {
  auto job = std::make_shared<Job>();
  job->sig = std::move(sig);
  job->direct_op = direct_op;
  job->name = name;
  job->work = c10::make_intrusive<TpuWork>(rank_, op, name, std::move(outputs));
  job->call = std::move(call);
  job->pre = std::move(pre);
  job->post = std::move(post);
  bool any_tpu = false, any_cpu = false;
  for (const Arg& a : args) (isTpu(a.t) ? any_tpu : any_cpu) = true;
  TORCH_CHECK(!(any_tpu && any_cpu), "tpu_dist: ", name, " mixes tpu and cpu tensors");
  job->cpu = !any_tpu;

  job->args.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    job->args[i].role = args[i].role;
    job->args[i].t = args[i].t;
  }
  if (!job->cpu) {
    // Everything launched on the device here precedes the programs that will read the pending outputs: the
    // device runs programs in launch order, so nothing this collective needs may be launched after them (the
    // engine threads launch no program at all).
    // 1. Snapshot every input before any output is published (an input may be a view of an output).
    for (Staged& s : job->args) {
      if (s.role == Role::Out) continue;
      s.src = snapshot(s.t);
    }
    // 2. On host memory, give In / InOut mirrors a buffer of their own, shaped like the tensor: the snapshot
    //    itself when nothing else holds it once the outputs are published (a donating identity program waits
    //    for its earlier readers), a copy otherwise.
    if (host_memory_) {
      for (Staged& s : job->args) {
        if (s.role != Role::In && s.role != Role::InOut) continue;
        if (s.t.numel() == 0) continue;
        std::vector<int64_t> dims(s.t.sizes().begin(), s.t.sizes().end());
        const bool held_by_storage = s.role == Role::InOut && coversStorage(s.t) && storageOf(s.t)->get() == s.src;
        const long others = s.src.use_count() - 1 - (held_by_storage ? 1 : 0);
        const bool exclusive = s.role == Role::InOut && others == 0 && s.src->byteSize() >= kTakeOverMinBytes;
        if (trace_)
          std::fprintf(stderr, "[tpu_dist rank %d] %s: buffer holders %ld (storage %d), %s\n", rank_, name.c_str(),
                       static_cast<long>(s.src.use_count()), held_by_storage ? 1 : 0,
                       exclusive ? "taken over" : "copied");
        s.own = identity(s.src, exclusive, &dims);
        s.src.reset();
      }
    }
    // 3. Publish pending outputs.
    for (Staged& s : job->args) {
      if (s.role != Role::Out && s.role != Role::InOut) continue;
      std::vector<int64_t> dims(s.t.sizes().begin(), s.t.sizes().end());
      s.pending = client().pending(elementType(s.t), dims, s.t.device().index());
      if (s.pending) assign(s.t, s.pending->buffer());
    }
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    TORCH_CHECK(!stop_, "tpu_dist: the process group was destroyed");
    to_stage_.push_back(job);
    ++issued_;
    if (trace_)
      std::fprintf(stderr, "[tpu_dist rank %d] #%ld %s%s\n", rank_, static_cast<long>(issued_), name.c_str(),
                   job->sig.words.empty() ? "" : (" " + describeSignature(job->sig.words.data())).c_str());
  }
  cv_.notify_all();
  return job->work;
}

std::vector<int64_t> HostEngine::exchange(const std::vector<int64_t>& mine) {
  const int64_t n = gloo_->getSize(), k = static_cast<int64_t>(mine.size());
  at::Tensor m = at::empty({k}, at::kLong);
  std::copy(mine.begin(), mine.end(), m.data_ptr<int64_t>());
  at::Tensor all = at::empty({n * k}, at::kLong);
  c10d::AllgatherOptions o;
  gloo_->_allgather_base(all, m, o)->wait();
  const int64_t* w = all.data_ptr<int64_t>();
  return std::vector<int64_t>(w, w + n * k);
}

void HostEngine::verify(Job& job) { checkSignatures(exchange(job.sig.words), kSigWords); }

void HostEngine::checkSignatures(const std::vector<int64_t>& all, size_t stride) {
  const int64_t n = gloo_->getSize();
  const int64_t seq = ++checked_;
  const int64_t* w = all.data();
  bool same = true;
  for (int64_t r = 1; r < n && same; ++r) same = std::equal(w, w + kSigWords, w + r * static_cast<int64_t>(stride));
  if (same) return;
  std::string msg = "tpu_dist: collective #" + std::to_string(seq) + " does not match across ranks:";
  for (int64_t r = 0; r < n; ++r)
    msg += "\n  rank " + std::to_string(r) + ": " + describeSignature(w + r * static_cast<int64_t>(stride));
  TORCH_CHECK(false, msg);
}

void HostEngine::stage(Job& job) {
  // The direct path checks the signature in its own exchange (with the addresses).
  const bool maybe_direct = job.direct_op >= 0 && !job.cpu && !peer_pids_.empty() && direct_state_ >= 0;
  if (check_ && !job.sig.words.empty() && !maybe_direct) verify(job);
  std::vector<at::Tensor> mirrors;
  mirrors.reserve(job.args.size());
  for (Staged& s : job.args) {
    if (job.cpu) {
      s.mirror = s.t;
    } else if (s.role == Role::Out) {
      if (host_memory_ && s.t.numel() > 0) {
        std::vector<int64_t> dims(s.t.sizes().begin(), s.t.sizes().end());
        s.out = client().uninitialized(elementType(s.t), dims, s.t.device().index());
        s.mirror = hostView(s.out, s.t);
      } else {
        s.mirror = at::empty(s.t.sizes(), s.t.options().device(at::kCPU));
      }
    } else if (host_memory_) {
      if (s.own) {
        s.mirror = hostView(s.own, s.t);  // private: Gloo may write it
        if (s.role == Role::InOut) s.out = s.own;
      } else if (s.src) {
        s.mirror = hostView(s.src, s.t);  // read in place
      } else {
        s.mirror = at::empty(s.t.sizes(), s.t.options().device(at::kCPU));  // empty tensor
      }
    } else {
      s.mirror = hostCopy(s.src, s.t);
    }
    mirrors.push_back(s.mirror);
  }
  if (maybe_direct) {
    // One exchange: the signature (checked first: whether the direct path applies must not differ between ranks)
    // and the address of this rank's mirror.
    std::vector<int64_t> mine = job.sig.words;
    mine.resize(kSigWords, 0);
    mine.push_back(mirrors.size() == 1 && mirrors[0].defined() && mirrors[0].numel() > 0
                       ? static_cast<int64_t>(reinterpret_cast<uintptr_t>(mirrors[0].data_ptr()))
                       : 0);
    const auto e0 = std::chrono::steady_clock::now();
    std::vector<int64_t> all = exchange(mine);
    if (trace_)
      std::fprintf(stderr, "[tpu_dist rank %d] %s: signature and address exchange %.2f ms\n", rank_, job.name.c_str(),
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - e0).count());
    if (check_ && !job.sig.words.empty()) checkSignatures(all, mine.size());
    if (directUsable(job, mirrors)) {
      if (job.pre) job.pre(mirrors);
      std::vector<uint64_t> addrs;
      for (int64_t r = 0; r < gloo_->getSize(); ++r)
        addrs.push_back(static_cast<uint64_t>(all[static_cast<size_t>(r) * mine.size() + kSigWords]));
      directAllreduce(job, mirrors[0], addrs);
      job.direct = true;
      return;
    }
  }
  if (job.pre) job.pre(mirrors);
  job.gloo_work = job.call(mirrors);
  TORCH_CHECK(job.gloo_work, "tpu_dist: ", job.name, ": no work from the host backend");
}

bool HostEngine::directUsable(const Job& job, const std::vector<at::Tensor>& mirrors) {
  // Everything but the probe depends only on what every rank passes alike (checked by the signature).
  if (mirrors.size() != 1 || job.args.size() != 1 || job.args[0].role != Role::InOut) return false;
  const at::Tensor& m = mirrors[0];
  if (!m.is_contiguous() || !m.device().is_cpu()) return false;
  if (static_cast<size_t>(m.nbytes()) < kDirectMinBytes) return false;
  if (!directDtype(m.scalar_type(), static_cast<c10d::ReduceOp::RedOpType>(job.direct_op))) return false;
  return directProbe();
}

bool HostEngine::directProbe() {
  if (direct_state_ != 0) return direct_state_ > 0;
  // 1. Every rank publishes whether it wants the direct path and where a known word of its memory is;
  // 2. every rank reads each peer's word; 3. the direct path is used iff every rank read every word.
  const int64_t n = gloo_->getSize();
  std::vector<int64_t> all =
      exchange({direct_wanted_ ? 1 : 0, static_cast<int64_t>(reinterpret_cast<uintptr_t>(&probe_word_)), probe_word_});
  int64_t ok = 1;
  for (int64_t p = 0; p < n; ++p) {
    if (all[static_cast<size_t>(3 * p)] == 0) ok = 0;
    if (p == rank_ || ok == 0) continue;
    int64_t word = 0;
    if (readPeer(peer_pids_[static_cast<size_t>(p)], &word, static_cast<uint64_t>(all[static_cast<size_t>(3 * p + 1)]),
                 sizeof(word)) != 0 ||
        word != all[static_cast<size_t>(3 * p + 2)])
      ok = 0;
  }
  std::vector<int64_t> oks = exchange({ok});
  direct_state_ = std::all_of(oks.begin(), oks.end(), [](int64_t v) { return v == 1; }) ? 1 : -1;
  if (trace_)
    std::fprintf(stderr, "[tpu_dist rank %d] same-host direct all_reduce %s\n", rank_,
                 direct_state_ > 0 ? "on" : "off (Gloo)");
  return direct_state_ > 0;
}

void HostEngine::directAllreduce(Job& job, at::Tensor& mirror, const std::vector<uint64_t>& addrs) {
  const int64_t n = gloo_->getSize();
  const auto op = static_cast<c10d::ReduceOp::RedOpType>(job.direct_op);
  char* base = static_cast<char*>(mirror.data_ptr());
  const int64_t numel = mirror.numel();
  const size_t esize = static_cast<size_t>(mirror.element_size());
  auto lo = [&](int64_t i) { return numel * i / n; };

  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  auto ms = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  auto addr = [&](int64_t p) { return addrs[static_cast<size_t>(p)]; };
  auto pid = [&](int64_t p) { return peer_pids_[static_cast<size_t>(p)]; };
  // Every rank takes part in both flag exchanges even after a failure of its own, so no rank waits for one that
  // gave up; a failure anywhere fails the collective on every rank.
  auto agree = [&](int err, const char* phase) {
    std::vector<int64_t> errs = exchange({static_cast<int64_t>(err)});
    for (int64_t p = 0; p < n; ++p) {
      const int e = static_cast<int>(errs[static_cast<size_t>(p)]);
      TORCH_CHECK(e == 0, "tpu_dist: ", job.name, ": rank ", p, " could not read a peer's memory during the ", phase,
                  " of a same-host all_reduce: ", std::strerror(e), " (TORCH_TPU_DIST_DIRECT=0 uses Gloo)");
    }
  };

  // Reduce-scatter: this rank's slice of every peer, piece by piece, into its own mirror.
  int err = 0;
  const int64_t mlo = lo(rank_), mhi = lo(rank_ + 1);
  const int64_t piece = std::max<int64_t>(1, static_cast<int64_t>(kDirectPiece / esize));
  if (scratch_.size() < kDirectPiece) scratch_.resize(kDirectPiece + 64);
  const c10::ScalarType type = mirror.scalar_type();
  for (int64_t step = 1; step < n && err == 0; ++step) {
    const int64_t p = (rank_ + step) % n;
    for (int64_t a = mlo; a < mhi && err == 0; a += piece) {
      const int64_t len = std::min(piece, mhi - a);
      err = readPeer(pid(p), scratch_.data(), addr(p) + static_cast<uint64_t>(a) * esize,
                     static_cast<size_t>(len) * esize);
      if (err != 0) break;
      reduceInto(base + static_cast<size_t>(a) * esize, scratch_.data(), len, type, op);
    }
  }
  if (op == c10d::ReduceOp::AVG && err == 0 && mhi > mlo)
    divideBy(base + static_cast<size_t>(mlo) * esize, mhi - mlo, type, n);
  const Clock::time_point t1 = Clock::now();
  agree(err, "reduce-scatter");
  const Clock::time_point t2 = Clock::now();
  // All-gather: every peer's reduced slice straight into this rank's mirror.
  for (int64_t step = 1; step < n && err == 0; ++step) {
    const int64_t p = (rank_ + step) % n;
    const int64_t a = lo(p), len = lo(p + 1) - a;
    if (len > 0)
      err = readPeer(pid(p), base + static_cast<size_t>(a) * esize, addr(p) + static_cast<uint64_t>(a) * esize,
                     static_cast<size_t>(len) * esize);
  }
  const Clock::time_point t3 = Clock::now();
  agree(err, "all-gather");
  ++direct_count_;
  if (trace_)
    std::fprintf(stderr,
                 "[tpu_dist rank %d] %s direct: reduce-scatter %.2f ms, flags %.2f ms, all-gather %.2f ms, flags "
                 "%.2f ms\n",
                 rank_, job.name.c_str(), ms(t0, t1), ms(t1, t2), ms(t2, t3), ms(t3, Clock::now()));
}

void HostEngine::publish(Job& job) {
  if (job.cpu) return;
  for (Staged& s : job.args) {
    if (s.role != Role::Out && s.role != Role::InOut) continue;
    runtime::BufferPtr value;
    std::vector<int64_t> dims(s.t.sizes().begin(), s.t.sizes().end());
    if (s.out) {
      value = s.out;
    } else {
      const at::Tensor& m = s.mirror;
      value = client().fromHost(m.numel() ? m.data_ptr() : nullptr, elementType(s.t), dims, s.t.device().index());
    }
    s.mirror = at::Tensor();
    s.out.reset();
    s.own.reset();
    if (s.pending) {
      s.pending->fulfill(value);  // value has the tensor's dims (see submit / stage)
    } else {
      assign(s.t, value);
    }
  }
}

void HostEngine::failQuietly(Job& job, std::exception_ptr e) {
  // Failing the Work runs its future's callbacks; an exception escaping an engine thread would call
  // std::terminate (the whole process aborts), so one thrown here is reported and dropped.
  try {
    job.work->fail(e);
  } catch (const std::exception& err) {
    std::fprintf(stderr, "[tpu_dist rank %d] %s: error while reporting its failure: %s\n", rank_, job.name.c_str(),
                 err.what());
  } catch (...) {
    std::fprintf(stderr, "[tpu_dist rank %d] %s: error while reporting its failure\n", rank_, job.name.c_str());
  }
}

void HostEngine::stagerLoop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !to_stage_.empty(); });
      if (to_stage_.empty()) return;  // stopping
      job = to_stage_.front();
      to_stage_.pop_front();
    }
    try {
      stage(*job);
    } catch (...) {
      job->gloo_work.reset();
      failQuietly(*job, std::current_exception());
      job->args.clear();  // unfulfilled pending outputs are released (filled, never hanging their readers)
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      to_complete_.push_back(job);
    }
    cv_.notify_all();
  }
}

void HostEngine::completerLoop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return (stop_ && to_stage_.empty()) || !to_complete_.empty(); });
      if (to_complete_.empty()) {
        if (stop_ && to_stage_.empty() && finished_ == issued_) return;
        continue;
      }
      job = to_complete_.front();
      to_complete_.pop_front();
    }
    if (job->gloo_work || job->direct) {
      try {
        if (job->gloo_work) job->gloo_work->wait();
        if (job->post) {
          std::vector<at::Tensor> mirrors;
          for (auto& s : job->args) mirrors.push_back(s.mirror);
          job->post(mirrors);
        }
        publish(*job);
        job->gloo_work.reset();
        job->args.clear();
        job->work->complete();
      } catch (...) {
        job->gloo_work.reset();
        job->args.clear();
        failQuietly(*job, std::current_exception());
      }
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      ++finished_;
    }
    cv_.notify_all();
  }
}

void HostEngine::drain() {
  std::unique_lock<std::mutex> lk(mu_);
  int64_t target = issued_;
  cv_.wait(lk, [&] { return finished_ >= target; });
}

}  // namespace torch_tpu::dist
