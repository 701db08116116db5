// torch_tpu._C._dist: the c10d backend `tpu_dist` (csrc/distributed), created by torch_tpu/distributed.py.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/utils/pybind.h>
#include <torch/extension.h>

#include "distributed/backend.h"
#include "core/client.h"
#include "core/config.h"
#include "core/dtype.h"
#include "core/replicas.h"
#include "core/storage.h"

#include "python/bindings.h"

namespace py = pybind11;

namespace torch_tpu {

void bindDistributed(py::module_& m) {
  using namespace torch_tpu::dist;
  py::module_ d = m.def_submodule("_dist", "the c10d backend tpu_dist");
  installReplicaGroupResolver();
  // Whether a c10d group (by name) can run compiled graphs with its collectives inside (XLA transport).
  d.def("_replica_group_size", [](const std::string& name) {
    auto g = core::resolveReplicaGroup(name);
    return g ? g->size() : 0;
  });
  py::class_<TpuBackend, c10d::Backend, c10::intrusive_ptr<TpuBackend>>(d, "TpuBackend")
      .def(py::init([](int rank, int size, double timeout_s, const c10::intrusive_ptr<c10d::Backend>& gloo,
                       const std::string& transport, const std::string& group_key, int device,
                       std::vector<int64_t> peer_pids) {
             TORCH_CHECK(gloo, "tpu_dist: a Gloo backend is required");
             TORCH_CHECK_VALUE(transport == "host" || transport == "xla", "tpu_dist: unknown transport '", transport,
                               "' (expected 'host' or 'xla')");
             auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
             std::shared_ptr<XlaEngine> xla;
             if (transport == "xla") {
               auto group = XlaGroup::join(group_key, rank, size, device, timeout);
               xla = std::make_shared<XlaEngine>(group, rank, device, timeout);
             }
             auto host = std::make_shared<HostEngine>(gloo, rank, std::move(peer_pids));
             return c10::make_intrusive<TpuBackend>(rank, size, timeout, host, xla, transport);
           }),
           py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("gloo"), py::arg("transport"),
           py::arg("group_key"), py::arg("device"), py::arg("peer_pids") = std::vector<int64_t>{},
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("transport", &TpuBackend::transport)
      .def_property_readonly("direct_allreduces", &TpuBackend::directAllreduces);
}

}  // namespace torch_tpu
