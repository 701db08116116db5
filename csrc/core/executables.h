// Compiled executables by program text: an in-process cache and an on-disk cache shared by processes.
//
// The disk cache (TORCH_TPU_CACHE_DIR, default $XDG_CACHE_HOME/torch_tpu or ~/.cache/torch_tpu; "" disables it)
// holds serialized executables keyed by the program text and everything else that decides the executable: the
// plugin (path, size, mtime, API and platform versions, attributes) and XLA_FLAGS. Entries are written atomically
// (temporary file + rename); an entry that fails to load is ignored.
#pragma once

#include <string>

#include "runtime/runtime.h"

namespace torch_tpu::core {

struct ExecutableLookup {
  runtime::ExecutablePtr exe;
  enum class Source { Memory, Disk, Compiled } source = Source::Compiled;
  double seconds = 0;        // compile or load time
  std::string disk_key;      // "" when the disk cache was not used
  bool disk_written = false;
};

struct ExecutableCaches {
  bool memory = true;  // the process cache by program text
  bool disk = true;    // the disk cache (when a cache directory is set)
};

// The executable of `text`: from the process cache, the disk cache, or the compiler (then stored in both).
ExecutableLookup executableFor(const std::string& text, ExecutableCaches caches = {});

void clearExecutables();                   // the process cache (the disk cache stays)
void setCacheDir(const std::string& dir);  // "" disables the disk cache
std::string cacheDir();

}  // namespace torch_tpu::core
