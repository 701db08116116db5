#include "distributed/xla.h"

#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <random>
#include <sstream>

#include "distributed/programs.h"
#include "core/executables.h"
#include "core/program.h"
#include "core/client.h"
#include "core/config.h"
#include "core/dtype.h"
#include "core/storage.h"
#include "stablehlo/builder.h"
#include "lowering/collectives.h"
#include "stablehlo/collectives.h"

namespace torch_tpu::dist {

// ---------------------------------------------------------------------------------------------------- XlaGroup

namespace {
std::mutex g_join_mu;
std::condition_variable g_join_cv;
std::map<std::string, std::vector<std::shared_ptr<XlaGroup>>> g_forming;  // groups still waiting for ranks (only)
}  // namespace

std::shared_ptr<XlaGroup> XlaGroup::join(const std::string& key, int rank, int size, int device,
                                         std::chrono::milliseconds timeout) {
  TORCH_CHECK(rank >= 0 && rank < size, "tpu_dist: rank ", rank, " out of range for size ", size);
  std::unique_lock<std::mutex> lk(g_join_mu);
  auto& forming = g_forming[key];
  std::shared_ptr<XlaGroup> g;
  for (auto& cand : forming)
    if (cand->size_ == size && cand->devices_[static_cast<size_t>(rank)] < 0) {
      g = cand;
      break;
    }
  if (!g) {
    static std::mt19937_64 rng(std::random_device{}());
    g = std::shared_ptr<XlaGroup>(new XlaGroup(size, rng()));
    forming.push_back(g);
  }
  for (int r = 0; r < size; ++r)
    TORCH_CHECK(g->devices_[static_cast<size_t>(r)] != device, "tpu_dist: ranks ", r, " and ", rank,
                " of the XLA transport both use tpu:", device,
                "; give each rank its own device (torch.tpu.set_device(rank) before init_process_group)");
  g->devices_[static_cast<size_t>(rank)] = device;
  if (++g->joined_ == size) {
    forming.erase(std::find(forming.begin(), forming.end(), g));
    if (forming.empty()) g_forming.erase(key);  // only groups still forming stay: the map does not grow with groups
    g_join_cv.notify_all();
  } else {
    bool ok = g_join_cv.wait_for(lk, timeout, [&] { return g->joined_ == size; });
    if (!ok) {
      std::string missing;
      for (int r = 0; r < size; ++r)
        if (g->devices_[static_cast<size_t>(r)] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      g->devices_[static_cast<size_t>(rank)] = -1;
      --g->joined_;
      TORCH_CHECK(false, "tpu_dist: rank(s) ", missing, " did not join process group '", key, "' within ",
                  timeout.count() / 1000.0, " s");
    }
  }
  return g;
}

int XlaGroup::launchId(int64_t seq) const {
  // Shared by the group's ranks, distinct from the group's other collectives and (with high probability) from
  // other groups' collectives on the same devices; never 0 (the default launch id of single-device programs).
  uint64_t h = uid_ * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(seq) * 0xBF58476D1CE4E5B9ULL;
  h ^= h >> 31;
  int id = static_cast<int>(h & 0x7fffffff);
  return id == 0 ? 1 : id;
}

std::vector<std::string> XlaGroup::arrive(int rank, int64_t seq, const std::string& what, const std::string& sig,
                                          const std::string& info, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  Slot& s = slots_[seq];
  if (s.sigs.empty()) {
    s.sigs.resize(static_cast<size_t>(size_));
    s.infos.resize(static_cast<size_t>(size_));
    s.present.assign(static_cast<size_t>(size_), false);
  }
  s.sigs[static_cast<size_t>(rank)] = sig;
  s.infos[static_cast<size_t>(rank)] = info;
  s.present[static_cast<size_t>(rank)] = true;
  ++s.arrived;
  cv_.notify_all();
  bool ok = cv_.wait_for(lk, timeout, [&] { return s.arrived == size_; });
  std::vector<std::string> sigs = s.sigs, infos = s.infos;
  std::vector<bool> present = s.present;
  if (++s.left == size_ || !ok) {
    if (!ok) {
      // This rank gives up on the collective: take it back so a late rank does not wait for it forever.
      s.present[static_cast<size_t>(rank)] = false;
      --s.arrived;
      --s.left;
    } else {
      slots_.erase(seq);
    }
  }
  lk.unlock();
  if (!ok) {
    std::string missing;
    for (int r = 0; r < size_; ++r)
      if (!present[static_cast<size_t>(r)]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    TORCH_CHECK(false, "tpu_dist: rank(s) ", missing, " did not reach collective #", seq, " (", what,
                ", called by rank ", rank, ") within ", timeout.count() / 1000.0,
                " s: a rank exited, hangs or called collectives in another order");
  }
  for (int r = 0; r < size_; ++r)
    if (sigs[static_cast<size_t>(r)] != sigs[0]) {
      std::ostringstream os;
      os << "tpu_dist: collective #" << seq << " does not match across ranks:";
      for (int q = 0; q < size_; ++q) os << "\n  rank " << q << ": " << sigs[static_cast<size_t>(q)];
      TORCH_CHECK(false, os.str());
    }
  return infos;
}

void XlaGroup::send(int src, int dst, int64_t tag, runtime::BufferPtr buf) {
  Deliver deliver;
  {
    std::lock_guard<std::mutex> g(mu_);
    for (auto it = receivers_.begin(); it != receivers_.end(); ++it)
      if (it->dst == dst && it->tag == tag && (it->src == src || it->src < 0)) {
        deliver = std::move(it->deliver);
        receivers_.erase(it);
        break;
      }
    if (!deliver) {
      messages_.push_back({src, dst, tag, std::move(buf)});
      return;
    }
  }
  deliver(src, std::move(buf));
}

void XlaGroup::recv(int src, int dst, int64_t tag, Deliver deliver) {
  Message msg{-1, -1, 0, nullptr};
  {
    std::lock_guard<std::mutex> g(mu_);
    for (auto it = messages_.begin(); it != messages_.end(); ++it)
      if (it->dst == dst && it->tag == tag && (src < 0 || it->src == src)) {
        msg = std::move(*it);
        messages_.erase(it);
        break;
      }
    if (!msg.buf) {
      receivers_.push_back({src, dst, tag, std::move(deliver)});
      return;
    }
  }
  deliver(msg.src, std::move(msg.buf));
}

// ---------------------------------------------------------------------------------------------------- helpers

namespace {

shlo::DType sdtype(const at::Tensor& t) { return toDType(t.scalar_type()); }

std::string reduceOpName(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNKNOWN";
  }
}

// How a reduction runs in a program: the combiner, and a scale before (PREMUL_SUM) or a division after (AVG).
struct Reduction {
  std::string combiner;
  bool avg = false;
  bool premul = false;
  double factor = 1;
};

Reduction reduction(const c10d::ReduceOp& op, shlo::DType t) {
  const lowering::ReduceOpRow* row = lowering::reduceOpByC10d(reduceOpName(op));
  TORCH_CHECK(row != nullptr, "tpu_dist: unsupported reduce op ", static_cast<int>(op.op_));
  std::string why;
  const char* combiner = lowering::reduceCombiner(*row, t, &why);
  TORCH_CHECK_TYPE(combiner != nullptr, "tpu_dist: ", row->bitwise ? "bitwise " : "", "ReduceOp.", row->c10d, " ", why);
  Reduction r;
  r.combiner = combiner;
  r.avg = row->avg;
  if (row->premul) {
    auto* s = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK(s != nullptr, "tpu_dist: PREMUL_SUM without a factor");
    r.factor = s->tensor_factor.defined() ? s->tensor_factor.item<double>() : s->double_factor;
    r.premul = true;
  }
  return r;
}

// x reduced across the group with `r` (all replicas in one group).
shlo::Value reduceAll(shlo::Builder& b, shlo::Value x, const Reduction& r, int n, int64_t channel) {
  if (r.premul) x = b.mul(x, b.scalarLike(r.factor, x));
  shlo::Value y = shlo::allReduce(b, x, r.combiner, {[&] {
                                    std::vector<int64_t> g;
                                    for (int i = 0; i < n; ++i) g.push_back(i);
                                    return g;
                                  }()},
                                  channel);
  if (r.avg) y = b.div(y, b.scalarLike(n, y));
  return y;
}

shlo::ReplicaGroups allOf(int n) {
  std::vector<int64_t> g;
  for (int i = 0; i < n; ++i) g.push_back(i);
  return {g};
}

shlo::TensorType flatType(const at::Tensor& t) { return {sdtype(t), {t.numel()}}; }

std::vector<int64_t> sizesOf(const at::Tensor& t) { return std::vector<int64_t>(t.sizes().begin(), t.sizes().end()); }

// The unsigned integer type of t's bit width (broadcast moves bit patterns exactly with an integer sum).
shlo::DType bitsType(shlo::DType t) {
  switch (shlo::bitWidth(t)) {
    case 1:
    case 8: return shlo::DType::U8;
    case 16: return shlo::DType::U16;
    case 32: return shlo::DType::U32;
    default: return shlo::DType::U64;
  }
}

// In-place collectives give the tensor's buffer to their program when nothing but its storage holds it (the
// storage receives the result right after): the result then lives in the same memory, with no new allocation.
bool takeOver(const at::Tensor& t, const runtime::BufferPtr& buf) {
  if (!coversStorage(t) || buf->byteSize() < donateMinBytes()) return false;
  const bool held = storageOf(t)->get() == buf;  // (the temporary copy is gone after this statement)
  return held && buf.use_count() == 2;           // the storage and `buf`
}

std::vector<runtime::BufferPtr> snapshots(const std::vector<at::Tensor>& ts) {
  std::vector<runtime::BufferPtr> out;
  for (const at::Tensor& t : ts) out.push_back(snapshot(t));
  return out;
}

std::string describeAll(const std::vector<at::Tensor>& ts) {
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + describe(ts[i]);
  return s;
}

std::string joinInts(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

std::vector<int64_t> parseInts(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) v.push_back(std::stoll(item));
  return v;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------- XlaEngine

XlaEngine::XlaEngine(std::shared_ptr<XlaGroup> group, int rank, int device, std::chrono::milliseconds timeout)
    : group_(std::move(group)), rank_(rank), device_(device), timeout_(timeout) {}

void XlaEngine::checkDevice(const std::string& what, const at::Tensor& t, std::string& problem) const {
  if (!problem.empty()) return;
  if (!isTpu(t)) {
    problem = what + ": expected tpu tensors, got one on " + (t.defined() ? t.device().str() : "undefined");
  } else if (t.device().index() != device_) {
    problem = what + ": rank " + std::to_string(rank_) + " of the XLA transport runs on tpu:" +
              std::to_string(device_) + ", got a tensor on " + t.device().str();
  } else if (!supportedDType(t.scalar_type()) || t.scalar_type() == at::kComplexHalf) {
    problem = what + ": unsupported dtype " + std::string(c10::toString(t.scalar_type()));
  }
}

std::string XlaEngine::checkScaled(const std::string& what, const std::vector<at::Tensor>& big,
                                   const std::string& big_name, const std::vector<at::Tensor>& small) const {
  const int n = group_->size();
  TORCH_CHECK(big.size() == small.size(), "tpu_dist: ", what, ": ", big.size(), " ", big_name, "s for ",
              small.size(), " tensors");
  std::string problem;
  for (size_t i = 0; i < big.size(); ++i) {
    checkDevice(what, big[i], problem);
    checkDevice(what, small[i], problem);
    if (problem.empty() && big[i].numel() != n * small[i].numel())
      problem = what + ": the " + big_name + " has " + std::to_string(big[i].numel()) + " elements, expected " +
                std::to_string(n) + " x " + std::to_string(small[i].numel());
    if (problem.empty() && big[i].scalar_type() != small[i].scalar_type())
      problem = what + ": output and input dtypes differ";
  }
  return problem;
}

std::vector<std::string> XlaEngine::arrive(int64_t seq, const std::string& what, const std::string& sig,
                                           const std::string& problem, const std::string& info) {
  auto infos = group_->arrive(rank_, seq, what, problem.empty() ? sig : "invalid " + what + " call", info, timeout_);
  TORCH_CHECK(problem.empty(), "tpu_dist: ", problem);
  return infos;
}

core::ReplicaGroup::Step XlaEngine::meet(const std::string& what, const std::string& sig, const std::string& info) {
  int64_t seq = ++seq_;
  Step step;
  step.infos = arrive(seq, what, sig, "", info);
  step.launch_id = group_->launchId(seq);
  return step;
}

c10::intrusive_ptr<TpuWork> XlaEngine::collective(const std::string& what, c10d::OpType type,
                                                  std::vector<at::Tensor> outputs, const std::string& sig,
                                                  const std::string& problem, const Body& body,
                                                  const std::string& info) {
  const int64_t seq = ++seq_;
  auto work = c10::make_intrusive<TpuWork>(rank_, type, what, std::move(outputs));
  work->setTimeout(timeout_);
  try {
    runtime::LaunchScope label("collective", &what);  // names the launches of this collective for a profiler
    body(seq, arrive(seq, what, sig, problem, info));
    work->complete();
  } catch (const c10::Error&) {
    throw;  // a mismatch or a missing rank (every rank raises it), an invalid call
  } catch (...) {
    work->fail(std::current_exception());
  }
  return work;
}

std::vector<runtime::BufferPtr> XlaEngine::launch(const Build& build, const std::vector<runtime::BufferPtr>& args,
                                                  int64_t seq, const std::vector<bool>& donate) {
  runtime::DeviceAssignment da;
  da.num_replicas = group_->size();
  da.devices = group_->devices();
  core::ExecutableLookup ex = core::executableFor(build(), da);
  std::vector<runtime::Buffer*> raw;
  for (const auto& a : args) raw.push_back(a.get());
  core::LaunchOptions opts;  // named by the caller's scope (collective())
  opts.donate = &donate;
  opts.launch_id = group_->launchId(seq);
  return core::launchExecutable(*ex.exe, device_, raw, opts);
}

c10::intrusive_ptr<TpuWork> XlaEngine::allreduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOp& op,
                                                 c10d::OpType type) {
  const int n = group_->size();
  std::string problem, sig = "all_reduce(" + reduceOpName(op);
  std::vector<Reduction> reds;
  for (const at::Tensor& t : tensors) {
    checkDevice("all_reduce", t, problem);
    sig += ", " + describe(t);
    if (problem.empty()) reds.push_back(reduction(op, sdtype(t)));
  }
  sig += ")";
  return collective("all_reduce", type, tensors, sig, problem, [&](int64_t seq, const Infos&) {
    std::vector<runtime::BufferPtr> args;
    std::vector<bool> donate;
    for (size_t i = 0; i < tensors.size(); ++i) {
      args.push_back(snapshot(tensors[i]));
      donate.push_back(takeOver(tensors[i], args.back()));
    }
    auto outs = launch([&] {
      shlo::Builder b;
      std::vector<shlo::Value> res;
      for (size_t i = 0; i < tensors.size(); ++i) {
        shlo::Value x = b.parameter(flatType(tensors[i]), static_cast<int>(i));
        res.push_back(reduceAll(b, x, reds[i], n, static_cast<int64_t>(i) + 1));
      }
      return shlo::finishReplicated(b, res, n);
    }, args, seq, donate);
    for (size_t i = 0; i < tensors.size(); ++i) assign(tensors[i], outs[i]);
  });
}

c10::intrusive_ptr<TpuWork> XlaEngine::reduce(at::Tensor& t, int64_t root, const c10d::ReduceOp& op) {
  const int n = group_->size();
  std::string problem;
  checkDevice("reduce", t, problem);
  std::string sig = "reduce(root " + std::to_string(root) + ", " + reduceOpName(op) + ", " + describe(t) + ")";
  return collective("reduce", c10d::OpType::REDUCE, {t}, sig, problem,
                    [&](int64_t seq, const Infos&) {
    Reduction red = reduction(op, sdtype(t));
    runtime::BufferPtr arg = snapshot(t);
    std::vector<bool> donate{rank_ == root && takeOver(t, arg)};
    auto outs = launch([&] {
      shlo::Builder b;
      shlo::Value x = b.parameter(flatType(t), 0);
      return shlo::finishReplicated(b, {reduceAll(b, x, red, n, 1)}, n);
    }, {arg}, seq, donate);
    if (rank_ == root) assign(t, outs[0]);
  });
}

c10::intrusive_ptr<TpuWork> XlaEngine::broadcast(at::Tensor& t, int64_t root) {
  const int n = group_->size();
  std::string problem;
  checkDevice("broadcast", t, problem);
  std::string sig = "broadcast(root " + std::to_string(root) + ", " + describe(t) + ")";
  return collective("broadcast", c10d::OpType::BROADCAST, {t}, sig, problem,
                    [&](int64_t seq, const Infos&) {
    runtime::BufferPtr arg = snapshot(t);
    std::vector<bool> donate{rank_ != root && takeOver(t, arg)};
    auto outs = launch([&] {
      shlo::Builder b;
      shlo::DType dt = sdtype(t), bits = bitsType(dt);
      shlo::Value x = b.parameter(flatType(t), 0);
      shlo::Value u = dt == shlo::DType::Pred ? b.convert(x, bits) : dt == bits ? x : b.bitcastConvert(x, bits);
      shlo::Value id = b.raw("\"stablehlo.replica_id\"()", "() -> tensor<ui32>", {shlo::DType::U32, {}});
      shlo::Value is_root = b.compare(id, b.constantInt(root, shlo::DType::U32), shlo::Cmp::EQ);
      shlo::Value mine = b.select(is_root, u, b.zerosLike(u));
      shlo::Value sum = shlo::allReduce(b, mine, "stablehlo.add", allOf(n), 1);
      shlo::Value y = dt == shlo::DType::Pred ? b.compare(sum, b.zerosLike(sum), shlo::Cmp::NE)
                      : dt == bits            ? sum
                                              : b.bitcastConvert(sum, dt);
      return shlo::finishReplicated(b, {y}, n);
    }, {arg}, seq, donate);
    if (rank_ != root) assign(t, outs[0]);
  });
}

c10::intrusive_ptr<TpuWork> XlaEngine::allgather(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                 c10d::OpType type, bool publish) {
  const int n = group_->size();
  std::string problem = checkScaled("all_gather", outputs, "output", inputs);
  std::string sig = "all_gather(" + describeAll(inputs) + ")";
  return collective("all_gather", type, outputs, sig, problem, [&](int64_t seq, const Infos&) {
    std::vector<runtime::BufferPtr> args = snapshots(inputs);
    auto outs = launch([&] {
      shlo::Builder b;
      std::vector<shlo::Value> res;
      for (size_t i = 0; i < inputs.size(); ++i) {
        shlo::Value x = b.parameter(flatType(inputs[i]));
        shlo::Value y = shlo::allGather(b, x, 0, allOf(n), static_cast<int64_t>(i) + 1);
        res.push_back(b.reshape(y, sizesOf(outputs[i])));
      }
      return shlo::finishReplicated(b, res, n);
    }, args, seq);
    if (publish)
      for (size_t i = 0; i < outputs.size(); ++i) assign(outputs[i], outs[i]);
  });
}

c10::intrusive_ptr<TpuWork> XlaEngine::allgatherLists(std::vector<std::vector<at::Tensor>>& outputs,
                                                      std::vector<at::Tensor>& inputs, c10d::OpType type,
                                                      int64_t root) {
  // Lists of per-rank outputs (all_gather, gather with root >= 0): one program gathering each input into a
  // [size, numel] result whose rows become the list's tensors.
  const int n = group_->size();
  const bool gather = root >= 0;
  const bool receives = !gather || rank_ == root;
  std::string what = gather ? "gather" : "all_gather";
  std::string problem, sig = what + "(" + (gather ? "root " + std::to_string(root) + ", " : "");
  if (receives)
    TORCH_CHECK(outputs.size() == inputs.size(), "tpu_dist: ", what, ": ", outputs.size(), " output lists for ",
                inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkDevice(what, inputs[i], problem);
    if (receives && problem.empty()) {
      if (static_cast<int>(outputs[i].size()) != n)
        problem = what + ": the output list has " + std::to_string(outputs[i].size()) + " tensors, the group has " +
                  std::to_string(n) + " ranks";
      for (const at::Tensor& o : outputs[i]) {
        checkDevice(what, o, problem);
        if (problem.empty() && (o.numel() != inputs[i].numel() || o.scalar_type() != inputs[i].scalar_type()))
          problem = what + ": output " + describe(o) + " does not match input " + describe(inputs[i]);
      }
    }
    sig += (i ? ", " : "") + describe(inputs[i]);
  }
  sig += ")";
  std::vector<at::Tensor> flat_outputs;
  for (auto& l : outputs)
    for (auto& o : l) flat_outputs.push_back(o);
  return collective(what, type, flat_outputs, sig, problem, [&](int64_t seq, const Infos&) {
    std::vector<runtime::BufferPtr> args = snapshots(inputs);
    auto outs = launch([&] {
      shlo::Builder b;
      std::vector<shlo::Value> res;
      for (size_t i = 0; i < inputs.size(); ++i) {
        const int64_t m = inputs[i].numel();
        shlo::Value x = b.reshape(b.parameter(flatType(inputs[i])), {1, m});
        shlo::Value y = shlo::allGather(b, x, 0, allOf(n), static_cast<int64_t>(i) + 1);
        for (int r = 0; r < n; ++r) res.push_back(b.reshape(b.sliceInDim(y, r, r + 1, 1, 0), sizesOf(inputs[i])));
      }
      return shlo::finishReplicated(b, res, n);
    }, args, seq);
    if (receives)
      for (size_t i = 0; i < inputs.size(); ++i)
        for (int r = 0; r < n; ++r) assign(outputs[i][static_cast<size_t>(r)], outs[i * static_cast<size_t>(n) + static_cast<size_t>(r)]);
  });
}

c10::intrusive_ptr<TpuWork> XlaEngine::scatter(at::Tensor& output, std::vector<at::Tensor>& inputs, int64_t root) {
  const int n = group_->size();
  std::string problem;
  checkDevice("scatter", output, problem);
  if (rank_ == root) {
    if (static_cast<int>(inputs.size()) != n && problem.empty())
      problem = "scatter: the root's input list has " + std::to_string(inputs.size()) + " tensors, the group has " +
                std::to_string(n) + " ranks";
    for (const at::Tensor& t : inputs) {
      checkDevice("scatter", t, problem);
      if (problem.empty() && (t.numel() != output.numel() || t.scalar_type() != output.scalar_type()))
        problem = "scatter: input " + describe(t) + " does not match output " + describe(output);
    }
  }
  std::string sig = "scatter(root " + std::to_string(root) + ", " + describe(output) + ")";
  return collective("scatter", c10d::OpType::SCATTER, {output}, sig, problem,
                    [&](int64_t seq, const Infos&) {
    const int64_t m = output.numel();
    runtime::BufferPtr arg;
    if (rank_ == root) {
      c10::DeviceGuard g(output.device());
      std::vector<at::Tensor> flat;
      for (const at::Tensor& t : inputs) flat.push_back(t.reshape({m}));
      arg = snapshot(at::cat(flat));
    } else {
      arg = client().uninitialized(elementType(output), {n * m}, device_);  // contents unused
    }
    auto outs = launch([&] {
      shlo::Builder b;
      shlo::Value x = b.reshape(b.parameter({sdtype(output), {n * m}}), {n, m});
      shlo::Value y = shlo::allToAll(b, x, 0, 0, allOf(n), 0);
      shlo::Value mine = b.reshape(b.sliceInDim(y, root, root + 1, 1, 0), sizesOf(output));
      return shlo::finishReplicated(b, {mine}, n);
    }, {arg}, seq);
    assign(output, outs[0]);
  });
}

c10::intrusive_ptr<TpuWork> XlaEngine::reduceScatter(std::vector<at::Tensor>& outputs,
                                                     std::vector<at::Tensor>& inputs, const c10d::ReduceOp& op,
                                                     c10d::OpType type) {
  const int n = group_->size();
  std::string problem = checkScaled("reduce_scatter", inputs, "input", outputs);
  std::string sig = "reduce_scatter(" + reduceOpName(op) + ", " + describeAll(inputs) + ")";
  return collective("reduce_scatter", type, outputs, sig, problem, [&](int64_t seq, const Infos&) {
    std::vector<runtime::BufferPtr> args;
    std::vector<Reduction> reds;
    for (size_t i = 0; i < inputs.size(); ++i) {
      args.push_back(snapshot(inputs[i]));
      reds.push_back(reduction(op, sdtype(inputs[i])));
    }
    auto outs = launch([&] {
      shlo::Builder b;
      std::vector<shlo::Value> res;
      for (size_t i = 0; i < inputs.size(); ++i) {
        shlo::Value x = b.parameter(flatType(inputs[i]));
        if (reds[i].premul) x = b.mul(x, b.scalarLike(reds[i].factor, x));
        shlo::Value y = shlo::reduceScatter(b, x, 0, reds[i].combiner, allOf(n), static_cast<int64_t>(i) + 1);
        if (reds[i].avg) y = b.div(y, b.scalarLike(n, y));
        res.push_back(b.reshape(y, sizesOf(outputs[i])));
      }
      return shlo::finishReplicated(b, res, n);
    }, args, seq);
    for (size_t i = 0; i < outputs.size(); ++i) assign(outputs[i], outs[i]);
  });
}

c10::intrusive_ptr<TpuWork> XlaEngine::alltoall(at::Tensor& output, at::Tensor& input, std::vector<int64_t> out_splits,
                                                std::vector<int64_t> in_splits) {
  const int n = group_->size();
  std::string problem;
  checkDevice("all_to_all", input, problem);
  checkDevice("all_to_all", output, problem);
  const bool even = out_splits.empty() && in_splits.empty();
  if (problem.empty() && output.scalar_type() != input.scalar_type()) problem = "all_to_all: dtypes differ";
  if (problem.empty() && even && (input.numel() % n != 0 || output.numel() != input.numel()))
    problem = "all_to_all: input " + describe(input) + " and output " + describe(output) +
              " must have the same number of elements, divisible by " + std::to_string(n);
  int64_t row = 1;
  if (problem.empty() && !even) {
    if (input.dim() == 0 || output.dim() == 0) problem = "all_to_all: uneven splits need tensors of rank >= 1";
    if (problem.empty()) {
      row = input.size(0) ? input.numel() / input.size(0) : 0;
      int64_t orow = output.size(0) ? output.numel() / output.size(0) : 0;
      if (in_splits.empty()) in_splits.assign(static_cast<size_t>(n), input.size(0) / n);
      if (out_splits.empty()) out_splits.assign(static_cast<size_t>(n), output.size(0) / n);
      int64_t sin = 0, sout = 0;
      for (int64_t s : in_splits) sin += s;
      for (int64_t s : out_splits) sout += s;
      if (static_cast<int>(in_splits.size()) != n || static_cast<int>(out_splits.size()) != n)
        problem = "all_to_all: split sizes need one entry per rank";
      else if (sin != input.size(0) || sout != output.size(0))
        problem = "all_to_all: split sizes do not add up to dimension 0 of the tensors";
      else if (input.size(0) && output.size(0) && orow != row)
        problem = "all_to_all: input and output rows differ in size";
    }
  }
  // Every rank must agree on the largest piece: the rank-specific split sizes travel through the rendezvous.
  std::string sig = "all_to_all(" + std::string(runtime::elementTypeName(elementType(input))) +
                    (even ? ", " + std::to_string(input.numel()) : ", row " + std::to_string(row)) + ")";
  return collective("all_to_all", c10d::OpType::ALLTOALL_BASE, {output}, sig, problem,
                    [&](int64_t seq, const Infos& infos) {
    c10::DeviceGuard g(input.device());
    if (even) {
      const int64_t m = input.numel() / n;
      auto outs = launch([&] {
        shlo::Builder b;
        shlo::Value x = b.reshape(b.parameter(flatType(input)), {n, m});
        shlo::Value y = shlo::allToAll(b, x, 0, 0, allOf(n), 0);
        return shlo::finishReplicated(b, {b.reshape(y, sizesOf(output))}, n);
      }, {snapshot(input)}, seq);
      assign(output, outs[0]);
    } else {
      int64_t piece = 0;  // the largest piece any rank sends, in rows
      for (const std::string& s : infos)
        for (int64_t v : parseInts(s)) piece = std::max(piece, v);
      const int64_t width = std::max<int64_t>(piece * row, 1);
      // Pad every piece to `piece` rows, exchange [size, width] blocks, keep the received rows.
      at::Tensor flat = input.reshape({input.size(0), row});
      std::vector<at::Tensor> blocks;
      int64_t off = 0;
      for (int j = 0; j < n; ++j) {
        int64_t s = in_splits[static_cast<size_t>(j)];
        at::Tensor p = flat.narrow(0, off, s).reshape({s * row});
        off += s;
        blocks.push_back(at::constant_pad_nd(p, {0, width - s * row}));
      }
      at::Tensor padded = at::stack(blocks);
      auto outs = launch([&] {
                           shlo::Builder b;
                           shlo::Value x = b.parameter({sdtype(input), {n, width}});
                           return shlo::finishReplicated(b, {shlo::allToAll(b, x, 0, 0, allOf(n), 0)}, n);
                         },
                         {snapshot(padded)}, seq);
      at::Tensor recv = wrapBuffer(outs[0], input.scalar_type(), {n, width}, device_);
      std::vector<at::Tensor> pieces;
      for (int j = 0; j < n; ++j) pieces.push_back(recv[j].narrow(0, 0, out_splits[static_cast<size_t>(j)] * row));
      at::Tensor res = at::cat(pieces).reshape(output.sizes());
      at::Tensor dst = output;
      dst.copy_(res);
    }
  }, joinInts(in_splits));
}

c10::intrusive_ptr<TpuWork> XlaEngine::alltoallList(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs) {
  const int n = group_->size();
  TORCH_CHECK(static_cast<int>(outputs.size()) == n && static_cast<int>(inputs.size()) == n,
              "tpu_dist: all_to_all: lists must have one tensor per rank (", n, ")");
  c10::DeviceGuard g(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device_)));
  std::vector<at::Tensor> flat_in;
  std::vector<int64_t> in_splits, out_splits;
  for (const at::Tensor& t : inputs) {
    TORCH_CHECK(isTpu(t) && t.scalar_type() == inputs[0].scalar_type(),
                "tpu_dist: all_to_all: inputs must be tpu tensors of one dtype");
    flat_in.push_back(t.reshape({t.numel()}));
    in_splits.push_back(t.numel());
  }
  int64_t total_out = 0;
  for (const at::Tensor& t : outputs) {
    out_splits.push_back(t.numel());
    total_out += t.numel();
  }
  at::Tensor in = at::cat(flat_in);
  at::Tensor out = at::empty({total_out}, inputs[0].options());
  auto inner = alltoall(out, in, out_splits, in_splits);
  auto work = c10::make_intrusive<TpuWork>(rank_, c10d::OpType::ALLTOALL, "all_to_all", outputs);
  work->setTimeout(timeout_);
  if (auto e = inner->exception()) {
    work->fail(e);
    return work;
  }
  int64_t off = 0;
  for (at::Tensor& t : outputs) {
    at::Tensor dst = t;
    dst.copy_(out.narrow(0, off, t.numel()).reshape(t.sizes()));
    off += t.numel();
  }
  work->complete();
  return work;
}

c10::intrusive_ptr<TpuWork> XlaEngine::barrier() {
  return collective("barrier", c10d::OpType::BARRIER, {}, "barrier()", "", [](int64_t, const Infos&) {
  });
}

c10::intrusive_ptr<TpuWork> XlaEngine::send(at::Tensor& t, int dst, int64_t tag) {
  std::string problem;
  checkDevice("send", t, problem);
  TORCH_CHECK(problem.empty(), "tpu_dist: ", problem);
  TORCH_CHECK(dst >= 0 && dst < group_->size() && dst != rank_, "tpu_dist: send: invalid destination rank ", dst);
  auto work = c10::make_intrusive<TpuWork>(rank_, c10d::OpType::SEND, "send", std::vector<at::Tensor>{t});
  work->setTimeout(timeout_);
  // The snapshot is immutable: the message is complete as soon as it is posted. It travels flat, so the
  // receiver needs no program of its own (one launched from another thread could queue behind its readers).
  std::vector<int64_t> flat{t.numel()};
  runtime::BufferPtr buf = snapshot(t);
  if (buf->dims() != flat) buf = reshapeBuffer(buf, flat);
  group_->send(rank_, dst, tag, std::move(buf));
  work->complete();
  return work;
}

c10::intrusive_ptr<TpuWork> XlaEngine::recv(at::Tensor& t, int src, int64_t tag) {
  std::string problem;
  checkDevice("recv", t, problem);
  TORCH_CHECK(problem.empty(), "tpu_dist: ", problem);
  TORCH_CHECK(src >= -1 && src < group_->size() && src != rank_, "tpu_dist: recv: invalid source rank ", src);
  auto work = c10::make_intrusive<TpuWork>(rank_, src < 0 ? c10d::OpType::RECVANYSOURCE : c10d::OpType::RECV, "recv",
                                           std::vector<at::Tensor>{t});
  work->setTimeout(timeout_);
  std::vector<int64_t> dims{t.numel()};
  runtime::PendingBufferPtr pending = client().pending(elementType(t), dims, device_);
  if (pending) assign(t, pending->buffer());
  at::Tensor target = t;
  const int device = device_;
  group_->recv(src, rank_, tag, [work, pending, target, dims, device](int from, runtime::BufferPtr buf) {
    try {
      TORCH_CHECK(buf->type() == elementType(target) && buf->numElements() == target.numel(),
                  "tpu_dist: recv: rank ", from, " sent ", runtime::elementTypeName(buf->type()), " x ",
                  buf->numElements(), ", the receiving tensor is ", describe(target));
      runtime::BufferPtr mine = client().copyToDevice(*buf, device);
      if (pending)
        pending->fulfill(mine);
      else
        assign(target, mine);
      work->complete();
    } catch (...) {
      work->fail(std::current_exception());
    }
  });
  return work;
}

}  // namespace torch_tpu::dist
