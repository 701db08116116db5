#include "core/executables.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <unordered_map>

#include "core/client.h"

namespace torch_tpu::core {

namespace {

std::mutex g_exe_mu;
std::unordered_map<std::string, runtime::ExecutablePtr> g_exes;  // program text -> executable

std::mutex g_dir_mu;
std::string g_cache_dir;
bool g_cache_dir_set = false;

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

void mkdirs(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty()) ::mkdir(cur.c_str(), 0755);
    }
    if (i < path.size()) cur += path[i];
  }
}

constexpr char kMagic[] = "TORCH_TPU_EXE_1\n";

runtime::ExecutablePtr diskLoad(const std::string& dir, const std::string& key, const std::string& text) {
  std::ifstream f(dir + "/" + key + ".exe", std::ios::binary);
  if (!f) return nullptr;
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t m = sizeof(kMagic) - 1;
  if (data.size() < m + 16 || data.compare(0, m, kMagic) != 0) return nullptr;
  uint64_t len = 0, h = 0;
  std::memcpy(&len, data.data() + m, 8);
  std::memcpy(&h, data.data() + m + 8, 8);
  if (len != text.size() || h != fnv1a(text, 1469598103934665603ULL)) return nullptr;  // a hash collision
  try {
    return client().deserialize(data.substr(m + 16));
  } catch (const std::exception&) {
    return nullptr;
  }
}

bool diskStore(const std::string& dir, const std::string& key, const std::string& text,
               const runtime::Executable& exe) {
  std::string bytes;
  try {
    bytes = exe.serialize();
  } catch (const std::exception&) {
    return false;  // the plugin cannot serialize: the program is recompiled in the next process
  }
  mkdirs(dir);
  std::string tmp = dir + "/." + key + "." + std::to_string(::getpid()) + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return false;
    uint64_t len = text.size(), h = fnv1a(text, 1469598103934665603ULL);
    f.write(kMagic, sizeof(kMagic) - 1);
    f.write(reinterpret_cast<const char*>(&len), 8);
    f.write(reinterpret_cast<const char*>(&h), 8);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  return std::rename(tmp.c_str(), (dir + "/" + key + ".exe").c_str()) == 0;
}

}  // namespace

ExecutableLookup executableFor(const std::string& text, ExecutableCaches caches) {
  ExecutableLookup r;
  if (caches.memory) {
    std::lock_guard<std::mutex> g(g_exe_mu);
    auto it = g_exes.find(text);
    if (it != g_exes.end()) {
      r.exe = it->second;
      r.source = ExecutableLookup::Source::Memory;
      return r;
    }
  }
  std::string dir = caches.disk ? cacheDir() : std::string();
  auto t0 = std::chrono::steady_clock::now();
  if (!dir.empty()) {
    r.disk_key = diskKey(text);
    r.exe = diskLoad(dir, r.disk_key, text);
    if (r.exe) r.source = ExecutableLookup::Source::Disk;
  }
  if (!r.exe) {
    r.exe = client().compile(text);
    r.source = ExecutableLookup::Source::Compiled;
    r.disk_written = !dir.empty() && diskStore(dir, r.disk_key, text, *r.exe);
  }
  r.seconds = secondsSince(t0);
  if (caches.memory) {
    std::lock_guard<std::mutex> g(g_exe_mu);
    g_exes.emplace(text, r.exe);
  }
  return r;
}

void clearExecutables() {
  std::lock_guard<std::mutex> g(g_exe_mu);
  g_exes.clear();
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
    if (const char* e = std::getenv("TORCH_TPU_CACHE_DIR")) {
      g_cache_dir = e;
    } else {
      const char* xdg = std::getenv("XDG_CACHE_HOME");
      const char* home = std::getenv("HOME");
      if (xdg && *xdg) g_cache_dir = std::string(xdg) + "/torch_tpu";
      else if (home && *home) g_cache_dir = std::string(home) + "/.cache/torch_tpu";
    }
  }
  return g_cache_dir;
}

}  // namespace torch_tpu::core
