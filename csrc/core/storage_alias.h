// Storage addresses and storages PyTorch made around a raw address (core/storage.cpp).
//
// A tpu storage's DataPtr address is a range of a reserved address space no memory backs (from 2^56 up, handed out
// in increasing order, never reused, never dereferenced): every byte of every live storage has its own address, so
// a raw data pointer names the storage and the offset within it. torch.from_dlpack / torch.asarray of a DLPack
// capsule exported from a tpu tensor build a tensor over such an address with at::from_blob: a StorageImpl whose
// DataPtr is not ours. storageOf (core/storage.h) adopts it: when its address is the start of a live storage, the
// StorageImpl's DataPtr becomes an alias of that storage (for every tensor sharing it), owning the foreign DataPtr
// (whose deleter releases the capsule, which holds the exporting tensor and so the storage); when the address is
// inside a storage, the tensor moves onto an alias StorageImpl over the whole storage at the matching offset. Both
// tensors then read and write the same bytes. Any other address raises a RuntimeError naming it.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "core/storage.h"

namespace torch_tpu {

// Adopts t's storage as storageOf(t) does (a no-op for a storage made here). Kernels that read a tensor's layout
// before its storage (copies) call it first.
void adoptForeignStorage(const at::Tensor& t);

// The live storage whose address range holds `address` (and the byte offset in it), or null.
TpuStorage* storageAt(uintptr_t address, size_t* offset);

// Resizes `storage` (its buffer already of the new size, or none) to `nbytes`: its reservation, and, when it grows
// past its address range, a new range (its data pointer changes, as a CPU reallocation's does).
void resizeStorage(const c10::Storage& storage, size_t nbytes);

}  // namespace torch_tpu
