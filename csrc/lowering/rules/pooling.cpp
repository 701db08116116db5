// Pooling family: avg_pool{1,2,3}d (ceil_mode, count_include_pad, divisor_override), max_pool{2,3}d_with_indices,
// adaptive average and max pooling (any sizes), fractional max pooling, upsampling (nearest, nearest-exact,
// linear/bilinear/trilinear with both align_corners) and the backward of each.
//
// The pooled dims are the trailing `nsp` dims; any leading dims (batch, channels, or none) are carried along.
//   avg pool          reduce_window sum over the padded input / a divisor map computed the same way from ones
//   avg pool backward reduce_window sum of the dilated grad/divisor (the window sum's transpose), cropped
//   max pool          the kh*kw strided slices of the (-inf padded) input, arg-max across them (first max wins,
//                     NaN propagates), indices flat within each input plane as PyTorch gives them
//   max pool backward scatter-add into the flattened planes at the indices (adaptive and fractional max too)
//   adaptive/fractional max  per-dim gathers of each output's window candidates, last dim first, carrying flat
//                     indices (CPU's scan order: first maximum, last NaN); fractional windows from random_samples
//   adaptive avg      one averaging matrix per dim (rows: [floor(i*in/out), ceil((i+1)*in/out)) ), dot_general
//   upsample          index/weight tables (nearest, linear, bicubic) computed on the host in float exactly as
//                     PyTorch's CPU kernels do (scales are built into the program: static args), gathers forward,
//                     matrices backward
// Half types compute in f32 and round once.
#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstring>

#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

using Pads = std::vector<std::pair<int64_t, int64_t>>;

std::vector<int64_t> expandList(const Context& ctx, const std::vector<int64_t>& v, int64_t n, const char* what) {
  if (v.size() == 1) return std::vector<int64_t>(size_t(n), v[0]);
  if (int64_t(v.size()) != n) ctx.fail(std::string(what) + " needs " + std::to_string(n) + " entries");
  return v;
}

// Pooling window parameters of the trailing nsp dims.
struct Window {
  int64_t nsp = 0;
  std::vector<int64_t> k, s, p, d;
};

Window window(const Context& ctx, size_t k_i, size_t s_i, size_t p_i, int dil_i, int64_t nsp) {
  Window w;
  w.nsp = nsp;
  w.k = expandList(ctx, ctx.toInts(k_i), nsp, "kernel_size");
  w.s = ctx.toInts(s_i).empty() ? w.k : expandList(ctx, ctx.toInts(s_i), nsp, "stride");
  w.p = expandList(ctx, ctx.toInts(p_i), nsp, "padding");
  w.d = dil_i >= 0 ? expandList(ctx, ctx.toInts(size_t(dil_i)), nsp, "dilation") : std::vector<int64_t>(size_t(nsp), 1);
  return w;
}

// Full-rank window vectors: 1 (or 0 padding) on the leading dims.
std::vector<int64_t> full(const std::vector<int64_t>& v, int64_t rank, int64_t fill) {
  std::vector<int64_t> out(size_t(rank - int64_t(v.size())), fill);
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

Shape tail(const Shape& s, int64_t n) { return Shape(s.end() - n, s.end()); }

// ---------------------------------------------------------------------------------------------------------------
// avg pool

// Per-output divisor map [out spatial] (PyTorch's avg_pool: window clipped to the padded input, or to the input).
Value avgDivisor(Builder& b, const Window& w, const Shape& in_sp, const Shape& out_sp, bool count_include_pad,
                 DType c) {
  Value ones = b.constantF(1, c, in_sp);
  Pads pads;
  if (count_include_pad) {
    Value one = b.constant(1, c);
    ones = b.pad(ones, one, w.p, w.p, std::vector<int64_t>(size_t(w.nsp), 0));
    for (int64_t i = 0; i < w.nsp; ++i) {
      int64_t size = in_sp[size_t(i)] + 2 * w.p[size_t(i)];
      int64_t hi = std::max<int64_t>(0, (out_sp[size_t(i)] - 1) * w.s[size_t(i)] + w.k[size_t(i)] - size);
      pads.push_back({0, hi});
    }
  } else {
    for (int64_t i = 0; i < w.nsp; ++i) {
      int64_t hi = std::max<int64_t>(
          0, (out_sp[size_t(i)] - 1) * w.s[size_t(i)] + w.k[size_t(i)] - in_sp[size_t(i)] - w.p[size_t(i)]);
      pads.push_back({w.p[size_t(i)], hi});
    }
  }
  Value cnt = b.reduceWindow(ones, b.constant(0, c), ReduceKind::Sum, w.k, w.s, {}, {}, pads);
  std::vector<int64_t> zero(size_t(w.nsp), 0), one(size_t(w.nsp), 1);
  return b.slice(cnt, zero, out_sp, one);
}

// avg_pool{N}d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override?)
std::vector<Value> avgPoolRule(Context& ctx, int64_t nsp) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  Window w = window(ctx, 1, 2, 3, -1, nsp);
  bool count_include_pad = ctx.toBool(5);
  const Shape& out_shape = ctx.outputs[0].shape;
  Shape in_sp = tail(x.shape(), nsp), out_sp = tail(out_shape, nsp);
  DType c = accType(x.dtype());
  Value xc = b.convert(x, c);
  int64_t r = x.rank();
  Pads pads(size_t(r - nsp), {0, 0});
  for (int64_t i = 0; i < nsp; ++i) {
    int64_t hi = std::max<int64_t>(
        0, (out_sp[size_t(i)] - 1) * w.s[size_t(i)] + w.k[size_t(i)] - in_sp[size_t(i)] - w.p[size_t(i)]);
    pads.push_back({w.p[size_t(i)], hi});
  }
  Value sum = b.reduceWindow(xc, b.constant(0, c), ReduceKind::Sum, full(w.k, r, 1), full(w.s, r, 1), {}, {}, pads);
  sum = b.slice(sum, std::vector<int64_t>(size_t(r), 0), out_shape, std::vector<int64_t>(size_t(r), 1));
  Value div;
  if (ctx.has(6))
    div = b.constantF(double(ctx.toInt(6)), c, out_shape);
  else
    div = b.broadcastTo(avgDivisor(b, w, in_sp, out_sp, count_include_pad, c), out_shape);
  return {b.convert(b.div(sum, div), x.dtype())};
}

// The transpose of a window sum (window k, stride s, low padding p) back onto an input of size in_sp:
// grad_in[j] = sum over windows o covering j of g[o].
Value windowSumTranspose(Builder& b, Value g, const Window& w, const Shape& in_shape) {
  int64_t r = g.rank(), lead = r - w.nsp;
  Pads pads(size_t(lead), {0, 0});
  std::vector<int64_t> bd(size_t(lead), 1), start(size_t(r), 0), limit = in_shape;
  for (int64_t i = 0; i < w.nsp; ++i) {
    size_t j = size_t(lead + i);
    int64_t k = w.k[size_t(i)], s = w.s[size_t(i)], p = w.p[size_t(i)];
    int64_t o = g.shape()[j], in = in_shape[j];
    int64_t hi = std::max<int64_t>(0, in + p - (o - 1) * s - 1);
    pads.push_back({k - 1, hi});
    bd.push_back(s);
    start[j] = p;
    limit[j] = p + in;
  }
  Value full_sum = b.reduceWindow(g, b.constant(0, g.dtype()), ReduceKind::Sum, full(w.k, r, 1), {}, bd, {}, pads);
  return b.slice(full_sum, start, limit, std::vector<int64_t>(size_t(r), 1));
}

// avg_pool{N}d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor?)
std::vector<Value> avgPoolBackwardRule(Context& ctx, int64_t nsp) {
  Builder& b = ctx.b;
  Value g = ctx.tensor(0), x = ctx.tensor(1);
  Window w = window(ctx, 2, 3, 4, -1, nsp);
  bool count_include_pad = ctx.toBool(6);
  DType c = accType(x.dtype());
  Value gc = b.convert(g, c);
  Shape in_sp = tail(x.shape(), nsp), out_sp = tail(g.shape(), nsp);
  Value div;
  if (ctx.has(7))
    div = b.constantF(double(ctx.toInt(7)), c, g.shape());
  else
    div = b.broadcastTo(avgDivisor(b, w, in_sp, out_sp, count_include_pad, c), g.shape());
  return {b.convert(windowSumTranspose(b, b.div(gc, div), w, x.shape()), x.dtype())};
}

// ---------------------------------------------------------------------------------------------------------------
// max pool

// max_pool{N}d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode) -> (out, indices)
std::vector<Value> maxPoolRule(Context& ctx, int64_t nsp) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  Window w = window(ctx, 1, 2, 3, 4, nsp);
  const Shape& out_shape = ctx.outputs[0].shape;
  int64_t r = x.rank(), lead = r - nsp;
  Shape in_sp = tail(x.shape(), nsp), out_sp = tail(out_shape, nsp);
  DType t = x.dtype();
  Value lowest = shlo::isFloat(t) ? b.constant(-INFINITY, t)
                 : t == DType::Pred ? b.constant(0, t)
                 : shlo::isSigned(t) ? b.constantInt(shlo::bitWidth(t) == 64 ? INT64_MIN : -(int64_t(1) << (shlo::bitWidth(t) - 1)), t)
                 : b.constant(0, t);
  std::vector<int64_t> lo(size_t(r), 0), hi(size_t(r), 0);
  for (int64_t i = 0; i < nsp; ++i) {
    size_t j = size_t(lead + i);
    lo[j] = w.p[size_t(i)];
    hi[j] = std::max<int64_t>(0, (out_sp[size_t(i)] - 1) * w.s[size_t(i)] + (w.k[size_t(i)] - 1) * w.d[size_t(i)] + 1 -
                                     in_sp[size_t(i)] - w.p[size_t(i)]);
  }
  Value xp = b.pad(x, lowest, lo, hi, std::vector<int64_t>(size_t(r), 0));
  // Flat index of each output position's window origin (in unpadded input coordinates) per spatial dim.
  int64_t K = 1;
  for (int64_t k : w.k) K *= k;
  std::vector<Value> vals, idxs;
  Shape sp_shape = out_sp;
  for (int64_t kk = 0; kk < K; ++kk) {
    std::vector<int64_t> off(static_cast<size_t>(nsp), 0);
    int64_t rem = kk;
    for (int64_t i = nsp - 1; i >= 0; --i) {
      off[size_t(i)] = rem % w.k[size_t(i)];
      rem /= w.k[size_t(i)];
    }
    std::vector<int64_t> start(size_t(r), 0), limit = out_shape, strides(size_t(r), 1);
    Value flat = b.zeros({DType::S64, sp_shape});
    for (int64_t i = 0; i < nsp; ++i) {
      size_t j = size_t(lead + i);
      int64_t o0 = off[size_t(i)] * w.d[size_t(i)];
      start[j] = o0;
      limit[j] = o0 + (out_sp[size_t(i)] - 1) * w.s[size_t(i)] + 1;
      strides[j] = w.s[size_t(i)];
      // position along dim i = o * s + o0 - p
      Value pos = b.add(b.mul(b.iota({DType::S64, sp_shape}, i), b.constantF(double(w.s[size_t(i)]), DType::S64, sp_shape)),
                        b.constantF(double(o0 - w.p[size_t(i)]), DType::S64, sp_shape));
      int64_t stride_flat = 1;
      for (int64_t q = i + 1; q < nsp; ++q) stride_flat *= in_sp[size_t(q)];
      flat = b.add(flat, b.mul(pos, b.constantF(double(stride_flat), DType::S64, sp_shape)));
    }
    Value v = b.slice(xp, start, limit, strides);
    Shape vs = out_shape;
    vs.push_back(1);
    vals.push_back(b.reshape(v, vs));
    std::vector<int64_t> map;
    for (int64_t i = 0; i < nsp; ++i) map.push_back(lead + i);
    idxs.push_back(b.reshape(b.broadcastInDim(flat, out_shape, map), vs));
  }
  Value allv = b.concatenate(vals, r), alli = b.concatenate(idxs, r);
  std::vector<Value> red = b.argReduce(allv, alli, r, /*is_max=*/true);
  return {red[0], b.convert(red[1], ctx.outputs[1].dtype != DType::Invalid ? ctx.outputs[1].dtype : DType::S64)};
}

// max_pool{N}d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices),
// adaptive_max_pool{N}d_backward(grad_output, self, indices) and fractional_max_pool{N}d_backward(grad_output, self,
// kernel_size, output_size, indices): each output's gradient added at its index within its plane.
std::vector<Value> maxPoolBackwardRule(Context& ctx, int64_t nsp, size_t ind_i = 7) {
  Builder& b = ctx.b;
  Value g = ctx.tensor(0), x = ctx.tensor(1), ind = ctx.tensor(ind_i);
  int64_t r = x.rank(), lead = r - nsp;
  int64_t rows = 1, plane = 1, outs = 1;
  for (int64_t i = 0; i < lead; ++i) rows *= x.shape()[size_t(i)];
  for (int64_t i = lead; i < r; ++i) {
    plane *= x.shape()[size_t(i)];
    outs *= g.shape()[size_t(i)];
  }
  DType c = accType(x.dtype());
  Value gc = b.reshape(b.convert(g, c), {rows * outs});
  Value col = b.reshape(b.convert(ind, DType::S64), {rows * outs, 1});
  Value row = b.reshape(b.iota({DType::S64, {rows, outs}}, 0), {rows * outs, 1});
  Value idx = b.concatenate({row, col}, 1);
  Builder::ScatterDims sd;
  sd.inserted_window_dims = {0, 1};
  sd.scatter_dims_to_operand_dims = {0, 1};
  sd.index_vector_dim = 1;
  Value out = b.scatter(b.zeros({c, {rows, plane}}), idx, gc, sd, ReduceKind::Sum);
  return {b.convert(b.reshape(out, x.shape()), x.dtype())};
}

// ---------------------------------------------------------------------------------------------------------------
// adaptive and fractional max pool
//
// Both pool windows that vary per output position (adaptive: [floor(o*in/out), ceil((o+1)*in/out)); fractional:
// [seq[o], seq[o] + k) with seq drawn per plane from random_samples). PyTorch's CPU kernels scan a window in
// row-major order keeping the first strict maximum, and any NaN replaces the running maximum (the last NaN wins).
// That choice is separable: the last dim is pooled first, carrying each candidate's flat index within the plane,
// then each earlier dim picks among those (value, index) pairs with the same rule. A window of a dim is gathered as
// `k` candidates per output (positions past a shorter window's end repeat its last element, which changes nothing).

struct ValIdx {
  Value v, i;  // values and their flat indices within the plane (S64)
};

// Picks along `dim` as the CPU loop does: the last NaN if any, else the first (smallest-index) maximum.
ValIdx cpuArgMax(Builder& b, Value v, Value i, int64_t dim) {
  std::vector<Value> r = b.argReduce(v, i, dim, /*is_max=*/true);
  Value nan_i = b.reduce(b.select(isNan(b, v), i, b.constantF(-1, DType::S64, i.shape())), {dim}, ReduceKind::Max);
  Value has_nan = b.compare(nan_i, b.zerosLike(nan_i), Cmp::GE);
  return {r[0], b.select(has_nan, nan_i, r[1])};
}

// One dim's pass: `pos` (S64, cur's shape with `dim` of size out*k) lists each output's k candidate positions;
// `stride` is the dim's stride in the flat plane index.
ValIdx poolPass(Builder& b, const ValIdx& cur, int64_t dim, Value pos, int64_t out, int64_t k, int64_t stride) {
  Value cv = gatherDim(b, cur.v, dim, pos);
  Value ci = b.mul(pos, b.constantF(double(stride), DType::S64, pos.shape()));
  if (cur.i.valid()) ci = b.add(gatherDim(b, cur.i, dim, pos), ci);
  Shape s = cv.shape();
  s[size_t(dim)] = out;
  s.insert(s.begin() + dim + 1, k);
  return cpuArgMax(b, b.reshape(cv, s), b.reshape(ci, s), dim + 1);
}

// adaptive_max_pool{N}d(self, output_size) -> (out, indices)
std::vector<Value> adaptiveMaxRule(Context& ctx, int64_t nsp) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  const Shape& out_shape = ctx.outputs[0].shape;
  int64_t r = x.rank(), lead = r - nsp;
  ValIdx cur{x, Value()};
  int64_t stride = 1;
  for (int64_t d = r - 1; d >= lead; --d) {
    int64_t in = x.shape()[size_t(d)], out = out_shape[size_t(d)];
    int64_t k = 0;
    for (int64_t o = 0; o < out; ++o) k = std::max(k, ((o + 1) * in + out - 1) / out - (o * in) / out);
    std::vector<int64_t> pos;
    for (int64_t o = 0; o < out; ++o) {
      int64_t start = (o * in) / out, end = ((o + 1) * in + out - 1) / out;
      for (int64_t j = 0; j < k; ++j) pos.push_back(std::min(start + j, end - 1));
    }
    Shape ps = cur.v.shape();
    ps[size_t(d)] = out * k;
    cur = poolPass(b, cur, d, b.broadcastInDim(b.constantI64s(pos, DType::S64), ps, {d}), out, k, stride);
    stride *= in;
  }
  return {cur.v, b.convert(cur.i, ctx.outputs[1].dtype != DType::Invalid ? ctx.outputs[1].dtype : DType::S64)};
}

// x (f32 or f64) rounded to the precision of `t` (bf16/f16), as c10's BFloat16/Half arithmetic rounds each result.
// bf16 rounds to nearest even by integer arithmetic on the bits, which no compiler pass folds away.
Value roundTo(Builder& b, Value x, DType t) {
  if (t == DType::BF16 && x.dtype() == DType::F32) {
    Value bits = b.bitcastConvert(x, DType::U32);
    auto k = [&](int64_t v) { return b.constantF(double(v), DType::U32, x.shape()); };
    Value lsb = b.andOp(b.shiftRightLogical(bits, k(16)), k(1));
    Value rounded = b.andOp(b.add(b.add(bits, k(0x7FFF)), lsb), k(0xFFFF0000LL));
    return b.bitcastConvert(rounded, DType::F32);
  }
  if (t == DType::BF16 || t == DType::F16) return b.convert(b.convert(x, t), x.dtype());
  return x;
}

float hostRound(float v, DType t) {
  if (t == DType::BF16) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
    std::memcpy(&v, &bits, 4);
    return v;
  }
  if (t == DType::F16) {  // round to 11 significant bits (normal range: the sizes involved are small integers/ratios)
    int e;
    float m = std::frexp(v, &e);
    return std::ldexp(std::nearbyint(std::ldexp(m, 11)), e - 11);
  }
  return v;
}

// fractional_max_pool{N}d(self, kernel_size, output_size, random_samples) -> (out, indices)
// random_samples [N, C, nsp] (N = 1 for unbatched input; rows past N are ignored): sample j of a plane draws the intervals of spatial dim
// nsp-1-j for 2-d (W from sample 0, H from sample 1) and of dim j for 3-d (T, H, W), as PyTorch's kernels read
// them. The interval starts are computed in the input's dtype (c10 rounding after each operation for bf16/f16):
// seq[o] = int((o + u) * alpha) - int(u * alpha), alpha = (in - k) / (out - 1), seq[out - 1] = in - k.
std::vector<Value> fractionalMaxRule(Context& ctx, int64_t nsp) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0), u = ctx.tensor(3);
  const std::vector<int64_t>& ks = ctx.toInts(1);
  const Shape& out_shape = ctx.outputs[0].shape;
  int64_t r = x.rank(), lead = r - nsp;
  int64_t planes = 1;
  for (int64_t d = 0; d < lead; ++d) planes *= x.shape()[size_t(d)];
  // PyTorch's kernels read the first N rows of random_samples: more rows than batches are allowed (and ignored).
  int64_t n_batch = lead == 2 ? x.shape()[0] : 1, n_plane = x.shape()[size_t(lead - 1)];
  if (u.rank() == 3 && u.shape()[0] > n_batch && u.shape()[1] == n_plane && u.shape()[2] == nsp)
    u = b.sliceInDim(u, 0, n_batch, 1, 0);
  if (u.type.numel() != planes * nsp) ctx.fail("random_samples must hold one sample per plane and pooled dim");
  DType t = x.dtype();
  DType c = t == DType::F64 ? DType::F64 : DType::F32;
  Value uc = b.reshape(roundTo(b, b.convert(u, c), t), {planes, nsp});
  Shape plane_shape = {planes};
  for (int64_t d = lead; d < r; ++d) plane_shape.push_back(x.shape()[size_t(d)]);
  ValIdx cur{b.reshape(x, plane_shape), Value()};
  int64_t stride = 1;
  for (int64_t i = nsp - 1; i >= 0; --i) {
    int64_t d = 1 + i;
    int64_t in = x.shape()[size_t(lead + i)], out = out_shape[size_t(lead + i)];
    int64_t k = ks.size() == 1 ? ks[0] : ks[size_t(i)];
    int64_t col = nsp == 2 ? nsp - 1 - i : i;
    Value us = b.reshape(b.sliceInDim(uc, col, col + 1, 1, 1), {planes});
    Value seq;  // [planes, out] S64
    Shape so = {planes, out};
    if (out > 1) {
      float alpha_f = hostRound(hostRound(float(in - k), t) / hostRound(float(out - 1), t), t);
      double alpha = t == DType::F64 ? double(in - k) / double(out - 1) : double(alpha_f);
      Value ub = b.broadcastInDim(us, so, {0});
      Value a = b.constantF(alpha, c, so);
      Value o = roundTo(b, b.convert(b.iota({DType::S64, so}, 1), c), t);
      Value hi = b.convert(roundTo(b, b.mul(roundTo(b, b.add(o, ub), t), a), t), DType::S64);
      Value lo = b.convert(roundTo(b, b.mul(ub, a), t), DType::S64);
      seq = b.sub(hi, lo);
      Value last = b.compare(b.iota({DType::S64, so}, 1), b.constantF(double(out - 1), DType::S64, so), Cmp::EQ);
      seq = b.select(last, b.constantF(double(in - k), DType::S64, so), seq);
    } else {
      seq = b.constantF(double(in - k), DType::S64, so);
    }
    // candidates seq[o] + j, j < k: [planes, out * k]
    Shape s3 = {planes, out, k};
    Value pos = b.add(b.broadcastInDim(seq, s3, {0, 1}), b.iota({DType::S64, s3}, 2));
    pos = b.reshape(pos, {planes, out * k});
    Shape ps = cur.v.shape();
    ps[size_t(d)] = out * k;
    cur = poolPass(b, cur, d, b.broadcastInDim(pos, ps, {0, d}), out, k, stride);
    stride *= in;
  }
  return {b.reshape(cur.v, out_shape),
          b.convert(b.reshape(cur.i, out_shape),
                    ctx.outputs[1].dtype != DType::Invalid ? ctx.outputs[1].dtype : DType::S64)};
}

// ---------------------------------------------------------------------------------------------------------------
// adaptive average pool

// Averaging matrix [out, in] of adaptive pooling along one dim.
Value adaptiveMatrix(Builder& b, int64_t in, int64_t out, DType c) {
  Value i = b.iota({DType::S64, {out, in}}, 0), h = b.iota({DType::S64, {out, in}}, 1);
  auto k = [&](int64_t v) { return b.constantF(double(v), DType::S64, {out, in}); };
  Value start = b.div(b.mul(i, k(in)), k(out));
  Value end = b.div(b.add(b.mul(b.add(i, k(1)), k(in)), k(out - 1)), k(out));
  Value inside = b.andOp(b.compare(h, start, Cmp::GE), b.compare(h, end, Cmp::LT));
  Value w = b.div(b.constantF(1, c, {out, in}), b.convert(b.sub(end, start), c));
  return b.select(inside, w, b.zeros({c, {out, in}}));
}

// Contracts dim `dim` of x with dim `mdim` of m (the other dim of m takes its place).
Value applyAlong(Builder& b, Value x, Value m, int64_t dim, int64_t mdim) {
  Value y = b.dotGeneral(x, m, {}, {}, {dim}, {mdim});  // x dims without `dim`, then m's free dim
  std::vector<int64_t> perm;
  int64_t r = x.rank();
  for (int64_t k = 0; k < r - 1; ++k) {
    if (k == dim) perm.push_back(r - 1);
    perm.push_back(k);
  }
  if (dim == r - 1) perm.push_back(r - 1);
  return b.transpose(y, perm);
}

// _adaptive_avg_pool{N}d(self, output_size)
std::vector<Value> adaptiveAvgRule(Context& ctx, int64_t nsp) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  const Shape& out_shape = ctx.outputs[0].shape;
  DType c = accType(x.dtype());
  Value y = b.convert(x, c);
  int64_t lead = x.rank() - nsp;
  for (int64_t i = 0; i < nsp; ++i) {
    int64_t d = lead + i, in = x.shape()[size_t(d)], out = out_shape[size_t(d)];
    if (in == out) continue;
    if (out > 0 && in % out == 0) {  // equal windows: a plain window mean
      int64_t k = in / out;
      std::vector<int64_t> win(size_t(y.rank()), 1);
      win[size_t(d)] = k;
      y = b.reduceWindow(y, b.constant(0, c), ReduceKind::Sum, win, win, {}, {}, {});
      y = b.div(y, b.constantF(double(k), c, y.shape()));
      continue;
    }
    y = applyAlong(b, y, adaptiveMatrix(b, in, out, c), d, 1);
  }
  return {b.convert(y, x.dtype())};
}

// _adaptive_avg_pool{N}d_backward(grad_output, self)
std::vector<Value> adaptiveAvgBackwardRule(Context& ctx, int64_t nsp) {
  Builder& b = ctx.b;
  Value g = ctx.tensor(0), x = ctx.tensor(1);
  DType c = accType(x.dtype());
  Value y = b.convert(g, c);
  int64_t lead = x.rank() - nsp;
  for (int64_t i = 0; i < nsp; ++i) {
    int64_t d = lead + i, in = x.shape()[size_t(d)], out = g.shape()[size_t(d)];
    if (in == out) continue;
    y = applyAlong(b, y, adaptiveMatrix(b, in, out, c), d, 0);
  }
  return {b.convert(y, x.dtype())};
}

// ---------------------------------------------------------------------------------------------------------------
// upsampling

enum class Mode { Nearest, NearestExact, Linear, Cubic };

// PyTorch's compute_scales_value / area_pixel_compute_scale in S (float for the nearest modes and for float and half
// inputs, double for double inputs: the linear kernels' opmath type).
template <typename S>
S scaleValue(const HostScalar* scale, int64_t in, int64_t out) {
  if (scale && scale->known() && scale->toDouble() > 0) return S(1.0 / scale->toDouble());
  return S(in) / S(out);
}

struct Taps {
  int n = 1;                                // taps per output: 1 (nearest modes), 2 (linear), 4 (cubic)
  std::array<std::vector<int64_t>, 4> idx;  // idx[k][o]: output o's k-th tap
  std::array<std::vector<double>, 4> w;     // its weight (linear and cubic), a value of the kernel's opmath type
};

// PyTorch's cubic convolution coefficients (A = -0.75) of the four taps around a source position with fraction t,
// in S as its CPU kernel computes them.
template <typename S>
void cubicCoefficients(S t, S c[4]) {
  const S A = S(-0.75);
  auto conv1 = [A](S x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
  auto conv2 = [A](S x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
  c[0] = conv2(t + S(1));
  c[1] = conv1(t);
  S x2 = S(1) - t;
  c[2] = conv1(x2);
  c[3] = conv2(x2 + S(1));
}

// The taps of the linear and cubic modes, in S.
template <typename S>
void linearTaps(Taps& t, Mode mode, int64_t in, int64_t out, bool align_corners, const HostScalar* scale) {
  const S s = align_corners ? (out > 1 ? S(in - 1) / S(out - 1) : S(0)) : scaleValue<S>(scale, in, out);
  for (int64_t o = 0; o < out; ++o) {
    if (mode == Mode::Cubic) {
      // Source position unclamped below (cubic), its floor clamped to the input, the four taps around it clamped.
      S src = align_corners ? s * S(o) : s * (S(o) + S(0.5)) - S(0.5);
      int64_t a = std::min(int64_t(std::floor(src)), in - 1);
      S lambda = std::min(std::max(src - S(a), S(0)), S(1));
      S c[4];
      cubicCoefficients<S>(lambda, c);
      auto at = [in](int64_t k) { return std::min(std::max(k, int64_t(0)), in - 1); };
      for (int k = 0; k < 4; ++k) {
        t.idx[size_t(k)].push_back(at(a - 1 + k));
        t.w[size_t(k)].push_back(double(c[k]));
      }
    } else {
      S src = align_corners ? s * S(o) : std::max(s * (S(o) + S(0.5)) - S(0.5), S(0));
      int64_t a = std::min(int64_t(src), in - 1);
      int64_t off = a < in - 1 ? 1 : 0;
      S l1 = std::min(std::max(src - S(a), S(0)), S(1));
      t.idx[0].push_back(a);
      t.idx[1].push_back(a + off);
      t.w[0].push_back(double(S(1) - l1));
      t.w[1].push_back(double(l1));
    }
  }
}

// The taps of each output; linear and cubic weights in double for double inputs (`dbl`), else in float.
Taps taps(Mode mode, int64_t in, int64_t out, bool align_corners, const HostScalar* scale, bool dbl = false) {
  Taps t;
  t.n = mode == Mode::Cubic ? 4 : mode == Mode::Linear ? 2 : 1;
  if (t.n > 1) {
    if (dbl) linearTaps<double>(t, mode, in, out, align_corners, scale);
    else linearTaps<float>(t, mode, in, out, align_corners, scale);
    return t;
  }
  for (int64_t o = 0; o < out; ++o) {
    if (mode == Mode::Nearest) {
      int64_t idx;
      if (out == in) idx = o;
      else if (out == 2 * in) idx = o >> 1;
      else idx = std::min(int64_t(std::floor(float(o) * scaleValue<float>(scale, in, out))), in - 1);
      t.idx[0].push_back(idx);
    } else {
      float s = scaleValue<float>(scale, in, out);
      t.idx[0].push_back(std::min(int64_t(std::floor(float((double(o) + 0.5) * s))), in - 1));
    }
  }
  return t;
}

Value floatTable(Builder& b, const std::vector<float>& v) {
  std::vector<int64_t> bits;
  for (float f : v) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    bits.push_back(i);
  }
  return b.bitcastConvert(b.constantI64s(bits, DType::S32), DType::F32);
}

// Tap weights as a table of dtype c: exact doubles for F64, else the floats they hold.
Value weightTable(Builder& b, const std::vector<double>& v, DType c) {
  if (c == DType::F64) {
    std::vector<int64_t> bits;
    for (double d : v) {
      int64_t i;
      std::memcpy(&i, &d, 8);
      bits.push_back(i);
    }
    return b.bitcastConvert(b.constantI64s(bits, DType::S64), DType::F64);
  }
  std::vector<float> f(v.begin(), v.end());
  return b.convert(floatTable(b, f), c);
}

// Interpolation matrix [out, in] of the taps (weights summed where taps coincide).
Value tapMatrix(Builder& b, const Taps& t, int64_t in, DType c) {
  int64_t out = int64_t(t.idx[0].size());
  Shape s = {out, in};
  Value col = b.iota({DType::S64, s}, 1);
  auto hit = [&](int k) {
    return b.compare(col, b.broadcastInDim(b.constantI64s(t.idx[size_t(k)], DType::S64), s, {0}), Cmp::EQ);
  };
  if (t.n == 1) return b.convert(hit(0), c);
  Value z = b.zeros({c, s});
  Value m;
  for (int k = 0; k < t.n; ++k) {
    Value term = b.select(hit(k), b.broadcastInDim(weightTable(b, t.w[size_t(k)], c), s, {0}), z);
    m = k == 0 ? term : b.add(m, term);
  }
  return m;
}

struct UpsampleArgs {
  Mode mode;
  int64_t nsp;
  bool align_corners = false;
  std::vector<const HostScalar*> scales;
};

// Scale arguments start at `first`: one per spatial dim (absent -> nullptr).
std::vector<const HostScalar*> scalesFrom(const Context& ctx, size_t first, int64_t nsp) {
  std::vector<const HostScalar*> out;
  for (int64_t i = 0; i < nsp; ++i) {
    size_t k = first + size_t(i);
    out.push_back(ctx.has(k) ? &ctx.arg(k).scalar : nullptr);
  }
  return out;
}

// upsample_*(self, output_size, [align_corners,] scales...)
// PyTorch CPU interpolates floating dtypes (and uint8 for nearest modes) only: other calls decline, and its kernel
// raises.
bool upsampleAccepts(const Context& ctx, bool nearest) {
  DType t = ctx.tensor(0).dtype();
  return realDTypes(ctx) && (shlo::isFloat(t) || (nearest && t == DType::U8));
}

std::vector<Value> upsampleRule(Context& ctx, Mode mode, int64_t nsp) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  bool linear = mode == Mode::Linear || mode == Mode::Cubic;
  bool ac = linear && ctx.toBool(2);
  auto scales = scalesFrom(ctx, linear ? 3 : 2, nsp);
  const Shape& out_shape = ctx.outputs[0].shape;
  int64_t lead = x.rank() - nsp;
  DType c = linear ? accType(x.dtype()) : x.dtype();
  Value y = b.convert(x, c);
  // Last dim first: the order of PyTorch's separable arithmetic for linear modes.
  for (int64_t i = nsp - 1; i >= 0; --i) {
    int64_t d = lead + i, in = x.shape()[size_t(d)], out = out_shape[size_t(d)];
    Taps t = taps(mode, in, out, ac, scales[size_t(i)], c == DType::F64);
    if (t.n == 1) {
      y = takeAlong(b, y, d, t.idx[0]);
      continue;
    }
    // sum_k w_k * x[i_k], left to right as PyTorch's kernels add the taps
    Value acc;
    for (int k = 0; k < t.n; ++k) {
      Value a = takeAlong(b, y, d, t.idx[size_t(k)]);
      Value term = b.mul(b.broadcastInDim(weightTable(b, t.w[size_t(k)], c), a.shape(), {d}), a);
      acc = k == 0 ? term : b.add(acc, term);
    }
    y = acc;
  }
  return {b.convert(y, x.dtype())};
}

// upsample_*_backward(grad_output, output_size, input_size, [align_corners,] scales...)
std::vector<Value> upsampleBackwardRule(Context& ctx, Mode mode, int64_t nsp) {
  Builder& b = ctx.b;
  Value g = ctx.tensor(0);
  bool linear = mode == Mode::Linear || mode == Mode::Cubic;
  bool ac = linear && ctx.toBool(3);
  auto scales = scalesFrom(ctx, linear ? 4 : 3, nsp);
  const std::vector<int64_t>& in_size = ctx.toInts(2);
  int64_t lead = g.rank() - nsp;
  DType c = accType(g.dtype());
  Value y = b.convert(g, c);
  for (int64_t i = 0; i < nsp; ++i) {
    int64_t d = lead + i, in = in_size[size_t(int64_t(in_size.size()) - nsp + i)], out = g.shape()[size_t(d)];
    Taps t = taps(mode, in, out, ac, scales[size_t(i)], c == DType::F64);
    y = applyAlong(b, y, tapMatrix(b, t, in, c), d, 0);
  }
  return {b.convert(y, g.dtype())};
}

// Anti-aliased interpolation (_upsample_bilinear2d_aa, _upsample_bicubic2d_aa): each output averages the inputs of a
// window around its centre, weighted by the filter (triangle, or cubic with A = -0.5) stretched by the downscale
// factor and normalized, as PyTorch's separable CPU kernel defines them. One [out, in] weight matrix per dim, built
// on the device from per-output centres and window bounds computed on the host in the kernel's opmath type; the last
// dim first, and a dim whose size does not change is left alone (as CPU's kernel skips it).
//
// The windows of anti-aliased interpolation in S (the kernel's opmath type: double for double inputs, else float):
// each output's centre, and [lo, hi) of the inputs it averages; `invscale` scales distances to the filter's.
template <typename S>
void aaWindows(bool cubic, int64_t in, int64_t out, bool align_corners, const HostScalar* scale,
               std::vector<double>& centres, std::vector<int64_t>& lo, std::vector<int64_t>& hi, double& invscale) {
  const S s = align_corners ? (out > 1 ? S(in - 1) / S(out - 1) : S(0)) : scaleValue<S>(scale, in, out);
  const S half_size = cubic ? S(2) : S(1);
  const S support = s >= S(1) ? half_size * s : half_size;
  invscale = double(s >= S(1) ? S(1) / s : S(1));
  for (int64_t o = 0; o < out; ++o) {
    const S centre = s * (S(o) + S(0.5));
    centres.push_back(double(centre));
    lo.push_back(std::max(int64_t(centre - support + S(0.5)), int64_t(0)));
    hi.push_back(std::min(int64_t(centre + support + S(0.5)), in));
  }
}

Value aaMatrix(Builder& b, bool cubic, int64_t in, int64_t out, bool align_corners, const HostScalar* scale, DType c) {
  std::vector<double> centres;
  std::vector<int64_t> lo, hi;
  double invscale = 1;
  if (c == DType::F64)
    aaWindows<double>(cubic, in, out, align_corners, scale, centres, lo, hi, invscale);
  else
    aaWindows<float>(cubic, in, out, align_corners, scale, centres, lo, hi, invscale);
  Shape sh = {out, in};
  Value col = b.iota({DType::S64, sh}, 1);
  Value ctr = b.broadcastInDim(weightTable(b, centres, c), sh, {0});
  Value x = b.abs(b.mul(b.add(b.sub(b.convert(col, c), ctr), b.constantF(0.5, c, sh)), b.constantF(invscale, c, sh)));
  Value one = b.constantF(1, c, sh), zero = b.zeros({c, sh});
  Value w;
  if (!cubic) {
    w = b.select(b.compare(x, one, Cmp::LT), b.sub(one, x), zero);
  } else {
    const double a = -0.5;
    w = b.select(b.compare(x, one, Cmp::LT), cubicConvolution1(b, x, a),
                 b.select(b.compare(x, b.constantF(2, c, sh), Cmp::LT), cubicConvolution2(b, x, a), zero));
  }
  Value inside = b.andOp(b.compare(col, b.broadcastInDim(b.constantI64s(lo, DType::S64), sh, {0}), Cmp::GE),
                         b.compare(col, b.broadcastInDim(b.constantI64s(hi, DType::S64), sh, {0}), Cmp::LT));
  w = b.select(inside, w, zero);
  Value total = b.broadcastInDim(b.reduce(w, {1}, ReduceKind::Sum), sh, {0});
  return b.select(b.compare(total, zero, Cmp::EQ), w, b.div(w, total));
}

// _upsample_{bilinear,bicubic}2d_aa(self, output_size, align_corners, scales_h, scales_w) and their backward
// (grad_output, output_size, input_size, align_corners, scales_h, scales_w): the transposed matrices.
std::vector<Value> upsampleAARule(Context& ctx, bool cubic, bool backward) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  bool ac = ctx.toBool(backward ? 3 : 2);
  auto scales = scalesFrom(ctx, backward ? 4 : 3, 2);
  const Shape in_shape = backward ? Shape(ctx.toInts(2)) : x.shape();
  const Shape out_shape = backward ? x.shape() : ctx.outputs[0].shape;
  DType c = accType(x.dtype());
  Value y = b.convert(x, c);
  int64_t lead = x.rank() - 2;
  for (int64_t k = 0; k < 2; ++k) {
    int64_t i = backward ? k : 1 - k;  // forward: width first, as CPU; backward: the reverse
    int64_t d = lead + i, in = in_shape[size_t(d)], out = out_shape[size_t(d)];
    if (in == out) continue;
    y = applyAlong(b, y, aaMatrix(b, cubic, in, out, ac, scales[size_t(i)], c), d, backward ? 0 : 1);
  }
  return {b.convert(y, x.dtype())};
}

// max_unpool2d(self, indices, output_size) / max_unpool3d(self, indices, output_size, stride, padding): each value
// goes to its flat position (its index) within its (n, c) plane of a zero output. Samples from max_pool repeat an
// index only for equal values, so the write order does not matter. An out-of-range index writes nothing.
std::vector<Value> maxUnpoolRule(Context& ctx, int64_t nsp) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0), idx = ctx.tensor(1);
  const TensorType& ot = ctx.outputs.at(0);
  int64_t r = x.rank(), lead = 1, in_plane = 1, out_plane = 1;
  for (int64_t k = 0; k < r - nsp; ++k) lead *= x.shape()[k];
  for (int64_t k = r - nsp; k < r; ++k) in_plane *= x.shape()[k];
  for (size_t k = ot.shape.size() - size_t(nsp); k < ot.shape.size(); ++k) out_plane *= ot.shape[k];
  if (idx.shape() != x.shape()) ctx.fail("indices must have the input's shape");
  Value out = b.zeros({x.dtype(), {lead, out_plane}});
  int64_t m = lead * in_plane;
  if (m > 0 && out_plane > 0) {
    Value rows = b.reshape(b.iota({DType::S64, {lead, in_plane}}, 0), {m, 1});
    Value cols = b.reshape(b.convert(idx, DType::S64), {m, 1});
    Builder::ScatterDims sd;
    sd.inserted_window_dims = {0, 1};
    sd.scatter_dims_to_operand_dims = {0, 1};
    sd.index_vector_dim = 1;
    out = b.scatter(out, b.concatenate({rows, cols}, 1), b.reshape(x, {m}), sd, std::nullopt);
  }
  return {b.reshape(out, ot.shape)};
}

// PyTorch CPU implements adaptive and fractional max pooling for floating inputs only: other calls decline, and
// its kernel raises.
bool floatInput(const Context& ctx) { return realDTypes(ctx) && shlo::isFloat(ctx.tensor(0).dtype()); }

// Pooling windows whose kernel sizes, strides, paddings and dilations fit in an int: CPU's kernels convert them
// (safe_downcast) and raise "value cannot be converted to type int without overflow" otherwise, and so do these
// calls (the CPU kernel raises its error).
void requireIntWindows(const Context& ctx) {
  for (const Arg& a : ctx.args)
    if (a.kind == Arg::Kind::IntList)
      for (int64_t v : a.ints)
        if (v > std::numeric_limits<int32_t>::max() || v < std::numeric_limits<int32_t>::min())
          throw InvalidCall(ctx.op(), "window argument past int");
}

}  // namespace

void populatePooling(Registry& r) {
  for (int64_t n = 1; n <= 3; ++n) {
    std::string nd = std::to_string(n) + "d";
    if (n > 1) {  // avg_pool1d / max_pool1d are composites of the 2-d ops
      r.add("aten::avg_pool" + nd, [n](Context& ctx) {
        requireIntWindows(ctx);
        return avgPoolRule(ctx, n);
      }).accepts(realDTypes);
      r.add("aten::avg_pool" + nd + "_backward", [n](Context& ctx) {
        requireIntWindows(ctx);
        return avgPoolBackwardRule(ctx, n);
      }).accepts(realDTypes);
      r.add("aten::max_pool" + nd + "_with_indices", [n](Context& ctx) {
        requireIntWindows(ctx);
        return maxPoolRule(ctx, n);
      }).accepts(realDTypes);
      r.add("aten::max_pool" + nd + "_with_indices_backward", [n](Context& ctx) {
        requireIntWindows(ctx);
        return maxPoolBackwardRule(ctx, n);
      }).accepts(realDTypes);
      r.add("aten::_adaptive_avg_pool" + nd, [n](Context& ctx) { return adaptiveAvgRule(ctx, n); }).accepts(realDTypes);
      r.add("aten::_adaptive_avg_pool" + nd + "_backward",
            [n](Context& ctx) { return adaptiveAvgBackwardRule(ctx, n); })
          .accepts(realDTypes);
      r.add("aten::max_unpool" + nd, [n](Context& ctx) { return maxUnpoolRule(ctx, n); }).accepts(realDTypes);
      r.add("aten::adaptive_max_pool" + nd, [n](Context& ctx) { return adaptiveMaxRule(ctx, n); }).accepts(floatInput);
      r.add("aten::adaptive_max_pool" + nd + "_backward", [n](Context& ctx) { return maxPoolBackwardRule(ctx, n, 2); })
          .accepts(floatInput);
      r.add("aten::fractional_max_pool" + nd, [n](Context& ctx) { return fractionalMaxRule(ctx, n); })
          .accepts(floatInput);
      r.add("aten::fractional_max_pool" + nd + "_backward",
            [n](Context& ctx) { return maxPoolBackwardRule(ctx, n, 4); })
          .accepts(floatInput);
    }
    std::vector<std::string> statics = n == 1 ? std::vector<std::string>{"scales"}
                                     : n == 2 ? std::vector<std::string>{"scales_h", "scales_w"}
                                              : std::vector<std::string>{"scales_d", "scales_h", "scales_w"};
    const char* lin = n == 1 ? "linear" : n == 2 ? "bilinear" : "trilinear";
    auto upsample = [n](Mode mode) -> RuleFn { return [n, mode](Context& ctx) { return upsampleRule(ctx, mode, n); }; };
    auto upsampleBackward = [n](Mode mode) -> RuleFn {
      return [n, mode](Context& ctx) { return upsampleBackwardRule(ctx, mode, n); };
    };
    auto nearestOk = [](const Context& ctx) { return upsampleAccepts(ctx, true); };
    auto linearOk = [](const Context& ctx) { return upsampleAccepts(ctx, false); };
    r.add("aten::upsample_nearest" + nd, upsample(Mode::Nearest)).staticArgs(statics).accepts(nearestOk);
    r.add("aten::upsample_nearest" + nd + "_backward", upsampleBackward(Mode::Nearest))
        .staticArgs(statics)
        .accepts(realDTypes);
    r.add("aten::_upsample_nearest_exact" + nd, upsample(Mode::NearestExact)).staticArgs(statics).accepts(nearestOk);
    r.add("aten::_upsample_nearest_exact" + nd + "_backward", upsampleBackward(Mode::NearestExact))
        .staticArgs(statics)
        .accepts(realDTypes);
    r.add(std::string("aten::upsample_") + lin + nd, upsample(Mode::Linear)).staticArgs(statics).accepts(linearOk);
    r.add(std::string("aten::upsample_") + lin + nd + "_backward", upsampleBackward(Mode::Linear))
        .staticArgs(statics)
        .accepts(realDTypes);
    if (n == 2) {  // bicubic and anti-aliased: 2-d only in PyTorch
      for (bool cubic : {false, true}) {
        std::string name = cubic ? "aten::_upsample_bicubic2d_aa" : "aten::_upsample_bilinear2d_aa";
        r.add(name, [cubic](Context& ctx) { return upsampleAARule(ctx, cubic, false); })
            .staticArgs(statics)
            .accepts(linearOk);
        r.add(name + "_backward", [cubic](Context& ctx) { return upsampleAARule(ctx, cubic, true); })
            .staticArgs(statics)
            .accepts(realDTypes);
      }
      r.add("aten::upsample_bicubic2d", upsample(Mode::Cubic)).staticArgs(statics).accepts(linearOk);
      r.add("aten::upsample_bicubic2d_backward", upsampleBackward(Mode::Cubic))
          .staticArgs(statics)
          .accepts(realDTypes);
    }
  }
}

}  // namespace torch_tpu::lowering
