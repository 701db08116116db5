// The one launch of every device program: eager ops, fused-eager traces (and their runs op by op), view and
// storage programs, device-side check folds, compiled graphs and collectives all execute through launchExecutable.
// It is the only caller of runtime::Executable::execute outside runtime/, and does, in this order:
//  - names the launch for a profiler (runtime::LaunchScope; a caller that already opened one passes no kind);
//  - checks that the program's new buffers fit on the device (core/memory.h; donated arguments become outputs in
//    place, and `covered_bytes` are already reserved for them), raising torch.OutOfMemoryError;
//  - counts the launch by kind (launchCounts(), torch_tpu._C._launch_counts());
//  - executes (the runtime also counts per device and per executable, and records the launch while a trace runs).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/runtime.h"

namespace torch_tpu::core {

struct LaunchOptions {
  // What a profiler names the launch: kind ("eager", "fused", "compiled", "collective", "checks", ...), the op or
  // program, more detail. kind null: the label of the runtime::LaunchScope the caller opened. The strings must
  // outlive the launch.
  const char* kind = nullptr;
  const std::string* name = nullptr;
  const std::string* detail = nullptr;
  const std::vector<bool>* donate = nullptr;  // per argument: donated to an output (null: none)
  int launch_id = 0;          // a program over several devices: the id of this run, shared by its participants
  int64_t covered_bytes = 0;  // output bytes already reserved (storages whose reservation becomes their buffer)
};

std::vector<runtime::BufferPtr> launchExecutable(runtime::Executable& exe, int device,
                                                 const std::vector<runtime::Buffer*>& args,
                                                 const LaunchOptions& opts = {});

// Launches so far per label kind ("" for launches no scope named), since the process started.
std::vector<std::pair<std::string, int64_t>> launchCounts();

}  // namespace torch_tpu::core
