// Compiled executables by program text: an in-process cache and an on-disk cache shared by processes.
//
// The disk cache (TORCH_TPU_CACHE_DIR, default $XDG_CACHE_HOME/torch_tpu or ~/.cache/torch_tpu; "" disables it)
// holds serialized executables of eager programs, fused eager programs and compiled graphs alike, keyed by the
// program text and everything else that decides the executable: the plugin (path, size, mtime, API and platform
// versions, attributes) and XLA_FLAGS.
//  - Writes never slow the caller: a background thread serializes and writes each new executable (temporary file +
//    rename, so readers never see a partial entry); flushDiskCache() waits for it, and so does process exit.
//  - Every entry carries the length and hash of its program text and of its payload: an entry that is truncated,
//    garbled or from a hash collision is ignored (and removed), the program compiled and the entry rewritten.
//  - Bounded: TORCH_TPU_CACHE_MAX_BYTES (default 2 GiB; 0 = unbounded). When a process's writes take the directory
//    beyond it, the least recently used entries go first; a disk hit refreshes its entry's mtime, so recency is
//    shared by every process using the directory.
//  - Several processes may share the directory: entries are immutable once renamed into place, a process that loses
//    a race to write the same entry simply replaces it with identical bytes, and an entry evicted while another
//    process reads it stays readable to that process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace torch_tpu::core {

struct ExecutableLookup {
  runtime::ExecutablePtr exe;
  enum class Source { Memory, Disk, Compiled } source = Source::Compiled;
  double seconds = 0;        // compile or load time
  std::string disk_key;      // "" when the disk cache was not used
  bool disk_written = false; // queued for the disk cache
};

struct ExecutableCaches {
  bool memory = true;  // the process cache by program text
  bool disk = true;    // the disk cache (when a cache directory is set)
  bool compile = true; // compile on a miss (false: exe is null when no cache has it)
};

// The executable of `text`: from the process cache, the disk cache, or the compiler (then stored in both).
ExecutableLookup executableFor(const std::string& text, ExecutableCaches caches = {});
// A program spanning several devices (collectives, compiled graphs with collectives inside): compiled with
// `assignment`, cached under its text and the assignment's global device ids, in process and on disk alike.
ExecutableLookup executableFor(const std::string& text, const runtime::DeviceAssignment& assignment,
                               ExecutableCaches caches = {});

void clearExecutables();                   // the process cache (the disk cache stays)
void setCacheDir(const std::string& dir);  // "" disables the disk cache
std::string cacheDir();

// TORCH_TPU_CACHE_MAX_BYTES (default 2 GiB; 0 = unbounded).
int64_t cacheMaxBytes();
void setCacheMaxBytes(int64_t n);

struct DiskCacheStats {
  int64_t hits = 0, misses = 0;          // lookups that found / did not find a usable entry
  int64_t writes = 0, write_bytes = 0;   // entries written
  int64_t write_failures = 0;            // the plugin could not serialize, or the directory was not writable
  int64_t corrupt = 0;                   // entries ignored as truncated or garbled (then removed)
  int64_t evictions = 0, evicted_bytes = 0;  // entries this process removed to stay within the budget
  int64_t pending = 0;                   // writes queued, not yet on disk
  double load_seconds = 0;               // reading + deserializing hits
};
DiskCacheStats diskCacheStats();
// Waits until every queued write is on disk (or failed).
void flushDiskCache();
// Process exit: finishes the queued writes and stops the writer thread; executables compiled later are not
// written. Idempotent.
void shutdownDiskCache();
// Runs an eviction pass now: removes least recently used entries until the directory is within the budget.
void trimDiskCache();
// Entries evicted from the process cache of executables by program text.
int64_t executableEvictions();

// The programs the process holds (TorchTPU's per_entry_stats): every executable executableFor compiled or loaded
// from the disk cache that some in-process cache (eager, fused eager, compiled graphs, collectives) still keeps, in
// the order they were made. An executable every cache dropped is no longer listed.
struct ExecutableEntry {
  uint64_t key_hash = 0;        // hash of the program text (and device assignment)
  int64_t read_count = 0;       // launches
  int64_t last_read_ns = 0;     // wall clock of the latest launch, ns since the epoch; 0: never launched
  double compile_seconds = 0;   // 0 when loaded from the disk cache
  bool from_disk = false;
};
std::vector<ExecutableEntry> executableEntries();

// Debugging and tests: while recording is on, the text of every program looked up (eager, fused, compiled, on
// every cache path) is kept, in order; takeRecordedTexts returns them and clears the record.
void recordProgramTexts(bool on);
std::vector<std::string> takeRecordedTexts();

}  // namespace torch_tpu::core
