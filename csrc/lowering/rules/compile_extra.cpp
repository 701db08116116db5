// Ops that appear only in compiled graphs (functionalized, decomposed ATen): prims casts, uninitialized factories.
// Registered with Rule::eager = false: eager mode implements these natively or never sees them.
#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
void populateCompileExtra(Registry& r) {
  // prims.convert_element_type(a, dtype): the result type says the dtype.
  r.add("prims::convert_element_type", [](Context& ctx) -> std::vector<Value> {
    return {ctx.b.convert(ctx.tensor(0), ctx.outputs.at(0).dtype)};
  }).graphOnly().complex();
  // Uninitialized memory in a functional graph: any value is valid; zeros are deterministic.
  auto zerosOut = [](Context& ctx) -> std::vector<Value> { return {ctx.b.zeros(ctx.outputs.at(0))}; };
  for (const char* op : {"aten::empty.memory_format", "aten::empty_strided", "aten::empty_like", "aten::new_empty",
                         "aten::new_empty_strided", "aten::empty_permuted"})
    r.add(op, zerosOut).graphOnly().complex();
}

}  // namespace torch_tpu::lowering
