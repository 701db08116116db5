// One entry of the eager program cache: the storage program of one op for one call signature, and what the kernel
// and the fused-eager recorder need to run it.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/program.h"

namespace torch_tpu {

struct EagerProgram {
  uint64_t id = 0;                // unique in the process (fused traces name entries by it)
  std::string op;                 // "aten::add.Tensor"
  bool fallback = false;          // no rule applies: run on CPU
  bool error_on_cpu = false;      // the meta kernel rejected the call: let the CPU kernel raise
  std::string fallback_reason;
  core::Program prog;             // prog.exe: compiled on first launch (fused mode records without compiling)
  std::string text;               // the program (StableHLO)
  shlo::Builder::MainLayout layout;  // where @main's parts lie in `text` (for function())
  // Results are "flat": one per returned tensor (Tensor[] returns expanded), or, for ops returning nothing, one per
  // tensor of the mutated arguments (then all written). Fresh results are the defined ones not written.
  int num_flat = 0;
  std::vector<int> fresh_flat;               // flat index of each fresh result, in program output order
  std::vector<std::vector<int>> ret_flat;    // per return: its flat results (-1: undefined)

  // The executable: compiled (or read from the disk cache) on first need; thread-safe.
  const runtime::ExecutablePtr& executable();

  // The program as a private function @e<id> of a fused program (eager/fused_program.cpp), made on first need.
  struct Function {
    std::string text;                       // "func.func private @e<id>(...) -> (...) {...}"
    std::vector<std::string> arg_types;     // per parameter
    std::vector<std::string> result_types;  // per output
    std::string top;                        // top-level functions @main calls (foreign kernels); may be shared
  };
  const Function& function();

 private:
  std::once_flag exe_once_, fn_once_;
  Function fn_;
};

}  // namespace torch_tpu
