// The c10d backend `tpu_dist` (registered for device "tpu" by torch_tpu/distributed.py).
//
// One TpuBackend per process group and rank. Collectives on tpu tensors run on the transport chosen when the
// group was created: "xla" (collective programs, XlaEngine) or "host" (staging through torch's ProcessGroupGloo,
// HostEngine). Collectives on CPU tensors always run on that Gloo backend, in issue order with the others.
#pragma once

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

 private:
  using Role = HostEngine::Role;
  // Which engine runs a collective on these tensors: the XLA engine for tpu tensors under the XLA transport.
  bool onXla(const std::vector<at::Tensor>& tensors) const;
  c10::intrusive_ptr<c10d::Work> submit(const std::string& name, c10d::OpType op, std::vector<HostEngine::Arg> args,
                                        std::vector<at::Tensor> outputs, HostEngine::Call call,
                                        HostEngine::Hook pre = {}, HostEngine::Signature sig = {});
  c10d::Backend& gloo() const { return *host_->gloo(); }

  std::chrono::milliseconds timeout_;
  std::shared_ptr<HostEngine> host_;
  std::shared_ptr<XlaEngine> xla_;
  std::string transport_;
};

}  // namespace torch_tpu::dist
