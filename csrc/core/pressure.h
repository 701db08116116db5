// Address-space mappings held by loaded executables. The CPU plugin maps each loaded executable's JIT-compiled code
// into the process (about five mappings each), and Linux refuses mappings beyond vm.max_map_count (65530 by
// default). Past that limit the plugin's compiler aborts the process, and its loader fails in a way that leaves its
// exception-frame tables dangling (the next C++ exception crashes). The caches that keep executables alive (eager
// programs, fused eager programs, programs by text) are bounded by entry counts that do not know this, and a
// process running many distinct programs (a test suite) reaches it.
//
// Each such cache registers a trimmer. Before every compile or load of an executable, relieveMapPressure() counts
// the process's mappings once every kMapCheckEvery new executables (about 320 mappings apart: far less than the
// headroom) and, when they pass kMapPressureFraction of the limit, asks every cache to drop its least recently used
// half. The executables still in use (a launch in flight, a program being called) stay alive through their own
// references.
#pragma once

#include <cstdint>
#include <functional>

namespace torch_tpu::core {

constexpr int kMapCheckEvery = 64;
constexpr double kMapPressureFraction = 0.75;

// `trim` drops the least recently used half of a cache's entries; it must not block (skip when its lock is busy).
void registerExecutableHolder(std::function<void()> trim);
// Called before compiling or loading an executable.
void relieveMapPressure();

struct MapPressureStats {
  int64_t checks = 0;       // times the mappings were counted
  int64_t trims = 0;        // times the caches were asked to drop half their entries
  int64_t last_mappings = 0;
  int64_t max_mappings = 0;  // vm.max_map_count (65530 if unreadable)
};
MapPressureStats mapPressureStats();
// Tests: the limit to judge pressure against (0: vm.max_map_count again).
void setMapLimitForTesting(int64_t limit);

}  // namespace torch_tpu::core
