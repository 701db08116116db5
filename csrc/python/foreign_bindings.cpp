// torch_tpu._C bindings of foreign programs (csrc/lowering/foreign.h) and of the `tpu` operator namespace:
// registering a StableHLO module for tpu::stablehlo_call, checking that the plugin compiles it, and registering
// the lowering kernel for ops defined after import.
#include <torch/extension.h>

#include "core/client.h"
#include "eager/kernel.h"
#include "lowering/foreign.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace torch_tpu {

namespace {

py::list types(const std::vector<shlo::TensorType>& ts) {
  py::list out;
  for (const auto& t : ts) out.append(py::make_tuple(std::string(shlo::mlirName(t.dtype)), t.shape));
  return out;
}

}  // namespace

void bindForeign(py::module_& m) {
  // Registers `text` for (kernel, its entry's input types). Returns {inputs, outputs: [(mlir element type, shape)],
  // custom_calls: [target], symbol}. Raises ValueError for text that cannot be embedded.
  m.def(
      "_foreign_register",
      [](const std::string& kernel, const std::string& text, const std::string& entry) {
        std::shared_ptr<const shlo::ForeignModule> fm;
        try {
          fm = lowering::registerForeignProgram(kernel, text, entry);
        } catch (const shlo::BuildError& e) {
          throw py::value_error(std::string("torch_tpu: kernel '") + kernel + "': " + e.what());
        }
        py::dict d;
        d["inputs"] = types(fm->inputs());
        d["outputs"] = types(fm->outputs());
        py::list cc;
        for (const auto& t : fm->customCallTargets()) cc.append(t);
        d["custom_calls"] = cc;
        d["symbol"] = fm->entrySymbol();
        return d;
      },
      py::arg("kernel"), py::arg("text"), py::arg("entry") = "main");
  // Compiles a whole module on the plugin and drops the executable: None if it compiles, else the plugin's message.
  m.def("_foreign_compile_error", [](const std::string& text) -> py::object {
    std::string err;
    {
      py::gil_scoped_release nogil;
      try {
        client().compile(text);
      } catch (const std::exception& e) {
        err = e.what();
      }
    }
    if (err.empty()) return py::none();
    return py::str(err);
  });
  m.def("_foreign_program_count", []() { return lowering::foreignProgramCount(); });
  // Drops the program of `kernel` registered with `text` (its input types select it): a cache's eviction. Returns
  // whether one was registered.
  m.def("_foreign_unregister", [](const std::string& kernel, const std::string& text, const std::string& entry) {
    auto fm = shlo::ForeignModule::parse(text, entry);
    return lowering::unregisterForeignProgram(kernel, fm->inputs());
  }, py::arg("kernel"), py::arg("text"), py::arg("entry") = "main");
  // Registers the lowering kernel for ops with a rule defined since the last call; returns every registered name.
  m.def("_register_lowering_kernels", []() { return registerLoweringKernels(); });
}

}  // namespace torch_tpu
