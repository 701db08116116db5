#include "core/executables.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/client.h"
#include "core/lru.h"
#include "core/pressure.h"
#include "settings/settings.h"

namespace torch_tpu::core {

// ---------------------------------------------------------------------------------------------------------------
// Limits.

namespace {
std::atomic<int64_t> g_program_cache_limit{-1};
std::atomic<int64_t> g_cache_max_bytes{-1};

}  // namespace

size_t programCacheLimit() {
  int64_t v = g_program_cache_limit.load(std::memory_order_relaxed);
  if (v < 0) {
    v = settings::integer("TORCH_TPU_PROGRAM_CACHE_SIZE");
    g_program_cache_limit = v;
  }
  return static_cast<size_t>(v);
}

void setProgramCacheLimit(size_t n) { g_program_cache_limit = static_cast<int64_t>(n); }

int64_t cacheMaxBytes() {
  int64_t v = g_cache_max_bytes.load(std::memory_order_relaxed);
  if (v < 0) {
    v = settings::bytes("TORCH_TPU_CACHE_MAX_BYTES");
    g_cache_max_bytes = v;
  }
  return v;
}

void setCacheMaxBytes(int64_t n) { g_cache_max_bytes = std::max<int64_t>(n, 0); }

namespace {

std::mutex g_exe_mu;
LruMap<runtime::ExecutablePtr> g_exes;  // program text -> executable

std::mutex g_dir_mu;
std::string g_cache_dir;
bool g_cache_dir_set = false;

std::mutex g_stats_mu;
DiskCacheStats g_disk;

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// A fast 64-bit hash of a payload (8 bytes per step), to recognize truncated or garbled entries before the plugin
// parses them.
uint64_t payloadHash(const char* p, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ (w * 0xBF58476D1CE4E5B9ULL)) * 0x94D049BB133111EBULL;
    h ^= h >> 31;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p + i, n - i);
  h = (h ^ (tail * 0xBF58476D1CE4E5B9ULL)) * 0x94D049BB133111EBULL;
  return h ^ (h >> 29);
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// What besides the program text decides the executable: the plugin, its version and attributes, the format, and
// the compiler options the plugin reads from XLA_FLAGS.
const std::string& pluginFingerprint() {
  static std::string fp = [] {
    const runtime::PluginInfo& p = client().plugin();
    std::string s = "torch_tpu-exe-v1|" + p.path + "|" + std::to_string(p.api_major) + "." +
                    std::to_string(p.api_minor) + "|" + p.platform_name + "|" + p.platform_version;
    for (const auto& kv : p.attributes) s += "|" + kv.first + "=" + kv.second;
    struct stat st;
    if (::stat(p.path.c_str(), &st) == 0) s += "|" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtime);
    if (const char* flags = std::getenv("XLA_FLAGS")) s += std::string("|XLA_FLAGS=") + flags;  // compiler options
    return s;
  }();
  return fp;
}

std::string diskKey(const std::string& text) {
  std::string all = pluginFingerprint() + "\n" + text;
  return hex(fnv1a(all, 14695981039346656037ULL)) + hex(fnv1a(all, 0x84222325cbf29ce4ULL ^ all.size()));
}

uint64_t textHash(const std::string& text) { return fnv1a(text, 1469598103934665603ULL); }

void mkdirs(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty()) ::mkdir(cur.c_str(), 0755);
    }
    if (i < path.size()) cur += path[i];
  }
}

// Entry layout: magic, text length, text hash, payload length, payload hash (u64 each), payload.
constexpr char kMagic[] = "TORCH_TPU_EXE_2\n";
constexpr size_t kMagicLen = sizeof(kMagic) - 1;
constexpr size_t kHeader = kMagicLen + 32;

std::string entryPath(const std::string& dir, const std::string& key) { return dir + "/" + key + ".exe"; }

bool readFile(const std::string& path, std::string& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return false;
  }
  out.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd, &out[got], out.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return true;
}

enum class LoadResult { Missing, Corrupt, Ok };

LoadResult diskLoad(const std::string& dir, const std::string& key, const std::string& text,
                    runtime::ExecutablePtr& exe) {
  const std::string path = entryPath(dir, key);
  std::string data;
  if (!readFile(path, data)) return LoadResult::Missing;
  auto bad = [&] {
    // Truncated, garbled, written by another format, or a hash collision: drop it; the caller compiles and rewrites.
    ::unlink(path.c_str());
    return LoadResult::Corrupt;
  };
  if (data.size() < kHeader || data.compare(0, kMagicLen, kMagic) != 0) return bad();
  uint64_t len = 0, h = 0, plen = 0, ph = 0;
  std::memcpy(&len, data.data() + kMagicLen, 8);
  std::memcpy(&h, data.data() + kMagicLen + 8, 8);
  std::memcpy(&plen, data.data() + kMagicLen + 16, 8);
  std::memcpy(&ph, data.data() + kMagicLen + 24, 8);
  if (len != text.size() || h != textHash(text)) return bad();
  if (plen != data.size() - kHeader || ph != payloadHash(data.data() + kHeader, plen)) return bad();
  try {
    exe = client().deserialize(data.substr(kHeader));
  } catch (const std::exception&) {
    return bad();
  }
  // Least recently used is judged by mtime, shared by every process using the directory.
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
  return LoadResult::Ok;
}

// ---------------------------------------------------------------------------------------------------------------
// Eviction: the oldest entries (by mtime) go until the directory is within the budget (with a margin, below).

struct DirEntry {
  std::string name;
  int64_t size;
  int64_t mtime_ns;
};

// Lists the entries (and removes temporary files left behind by a process that died mid-write, after an hour).
int64_t listEntries(const std::string& dir, std::vector<DirEntry>* out) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int64_t total = 0;
  const int64_t now = static_cast<int64_t>(::time(nullptr));
  while (struct dirent* e = ::readdir(d)) {
    const char* n = e->d_name;
    size_t len = std::strlen(n);
    struct stat st;
    std::string path = dir + "/" + n;
    if (len > 4 && std::strcmp(n + len - 4, ".exe") == 0) {
      if (::stat(path.c_str(), &st) != 0) continue;
      total += st.st_size;
      if (out)
        out->push_back({n, static_cast<int64_t>(st.st_size),
                        static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec});
    } else if (n[0] == '.' && len > 4 && std::strcmp(n + len - 4, ".tmp") == 0) {
      if (::stat(path.c_str(), &st) == 0 && now - st.st_mtime > 3600) ::unlink(path.c_str());
    }
  }
  ::closedir(d);
  return total;
}

// Returns the directory's size after eviction. Beyond the budget, entries go until the directory is within 90% of
// it: a writer at the budget would otherwise list and sort the whole directory again for every entry it writes
// (tens of thousands of entries: minutes of exit time for a process that compiled a few thousand programs).
int64_t evict(const std::string& dir, int64_t budget) {
  std::vector<DirEntry> entries;
  int64_t total = listEntries(dir, &entries);
  if (budget <= 0 || total <= budget) return total;
  const int64_t target = budget - budget / 10;
  std::sort(entries.begin(), entries.end(), [](const DirEntry& a, const DirEntry& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.name < b.name;
  });
  int64_t n = 0, bytes = 0;
  for (const DirEntry& e : entries) {
    if (total <= target) break;
    if (::unlink((dir + "/" + e.name).c_str()) == 0) {
      ++n;
      bytes += e.size;
    }
    total -= e.size;  // gone either way (another process may have removed it first)
  }
  std::lock_guard<std::mutex> g(g_stats_mu);
  g_disk.evictions += n;
  g_disk.evicted_bytes += bytes;
  return total;
}

// ---------------------------------------------------------------------------------------------------------------
// The background writer.

struct WriteJob {
  std::string dir, key;
  uint64_t text_len, text_hash;
  runtime::ExecutablePtr exe;
};

class DiskWriter {
 public:
  static DiskWriter& get() {
    static DiskWriter* w = new DiskWriter();  // leaked: joined by the exit handler, never destroyed
    return *w;
  }

  void enqueue(WriteJob job) {
    std::unique_lock<std::mutex> lk(mu_);
    if (stopped_) return;
    q_.push_back(std::move(job));
    if (!running_) start();
    cv_.notify_one();
  }

  void flush() {
    std::unique_lock<std::mutex> lk(mu_);
    idle_.wait(lk, [&] { return (q_.empty() && busy_ == 0) || !running_; });
  }

  int64_t pending() {
    std::lock_guard<std::mutex> lk(mu_);
    return static_cast<int64_t>(q_.size()) + busy_;
  }

  // Process exit: finish the queued writes, stop the thread; nothing is queued afterwards.
  void shutdown() {
    std::unique_lock<std::mutex> lk(mu_);
    stopped_ = true;
    if (!running_ || owner_ != ::getpid()) return;
    running_ = false;  // flush() no longer waits; a second shutdown() returns here
    std::thread* t = thread_;
    cv_.notify_all();
    lk.unlock();
    t->join();
  }

  // Forked child: no writer thread exists there.
  void afterFork() {
    running_ = false;
    stopped_ = false;
    busy_ = 0;
    q_.clear();
    thread_ = nullptr;  // the parent's thread object (leaked on purpose: it does not exist in this process)
  }
  std::mutex& mutex() { return mu_; }

 private:
  DiskWriter() {
    pthread_atfork([] { DiskWriter::get().mutex().lock(); }, [] { DiskWriter::get().mutex().unlock(); },
                   [] {
                     DiskWriter& w = DiskWriter::get();
                     w.mutex().unlock();
                     w.afterFork();
                   });
  }

  void start() {
    running_ = true;
    owner_ = ::getpid();
    thread_ = new std::thread([this] { run(); });
    static bool registered = [] {
      // Registered after the plugin was loaded, so it runs before the plugin's own static destructors.
      std::atexit([] { DiskWriter::get().shutdown(); });
      return true;
    }();
    (void)registered;
  }

  void run() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return !q_.empty() || stopped_; });
      if (q_.empty()) break;  // stopped and drained
      WriteJob job = std::move(q_.front());
      q_.pop_front();
      ++busy_;
      lk.unlock();
      write(job);
      job.exe.reset();
      lk.lock();
      --busy_;
      idle_.notify_all();
    }
    idle_.notify_all();
  }

  void write(const WriteJob& job) {
    std::string bytes;
    try {
      bytes = job.exe->serialize();
    } catch (const std::exception&) {
      std::lock_guard<std::mutex> g(g_stats_mu);
      g_disk.write_failures++;  // the plugin cannot serialize: the program is recompiled in the next process
      return;
    }
    mkdirs(job.dir);
    std::string tmp = job.dir + "/." + job.key + "." + std::to_string(::getpid()) + "." +
                      std::to_string(++tmp_counter_) + ".tmp";
    bool ok = false;
    if (FILE* f = std::fopen(tmp.c_str(), "wb")) {
      uint64_t head[4] = {job.text_len, job.text_hash, bytes.size(), payloadHash(bytes.data(), bytes.size())};
      ok = std::fwrite(kMagic, 1, kMagicLen, f) == kMagicLen && std::fwrite(head, 8, 4, f) == 4 &&
           std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
      ok = (std::fclose(f) == 0) && ok;
    }
    ok = ok && std::rename(tmp.c_str(), entryPath(job.dir, job.key).c_str()) == 0;
    if (!ok) ::unlink(tmp.c_str());
    const int64_t size = static_cast<int64_t>(kHeader + bytes.size());
    {
      std::lock_guard<std::mutex> g(g_stats_mu);
      if (ok) {
        g_disk.writes++;
        g_disk.write_bytes += size;
      } else {
        g_disk.write_failures++;
      }
    }
    if (!ok) return;
    // The directory's size: listed on the first write and every 64 writes (other processes write too), else
    // counted; beyond the budget, the least recently used entries go.
    const int64_t budget = cacheMaxBytes();
    if (job.dir != dir_ || writes_since_scan_ >= 64) {
      dir_ = job.dir;
      dir_bytes_ = listEntries(dir_, nullptr);
      writes_since_scan_ = 0;
    } else {
      dir_bytes_ += size;
      ++writes_since_scan_;
    }
    if (budget > 0 && dir_bytes_ > budget) {
      dir_bytes_ = evict(dir_, budget);
      writes_since_scan_ = 0;
    }
  }

  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<WriteJob> q_;
  bool running_ = false, stopped_ = false;
  int busy_ = 0;
  pid_t owner_ = 0;
  std::thread* thread_ = nullptr;
  // Writer thread only:
  uint64_t tmp_counter_ = 0;
  std::string dir_;
  int64_t dir_bytes_ = 0;
  int writes_since_scan_ = 0;
};

}  // namespace

namespace {
std::atomic<bool> g_recording{false};
std::mutex g_record_mu;
std::vector<std::string> g_recorded;

void recordText(const std::string& text) {
  if (!g_recording.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> g(g_record_mu);
  if (g_recording) g_recorded.push_back(text);
}
}  // namespace

void recordProgramTexts(bool on) {
  std::lock_guard<std::mutex> g(g_record_mu);
  g_recording = on;
  if (!on) g_recorded.clear();
}

std::vector<std::string> takeRecordedTexts() {
  std::lock_guard<std::mutex> g(g_record_mu);
  return std::exchange(g_recorded, {});
}

namespace {

// Every executable made by lookup(), for executableEntries(); entries whose executable is gone are pruned when the
// list has doubled since the last pruning.
struct Registered {
  std::weak_ptr<runtime::Executable> exe;
  uint64_t key_hash;
  double compile_seconds;
  bool from_disk;
};
std::mutex g_reg_mu;
std::vector<Registered> g_registered;
size_t g_prune_at = 256;

void pruneRegistered() {  // g_reg_mu held
  g_registered.erase(std::remove_if(g_registered.begin(), g_registered.end(),
                                    [](const Registered& r) { return r.exe.expired(); }),
                     g_registered.end());
  g_prune_at = std::max<size_t>(256, 2 * g_registered.size());
}

void registerExecutable(const std::string& key, const ExecutableLookup& r) {
  Registered e{r.exe, textHash(key), r.source == ExecutableLookup::Source::Compiled ? r.seconds : 0.0,
               r.source == ExecutableLookup::Source::Disk};
  std::lock_guard<std::mutex> g(g_reg_mu);
  if (g_registered.size() >= g_prune_at) pruneRegistered();
  g_registered.push_back(std::move(e));
}

// The lookup of a program under `key` (its text, plus the device assignment for programs over several devices);
// `compile` makes the executable on a miss.
ExecutableLookup lookup(const std::string& key, ExecutableCaches caches,
                        const std::function<runtime::ExecutablePtr()>& compile) {
  ExecutableLookup r;
  if (caches.memory) {
    std::lock_guard<std::mutex> g(g_exe_mu);
    if (runtime::ExecutablePtr* e = g_exes.find(key)) {
      r.exe = *e;
      r.source = ExecutableLookup::Source::Memory;
      return r;
    }
  }
  std::string dir = caches.disk ? cacheDir() : std::string();
  if (!dir.empty() || caches.compile) relieveMapPressure();  // a load or a compile maps new code
  if (!dir.empty()) (void)cacheMaxBytes();  // read (an invalid value raises) here, not first on the writer thread
  auto t0 = std::chrono::steady_clock::now();
  if (!dir.empty()) {
    r.disk_key = diskKey(key);
    LoadResult lr = diskLoad(dir, r.disk_key, key, r.exe);
    std::lock_guard<std::mutex> g(g_stats_mu);
    if (lr == LoadResult::Ok) {
      r.source = ExecutableLookup::Source::Disk;
      g_disk.hits++;
      g_disk.load_seconds += secondsSince(t0);
    } else {
      g_disk.misses++;
      if (lr == LoadResult::Corrupt) g_disk.corrupt++;
    }
  }
  if (!r.exe && !caches.compile) return r;
  if (!r.exe) {
    r.exe = compile();
    r.source = ExecutableLookup::Source::Compiled;
    if (!dir.empty()) {
      DiskWriter::get().enqueue(WriteJob{dir, r.disk_key, key.size(), textHash(key), r.exe});
      r.disk_written = true;
    }
  }
  r.seconds = secondsSince(t0);
  registerExecutable(key, r);
  if (caches.memory) {
    std::lock_guard<std::mutex> g(g_exe_mu);
    g_exes.insert(key, r.exe, programCacheLimit());
  }
  return r;
}

std::mutex g_multi_mu;  // one lookup of a program over several devices at a time (its ranks ask together)

}  // namespace

namespace {
const bool g_exes_trimmer = [] {
  registerExecutableHolder([] {
    std::unique_lock<std::mutex> g(g_exe_mu, std::try_to_lock);
    if (g.owns_lock()) g_exes.trimOldestHalf();
  });
  return true;
}();
}  // namespace

ExecutableLookup executableFor(const std::string& text, ExecutableCaches caches) {
  recordText(text);
  return lookup(text, caches, [&] { return client().compile(text); });
}

ExecutableLookup executableFor(const std::string& text, const runtime::DeviceAssignment& da,
                               ExecutableCaches caches) {
  recordText(text);
  // The executable depends on the assignment (which devices run which replica): it is part of the key, by the
  // plugin's global device ids.
  std::string key = text;
  key += "\n// device assignment: " + std::to_string(da.num_replicas) + " replicas x " +
         std::to_string(da.num_partitions) + " partitions" + (da.spmd ? " spmd" : "") + ", devices";
  const int n = da.num_replicas * da.num_partitions;
  for (int i = 0; i < n; ++i) {
    int d = da.devices.empty() ? i : da.devices[static_cast<size_t>(i)];
    key += " " + std::to_string(client().globalDeviceId(d));
  }
  if (caches.memory) {
    ExecutableLookup hit = lookup(key, ExecutableCaches{true, false, false}, nullptr);
    if (hit.exe) return hit;
  }
  // The ranks of a group ask for their program at the same moment: one compiles, the others find it.
  std::lock_guard<std::mutex> g(g_multi_mu);
  return lookup(key, caches, [&] { return client().compile(text, da); });
}

void clearExecutables() {
  std::lock_guard<std::mutex> g(g_exe_mu);
  g_exes.clear();
}

int64_t executableEvictions() {
  std::lock_guard<std::mutex> g(g_exe_mu);
  return g_exes.evictions();
}

std::vector<ExecutableEntry> executableEntries() {
  std::lock_guard<std::mutex> g(g_reg_mu);
  pruneRegistered();
  std::vector<ExecutableEntry> out;
  out.reserve(g_registered.size());
  for (const Registered& r : g_registered) {
    runtime::ExecutablePtr exe = r.exe.lock();
    if (!exe) continue;
    out.push_back(ExecutableEntry{r.key_hash, exe->launches(), exe->lastLaunchNs(), r.compile_seconds, r.from_disk});
  }
  return out;
}

void setCacheDir(const std::string& dir) {
  std::lock_guard<std::mutex> g(g_dir_mu);
  g_cache_dir = dir;
  g_cache_dir_set = true;
}

std::string cacheDir() {
  std::lock_guard<std::mutex> g(g_dir_mu);
  if (!g_cache_dir_set) {
    g_cache_dir_set = true;
    if (std::optional<std::string> dir = settings::pathValue("TORCH_TPU_CACHE_DIR")) {
      g_cache_dir = *dir;
    } else {
      const char* xdg = std::getenv("XDG_CACHE_HOME");
      const char* home = std::getenv("HOME");
      if (xdg && *xdg) g_cache_dir = std::string(xdg) + "/torch_tpu";
      else if (home && *home) g_cache_dir = std::string(home) + "/.cache/torch_tpu";
    }
  }
  return g_cache_dir;
}

DiskCacheStats diskCacheStats() {
  DiskCacheStats s;
  {
    std::lock_guard<std::mutex> g(g_stats_mu);
    s = g_disk;
  }
  s.pending = DiskWriter::get().pending();
  return s;
}

void flushDiskCache() { DiskWriter::get().flush(); }

void shutdownDiskCache() { DiskWriter::get().shutdown(); }

void trimDiskCache() {
  std::string dir = cacheDir();
  if (!dir.empty()) evict(dir, cacheMaxBytes());
}

}  // namespace torch_tpu::core
