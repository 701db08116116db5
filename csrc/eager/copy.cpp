// Copies between cpu and tpu (any strides, dtype conversion), between tpu devices, and .item().
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <deque>
#include <mutex>

#include "core/checks.h"
#include "core/client.h"
#include "core/dtype.h"
#include "core/storage.h"
#include "eager/copy.h"
#include "eager/fallback.h"
#include "eager/fused.h"
#include "eager/kernel.h"
#include "stablehlo/viewprog.h"

namespace torch_tpu {

namespace {

bool coversStorage(const at::Tensor& t) {
  if (t.storage_offset() != 0 || !t.is_contiguous()) return false;
  return static_cast<size_t>(t.numel()) * t.element_size() == t.storage().nbytes();
}

// Same-device tpu -> tpu copy (broadcast, dtype conversion, any views) through the `aten::copy` rule.
void deviceCopy(const at::Tensor& self, const at::Tensor& src) {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::copy_", "");
  torch::jit::Stack st{self, src, false};
  loweringKernel(op, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), &st);
}

}  // namespace

// A tensor with t's values whose storage buffer is exactly those values, in row-major order.
at::Tensor dense(const at::Tensor& t) {
  runtime::BufferPtr buf = storageOf(t)->get();
  if (buf && viewprog::isIdentity(buf->dims(), {t.sizes().vec(), t.strides().vec(), t.storage_offset()}) &&
      runtime::ElementType(toDType(t.scalar_type())) == buf->type() && !t.is_conj() && !t.is_neg())
    return t;
  c10::DeviceGuard g(t.device());
  at::Tensor out = at::empty(t.sizes(), t.options());
  deviceCopy(out, t);
  return out;
}

// Pending device->host copies made with non_blocking=True; synchronize() waits for them.
namespace {
std::mutex g_pending_mu;
std::deque<std::pair<int, runtime::EventPtr>> g_pending;
}  // namespace

void awaitPendingCopies(int device) {
  std::deque<std::pair<int, runtime::EventPtr>> mine;
  {
    std::lock_guard<std::mutex> g(g_pending_mu);
    for (auto it = g_pending.begin(); it != g_pending.end();) {
      if (device < 0 || it->first == device) {
        mine.push_back(*it);
        it = g_pending.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& p : mine) p.second->await();
}

namespace {

// Dtypes no device program handles (complex): their storages move through the host whole.
bool hostOnly(const at::Tensor& t) { return !supportedDType(t.scalar_type()); }

// The storage's bytes on the host (zeros for a never-written storage).
at::Tensor hostStorage(const at::Tensor& t) {
  TpuStorage* st = storageOf(t);
  at::Tensor bytes = at::zeros({static_cast<int64_t>(st->nbytes)}, at::TensorOptions().dtype(at::kByte));
  if (runtime::BufferPtr buf = st->get()) buf->toHost(bytes.data_ptr(), std::min(buf->byteSize(), st->nbytes));
  return bytes;
}

at::Tensor hostView(const at::Tensor& bytes, const at::Tensor& like) {
  return bytes.view(like.scalar_type()).as_strided(like.sizes(), like.strides(), like.storage_offset());
}

void toHostData(const at::Tensor& src, const at::Tensor& dst, bool non_blocking);

void toHost(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  // A synchronization point: device-side checks failed so far on this device raise here (core/checks.h), after the
  // transfer, which the flag read overlaps.
  core::PendingChecks checks;
  if (!non_blocking) {
    // Ops recorded in fused eager mode before this copy launch first: their checks belong to this point too.
    if (fused::active()) fused::flush(src.device().index());
    checks = core::PendingChecks::start(src.device().index());
  }
  toHostData(src, dst, non_blocking);
  checks.finish();
}

void toHostData(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  if (hostOnly(src)) {
    // The storage holds the raw values; conjugate / negative views apply their bit on the host.
    at::Tensor hv = hostView(hostStorage(src), src);
    if (src.is_conj()) hv = hv.conj();
    if (src.is_neg()) hv = hv._neg_view();
    dst.copy_(hv);
    return;
  }
  at::Tensor d = dense(src);
  runtime::BufferPtr buf = bufferOf(d);
  if (dst.is_contiguous() && dst.scalar_type() == src.scalar_type() && dst.sizes() == src.sizes()) {
    if (dst.numel() == 0) return;
    if (non_blocking) {
      auto ev = buf->toHostAsync(dst.data_ptr(), buf->byteSize());
      std::lock_guard<std::mutex> g(g_pending_mu);
      // Keep the buffer alive until the copy completes: the event holds it on the plugin side.
      g_pending.emplace_back(src.device().index(), ev);
      return;
    }
    buf->toHost(dst.data_ptr(), buf->byteSize());
    return;
  }
  at::Tensor tmp = at::empty(src.sizes(), src.options().device(at::kCPU));
  if (tmp.numel() > 0) buf->toHost(tmp.data_ptr(), buf->byteSize());
  dst.copy_(tmp);
}

// A tensor that is its storage's whole buffer as is (no conjugate or negative bit): its buffer can be shared.
bool wholeBuffer(const at::Tensor& t) { return coversStorage(t) && !t.is_conj() && !t.is_neg(); }

void fromHost(const at::Tensor& self, const at::Tensor& src) {
  if (hostOnly(self) && !coversStorage(self)) {
    noteHostTransfer("partial write into a storage of dtype " + std::string(c10::toString(self.scalar_type())));
    at::Tensor bytes = hostStorage(self);
    hostView(bytes, self).copy_(src);
    TpuStorage* st = storageOf(self);
    int64_t n = static_cast<int64_t>(st->nbytes / self.element_size());
    st->set(client().fromHost(bytes.data_ptr(), runtime::ElementType(storageDType(self.scalar_type())), {n}, st->device));
    return;
  }
  at::Tensor host = src;
  if (host.scalar_type() != self.scalar_type() || host.sizes() != self.sizes() || !host.is_contiguous() ||
      host.is_conj() || host.is_neg()) {
    host = at::empty(self.sizes(), self.options().device(at::kCPU));
    host.copy_(src);
  }
  runtime::BufferPtr buf = client().fromHost(host.data_ptr(), runtime::ElementType(storageDType(self.scalar_type())),
                                             self.sizes().vec(), self.device().index());
  if (wholeBuffer(self)) {
    storageOf(self)->set(std::move(buf));
    return;
  }
  at::Tensor tmp = wrapBuffer(std::move(buf), self.scalar_type(), self.sizes(), self.device().index());
  deviceCopy(self, tmp);
}

at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  TORCH_CHECK(self.defined() && src.defined(), "copy_: undefined tensor");
  if (self.is_privateuseone() && src.is_privateuseone() && (hostOnly(self) || hostOnly(src))) {
    if (self.device() == src.device() && self.scalar_type() == src.scalar_type() && self.sizes() == src.sizes() &&
        wholeBuffer(self) && wholeBuffer(src)) {
      // Whole storage to whole storage: buffers are immutable, so the destination shares the source's.
      storageOf(self)->set(bufferOf(src));
      return self;
    }
    noteHostTransfer("copy_ between tpu tensors of dtype " + std::string(c10::toString(src.scalar_type())) + " to " +
                     c10::toString(self.scalar_type()));
    at::Tensor h = at::empty(src.sizes(), src.options().device(at::kCPU));
    toHost(src, h, false);
    fromHost(self, h);
  } else if (self.is_privateuseone() && src.is_privateuseone()) {
    if (self.device() == src.device()) {
      deviceCopy(self, src);
    } else {
      at::Tensor d = dense(src);
      runtime::BufferPtr nb = client().copyToDevice(*bufferOf(d), self.device().index());
      at::Tensor tmp = wrapBuffer(std::move(nb), src.scalar_type(), src.sizes(), self.device().index());
      deviceCopy(self, tmp);
    }
  } else if (self.is_privateuseone()) {
    TORCH_CHECK(src.is_cpu(), "tpu: cannot copy from ", src.device(), " to ", self.device());
    fromHost(self, src);
  } else {
    TORCH_CHECK(self.is_cpu(), "tpu: cannot copy from ", src.device(), " to ", self.device());
    // Broadcasting src into self: expand on the device side first.
    if (src.sizes() != self.sizes()) {
      toHost(src.expand(self.sizes()), self, false);
    } else {
      toHost(src, self, non_blocking);
    }
  }
  return self;
}

}  // namespace

// clone of a tensor no program handles (complex): through the host. PyTorch's conjugate and negative fallbacks
// materialize views with clone, so this must not go through the CPU fallback (which would clone again).
at::Tensor hostClone(const at::Tensor& self) {
  if (wholeBuffer(self)) {
    // Buffers are immutable: the clone shares its source's buffer (none yet: both read as zeros).
    runtime::BufferPtr b = storageOf(self)->get();
    if (!b) return at::empty(self.sizes(), self.options());
    return wrapBuffer(std::move(b), self.scalar_type(), self.sizes(), self.device().index());
  }
  noteHostTransfer(std::string(self.is_conj() ? "resolve_conj" : self.is_neg() ? "resolve_neg" : "clone") +
                   " of a tensor of dtype " + c10::toString(self.scalar_type()));
  at::Tensor h = at::empty(self.sizes(), self.options().device(at::kCPU));
  toHost(self, h, false);
  at::Tensor out = at::empty(self.sizes(), self.options());
  fromHost(out, h);
  return out;
}

namespace {

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor d = dst;
  copy_(d, self, non_blocking);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  at::Tensor d = dst;
  copy_(d, self, false);
  return dst;
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(), " elements cannot be converted to Scalar");
  at::Tensor cpu = at::empty({}, self.options().device(at::kCPU));
  toHost(self.reshape({}), cpu, false);
  return cpu.item();
}

// clone: a tensor of a dtype no device program handles (core/dtype.h) is copied through the host, every other
// through the `aten::clone` rule.
void cloneKernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const size_t base = stack->size() - op.schema().arguments().size();
  const c10::IValue& self = (*stack)[base];
  if (self.isTensor() && !supportedDType(self.toTensor().scalar_type())) {
    at::Tensor out = hostClone(self.toTensor());
    stack->erase(stack->begin() + static_cast<std::ptrdiff_t>(base), stack->end());
    stack->push_back(std::move(out));
    return;
  }
  loweringKernel(op, ks, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("clone", torch::CppFunction::makeFromBoxedFunction<&cloneKernel>());
  m.impl("copy_", TORCH_FN(copy_));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
}

}  // namespace torch_tpu
