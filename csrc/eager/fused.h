// Fused eager: ops are recorded instead of launched, and launched together as ONE program at the next
// synchronization point, cached by the recorded sequence so repeated steps reuse it.
// (Parts: fused_record.cpp, fused_program.cpp, fused_policy.cpp, fused_flush.cpp; see fused_internal.h.)
//
// Opt-in: torch_tpu.set_eager_mode("fused") or TORCH_TPU_EAGER_MODE=fused ("strict", the default, launches every op
// as it is called). Results are those of strict mode: the same per-op storage programs (eager/kernel.cpp) are
// composed, each as a private function of the fused program, in call order; random ops draw their keys when they are
// recorded, in the same order as strict mode.
//
// What is recorded: every op the lowering kernel runs on the device. A storage an op writes, and every fresh result,
// becomes *pending* (core/storage.h): its value exists only in the trace. Anything that needs the buffer of a pending
// storage from outside the recorder launches the trace first: copies to the host (.item(), .cpu(), printing), a copy
// to another device, data-dependent shapes (they read a count), CPU fallbacks (they copy their inputs), compiled
// graphs, resize_, torch.tpu.synchronize() and events. The trace is also launched when it reaches
// TORCH_TPU_FUSED_MAX_OPS ops (default 1024); a loop without synchronization points is then cut at the period of its
// op sequence, so that every trace of the loop is the same program.
//
// The program's inputs are the buffers the trace read from storages it did not produce (captured when read: buffers
// are immutable), offsets, Python numbers and random keys; its outputs are the values of the storages still alive
// when it is launched (a temporary that died inside the trace is never materialized). Its cache key is the sequence
// of per-op cache entries, how their inputs connect, and which values are outputs.
//
// A trace seen for the first time runs op by op (the per-op executables, as strict mode would) unless the disk cache
// has its fused program; from the second time on its fused program is compiled in the background while the trace
// keeps running op by op, and used once ready. What is alive at a launch can vary between identical steps (garbage
// collection timing, a loop period falling at several places of the step): a launch whose live values a program
// does not cover compiles the trace again keeping every storage's final value. An op whose program fails names
// itself in the error.
//
// Speed check (TORCH_TPU_FUSED_SPEED_CHECK launches of each kind, default 4; 0: off): a fused program's first
// launches alternate with the trace run op by op, each timed from an idle device to completion; a program no
// faster than op by op is dropped (the trace runs op by op, as strict mode would) and timed again after 64, 128,
// ... such runs.
//
// Bypass (TORCH_TPU_FUSED_BYPASS=0: off): recording a trace only to run it op by op costs more than strict mode.
// When the trace just launched repeats the one before it and runs op by op because its program was dropped (or
// none could be built), or, in a loop whose steps end at synchronization points, because its first program is
// still compiling (the third launch in a row), the ops that follow are not recorded: they launch as in strict mode
// until the compiles are done, or for 64 traces' worth of ops; then a trace is recorded again (a dropped program is
// timed again, counting the bypassed traces as its runs op by op). cache_stats()["fused"]["bypassed"] counts them.
//
// Donation (TORCH_TPU_FUSED_DONATE=0: off): a storage the trace overwrites (optimizer state, a KV cache) gives
// its old buffer to the fused program, which writes the new value into it in place (input-output aliasing), when
// only the trace and the storage hold that buffer; cache_stats()["fused"]["donated"] counts them.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/program.h"
#include "eager/entry.h"

namespace torch_tpu::fused {

// Whether ops are recorded (fused) or launched one by one (strict). Cheap.
bool active();
// Whether the op about to run is recorded: fused mode, except while the recorder bypasses (its traces would only
// run op by op: their fused program is still compiling, or was dropped): those ops run as in strict mode. Counts
// the op. Cheap.
bool recordNext();
// While alive, the ops this thread calls launch at once even in fused mode: what recording one op needs launched
// first (the packed copy of a weight, made from a buffer that is not pending).
class Pause {
 public:
  Pause();
  ~Pause();
  Pause(const Pause&) = delete;
  Pause& operator=(const Pause&) = delete;

 private:
  bool prev_;
};
// "strict" or "fused"; switching launches what was recorded.
void setMode(const std::string& mode);
std::string mode();

// The lock every recording call holds while it reads storages and records (recursive: a flush may run inside).
std::recursive_mutex& mutex();

// Records one launch of `p` (instead of p->prog.launch): same arguments, same results (pending tensors).
std::vector<at::Tensor> record(const std::shared_ptr<EagerProgram>& p, core::Signature& sig, core::Program::HostFn host,
                               const std::optional<at::Generator>& gen);

// Launches everything recorded (a synchronization point). `device` < 0: any device.
void flush(int device = -1);

// The StableHLO text of the program the recorded ops would launch now (outputs: the values of the storages still
// alive), without launching it; "" when nothing is recorded. For inspection (torch_tpu._internal.sync).
std::string pendingText();
// Ops recorded and not launched yet.
size_t pendingOps();

struct Stats {
  int64_t ops = 0;            // ops recorded
  int64_t flushes = 0;        // traces launched
  int64_t fused_hits = 0;     // traces launched as a cached fused program
  int64_t fused_compiles = 0; // fused programs compiled (queued for the background compiler)
  int64_t fused_disk_hits = 0;// fused programs read from the disk cache
  int64_t replays = 0;        // traces run op by op (first sighting, or no fused program)
  int64_t limit_flushes = 0;  // traces cut at the size limit or the loop period
  int64_t speed_trials = 0;   // launches (or steps) the speed check ran: warm-up, fused, op by op or strict
  int64_t speed_checks = 0;   // speed checks finished (the program kept or dropped)
  int64_t slow_programs = 0;  // fused programs measured no faster than strict mode (or their trace op by op): unused
  int64_t bypassed = 0;       // ops run as in strict mode while their traces' fused programs compiled (or were dropped)
  int64_t donated = 0;        // buffers donated to fused programs (storages the trace overwrites, updated in place)
  int64_t entries = 0;        // fused programs in the process cache
  int64_t evictions = 0;
  double compile_seconds = 0;
};
Stats stats();
void clearCache();
// Waits for the fused programs being compiled in the background (tests, benchmarks).
void waitForCompiles();
// Tests: the speed check times `trials` launches of each kind, or rounds of a fused and a strict block of steps
// (0: off, -1: TORCH_TPU_FUSED_SPEED_CHECK), adding `bias_seconds` to each timed fused launch or step (to force
// either decision).
void setSpeedCheck(int trials, double bias_seconds);
// Process exit: drops the compiles not started, waits for the one running and stops the compile thread (a compile
// must never run while the plugin's static destructors do). Later traces run op by op. Idempotent.
void shutdown();

}  // namespace torch_tpu::fused
