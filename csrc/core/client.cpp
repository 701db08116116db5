#include "core/client.h"

#include <c10/util/Exception.h>
#include <c10/macros/Macros.h>

#include <cstdlib>
#include <mutex>

#include "lowering/target.h"
#include "runtime/shutdown.h"
#include "settings/settings.h"

namespace torch_tpu {

namespace {
std::mutex g_client_mu;
std::string g_plugin_path;
std::vector<runtime::CreateOption> g_plugin_options;
runtime::Client* g_client = nullptr;
std::string g_init_error;
bool g_init_tried = false;
thread_local int t_current_device = 0;
}  // namespace

void setPlugin(const std::string& path, std::vector<runtime::CreateOption> options) {
  std::lock_guard<std::mutex> g(g_client_mu);
  TORCH_CHECK(g_client == nullptr || path == g_plugin_path,
              "tpu: the PJRT plugin is already loaded from ", g_plugin_path);
  g_plugin_path = path;
  g_plugin_options = std::move(options);
}

const std::string& initError() {
  std::lock_guard<std::mutex> g(g_client_mu);
  return g_init_error;
}

bool pluginLoadTried() {
  std::lock_guard<std::mutex> g(g_client_mu);
  return g_init_tried;
}

bool inBadFork() { return runtime::Client::inForkedChild(); }

runtime::Client& client() {
  runtime::Client* c = g_client;
  if (C10_LIKELY(c != nullptr)) {
    TORCH_CHECK(!runtime::Client::inForkedChild(), runtime::kForkedMessage);
    TORCH_CHECK(!runtime::isShutDown(), "tpu: ", runtime::kClosedMessage);
    return *c;
  }
  std::lock_guard<std::mutex> g(g_client_mu);
  if (g_client) return *g_client;
  if (g_init_tried) TORCH_CHECK(false, g_init_error);
  g_init_tried = true;
  if (g_plugin_path.empty()) {
    g_init_error =
        "tpu: no PJRT plugin configured (import torch_tpu first; the default plugin comes from "
        "`pip install xla-cpu-pjrt`)";
    TORCH_CHECK(false, g_init_error);
  }
  // Every setting C++ reads is checked here, before the first program: some are read late (the disk cache's budget
  // inside a compile), where an invalid value would surface as a failed compile instead of the setting's error.
  for (const settings::Spec& spec : settings::table()) {
    if (std::string(spec.reader).find("C++") == std::string::npos) continue;
    try {
      (void)settings::read(spec.name);
    } catch (const settings::SettingError& e) {
      g_init_error = e.what();
      TORCH_CHECK(false, g_init_error);
    }
  }
  // The plugins log through absl at INFO by default; keep start-up quiet unless asked otherwise.
  setenv("TF_CPP_MIN_LOG_LEVEL", "1", /*overwrite=*/0);
  try {
    g_client = &runtime::Client::init(g_plugin_path, g_plugin_options);
    lowering::setTarget(g_client->plugin().platform_name);  // platform-specific forms rules may emit
  } catch (const std::exception& e) {
    g_init_error = std::string("tpu: cannot start the PJRT plugin: ") + e.what();
    TORCH_CHECK(false, g_init_error);
  }
  return *g_client;
}

int currentDevice() { return t_current_device; }

void setCurrentDevice(int d) {
  TORCH_CHECK(!runtime::Client::inForkedChild(), runtime::kForkedMessage);
  TORCH_CHECK(d >= 0 && d < deviceCount(), "tpu: invalid device index ", d, " (", deviceCount(),
              " devices available)");
  t_current_device = d;
}

int deviceCount() {
  try {
    return client().deviceCount();
  } catch (...) {
    return 0;
  }
}

}  // namespace torch_tpu
