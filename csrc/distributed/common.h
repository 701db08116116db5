// Pieces shared by the transports of the c10d backend `tpu_dist`: the Work object and device-tensor helpers.
//
// A tpu tensor's storage holds an immutable PJRT buffer (csrc/core/storage.h). A collective therefore reads a
// snapshot of its inputs (the buffers at issue time) and publishes its outputs by giving their storages new
// buffers: directly when a tensor covers its whole storage, through a copy program into the view otherwise.
// Outputs published at issue time as pending buffers (runtime::PendingBuffer) order every later device program
// after the collective without any host wait.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace torch_tpu::dist {

// A collective's Work: completed by its transport (from any thread) with its output tensors or an error.
// getFuture() completes with the outputs (a list of tensors); wait() rethrows the error.
class TpuWork : public c10d::Work {
 public:
  TpuWork(int rank, c10d::OpType op, std::string name, std::vector<at::Tensor> outputs);
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return outputs_; }
  bool wait(std::chrono::milliseconds timeout) override;
  void complete();
  void fail(std::exception_ptr e);
  // The limit of wait() without a timeout (the process group's timeout); 0 waits forever.
  void setTimeout(std::chrono::milliseconds t) { default_timeout_ = t; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::chrono::milliseconds default_timeout_{0};
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

runtime::ElementType elementType(const at::Tensor& t);
bool isTpu(const at::Tensor& t);
// A tensor that covers its whole storage in row-major order (its storage buffer can be replaced wholesale).
bool coversStorage(const at::Tensor& t);
// The buffer holding t's values in row-major order, as a snapshot (a copy program runs for views).
runtime::BufferPtr snapshot(const at::Tensor& t);
// A tensor of `like`'s dtype and shape on `like`'s device whose storage is `buf` (row-major values).
at::Tensor wrap(const runtime::BufferPtr& buf, const at::Tensor& like);
// Gives `t` the values of `buf` (row-major, t's dtype and numel): replaces t's storage buffer when t covers its
// storage, else launches a copy program into the view.
void assign(const at::Tensor& t, const runtime::BufferPtr& buf);
// "f32[4, 8]" for messages and signatures.
std::string describe(const at::Tensor& t);

}  // namespace torch_tpu::dist
