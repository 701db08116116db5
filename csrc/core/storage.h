// Device storage of `tpu` tensors.
//
// A tensor's StorageImpl holds a DataPtr whose context is a TpuStorage: the PJRT buffer that currently holds the
// storage's bytes (created lazily, replaced wholesale when an op writes into the storage), its device and its
// element type. The DataPtr's address is the TpuStorage itself: unique and never dereferenced as memory. Views
// share the StorageImpl, so a write into any view replaces the buffer every alias sees. The buffer keeps the shape
// of the tensor that produced it; readers reshape/slice/gather it inside their programs.
//
// Until its first buffer, a storage's bytes are *reserved* in the device's memory accounting (core/memory.h), so
// memory_allocated() counts a tensor from its allocation; the reservation ends when the storage gets a buffer.
//
// Thread-safety: `buffer` is read and replaced under `mu` (autograd runs backward ops on its own thread).
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "runtime/runtime.h"

namespace torch_tpu {

struct TpuStorage {
  std::mutex mu;
  runtime::BufferPtr buffer;  // null until first written
  int device = 0;
  size_t nbytes = 0;
  bool reserved = false;      // nbytes are reserved in the accounting (no buffer yet); guarded by mu

  // Fused eager (eager/fused.h): while `pending` is kPending, the storage's value is computed by recorded ops not
  // launched yet, into a buffer of `pending_dims` / `pending_type`. Reading or replacing the buffer from outside the
  // recorder (get, set, bufferOf) launches the recorded ops first. kLost: the recorded ops failed (their error was
  // raised); reading the storage raises until it is written again. `trace` is the recorder's record of this storage
  // (set and cleared by the recorder; the storage's destruction tells the recorder).
  static constexpr uint8_t kPending = 1, kLost = 2;
  std::atomic<uint8_t> pending{0};
  std::atomic<void*> trace{nullptr};
  std::vector<int64_t> pending_dims;
  runtime::ElementType pending_type = runtime::ElementType::F32;

  runtime::BufferPtr get() {
    if (pending.load(std::memory_order_acquire)) flushPending(this);
    std::lock_guard<std::mutex> g(mu);
    return buffer;
  }
  void set(runtime::BufferPtr b) {
    // A trace that read (or writes) this storage launches first: it captured the buffer being replaced.
    const uint8_t p = pending.load(std::memory_order_acquire);
    if (p == kLost) pending.store(0, std::memory_order_release);
    else if (p || trace.load(std::memory_order_acquire)) flushPending(this);
    std::lock_guard<std::mutex> g(mu);
    buffer = std::move(b);
    if (reserved) unreserve();
  }
  // Ends the reservation (called with mu held, or by the deleter).
  void unreserve() noexcept;
  // The storage grows or shrinks to `n` bytes (resize_); a reservation follows (raises torch.OutOfMemoryError when
  // the growth does not fit).
  void resize(size_t n);

  // The buffer as it is, pending or not (the recorder's own reads).
  runtime::BufferPtr peek() {
    std::lock_guard<std::mutex> g(mu);
    return buffer;
  }

  // Hooks of the fused-eager recorder: `flush` launches the recorded ops (a pending storage is read from outside),
  // `died` tells it a storage it records is destroyed.
  static void setPendingHooks(void (*flush)(TpuStorage*), void (*died)(TpuStorage*));
  static void flushPending(TpuStorage* s);
};

// The allocator registered for the PrivateUse1 device type.
c10::Allocator* tpuAllocator();

// The TpuStorage behind a tpu tensor (never null for a tensor with storage).
TpuStorage* storageOf(const at::Tensor& t);
TpuStorage* storageOf(const c10::Storage& s);

// Byte slices of storages. PyTorch's `UntypedStorage[a:b]` makes a StorageImpl whose DataPtr points `a` bytes into
// the sliced storage's data pointer and whose context holds a reference to the sliced StorageImpl, freed by a deleter
// of PyTorch's own (registered once, from a CPU slice, by the Python package). A tpu slice has no TpuStorage of its
// own: tensors set_ onto it alias the sliced storage at the slice's byte offset (eager/views.cpp).
void noteSliceDeleter(c10::DeleterFnPtr deleter);
struct SliceBase {
  c10::Storage base;   // the storage holding the bytes (`s` itself when it is not a slice)
  size_t offset = 0;   // the slice's first byte in it
};
SliceBase sliceBase(const c10::Storage& s);

// The buffer of `t`'s storage, materialized (zero-filled, flat, of t's dtype) when it has none yet.
runtime::BufferPtr bufferOf(const at::Tensor& t);

// A new contiguous tensor on `device` over a new storage of `nbytes` without a buffer.
at::Tensor emptyTensor(size_t nbytes, at::ScalarType dtype, c10::IntArrayRef sizes, int device);

// A new contiguous tensor on `device` whose storage is `buffer` (its element count must match sizes).
at::Tensor wrapBuffer(runtime::BufferPtr buffer, at::ScalarType dtype, c10::IntArrayRef sizes, int device);

}  // namespace torch_tpu
