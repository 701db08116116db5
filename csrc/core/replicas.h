// Groups of ranks that run one program across their devices.
//
// A compiled graph with collectives inside (csrc/compile) is one program over the devices of a process group whose
// ranks are devices of this process (the XLA transport of tpu_dist: ranks as threads, one device each). Every rank
// calls the graph with its own tensors; before launching, the ranks meet (in the same order as the group's other
// collectives), and each launches the program on its own device with the launch id of that meeting. The
// distributed layer implements ReplicaGroup and installs the resolver from c10d group names; core and compile only
// see this interface.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace torch_tpu::core {

class ReplicaGroup {
 public:
  virtual ~ReplicaGroup() = default;
  virtual int rank() const = 0;  // the calling rank's position in the group
  virtual int size() const = 0;
  virtual const std::vector<int>& devices() const = 0;  // the device of every rank, in rank order

  struct Step {
    std::vector<std::string> infos;  // every rank's `info`, in rank order
    int launch_id = 0;               // shared by the ranks' launches of this step
  };
  // Meets the group's other ranks for the next collective step: every rank must pass the same `sig` (a mismatch,
  // or a rank missing past the group's timeout, is an error on every rank that names each rank's call).
  virtual Step meet(const std::string& what, const std::string& sig, const std::string& info) = 0;
};

// The calling rank's ReplicaGroup for a c10d group name, or null when that group cannot run programs across its
// devices (another transport or backend, or no resolver installed).
using ReplicaGroupResolver = std::shared_ptr<ReplicaGroup> (*)(const std::string& group_name);
void setReplicaGroupResolver(ReplicaGroupResolver resolver);
std::shared_ptr<ReplicaGroup> resolveReplicaGroup(const std::string& group_name);

}  // namespace torch_tpu::core
