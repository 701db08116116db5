// Linear-algebra family: mm, bmm, addmm, baddbmm, addbmm, mv, addmv, dot, _addmm_activation.
//
// matmul/linear are CompositeImplicit in PyTorch and reach these through views. bf16/f16 products accumulate in f32
// (dot_general with an f32 result) and the whole epilogue (beta*self + alpha*product) runs in f32 before one
// rounding, as PyTorch CPU's gemm does.
#include <cmath>

#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

using shlo::Cmp;

// Contracts lhs dim lc with rhs dim rc, batching over the leading `nbatch` dims; result in accType(lhs dtype).
Value product(Builder& b, Value lhs, Value rhs, int64_t nbatch, int64_t lc, int64_t rc, DType acc) {
  std::vector<int64_t> batch;
  for (int64_t k = 0; k < nbatch; ++k) batch.push_back(k);
  if (rhs.dtype() != lhs.dtype()) rhs = b.convert(rhs, lhs.dtype());
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

std::vector<Value> mmLike(Context& ctx, size_t lhs_i, size_t rhs_i, int64_t nbatch, int64_t lc, int64_t rc,
                          int self_i = -1, size_t beta_i = 0, size_t alpha_i = 0) {
  Builder& b = ctx.b;
  Value lhs = ctx.tensor(lhs_i), rhs = ctx.tensor(rhs_i);
  DType out = lhs.dtype();
  DType acc = accType(out);
  Value p = product(b, lhs, rhs, nbatch, lc, rc, acc);
  if (self_i >= 0) p = epilogue(ctx, p, size_t(self_i), beta_i, alpha_i);
  return {b.convert(p, out)};
}

}  // namespace

void populateLinalg(Registry& r) {
  addReal(r, "aten::mm", [](Context& ctx) { return mmLike(ctx, 0, 1, 0, 1, 0); });
  addReal(r, "aten::bmm", [](Context& ctx) { return mmLike(ctx, 0, 1, 1, 2, 1); });
  addReal(r, "aten::mv", [](Context& ctx) { return mmLike(ctx, 0, 1, 0, 1, 0); });
  addReal(r, "aten::dot", [](Context& ctx) { return mmLike(ctx, 0, 1, 0, 0, 0); });
  addReal(r, "aten::vdot", [](Context& ctx) { return mmLike(ctx, 0, 1, 0, 0, 0); });
  // addmm(self, mat1, mat2, *, beta=1, alpha=1)
  addReal(r, "aten::addmm", [](Context& ctx) { return mmLike(ctx, 1, 2, 0, 1, 0, 0, 3, 4); });
  addReal(r, "aten::baddbmm", [](Context& ctx) { return mmLike(ctx, 1, 2, 1, 2, 1, 0, 3, 4); });
  addReal(r, "aten::addmv", [](Context& ctx) { return mmLike(ctx, 1, 2, 0, 1, 0, 0, 3, 4); });
  // addbmm(self, batch1, batch2, beta, alpha): sum over the batch of batch1[i] @ batch2[i]
  addReal(r, "aten::addbmm", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value lhs = ctx.tensor(1), rhs = ctx.tensor(2);
    DType out = lhs.dtype();
    DType acc = accType(out);
    Value l = lhs, rr = rhs;
    if (l.dtype() == DType::Pred) {
      l = b.convert(l, DType::S64);
      rr = b.convert(rr, DType::S64);
      acc = DType::S64;
    }
    Value p = b.dotGeneral(l, b.convert(rr, l.dtype()), {}, {}, {0, 2}, {0, 1}, acc);
    return {b.convert(epilogue(ctx, p, 0, 3, 4), out)};
  });
  // _addmm_activation(self, mat1, mat2, *, beta=1, alpha=1, bool use_gelu=False)
  addReal(r, "aten::_addmm_activation", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value lhs = ctx.tensor(1), rhs = ctx.tensor(2);
    DType out = lhs.dtype();
    Value p = epilogue(ctx, product(b, lhs, rhs, 0, 1, 0, accType(out)), 0, 3, 4);
    bool gelu = ctx.has(5) && ctx.toBool(5);
    if (gelu) {  // tanh approximation, as PyTorch's fused kernel
      const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715;
      Value cube = b.mul(b.mul(p, p), p);
      Value inner = b.mul(cst(b, kBeta, p), b.add(p, b.mul(cst(b, kKappa, p), cube)));
      p = b.mul(b.mul(cst(b, 0.5, p), p), b.add(cst(b, 1, p), b.tanh(inner)));
    } else if (shlo::isSigned(p.dtype())) {
      p = b.select(b.compare(p, b.zerosLike(p), Cmp::LT), b.zerosLike(p), p);
    }
    return {b.convert(p, out)};
  });
}

}  // namespace torch_tpu::lowering
