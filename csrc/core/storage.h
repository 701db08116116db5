// Device storage of `tpu` tensors.
//
// A tensor's StorageImpl holds a DataPtr whose context is a TpuStorage: the PJRT buffer that currently holds the
// storage's bytes (created lazily, replaced wholesale when an op writes into the storage), its device and its
// element type. The DataPtr's address is the TpuStorage itself: unique and never dereferenced as memory. Views
// share the StorageImpl, so a write into any view replaces the buffer every alias sees. The buffer keeps the shape
// of the tensor that produced it; readers reshape/slice/gather it inside their programs.
//
// Thread-safety: `buffer` is read and replaced under `mu` (autograd runs backward ops on its own thread).
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>

#include <mutex>

#include "runtime/runtime.h"

namespace torch_tpu {

struct TpuStorage {
  std::mutex mu;
  runtime::BufferPtr buffer;  // null until first written
  int device = 0;
  size_t nbytes = 0;

  runtime::BufferPtr get() {
    std::lock_guard<std::mutex> g(mu);
    return buffer;
  }
  void set(runtime::BufferPtr b) {
    std::lock_guard<std::mutex> g(mu);
    buffer = std::move(b);
  }
};

// The allocator registered for the PrivateUse1 device type.
c10::Allocator* tpuAllocator();

// The TpuStorage behind a tpu tensor (never null for a tensor with storage).
TpuStorage* storageOf(const at::Tensor& t);
TpuStorage* storageOf(const c10::Storage& s);

// The buffer of `t`'s storage, materialized (zero-filled, flat, of t's dtype) when it has none yet.
runtime::BufferPtr bufferOf(const at::Tensor& t);

// A new contiguous tensor on `device` whose storage is `buffer` (its element count must match sizes).
at::Tensor wrapBuffer(runtime::BufferPtr buffer, at::ScalarType dtype, c10::IntArrayRef sizes, int device);

}  // namespace torch_tpu
