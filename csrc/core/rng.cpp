// The per-device default generators and the random keys device programs draw from them.
#include "core/rng.h"

#include <algorithm>
#include <deque>
#include <mutex>

#include "core/client.h"

namespace torch_tpu {

// Subclasses the CPU generator so CPU-fallback RNG ops accept it; device programs draw a 64-bit key from it per
// random op (see nextRngKey), so manual_seed / get_state / set_state govern device randomness too.
TpuGenerator::TpuGenerator(int device) : at::CPUGeneratorImpl(c10::default_rng_seed_val) {
  device_ = c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device));
  key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
}

TpuGenerator* TpuGenerator::clone_impl() const {
  auto* g = new TpuGenerator(device_.index());
  g->set_state(*get_state());
  return g;
}

const at::Generator& defaultGenerator(int device) {
  static std::mutex mu;
  static std::deque<at::Generator> gens;
  int n = deviceCount();
  TORCH_CHECK(device >= 0 && device < std::max(n, 1), "tpu: invalid device index ", device);
  std::lock_guard<std::mutex> g(mu);
  while (static_cast<int>(gens.size()) <= device)
    gens.push_back(at::make_generator<TpuGenerator>(static_cast<int>(gens.size())));
  return gens[device];
}

uint64_t nextRngKey(const std::optional<at::Generator>& gen, int device) {
  at::Generator g = gen.has_value() && gen->defined() ? *gen : defaultGenerator(device);
  std::lock_guard<std::mutex> lock(g.mutex());
  auto* impl = g.get<at::CPUGeneratorImpl>();
  return impl->random64();
}

}  // namespace torch_tpu
