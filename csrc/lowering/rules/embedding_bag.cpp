// Embedding bags (nn.EmbeddingBag, F.embedding_bag): _embedding_bag and _embedding_bag_forward_only, and the
// kernels autograd calls for them: _embedding_bag_backward (dense), _embedding_bag_dense_backward and
// _embedding_bag_per_sample_weights_backward.
//
// Bag b holds indices[offsets[b] : offsets[b + 1]], and the last bag ends at the input's end (with include_last_offset
// too, where the last offset should be the input's length: as CUDA's kernel and CPU's general path read it, not
// CPU's float32 sum path, which stops at the last offset). An index's bag is found by PyTorch's binary search of the
// offsets, so empty bags (repeated offsets) cost nothing. Indices equal to padding_idx add nothing and are not
// counted; an empty bag's result is 0. Sums accumulate in f32 for half types and round once.
//
// The auxiliary results are CUDA's (PyTorch's meta kernel for a non-CPU device): offset2bag names each index's bag,
// bag_size (offsets' shape) counts each bag's indices other than padding_idx, max_indices (mode max) holds the index
// whose row gave each maximum (the first such index of the bag, -1 for an empty bag) and is empty otherwise. The
// backward kernels read only offset2bag and max_indices of them.
//
// Checked as CPU checks, on the device (raised at the next synchronization, as CUDA's device-side asserts): every
// index in [0, num_embeddings), offsets[0] == 0 and offsets[-1] <= the input's length.
#include <algorithm>
#include <limits>

#include "lowering/bounds.h"
#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

enum Mode : int64_t { kSum = 0, kMean = 1, kMax = 2 };

// What a bag kernel knows of its indices.
struct Bags {
  Value idx;   // [n] S64, clamped into the table
  Value bag;   // [n] S64, each index's bag, clamped into [0, num_bags)
  Value keep;  // [n] pred: the index counts (it is in a bag and is not padding_idx)
  int64_t n = 0, num_bags = 0;
};

Bags bagsOf(Builder& b, Value indices, Value offset2bag, int64_t num_bags, int64_t num_weights, int64_t padding_idx) {
  Bags g;
  g.n = indices.type.numel();
  g.num_bags = num_bags;
  const Shape s{g.n};
  Value idx = b.convert(b.reshape(indices, s), DType::S64);
  Value bag = b.convert(b.reshape(offset2bag, s), DType::S64);
  g.keep = b.andOp(b.compare(bag, constantS64(b, 0, s), Cmp::GE), b.compare(bag, constantS64(b, num_bags, s), Cmp::LT));
  if (padding_idx >= 0) g.keep = b.andOp(g.keep, b.compare(idx, constantS64(b, padding_idx, s), Cmp::NE));
  g.idx = b.clamp(constantS64(b, 0, s), idx, constantS64(b, std::max<int64_t>(num_weights - 1, 0), s));
  g.bag = b.clamp(constantS64(b, 0, s), bag, constantS64(b, std::max<int64_t>(num_bags - 1, 0), s));
  return g;
}

// The bag of each of n indices: how many offsets are at or before its position, less one (S64, [n]).
Value offset2bagOf(Builder& b, Value offsets, int64_t n) {
  const int64_t m = offsets.type.numel();
  Value starts = b.convert(b.reshape(offsets, {m}), DType::S64);
  Value pos = b.iota({DType::S64, {n}}, 0);
  auto at = [&](Value i) { return takeRows(b, starts, i); };
  return b.sub(binarySearch(b, at, pos, m, /*right=*/true), constantS64(b, 1, {n}));
}

// `updates` ([n] + trailing dims) combined into rows `at` ([n], S64) of `into`.
Value intoRows(Builder& b, Value into, Value at, Value updates, ReduceKind kind) {
  Builder::ScatterDims sd;
  sd.update_window_dims = range(1, updates.rank());
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  return b.scatter(into, b.reshape(at, {at.type.numel(), 1}), updates, sd, kind);
}

// How many indices count in each of `size` bags (dtype t).
Value bagCount(Builder& b, const Bags& g, DType t, int64_t size) {
  return intoRows(b, b.zeros({t, {size}}), g.bag, b.convert(g.keep, t), ReduceKind::Sum);
}

// Each index's factor in a sum or a mean: 0 where it does not count, else its per-sample weight (or 1), divided by
// its bag's count for a mean (dtype c, [n]). `counts`: bagCount's first num_bags entries (read for a mean only).
Value rowFactor(Builder& b, const Bags& g, int64_t mode, Value per_sample, Value counts, DType c) {
  Value f = b.convert(g.keep, c);
  if (per_sample.valid()) f = b.mul(f, b.convert(b.reshape(per_sample, {g.n}), c));
  if (mode == kMean) {
    Value count = b.max(b.convert(counts, c), b.constantF(1, c, {g.num_bags}));
    f = b.div(f, takeRows(b, count, g.bag));
  }
  return f;
}

Value rowsTimes(Builder& b, Value rows, Value f) {
  return b.mul(rows, b.broadcastInDim(f, rows.shape(), {0}));
}

// _embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
//                include_last_offset, padding_idx) -> (output, offset2bag, bag_size, max_indices)
std::vector<Value> embeddingBagRule(Context& ctx) {
  Builder& b = ctx.b;
  Value weight = ctx.tensor(0), indices = ctx.tensor(1), offsets = ctx.tensor(2);
  const int64_t mode = ctx.toInt(4);
  const bool include_last = ctx.toBool(7);
  const int64_t padding_idx = ctx.has(8) ? ctx.toInt(8) : -1;
  Value per_sample = ctx.has(6) ? ctx.tensor(6) : Value();
  const int64_t num_weights = weight.shape()[0], dim = weight.shape()[1];
  const int64_t n = indices.type.numel(), m = offsets.type.numel();
  const int64_t num_bags = include_last ? m - 1 : m;
  const DType it = indices.dtype(), c = accType(weight.dtype());

  checkIndexRange(ctx, indices, num_weights, false,
                  "input takes value {} which is not in the valid range [0, " + std::to_string(num_weights) + ")",
                  Context::CheckError::Runtime);
  if (m > 0) {
    Value first = b.convert(b.slice(offsets, {0}, {1}, {1}), DType::S64);
    ctx.check(b.compare(first, constantS64(b, 0, {1}), Cmp::EQ),
              "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. "
              "However, got {}",
              first, Context::CheckError::Runtime);
    Value last = b.convert(b.slice(offsets, {m - 1}, {m}, {1}), DType::S64);
    ctx.check(b.compare(last, constantS64(b, n, {1}), Cmp::LE),
              "offsets[-1] can not be greater than input's length " + std::to_string(n) + " but got offsets[-1] of {}",
              last, Context::CheckError::Runtime);
  }

  const Shape out_shape{num_bags, dim};
  Value empty_max = b.zeros({it, {0}});
  if (n == 0) {
    Value out = b.zeros({weight.dtype(), out_shape});
    Value max_idx = mode == kMax ? b.convert(constantS64(b, -1, out_shape), it) : empty_max;
    return {out, b.zeros({it, {0}}), b.zeros({it, {m}}), max_idx};
  }
  Value o2b = offset2bagOf(b, include_last ? b.sliceInDim(offsets, 0, num_bags, 1, 0) : offsets, n);
  Bags g = bagsOf(b, indices, o2b, num_bags, num_weights, padding_idx);
  Value rows = b.convert(takeRows(b, weight, g.idx), c);  // [n, dim]
  Value counts = bagCount(b, g, DType::S64, m);  // per offset (CUDA's bag_size); the last one 0 with include_last
  Value bag_counts = b.sliceInDim(counts, 0, num_bags, 1, 0);
  Value bag_size = b.convert(counts, it);
  if (mode != kMax) {
    Value f = rowFactor(b, g, mode, per_sample, bag_counts, c);
    Value out = intoRows(b, b.zeros({c, out_shape}), g.bag, rowsTimes(b, rows, f), ReduceKind::Sum);
    return {b.convert(out, weight.dtype()), b.convert(o2b, it), bag_size, empty_max};
  }
  // max: the largest counted row of each bag, and the first index (in input order) whose row holds it
  const Shape rs{n, dim};
  Value counted = b.broadcastInDim(g.keep, rs, {0});
  Value lowest = b.constantF(-std::numeric_limits<double>::infinity(), c, rs);
  Value mx = intoRows(b, b.constantF(-std::numeric_limits<double>::infinity(), c, out_shape), g.bag,
                      b.select(counted, rows, lowest), ReduceKind::Max);
  Value hit = b.andOp(counted, b.compare(rows, takeRows(b, mx, g.bag), Cmp::EQ));
  Value pos = b.select(hit, b.iota({DType::S64, rs}, 0), constantS64(b, n, rs));
  Value first = intoRows(b, constantS64(b, n, out_shape), g.bag, pos, ReduceKind::Min);
  Value found = b.compare(first, constantS64(b, n, out_shape), Cmp::LT);
  Value word = takeRows(b, g.idx, b.clamp(constantS64(b, 0, out_shape), first, constantS64(b, n - 1, out_shape)));
  Value nonempty = b.broadcastInDim(b.compare(bag_counts, constantS64(b, 0, {num_bags}), Cmp::GT), out_shape, {0});
  Value out = b.select(nonempty, mx, b.zeros({c, out_shape}));
  return {b.convert(out, weight.dtype()), b.convert(o2b, it), bag_size,
          b.convert(b.select(found, word, constantS64(b, -1, out_shape)), it)};
}

bool isFloatDType(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64; }
bool isIndexDType(DType t) { return t == DType::S64 || t == DType::S32; }

bool embeddingBagAccepts(const Context& ctx) {
  const Value weight = ctx.tensor(0), indices = ctx.tensor(1), offsets = ctx.tensor(2);
  if (!isFloatDType(weight.dtype()) || weight.rank() != 2 || indices.rank() != 1 || offsets.rank() != 1 ||
      !isIndexDType(indices.dtype()) || !isIndexDType(offsets.dtype()))
    return false;
  const int64_t mode = ctx.toInt(4);
  if (mode < kSum || mode > kMax) return false;
  if (ctx.toBool(7) && offsets.type.numel() < 1) return false;
  if (ctx.has(6)) {  // otherwise CPU's kernel raises its error
    const Value w = ctx.tensor(6);
    if (mode != kSum || w.dtype() != weight.dtype() || w.rank() != 1 || w.type.numel() != indices.type.numel())
      return false;
  }
  return true;
}

// The gradient of the table: each counted index's row gets its bag's gradient times its factor (sum, mean), or each
// maximum's gradient goes to the row that gave it (max). scale_grad_by_freq divides a row's gradient by how often
// its index occurs (sum, mean).
Value gradWeight(Builder& b, Value grad, Value indices, Value offset2bag, Value max_indices, int64_t num_weights,
                 bool scale, int64_t mode, Value per_sample, int64_t padding_idx) {
  const int64_t num_bags = grad.shape()[0], dim = grad.shape()[1];
  const DType c = accType(grad.dtype());
  const Shape ws{num_weights, dim};
  Value g32 = b.convert(grad, c);
  if (mode == kMax) {
    const int64_t k = num_bags * dim;
    Value mi = b.reshape(b.convert(max_indices, DType::S64), {k});
    Value valid = b.andOp(b.compare(mi, constantS64(b, 0, {k}), Cmp::GE),
                          b.compare(mi, constantS64(b, num_weights, {k}), Cmp::LT));
    Value row = b.select(valid, mi, constantS64(b, 0, {k}));
    Value col = b.reshape(b.iota({DType::S64, {num_bags, dim}}, 1), {k});
    Value at = b.concatenate({b.reshape(row, {k, 1}), b.reshape(col, {k, 1})}, 1);
    Value upd = b.select(valid, b.reshape(g32, {k}), b.zeros({c, {k}}));
    Builder::ScatterDims sd;
    sd.inserted_window_dims = {0, 1};
    sd.scatter_dims_to_operand_dims = {0, 1};
    sd.index_vector_dim = 1;
    return b.convert(b.scatter(b.zeros({c, ws}), at, upd, sd, ReduceKind::Sum), grad.dtype());
  }
  const int64_t n = indices.type.numel();
  if (n == 0) return b.zeros({grad.dtype(), ws});
  Bags g = bagsOf(b, indices, offset2bag, num_bags, num_weights, padding_idx);
  Value f = rowFactor(b, g, mode, per_sample, mode == kMean ? bagCount(b, g, DType::S64, num_bags) : Value(), c);
  if (scale) {
    Value freq = intoRows(b, b.zeros({c, {num_weights}}), g.idx, b.constantF(1, c, {n}), ReduceKind::Sum);
    f = b.div(f, takeRows(b, freq, g.idx));
  }
  Value rows = rowsTimes(b, takeRows(b, g32, g.bag), f);
  return b.convert(intoRows(b, b.zeros({c, ws}), g.idx, rows, ReduceKind::Sum), grad.dtype());
}

// offset2bag as the forward gave it, or (when it is not one entry per index) found from the offsets.
Value offset2bagArg(Builder& b, Value offset2bag, Value indices, Value offsets) {
  const int64_t n = indices.type.numel();
  if (offset2bag.type.numel() == n) return offset2bag;
  return offset2bagOf(b, offsets, n);
}

bool backwardAccepts(const Context& ctx, size_t grad_i, size_t mode_i, size_t per_sample_i) {
  const Value grad = ctx.tensor(grad_i);
  if (!isFloatDType(grad.dtype()) || grad.rank() != 2 || ctx.tensor(1).rank() != 1) return false;
  const int64_t mode = ctx.toInt(mode_i);
  if (mode < kSum || mode > kMax) return false;
  if (ctx.has(per_sample_i)) {
    const Value w = ctx.tensor(per_sample_i);
    if (mode != kSum || w.dtype() != grad.dtype() || w.type.numel() != ctx.tensor(1).type.numel()) return false;
  }
  return true;
}

}  // namespace

void populateEmbeddingBag(Registry& r) {
  r.add("aten::_embedding_bag", embeddingBagRule).accepts(embeddingBagAccepts);
  r.add("aten::_embedding_bag_forward_only", embeddingBagRule).accepts(embeddingBagAccepts);
  // _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices, num_weights,
  //                         scale_grad_by_freq, mode, sparse, per_sample_weights, padding_idx): dense gradients
  // (sparse ones are declined: the CPU kernel builds them)
  r.add("aten::_embedding_bag_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value o2b = offset2bagArg(b, ctx.tensor(3), ctx.tensor(1), ctx.tensor(2));
    return {gradWeight(b, ctx.tensor(0), ctx.tensor(1), o2b, ctx.tensor(5), ctx.toInt(6), ctx.toBool(7), ctx.toInt(8),
                       ctx.has(10) ? ctx.tensor(10) : Value(), ctx.has(11) ? ctx.toInt(11) : -1)};
  }).accepts([](const Context& ctx) { return !ctx.toBool(9) && backwardAccepts(ctx, 0, 8, 10); });
  // _embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
  //                               scale_grad_by_freq, mode, per_sample_weights, padding_idx)
  r.add("aten::_embedding_bag_dense_backward", [](Context& ctx) -> std::vector<Value> {
    return {gradWeight(ctx.b, ctx.tensor(0), ctx.tensor(1), ctx.tensor(2), ctx.tensor(4), ctx.toInt(5), ctx.toBool(6),
                       ctx.toInt(7), ctx.has(8) ? ctx.tensor(8) : Value(), ctx.has(9) ? ctx.toInt(9) : -1)};
  }).accepts([](const Context& ctx) {
    return backwardAccepts(ctx, 0, 7, 8) &&
           (ctx.toInt(7) == kMax || ctx.tensor(2).type.numel() == ctx.tensor(1).type.numel());
  });
  // _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode, padding_idx): each
  // counted index's weight gets the dot product of its bag's gradient and its row (mode sum only: otherwise the CPU
  // kernel raises).
  r.add("aten::_embedding_bag_per_sample_weights_backward", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value grad = ctx.tensor(0), weight = ctx.tensor(1), indices = ctx.tensor(2);
    const int64_t n = indices.type.numel();
    if (n == 0) return {b.zeros({grad.dtype(), {0}})};
    const DType c = accType(grad.dtype());
    Value o2b = offset2bagArg(b, ctx.tensor(4), indices, ctx.tensor(3));
    Bags g = bagsOf(b, indices, o2b, grad.shape()[0], weight.shape()[0], ctx.has(6) ? ctx.toInt(6) : -1);
    Value prod = b.mul(takeRows(b, b.convert(grad, c), g.bag), takeRows(b, b.convert(weight, c), g.idx));
    Value dot = b.reduce(prod, {1}, ReduceKind::Sum);
    return {b.convert(b.select(g.keep, dot, b.zeros({c, {n}})), grad.dtype())};
  }).accepts([](const Context& ctx) {
    const Value grad = ctx.tensor(0), weight = ctx.tensor(1);
    return isFloatDType(grad.dtype()) && grad.rank() == 2 && weight.rank() == 2 && weight.dtype() == grad.dtype() &&
           ctx.tensor(2).rank() == 1 && ctx.toInt(5) == kSum;
  });
}

}  // namespace torch_tpu::lowering
