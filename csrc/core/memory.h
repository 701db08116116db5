// Device memory: what torch.tpu reports and when an allocation fails.
//
// Policy. A tensor's storage holds its device buffer lazily (core/storage.h), so the bytes a storage will need are
// *reserved* when it is allocated: torch.empty(n, device="tpu") counts n bytes in memory_allocated() at once, and the
// reservation becomes the buffer when the storage is first written. An allocation fails at the allocating call with
// torch.OutOfMemoryError (c10::OutOfMemoryError) naming the requested size when the device cannot hold it:
//  - the limit is TORCH_TPU_MEMORY_LIMIT (bytes, or with a K/M/G/T suffix, powers of 1024) if set, else the
//    plugin's bytes_limit (TPU, GPU), else, for the CPU plugin, the host's physical memory;
//  - a request fails when the bytes in use on the device plus the request exceed the limit; with the CPU plugin and
//    no explicit limit, a large request (64 MiB or more) also fails when it exceeds the host's available memory;
//  - a program launch fails the same way when its new buffers (less those it donates) would exceed the limit;
//  - an allocation the plugin itself refuses (RESOURCE_EXHAUSTED) is a torch.OutOfMemoryError too.
#pragma once

#include <cstdint>
#include <string>

namespace torch_tpu::core {

struct MemoryInfo {
  int64_t allocated = 0;  // bytes held by tensors (buffers and reservations), less the backend's scalar cache
  int64_t peak = 0;       // peak of `allocated` since start or the last resetPeak
  int64_t reserved = 0;   // bytes held by the backend on the device (allocated + caches)
  int64_t limit = -1;     // the limit above (-1: none known)
  int64_t free = 0, total = 0;  // torch.tpu.mem_get_info()
  bool from_plugin = false;     // allocated/peak come from the plugin's memory statistics
  std::string limit_source;     // "TORCH_TPU_MEMORY_LIMIT", "plugin", "host memory", ""
};
MemoryInfo memoryInfo(int device);

// Runs before the memory statistics PyTorch's allocator API reads (torch.accelerator.memory_stats() and friends):
// the eager layer launches the recorded fused-eager ops there, so what they allocate counts.
void setBeforeMemoryQuery(void (*hook)(int device));
void beforeMemoryQuery(int device);

// Storage counters behind torch.accelerator.memory_stats(): storages made and freed per device and their bytes, and
// the torch.OutOfMemoryError raised (cumulative since start or resetAccumulated).
struct StorageCounts {
  int64_t live = 0, peak_live = 0, made = 0, freed = 0;
  int64_t bytes_made = 0, bytes_freed = 0;
  int64_t ooms = 0;
};
void noteStorageMade(int device, int64_t nbytes);
void noteStorageFreed(int device, int64_t nbytes);
void noteStorageResized(int device, int64_t old_bytes, int64_t new_bytes);
StorageCounts storageCounts(int device);
void resetAccumulatedCounts(int device);
void resetPeakCounts(int device);

// Raises torch.OutOfMemoryError when `bytes` more on `device` would exceed what it can hold (see above).
void checkAllocation(int device, int64_t bytes);
// The same check for a program launch (no host-memory probe): fast when there is room.
void checkLaunchMemory(int device, int64_t bytes);

}  // namespace torch_tpu::core
