#include "settings/settings.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <limits>

namespace torch_tpu::settings {

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Columns: name, kind, default, default as documented, choices, min, max, reader, meaning.
const std::vector<Spec>& buildTable() {
  static const std::vector<Spec> t = {
      // ---- the plugin
      {"TORCH_TPU_PJRT_PLUGIN", Kind::Path, nullptr, "the first installed of libtpu, the CUDA plugin, the CPU plugin",
       nullptr, 0, 0, "Python (torch_tpu._plugin), C++ (runtime)",
       "The PJRT plugin: a path to its .so, or one of the words tpu, cuda, cpu (the installed plugin of that kind)."},
      {"TORCH_TPU_NUM_DEVICES", Kind::Integer, nullptr, "the plugin's (CPU plugin: 1)", nullptr, 1, 4096,
       "Python (torch_tpu._plugin)",
       "Devices to expose: the CPU plugin's virtual chips (cpu_device_count), the CUDA plugin's visible GPUs."},
      {"TORCH_TPU_PJRT_OPTIONS", Kind::Text, "", "none", nullptr, 0, 0, "Python (torch_tpu._plugin)",
       "Plugin create options, name=value[,name=value...] (lists as 0:1:2), e.g. preallocate=false; they add to or "
       "override the defaults."},
      {"TORCH_TPU_ACCELERATOR", Kind::Switch, "auto", "auto: on for TPU, GPU and custom plugins, off for the CPU plugin",
       nullptr, 0, 0, "Python (torch_tpu._plugin)",
       "Report tpu as torch's accelerator (torch.accelerator, the device Hugging Face Accelerate and other libraries "
       "pick when none is named)."},
      {"TORCH_TPU_MEMORY_LIMIT", Kind::Bytes, nullptr, "the plugin's (CPU plugin: the host's memory)", nullptr, 0, 0,
       "C++ (core)", "The device memory limit behind torch.OutOfMemoryError and torch.tpu.mem_get_info()."},
      {"TORCH_TPU_SPIN_WAIT_US", Kind::Integer, "50", nullptr, nullptr, 0, 10000000, "C++ (runtime)",
       "Microseconds a wait for a device event polls before it blocks (0: block at once)."},
      {"TORCH_TPU_SKIP_TORCH_CHECK", Kind::Switch, "0", nullptr, nullptr, 0, 0,
       "Python (torch_tpu/__init__.py, before the extension loads)",
       "Load the extension even under a torch other than the one it was built against (at your own risk)."},
      // ---- caches
      {"TORCH_TPU_CACHE_DIR", Kind::Path, nullptr, "$XDG_CACHE_HOME/torch_tpu, else ~/.cache/torch_tpu", nullptr, 0, 0,
       "C++ (core)",
       "Directory of the on-disk executable cache shared by eager ops and compiled graphs; empty: no disk cache."},
      {"TORCH_TPU_CACHE_MAX_BYTES", Kind::Bytes, "2G", "2G (2 GiB)", nullptr, 0, 0, "C++ (core)",
       "Disk cache budget; beyond it, least recently used entries are evicted down to 90% of it."},
      {"TORCH_TPU_PROGRAM_CACHE_SIZE", Kind::Integer, "4096", nullptr, nullptr, 0, kMax, "C++ (core)",
       "Programs kept per in-process cache (fused programs: a sixteenth of it)."},
      {"TORCH_TPU_GRAPH_PROGRAM_CACHE_SIZE", Kind::Integer, "64", nullptr, nullptr, 0, kMax, "C++ (compile)",
       "Programs kept per compiled graph, one per input signature (layouts, storage sharing, device, torch settings); "
       "least recently used out, 0: unbounded."},
      {"TORCH_TPU_FOREIGN_PROGRAM_CACHE_SIZE", Kind::Integer, "256", nullptr, nullptr, 0, kMax,
       "Python (torch_tpu._foreign)",
       "Programs a JAX/Pallas kernel keeps made for its input signatures (exported on demand, again after eviction); "
       "least recently used out, 0: unbounded. Programs registered explicitly (add_program) are kept."},
      {"TORCH_TPU_DONATE_MIN_BYTES", Kind::Bytes, "1M", "1M (1 MiB)", nullptr, 0, 0, "C++ (core)",
       "Smallest buffer donated to a program that overwrites it (smaller ones are copied: cheaper than waiting)."},
      {"TORCH_TPU_PACK_WEIGHTS", Kind::Switch, "auto", "auto: on for the CPU plugin", nullptr, 0, 0, "C++ (core)",
       "Keep a packed (transposed) copy of weights that matmuls read transposed."},
      // ---- eager
      {"TORCH_TPU_EAGER_MODE", Kind::Choice, "strict", nullptr, "strict|fused", 0, 0, "C++ (eager)",
       "strict: every op launched when called; fused: ops recorded and launched as one cached program at the next "
       "synchronization point (same results)."},
      {"TORCH_TPU_FUSED_MAX_OPS", Kind::Integer, "1024", nullptr, nullptr, 1, kMax, "C++ (eager)",
       "Ops per fused trace at most."},
      {"TORCH_TPU_FUSED_SPEED_CHECK", Kind::Integer, "4", nullptr, nullptr, 0, 100, "C++ (eager)",
       "Rounds the fused-eager speed check times before keeping or dropping a fused program: a block of 8 steps "
       "recorded and fused against 8 run as strict mode runs them (a trace repeating back to back; after two rounds a "
       "mode 25% faster decides), else one launch of the program against one of its trace op by op; 0: no check, "
       "every fused program is used."},
      {"TORCH_TPU_FUSED_COMPILE_NICE", Kind::Integer, "5", nullptr, nullptr, 0, 19, "C++ (eager)",
       "Niceness added to the fused-eager background compile thread's (Linux), so that the thread running the "
       "model keeps its core on a busy machine; 0: the same priority."},
      {"TORCH_TPU_FUSED_DONATE", Kind::Switch, "1", nullptr, nullptr, 0, 0, "C++ (eager)",
       "Fused programs update the storages they overwrite in place (buffer donation)."},
      {"TORCH_TPU_FUSED_BYPASS", Kind::Switch, "1", nullptr, nullptr, 0, 0, "C++ (eager)",
       "Ops run as in strict mode while the repeating trace they belong to can only run op by op."},
      {"TORCH_TPU_LAUNCH_BLOCKING", Kind::Switch, "0", nullptr, nullptr, 0, 0, "C++ (core)",
       "Every program launch waits for its results (debugging: errors surface at the failing op)."},
      {"TORCH_TPU_FALLBACK_STRICT", Kind::Switch, "0", nullptr, nullptr, 0, 0, "C++ (eager)",
       "An op without a lowering, or a host round trip nobody asked for, raises instead of running on the CPU."},
      {"TORCH_TPU_DEVICE_CHECKS", Kind::Switch, "1", nullptr, nullptr, 0, 0, "C++ (core)",
       "Device-side index and division-by-zero checks (off: out-of-range indices are clamped silently)."},
      // ---- lowering and compile
      {"TORCH_TPU_RAGGED_DOT", Kind::Switch, "auto", "auto: on for TPU and GPU plugins", nullptr, 0, 0,
       "C++ (lowering)", "Grouped matmuls as chlo.ragged_dot (else one dot per group)."},
      {"TORCH_TPU_INDUCTOR", Kind::Choice, "auto", "auto: pallas on a TPU plugin, else tpu", "auto|pallas|tpu", 0, 0,
       "Python (torch_tpu._inductor)",
       "What the default torch.compile backend (inductor) does with tpu graphs: pallas (inductor's own code "
       "generator) or tpu (this package's backend)."},
      {"TORCH_TPU_FLEX_ATTENTION", Kind::Switch, "1", nullptr, nullptr, 0, 0, "Python (torch_tpu._flex_attention)",
       "Let flex_attention take tpu tensors (off: PyTorch's device check, which refuses them, stays)."},
      {"TORCH_TPU_KERNELS_MAPPING", Kind::Switch, "1", nullptr, nullptr, 0, 0, "Python (torch_tpu.hub_kernels)",
       "Map torch-tpu's fused layers in the Hugging Face kernels library."},
      {"TORCH_TPU_SAFETENSORS_SHIM", Kind::Switch, "1", nullptr, nullptr, 0, 0, "Python (torch_tpu._safetensors)",
       "safetensors.torch.load_file with a tpu device= loads on the host and moves the tensors (off: unwrapped)."},
      // ---- distributed
      {"TORCH_TPU_DIST_TRANSPORT", Kind::Choice, "auto", "auto: xla when all ranks share one process, else host",
       "auto|host|xla", 0, 0, "Python (torch_tpu.distributed)",
       "Transport of the tpu_dist process-group backend (xla needs all ranks in one process)."},
      {"TORCH_TPU_DIST_CHECK", Kind::Switch, "1", nullptr, nullptr, 0, 0, "C++ (distributed)",
       "The host transport checks that every rank issues the same collective (signature exchange)."},
      {"TORCH_TPU_DIST_TRACE", Kind::Switch, "0", nullptr, nullptr, 0, 0, "C++ (distributed)",
       "Log each collective of the host transport."},
      {"TORCH_TPU_DIST_DIRECT", Kind::Switch, "1", nullptr, nullptr, 0, 0, "C++ (distributed)",
       "Same-host all_reduces of the host transport read the peers' memory directly (off: through Gloo)."},
      {"TORCH_TPU_COLLECTIVES_IN_PROGRAM", Kind::Switch, "1", nullptr, nullptr, 0, 0,
       "Python (torch_tpu._dynamo_backend)",
       "Compiled graphs keep their collectives in the program on the XLA transport (off: graphs split at them)."},
      // ---- TPU VM multi-process topology (docs/installing.md)
      {"TORCH_TPU_LIBTPU_ENV", Kind::Switch, "1", nullptr, nullptr, 0, 0, "Python (torch_tpu._tpu_env)",
       "Derive libtpu's per-process topology variables from RANK/WORLD_SIZE/LOCAL_* in a multi-process run."},
      {"TORCH_TPU_PROCESS_BASE_PORT", Kind::Integer, "8476", nullptr, nullptr, 1, 65535, "Python (torch_tpu._tpu_env)",
       "Base port of libtpu's process addresses."},
      {"TORCH_TPU_CHIPS_PER_HOST_BOUNDS", Kind::Text, nullptr, "from LOCAL_WORLD_SIZE (1: 1,1,1; 2: 1,2,1; 4: 2,2,1; "
       "8: 2,4,1)", nullptr, 0, 0, "Python (torch_tpu._tpu_env)", "Chips per host as x,y,z."},
      {"TORCH_TPU_HOST_BOUNDS", Kind::Text, nullptr, "1,1,<hosts>", nullptr, 0, 0, "Python (torch_tpu._tpu_env)",
       "Hosts as x,y,z."},
      {"TORCH_TPU_HOST_ADDRESSES", Kind::Text, nullptr, "exchanged through the torch.distributed store", nullptr, 0, 0,
       "Python (torch_tpu._tpu_env)", "Every host's address, addr0,addr1,... in host order."},
      {"TORCH_TPU_HOST_ADDRESS", Kind::Text, nullptr, "the address that reaches MASTER_ADDR", nullptr, 0, 0,
       "Python (torch_tpu._tpu_env)", "This host's address, when the addresses are exchanged."},
      // ---- diagnostics
      {"TORCH_TPU_DEBUG", Kind::Switch, "0", nullptr, nullptr, 0, 0, "Python (python -m torch_tpu)",
       "The environment report prints the self-test's traceback."},
      // ---- Google TorchTPU's names, read as aliases of ours (torch_tpu/_compat_env.py; ours win when both are set)
      {"TORCH_TPU_DEFER_AND_FUSE", Kind::Switch, "auto", "unset: TORCH_TPU_EAGER_MODE decides", nullptr, 0, 0,
       "Python (torch_tpu._compat_env)", "TorchTPU's name: on sets TORCH_TPU_EAGER_MODE=fused, off strict."},
      {"TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT", Kind::Path, nullptr, "unset", nullptr, 0, 0,
       "Python (torch_tpu._compat_env)",
       "TorchTPU's name: sets TORCH_TPU_CACHE_DIR (a file:// URL is taken as its path; remote URLs are ignored with "
       "a warning)."},
      {"TORCH_TPU_TIER2_COMPILATION_CACHE", Kind::Text, nullptr, "unset", nullptr, 0, 0,
       "Python (torch_tpu._compat_env)",
       "TorchTPU's name: sets TORCH_TPU_CACHE_DIR to /dev/shm/torch_tpu_cache/<name> (or the path if absolute)."},
      {"TORCH_TPU_INTERNAL_XLA_OPTIONS", Kind::Text, nullptr, "unset", nullptr, 0, 0,
       "Python (torch_tpu._compat_env)", "TorchTPU's name: name=value,... passed to XLA as XLA_FLAGS --name=value."},
      // ---- building, tools and tests (read there directly: the extension does not exist yet, or is not imported)
      {"TORCH_TPU_PJRT_INCLUDE_DIR", Kind::Path, nullptr, "the xla-cpu-pjrt wheel's include directory", nullptr, 0, 0,
       "setup.py", "Directory holding pjrt_c_api.h for the build."},
      {"TORCH_TPU_BUILD_DIR", Kind::Path, nullptr, "build/", nullptr, 0, 0,
       "setup.py, tools/hf_suite.py, scripts/device_check.sh", "The CMake build directory."},
      {"TORCH_TPU_BUILD_TESTS", Kind::Choice, "ON", nullptr, "ON|OFF", 0, 0, "setup.py",
       "Build the C++ tests (CMake's TPU_BUILD_TESTS)."},
      {"TORCH_TPU_USE_PCH", Kind::Choice, "ON", nullptr, "ON|OFF", 0, 0, "setup.py",
       "Precompiled torch headers for the extension (CMake's TPU_USE_PCH)."},
      {"TORCH_TPU_DIFFUSERS_TESTS", Kind::Path, nullptr, "unset", nullptr, 0, 0, "tools/hf_suite.py",
       "A checkout of diffusers whose tests tools/hf_suite.py --suite diffusers runs."},
      {"TORCH_TPU_TORCH_TESTS", Kind::Path, nullptr, "unset", nullptr, 0, 0,
       "tools/torch_suite.py, tests/python/test_torch_suite.py",
       "A PyTorch checkout (or a folder of its test files) whose device-generic tests tools/torch_suite.py runs."},
      // ---- the test suite's own knobs (tests/python)
      {"TORCH_TPU_OPINFO_SAMPLES", Kind::Integer, "3", nullptr, nullptr, 1, kMax, "tests/python/test_opinfo.py",
       "Samples per op the OpInfo sweep compares."},
      {"TORCH_TPU_OPINFO_BUDGET_S", Kind::Text, "60", nullptr, nullptr, 0, 0, "tests/python/test_opinfo.py",
       "Seconds (a number) the OpInfo sweep may take."},
      {"TORCH_TPU_MODULE_SAMPLES", Kind::Integer, "1", nullptr, nullptr, 1, kMax,
       "tests/python/test_module_conformance.py", "Samples per module the ModuleInfo CI subset compares."},
      {"TORCH_TPU_MODULE_BUDGET_S", Kind::Text, "20", nullptr, nullptr, 0, 0, "tests/python/test_module_conformance.py",
       "Seconds (a number) each module of the ModuleInfo CI subset may take."},
      {"TORCH_TPU_SOAK_SEED", Kind::Integer, "0", nullptr, nullptr, 0, kMax, "tests/python/test_soak.py",
       "Seed of the soak test's random cases."},
      {"TORCH_TPU_SOAK_CASES", Kind::Integer, "600", nullptr, nullptr, 0, kMax, "tests/python/test_soak.py",
       "Random cases of the soak test."},
      {"TORCH_TPU_SOAK_VARIANTS", Kind::Integer, "3", nullptr, nullptr, 1, kMax, "tests/python/test_soak.py",
       "Variants per soak case."},
      {"TORCH_TPU_SOAK_BUDGET_S", Kind::Text, "150", nullptr, nullptr, 0, 0, "tests/python/test_soak.py",
       "Seconds (a number) the soak test's first pass may take."},
  };
  return t;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "auto" as a switch's default: the default depends on the machine (a choice's "auto" is one of its words).
bool autoSwitch(const Spec& s) { return s.kind == Kind::Switch && s.dflt != nullptr && std::string(s.dflt) == "auto"; }
bool hasFixedDefault(const Spec& s) { return s.dflt != nullptr && !autoSwitch(s); }

// A choice's words, "a|b|c" split at '|'.
std::vector<std::string> choiceWords(const Spec& s) {
  std::vector<std::string> words(1);
  for (const char* p = s.choices; *p; ++p) {
    if (*p == '|') words.emplace_back();
    else words.back() += *p;
  }
  return words;
}

[[noreturn]] void invalid(const Spec& s, const char* raw, const std::string& why = "") {
  throw SettingError(std::string(s.name) + "='" + raw + "' is not a valid " + kindName(s.kind) + " setting" +
                     (why.empty() ? "" : " (" + why + ")") + "; accepted: " + acceptedForms(s));
}

}  // namespace

const std::vector<Spec>& table() { return buildTable(); }

const Spec& spec(const std::string& name) {
  for (const Spec& s : table())
    if (name == s.name) return s;
  throw std::logic_error("torch_tpu: " + name + " is not a setting of the settings table (csrc/settings)");
}

const char* kindName(Kind k) {
  switch (k) {
    case Kind::Switch: return "switch";
    case Kind::Integer: return "integer";
    case Kind::Bytes: return "byte size";
    case Kind::Path: return "path";
    case Kind::Choice: return "choice";
    case Kind::Text: return "text";
  }
  return "?";
}

std::string acceptedForms(const Spec& s) {
  switch (s.kind) {
    case Kind::Switch:
      return std::string("1/0, true/false, on/off, yes/no (any case)") +
             (autoSwitch(s) ? ", auto" : "") + "; empty: the default";
    case Kind::Integer: {
      std::string r = "a decimal integer";
      if (s.max == kMax) r += " >= " + std::to_string(s.min);
      else r += " from " + std::to_string(s.min) + " to " + std::to_string(s.max);
      return r;
    }
    case Kind::Bytes:
      return "a number of bytes, whole or decimal, with an optional unit B, K/KiB, M/MiB, G/GiB, T/TiB (powers of "
             "1024), e.g. 1048576, 512M, 1.5G, 8GiB";
    case Kind::Path: return "any path; empty: see the description";
    case Kind::Choice: {
      const std::vector<std::string> words = choiceWords(s);
      std::string r = "one of ";
      for (size_t i = 0; i < words.size(); ++i)
        r += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
      return r + " (any case); empty: the default";
    }
    case Kind::Text: return "see the description";
  }
  return "";
}

bool parseSwitchText(const std::string& text, bool* out) {
  const std::string v = lower(trim(text));
  if (v == "1" || v == "true" || v == "on" || v == "yes") { *out = true; return true; }
  if (v == "0" || v == "false" || v == "off" || v == "no") { *out = false; return true; }
  return false;
}

bool parseIntegerText(const std::string& text, int64_t* out) {
  const std::string v = trim(text);
  size_t i = 0;
  bool neg = false;
  if (i < v.size() && (v[i] == '+' || v[i] == '-')) neg = v[i++] == '-';
  if (i == v.size()) return false;
  uint64_t acc = 0;
  for (; i < v.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(v[i]))) return false;
    acc = acc * 10 + static_cast<uint64_t>(v[i] - '0');
    if (acc > static_cast<uint64_t>(kMax)) return false;
  }
  *out = neg ? -static_cast<int64_t>(acc) : static_cast<int64_t>(acc);
  return true;
}

bool parseBytesText(const std::string& text, int64_t* out) {
  const std::string v = trim(text);
  size_t i = 0;
  // Whole part.
  unsigned __int128 whole = 0;
  size_t digits = 0;
  for (; i < v.size() && std::isdigit(static_cast<unsigned char>(v[i])); ++i, ++digits) {
    whole = whole * 10 + static_cast<unsigned>(v[i] - '0');
    if (whole > static_cast<unsigned __int128>(kMax)) return false;
  }
  // Fraction: kept as numerator / 10^n, exactly.
  unsigned __int128 frac = 0, frac_den = 1;
  if (i < v.size() && v[i] == '.') {
    ++i;
    size_t fd = 0;
    for (; i < v.size() && std::isdigit(static_cast<unsigned char>(v[i])); ++i, ++fd) {
      if (fd < 18) {  // further digits cannot change a whole number of bytes below 2^63
        frac = frac * 10 + static_cast<unsigned>(v[i] - '0');
        frac_den *= 10;
      }
    }
    if (fd == 0) return false;
    digits += fd;
  }
  if (digits == 0) return false;
  while (i < v.size() && v[i] == ' ') ++i;
  const std::string unit = lower(v.substr(i));
  unsigned shift = 0;
  if (unit.empty() || unit == "b") shift = 0;
  else if (unit == "k" || unit == "kib") shift = 10;
  else if (unit == "m" || unit == "mib") shift = 20;
  else if (unit == "g" || unit == "gib") shift = 30;
  else if (unit == "t" || unit == "tib") shift = 40;
  else return false;
  const unsigned __int128 scale = static_cast<unsigned __int128>(1) << shift;
  const unsigned __int128 total = whole * scale + frac * scale / frac_den;  // the fraction of a byte rounds down
  if (total > static_cast<unsigned __int128>(kMax)) return false;
  *out = static_cast<int64_t>(total);
  return true;
}

Value parse(const std::string& name, const char* raw) {
  const Spec& s = spec(name);
  Value out;
  const bool given = raw != nullptr && (s.kind == Kind::Path || s.kind == Kind::Text ? true : !trim(raw).empty());
  if (!given) {
    if (hasFixedDefault(s)) return parse(name, s.dflt);
    return out;
  }
  out.set = true;
  switch (s.kind) {
    case Kind::Switch: {
      if (autoSwitch(s) && lower(trim(raw)) == "auto") return Value{};
      if (!parseSwitchText(raw, &out.b)) invalid(s, raw);
      break;
    }
    case Kind::Integer:
      if (!parseIntegerText(raw, &out.i)) invalid(s, raw);
      if (out.i < s.min || out.i > s.max) invalid(s, raw, "out of range");
      break;
    case Kind::Bytes:
      if (!parseBytesText(raw, &out.i)) invalid(s, raw);
      break;
    case Kind::Choice: {
      const std::string v = lower(trim(raw));
      const std::vector<std::string> words = choiceWords(s);
      if (std::find(words.begin(), words.end(), v) == words.end()) invalid(s, raw);
      out.s = v;
      break;
    }
    case Kind::Path:
    case Kind::Text: out.s = raw; break;
  }
  return out;
}

Value read(const std::string& name) { return parse(name, std::getenv(name.c_str())); }

namespace {

const Spec& expect(const char* name, Kind k) {
  const Spec& s = spec(name);
  if (s.kind != k)
    throw std::logic_error(std::string("torch_tpu: setting ") + name + " is a " + kindName(s.kind) + ", not a " +
                           kindName(k));
  return s;
}

// The typed read of every kind: the variable parsed (range-checked, errors naming it), nullopt where it is unset
// and its default depends on the machine.
template <class T>
std::optional<T> typedValue(const char* name, Kind k, T Value::*field) {
  const Spec& s = expect(name, k);
  Value v = read(name);
  return v.set || hasFixedDefault(s) ? std::optional<T>(v.*field) : std::nullopt;
}

template <class T>
T fixed(const char* name, std::optional<T> v) {
  if (!v) throw std::logic_error(std::string("torch_tpu: setting ") + name + " has no fixed default");
  return *v;
}

}  // namespace

std::optional<bool> switchValue(const char* name) { return typedValue(name, Kind::Switch, &Value::b); }
bool switchOn(const char* name) { return fixed(name, switchValue(name)); }
std::optional<int64_t> integerValue(const char* name) { return typedValue(name, Kind::Integer, &Value::i); }
int64_t integer(const char* name) { return fixed(name, integerValue(name)); }
std::optional<int64_t> bytesValue(const char* name) { return typedValue(name, Kind::Bytes, &Value::i); }
int64_t bytes(const char* name) { return fixed(name, bytesValue(name)); }

std::optional<std::string> pathValue(const char* name) {
  expect(name, Kind::Path);
  const char* e = std::getenv(name);
  if (e == nullptr) return std::nullopt;
  return std::string(e);
}

std::string choice(const char* name) {
  expect(name, Kind::Choice);
  return read(name).s;
}

}  // namespace torch_tpu::settings
