// XLA transport of `tpu_dist`: every collective is a small StableHLO program (stablehlo/collectives.h) over the
// group's devices, compiled once per signature and launched on the rank's own device with a launch id shared by
// the group.
//
// Here the ranks of a group are threads of one process, one device each (the CPU plugin's virtual devices; the
// chips of one host). An in-process rendezvous per collective checks that every rank called the same collective
// with matching tensors (a mismatch or a rank that never arrives is an error on every rank, within the group's
// timeout, instead of XLA's fatal rendezvous timeout), and exchanges what each rank alone knows (all_to_all
// split sizes). Point-to-point messages are device-to-device copies through an in-process mailbox.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "core/replicas.h"
#include "distributed/common.h"

namespace torch_tpu::dist {

class XlaGroup {
 public:
  // Blocks until all `size` ranks of the group `key` joined (each with its device) or `timeout` passed. Ranks
  // of successive groups with the same key are matched in order.
  static std::shared_ptr<XlaGroup> join(const std::string& key, int rank, int size, int device,
                                        std::chrono::milliseconds timeout);
  int size() const { return size_; }
  const std::vector<int>& devices() const { return devices_; }
  int launchId(int64_t seq) const;

  // Rendezvous of collective number `seq`: posts this rank's signature (which must match every other rank's)
  // and `info` (rank-specific), waits for all ranks and returns every rank's info.
  std::vector<std::string> arrive(int rank, int64_t seq, const std::string& what, const std::string& sig,
                                  const std::string& info, std::chrono::milliseconds timeout);

  // Point-to-point: a message from src to dst under tag; a receiver gets it through `deliver` (called on the
  // sender's or the receiver's thread). src = -1 receives from any rank.
  using Deliver = std::function<void(int src, runtime::BufferPtr)>;
  void send(int src, int dst, int64_t tag, runtime::BufferPtr buf);
  void recv(int src, int dst, int64_t tag, Deliver deliver);

 private:
  XlaGroup(int size, uint64_t uid) : size_(size), uid_(uid), devices_(static_cast<size_t>(size), -1) {}
  struct Slot {
    std::vector<std::string> sigs, infos;
    std::vector<bool> present;
    int arrived = 0, left = 0;
  };
  struct Message {
    int src, dst;
    int64_t tag;
    runtime::BufferPtr buf;
  };
  struct Receiver {
    int src, dst;
    int64_t tag;
    Deliver deliver;
  };

  const int size_;
  const uint64_t uid_;
  std::vector<int> devices_;
  int joined_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, Slot> slots_;
  std::deque<Message> messages_;
  std::deque<Receiver> receivers_;
};

// One rank's side of a group under the XLA transport. As a core::ReplicaGroup it also serves compiled graphs with
// collectives inside: their meetings take the next collective number, ordered with the group's other collectives.
class XlaEngine : public core::ReplicaGroup {
 public:
  XlaEngine(std::shared_ptr<XlaGroup> group, int rank, int device, std::chrono::milliseconds timeout);
  int device() const { return device_; }
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  const std::vector<int>& devices() const override { return group_->devices(); }
  Step meet(const std::string& what, const std::string& sig, const std::string& info) override;

  c10::intrusive_ptr<TpuWork> allreduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOp& op,
                                        c10d::OpType type);
  c10::intrusive_ptr<TpuWork> broadcast(at::Tensor& t, int64_t root);
  c10::intrusive_ptr<TpuWork> reduce(at::Tensor& t, int64_t root, const c10d::ReduceOp& op);
  // Every rank's inputs[i] concatenated (in rank order) into outputs[i] (numel = size * input numel).
  c10::intrusive_ptr<TpuWork> allgather(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                        c10d::OpType type, bool publish = true);
  c10::intrusive_ptr<TpuWork> allgatherLists(std::vector<std::vector<at::Tensor>>& outputs,
                                             std::vector<at::Tensor>& inputs, c10d::OpType type, int64_t root);
  c10::intrusive_ptr<TpuWork> scatter(at::Tensor& output, std::vector<at::Tensor>& inputs, int64_t root);
  // inputs[i] (numel = size * output numel) reduced and scattered into outputs[i].
  c10::intrusive_ptr<TpuWork> reduceScatter(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                            const c10d::ReduceOp& op, c10d::OpType type);
  c10::intrusive_ptr<TpuWork> alltoall(at::Tensor& output, at::Tensor& input, std::vector<int64_t> out_splits,
                                       std::vector<int64_t> in_splits);
  c10::intrusive_ptr<TpuWork> alltoallList(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs);
  c10::intrusive_ptr<TpuWork> barrier();
  c10::intrusive_ptr<TpuWork> send(at::Tensor& t, int dst, int64_t tag);
  c10::intrusive_ptr<TpuWork> recv(at::Tensor& t, int src, int64_t tag);

 private:
  using Build = std::function<std::string()>;
  using Infos = std::vector<std::string>;  // every rank's info, in rank order
  using Body = std::function<void(int64_t seq, const Infos& infos)>;
  // The frame of every collective: takes the next collective number, makes the Work (of `outputs`), meets the
  // other ranks with `sig` and `info` (raising `problem`, when set, on every rank), then runs `body`. Errors of the
  // rendezvous and c10::Errors are raised; any other error of the body fails the Work.
  c10::intrusive_ptr<TpuWork> collective(const std::string& what, c10d::OpType type, std::vector<at::Tensor> outputs,
                                         const std::string& sig, const std::string& problem, const Body& body,
                                         const std::string& info = "");
  // Runs the group's program built by `build` (compiled for the group's devices once: the core's executable cache)
  // on this rank's device with `args` and the launch id of collective `seq`; returns its outputs. `donate`
  // (optional, one flag per argument) gives an argument's buffer to the program (its parameter must alias an
  // output: Builder::parameter(..., donate_to_output)); arguments not donated are copied by XLA.
  std::vector<runtime::BufferPtr> launch(const Build& build, const std::vector<runtime::BufferPtr>& args, int64_t seq,
                                         const std::vector<bool>& donate = {});
  // The rendezvous of the next collective; throws (after arriving) when `problem` is set.
  std::vector<std::string> arrive(int64_t seq, const std::string& what, const std::string& sig,
                                  const std::string& problem = "", const std::string& info = "");
  void checkDevice(const std::string& what, const at::Tensor& t, std::string& problem) const;
  // all_gather / reduce_scatter: big[i] holds group-size times small[i]'s elements, same dtype, on this rank's
  // device. Returns the problem ("" if none).
  std::string checkScaled(const std::string& what, const std::vector<at::Tensor>& big, const std::string& big_name,
                          const std::vector<at::Tensor>& small) const;

  std::shared_ptr<XlaGroup> group_;
  int rank_;
  int device_;
  std::chrono::milliseconds timeout_;
  int64_t seq_ = 0;
};

}  // namespace torch_tpu::dist
