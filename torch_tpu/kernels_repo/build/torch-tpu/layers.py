"""Fused layers for tpu, in the form the ``kernels`` library expects: no constructor, a ``forward`` that reads the
attributes of the module it replaces.

* ``RMSNorm``: Transformers' RMSNorm (``weight``, ``variance_epsilon``): normalized in float32, rounded to the input
  dtype, times the weight. One ``aten::_fused_rms_norm`` program instead of five elementwise ones.
* ``SiluAndMul``: ``silu(x[..., :d]) * x[..., d:]`` (the ``activation`` kernels' layer) as ``tpu::swiglu``.
* ``SwiGLUMLP``: ``down_proj(silu(gate_proj(x)) * up_proj(x))`` (Llama/Qwen/Mistral MLPs) with ``tpu::swiglu``.
* ``MoeExperts``: Transformers' experts modules (``gate_up_proj`` [E, 2I, H], ``down_proj`` [E, H, I], SiLU
  gating; ``forward(hidden_states, top_k_index, top_k_weights)``) as one fused ``tpu::moe_experts`` op: routing
  sort, grouped matmuls (ragged dot on TPU/GPU), SwiGLU and the weighted combine in one program. Inference only.
"""

import torch
import torch.nn.functional as F


class RMSNorm(torch.nn.Module):
    can_torch_compile = True
    has_backward = True

    def forward(self, hidden_states):
        dtype = hidden_states.dtype
        x = F.rms_norm(hidden_states.to(torch.float32), (hidden_states.shape[-1],), eps=self.variance_epsilon)
        return self.weight * x.to(dtype)


class SiluAndMul(torch.nn.Module):
    can_torch_compile = True
    has_backward = True

    def forward(self, x):
        d = x.shape[-1] // 2
        return torch.ops.tpu.swiglu(x[..., :d], x[..., d:])


class SwiGLUMLP(torch.nn.Module):
    can_torch_compile = True
    has_backward = True

    def forward(self, x):
        return self.down_proj(torch.ops.tpu.swiglu(self.gate_proj(x), self.up_proj(x)))


class MoeExperts(torch.nn.Module):
    can_torch_compile = True
    has_backward = False

    def forward(self, hidden_states, top_k_index, top_k_weights):
        return torch.ops.tpu.moe_experts(hidden_states, top_k_index, top_k_weights.to(hidden_states.dtype),
                                         self.gate_up_proj, self.down_proj)
