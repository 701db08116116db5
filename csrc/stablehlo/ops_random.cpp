// Random builders: rng_bit_generator (THREE_FRY). Methods of shlo::Builder (builder.h).
#include "stablehlo/builder_impl.h"

namespace torch_tpu::shlo {

using namespace detail;

std::vector<Value> Builder::rngBitGenerator(Value state, const TensorType& t) {
  impl_->check("rngBitGenerator", state);
  if (state.type != TensorType{DType::U64, {2}})
    fail("rngBitGenerator", "state must be tensor<2xui64> for THREE_FRY, got " + state.type.str());
  checkShape("rngBitGenerator", t.shape);
  if (!isInteger(t.dtype) && !isFloat(t.dtype))
    fail("rngBitGenerator", "output must be an integer (usually unsigned) type, got " + t.str());
  TensorType res[2] = {state.type, t};
  return impl_->emitMulti("stablehlo.rng_bit_generator", &state, 1, {},
                          Attrs().enumeration("rng_algorithm", "rng_algorithm", "THREE_FRY"), res, 2);
}

}  // namespace torch_tpu::shlo
