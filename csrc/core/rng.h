// The per-device default generator and the random keys device programs draw from it.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include <optional>

namespace torch_tpu {

// A tpu generator's state is 16 bytes, TorchTPU's (and CUDA's Philox) layout: the seed and the offset, two
// little-endian uint64. Each random op of a device program draws one 64-bit key, a hash of (seed, offset), and
// advances the offset by one, so get_state / set_state restore the random stream exactly.
struct TpuGenerator : public at::CPUGeneratorImpl {
  static constexpr size_t kStateSize = 16;

  explicit TpuGenerator(int device, uint64_t seed = c10::default_rng_seed_val);
  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  // The key of the next random op (the caller holds the generator's mutex).
  uint64_t nextKey();

 private:
  TpuGenerator* clone_impl() const override;
  void syncEngine();
  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& defaultGenerator(int device);
// A fresh 64-bit key for one random op on `device` from `gen` (or the device's default generator).
uint64_t nextRngKey(const std::optional<at::Generator>& gen, int device);

}  // namespace torch_tpu
