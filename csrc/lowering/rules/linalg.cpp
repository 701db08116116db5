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


// ---- triangular solves and Cholesky (stablehlo.triangular_solve / stablehlo.cholesky) ----

// Solves op(a) x = rhs (left) or x op(a) = rhs (right); a [..., m, m], rhs with the same batch dims.
Value triSolve(Builder& b, Value a, Value rhs, bool left, bool lower, bool unit, bool transpose_a) {
  std::string text = "\"stablehlo.triangular_solve\"(" + b.ref(a) + ", " + b.ref(rhs) + ") {left_side = " +
                     (left ? "true" : "false") + ", lower = " + (lower ? "true" : "false") +
                     ", unit_diagonal = " + (unit ? "true" : "false") + ", transpose_a = #stablehlo<transpose " +
                     (transpose_a ? "TRANSPOSE" : "NO_TRANSPOSE") + ">}";
  return b.raw(text, "(" + a.type.str() + ", " + rhs.type.str() + ") -> " + rhs.type.str(), rhs.type);
}

Value lowerMask(Builder& b, const Shape& shape, bool lower) {
  int64_t r = int64_t(shape.size());
  Value row = b.iota({DType::S64, shape}, r - 2), col = b.iota({DType::S64, shape}, r - 1);
  return b.compare(col, row, lower ? Cmp::LE : Cmp::GE);
}

// Lower Cholesky factor (the other triangle zeroed).
Value choleskyLower(Builder& b, Value a) {
  std::string text = "\"stablehlo.cholesky\"(" + b.ref(a) + ") {lower = true}";
  Value l = b.raw(text, "(" + a.type.str() + ") -> " + a.type.str(), a.type);
  return b.select(lowerMask(b, a.shape(), true), l, b.zerosLike(l));
}

Value mT(Builder& b, Value x) {
  std::vector<int64_t> perm;
  for (int64_t k = 0; k < x.rank(); ++k) perm.push_back(k);
  std::swap(perm[x.rank() - 1], perm[x.rank() - 2]);
  return b.transpose(x, perm);
}

// Broadcasts the batch dims (all but the last two) of x and y to each other.
std::pair<Value, Value> broadcastBatch(Builder& b, Value x, Value y) {
  Shape bx(x.shape().begin(), x.shape().end() - 2), by(y.shape().begin(), y.shape().end() - 2);
  Shape bb = broadcastShapes({bx, by});
  Shape sx = bb, sy = bb;
  sx.insert(sx.end(), x.shape().end() - 2, x.shape().end());
  sy.insert(sy.end(), y.shape().end() - 2, y.shape().end());
  return {b.broadcastTo(x, sx), b.broadcastTo(y, sy)};
}

bool floatMatrices(const Context& ctx) {
  if (!realDTypes(ctx)) return false;
  for (const Arg& a : ctx.args)
    if (a.kind == Arg::Kind::Tensor && a.tensor.valid() && !shlo::isFloat(a.tensor.dtype())) return false;
  return true;
}

void addLinalg(Registry& r, const std::string& op, RuleFn fn) {
  Rule rule;
  rule.op = op;
  rule.fn = std::move(fn);
  rule.accepts = floatMatrices;
  r.add(std::move(rule));
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
  });
  // linalg_cholesky_ex(self, *, upper=False, check_errors=False) -> (L, info): info is 1 + the first row whose
  // factor is not finite (the input is not positive-definite there), else 0.
  addLinalg(r, "aten::linalg_cholesky_ex", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value a = ctx.tensor(0);
    DType t = a.dtype(), c = accType(t);
    Value l = choleskyLower(b, b.convert(a, c));
    int64_t n = a.shape().back(), r = a.rank();
    Value bad_row = b.reduce(b.notOp(b.isFinite(l)), {r - 1}, ReduceKind::Or);  // [..., n]
    Shape rs = bad_row.shape();
    Value pos = b.add(b.iota({DType::S32, rs}, r - 2), b.constantF(1, DType::S32, rs));
    Value big = b.constantF(double(n + 1), DType::S32, rs);
    Value first = b.reduce(b.select(bad_row, pos, big), {r - 2}, ReduceKind::Min);
    Value info = b.select(b.compare(first, b.constantF(double(n), DType::S32, first.shape()), Cmp::GT),
                          b.zerosLike(first), first);
    bool upper = ctx.has(1) && ctx.toBool(1);
    return {b.convert(upper ? mT(b, l) : l, t), info};
  });
  addLinalg(r, "aten::cholesky", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value a = ctx.tensor(0);
    Value l = choleskyLower(b, b.convert(a, accType(a.dtype())));
    return {b.convert(ctx.has(1) && ctx.toBool(1) ? mT(b, l) : l, a.dtype())};
  });
  // linalg_solve_triangular(self=A, B, *, upper, left=True, unitriangular=False)
  addLinalg(r, "aten::linalg_solve_triangular", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = promote(ctx.tensor(0).dtype(), ctx.tensor(1).dtype()), c = accType(t);
    auto [a, rhs] = broadcastBatch(b, b.convert(ctx.tensor(0), c), b.convert(ctx.tensor(1), c));
    bool upper = ctx.toBool(2), left = !ctx.has(3) || ctx.toBool(3), unit = ctx.has(4) && ctx.toBool(4);
    if (rhs.type.numel() == 0 || a.type.numel() == 0) return {b.zeros({t, ctx.outputs.at(0).shape})};
    return {b.convert(triSolve(b, a, rhs, left, !upper, unit, false), t)};
  });
  // triangular_solve(self=B, A, upper=True, transpose=False, unitriangular=False) -> (solution, cloned_coefficient)
  addLinalg(r, "aten::triangular_solve", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = ctx.tensor(0).dtype(), c = accType(t);
    auto [rhs, a] = broadcastBatch(b, b.convert(ctx.tensor(0), c), b.convert(ctx.tensor(1), c));
    bool upper = !ctx.has(2) || ctx.toBool(2), trans = ctx.has(3) && ctx.toBool(3), unit = ctx.has(4) && ctx.toBool(4);
    Value sol = rhs.type.numel() == 0 || a.type.numel() == 0 ? rhs : triSolve(b, a, rhs, true, !upper, unit, trans);
    return {b.convert(sol, t), b.convert(a, t)};
  });
  // _cholesky_solve_helper(self=B, A=factor, upper): solves (L L^T) X = B.
  addLinalg(r, "aten::_cholesky_solve_helper", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    DType t = ctx.tensor(0).dtype(), c = accType(t);
    auto [rhs, f] = broadcastBatch(b, b.convert(ctx.tensor(0), c), b.convert(ctx.tensor(1), c));
    bool upper = ctx.toBool(2);
    if (rhs.type.numel() == 0) return {b.convert(rhs, t)};
    Value l = upper ? mT(b, f) : f;
    Value y = triSolve(b, l, rhs, true, true, false, false);
    return {b.convert(triSolve(b, l, y, true, true, false, true), t)};
  });
  // cholesky_inverse(self=factor, upper=False): (L L^T)^-1.
  addLinalg(r, "aten::cholesky_inverse", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value f0 = ctx.tensor(0);
    DType t = f0.dtype(), c = accType(t);
    Value f = b.convert(f0, c);
    if (f.type.numel() == 0) return {f0};
    Value l = ctx.has(1) && ctx.toBool(1) ? mT(b, f) : f;
    Value eye = b.convert(lowerMask(b, f.shape(), true), c);
    eye = b.select(b.compare(b.iota({DType::S64, f.shape()}, f.rank() - 2), b.iota({DType::S64, f.shape()}, f.rank() - 1),
                             Cmp::EQ), b.onesLike(eye), b.zerosLike(eye));
    Value y = triSolve(b, l, eye, true, true, false, false);
    return {b.convert(triSolve(b, l, y, true, true, false, true), t)};
  });
  // addr(self, vec1, vec2, *, beta=1, alpha=1): beta*self + (alpha*vec1)*vec2 with PyTorch CPU's per-operation
  // rounding for half types; beta == 0 ignores self.
  addReal(r, "aten::addr", [](Context& ctx) -> std::vector<Value> {
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
    Value alpha = ctx.has(4) ? b.broadcastTo(scalarArg(ctx, 4, c), shape) : b.onesLike(a1);
    Value prod = R(b.mul(R(b.mul(alpha, a1)), a2));
    if (!ctx.has(3)) return {b.convert(b.add(sf, prod), t)};
    Value beta = scalarArg(ctx, 3, c);
    Value scaled = R(b.mul(b.broadcastTo(beta, shape), sf));
    Value res = b.convert(b.add(scaled, prod), t);
    return {b.select(b.compare(beta, b.constant(0, c), Cmp::EQ), b.convert(prod, t), res)};
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
