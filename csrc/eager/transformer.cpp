// The inference fast paths of nn.MultiheadAttention and nn.TransformerEncoder(Layer) on tpu, as PyTorch's CUDA
// backend has them.
//
// PyTorch takes these paths for PrivateUse1 devices (eval mode, no grad): _native_multi_head_attention and
// _transformer_encoder_layer_fwd are composites of ATen ops (linear, the packed q/k/v split, bmm, masked softmax,
// layer norm), so tpu runs PyTorch's own composition, each op on the device through its rule. With a key padding
// mask, nn.TransformerEncoder packs the batch into a nested tensor (_nested_tensor_from_mask) and unpacks it at the
// end (to_padded_tensor). A nested tensor on tpu is PyTorch's NestedTensorImpl around a tpu buffer; its layer runs
// on the padded batch with the padding as a key mask, which computes the same values for every real position.
#include <ATen/ATen.h>
#include <ATen/NestedTensorImpl.h>
#include <ATen/ops/_native_multi_head_attention_native.h>
#include <ATen/ops/_nested_from_padded_native.h>
#include <ATen/ops/_nested_tensor_from_mask_left_aligned_native.h>
#include <ATen/ops/_nested_tensor_from_mask_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/_transformer_encoder_layer_fwd_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/to_padded_tensor_native.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

namespace torch_tpu {
namespace {

// The nested form: a (B, L, D) padded batch of sequences of lengths L_b, as PyTorch's generic kernel lays it out
// (padding at the end of each row), and its (B, L) padding mask (true at padding).
at::Tensor paddingMask(const at::Tensor& nested, int64_t L, const at::Device& device) {
  const at::Tensor& sizes = at::native::get_nested_sizes(nested);  // (B, 2) on the CPU: (L_b, D)
  at::Tensor lengths = sizes.select(1, 0).to(device);
  at::Tensor positions = at::arange(L, at::TensorOptions().dtype(lengths.scalar_type()).device(device));
  return positions.unsqueeze(0).ge(lengths.unsqueeze(1));
}

at::Tensor encoderLayerNested(const at::Tensor& src, int64_t embed_dim, int64_t num_heads,
                              const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
                              const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu,
                              bool norm_first, double eps, const at::Tensor& norm_weight_1,
                              const at::Tensor& norm_bias_1, const at::Tensor& norm_weight_2,
                              const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1,
                              const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2,
                              const at::Tensor& ffn_bias_2, const std::optional<at::Tensor>& mask,
                              std::optional<int64_t> mask_type) {
  // PyTorch's own message for the same call on CPU and CUDA.
  TORCH_CHECK(!mask.has_value() || !mask->defined(), "NestedTensor with mask is not supported yet");
  const at::Tensor& sizes = at::native::get_nested_sizes(src);
  TORCH_CHECK(sizes.dim() == 2 && sizes.size(1) == 2,
              "_transformer_encoder_layer_fwd: expected a nested tensor of (length, embed_dim) sequences");
  if (sizes.size(0) == 0 || at::native::get_nested_tensor_impl(src)->get_buffer().numel() == 0) {
    return at::native::transformer_encoder_layer_forward(
        src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps,
        norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2,
        mask, mask_type);
  }
  at::Tensor padded = src.to_padded_tensor(0.0);
  at::Tensor pad = paddingMask(src, padded.size(1), padded.device());
  at::Tensor out = at::native::transformer_encoder_layer_forward(
      padded, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps,
      norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2,
      pad, /*mask_type=*/1);
  return at::_nested_tensor_from_mask(out, pad.logical_not(), /*mask_check=*/false);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_native_multi_head_attention", TORCH_FN(at::native::native_multi_head_attention_cpu));
  m.impl("_transformer_encoder_layer_fwd", TORCH_FN(at::native::transformer_encoder_layer_forward));
  m.impl("_nested_tensor_from_mask", TORCH_FN(at::native::NestedTensor_nested_tensor_from_mask));
  m.impl("_nested_tensor_from_mask_left_aligned",
         TORCH_FN(at::native::NestedTensor_nested_tensor_from_mask_left_aligned));
  m.impl("_nested_from_padded", TORCH_FN(at::native::nested_from_padded_generic));
}

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("_transformer_encoder_layer_fwd", TORCH_FN(encoderLayerNested));
  m.impl("to_padded_tensor", TORCH_FN(at::native::NestedTensor_to_padded_tensor_generic));
  m.impl("_to_copy", TORCH_FN(at::native::_to_copy_nested));
  m.impl("clone", TORCH_FN(at::native::clone_nested));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_nested));
  m.impl("copy_", TORCH_FN(at::native::copy_nested_));
}

}  // namespace torch_tpu
