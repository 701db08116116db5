// Linear-algebra family, products: mm, bmm, addmm, baddbmm, addbmm, mv, addmv, dot, vdot, _addmm_activation, addr,
// the out_dtype forms, _int_mm, _scaled_mm, linalg_cross and linalg_matrix_exp. Factorizations and solves:
// linalg_solve.cpp (Cholesky, triangular solves, LU) and linalg_decomp.cpp (QR, Hermitian eigendecomposition, SVD).
//
// matmul/linear are CompositeImplicit in PyTorch and reach these through views. bf16/f16 products accumulate in f32
// (dot_general with an f32 result) and the whole epilogue (beta*self + alpha*product) runs in f32 before one
// rounding, as PyTorch CPU's gemm does.
#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>

#include "lowering/families.h"
#include "lowering/helpers.h"
#include "lowering/rules/linalg_common.h"

namespace torch_tpu::lowering {
namespace {

using shlo::Cmp;

// Contracts lhs dim lc with rhs dim rc, batching over the leading `nbatch` dims; result in accType(lhs dtype).
Value product(Builder& b, Value lhs, Value rhs, int64_t nbatch, int64_t lc, int64_t rc, DType acc) {
  std::vector<int64_t> batch;
  for (int64_t k = 0; k < nbatch; ++k) batch.push_back(k);
  if (rhs.dtype() != lhs.dtype()) rhs = b.convert(rhs, lhs.dtype());
  if (shlo::isFloat8(lhs.dtype())) {  // float8 products: exact widening to f32, then an f32 product
    lhs = b.convert(lhs, DType::F32);
    rhs = b.convert(rhs, DType::F32);
  }
  if (lhs.dtype() == DType::Pred) {  // no boolean dot: compute in s64
    lhs = b.convert(lhs, DType::S64);
    rhs = b.convert(rhs, DType::S64);
    acc = DType::S64;
  }
  return b.dotGeneral(lhs, rhs, batch, batch, {lc}, {rc}, acc);
}

// beta * self + alpha * prod in prod's dtype; beta == 0 ignores self (NaN/inf in self are not propagated).
Value epilogue(Context& ctx, Value prod, size_t self_i, size_t beta_i, size_t alpha_i) {
  Builder& b = ctx.b;
  DType c = prod.dtype();
  const Shape& shape = prod.shape();
  Value res = prod;
  if (ctx.has(alpha_i)) res = b.mul(res, operand(ctx, alpha_i, c, shape));
  Value self = operand(ctx, self_i, c, shape);
  if (ctx.has(beta_i)) {
    Value beta = scalarArg(ctx, beta_i, c);
    Value scaled = b.mul(self, b.broadcastTo(beta, shape));
    Value is_zero = b.compare(beta, b.constant(0, c), Cmp::EQ);
    self = b.select(is_zero, b.zerosLike(scaled), scaled);
  }
  return c == DType::Pred ? b.orOp(res, self) : b.add(res, self);
}

// Matrix products take operands of one dtype (and a bias tensor of that dtype): the CPU kernels reject others.
void sameDTypes(const Context& ctx, std::initializer_list<size_t> operands, int self_i = -1) {
  DType t = ctx.tensor(*operands.begin()).dtype();
  for (size_t i : operands)
    if (ctx.tensor(i).dtype() != t) throw InvalidCall(ctx.op(), "operands of different dtypes");
  if (self_i >= 0 && ctx.arg(size_t(self_i)).kind == Arg::Kind::Tensor && !ctx.arg(size_t(self_i)).wrapped_number &&
      ctx.tensor(size_t(self_i)).dtype() != t)
    throw InvalidCall(ctx.op(), "operands of different dtypes");
}

std::vector<Value> mmLike(Context& ctx, size_t lhs_i, size_t rhs_i, int64_t nbatch, int64_t lc, int64_t rc,
                          int self_i = -1, size_t beta_i = 0, size_t alpha_i = 0) {
  Builder& b = ctx.b;
  Value lhs = ctx.tensor(lhs_i), rhs = ctx.tensor(rhs_i);
  sameDTypes(ctx, {lhs_i, rhs_i}, self_i);
  DType out = lhs.dtype();
  DType acc = accType(out);
  Value p = product(b, lhs, rhs, nbatch, lc, rc, acc);
  if (self_i >= 0) p = epilogue(ctx, p, size_t(self_i), beta_i, alpha_i);
  return {b.convert(p, out)};
}

// Matrix products: PyTorch CPU requires one dtype for every operand (self included) and has no bool kernels; other
// calls decline, and the CPU kernel raises PyTorch's error.
bool matmulAccepts(const Context& ctx) {
  if (!realDTypes(ctx)) return false;
  DType t = DType::Invalid;
  for (const Arg& a : ctx.args) {
    if (a.kind != Arg::Kind::Tensor || !a.tensor.valid()) continue;
    if (t != DType::Invalid && a.tensor.dtype() != t) return false;
    t = a.tensor.dtype();
  }
  return t != DType::Pred;
}
}  // namespace

namespace {

// The out_dtype forms (mm.dtype, bmm.dtype, addmm.dtype, baddbmm.dtype: float16/bfloat16 operands with a float32
// result, or the operands' dtype): the product accumulates in float32 and the epilogue runs there, one rounding to
// out_dtype. `self` (the added tensor) may be either dtype.
std::vector<Value> mmOutDType(Context& ctx, size_t lhs_i, size_t rhs_i, int64_t nbatch, int64_t lc, int64_t rc,
                              int self_i = -1, size_t beta_i = 0, size_t alpha_i = 0) {
  Builder& b = ctx.b;
  sameDTypes(ctx, {lhs_i, rhs_i});
  Value lhs = ctx.tensor(lhs_i), rhs = ctx.tensor(rhs_i);
  const DType out = ctx.outputs.at(0).dtype;
  Value p = product(b, lhs, rhs, nbatch, lc, rc, accType(lhs.dtype()));
  if (self_i >= 0) p = epilogue(ctx, p, size_t(self_i), beta_i, alpha_i);
  return {b.convert(p, out)};
}

// _int_mm: int8 x int8 -> int32, accumulated in int32.
std::vector<Value> intMm(Context& ctx) {
  sameDTypes(ctx, {0, 1});
  return {ctx.b.dotGeneral(ctx.tensor(0), ctx.tensor(1), {}, {}, {1}, {0}, DType::S32)};
}

bool floatOrSameOut(const Context& ctx) {
  return realDTypes(ctx) && ctx.outputs.size() == 1 && ctx.outputs[0].dtype != DType::Pred;
}

// _scaled_mm(self, mat2, scale_a, scale_b, bias?, scale_result?, out_dtype?, use_fast_accum): float8 operands
// widened to float32 (exactly) and scaled (a tensor-wise scale, or row-wise [M, 1] and [1, N] scales), one float32
// product, plus bias, divided by scale_result for a float8 result, rounded once to out_dtype: PyTorch CPU's steps.
// _scaled_mm_v2 names the same two recipes per operand (TensorWise, RowWise; no swizzle): the same product.
std::vector<Value> scaledProduct(Context& ctx, Value sa, Value sb, int bias, int scale_result) {
  Builder& b = ctx.b;
  Value x = b.convert(ctx.tensor(0), DType::F32), y = b.convert(ctx.tensor(1), DType::F32);
  const int64_t M = x.shape()[0], N = y.shape()[1];
  auto scaled = [&](Value v, Value scale, bool rows) {
    Value s = b.convert(scale, DType::F32);
    if (s.type.numel() == 1) return b.mul(v, b.broadcastInDim(b.reshape(s, {}), v.shape(), {}));
    if (rows) return b.mul(v, b.broadcastInDim(b.reshape(s, {M}), v.shape(), {0}));
    return b.mul(v, b.broadcastInDim(b.reshape(s, {N}), v.shape(), {1}));
  };
  const bool tensorwise = sa.type.numel() == 1 && sb.type.numel() == 1;
  Value p;
  if (tensorwise) {
    p = b.dotGeneral(scaled(x, sa, true), scaled(y, sb, false), {}, {}, {1}, {0}, DType::F32);
  } else {  // row-wise: the scales multiply the product's rows and columns
    p = scaled(scaled(b.dotGeneral(x, y, {}, {}, {1}, {0}, DType::F32), sa, true), sb, false);
  }
  if (bias >= 0 && ctx.has(bias)) p = b.add(p, b.broadcastTo(b.convert(ctx.tensor(bias), DType::F32), p.shape()));
  const DType out = ctx.outputs.at(0).dtype;
  if (scale_result >= 0 && ctx.has(scale_result) && (out == DType::F8E4M3FN || out == DType::F8E5M2)) {
    Value inv = b.div(b.constant(1.0, DType::F32), b.reshape(b.convert(ctx.tensor(scale_result), DType::F32), {}));
    p = b.mul(p, b.broadcastInDim(inv, p.shape(), {}));
  }
  return {b.convert(p, out)};
}

// Float8 (not e8m0) matrices, float32 scales, tensor-wise (one element each) or row-wise ([M, 1] and [1, N]).
bool scaledOperandsOk(const Context& ctx, Value sa, Value sb) {
  const Value x = ctx.tensor(0), y = ctx.tensor(1);
  if (!shlo::isFloat8(x.dtype()) || x.dtype() == DType::F8E8M0FNU || !shlo::isFloat8(y.dtype()) ||
      y.dtype() == DType::F8E8M0FNU || x.rank() != 2 || y.rank() != 2)
    return false;
  if (sa.dtype() != DType::F32 || sb.dtype() != DType::F32) return false;
  const bool tensorwise = sa.type.numel() == 1 && sb.type.numel() == 1;
  const bool rowwise = sa.shape() == Shape{x.shape()[0], 1} && sb.shape() == Shape{1, y.shape()[1]};
  return tensorwise || rowwise;
}

// _scaled_mm_v2's per-operand scale list, recipe and swizzle: one scale, TensorWise (0) or RowWise (1), no swizzle.
constexpr int64_t kTensorWise = 0, kRowWise = 1;
bool v2ScaleOk(const Context& ctx, size_t scales, int64_t* recipe) {
  const Arg& s = ctx.args.at(scales);
  if (s.kind != Arg::Kind::TensorList || s.tensors.size() != 1 || !s.tensors[0].valid()) return false;
  const auto& r = ctx.toInts(scales + 1);
  const auto& sw = ctx.toInts(scales + 2);
  if (r.size() != 1 || (r[0] != kTensorWise && r[0] != kRowWise)) return false;
  for (int64_t v : sw)
    if (v != 0) return false;
  *recipe = r[0];
  return true;
}

bool scaledMmV2Accepts(const Context& ctx) {
  int64_t ra = -1, rb = -1;
  if (!v2ScaleOk(ctx, 2, &ra) || !v2ScaleOk(ctx, 5, &rb) || ra != rb) return false;
  if (ctx.has(10) && !ctx.toInts(10).empty()) return false;  // contraction_dim: the default layout only
  return scaledOperandsOk(ctx, ctx.args[2].tensors[0], ctx.args[5].tensors[0]);
}

}  // namespace

void populateLinalg(Registry& r) {
  r.add("aten::mm.dtype", [](Context& ctx) { return mmOutDType(ctx, 0, 1, 0, 1, 0); }).accepts(floatOrSameOut);
  r.add("aten::bmm.dtype", [](Context& ctx) { return mmOutDType(ctx, 0, 1, 1, 2, 1); }).accepts(floatOrSameOut);
  r.add("aten::addmm.dtype", [](Context& ctx) { return mmOutDType(ctx, 1, 2, 0, 1, 0, 0, 4, 5); })
      .accepts(floatOrSameOut);
  r.add("aten::baddbmm.dtype", [](Context& ctx) { return mmOutDType(ctx, 1, 2, 1, 2, 1, 0, 4, 5); })
      .accepts(floatOrSameOut);
  r.add("aten::_int_mm", intMm).accepts([](const Context& ctx) {
    return ctx.tensor(0).dtype() == DType::S8 && ctx.tensor(1).dtype() == DType::S8;
  });
  r.add("aten::_scaled_mm", [](Context& ctx) { return scaledProduct(ctx, ctx.tensor(2), ctx.tensor(3), 4, 5); })
      .accepts([](const Context& ctx) { return scaledOperandsOk(ctx, ctx.tensor(2), ctx.tensor(3)); })
      .dtypes(kFloat8);
  r.add("aten::_scaled_mm_v2", [](Context& ctx) {
    return scaledProduct(ctx, ctx.args[2].tensors[0], ctx.args[5].tensors[0], 8, -1);
  }).accepts(scaledMmV2Accepts).dtypes(kFloat8);
  r.add("aten::mm", [](Context& ctx) { return mmLike(ctx, 0, 1, 0, 1, 0); })
      .accepts(matmulAccepts).dtypes(kFloat8 | kComplex).packedOperand(1);
  r.add("aten::bmm", [](Context& ctx) { return mmLike(ctx, 0, 1, 1, 2, 1); }).accepts(matmulAccepts).complex();
  r.add("aten::mv", [](Context& ctx) { return mmLike(ctx, 0, 1, 0, 1, 0); }).accepts(matmulAccepts).complex();
  r.add("aten::dot", [](Context& ctx) { return mmLike(ctx, 0, 1, 0, 0, 0); }).accepts(matmulAccepts).complex();
  // vdot conjugates its first operand.
  r.add("aten::vdot", [](Context& ctx) {
    if (shlo::isComplex(ctx.tensor(0).dtype())) ctx.args[0].tensor = ctx.b.conj(ctx.args[0].tensor);
    return mmLike(ctx, 0, 1, 0, 0, 0);
  }).accepts(matmulAccepts).complex();
  // addmm(self, mat1, mat2, *, beta=1, alpha=1)
  r.add("aten::addmm", [](Context& ctx) { return mmLike(ctx, 1, 2, 0, 1, 0, 0, 3, 4); })
      .accepts(matmulAccepts).complex().packedOperand(2);
  r.add("aten::baddbmm", [](Context& ctx) { return mmLike(ctx, 1, 2, 1, 2, 1, 0, 3, 4); }).accepts(matmulAccepts).complex();
  r.add("aten::addmv", [](Context& ctx) { return mmLike(ctx, 1, 2, 0, 1, 0, 0, 3, 4); }).accepts(matmulAccepts).complex();
  // addbmm(self, batch1, batch2, beta, alpha): sum over the batch of batch1[i] @ batch2[i]
  r.add("aten::addbmm", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value lhs = ctx.tensor(1), rhs = ctx.tensor(2);
    sameDTypes(ctx, {1, 2}, 0);
    DType out = lhs.dtype();
    DType acc = accType(out);
    Value l = lhs, rr = rhs;
    if (l.dtype() == DType::Pred) {
      l = b.convert(l, DType::S64);
      rr = b.convert(rr, DType::S64);
      acc = DType::S64;
    }
    if ((out == DType::BF16 || out == DType::F16) && lhs.shape()[0] > 0 && lhs.shape()[0] <= 64) {
      // PyTorch CPU runs one addmm_ per batch, rounding the running result to the half type after each.
      int64_t nb = lhs.shape()[0];
      Value res;
      for (int64_t i = 0; i < nb; ++i) {
        Value li = b.reshape(b.sliceInDim(l, i, i + 1, 1, 0), {l.shape()[1], l.shape()[2]});
        Value ri = b.reshape(b.sliceInDim(rr, i, i + 1, 1, 0), {rr.shape()[1], rr.shape()[2]});
        Value p = b.dotGeneral(li, b.convert(ri, li.dtype()), {}, {}, {1}, {0}, acc);
        if (i == 0) {
          res = b.convert(epilogue(ctx, p, 0, 3, 4), out);
        } else {
          if (ctx.has(4)) p = b.mul(p, operand(ctx, 4, acc, p.shape()));
          res = b.convert(b.add(b.convert(res, acc), p), out);
        }
      }
      return {res};
    }
    Value p = b.dotGeneral(l, b.convert(rr, l.dtype()), {}, {}, {0, 2}, {0, 1}, acc);
    return {b.convert(epilogue(ctx, p, 0, 3, 4), out)};
  }).accepts(matmulAccepts).complex();
  // addr(self, vec1, vec2, *, beta=1, alpha=1): beta*self + (alpha*vec1)*vec2 with PyTorch CPU's per-operation
  // rounding for half types; beta == 0 ignores self.
  r.add("aten::addr", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    const TensorType& ot = ctx.outputs.at(0);
    DType t = ot.dtype;
    Shape shape = ot.shape;
    Value v1 = b.broadcastInDim(b.convert(ctx.tensor(1), t), shape, {0});
    Value v2 = b.broadcastInDim(b.convert(ctx.tensor(2), t), shape, {1});
    Value self = b.broadcastTo(b.convert(ctx.tensor(0), t), shape);
    if (t == DType::Pred) {
      Value prod = b.andOp(v1, v2);
      if (ctx.has(4)) prod = b.andOp(prod, b.broadcastTo(scalarArg(ctx, 4, t), shape));
      Value sb = ctx.has(3) ? b.andOp(self, b.broadcastTo(scalarArg(ctx, 3, t), shape)) : self;
      return {b.orOp(sb, prod)};
    }
    DType c = accType(t);
    auto R = [&](Value v) { return b.convert(b.convert(v, t), c); };  // round to t
    Value a1 = b.convert(v1, c), a2 = b.convert(v2, c), sf = b.convert(self, c);
    // CPU's kernel takes alpha and beta in the result's dtype, and rounds after each operation
    Value alpha = ctx.has(4) ? b.broadcastTo(R(scalarArg(ctx, 4, c)), shape) : b.onesLike(a1);
    Value prod = R(b.mul(R(b.mul(alpha, a1)), a2));
    if (!ctx.has(3)) return {b.convert(b.add(sf, prod), t)};
    Value beta = R(scalarArg(ctx, 3, c));
    Value scaled = R(b.mul(b.broadcastTo(beta, shape), sf));
    Value res = b.convert(b.add(scaled, prod), t);
    return {b.select(b.compare(beta, b.constant(0, c), Cmp::EQ), b.convert(prod, t), res)};
  }).accepts(realDTypes).complex();
  // _addmm_activation(self, mat1, mat2, *, beta=1, alpha=1, bool use_gelu=False)
  r.add("aten::_addmm_activation", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value lhs = ctx.tensor(1), rhs = ctx.tensor(2);
    DType out = lhs.dtype();
    Value p = epilogue(ctx, product(b, lhs, rhs, 0, 1, 0, accType(out)), 0, 3, 4);
    bool use_gelu = ctx.has(5) && ctx.toBool(5);
    if (use_gelu) {  // erf GELU, as PyTorch CPU's kernel (CUDA's cuBLASLt epilogue uses the tanh approximation)
      p = lowering::gelu(b, p, "none");
    } else if (shlo::isSigned(p.dtype())) {
      p = b.select(b.compare(p, b.zerosLike(p), Cmp::LT), b.zerosLike(p), p);
    }
    return {b.convert(p, out)};
  }).accepts(realDTypes);
  // linalg_cross(self, other, *, dim=-1): both broadcast; dim has size 3.
  r.add("aten::linalg_cross", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0), y = ctx.tensor(1);
    DType t = promote(x.dtype(), y.dtype());
    Shape shape = broadcastShapes({x.shape(), y.shape()});
    x = b.broadcastTo(b.convert(x, t), shape);
    y = b.broadcastTo(b.convert(y, t), shape);
    int64_t d = normDim(ctx, ctx.has(2) ? ctx.toInt(2) : -1, int64_t(shape.size()));
    auto at = [&](Value v, int64_t i) { return b.sliceInDim(v, i, i + 1, 1, d); };
    auto part = [&](int64_t i, int64_t j) { return b.sub(b.mul(at(x, i), at(y, j)), b.mul(at(x, j), at(y, i))); };
    return {b.concatenate({part(1, 2), part(2, 0), part(0, 1)}, d)};
  }).accepts(realDTypes).complex();
  // linalg_matrix_exp(self [..., n, n]): scaling and squaring. Each matrix is divided by 2^s, s the least power that
  // brings its 1-norm to at most 1, its exponential taken by the degree-18 Taylor polynomial (Horner's rule; the
  // truncation is below 1e-16 relative), then squared s times: a loop to the batch's largest s in which each matrix
  // squares only while below its own. Half types compute in f32. Matrices that are not finite give what the polynomial gives them (NaN).
  // Backward: PyTorch differentiates through the exponential of a block matrix, this rule again.
  r.add("aten::linalg_matrix_exp", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    const Value a0 = ctx.tensor(0);
    if (a0.type.numel() == 0) return {a0};
    const DType t = accType(a0.dtype());  // half types compute in f32
    Value a = b.convert(a0, t);
    const Shape shape = a.shape();
    const int64_t r = a.rank();
    const Shape bs(shape.begin(), shape.end() - 2);
    std::vector<int64_t> batch = range(0, r - 2);
    auto mm = [&](Builder& lb, Value x, Value y) { return lb.dotGeneral(x, y, batch, batch, {r - 1}, {r - 2}); };
    Value norm = b.reduce(b.reduce(b.abs(a), {r - 2}, ReduceKind::Sum), {r - 2}, ReduceKind::Max);  // [...]
    Value sf = b.ceil(b.div(b.log(norm), cst(b, std::log(2.0), norm)));
    sf = b.select(b.isFinite(sf), b.clamp(cst(b, 0, sf), sf, cst(b, 64, sf)), b.zerosLike(sf));
    Value scale = b.convert(b.pow(cst(b, 2.0, sf), b.neg(sf)), t);
    Value x = b.mul(a, b.broadcastInDim(scale, shape, batch));
    Value eye = linalg::identity(b, shape, t);
    Value e = eye;
    for (int k = 18; k >= 1; --k) e = b.add(eye, b.div(mm(b, x, e), b.constantF(k, t, shape)));
    Value times = b.convert(sf, DType::S64);
    Value most = bs.empty() ? times : b.reduce(times, batch, ReduceKind::Max);
    auto out = b.whileLoop(
        {b.constantInt(0, DType::S64), e, times, most},
        [&](Builder& lb, const std::vector<Value>& v) { return lb.compare(v[0], v[3], Cmp::LT); },
        [&](Builder& lb, const std::vector<Value>& v) -> std::vector<Value> {
          Value more = lb.compare(lb.broadcastTo(v[0], bs), v[2], Cmp::LT);
          Value sq = lb.select(lb.broadcastInDim(more, shape, batch), mm(lb, v[1], v[1]), v[1]);
          return {lb.add(v[0], lb.constantInt(1, DType::S64)), sq, v[2], v[3]};
        });
    return {b.convert(out[1], a0.dtype())};
  }).accepts([](const Context& ctx) {
    const DType t = ctx.tensor(0).dtype();
    const Value a = ctx.tensor(0);
    return (shlo::isFloat(t) || t == DType::C64 || t == DType::C128) && a.rank() >= 2 &&
           a.shape()[a.rank() - 1] == a.shape()[a.rank() - 2];
  }).complex();
}

}  // namespace torch_tpu::lowering
