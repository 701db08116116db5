// The per-device default generators and the random keys device programs draw from them.
#include "core/rng.h"

#include <ATen/Utils.h>
#include <ATen/EmptyTensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>

#include "core/client.h"

namespace torch_tpu {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

// Subclasses the CPU generator so code that expects one (CPU kernels given this generator) still accepts it; the
// keys of device programs come from (seed, offset) only, see nextKey. The CPU engine is reseeded from the same
// pair whenever the seed or the state is set, so it is reproducible too.
TpuGenerator::TpuGenerator(int device, uint64_t seed) : at::CPUGeneratorImpl(seed), seed_(seed) {
  device_ = c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device));
  key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
}

void TpuGenerator::syncEngine() { at::CPUGeneratorImpl::set_current_seed(splitmix64(seed_ ^ splitmix64(offset_))); }

void TpuGenerator::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
  syncEngine();
}

uint64_t TpuGenerator::current_seed() const { return seed_; }

uint64_t TpuGenerator::seed() {
  uint64_t s = c10::detail::getNonDeterministicRandom();
  set_current_seed(s);
  return s;
}

void TpuGenerator::set_offset(uint64_t offset) {
  offset_ = offset;
  syncEngine();
}

uint64_t TpuGenerator::get_offset() const { return offset_; }

c10::intrusive_ptr<c10::TensorImpl> TpuGenerator::get_state() const {
  // The CPU engine (drawn from only by CPU kernels given this generator) restarts from (seed, offset) here, as
  // set_state restarts it: the stream after a saved state is the same whether or not it is restored.
  const_cast<TpuGenerator*>(this)->syncEngine();
  auto state = at::detail::empty_cpu({static_cast<int64_t>(kStateSize)}, c10::ScalarType::Byte, std::nullopt,
                                     std::nullopt, std::nullopt, std::nullopt);
  uint64_t words[2] = {seed_, offset_};
  std::memcpy(state.data_ptr<uint8_t>(), words, kStateSize);
  return state.getIntrusivePtr();
}

void TpuGenerator::set_state(const c10::TensorImpl& new_state) {
  at::detail::check_rng_state(new_state);
  TORCH_CHECK(new_state.numel() == static_cast<int64_t>(kStateSize),
              "RNG state of a tpu generator must be ", kStateSize,
              " bytes (seed and offset, two little-endian uint64), got ", new_state.numel());
  uint64_t words[2];
  std::memcpy(words, new_state.data(), kStateSize);
  seed_ = words[0];
  offset_ = words[1];
  syncEngine();
}

uint64_t TpuGenerator::nextKey() {
  uint64_t key = splitmix64(splitmix64(seed_) ^ offset_);
  ++offset_;
  return key;
}

TpuGenerator* TpuGenerator::clone_impl() const {
  auto* g = new TpuGenerator(device_.index(), seed_);
  g->offset_ = offset_;
  g->syncEngine();
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
  if (auto* tpu = dynamic_cast<TpuGenerator*>(g.unsafeGetGeneratorImpl())) return tpu->nextKey();
  return g.get<at::CPUGeneratorImpl>()->random64();  // a CPU generator passed explicitly
}

}  // namespace torch_tpu
