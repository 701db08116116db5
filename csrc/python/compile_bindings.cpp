// torch_tpu._C bindings of the torch.compile layer (csrc/compile): graph descriptions from Python, compiled graphs,
// compile statistics and the disk cache directory.
#include <torch/csrc/Dtype.h>
#include <torch/extension.h>

#include "compile/graph.h"

namespace py = pybind11;

namespace torch_tpu {

namespace {

using compile::ArgDesc;
using compile::GraphDesc;
using compile::NodeDesc;
using compile::TensorMeta;

at::ScalarType toScalarTypeObj(const py::handle& h) {
  if (!THPDtype_Check(h.ptr())) throw py::type_error("expected a torch.dtype");
  return reinterpret_cast<THPDtype*>(h.ptr())->scalar_type;
}

// (defined, dtype, sizes, cpu)
TensorMeta meta(const py::handle& h) {
  auto t = h.cast<py::tuple>();
  TensorMeta m;
  m.defined = t[0].cast<bool>();
  if (m.defined) {
    m.dtype = toScalarTypeObj(t[1]);
    m.sizes = t[2].cast<std::vector<int64_t>>();
    m.cpu = t[3].cast<bool>();
  }
  return m;
}

// (tag, payload): T idx | TL [idx] | N | I int | F float | B bool | IL [int] | FL [float] | BL [bool] | S str |
// D dtype | O
ArgDesc arg(const py::handle& h) {
  auto t = h.cast<py::tuple>();
  std::string tag = t[0].cast<std::string>();
  ArgDesc a;
  using K = ArgDesc::K;
  if (tag == "T") { a.k = K::Tensor; a.value = t[1].cast<int>(); }
  else if (tag == "TL") { a.k = K::TensorList; a.values = t[1].cast<std::vector<int>>(); }
  else if (tag == "N") a.k = K::None;
  else if (tag == "I") { a.k = K::Int; a.i = t[1].cast<int64_t>(); }
  else if (tag == "F") { a.k = K::Float; a.f = t[1].cast<double>(); }
  else if (tag == "B") { a.k = K::Bool; a.b = t[1].cast<bool>(); }
  else if (tag == "IL") { a.k = K::IntList; a.ints = t[1].cast<std::vector<int64_t>>(); }
  else if (tag == "FL") { a.k = K::FloatList; a.floats = t[1].cast<std::vector<double>>(); }
  else if (tag == "BL") { a.k = K::BoolList; for (auto b : t[1]) a.bools.push_back(b.cast<bool>()); }
  else if (tag == "S") { a.k = K::Str; a.s = t[1].cast<std::string>(); }
  else if (tag == "D") { a.k = K::DType; a.dtype = toScalarTypeObj(t[1]); }
  else a.k = K::Other;
  return a;
}

GraphDesc graphDesc(const py::dict& d) {
  GraphDesc g;
  g.name = d["name"].cast<std::string>();
  for (auto m : d["inputs"]) g.inputs.push_back(meta(m));
  for (auto nh : d["nodes"]) {
    auto nt = nh.cast<py::tuple>();
    NodeDesc n;
    n.op = nt[0].cast<std::string>();
    for (auto a : nt[1]) n.args.push_back(arg(a));
    for (auto m : nt[2]) n.results.push_back(meta(m));
    n.result_values = nt[3].cast<std::vector<int>>();
    g.nodes.push_back(std::move(n));
  }
  g.outputs = d["outputs"].cast<std::vector<int>>();
  for (auto m : d["output_meta"]) g.output_meta.push_back(meta(m));
  g.mutations = d["mutations"].cast<std::vector<std::pair<int, int>>>();
  g.num_values = d["num_values"].cast<int>();
  if (d.contains("inference")) g.inference = d["inference"].cast<bool>();
  return g;
}

py::dict statsDict() {
  compile::CompileStats s = compile::compileStats();
  py::dict d;
  d["graphs"] = s.graphs;
  d["runs"] = s.runs;
  d["signature_hits"] = s.signature_hits;
  d["lowerings"] = s.lowerings;
  d["compiles"] = s.compiles;
  d["memory_hits"] = s.memory_hits;
  d["disk_hits"] = s.disk_hits;
  d["disk_writes"] = s.disk_writes;
  d["compile_seconds"] = s.compile_seconds;
  d["lower_seconds"] = s.lower_seconds;
  d["packed_weights"] = s.packed_weights;
  return d;
}

}  // namespace

}  // namespace torch_tpu

// Called from PYBIND11_MODULE (csrc/python/module.cpp).
void bindCompile(py::module_& m) {
  using namespace torch_tpu;
  py::class_<compile::CompiledGraph, std::shared_ptr<compile::CompiledGraph>>(m, "_CompiledGraph")
      .def(py::init([](const py::dict& d) { return std::make_shared<compile::CompiledGraph>(graphDesc(d)); }))
      // run(inputs) -> (outputs, event or None); event = (source, ops, seconds, key)
      .def("run",
           [](compile::CompiledGraph& g, const std::vector<at::Tensor>& inputs) {
             compile::CompileEvent ev;
             std::vector<at::Tensor> outs;
             {
               py::gil_scoped_release nogil;
               outs = g.run(inputs, &ev);
             }
             py::object e = py::none();
             if (ev.happened) e = py::make_tuple(ev.source, ev.ops, ev.seconds, ev.key);
             return py::make_tuple(py::cast(outs), e);
           })
      .def("check", &compile::CompiledGraph::check)
      .def("text", &compile::CompiledGraph::text)
      .def_property_readonly("name", [](const compile::CompiledGraph& g) { return g.desc().name; })
      .def_property_readonly("num_ops", [](const compile::CompiledGraph& g) { return g.desc().nodes.size(); });
  m.def("_compile_has_rule", [](const std::string& op) { return compile::ruleFor(op) != nullptr; });
  m.def("_compile_rule_names", []() { return lowering::registry().names(); });
  m.def("_compile_stats", &statsDict);
  m.def("_compile_reset_stats", &compile::resetCompileStats);
  m.def("_compile_clear_cache", &compile::clearCompileCache);
  m.def("_compile_set_cache_dir", &compile::setCacheDir);
  m.def("_compile_cache_dir", &compile::cacheDir);
}
