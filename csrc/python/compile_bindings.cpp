// torch_tpu._C bindings of the torch.compile layer (csrc/compile): graph descriptions from Python, compiled graphs,
// compile statistics and the disk cache directory.
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/extension.h>

#include <c10/util/SmallVector.h>

#include "compile/graph.h"
#include "core/executables.h"
#include "lowering/collectives.h"
#include "core/ops.h"
#include "python/bindings.h"

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
    if (t.size() > 4 && !t[4].is_none()) m.strides = t[4].cast<std::vector<int64_t>>();
  }
  return m;
}

// A constant argument value as an IValue, shaped by the argument's kind.
c10::IValue constantValue(core::ArgKind kind, const py::handle& v) {
  using core::ArgKind;
  if (v.is_none()) return c10::IValue();
  if (THPDtype_Check(v.ptr())) return c10::IValue(static_cast<int64_t>(toScalarTypeObj(v)));
  if (py::isinstance<py::bool_>(v)) {
    if (kind == ArgKind::Int) return c10::IValue(static_cast<int64_t>(v.cast<bool>()));
    return c10::IValue(v.cast<bool>());
  }
  if (py::isinstance<py::int_>(v)) return c10::IValue(v.cast<int64_t>());
  if (py::isinstance<py::float_>(v)) return c10::IValue(v.cast<double>());
  if (PyComplex_Check(v.ptr()))
    return c10::IValue(c10::complex<double>(PyComplex_RealAsDouble(v.ptr()), PyComplex_ImagAsDouble(v.ptr())));
  if (py::isinstance<py::str>(v)) return c10::IValue(v.cast<std::string>());
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    switch (kind) {
      case ArgKind::IntList: return c10::IValue(c10::List<int64_t>(v.cast<std::vector<int64_t>>()));
      case ArgKind::BoolList: {
        c10::List<bool> l;
        for (auto e : v) l.push_back(e.cast<bool>());
        return c10::IValue(l);
      }
      case ArgKind::FloatList:
      case ArgKind::ScalarList: return c10::IValue(c10::List<double>(v.cast<std::vector<double>>()));
      default: break;
    }
  }
  throw py::type_error("tpu graph: unsupported constant " + std::string(py::repr(v)) + " for an argument of kind " +
                       core::argKindName(kind));
}

// (kind, name, tag, payload): tag T (a value index, -1 for None), TL (value indices), C (a constant), O (present
// but not lowered: a device, layout or memory format)
ArgDesc arg(const py::handle& h) {
  auto t = h.cast<py::tuple>();
  ArgDesc a;
  a.kind = core::argKindFromName(t[0].cast<std::string>());
  a.name = t[1].cast<std::string>();
  std::string tag = t[2].cast<std::string>();
  if (tag == "T") {
    a.src = ArgDesc::Src::Value;
    a.value = t[3].cast<int>();
  } else if (tag == "TL") {
    a.src = ArgDesc::Src::Values;
    a.values = t[3].cast<std::vector<int>>();
  } else if (tag == "O") {
    a.src = ArgDesc::Src::Const;
    a.constant = c10::IValue(int64_t(0));  // any value but None: the argument is present
  } else {
    a.src = ArgDesc::Src::Const;
    a.constant = constantValue(a.kind, t[3]);
  }
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
  if (d.contains("subgraphs"))
    for (auto sd : d["subgraphs"]) g.subgraphs.push_back(std::make_shared<GraphDesc>(graphDesc(sd.cast<py::dict>())));
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
  d["fast_calls"] = s.fast_calls;
  d["donated"] = s.donated;
  d["region_functions"] = s.region_functions;
  d["region_calls"] = s.region_calls;
  d["program_evictions"] = s.program_evictions;
  return d;
}

// What the tpu backend returns to Dynamo for an inference graph that AOTAutograd's runtime wrappers would pass
// through unchanged (torch_tpu/_dynamo_backend/_backend.py decides): a C++ callable that takes Dynamo's arguments
// straight to the graph's launch. `slow` is the full path (AOTAutograd's wrappers and the backend's runner), taken
// for every call the steady state does not serve: a signature without a program yet (built there), a CPU tensor or
// non-tensor argument, a retired graph. `bump` lists the inputs whose in-graph mutation autograd sees (their version
// counters advance, as AOTAutograd's wrapper does).
struct GraphCall {
  std::shared_ptr<compile::CompiledGraph> graph;
  py::object slow;
  std::vector<int> bump;

  py::object call(py::args args) {
    const size_t n = args.size();
    c10::SmallVector<const at::Tensor*, 16> ptrs(n);
    for (size_t i = 0; i < n; ++i) {
      PyObject* o = PyTuple_GET_ITEM(args.ptr(), static_cast<Py_ssize_t>(i));
      if (!THPVariable_Check(o)) return slow(*args);
      ptrs[i] = &THPVariable_Unpack(o);
    }
    std::vector<at::Tensor> outs;
    if (!graph->runCached(ptrs.data(), n, outs)) return slow(*args);
    for (int i : bump)  // (inference tensors have no version counter: torch._C._increment_version skips them too)
      if (!ptrs[static_cast<size_t>(i)]->is_inference()) ptrs[static_cast<size_t>(i)]->unsafeGetTensorImpl()->bump_version();
    py::list res(outs.size());
    for (size_t k = 0; k < outs.size(); ++k) {
      if (outs[k].defined()) {
        PyList_SET_ITEM(res.ptr(), static_cast<Py_ssize_t>(k), THPVariable_Wrap(std::move(outs[k])));
      } else {
        Py_INCREF(Py_None);
        PyList_SET_ITEM(res.ptr(), static_cast<Py_ssize_t>(k), Py_None);
      }
    }
    return std::move(res);
  }
};

}  // namespace

}  // namespace torch_tpu

namespace torch_tpu {

void bindCompile(py::module_& m) {
  py::class_<compile::CompiledGraph, std::shared_ptr<compile::CompiledGraph>>(m, "_CompiledGraph")
      .def(py::init([](const py::dict& d) { return std::make_shared<compile::CompiledGraph>(graphDesc(d)); }))
      // run(inputs) -> (outputs, event or None, errors); event = (source, ops, seconds, key); errors: [(node index,
      // message)] when nodes could not be lowered (then nothing ran and outputs is empty).
      .def("run",
           [](compile::CompiledGraph& g, const std::vector<at::Tensor>& inputs) {
             compile::CompileEvent ev;
             std::vector<std::pair<int, std::string>> errors;
             std::vector<at::Tensor> outs;
             {
               py::gil_scoped_release nogil;
               outs = g.run(inputs, &ev, &errors);
             }
             py::object e = py::none();
             if (ev.happened) e = py::make_tuple(ev.source, ev.ops, ev.seconds, ev.key);
             return py::make_tuple(py::cast(outs), e, py::cast(errors));
           })
      .def("retire", &compile::CompiledGraph::retire)
      .def("_program_count", &compile::CompiledGraph::programCount)
      .def("_time_stages",
           [](compile::CompiledGraph& g, const std::vector<at::Tensor>& inputs, int64_t n) {
             std::vector<std::pair<std::string, double>> st;
             {
               py::gil_scoped_release nogil;
               st = g.timeStages(inputs, n);
             }
             py::dict d;
             for (auto& [k, v] : st) d[py::str(k)] = v;
             return d;
           })
      .def_property_readonly("name", [](const compile::CompiledGraph& g) { return g.desc().name; })
      .def_property_readonly("num_ops", [](const compile::CompiledGraph& g) { return g.desc().nodes.size(); });
  py::class_<GraphCall>(m, "_GraphCall")
      .def(py::init([](std::shared_ptr<compile::CompiledGraph> g, py::object slow, std::vector<int> bump) {
             for (int i : bump)
               TORCH_CHECK(i >= 0 && static_cast<size_t>(i) < g->desc().inputs.size(), "_GraphCall: bad input index ", i);
             return GraphCall{std::move(g), std::move(slow), std::move(bump)};
           }),
           py::arg("graph"), py::arg("slow"), py::arg("bump") = std::vector<int>{})
      .def("__call__", &GraphCall::call)
      .def_readonly("slow", &GraphCall::slow);
  // The kind of each argument of a registered operator's schema: the one mapping of schema types to argument kinds
  // (core::argKind), for graph nodes as for eager calls.
  m.def("_schema_arg_kinds", [](const std::string& name, const std::string& overload) {
    auto op = c10::Dispatcher::singleton().findSchema({name, overload});
    if (!op) throw py::key_error("no registered operator " + name + (overload.empty() ? "" : "." + overload));
    std::vector<std::string> kinds;
    for (const c10::Argument& a : op->schema().arguments()) kinds.emplace_back(core::argKindName(core::argKind(a)));
    return kinds;
  });
  m.def("_compile_has_rule", [](const std::string& op) { return core::ruleFor(op).rule != nullptr; });
  m.def("_compile_rule_names", []() { return lowering::registry().names(); });
  // The functional collectives a compiled graph may keep inside its program (lowering/collectives.h).
  m.def("_collectives_in_program", &lowering::collectivesInProgram);
  m.def("_compile_stats", &statsDict);
  m.def("_compile_reset_stats", &compile::resetCompileStats);
  m.def("_compile_clear_cache", &compile::clearCompileCache);
  m.def("_compile_graph_program_limit", []() { return static_cast<int64_t>(compile::graphProgramLimit()); });
  m.def("_compile_set_graph_program_limit",
        [](int64_t n) { compile::setGraphProgramLimit(static_cast<size_t>(std::max<int64_t>(n, 0))); });
  m.def("_compile_last_program_text", &compile::lastProgramText);
  m.def("_compile_set_cache_dir", &core::setCacheDir);
  m.def("_compile_cache_dir", &core::cacheDir);
}

}  // namespace torch_tpu
