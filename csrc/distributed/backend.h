// The c10d backend `tpu_dist` (registered for device "tpu" by torch_tpu/distributed.py).
//
// One TpuBackend per process group and rank. Collectives on tpu tensors run on the transport chosen when the
// group was created: "xla" (collective programs, XlaEngine) or "host" (staging through torch's ProcessGroupGloo,
// HostEngine). Collectives on CPU tensors always run on that Gloo backend, in issue order with the others.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "distributed/host.h"
#include "distributed/xla.h"

namespace torch_tpu::dist {

class TpuBackend : public c10d::Backend {
 public:
  TpuBackend(int rank, int size, std::chrono::milliseconds timeout, std::shared_ptr<HostEngine> host,
             std::shared_ptr<XlaEngine> xla, std::string transport);
  ~TpuBackend() override;

  const std::string getBackendName() const override { return "tpu_dist"; }
  const std::string& transport() const { return transport_; }
  // Host transport: all_reduces that took the same-host direct path (see host.h).
  int64_t directAllreduces() const { return host_->directCount(); }
  // The XLA transport's engine (null under the host transport).
  const std::shared_ptr<XlaEngine>& xla() const { return xla_; }
  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
  bool supportsSplitting() const override { return false; }
  bool supportsCoalescing() const override { return false; }
  // destroy_process_group: collectives already issued still run (the other ranks need this rank's part).
  void shutdown() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

  // A Gloo operation on mirrors given back as a flat list and a list of lists (see submitLists).
  using Lists = std::vector<std::vector<at::Tensor>>;
  using ListsCall = std::function<c10::intrusive_ptr<c10d::Work>(c10d::Backend&, std::vector<at::Tensor>&, Lists&)>;

 private:
  using Role = HostEngine::Role;
  // Which engine runs a collective on these tensors: the XLA engine for tpu tensors under the XLA transport.
  bool onXla(const std::vector<at::Tensor>& tensors) const;
  c10::intrusive_ptr<c10d::Work> submit(const std::string& name, c10d::OpType op, std::vector<HostEngine::Arg> args,
                                        std::vector<at::Tensor> outputs, HostEngine::Call call,
                                        HostEngine::Hook pre = {}, HostEngine::Signature sig = {},
                                        int direct_op = -1);
  c10d::Backend& gloo() const { return *host_->gloo(); }
  // Host transport: a collective over a flat tensor list (`flat`, one role) and a list of lists (`lists`, another
  // role); `call` runs the Gloo operation on their mirrors, given back in the same structure.
  c10::intrusive_ptr<c10d::Work> submitLists(const std::string& name, c10d::OpType op,
                                             const std::vector<at::Tensor>& flat, Role flat_role, const Lists& lists,
                                             Role list_role, std::vector<at::Tensor> outputs, ListsCall call,
                                             HostEngine::Hook pre, HostEngine::Signature sig);
  // recv (src >= 0) and recvAnysource (src = -1).
  c10::intrusive_ptr<c10d::Work> receive(std::vector<at::Tensor>& tensors, int src, int tag);
  // all_reduce and all_reduce_coalesced: in place on every tensor (host transport, PREMUL_SUM: the mirrors are
  // scaled, then summed).
  using ReduceCall = std::function<c10::intrusive_ptr<c10d::Work>(c10d::Backend&, std::vector<at::Tensor>&,
                                                                  const c10d::AllreduceOptions&)>;
  c10::intrusive_ptr<c10d::Work> reduceInPlace(const std::string& name, c10d::OpType op,
                                               std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts,
                                               ReduceCall call);
  // all_gather, all_gather_coalesced and gather (root >= 0): the inputs, then each output list.
  c10::intrusive_ptr<c10d::Work> gatherLists(const std::string& name, c10d::OpType op, Lists& outputs,
                                             std::vector<at::Tensor>& inputs, int64_t root, ListsCall call);

  std::chrono::milliseconds timeout_;
  std::shared_ptr<HostEngine> host_;
  std::shared_ptr<XlaEngine> xla_;
  std::string transport_;
};

// Installs core's resolver of c10d group names (compiled graphs with collectives inside): a group whose tpu backend
// is tpu_dist with the XLA transport resolves to the calling rank's engine.
void installReplicaGroupResolver();

}  // namespace torch_tpu::dist
