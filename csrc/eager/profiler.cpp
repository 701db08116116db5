// The Kineto activity profiler of the tpu device (see profiler.h). This file is compiled with USE_KINETO and
// Kineto's include directory only (CMakeLists.txt), and includes no other torch header.
#include "eager/profiler.h"

#ifdef TORCH_TPU_KINETO

#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace torch_tpu {

namespace {

// The profiler's correlation ids of the host ops running on this thread (pushed and popped by Kineto around every
// op while a trace records): a launch is linked to the innermost one.
thread_local std::vector<uint64_t> t_correlation;

uint64_t currentCorrelation() { return t_correlation.empty() ? 0 : t_correlation.back(); }

constexpr int32_t kProgramsResource = 0;  // the resource (row) of a device's programs
constexpr int64_t kDeviceSortBase = 0x1000000;

std::string deviceLabel(int device) {
  std::string kind;
  try {
    if (runtime::Client::initialized()) kind = runtime::Client::get().deviceKind(device);
  } catch (...) {
  }
  return kind.empty() ? "TPU " + std::to_string(device) : kind + " " + std::to_string(device);
}

std::string activityName(const runtime::LaunchRecord& r) {
  if (r.kind.empty() && r.name.empty()) return "tpu program";
  if (r.kind.empty()) return r.name;
  if (r.name.empty()) return r.kind;
  return r.kind + ": " + r.name;
}

std::string micros(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", static_cast<double>(ns) / 1e3);
  return buf;
}

// TorchTPU's profiler options (torch.tpu.profiler.TpuProfilerConfig, an _ExperimentalConfig whose
// custom_profiler_config string reaches Kineto as its CUSTOM_CONFIG): "key:value" entries separated by commas.
// device_tracer_level:0 records no device programs; run_dir:<dir> also writes the device programs of each trace to
// <dir>/<host>[_<worker_rank>].tpu_trace.json (Chrome trace format). The other keys (host and python tracer levels)
// concern XLA's own tracers, which this runtime does not have; PyTorch's host activity is recorded as always.
struct TraceOptions {
  int device_tracer_level = 1;
  std::string run_dir, worker_rank;
};

std::string unquote(std::string v) {
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') {
    std::string out;
    for (size_t i = 1; i + 1 < v.size(); ++i) {
      if (v[i] == '\\' && i + 2 < v.size()) ++i;
      out.push_back(v[i]);
    }
    return out;
  }
  return v;
}

TraceOptions parseOptions(const std::string& custom) {
  TraceOptions o;
  std::string entry;
  std::istringstream in(custom);
  while (std::getline(in, entry, ',')) {
    const size_t colon = entry.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = entry.substr(0, colon), value = unquote(entry.substr(colon + 1));
    try {
      if (key == "device_tracer_level") o.device_tracer_level = std::stoi(value);
    } catch (...) {
    }
    if (key == "run_dir") o.run_dir = value;
    if (key == "worker_rank") o.worker_rank = value;
  }
  return o;
}

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

class TpuSession final : public libkineto::IActivityProfilerSession {
 public:
  explicit TpuSession(TraceOptions options) : options_(std::move(options)) {}
  void start() override {
    t_correlation.clear();
    runtime::startLaunchTrace(&currentCorrelation);
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    records_ = runtime::stopLaunchTrace();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return errors_; }

  void processTrace(libkineto::ActivityLogger& logger) override { processTrace(logger, nullptr, 0, 0); }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked, int64_t,
                    int64_t) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(0, 0, "tpu");
    buffer_->gpuOpCount = static_cast<int>(records_.size());
    const int32_t pid = static_cast<int32_t>(::getpid());
    std::map<int, std::set<int64_t>> device_ends;  // per device: when the programs before finished
    std::vector<std::string> file_events;
    for (size_t i = 0; i < records_.size(); ++i) {
      const runtime::LaunchRecord& r = records_[i];
      devices_.insert(r.device);
      const libkineto::ITraceActivity* host_op =
          (linked && r.correlation != 0) ? linked(static_cast<int32_t>(r.correlation)) : nullptr;
      const uint32_t flow = static_cast<uint32_t>(i + 1);

      // Host side: the launch call on its thread.
      buffer_->emplace_activity(buffer_->span, libkineto::ActivityType::PRIVATEUSE1_RUNTIME,
                                std::string("PJRT_LoadedExecutable_Execute"));
      libkineto::GenericTraceActivity& h = *buffer_->activities.back();
      h.startTime = r.launch_ns;
      h.endTime = std::max(r.queued_ns, r.launch_ns);
      h.id = static_cast<int32_t>(r.correlation);
      h.device = pid;
      h.resource = static_cast<int32_t>(r.thread);
      h.threadId = static_cast<int32_t>(r.thread);
      h.linked = host_op;
      h.flow.id = flow;
      h.flow.type = libkineto::kLinkAsyncCpuGpu;
      h.flow.start = 1;
      h.addMetadataQuoted("device", "tpu:" + std::to_string(r.device));
      logger.handleActivity(h);

      // Device side: from when the device could start it (launched, and the programs before it that finished
      // earlier done) to done. Completion callbacks run on the plugin's threads and may stamp a program's end
      // before its predecessor's, so only predecessors stamped earlier than this program's end bound its start.
      std::set<int64_t>& ends = device_ends[r.device];
      const int64_t done = std::max(r.done_ns, r.launch_ns);
      auto before = ends.lower_bound(done);
      const int64_t prev = before == ends.begin() ? r.launch_ns : *std::prev(before);
      const int64_t begin = std::max(r.launch_ns, prev);
      ends.insert(done);
      if (!options_.run_dir.empty()) {
        std::ostringstream e;
        e << "{\"name\":" << jsonString(activityName(r)) << ",\"ph\":\"X\",\"pid\":" << r.device
          << ",\"tid\":0,\"ts\":" << micros(begin) << ",\"dur\":" << micros(done - begin)
          << ",\"args\":{\"kind\":" << jsonString(r.kind) << ",\"op\":" << jsonString(r.name)
          << ",\"ops\":" << jsonString(r.detail) << "}}";
        file_events.push_back(e.str());
      }
      buffer_->emplace_activity(buffer_->span, libkineto::ActivityType::CONCURRENT_KERNEL, activityName(r));
      libkineto::GenericTraceActivity& d = *buffer_->activities.back();
      d.startTime = begin;
      d.endTime = done;
      d.id = static_cast<int32_t>(r.correlation);
      d.device = r.device;
      d.resource = kProgramsResource;
      d.linked = host_op;
      d.flow.id = flow;
      d.flow.type = libkineto::kLinkAsyncCpuGpu;
      d.flow.start = 0;
      d.addMetadataQuoted("device", "tpu:" + std::to_string(r.device));
      if (!r.kind.empty()) d.addMetadataQuoted("kind", r.kind);
      if (!r.name.empty()) d.addMetadataQuoted(r.kind == "compiled" ? "graph" : "op", r.name);
      if (!r.detail.empty()) d.addMetadataQuoted("ops", r.detail);
      d.addMetadataQuoted("launch to done us", micros(r.done_ns - r.launch_ns));
      if (r.failed) d.addMetadataQuoted("error", "the execution failed");
      logger.handleActivity(d);
    }
    // Kineto asks a session for one device; the others' rows are named here.
    for (int dev : devices_) {
      if (dev == firstDevice()) continue;
      logger.handleDeviceInfo(deviceInfo(dev), 0);
      logger.handleResourceInfo(resourceInfo(dev), 0);
    }
    if (!options_.run_dir.empty()) writeRunDir(file_events);
    records_.clear();
    status_ = libkineto::TraceStatus::READY;
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(deviceInfo(firstDevice()));
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {resourceInfo(firstDevice())}; }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override { t_correlation.push_back(id); }
  void popCorrelationId() override {
    if (!t_correlation.empty()) t_correlation.pop_back();
  }

 private:
  void writeRunDir(const std::vector<std::string>& events) {
    char host[256] = {0};
    if (::gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "localhost");
    std::string name = std::string(host) + (options_.worker_rank.empty() ? "" : "_" + options_.worker_rank);
    const std::string path = options_.run_dir + "/" + name + ".tpu_trace.json";
    ::mkdir(options_.run_dir.c_str(), 0755);
    std::ofstream f(path);
    if (!f) {
      errors_.push_back("tpu profiler: cannot write " + path);
      return;
    }
    f << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
    for (int dev : devices_)
      f << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << dev << ",\"args\":{\"name\":"
        << jsonString("tpu:" + std::to_string(dev) + " (" + deviceLabel(dev) + ")") << "}},";
    for (size_t i = 0; i < events.size(); ++i) f << (i ? "," : "") << events[i];
    f << "]}\n";
  }

  TraceOptions options_;
  std::vector<std::string> errors_;
  int firstDevice() const { return devices_.empty() ? 0 : *devices_.begin(); }
  static libkineto::DeviceInfo deviceInfo(int dev) {
    return libkineto::DeviceInfo{dev, kDeviceSortBase + dev, "tpu:" + std::to_string(dev), deviceLabel(dev)};
  }
  static libkineto::ResourceInfo resourceInfo(int dev) {
    return libkineto::ResourceInfo{kProgramsResource, 0, dev, "programs"};
  }

  std::vector<runtime::LaunchRecord> records_;
  std::set<int> devices_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

class TpuActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return activities_; }
  // A session only for traces that ask for device activity (ProfilerActivity.PrivateUse1): once registered, the
  // profiler is offered every later trace, CPU-only ones included.
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return session(types, config);
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return session(types, config);
  }

 private:
  static std::unique_ptr<libkineto::IActivityProfilerSession> session(const std::set<libkineto::ActivityType>& t,
                                                                       const libkineto::Config& config) {
    if (!t.count(libkineto::ActivityType::CONCURRENT_KERNEL)) return nullptr;
    TraceOptions options = parseOptions(config.getCustomConfig());
    if (options.device_tracer_level <= 0) return nullptr;
    return std::make_unique<TpuSession>(std::move(options));
  }
  std::string name_{"tpu"};
  std::set<libkineto::ActivityType> activities_{libkineto::ActivityType::CONCURRENT_KERNEL,
                                                libkineto::ActivityType::PRIVATEUSE1_RUNTIME};
};

REGISTER_PRIVATEUSE1_PROFILER(TpuActivityProfiler);

}  // namespace

bool kinetoPluginBuilt() { return true; }

}  // namespace torch_tpu

#else

namespace torch_tpu {
bool kinetoPluginBuilt() { return false; }
}  // namespace torch_tpu

#endif
