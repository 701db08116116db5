// tpu::moe_experts: the experts of a mixture-of-experts layer as one fused op (Transformers' experts modules:
// gate_up_proj [E, 2I, H] with the gate first, down_proj [E, H, I], SiLU gating). On tpu tensors the rule
// (csrc/lowering/rules/grouped.cpp) runs routing, grouped matmuls, SwiGLU and the weighted combine as one program;
// the reference implementation here (one expert at a time) serves CPU tensors, and the Meta kernel shapes.
//
//   moe_experts(hidden [T, H], top_k_index [T, k] (integer), top_k_weights [T, k], gate_up_proj, down_proj)
//     -> [T, H] = sum_j top_k_weights[t, j] * expert_{top_k_index[t, j]}(hidden[t])
// An index outside [0, E) (expert-parallel sentinels) contributes nothing.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace torch_tpu {
namespace {

void checkMoe(const at::Tensor& hidden, const at::Tensor& index, const at::Tensor& weights, const at::Tensor& gate_up,
              const at::Tensor& down) {
  TORCH_CHECK(hidden.dim() == 2, "moe_experts: hidden must be 2-D [tokens, hidden], got ", hidden.sizes());
  TORCH_CHECK(index.dim() == 2 && index.size(0) == hidden.size(0),
              "moe_experts: top_k_index must be [tokens, k], got ", index.sizes(), " for hidden ", hidden.sizes());
  TORCH_CHECK(!at::isFloatingType(index.scalar_type()) && index.scalar_type() != at::kBool,
              "moe_experts: top_k_index must be an integer tensor, got ", index.scalar_type());
  TORCH_CHECK(weights.sizes() == index.sizes(), "moe_experts: top_k_weights must match top_k_index, got ",
              weights.sizes(), " and ", index.sizes());
  TORCH_CHECK(gate_up.dim() == 3 && down.dim() == 3, "moe_experts: expert weights must be 3-D, got ", gate_up.sizes(),
              " and ", down.sizes());
  int64_t E = gate_up.size(0), H = hidden.size(1), I = down.size(2);
  TORCH_CHECK(gate_up.size(1) == 2 * I && gate_up.size(2) == H && down.size(0) == E && down.size(1) == H,
              "moe_experts: gate_up_proj ", gate_up.sizes(), " and down_proj ", down.sizes(),
              " must be [E, 2I, H] and [E, H, I] for hidden size ", H);
  TORCH_CHECK(at::isFloatingType(hidden.scalar_type()) && hidden.scalar_type() == gate_up.scalar_type() &&
                  hidden.scalar_type() == down.scalar_type() && hidden.scalar_type() == weights.scalar_type(),
              "moe_experts: hidden, top_k_weights and the expert weights must have one floating-point dtype, got ",
              hidden.scalar_type(), ", ", weights.scalar_type(), ", ", gate_up.scalar_type(), ", ",
              down.scalar_type());
}

at::Tensor moe_experts(const at::Tensor& hidden, const at::Tensor& index, const at::Tensor& weights,
                       const at::Tensor& gate_up, const at::Tensor& down) {
  checkMoe(hidden, index, weights, gate_up, down);
  int64_t E = gate_up.size(0), I = down.size(2);
  at::Tensor out = at::zeros(hidden.sizes(), hidden.options().dtype(at::kFloat));
  for (int64_t e = 0; e < E; ++e) {
    at::Tensor hit = (index == e).nonzero();  // [n, 2]: (token, slot)
    if (hit.size(0) == 0) continue;
    at::Tensor tok = hit.select(1, 0), slot = hit.select(1, 1);
    at::Tensor h = at::linear(hidden.index_select(0, tok), gate_up[e]);
    at::Tensor a = at::silu(h.narrow(1, 0, I)) * h.narrow(1, I, I);
    at::Tensor y = at::linear(a, down[e]);
    at::Tensor w = weights.index({tok, slot}).unsqueeze(1);
    out.index_add_(0, tok, (y * w).to(at::kFloat));
  }
  return out.to(hidden.scalar_type());
}

at::Tensor moe_experts_meta(const at::Tensor& hidden, const at::Tensor& index, const at::Tensor& weights,
                            const at::Tensor& gate_up, const at::Tensor& down) {
  checkMoe(hidden, index, weights, gate_up, down);
  return at::empty_like(hidden);
}

}  // namespace
}  // namespace torch_tpu

TORCH_LIBRARY_FRAGMENT(tpu, m) {
  m.def("moe_experts(Tensor hidden, Tensor top_k_index, Tensor top_k_weights, Tensor gate_up_proj, "
        "Tensor down_proj) -> Tensor",
        {at::Tag::pt2_compliant_tag});
}

TORCH_LIBRARY_IMPL(tpu, CompositeExplicitAutograd, m) { m.impl("moe_experts", TORCH_FN(torch_tpu::moe_experts)); }

TORCH_LIBRARY_IMPL(tpu, Meta, m) { m.impl("moe_experts", TORCH_FN(torch_tpu::moe_experts_meta)); }
