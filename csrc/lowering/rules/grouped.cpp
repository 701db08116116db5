// Grouped matrix multiplication (mixture-of-experts layers): aten::_grouped_mm, which
// torch.nn.functional.grouped_mm calls, and its backward (autograd calls _grouped_mm again).
//
//   _grouped_mm(mat_a, mat_b, offs=None, bias=None, out_dtype=None)
//     2-D x 3-D  a [L, K], b [G, K, N], offs [G]  -> [L, N]     rows of group g: offs[g-1] <= r < offs[g]
//     2-D x 2-D  a [P, L], b [L, Q], offs [G]     -> [G, P, Q]  the contraction is split into groups (weight grads)
//     3-D x 2-D  a [G, M, K], b [K, L], offs [G]  -> [M, L]     columns of group g use a[g]
//     3-D x 3-D  a [G, M, K], b [G, K, N]         -> [G, M, N]  a batched matmul
// offs are the groups' cumulative ends (int32, nondecreasing). Rows (columns) from offs[G-1] on belong to no
// group: they are zero in the result (PyTorch leaves them uninitialized), as is the product of an empty group.
//
// Two forms, chosen by the plugin (lowering/target.h):
// - chlo.ragged_dot where the compiler has it natively (TPU, GPU): one instruction per product.
// - Elsewhere (the CPU plugin) static shapes, no host synchronization and no data-dependent shapes. Each group's
//   rows are cut into windows of T rows starting at its first row, T a power of two of at least twice the average
//   group (L / G), or smaller (down to 2) where that lets the batch below cover the first windows. The first window
//   of every group is one batched product ([G, T, K] rows gathered at the groups' starts times the [G, K, N]
//   experts: each expert's matrix read once); the rows each group has beyond its first window (rare when groups are
//   near their average) go through a stablehlo.while whose trip count is their number of windows (data; the shapes
//   are not): each iteration slices its rows and its group's matrix in place, multiplies them and keeps the rows of
//   the group. The batch computes G T rows (at most about 4 L) and the loop at most L / T + G windows: the cost
//   stays within a small multiple of the L K N useful multiply-adds, never G times, with no copy of the expert
//   weights. With many more groups than rows (G T > 4 L: few tokens, many experts) the batch would be mostly waste,
//   and every window goes through the loop.
#include <algorithm>

#include "lowering/families.h"
#include "lowering/helpers.h"
#include "lowering/target.h"

namespace torch_tpu::lowering {

namespace {

bool groupedAccepts(const Context& ctx) {
  if (!ctx.has(0) || !ctx.has(1)) return false;
  const Arg& a = ctx.arg(0);
  const Arg& b = ctx.arg(1);
  if (a.kind != Arg::Kind::Tensor || b.kind != Arg::Kind::Tensor) return false;
  if (!halfOrFloat(a.tensor.dtype()) || a.tensor.dtype() != b.tensor.dtype()) return false;
  if (ctx.has(2) && !shlo::isInteger(ctx.arg(2).tensor.dtype())) return false;
  return !ctx.has(3);  // bias: PyTorch rejects it too ("not supported yet")
}

// Whether the first window of every group is computed as one batched product ([G, T] rows, empty groups included)
// before the loop: when that stays within 4 L rows, i.e. unless there are many more groups than rows.
bool batchedFirst(int64_t L, int64_t G, int64_t T) { return G * T <= 4 * L; }

// The window height for a ragged dimension of length L cut among G groups: a power of two in [8, 256] at least
// twice a group's average share L / G, so that most groups fit one window, never above L rounded up to 8. Where that
// window is too tall for the batched first window (G T > 4 L: about as many rows as groups, as in decoding, where
// tokens x top-k rows meet as many experts), the tallest smaller power of two (down to 2) that allows it: with
// L = G = 128, T = 4 puts almost every row in the batch instead of looping over about a hundred windows of 8.
int64_t windowFor(int64_t L, int64_t G) {
  int64_t g = std::max<int64_t>(G, 1);
  int64_t share = 2 * ((L + g - 1) / g);
  int64_t t = 8;
  while (t < share && t < 256) t *= 2;
  t = std::max<int64_t>(1, std::min(t, (L + 7) / 8 * 8));
  if (!batchedFirst(L, G, t))
    for (int64_t s = t / 2; s >= 2; s /= 2)
      if (batchedFirst(L, G, s)) return s;
  return t;
}

// The groups' row ranges [starts[g], ends[g]) within [0, L], as s32 [G] values (ends clamped to L; a group whose
// end precedes its start is empty).
struct Ranges {
  Value starts, ends;
};

Ranges rangesOf(Builder& b, Value offs, int64_t L) {
  int64_t G = offs.shape()[0];
  Value o = b.convert(offs, DType::S32);
  Value ends = b.clamp(b.constantInt(0, DType::S32), o, b.constantInt(L, DType::S32));
  Value starts = b.concatenate({b.zeros({DType::S32, {1}}), b.sliceInDim(ends, 0, G - 1, 1, 0)}, 0);
  starts = b.min(starts, ends);  // an offset below its predecessor: an empty group
  return {starts, ends};
}

// Inclusive prefix sum of an s32 [G] vector (a [G, G] triangular masked sum: G is the number of experts).
Value prefixSum(Builder& b, Value v) {
  int64_t G = v.shape()[0];
  Value row = b.iota({DType::S32, {G, G}}, 0), col = b.iota({DType::S32, {G, G}}, 1);
  Value vb = b.broadcastInDim(v, {G, G}, {1});
  Value masked = b.select(b.compare(col, row, Cmp::LE), vb, b.zeros({DType::S32, {G, G}}));
  return b.reduce(masked, {1}, ReduceKind::Sum);
}

// The work items of a ragged dimension: group g's rows cut into windows of T rows starting at its first row, so a
// group of n rows has ceil(n / T) windows. The first `skip` windows of every group are left out (the batched first
// window below computes them), which leaves at most ceil(L / T) + G items (P, a static bound). Item p belongs to
// group g = #{h : cum[h] <= p} (cum: inclusive prefix of the item counts) and covers rows [row0, min(row0 + T, end))
// with row0 = start[g] + (skip + p - excl[g]) T. All of it is computed once, outside the loop, as a table of P rows
// (row0, end, g); items past the total are never visited.
struct Items {
  Value table;  // s32 [P, 3]
  Value total;  // s32 0-d
};

Items itemsOf(Builder& b, const Ranges& r, int64_t L, int64_t T, int64_t skip) {
  int64_t G = r.starts.shape()[0];
  int64_t P = (L + T - 1) / T + G;
  auto splat = [&](int64_t v, int64_t n) { return b.constantF(double(v), DType::S32, {n}); };
  Value len = b.max(b.sub(r.ends, r.starts), splat(0, G));
  Value n = b.max(b.sub(b.div(b.add(len, splat(T - 1, G)), splat(T, G)), splat(skip, G)), splat(0, G));
  Value cum = prefixSum(b, n);
  Value excl = b.sub(cum, n);
  Value p = b.iota({DType::S32, {P}}, 0);
  Value le = b.compare(b.broadcastInDim(cum, {P, G}, {1}), b.iota({DType::S32, {P, G}}, 0), Cmp::LE);
  Value g = b.min(b.reduce(b.convert(le, DType::S32), {1}, ReduceKind::Sum), splat(G - 1, P));
  // Per item, its group's (excl, start, end), gathered from a [G, 3] table.
  auto col = [&](Value v) { return b.reshape(v, {G, 1}); };
  Value at = takeRows(b, b.concatenate({col(excl), col(r.starts), col(r.ends)}, 1), g);
  auto field = [&](int64_t k) { return b.reshape(b.sliceInDim(at, k, k + 1, 1, 1), {P}); };
  Value row0 = b.add(field(1), b.mul(b.add(b.sub(p, field(0)), splat(skip, P)), splat(T, P)));
  auto item = [&](Value v) { return b.reshape(v, {P, 1}); };
  Value table = b.concatenate({item(row0), item(field(2)), item(g)}, 1);
  Value total = b.reshape(b.sliceInDim(cum, G - 1, G, 1, 0), {});
  return {table, total};
}

// The rows of every group's first window, [G, T, D] from v [L + T, D] (rows past a group's end are the next
// group's or padding: their products are never used).
Value firstWindows(Builder& b, Value v, const Ranges& r, int64_t T) {
  int64_t G = r.starts.shape()[0], D = v.shape()[1];
  Value idx = b.add(b.broadcastInDim(r.starts, {G, T}, {0}), b.iota({DType::S32, {G, T}}, 1));
  return b.reshape(takeRows(b, v, b.reshape(idx, {G * T})), {G, T, D});
}

// Inside a loop body: item p's first row, its group's end row and its group, as 0-d s32 values.
struct Item {
  Value row0, end, g;
};

Item itemAt(Builder& b, Value table, Value p) {
  Value v = b.reshape(b.dynamicSlice(table, {p, b.constantInt(0, DType::S32)}, {1, 3}), {3});
  auto at = [&](int64_t k) { return b.reshape(b.sliceInDim(v, k, k + 1, 1, 0), {}); };
  return {at(0), at(1), at(2)};
}

// [T] pred: which of the T rows starting at `row0` lie before `end` (none lies before its group's start).
Value rowMask(Builder& b, Value row0, Value end, int64_t T) {
  Value rows = b.add(b.iota({DType::S32, {T}}, 0), b.broadcastInDim(row0, {T}, {}));
  return b.compare(rows, b.broadcastInDim(end, {T}, {}), Cmp::LT);
}

Value zero32(Builder& b) { return b.constantInt(0, DType::S32); }

// Pads dimension 0 of v to `rows` with zeros.
Value padRows(Builder& b, Value v, int64_t rows) {
  int64_t extra = rows - v.shape()[0];
  if (extra == 0) return v;
  std::vector<int64_t> lo(size_t(v.rank()), 0), hi(size_t(v.rank()), 0), in(size_t(v.rank()), 0);
  hi[0] = extra;
  return b.pad(v, b.constant(0, v.dtype()), lo, hi, in);
}

// ---- 2-D x 3-D: x [L, K], w [G, K, N] -> [L, N] in dtype `out` ----

Value raggedRowsLoop(Builder& b, Value x, Value w, Value offs, DType out) {
  int64_t L = x.shape()[0], K = x.shape()[1], G = w.shape()[0], N = w.shape()[2];
  if (L == 0 || N == 0) return b.zeros({out, {L, N}});
  if (G == 0 || K == 0) return b.zeros({out, {L, N}});
  int64_t T = windowFor(L, G);
  bool batched = batchedFirst(L, G, T);
  DType acc = accType(x.dtype());
  Ranges ranges = rangesOf(b, offs, L);
  Items items = itemsOf(b, ranges, L, T, batched ? 1 : 0);
  // A window may start at any row below L: T rows of padding keep every slice in bounds.
  Value xp = padRows(b, x, L + T);
  // The experts' matrices enter the loop in the layout they come in, so that the loop carries no transposed copy:
  // a weight stored [G, N, K] (nn.Linear's layout, which Transformers passes transposed: w is a transpose) as
  // [G, N, K], each iteration reading one contiguous [N, K] block; otherwise (a packed [G, K, N] weight) as it is.
  const bool nk = b.isTranspose(w);
  Value wl = nk ? b.transpose(w, {0, 2, 1}) : w;
  // The loop: the windows not computed in the batch (all of them without it), each written over the rows of its
  // group; rows in no group stay zero.
  Value acc0 = b.zeros({out, {L + T, N}});
  std::vector<Value> init = {zero32(b), acc0, xp, wl, items.table, items.total};
  std::vector<Value> res = b.whileLoop(
      init,
      [](Builder& bb, const std::vector<Value>& a) { return bb.compare(a[0], a[5], Cmp::LT); },
      [&](Builder& bb, const std::vector<Value>& a) {
        Value p = a[0], o = a[1], xs_all = a[2], ws_all = a[3], table = a[4];
        Item it = itemAt(bb, table, p);
        Value xs = bb.dynamicSlice(xs_all, {it.row0, zero32(bb)}, {T, K});
        Shape block = nk ? Shape{N, K} : Shape{K, N};
        Value ws = bb.reshape(bb.dynamicSlice(ws_all, {it.g, zero32(bb), zero32(bb)}, {1, block[0], block[1]}), block);
        Value y = bb.convert(bb.dotGeneral(xs, ws, {}, {}, {1}, {nk ? int64_t(1) : int64_t(0)}, acc), out);  // [T, N]
        Value m = bb.broadcastInDim(rowMask(bb, it.row0, it.end, T), {T, N}, {0});
        Value cur = bb.dynamicSlice(o, {it.row0, zero32(bb)}, {T, N});
        o = bb.dynamicUpdateSlice(o, bb.select(m, y, cur), {it.row0, zero32(bb)});
        return std::vector<Value>{bb.add(p, bb.constantInt(1, DType::S32)), o, xs_all, ws_all, table, a[5]};
      });
  Value looped = b.sliceInDim(res[1], 0, L, 1, 0);
  if (!batched) return looped;
  // Every group's first window in one batched product [G, T, K] x [G, K, N] -> [G, T, N], then each row r of a
  // group g with r - start[g] < T reads its row there (g: the last group whose range holds r, as the loop's
  // overwrites in group order would give for overlapping ranges).
  Value y = b.convert(b.dotGeneral(firstWindows(b, xp, ranges, T), w, {0}, {0}, {2}, {1}, acc), out);
  Value r = b.iota({DType::S32, {L, G}}, 0), gi = b.iota({DType::S32, {L, G}}, 1);
  Value in = b.andOp(b.compare(r, b.broadcastInDim(ranges.starts, {L, G}, {1}), Cmp::GE),
                     b.compare(r, b.broadcastInDim(ranges.ends, {L, G}, {1}), Cmp::LT));
  Value g = b.reduce(b.select(in, gi, b.constantF(-1, DType::S32, {L, G})), {1}, ReduceKind::Max);  // [L]
  Value gc = b.max(g, b.zeros({DType::S32, {L}}));  // rows in no group: any valid index (not used)
  Value start = takeRows(b, ranges.starts, gc);
  Value i = b.sub(b.iota({DType::S32, {L}}, 0), start);
  auto splat = [&](int64_t v) { return b.constantF(double(v), DType::S32, {L}); };
  Value from_batch = b.andOp(b.compare(g, splat(0), Cmp::GE), b.compare(i, splat(T), Cmp::LT));
  Value flat = b.add(b.mul(gc, splat(T)), b.min(i, splat(T - 1)));
  Value picked = takeRows(b, b.reshape(y, {G * T, N}), flat);
  return b.select(b.broadcastInDim(from_batch, {L, N}, {0}), picked, looped);
}

// ---- 2-D x 2-D: a [P, L], c [L, Q] -> [G, P, Q]: out[g] = a[:, rows of g] @ c[rows of g, :] ----

Value raggedContractLoop(Builder& b, Value a, Value c, Value offs, DType out) {
  int64_t P = a.shape()[0], L = a.shape()[1], Q = c.shape()[1], G = offs.shape()[0];
  DType acc = accType(a.dtype());
  if (G == 0 || P == 0 || Q == 0 || L == 0) return b.zeros({out, {G, P, Q}});
  int64_t T = windowFor(L, G);
  bool batched = batchedFirst(L, G, T);
  Ranges ranges = rangesOf(b, offs, L);
  Items items = itemsOf(b, ranges, L, T, batched ? 1 : 0);
  // Both operands sliced by rows of the ragged dimension: a as [L, P] (its transpose, which autograd passes).
  Value at = padRows(b, b.transpose(a, {1, 0}), L + T);
  Value cp = padRows(b, c, L + T);
  Value acc0 = b.zeros({acc, {G, P, Q}});
  if (batched) {
    // Every group's first window in one batched product: [G, T, P] x [G, T, Q] over T, rows past the group's end
    // masked out of c.
    Value len = b.sub(ranges.ends, ranges.starts);
    Value keep = b.compare(b.iota({DType::S32, {G, T, Q}}, 1), b.broadcastInDim(len, {G, T, Q}, {0}), Cmp::LT);
    Value cw = firstWindows(b, cp, ranges, T);
    cw = b.select(keep, cw, b.zerosLike(cw));
    acc0 = b.dotGeneral(firstWindows(b, at, ranges, T), cw, {0}, {0}, {1}, {1}, acc);
  }
  std::vector<Value> init = {zero32(b), acc0, at, cp, items.table, items.total};
  std::vector<Value> res = b.whileLoop(
      init,
      [](Builder& bb, const std::vector<Value>& v) { return bb.compare(v[0], v[5], Cmp::LT); },
      [&](Builder& bb, const std::vector<Value>& v) {
        Value p = v[0], o = v[1], a_all = v[2], c_all = v[3], table = v[4];
        Item it = itemAt(bb, table, p);
        Value as = bb.dynamicSlice(a_all, {it.row0, zero32(bb)}, {T, P});
        Value cs = bb.dynamicSlice(c_all, {it.row0, zero32(bb)}, {T, Q});
        Value m = bb.broadcastInDim(rowMask(bb, it.row0, it.end, T), {T, Q}, {0});
        cs = bb.select(m, cs, bb.zerosLike(cs));
        Value y = bb.reshape(bb.dotGeneral(as, cs, {}, {}, {0}, {0}, acc), {1, P, Q});
        Value cur = bb.dynamicSlice(o, {it.g, zero32(bb), zero32(bb)}, {1, P, Q});
        o = bb.dynamicUpdateSlice(o, bb.add(cur, y), {it.g, zero32(bb), zero32(bb)});
        return std::vector<Value>{bb.add(p, bb.constantInt(1, DType::S32)), o, a_all, c_all, table, v[5]};
      });
  return b.convert(res[1], out);
}

// ---- chlo.ragged_dot (TPU, GPU) ----

std::string raggedDims(const Builder& b, DType operand, const std::vector<int64_t>& lc, const std::vector<int64_t>& rc,
                       const std::vector<int64_t>& lr, const std::vector<int64_t>& rg) {
  auto list = [](const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  std::string s = "ragged_dot_dimension_numbers = #chlo.ragged_dot<lhs_batching_dimensions = [], "
                  "rhs_batching_dimensions = [], lhs_contracting_dimensions = " + list(lc) +
                  ", rhs_contracting_dimensions = " + list(rc) + ", lhs_ragged_dimensions = " + list(lr) +
                  ", rhs_group_dimensions = " + list(rg) + ">";
  return b.precisionConfig(operand, "chlo") + ", " + s;
}

Value groupSizes(Builder& b, const Ranges& r) { return b.sub(r.ends, r.starts); }

Value raggedRowsNative(Builder& b, Value x, Value w, Value offs, DType out) {
  int64_t L = x.shape()[0], N = w.shape()[2];
  if (L == 0 || N == 0 || w.shape()[0] == 0) return b.zeros({out, {L, N}});
  Ranges r = rangesOf(b, offs, L);
  DType acc = accType(x.dtype());
  Value y = b.genericOp("chlo.ragged_dot", {x, w, groupSizes(b, r)}, raggedDims(b, x.dtype(), {1}, {1}, {0}, {0}),
                        {TensorType{acc, {L, N}}})[0];
  // Rows past the last group: zero (as the CPU form gives).
  int64_t G = offs.shape()[0];
  Value last = b.reshape(b.sliceInDim(r.ends, G - 1, G, 1, 0), {});
  Value keep = b.compare(b.iota({DType::S32, {L, N}}, 0), b.broadcastInDim(last, {L, N}, {}), Cmp::LT);
  return b.convert(b.select(keep, y, b.zerosLike(y)), out);
}

Value raggedContractNative(Builder& b, Value a, Value c, Value offs, DType out) {
  int64_t P = a.shape()[0], L = a.shape()[1], Q = c.shape()[1], G = offs.shape()[0];
  if (G == 0 || P == 0 || Q == 0 || L == 0) return b.zeros({out, {G, P, Q}});
  DType acc = accType(a.dtype());
  Value y = b.genericOp("chlo.ragged_dot", {a, c, groupSizes(b, rangesOf(b, offs, L))},
                        raggedDims(b, a.dtype(), {1}, {0}, {1}, {}), {TensorType{acc, {G, P, Q}}})[0];
  return b.convert(y, out);
}

Value raggedRows(Builder& b, Value x, Value w, Value offs, DType out) {
  return target().ragged_dot ? raggedRowsNative(b, x, w, offs, out) : raggedRowsLoop(b, x, w, offs, out);
}

Value raggedContract(Builder& b, Value a, Value c, Value offs, DType out) {
  return target().ragged_dot ? raggedContractNative(b, a, c, offs, out) : raggedContractLoop(b, a, c, offs, out);
}

std::vector<Value> groupedMM(Context& ctx) {
  Builder& b = ctx.b;
  Value a = ctx.tensor(0), m = ctx.tensor(1);
  DType out = ctx.outputs[0].dtype == DType::Invalid ? a.dtype() : ctx.outputs[0].dtype;
  bool has_offs = ctx.has(2);
  if (a.rank() == 3 && m.rank() == 3) {
    if (has_offs) ctx.fail("offsets are not needed for 3D/3D multiplicand layouts");
    return {b.convert(b.dotGeneral(a, m, {0}, {0}, {2}, {1}, accType(a.dtype())), out)};
  }
  if (!has_offs) ctx.fail("offsets are needed for " + std::to_string(a.rank()) + "D/" + std::to_string(m.rank()) +
                          "D multiplicand layouts");
  Value offs = ctx.tensor(2);
  if (offs.rank() != 1) ctx.fail("offsets must be 1-D, got " + offs.type.str());
  if (a.rank() == 2 && m.rank() == 3) {
    if (m.shape()[0] != offs.shape()[0] || a.shape()[1] != m.shape()[1])
      ctx.fail("operands " + a.type.str() + " x " + m.type.str() + " do not match offsets " + offs.type.str());
    return {raggedRows(b, a, m, offs, out)};
  }
  if (a.rank() == 2 && m.rank() == 2) {
    if (a.shape()[1] != m.shape()[0]) ctx.fail("operands " + a.type.str() + " x " + m.type.str() + " do not match");
    return {raggedContract(b, a, m, offs, out)};
  }
  if (a.rank() == 3 && m.rank() == 2) {
    // out[:, cols of g] = a[g] @ m[:, cols of g]; transposed: out^T = m^T @ a^T per group, the 2-D x 3-D form.
    if (a.shape()[0] != offs.shape()[0] || a.shape()[2] != m.shape()[0])
      ctx.fail("operands " + a.type.str() + " x " + m.type.str() + " do not match offsets " + offs.type.str());
    Value y = raggedRows(b, b.transpose(m, {1, 0}), b.transpose(a, {0, 2, 1}), offs, out);
    return {b.transpose(y, {1, 0})};
  }
  ctx.fail("multiplicands must be 2-D or 3-D, got " + a.type.str() + " and " + m.type.str());
}

// tpu::moe_experts(hidden [T, H], top_k_index [T, k], top_k_weights [T, k], gate_up_proj [E, 2I, H],
// down_proj [E, H, I]) -> [T, H]: the token-expert pairs sorted by expert, the grouped up projection, SwiGLU, the
// grouped down projection, the routing weights, and the sum over each token's k experts, in one program.
std::vector<Value> moeExperts(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0), idx = ctx.tensor(1), wts = ctx.tensor(2), gu = ctx.tensor(3), dn = ctx.tensor(4);
  int64_t T = x.shape()[0], H = x.shape()[1], k = idx.shape()[1], E = gu.shape()[0], I = dn.shape()[2];
  int64_t S = T * k;
  DType t = x.dtype(), acc = accType(t);
  if (S == 0 || E == 0) return {b.zeros(x.type)};
  // Sort the pairs by expert (stable: a token's pairs keep their order); ids past E sort last, in no group.
  Value ids = b.convert(b.reshape(idx, {S}), DType::S32);
  Value outside = b.orOp(b.compare(ids, b.zeros({DType::S32, {S}}), Cmp::LT),
                         b.compare(ids, b.constantF(double(E), DType::S32, {S}), Cmp::GT));
  ids = b.select(outside, b.constantF(double(E), DType::S32, {S}), ids);
  std::vector<Value> sorted = b.sort({ids, b.iota({DType::S32, {S}}, 0)}, 0, false, true);
  Value ids_g = sorted[0], perm = sorted[1];
  Value tok = b.div(perm, b.constantF(double(k), DType::S32, {S}));
  Value xg = takeRows(b, x, tok);
  // Group ends: the number of pairs with an expert id <= e.
  Value ev = b.iota({DType::S32, {S, E}}, 1);
  Value le = b.convert(b.compare(b.broadcastInDim(ids_g, {S, E}, {0}), ev, Cmp::LE), DType::S32);
  Value offs = b.reduce(le, {0}, ReduceKind::Sum);
  Value h = raggedRows(b, xg, b.transpose(gu, {0, 2, 1}), offs, acc);  // [S, 2I]
  Value g = b.sliceInDim(h, 0, I, 1, 1), u = b.sliceInDim(h, I, 2 * I, 1, 1);
  Value a = b.convert(b.mul(b.mul(g, b.logistic(g)), u), t);
  Value y = raggedRows(b, a, b.transpose(dn, {0, 2, 1}), offs, acc);  // [S, H]
  // Routing weights in sorted order; pairs outside every group (ids past E) are zero already.
  Value wg = takeRows(b, b.convert(b.reshape(wts, {S}), acc), perm);
  y = b.mul(y, b.broadcastInDim(wg, {S, H}, {0}));
  // Back to pair order (pair perm[i] is row i), then each token's k rows summed in the accumulation type.
  Builder::ScatterDims sd;
  sd.update_window_dims = {1};
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  Value back = b.scatter(b.zeros({acc, {S, H}}), b.reshape(perm, {S, 1}), y, sd, std::nullopt, false, true);
  Value sum = b.reduce(b.reshape(back, {T, k, H}), {1}, ReduceKind::Sum);
  return {b.convert(sum, t)};
}

bool moeAccepts(const Context& ctx) {
  for (size_t i : {0, 2, 3, 4})
    if (!halfOrFloat(ctx.tensor(i).dtype())) return false;
  DType ti = ctx.tensor(1).dtype();
  return shlo::isInteger(ti) && ctx.tensor(0).rank() == 2 && ctx.tensor(1).rank() == 2;
}

}  // namespace

void populateGrouped(Registry& r) {
  r.add("aten::_grouped_mm", groupedMM).accepts(groupedAccepts).packedOperand(1);
  r.add("tpu::moe_experts", moeExperts).accepts(moeAccepts);
}

}  // namespace torch_tpu::lowering
