// Host transport of `tpu_dist`: every collective runs as the same c10d operation of torch's ProcessGroupGloo on
// host mirrors of the device tensors (across processes where the plugin cannot communicate, e.g. the CPU plugin
// under torchrun).
//
// Issue (caller thread, never blocks): inputs are snapshotted (their current buffers), outputs receive pending
// buffers at once, so later device programs are ordered after the collective. Two engine threads then run the
// collectives in issue order: the stager waits for each input, builds the host mirrors and starts the Gloo
// operation; the completer waits for it and fulfills the pending outputs with buffers made from the mirrors.
// Where device memory is host memory (the CPU plugin) the mirrors are the device buffers themselves: inputs are
// read in place, outputs are written straight into new device buffers, and an in-place collective (all_reduce,
// broadcast) works in the tensor's own buffer when nothing else holds it (taken over with a donating identity
// program that waits for earlier readers), so no byte is copied. Elsewhere mirrors are host copies.
//
// Same-host all_reduce (direct path): when every rank of the group is a process on this host (or a thread of
// this one) and the kernel lets ranks read each other's memory (cross-memory attach, process_vm_readv; probed once
// per group, collectively), a large single-tensor all_reduce does not go through Gloo's TCP ring. Ranks exchange
// the addresses of their mirrors (with the signature), then reduce-scatter: rank r reads its 1/n slice of every
// peer's mirror piece by piece (cache-sized) straight from the peer's memory and reduces it into its own mirror;
// a flag exchange; all-gather: rank r reads every peer's reduced slice straight into its own mirror; a final flag
// exchange (no rank reuses its memory while another still reads it). Each element is reduced by one rank only,
// so every rank ends bitwise equal. TORCH_TPU_DIST_DIRECT=0 (read when a group is created) turns it off.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "distributed/common.h"

namespace torch_tpu::dist {

class HostEngine {
 public:
  enum class Role {
    In,      // read; Gloo may write its mirror (a private copy)
    InView,  // read; Gloo only reads its mirror (zero-copy where possible)
    Out,     // written by the collective
    InOut,   // read and written (in-place collectives)
  };
  struct Arg {
    at::Tensor t;
    Role role;
  };
  // Runs the Gloo operation on the mirrors (one per Arg, same order); returns its Work.
  using Call = std::function<c10::intrusive_ptr<c10d::Work>(std::vector<at::Tensor>& mirrors)>;
  using Hook = std::function<void(std::vector<at::Tensor>& mirrors)>;

  // `peer_pids`: the process id of every rank when all ranks run on this host, else empty (no direct path).
  HostEngine(c10::intrusive_ptr<c10d::Backend> gloo, int rank, std::vector<int64_t> peer_pids = {});
  ~HostEngine();
  HostEngine(const HostEngine&) = delete;
  HostEngine& operator=(const HostEngine&) = delete;

  // What every rank must agree on before a collective runs: Gloo aborts the process when ranks pass tensors of
  // different sizes, so each collective first exchanges its signature (a small all_gather, overlapping the
  // previous collective) and a mismatch fails the collective on every rank instead. Empty: no check (p2p).
  // TORCH_TPU_DIST_CHECK=0 turns the checks off.
  struct Signature {
    std::vector<int64_t> words;
  };
  // The signature of a collective `op` whose rank-independent description is `ref` (dtype and shape), over
  // `count` tensors of `numel` elements in all, with one extra value (root rank, reduce op, row size).
  static Signature signature(c10d::OpType op, const at::Tensor& ref, int64_t count, int64_t numel, int64_t extra);

  // Issues one collective; `outputs` become the Work's result and future value. `pre` runs on the mirrors before
  // the Gloo call, `post` after it completed (before outputs are published). `direct_op` (a c10d reduce op type,
  // or -1): the collective is an all_reduce of one InOut tensor with that op, which may take the direct path.
  c10::intrusive_ptr<TpuWork> submit(const std::string& name, c10d::OpType op, std::vector<Arg> args,
                                     std::vector<at::Tensor> outputs, Call call, Hook pre = {}, Hook post = {},
                                     Signature sig = {}, int direct_op = -1);
  const c10::intrusive_ptr<c10d::Backend>& gloo() const { return gloo_; }
  // Waits until every collective issued so far has completed (errors are reported by their Work).
  void drain();
  // All-reduces that took the direct path so far.
  int64_t directCount() const { return direct_count_.load(); }

 private:
  struct Staged;
  struct Job;
  void stagerLoop();
  void completerLoop();
  void stage(Job& job);
  void verify(Job& job);
  void publish(Job& job);
  void failQuietly(Job& job, std::exception_ptr e);
  bool directUsable(const Job& job, const std::vector<at::Tensor>& mirrors);
  bool directProbe();
  // Runs the all_reduce of `mirror` on the direct path; `addrs`: every rank's mirror address.
  void directAllreduce(Job& job, at::Tensor& mirror, const std::vector<uint64_t>& addrs);
  // Fails (on every rank alike) unless every rank's first kSigWords words of `all` (one row of `stride` words per
  // rank) are equal.
  void checkSignatures(const std::vector<int64_t>& all, size_t stride);
  // Exchanges `mine` (same length on every rank) with every rank (a Gloo all_gather); rank r's words at r * size.
  std::vector<int64_t> exchange(const std::vector<int64_t>& mine);

  c10::intrusive_ptr<c10d::Backend> gloo_;
  int rank_;
  bool host_memory_;  // device buffers are host memory (zero-copy mirrors)
  bool check_;        // exchange signatures before collectives
  bool trace_;        // TORCH_TPU_DIST_TRACE=1: print every collective as it is issued
  int64_t checked_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> to_stage_, to_complete_;
  int64_t issued_ = 0, finished_ = 0;
  bool stop_ = false;
  std::thread stager_, completer_;
  std::vector<int64_t> peer_pids_;
  bool direct_wanted_ = true;       // TORCH_TPU_DIST_DIRECT != 0 when the group was created
  int direct_state_ = 0;            // stager thread: 0 not probed yet, 1 usable, -1 not
  int64_t probe_word_ = 0;          // read by the peers when probing
  std::vector<char> scratch_;       // stager thread: one piece of a peer's slice
  std::atomic<int64_t> direct_count_{0};
};

}  // namespace torch_tpu::dist
