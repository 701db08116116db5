// copy: the value of `src` broadcast to `self`'s shape in `self`'s dtype. Its in-place form copy_ is how the eager
// layer writes into any view of a storage.
#include "lowering/families.h"

namespace torch_tpu::lowering {

void populateCopy(Registry& r) {
  // copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor
  r.add("aten::copy", [](Context& ctx) -> std::vector<Value> {
    const TensorType& out = ctx.outputs[0];
    Value src = ctx.b.convert(ctx.tensor(1), out.dtype);
    return {ctx.b.broadcastTo(src, out.shape)};
  }).complex();
}

}  // namespace torch_tpu::lowering
