// Weight-only quantized matrix products (the kernels torchao's and Hugging Face's int4/int8 weight-only
// quantization call on CUDA and CPU):
//
//   _convert_weight_to_int4pack(w uint8 [n, k/2], innerKTiles) -> int32 [n/8, k/(16 innerKTiles), 32, innerKTiles/2]
//   _weight_int4pack_mm(x [m, k], w_packed, qGroupSize, qScaleAndZeros [k/qGroupSize, n, 2]) -> [m, n]
//   _weight_int8pack_mm(x [m, k], w int8 [n, k], scales [n]) -> [m, n]
//
// w holds two 4-bit values q per byte, the even k in the high nibble (w[i, j] = q[i, 2j] << 4 | q[i, 2j+1]), and the
// product dequantizes them group by group along k: x @ ((q - 8) * scale + zero)^T, scale and zero of row i's group
// k / qGroupSize. n is a multiple of 8 and k of 16 innerKTiles (the packed shape PyTorch's meta kernel gives needs
// them). The packed tensor has CUDA's shape and dtype; its contents are the device's own layout, as CUDA's and
// CPU's packings are theirs: the input's bytes, four per int32 in memory order (`packed.view(torch.uint8)` on a
// little-endian host is the input, flattened). Only _weight_int4pack_mm of the same device reads it.
//
// Numerics: the weights are dequantized in float32 and rounded once to x's dtype (CUDA's kernel dequantizes to
// bfloat16), then multiplied with float32 accumulation and rounded to x's dtype. int8: the product of x and the
// int8 weights accumulates in float32 and is scaled there before one rounding, as CPU's kernel does.
//
// Argument checks (CUDA's for int4, which CPU has no kernel for) run before the rule: eager/call_checks.cpp.
#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

// [words, 4] u32: 0, 8, 16, 24 along the last dimension, the bit offset of each byte in its 32-bit word.
Value byteShifts(Builder& b, int64_t words) {
  const Shape shape{words, 4};
  return b.mul(b.iota(TensorType{DType::U32, shape}, 1), b.broadcastInDim(b.constant(8, DType::U32), shape, {}));
}

// uint8 [n, k/2] -> the packed int32 tensor, four bytes per word.
std::vector<Value> packInt4(Context& ctx) {
  Builder& b = ctx.b;
  Value w = ctx.tensor(0);
  const int64_t inner = ctx.toInt(1);
  if (w.rank() != 2 || w.dtype() != DType::U8 || (inner != 2 && inner != 4 && inner != 8))
    ctx.fail("expects a 2-d uint8 weight and innerKTiles 2, 4 or 8");
  const int64_t n = w.shape()[0], half_k = w.shape()[1];
  if (n % 8 != 0 || (2 * half_k) % (16 * inner) != 0) ctx.fail("n must be a multiple of 8, k of 16 innerKTiles");
  const int64_t words = n * half_k / 4;
  Value quad = b.convert(b.reshape(w, {words, 4}), DType::U32);
  // disjoint bits: the sum is the OR
  Value word = b.reduce(b.shiftLeft(quad, byteShifts(b, words)), {1}, ReduceKind::Sum);
  return {b.reshape(b.bitcastConvert(word, DType::S32), {n / 8, 2 * half_k / (16 * inner), 32, inner / 2})};
}

// The packed int32 weight -> q as float32 [n, k] (n the packed rows, k = x's columns).
Value unpackInt4(Builder& b, Value packed, int64_t n, int64_t k) {
  const int64_t words = packed.type.numel();
  Value word = b.bitcastConvert(b.reshape(packed, {words}), DType::U32);
  Value wide = b.broadcastInDim(word, {words, 4}, {0});
  auto mask = [&](Value v, int64_t m) {
    return b.andOp(v, b.broadcastInDim(b.constant(m, DType::U32), v.shape(), {}));
  };
  Value bytes = b.reshape(mask(b.shiftRightLogical(wide, byteShifts(b, words)), 0xFF), {n, k / 2, 1});
  Value four = b.broadcastInDim(b.constant(4, DType::U32), bytes.shape(), {});
  Value hi = mask(b.shiftRightLogical(bytes, four), 0xF);
  Value lo = mask(bytes, 0xF);
  return b.convert(b.reshape(b.concatenate({hi, lo}, 2), {n, k}), DType::F32);
}

std::vector<Value> int4Mm(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0), packed = ctx.tensor(1), sz = ctx.tensor(3);
  const int64_t group = ctx.toInt(2);
  if (x.rank() != 2 || !halfOrFloat(x.dtype()) || packed.rank() != 4 || packed.dtype() != DType::S32 ||
      sz.rank() != 3 || !halfOrFloat(sz.dtype()))
    ctx.fail("expects x [m, k] (float), a packed int32 weight and qScaleAndZeros [k/qGroupSize, n, 2]");
  const int64_t k = x.shape()[1], n = packed.shape()[0] * 8;
  if (k != packed.shape()[1] * packed.shape()[3] * 32 || group <= 0 || k % group != 0 ||
      sz.shape() != Shape{k / group, n, 2})
    ctx.fail("shapes do not match");
  const int64_t groups = k / group;
  Value q = unpackInt4(b, packed, n, k);
  // scale and zero per (row, group) -> per (row, column)
  auto perColumn = [&](int64_t which) {
    Value v = b.convert(b.reshape(b.sliceInDim(sz, which, which + 1, 1, 2), {groups, n}), DType::F32);
    return b.reshape(b.broadcastInDim(v, {n, groups, group}, {1, 0}), {n, k});
  };
  Value centered = b.sub(q, b.broadcastInDim(b.constant(8, DType::F32), {n, k}, {}));
  Value w = b.convert(b.add(b.mul(centered, perColumn(0)), perColumn(1)), x.dtype());
  return {b.convert(b.dotGeneral(x, w, {}, {}, {1}, {1}, DType::F32), x.dtype())};
}

std::vector<Value> int8Mm(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0), w = ctx.tensor(1), scales = ctx.tensor(2);
  if (x.rank() != 2 || !halfOrFloat(x.dtype()) || w.rank() != 2 || w.dtype() != DType::S8 ||
      w.shape()[1] != x.shape()[1] || scales.rank() != 1 || scales.shape()[0] != w.shape()[0])
    throw InvalidCall(ctx.op(), "arguments CPU's kernel rejects");
  Value p = b.dotGeneral(b.convert(x, DType::F32), b.convert(w, DType::F32), {}, {}, {1}, {1}, DType::F32);
  Value s = b.broadcastInDim(b.convert(scales, DType::F32), p.shape(), {1});
  return {b.convert(b.mul(p, s), x.dtype())};
}

}  // namespace

void populatePackedMm(Registry& r) {
  r.add("aten::_convert_weight_to_int4pack", packInt4);
  r.add("aten::_weight_int4pack_mm", int4Mm);
  r.add("aten::_weight_int8pack_mm", int8Mm);
}

}  // namespace torch_tpu::lowering
