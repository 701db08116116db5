#include "core/packed.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/client.h"
#include "core/storage.h"
#include "settings/settings.h"

namespace torch_tpu::core {

namespace {

struct PackEntry {
  std::weak_ptr<runtime::Buffer> src;
  at::Tensor packed;
};
std::mutex g_pack_mu;
// Bounded by the live weight buffers: every insert first drops the entries whose weight buffer is gone.
std::unordered_map<const runtime::Buffer*, PackEntry> g_packs;
std::atomic<int64_t> g_packed_made{0};

}  // namespace

bool packWeightsEnabled() {
  static const bool on = [] {
    if (std::optional<bool> v = settings::switchValue("TORCH_TPU_PACK_WEIGHTS")) return *v;
    return client().plugin().platform_name == "cpu";
  }();
  return on;
}

bool isPackableTranspose(const at::Tensor& t) {
  const int64_t r = t.dim();
  if ((r != 2 && r != 3) || !at::isFloatingType(t.scalar_type()) || t.size(-1) < 16 || t.size(-2) < 16) return false;
  if (t.storage_offset() != 0 || t.storage().nbytes() != static_cast<size_t>(t.numel()) * t.element_size())
    return false;
  return !t.is_contiguous() && t.transpose(-2, -1).is_contiguous();
}

runtime::BufferPtr packedTranspose(const at::Tensor& weight, const runtime::BufferPtr& src) {
  {
    std::lock_guard<std::mutex> lk(g_pack_mu);
    auto it = g_packs.find(src.get());
    // A live entry is src itself (src is alive, so no other buffer has its address); an expired one is stale.
    if (it != g_packs.end() && !it->second.src.expired()) return storageOf(it->second.packed)->get();
  }
  at::Tensor packed = weight.transpose(-2, -1).contiguous();  // an eager program, run outside the lock
  // Entries dropped here are destroyed after the lock is released: a tensor's last reference may free its Python
  // object, which takes the GIL, and a thread holding the GIL may be waiting for this lock (tensor-parallel ranks
  // run as threads).
  std::vector<PackEntry> dropped;
  {
    std::lock_guard<std::mutex> lk(g_pack_mu);
    for (auto it = g_packs.begin(); it != g_packs.end();) {  // copies of weights written or freed since
      if (it->second.src.expired()) {
        dropped.push_back(std::move(it->second));
        it = g_packs.erase(it);
      } else {
        ++it;
      }
    }
    PackEntry& e = g_packs[src.get()];
    dropped.push_back(std::move(e));
    e = PackEntry{src, packed};
  }
  g_packed_made++;
  return storageOf(packed)->get();
}

void clearPackedWeights() {
  std::unordered_map<const runtime::Buffer*, PackEntry> dropped;  // destroyed without the lock (packedTranspose)
  std::lock_guard<std::mutex> lk(g_pack_mu);
  dropped.swap(g_packs);
}

int64_t packedWeightsMade() { return g_packed_made; }

}  // namespace torch_tpu::core
