#include "core/replicas.h"

#include <atomic>

namespace torch_tpu::core {

namespace {
std::atomic<ReplicaGroupResolver> g_resolver{nullptr};
}  // namespace

void setReplicaGroupResolver(ReplicaGroupResolver resolver) { g_resolver = resolver; }

std::shared_ptr<ReplicaGroup> resolveReplicaGroup(const std::string& group_name) {
  ReplicaGroupResolver r = g_resolver.load();
  return r ? r(group_name) : nullptr;
}

}  // namespace torch_tpu::core
