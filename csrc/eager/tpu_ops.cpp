// The `tpu` operator namespace: the project's own ops, dispatched like ATen ops. On tpu tensors each runs through
// the lowering kernel with its rule (csrc/lowering/rules/fused.cpp, rules/foreign.cpp); the reference
// implementations here (CompositeExplicitAutograd: every other backend, and Meta for shapes) serve CPU tensors,
// PyTorch's shape inference and tests. Autograd and the Python-side pieces are registered by torch_tpu/ops.py.
//
// Adding a fused kernel: docs/ARCHITECTURE.md, "Adding a fused kernel".
#include <ATen/ATen.h>
#include <torch/library.h>

namespace torch_tpu {
namespace {

void checkSwiglu(const at::Tensor& gate, const at::Tensor& up) {
  TORCH_CHECK(gate.sizes() == up.sizes(), "swiglu: gate and up must have the same shape, got ", gate.sizes(), " and ",
              up.sizes());
  TORCH_CHECK(gate.scalar_type() == up.scalar_type(), "swiglu: gate and up must have the same dtype, got ",
              gate.scalar_type(), " and ", up.scalar_type());
  TORCH_CHECK(at::isFloatingType(gate.scalar_type()), "swiglu: expected floating-point tensors, got ",
              gate.scalar_type());
}

at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up) {
  checkSwiglu(gate, up);
  return at::silu(gate) * up;
}

std::tuple<at::Tensor, at::Tensor> swiglu_backward(const at::Tensor& grad, const at::Tensor& gate,
                                                   const at::Tensor& up) {
  checkSwiglu(gate, up);
  TORCH_CHECK(grad.sizes() == gate.sizes() && grad.scalar_type() == gate.scalar_type(),
              "swiglu_backward: grad must match gate, got ", grad.sizes(), " ", grad.scalar_type());
  at::Tensor s = at::sigmoid(gate);
  at::Tensor d_gate = grad * up * s * (1 + gate * (1 - s));
  at::Tensor d_up = grad * at::silu(gate);
  return {d_gate, d_up};
}

}  // namespace
}  // namespace torch_tpu

TORCH_LIBRARY_FRAGMENT(tpu, m) {
  // A registered foreign StableHLO program (torch_tpu.jax_op, inductor's Pallas kernels): `kernel` names it, the
  // argument types select its signature. CPU, Meta and autograd implementations come from torch_tpu/ops.py.
  m.def("stablehlo_call(Tensor[] args, str kernel) -> Tensor[]", {at::Tag::pt2_compliant_tag});
  m.def("swiglu(Tensor gate, Tensor up) -> Tensor", {at::Tag::pt2_compliant_tag});
  m.def("swiglu_backward(Tensor grad, Tensor gate, Tensor up) -> (Tensor, Tensor)", {at::Tag::pt2_compliant_tag});
}

TORCH_LIBRARY_IMPL(tpu, CompositeExplicitAutograd, m) {
  m.impl("swiglu", TORCH_FN(torch_tpu::swiglu));
  m.impl("swiglu_backward", TORCH_FN(torch_tpu::swiglu_backward));
}
