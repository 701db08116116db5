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
// - Elsewhere (the CPU plugin) a tiled loop with static shapes, no host synchronization and no data-dependent
//   shapes. The ragged dimension is cut into tiles of T rows; a work item is a (tile, group) pair whose rows
//   overlap, and there are at most ceil(L / T) + G - 1 of them (each group boundary splits at most one tile). The
//   items are enumerated from offs inside the program, and a stablehlo.while runs exactly as many iterations as
//   there are items (the trip count is data, the shapes are not): each iteration slices its tile and its group's
//   matrix in place, multiplies them and keeps the rows of the group. The cost is (L + (G - 1) T) K N
//   multiply-adds for L K N useful ones, with T chosen near L / G (at least 8): at most about twice the useful
//   work, never G times, and no copy of the expert weights.
#include <algorithm>

#include "lowering/families.h"
#include "lowering/helpers.h"
#include "lowering/target.h"

namespace torch_tpu::lowering {

namespace {

bool halfOrFloat(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

bool groupedAccepts(const Context& ctx) {
  if (!ctx.has(0) || !ctx.has(1)) return false;
  const Arg& a = ctx.arg(0);
  const Arg& b = ctx.arg(1);
  if (a.kind != Arg::Kind::Tensor || b.kind != Arg::Kind::Tensor) return false;
  if (!halfOrFloat(a.tensor.dtype()) || a.tensor.dtype() != b.tensor.dtype()) return false;
  if (ctx.has(2) && !shlo::isInteger(ctx.arg(2).tensor.dtype())) return false;
  return !ctx.has(3);  // bias: PyTorch rejects it too ("not supported yet")
}

// The tile height for a ragged dimension of length L cut among G groups: about L / G (a group's average share),
// a power of two in [8, 256], never above L rounded up to 8.
int64_t tileFor(int64_t L, int64_t G) {
  int64_t share = (L + std::max<int64_t>(G, 1) - 1) / std::max<int64_t>(G, 1);
  int64_t t = 8;
  while (t < share && t < 256) t *= 2;
  return std::max<int64_t>(1, std::min(t, (L + 7) / 8 * 8));
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

// The work items of a ragged dimension cut into tiles of T: per group, the first tile it touches, the number of
// items before its own (exclusive prefix), and the total. Item p belongs to group g = #{h : cum[h] <= p} and
// covers tile first[g] + p - excl[g].
struct Items {
  Value table;  // s32 [5, G]: cum (inclusive prefix of item counts), excl, first tile, start row, end row
  Value total;  // s32 0-d
};

Items itemsOf(Builder& b, const Ranges& r, int64_t T) {
  int64_t G = r.starts.shape()[0];
  auto splat = [&](int64_t v) { return b.constantF(double(v), DType::S32, {G}); };
  Value nonempty = b.compare(r.ends, r.starts, Cmp::GT);
  Value first = b.div(r.starts, splat(T));
  Value last = b.div(b.max(b.sub(r.ends, splat(1)), splat(0)), splat(T));
  Value n = b.select(nonempty, b.add(b.sub(last, first), splat(1)), splat(0));
  Value cum = prefixSum(b, n);
  Value excl = b.sub(cum, n);
  auto row = [&](Value v) { return b.reshape(v, {1, G}); };
  Value table = b.concatenate({row(cum), row(excl), row(first), row(r.starts), row(r.ends)}, 0);
  Value total = b.reshape(b.sliceInDim(cum, G - 1, G, 1, 0), {});
  return {table, total};
}

// Inside a loop body: the group of item p and its table column (cum, excl, first, start, end) as 0-d s32 values.
struct Item {
  Value g, tile, start, end;
};

Item itemAt(Builder& b, Value table, Value p) {
  int64_t G = table.shape()[1];
  Value cum = b.reshape(b.sliceInDim(table, 0, 1, 1, 0), {G});
  Value le = b.convert(b.compare(cum, b.broadcastInDim(p, {G}, {}), Cmp::LE), DType::S32);
  Value g = b.min(b.reduce(le, {0}, ReduceKind::Sum), b.constantInt(G - 1, DType::S32));
  Value col = b.reshape(b.dynamicSlice(table, {b.constantInt(0, DType::S32), g}, {5, 1}), {5});
  auto at = [&](int64_t k) { return b.reshape(b.sliceInDim(col, k, k + 1, 1, 0), {}); };
  Value tile = b.add(at(2), b.sub(p, at(1)));
  return {g, tile, at(3), at(4)};
}

// [T] pred: which of the T rows starting at `row0` lie in [start, end).
Value rowMask(Builder& b, Value row0, Value start, Value end, int64_t T) {
  Value rows = b.add(b.iota({DType::S32, {T}}, 0), b.broadcastInDim(row0, {T}, {}));
  return b.andOp(b.compare(rows, b.broadcastInDim(start, {T}, {}), Cmp::GE),
                 b.compare(rows, b.broadcastInDim(end, {T}, {}), Cmp::LT));
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
  int64_t T = tileFor(L, G);
  int64_t NT = (L + T - 1) / T;
  DType acc = accType(x.dtype());
  Items items = itemsOf(b, rangesOf(b, offs, L), T);
  Value xp = padRows(b, x, NT * T);
  // The experts' matrices as [G, N, K]: a weight stored [G, N, K] (nn.Linear's layout, which Transformers passes
  // transposed) then enters the loop as it is stored (XLA folds the two transposes), and each iteration reads one
  // contiguous [N, K] block.
  Value wt = b.transpose(w, {0, 2, 1});
  Value acc0 = b.zeros({out, {NT * T, N}});
  std::vector<Value> init = {zero32(b), acc0, xp, wt, items.table, items.total};
  std::vector<Value> res = b.whileLoop(
      init,
      [](Builder& bb, const std::vector<Value>& a) { return bb.compare(a[0], a[5], Cmp::LT); },
      [&](Builder& bb, const std::vector<Value>& a) {
        Value p = a[0], o = a[1], xs_all = a[2], ws_all = a[3], table = a[4];
        Item it = itemAt(bb, table, p);
        Value row0 = bb.mul(it.tile, bb.constantInt(T, DType::S32));
        Value xs = bb.dynamicSlice(xs_all, {row0, zero32(bb)}, {T, K});
        Value ws = bb.reshape(bb.dynamicSlice(ws_all, {it.g, zero32(bb), zero32(bb)}, {1, N, K}), {N, K});
        Value y = bb.convert(bb.dotGeneral(xs, ws, {}, {}, {1}, {1}, acc), out);  // [T, N]
        Value m = bb.broadcastInDim(rowMask(bb, row0, it.start, it.end, T), {T, N}, {0});
        Value cur = bb.dynamicSlice(o, {row0, zero32(bb)}, {T, N});
        o = bb.dynamicUpdateSlice(o, bb.select(m, y, cur), {row0, zero32(bb)});
        return std::vector<Value>{bb.add(p, bb.constantInt(1, DType::S32)), o, xs_all, ws_all, table, a[5]};
      });
  return b.sliceInDim(res[1], 0, L, 1, 0);
}

// ---- 2-D x 2-D: a [P, L], c [L, Q] -> [G, P, Q]: out[g] = a[:, rows of g] @ c[rows of g, :] ----

Value raggedContractLoop(Builder& b, Value a, Value c, Value offs, DType out) {
  int64_t P = a.shape()[0], L = a.shape()[1], Q = c.shape()[1], G = offs.shape()[0];
  DType acc = accType(a.dtype());
  if (G == 0 || P == 0 || Q == 0 || L == 0) return b.zeros({out, {G, P, Q}});
  int64_t T = tileFor(L, G);
  int64_t NT = (L + T - 1) / T;
  Items items = itemsOf(b, rangesOf(b, offs, L), T);
  // Both operands sliced by rows of the ragged dimension: a as [L, P] (its transpose, which autograd passes).
  Value at = padRows(b, b.transpose(a, {1, 0}), NT * T);
  Value cp = padRows(b, c, NT * T);
  Value acc0 = b.zeros({acc, {G, P, Q}});
  std::vector<Value> init = {zero32(b), acc0, at, cp, items.table, items.total};
  std::vector<Value> res = b.whileLoop(
      init,
      [](Builder& bb, const std::vector<Value>& v) { return bb.compare(v[0], v[5], Cmp::LT); },
      [&](Builder& bb, const std::vector<Value>& v) {
        Value p = v[0], o = v[1], a_all = v[2], c_all = v[3], table = v[4];
        Item it = itemAt(bb, table, p);
        Value row0 = bb.mul(it.tile, bb.constantInt(T, DType::S32));
        Value as = bb.dynamicSlice(a_all, {row0, zero32(bb)}, {T, P});
        Value cs = bb.dynamicSlice(c_all, {row0, zero32(bb)}, {T, Q});
        Value m = bb.broadcastInDim(rowMask(bb, row0, it.start, it.end, T), {T, Q}, {0});
        cs = bb.select(m, cs, bb.zerosLike(cs));
        Value y = bb.reshape(bb.dotGeneral(as, cs, {}, {}, {0}, {0}, acc), {1, P, Q});
        Value cur = bb.dynamicSlice(o, {it.g, zero32(bb), zero32(bb)}, {1, P, Q});
        o = bb.dynamicUpdateSlice(o, bb.add(cur, y), {it.g, zero32(bb), zero32(bb)});
        return std::vector<Value>{bb.add(p, bb.constantInt(1, DType::S32)), o, a_all, c_all, table, v[5]};
      });
  return b.convert(res[1], out);
}

// ---- chlo.ragged_dot (TPU, GPU) ----

std::string raggedDims(const std::vector<int64_t>& lc, const std::vector<int64_t>& rc,
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
  return "precision_config = [#chlo<precision DEFAULT>, #chlo<precision DEFAULT>], " + s;
}

Value groupSizes(Builder& b, const Ranges& r) { return b.sub(r.ends, r.starts); }

Value raggedRowsNative(Builder& b, Value x, Value w, Value offs, DType out) {
  int64_t L = x.shape()[0], N = w.shape()[2];
  if (L == 0 || N == 0 || w.shape()[0] == 0) return b.zeros({out, {L, N}});
  Ranges r = rangesOf(b, offs, L);
  DType acc = accType(x.dtype());
  Value y = b.genericOp("chlo.ragged_dot", {x, w, groupSizes(b, r)}, raggedDims({1}, {1}, {0}, {0}),
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
                        raggedDims({1}, {0}, {1}, {}), {TensorType{acc, {G, P, Q}}})[0];
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
  Builder::GatherDims rows;
  rows.offset_dims = {1};
  rows.collapsed_slice_dims = {0};
  rows.start_index_map = {0};
  rows.index_vector_dim = 1;
  Value xg = b.gather(x, b.reshape(tok, {S, 1}), rows, {1, H}, {S, H});
  // Group ends: the number of pairs with an expert id <= e.
  Value ev = b.iota({DType::S32, {S, E}}, 1);
  Value le = b.convert(b.compare(b.broadcastInDim(ids_g, {S, E}, {0}), ev, Cmp::LE), DType::S32);
  Value offs = b.reduce(le, {0}, ReduceKind::Sum);
  Value h = raggedRows(b, xg, b.transpose(gu, {0, 2, 1}), offs, acc);  // [S, 2I]
  Value g = b.sliceInDim(h, 0, I, 1, 1), u = b.sliceInDim(h, I, 2 * I, 1, 1);
  Value a = b.convert(b.mul(b.mul(g, b.logistic(g)), u), t);
  Value y = raggedRows(b, a, b.transpose(dn, {0, 2, 1}), offs, acc);  // [S, H]
  // Routing weights in sorted order; pairs outside every group (ids past E) are zero already.
  Builder::GatherDims one;
  one.offset_dims = {};
  one.collapsed_slice_dims = {0};
  one.start_index_map = {0};
  one.index_vector_dim = 1;
  Value wg = b.gather(b.convert(b.reshape(wts, {S}), acc), b.reshape(perm, {S, 1}), one, {1}, {S});
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
  r.add("aten::_grouped_mm", groupedMM).accepts(groupedAccepts);
  r.add("tpu::moe_experts", moeExperts).accepts(moeAccepts);
}

}  // namespace torch_tpu::lowering
