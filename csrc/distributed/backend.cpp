#include "distributed/backend.h"

#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>

#include "core/client.h"
#include "core/config.h"
#include "core/dtype.h"
#include "core/storage.h"

namespace torch_tpu::dist {

namespace {

void checkTensors(const char* what, const std::vector<at::Tensor>& ts) {
  for (const at::Tensor& t : ts) {
    TORCH_CHECK_VALUE(t.defined(), "tpu_dist: ", what, ": undefined tensor");
    TORCH_CHECK_VALUE(t.is_privateuseone() || t.is_cpu(), "tpu_dist: ", what, ": expected tpu or cpu tensors, got ",
                      t.device());
    if (t.is_privateuseone())
      TORCH_CHECK_TYPE(supportedDType(t.scalar_type()) && t.scalar_type() != at::kComplexHalf, "tpu_dist: ", what, ": unsupported dtype ", t.scalar_type(),
                       " (complex tensors: use torch.view_as_real)");
  }
}

// A collective over a tensor list and a list of lists.
void checkListed(const char* what, const std::vector<at::Tensor>& flat,
                 const std::vector<std::vector<at::Tensor>>& lists) {
  checkTensors(what, flat);
  for (const auto& l : lists) checkTensors(what, l);
}

// all_gather_into_tensor / reduce_scatter_tensor: big[i] holds `size` times small[i]'s elements (`rule` is
// PyTorch's message for it).
void checkScaled(const char* what, const std::vector<at::Tensor>& big, const std::vector<at::Tensor>& small,
                 int size, const char* rule) {
  checkTensors(what, big);
  checkTensors(what, small);
  TORCH_CHECK_VALUE(big.size() == small.size(), "tpu_dist: ", what, ": ", big.size(), " and ", small.size(),
                    " tensors (outputs and inputs differ in number)");
  for (size_t i = 0; i < big.size(); ++i)
    TORCH_CHECK_VALUE(big[i].numel() == size * small[i].numel(), "tpu_dist: ", what, ": ", rule, " (",
                      big[i].numel(), " vs ", size, " x ", small[i].numel(), ")");
}

// A Gloo list collective (all_gather, all_gather_coalesced, gather) as a TpuBackend::ListsCall.
template <class Opts>
TpuBackend::ListsCall listsCall(c10::intrusive_ptr<c10d::Work> (c10d::Backend::*fn)(
                                    std::vector<std::vector<at::Tensor>>&, std::vector<at::Tensor>&, const Opts&),
                                const Opts& opts) {
  return [fn, opts](c10d::Backend& g, std::vector<at::Tensor>& in, TpuBackend::Lists& out) {
    return (g.*fn)(out, in, opts);
  };
}

int64_t totalNumel(const std::vector<at::Tensor>& ts) {
  int64_t n = 0;
  for (const at::Tensor& t : ts) n += t.numel();
  return n;
}

HostEngine::Signature sigOf(c10d::OpType op, const std::vector<at::Tensor>& ts, int64_t extra) {
  return HostEngine::signature(op, ts.empty() ? at::Tensor() : ts[0], static_cast<int64_t>(ts.size()),
                               totalNumel(ts), extra);
}

int64_t opCode(const c10d::ReduceOp& op) { return static_cast<int64_t>(op.op_); }

std::vector<at::Tensor> flatten(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> out;
  for (const auto& l : lists)
    for (const auto& t : l) out.push_back(t);
  return out;
}

// Gloo has no PREMUL_SUM: scale the (private) mirrors, then sum.
double premulFactor(const c10d::ReduceOp& op) {
  auto* s = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(s != nullptr, "tpu_dist: PREMUL_SUM without a factor");
  return s->tensor_factor.defined() ? s->tensor_factor.item<double>() : s->double_factor;
}

HostEngine::Hook scaleHook(double factor, size_t first, size_t count) {
  return [factor, first, count](std::vector<at::Tensor>& m) {
    for (size_t i = first; i < first + count && i < m.size(); ++i) m[i].mul_(factor);
  };
}

std::shared_ptr<core::ReplicaGroup> resolveGroup(const std::string& name) {
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  try {
    pg = c10d::resolve_process_group(name);
  } catch (const c10::Error&) {
    return nullptr;
  }
  if (!pg || !pg->hasBackends()) return nullptr;
  c10::intrusive_ptr<c10d::Backend> backend;
  try {
    backend = pg->getBackend(c10::DeviceType::PrivateUse1);
  } catch (const c10::Error&) {
    return nullptr;
  }
  auto* tpu = dynamic_cast<TpuBackend*>(backend.get());
  if (tpu == nullptr) return nullptr;
  return tpu->xla();
}

}  // namespace

void installReplicaGroupResolver() { core::setReplicaGroupResolver(&resolveGroup); }

TpuBackend::TpuBackend(int rank, int size, std::chrono::milliseconds timeout, std::shared_ptr<HostEngine> host,
                       std::shared_ptr<XlaEngine> xla, std::string transport)
    : c10d::Backend(rank, size),
      timeout_(timeout),
      host_(std::move(host)),
      xla_(std::move(xla)),
      transport_(std::move(transport)) {}

TpuBackend::~TpuBackend() = default;

void TpuBackend::shutdown() { host_->drain(); }

bool TpuBackend::onXla(const std::vector<at::Tensor>& tensors) const {
  if (!xla_) return false;
  for (const at::Tensor& t : tensors)
    if (t.defined() && !t.is_privateuseone()) return false;
  return !tensors.empty();
}

c10::intrusive_ptr<c10d::Work> TpuBackend::submit(const std::string& name, c10d::OpType op,
                                                  std::vector<HostEngine::Arg> args, std::vector<at::Tensor> outputs,
                                                  HostEngine::Call call, HostEngine::Hook pre,
                                                  HostEngine::Signature sig, int direct_op) {
  auto work = host_->submit(name, op, std::move(args), std::move(outputs), std::move(call), std::move(pre), {},
                            std::move(sig), direct_op);
  work->setTimeout(timeout_);
  return work;
}

// ------------------------------------------------------------------------------------------------ reductions

c10::intrusive_ptr<c10d::Work> TpuBackend::reduceInPlace(const std::string& name, c10d::OpType op,
                                                         std::vector<at::Tensor>& tensors,
                                                         const c10d::AllreduceOptions& opts, ReduceCall call) {
  checkTensors(name.c_str(), tensors);
  if (onXla(tensors)) return xla_->allreduce(tensors, opts.reduceOp, op);
  std::vector<HostEngine::Arg> args;
  for (const at::Tensor& t : tensors) args.push_back({t, Role::InOut});
  c10d::AllreduceOptions o = opts;
  HostEngine::Hook pre;
  if (opts.reduceOp == c10d::ReduceOp::PREMUL_SUM) {
    pre = scaleHook(premulFactor(opts.reduceOp), 0, tensors.size());
    o.reduceOp = c10d::ReduceOp::SUM;
  }
  auto gloo = host_->gloo();
  const int direct_op = op == c10d::OpType::ALLREDUCE && tensors.size() == 1 ? static_cast<int>(o.reduceOp.op_) : -1;
  return submit(name, op, std::move(args), tensors,
                [gloo, o, call = std::move(call)](std::vector<at::Tensor>& m) { return call(*gloo, m, o); }, pre,
                sigOf(op, tensors, opCode(opts.reduceOp)), direct_op);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceOptions& opts) {
  return reduceInPlace("all_reduce", c10d::OpType::ALLREDUCE, tensors, opts,
                       [](c10d::Backend& g, std::vector<at::Tensor>& m, const c10d::AllreduceOptions& o) {
                         return g.allreduce(m, o);
                       });
}

c10::intrusive_ptr<c10d::Work> TpuBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                               const c10d::AllreduceCoalescedOptions& opts) {
  return reduceInPlace("all_reduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, tensors, opts,
                       [](c10d::Backend& g, std::vector<at::Tensor>& m, const c10d::AllreduceOptions& o) {
                         c10d::AllreduceCoalescedOptions co;
                         static_cast<c10d::AllreduceOptions&>(co) = o;
                         return g.allreduce_coalesced(m, co);
                       });
}

c10::intrusive_ptr<c10d::Work> TpuBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  checkTensors("reduce", tensors);
  TORCH_CHECK_VALUE(tensors.size() == 1, "tpu_dist: reduce takes one tensor");
  if (onXla(tensors)) return xla_->reduce(tensors[0], opts.rootRank, opts.reduceOp);
  const bool root = opts.rootRank == getRank();
  std::vector<HostEngine::Arg> args{{tensors[0], root ? Role::InOut : Role::In}};
  c10d::ReduceOptions o = opts;
  HostEngine::Hook pre;
  if (opts.reduceOp == c10d::ReduceOp::PREMUL_SUM) {
    pre = scaleHook(premulFactor(opts.reduceOp), 0, 1);
    o.reduceOp = c10d::ReduceOp::SUM;
  }
  auto gloo = host_->gloo();
  return submit("reduce", c10d::OpType::REDUCE, std::move(args), tensors,
                [gloo, o](std::vector<at::Tensor>& m) { return gloo->reduce(m, o); }, pre,
                sigOf(c10d::OpType::REDUCE, tensors, opts.rootRank * 16 + opCode(opts.reduceOp)));
}

c10::intrusive_ptr<c10d::Work> TpuBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                     const c10d::BroadcastOptions& opts) {
  checkTensors("broadcast", tensors);
  TORCH_CHECK_VALUE(tensors.size() == 1, "tpu_dist: broadcast takes one tensor");
  if (onXla(tensors)) return xla_->broadcast(tensors[0], opts.rootRank);
  const bool root = opts.rootRank == getRank();
  std::vector<HostEngine::Arg> args{{tensors[0], root ? Role::InView : Role::Out}};
  auto gloo = host_->gloo();
  auto o = opts;
  return submit("broadcast", c10d::OpType::BROADCAST, std::move(args), tensors,
                [gloo, o](std::vector<at::Tensor>& m) { return gloo->broadcast(m, o); }, {},
                sigOf(c10d::OpType::BROADCAST, tensors, opts.rootRank));
}

// ------------------------------------------------------------------------------------------------ gathers

c10::intrusive_ptr<c10d::Work> TpuBackend::submitLists(const std::string& name, c10d::OpType op,
                                                       const std::vector<at::Tensor>& flat, Role flat_role,
                                                       const std::vector<std::vector<at::Tensor>>& lists,
                                                       Role list_role, std::vector<at::Tensor> outputs, ListsCall call,
                                                       HostEngine::Hook pre, HostEngine::Signature sig) {
  std::vector<HostEngine::Arg> args;
  for (const at::Tensor& t : flat) args.push_back({t, flat_role});
  std::vector<size_t> counts;
  for (const auto& l : lists) {
    counts.push_back(l.size());
    for (const at::Tensor& t : l) args.push_back({t, list_role});
  }
  const size_t nf = flat.size();
  auto gloo = host_->gloo();
  return submit(name, op, std::move(args), std::move(outputs),
                [gloo, nf, counts, call = std::move(call)](std::vector<at::Tensor>& m) {
                  std::vector<at::Tensor> f(m.begin(), m.begin() + static_cast<long>(nf));
                  std::vector<std::vector<at::Tensor>> ls;
                  size_t k = nf;
                  for (size_t c : counts) {
                    ls.emplace_back(m.begin() + static_cast<long>(k), m.begin() + static_cast<long>(k + c));
                    k += c;
                  }
                  return call(*gloo, f, ls);
                },
                std::move(pre), std::move(sig));
}

c10::intrusive_ptr<c10d::Work> TpuBackend::gatherLists(const std::string& name, c10d::OpType op,
                                                       std::vector<std::vector<at::Tensor>>& outputs,
                                                       std::vector<at::Tensor>& inputs, int64_t root, ListsCall call) {
  checkListed(name.c_str(), inputs, outputs);
  if (onXla(inputs)) return xla_->allgatherLists(outputs, inputs, op, root);
  return submitLists(name, op, inputs, Role::InView, outputs, Role::Out, flatten(outputs), std::move(call), {},
                     sigOf(op, inputs, root));
}

c10::intrusive_ptr<c10d::Work> TpuBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) {
  return gatherLists("all_gather", c10d::OpType::ALLGATHER, outputs, inputs, -1,
                     listsCall(&c10d::Backend::allgather, opts));
}

c10::intrusive_ptr<c10d::Work> TpuBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                               std::vector<at::Tensor>& inputs,
                                                               const c10d::AllgatherOptions& opts) {
  return gatherLists("all_gather_coalesced", c10d::OpType::ALLGATHER_COALESCED, outputs, inputs, -1,
                     listsCall(&c10d::Backend::allgather_coalesced, opts));
}

c10::intrusive_ptr<c10d::Work> TpuBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                           const c10d::AllgatherOptions& opts) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return allgather_into_tensor_coalesced(outs, ins, opts);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                           std::vector<at::Tensor>& inputs,
                                                                           const c10d::AllgatherOptions& opts) {
  checkScaled("all_gather_into_tensor", outputs, inputs, getSize(),
              "output tensor size must be equal to world_size times input tensor size");
  if (onXla(inputs)) return xla_->allgather(outputs, inputs, c10d::OpType::_ALLGATHER_BASE);
  return submitLists("all_gather_into_tensor", c10d::OpType::_ALLGATHER_BASE, inputs, Role::InView, {outputs},
                     Role::Out, outputs,
                     [opts](c10d::Backend& g, std::vector<at::Tensor>& in, Lists& out) {
                       if (in.size() == 1) return g._allgather_base(out[0][0], in[0], opts);
                       return g.allgather_into_tensor_coalesced(out[0], in, opts);
                     },
                     {}, sigOf(c10d::OpType::_ALLGATHER_BASE, inputs, -1));
}

c10::intrusive_ptr<c10d::Work> TpuBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                  std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  return gatherLists("gather", c10d::OpType::GATHER, outputs, inputs, opts.rootRank,
                     listsCall(&c10d::Backend::gather, opts));
}

c10::intrusive_ptr<c10d::Work> TpuBackend::scatter(std::vector<at::Tensor>& outputs,
                                                   std::vector<std::vector<at::Tensor>>& inputs,
                                                   const c10d::ScatterOptions& opts) {
  checkListed("scatter", outputs, inputs);
  if (onXla(outputs)) {
    TORCH_CHECK_VALUE(outputs.size() == 1, "tpu_dist: scatter takes one output tensor");
    std::vector<at::Tensor> ins = inputs.empty() ? std::vector<at::Tensor>{} : inputs[0];
    return xla_->scatter(outputs[0], ins, opts.rootRank);
  }
  return submitLists("scatter", c10d::OpType::SCATTER, outputs, Role::Out, inputs, Role::InView, outputs,
                     [opts](c10d::Backend& g, std::vector<at::Tensor>& out, Lists& in) {
                       return g.scatter(out, in, opts);
                     },
                     {}, sigOf(c10d::OpType::SCATTER, outputs, opts.rootRank));
}

c10::intrusive_ptr<c10d::Work> TpuBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ReduceScatterOptions& opts) {
  checkListed("reduce_scatter", outputs, inputs);
  if (onXla(outputs)) {
    TORCH_CHECK_VALUE(outputs.size() == 1 && inputs.size() == 1, "tpu_dist: reduce_scatter takes one output and one "
                      "input list");
    TORCH_CHECK_VALUE(static_cast<int>(inputs[0].size()) == getSize(), "tpu_dist: reduce_scatter: the input list has ",
                      inputs[0].size(), " tensors, the group has ", getSize(), " ranks");
    c10::DeviceGuard g(outputs[0].device());
    std::vector<at::Tensor> flat;
    for (const at::Tensor& t : inputs[0]) {
      TORCH_CHECK_VALUE(t.numel() == outputs[0].numel() && t.device() == outputs[0].device(),
                        "tpu_dist: reduce_scatter: input ", describe(t), " does not match output ",
                        describe(outputs[0]));
      flat.push_back(t.reshape({t.numel()}));
    }
    std::vector<at::Tensor> ins{at::cat(flat)};
    return xla_->reduceScatter(outputs, ins, opts.reduceOp, c10d::OpType::REDUCE_SCATTER);
  }
  c10d::ReduceScatterOptions o = opts;
  HostEngine::Hook pre;
  if (opts.reduceOp == c10d::ReduceOp::PREMUL_SUM) {
    pre = scaleHook(premulFactor(opts.reduceOp), outputs.size(), flatten(inputs).size());
    o.reduceOp = c10d::ReduceOp::SUM;
  }
  return submitLists("reduce_scatter", c10d::OpType::REDUCE_SCATTER, outputs, Role::Out, inputs, Role::In, outputs,
                     [o](c10d::Backend& g, std::vector<at::Tensor>& out, Lists& in) {
                       return g.reduce_scatter(out, in, o);
                     },
                     pre, sigOf(c10d::OpType::REDUCE_SCATTER, outputs, opCode(opts.reduceOp)));
}

c10::intrusive_ptr<c10d::Work> TpuBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                           std::vector<at::Tensor>& inputs,
                                                                           const c10d::ReduceScatterOptions& opts) {
  checkScaled("reduce_scatter_tensor", inputs, outputs, getSize(),
              "input tensor must be the same size as output size times world size");
  if (onXla(outputs)) return xla_->reduceScatter(outputs, inputs, opts.reduceOp, c10d::OpType::_REDUCE_SCATTER_BASE);
  // The mirrors are scaled for PREMUL_SUM, so they must be private then.
  const bool premul = opts.reduceOp == c10d::ReduceOp::PREMUL_SUM;
  c10d::ReduceScatterOptions o = opts;
  HostEngine::Hook pre;
  if (premul) {
    pre = scaleHook(premulFactor(opts.reduceOp), outputs.size(), inputs.size());
    o.reduceOp = c10d::ReduceOp::SUM;
  }
  return submitLists("reduce_scatter_tensor", c10d::OpType::_REDUCE_SCATTER_BASE, outputs, Role::Out, {inputs},
                     premul ? Role::In : Role::InView, outputs,
                     [o](c10d::Backend& g, std::vector<at::Tensor>& out, Lists& in) {
                       if (out.size() == 1) return g._reduce_scatter_base(out[0], in[0][0], o);
                       return g.reduce_scatter_tensor_coalesced(out, in[0], o);
                     },
                     pre, sigOf(c10d::OpType::_REDUCE_SCATTER_BASE, outputs, opCode(opts.reduceOp)));
}

c10::intrusive_ptr<c10d::Work> TpuBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return reduce_scatter_tensor_coalesced(outs, ins, opts);
}

// ------------------------------------------------------------------------------------------------ all-to-all

c10::intrusive_ptr<c10d::Work> TpuBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                         std::vector<int64_t>& output_splits,
                                                         std::vector<int64_t>& input_splits,
                                                         const c10d::AllToAllOptions& opts) {
  checkTensors("all_to_all_single", {output, input});
  if (onXla({output, input})) return xla_->alltoall(output, input, output_splits, input_splits);
  std::vector<HostEngine::Arg> args{{output, Role::Out}, {input, Role::InView}};
  auto gloo = host_->gloo();
  auto o = opts;
  auto os = output_splits, is = input_splits;
  // Uneven splits give ranks tensors of different sizes: agree on the dtype and the row size only.
  const bool even = os.empty() && is.empty();
  const int64_t row = input.dim() > 0 && input.size(0) > 0 ? input.numel() / input.size(0) : input.numel();
  auto sig = even ? sigOf(c10d::OpType::ALLTOALL_BASE, {input}, -1)
                  : HostEngine::signature(c10d::OpType::ALLTOALL_BASE, at::empty({row}, input.options().device(at::kCPU)),
                                          1, -1, row);
  return submit("all_to_all_single", c10d::OpType::ALLTOALL_BASE, std::move(args), {output},
                [gloo, o, os, is](std::vector<at::Tensor>& m) mutable {
                  return gloo->alltoall_base(m[0], m[1], os, is, o);
                },
                {}, sig);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                    const c10d::AllToAllOptions& opts) {
  checkTensors("all_to_all", outputs);
  checkTensors("all_to_all", inputs);
  if (onXla(inputs)) return xla_->alltoallList(outputs, inputs);
  return submitLists("all_to_all", c10d::OpType::ALLTOALL, outputs, Role::Out, {inputs}, Role::InView, outputs,
                     [opts](c10d::Backend& g, std::vector<at::Tensor>& out, Lists& in) {
                       return g.alltoall(out, in[0], opts);
                     },
                     {}, sigOf(c10d::OpType::ALLTOALL, inputs, -1));
}

// ------------------------------------------------------------------------------------------------ barrier, p2p

c10::intrusive_ptr<c10d::Work> TpuBackend::barrier(const c10d::BarrierOptions& opts) {
  if (xla_) {
    host_->drain();
    return xla_->barrier();
  }
  auto gloo = host_->gloo();
  c10d::BarrierOptions o = opts;
  o.device = std::nullopt;
  o.device_ids.clear();
  return submit("barrier", c10d::OpType::BARRIER, {}, {},
                [gloo, o](std::vector<at::Tensor>&) { return gloo->barrier(o); }, {},
                HostEngine::signature(c10d::OpType::BARRIER, at::Tensor(), 0, 0, -1));
}

c10::intrusive_ptr<c10d::Work> TpuBackend::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  checkTensors("send", tensors);
  TORCH_CHECK_VALUE(tensors.size() == 1, "tpu_dist: send takes one tensor");
  if (onXla(tensors)) return xla_->send(tensors[0], dst, tag);
  auto gloo = host_->gloo();
  return submit("send", c10d::OpType::SEND, {{tensors[0], Role::InView}}, tensors,
                [gloo, dst, tag](std::vector<at::Tensor>& m) { return gloo->send(m, dst, tag); });
}

c10::intrusive_ptr<c10d::Work> TpuBackend::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  return receive(tensors, src, tag);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  return receive(tensors, -1, tag);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::receive(std::vector<at::Tensor>& tensors, int src, int tag) {
  checkTensors("recv", tensors);
  TORCH_CHECK_VALUE(tensors.size() == 1, "tpu_dist: recv takes one tensor");
  if (onXla(tensors)) return xla_->recv(tensors[0], src, tag);
  auto gloo = host_->gloo();
  return submit("recv", src < 0 ? c10d::OpType::RECVANYSOURCE : c10d::OpType::RECV, {{tensors[0], Role::Out}},
                tensors, [gloo, src, tag](std::vector<at::Tensor>& m) {
                  return src < 0 ? gloo->recvAnysource(m, tag) : gloo->recv(m, src, tag);
                });
}

}  // namespace torch_tpu::dist
