// A bounded map with least-recently-used eviction, for the in-process program caches (eager programs by call
// signature, fused programs by trace, executables by program text). Not thread-safe: callers hold their own lock.
//
// A hit stamps the entry with a tick (no list splicing on the hot path); an insert beyond the limit evicts the
// entry with the oldest tick (an O(n) scan, paid only when a full cache takes a new entry, i.e. next to a compile).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace torch_tpu::core {

// TORCH_TPU_PROGRAM_CACHE_SIZE: the most entries each in-process program cache keeps (default 4096; 0 = unbounded).
size_t programCacheLimit();
void setProgramCacheLimit(size_t n);  // tests; takes effect at the next insert

template <class V>
class LruMap {
 public:
  // The value of `key`, stamped as most recently used; nullptr when absent.
  V* find(const std::string& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    it->second.tick = ++tick_;
    return &it->second.value;
  }
  // Inserts (or replaces) and evicts least-recently-used entries beyond `limit` (0: unbounded). Returns the value
  // stored.
  V& insert(const std::string& key, V v, size_t limit) {
    auto [it, fresh] = map_.insert_or_assign(key, Entry{std::move(v), ++tick_});
    (void)fresh;
    if (limit > 0) {
      while (map_.size() > limit) {
        auto oldest = map_.end();
        for (auto e = map_.begin(); e != map_.end(); ++e)
          if (e != it && (oldest == map_.end() || e->second.tick < oldest->second.tick)) oldest = e;
        if (oldest == map_.end()) break;
        map_.erase(oldest);
        ++evictions_;
      }
    }
    return it->second.value;
  }
  // Evicts the least recently used half (map pressure, core/pressure.h).
  void trimOldestHalf() {
    if (map_.size() < 2) return;
    std::vector<uint64_t> ticks;
    ticks.reserve(map_.size());
    for (auto& e : map_) ticks.push_back(e.second.tick);
    auto mid = ticks.begin() + static_cast<std::ptrdiff_t>(ticks.size() / 2);
    std::nth_element(ticks.begin(), mid, ticks.end());
    const uint64_t cut = *mid;  // entries older than the median tick go (ticks are distinct)
    for (auto e = map_.begin(); e != map_.end();) {
      if (e->second.tick < cut) {
        e = map_.erase(e);
        ++evictions_;
      } else {
        ++e;
      }
    }
  }
  bool erase(const std::string& key) { return map_.erase(key) > 0; }
  size_t size() const { return map_.size(); }
  void clear() { map_.clear(); }
  int64_t evictions() const { return evictions_; }

 private:
  struct Entry {
    V value;
    uint64_t tick;
  };
  std::unordered_map<std::string, Entry> map_;
  uint64_t tick_ = 0;
  int64_t evictions_ = 0;
};

}  // namespace torch_tpu::core
