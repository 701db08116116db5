// The per-device default generator and the random keys device programs draw from it.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include <optional>

namespace torch_tpu {

struct TpuGenerator : public at::CPUGeneratorImpl {
  explicit TpuGenerator(int device);
 private:
  TpuGenerator* clone_impl() const override;
};

const at::Generator& defaultGenerator(int device);
// A fresh 64-bit key for one random op on `device` from `gen` (or the device's default generator).
uint64_t nextRngKey(const std::optional<at::Generator>& gen, int device);

}  // namespace torch_tpu
