#include "distributed/common.h"

#include <ATen/core/ivalue.h>
#include <c10/core/DeviceGuard.h>

#include "core/client.h"
#include "core/config.h"
#include "core/dtype.h"
#include "core/storage.h"

namespace torch_tpu::dist {

TpuWork::TpuWork(int rank, c10d::OpType op, std::string name, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, op), name_(std::move(name)), outputs_(std::move(outputs)) {
  std::vector<c10::Device> devices;
  for (const at::Tensor& t : outputs_)
    if (t.defined() && t.is_privateuseone()) {
      bool seen = false;
      for (const auto& d : devices) seen |= d == t.device();
      if (!seen) devices.push_back(t.device());
    }
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()), devices);
}

bool TpuWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) timeout = default_timeout_;
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
    TORCH_CHECK(false, "tpu_dist: ", name_, " did not complete within ", timeout.count(), " ms");
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

void TpuWork::complete() {
  finish();
  if (!future_->completed()) future_->markCompleted(c10::IValue(outputs_));
}

void TpuWork::fail(std::exception_ptr e) {
  finish(e);
  if (!future_->completed()) future_->setError(e);
}

runtime::ElementType elementType(const at::Tensor& t) { return runtime::ElementType(toDType(t.scalar_type())); }

bool isTpu(const at::Tensor& t) { return t.defined() && t.is_privateuseone(); }

bool coversStorage(const at::Tensor& t) {
  if (t.storage_offset() != 0 || !t.is_contiguous()) return false;
  return static_cast<size_t>(t.numel()) * t.element_size() == t.storage().nbytes();
}

runtime::BufferPtr snapshot(const at::Tensor& t) {
  if (coversStorage(t)) {
    runtime::BufferPtr buf = storageOf(t)->get();
    if (buf && buf->type() == elementType(t)) return buf;  // the values as they are (any dims, same count)
  }
  // A view, or a storage of another element type: a row-major copy (an eager program).
  c10::DeviceGuard g(t.device());
  at::Tensor d = t.clone(at::MemoryFormat::Contiguous);
  return bufferOf(d);
}

at::Tensor wrap(const runtime::BufferPtr& buf, const at::Tensor& like) {
  return wrapBuffer(buf, like.scalar_type(), like.sizes(), like.device().index());
}

void assign(const at::Tensor& t, const runtime::BufferPtr& buf) {
  if (coversStorage(t) && buf->type() == elementType(t)) {
    storageOf(t)->set(buf);
    return;
  }
  c10::DeviceGuard g(t.device());
  at::Tensor src = wrap(buf, t);
  at::Tensor dst = t;
  dst.copy_(src);
}

std::string describe(const at::Tensor& t) {
  if (!t.defined()) return "undefined";
  std::string s = runtime::elementTypeName(runtime::ElementType(toDType(t.scalar_type())));
  s += "[";
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (i) s += ", ";
    s += std::to_string(t.size(i));
  }
  s += "]";
  return s;
}

}  // namespace torch_tpu::dist
