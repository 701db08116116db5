// The project's own fused kernels: ops of the `tpu` namespace (schemas and reference implementations in
// csrc/eager/tpu_ops.cpp, autograd in torch_tpu/ops.py) lowered here like any ATen op. One eager program per call
// instead of one per unfused op; in compiled graphs the same rule emits the fused body.
//
//   tpu::swiglu(gate, up)                  silu(gate) * up (SwiGLU's gating in Llama/Qwen/Mistral MLPs)
//   tpu::swiglu_backward(grad, gate, up)   (d gate, d up)
//
// Half-precision inputs are computed in float32 and rounded once at the end.
#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {

namespace {

void checkPair(Context& ctx, const Value& gate, const Value& up) {
  if (gate.type != up.type)
    ctx.fail("gate " + gate.type.str() + " and up " + up.type.str() + " must have the same shape and dtype");
  if (!shlo::isFloat(gate.dtype())) ctx.fail("expects floating-point tensors, got " + gate.type.str());
}

}  // namespace

void populateFused(Registry& r) {
  r.add("tpu::swiglu", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value gate = ctx.tensor(0), up = ctx.tensor(1);
    checkPair(ctx, gate, up);
    DType t = accType(gate.dtype());
    Value g = b.convert(gate, t), u = b.convert(up, t);
    return {b.convert(b.mul(b.mul(g, b.logistic(g)), u), gate.dtype())};
  });
  r.add("tpu::swiglu_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value grad = ctx.tensor(0), gate = ctx.tensor(1), up = ctx.tensor(2);
    checkPair(ctx, gate, up);
    if (grad.type != gate.type) ctx.fail("grad " + grad.type.str() + " must match gate " + gate.type.str());
    DType t = accType(gate.dtype());
    Value dy = b.convert(grad, t), g = b.convert(gate, t), u = b.convert(up, t);
    Value s = b.logistic(g);
    Value silu = b.mul(g, s);
    // d silu(g) / dg = s * (1 + g * (1 - s))
    Value dsilu = b.mul(s, b.add(b.onesLike(g), b.mul(g, b.sub(b.onesLike(s), s))));
    Value d_gate = b.mul(b.mul(dy, u), dsilu);
    Value d_up = b.mul(dy, silu);
    return {b.convert(d_gate, gate.dtype()), b.convert(d_up, up.dtype())};
  });
}

}  // namespace torch_tpu::lowering
