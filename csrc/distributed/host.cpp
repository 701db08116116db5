#include "distributed/host.h"

#include <Python.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <tuple>

#include "distributed/programs.h"
#include "core/client.h"
#include "core/config.h"
#include "core/dtype.h"
#include "core/storage.h"

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
};

namespace {

constexpr size_t kSigWords = 12;  // op, extra, dtype, count, numel, rank, dims[6]
constexpr size_t kSigDims = 6;

bool checksEnabled() {
  const char* e = std::getenv("TORCH_TPU_DIST_CHECK");
  return e == nullptr || std::string(e) != "0";
}

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

HostEngine::HostEngine(c10::intrusive_ptr<c10d::Backend> gloo, int rank)
    : gloo_(std::move(gloo)),
      rank_(rank),
      host_memory_(client().deviceMemoryIsHostMemory()),
      check_(checksEnabled()),
      trace_(std::getenv("TORCH_TPU_DIST_TRACE") != nullptr && std::string(std::getenv("TORCH_TPU_DIST_TRACE")) == "1") {
  stager_ = std::thread([this] { stagerLoop(); });
  completer_ = std::thread([this] { completerLoop(); });
}

HostEngine::~HostEngine() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // The engine threads may be completing a future whose callbacks need the GIL (DDP communication hooks).
  PyThreadState* saved = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  stager_.join();
  completer_.join();
  if (saved != nullptr) PyEval_RestoreThread(saved);
}

c10::intrusive_ptr<TpuWork> HostEngine::submit(const std::string& name, c10d::OpType op, std::vector<Arg> args,
                                               std::vector<at::Tensor> outputs, Call call, Hook pre, Hook post,
                                               Signature sig) {
  auto job = std::make_shared<Job>();
  job->sig = std::move(sig);
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

void HostEngine::verify(Job& job) {
  const int64_t n = gloo_->getSize();
  const int64_t seq = ++checked_;
  at::Tensor mine = at::empty({static_cast<int64_t>(kSigWords)}, at::kLong);
  std::copy(job.sig.words.begin(), job.sig.words.end(), mine.data_ptr<int64_t>());
  at::Tensor all = at::empty({n * static_cast<int64_t>(kSigWords)}, at::kLong);
  c10d::AllgatherOptions o;
  gloo_->_allgather_base(all, mine, o)->wait();
  const int64_t* w = all.data_ptr<int64_t>();
  bool same = true;
  for (int64_t r = 1; r < n && same; ++r)
    same = std::equal(w, w + kSigWords, w + r * static_cast<int64_t>(kSigWords));
  if (same) return;
  std::string msg = "tpu_dist: collective #" + std::to_string(seq) + " does not match across ranks:";
  for (int64_t r = 0; r < n; ++r) msg += "\n  rank " + std::to_string(r) + ": " + describeSignature(w + r * kSigWords);
  TORCH_CHECK(false, msg);
}

void HostEngine::stage(Job& job) {
  if (check_ && !job.sig.words.empty()) verify(job);
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
  if (job.pre) job.pre(mirrors);
  job.gloo_work = job.call(mirrors);
  TORCH_CHECK(job.gloo_work, "tpu_dist: ", job.name, ": no work from the host backend");
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
      job->work->fail(std::current_exception());
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
    if (job->gloo_work) {
      try {
        job->gloo_work->wait();
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
        job->work->fail(std::current_exception());
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
