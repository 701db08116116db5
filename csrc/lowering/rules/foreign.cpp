// tpu::stablehlo_call(Tensor[] args, str kernel) -> Tensor[]: a foreign StableHLO program (lowering/foreign.h)
// called from ours. `kernel` and the argument types select the program registered from Python (JAX exports,
// inductor's Pallas kernels); its functions become private functions of the program and the call one func.call,
// which XLA inlines: inside a compiled graph the kernel adds no launch.
#include "lowering/families.h"
#include "lowering/foreign.h"

namespace torch_tpu::lowering {

void populateForeign(Registry& r) {
  r.add("tpu::stablehlo_call", [](Context& ctx) -> std::vector<Value> {
    const Arg& list = ctx.arg(0);
    if (list.kind != Arg::Kind::TensorList) ctx.fail("argument 'args' is not a tensor list");
    std::vector<TensorType> types;
    for (size_t i = 0; i < list.tensors.size(); ++i) {
      if (!list.tensors[i].valid()) ctx.fail("argument args[" + std::to_string(i) + "] is not a tensor");
      types.push_back(list.tensors[i].type);
    }
    const Arg& name = ctx.arg(1);
    if (name.kind != Arg::Kind::String) ctx.fail("argument 'kernel' is not a string");
    auto m = findForeignProgram(name.s, types);
    if (!m) {
      std::string have;
      for (const std::string& s : foreignSignatures(name.s)) have += "\n  " + s;
      std::string got;
      for (const auto& t : types) got += (got.empty() ? "" : ", ") + t.str();
      ctx.fail("no program of kernel '" + name.s + "' takes (" + got + ")" +
               (have.empty() ? std::string(" (the kernel has no programs)") : "; registered:" + have));
    }
    std::vector<Value> out = shlo::callForeign(ctx.b, *m, list.tensors);
    if (out.size() != ctx.outputs.size())
      ctx.fail("kernel '" + name.s + "' returns " + std::to_string(out.size()) + " results, the call expects " +
               std::to_string(ctx.outputs.size()));
    return out;
  });
}

}  // namespace torch_tpu::lowering
