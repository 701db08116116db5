// Grid sampling family: grid_sampler_2d and grid_sampler_3d (F.grid_sample) and their backward.
//
// Each output location reads the input at the position its grid entry names (x along the width, y along the
// height, in [-1, 1]), unnormalized and folded into the input by the padding mode as PyTorch's CPU kernel does:
// zeros (taps outside read 0), border (clipped), reflection (mirrored, then clipped). Bilinear interpolation weighs
// the 2^n neighbours, nearest takes the nearest one (ties to even), bicubic (2-d) the 4x4 neighbours with
// A = -0.75, each tap folded by the padding mode. Taps are gathers of the input's rows (one per (n, y, x), holding
// the C channels); the backward scatters the weighted output gradient back into those rows and differentiates the
// weights for the grid (bilinear; nearest gives the grid no gradient). The bicubic backward declines (CPU kernel).
// Half types compute in f32 and round once.
#include <cmath>

#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

enum Interp : int64_t { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };

// A coordinate with its derivative with respect to the grid value (d = nullptr: not needed).
struct Coord {
  Value v, d;
};

// clip to [0, size - 1]; the gradient is 0 at and beyond the borders (CPU's clip_coordinates_set_grad).
Coord clip(Builder& b, Coord c, int64_t size) {
  Value zero = b.zerosLike(c.v), hi = cst(b, double(size - 1), c.v);
  Value v = b.min(b.max(c.v, zero), hi);
  Value d;
  if (c.d.valid()) {
    Value inside = b.andOp(b.compare(c.v, zero, Cmp::GT), b.compare(c.v, hi, Cmp::LT));
    d = b.select(inside, c.d, b.zerosLike(c.d));
  }
  return {v, d};
}

// reflect into [twice_low / 2, twice_high / 2] (CPU's reflect_coordinates[_set_grad]).
Coord reflect(Builder& b, Coord c, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return {b.zerosLike(c.v), c.d.valid() ? b.zerosLike(c.d) : Value()};
  double lo = double(twice_low) / 2, span = double(twice_high - twice_low) / 2;
  Value in = b.sub(c.v, cst(b, lo, c.v));
  Value neg = b.compare(in, b.zerosLike(in), Cmp::LT);
  Value a = b.abs(in);
  Value spanv = cst(b, span, a);
  Value extra = b.rem(a, spanv);
  Value flips = b.floor(b.div(a, spanv));
  Value even = b.compare(b.rem(flips, cst(b, 2, flips)), b.zerosLike(flips), Cmp::EQ);
  Value v = b.add(b.select(even, extra, b.sub(spanv, extra)), cst(b, lo, extra));
  Value d;
  if (c.d.valid()) {
    Value sign = b.select(neg, cst(b, -1, a), cst(b, 1, a));
    d = b.mul(c.d, b.select(even, sign, b.neg(sign)));
  }
  return {v, d};
}

// The padding mode applied to an unnormalized coordinate (CPU's compute_coordinates).
Coord fold(Builder& b, Coord c, int64_t size, int64_t padding, bool align_corners) {
  if (padding == kBorder) return clip(b, c, size);
  if (padding == kReflection) {
    c = align_corners ? reflect(b, c, 0, 2 * (size - 1)) : reflect(b, c, -1, 2 * size - 1);
    return clip(b, c, size);
  }
  return c;
}

// grid value in [-1, 1] -> input coordinate; its derivative is the constant scale.
Coord unnormalize(Builder& b, Value g, int64_t size, bool align_corners, bool grad) {
  double scale = align_corners ? double(size - 1) / 2 : double(size) / 2;
  Value v = align_corners ? b.mul(b.add(g, cst(b, 1, g)), cst(b, scale, g))
                          : b.div(b.sub(b.mul(b.add(g, cst(b, 1, g)), cst(b, double(size), g)), cst(b, 1, g)),
                                  cst(b, 2, g));
  return {v, grad ? cst(b, scale, g) : Value()};
}

// The sampled input: x ([N, C, spatial...]) as rows [N * prod(spatial), C]; a tap addresses them by one
// float-valued integer coordinate per spatial dim (input order: depth, height, width), each of the output's shape
// [N, spatial_out...].
struct Sampler {
  Builder& b;
  int64_t N, C, ns;
  Shape in_sp, out;  // input spatial sizes; [N, spatial_out...]
  DType c;
  Value rows, base;

  Sampler(Builder& b_, Value x, const Shape& grid_shape, DType ct) : b(b_), c(ct) {
    N = x.shape()[0], C = x.shape()[1], ns = x.rank() - 2;
    in_sp.assign(x.shape().begin() + 2, x.shape().end());
    out.assign(grid_shape.begin(), grid_shape.end() - 1);
    std::vector<int64_t> perm = {0};
    for (int64_t d = 0; d < ns; ++d) perm.push_back(2 + d);
    perm.push_back(1);
    rows = b.reshape(b.transpose(b.convert(x, c), perm), {N * numel(in_sp), C});
    base = b.mul(b.iota({DType::S64, out}, 0), b.broadcastTo(b.constantInt(numel(in_sp), DType::S64), out));
  }
  Shape withC() const {
    Shape s = out;
    s.push_back(C);
    return s;
  }
  Value spread(Value w) { return b.broadcastInDim(w, withC(), range(0, int64_t(out.size()))); }
  Value inBounds(const std::vector<Value>& idx) {
    Value ok;
    for (int64_t d = 0; d < ns; ++d) {
      Value i = idx[size_t(d)];
      Value in = b.andOp(b.compare(i, b.zerosLike(i), Cmp::GE),
                         b.compare(i, cst(b, double(in_sp[size_t(d)]), i), Cmp::LT));
      ok = d == 0 ? in : b.andOp(ok, in);
    }
    return ok;
  }
  // Row of a tap (clamped into the input; out-of-bounds taps are masked by the caller).
  Value rowIndex(const std::vector<Value>& idx) {
    Value lin;
    for (int64_t d = 0; d < ns; ++d) {
      Value i = idx[size_t(d)];
      Value k = b.convert(b.min(b.max(i, b.zerosLike(i)), cst(b, double(in_sp[size_t(d)] - 1), i)), DType::S64);
      lin = d == 0 ? k : b.add(b.mul(lin, b.broadcastTo(b.constantInt(in_sp[size_t(d)], DType::S64), out)), k);
    }
    return b.add(base, lin);
  }
  // Values [N, spatial_out..., C] at a tap, 0 outside the input.
  Value read(const std::vector<Value>& idx) {
    Value v = takeRows(b, rows, rowIndex(idx));
    return b.select(b.broadcastInDim(inBounds(idx), withC(), range(0, int64_t(out.size()))), v, b.zerosLike(v));
  }
  // Adds w * g (weight [N, spatial_out...] times gradient [N, spatial_out..., C]) into `acc` at in-bounds taps.
  Value scatterAdd(Value acc, const std::vector<Value>& idx, Value w, Value g) {
    Value upd = b.mul(g, spread(b.mul(w, b.convert(inBounds(idx), c))));
    int64_t m = numel(out);
    Builder::ScatterDims sd;
    sd.update_window_dims = {1};
    sd.inserted_window_dims = {0};
    sd.scatter_dims_to_operand_dims = {0};
    sd.index_vector_dim = 1;
    return b.scatter(acc, b.reshape(rowIndex(idx), {m, 1}), b.reshape(upd, {m, C}), sd, ReduceKind::Sum);
  }
};

// PyTorch's cubic convolution coefficients of the 4 taps around fraction t (A = -0.75).
std::vector<Value> cubicCoefficients(Builder& b, Value t) {
  const double A = -0.75;
  Value one = cst(b, 1, t), x2 = b.sub(one, t);
  return {cubicConvolution2(b, b.add(t, one), A), cubicConvolution1(b, t, A), cubicConvolution1(b, x2, A),
          cubicConvolution2(b, b.add(x2, one), A)};
}

// The grid's component for input spatial dim d (the grid lists x, y[, z]: width first).
Value gridComponent(Builder& b, Value g, int64_t ns, int64_t d) {
  int64_t k = ns - 1 - d, last = g.rank() - 1;
  Shape s(g.shape().begin(), g.shape().end() - 1);
  return b.reshape(b.sliceInDim(g, k, k + 1, 1, last), s);
}

// The 2^ns corners of the linear interpolation, in CPU's order (the outermost dim's bit highest), each with its
// taps and, per dim, the factor of its weight: i - i0 (upper tap) or i1 - i (lower tap).
struct Corner {
  std::vector<Value> idx, factor;
  std::vector<bool> upper;
};

std::vector<Corner> corners(Builder& b, const std::vector<Value>& pos) {
  int64_t ns = int64_t(pos.size());
  std::vector<Value> lo, hi;
  for (const Value& p : pos) {
    lo.push_back(b.floor(p));
    hi.push_back(b.add(lo.back(), cst(b, 1, p)));
  }
  std::vector<Corner> out;
  for (int64_t k = 0; k < (int64_t(1) << ns); ++k) {
    Corner c;
    for (int64_t d = 0; d < ns; ++d) {
      bool up = (k >> (ns - 1 - d)) & 1;
      c.upper.push_back(up);
      c.idx.push_back(up ? hi[size_t(d)] : lo[size_t(d)]);
      c.factor.push_back(up ? b.sub(pos[size_t(d)], lo[size_t(d)]) : b.sub(hi[size_t(d)], pos[size_t(d)]));
    }
    out.push_back(std::move(c));
  }
  return out;
}

// Product of a corner's factors, width first (CPU's order), leaving out dim `skip` (-1: none).
Value weight(Builder& b, const Corner& c, int64_t skip = -1) {
  Value w;
  for (int64_t d = int64_t(c.factor.size()) - 1; d >= 0; --d) {
    if (d == skip) continue;
    w = w.valid() ? b.mul(w, c.factor[size_t(d)]) : c.factor[size_t(d)];
  }
  return w.valid() ? w : b.onesLike(c.factor[0]);
}

// Moves the channel dim of [N, spatial..., C] to position 1.
Value channelsSecond(Builder& b, Value v) {
  std::vector<int64_t> perm = {0, v.rank() - 1};
  for (int64_t d = 1; d < v.rank() - 1; ++d) perm.push_back(d);
  return b.transpose(v, perm);
}

// grid_sampler_{2,3}d(input, grid, interpolation_mode, padding_mode, align_corners)
std::vector<Value> gridSamplerRule(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0), grid = ctx.tensor(1);
  int64_t interp = ctx.toInt(2), padding = ctx.toInt(3);
  bool ac = ctx.toBool(4);
  DType c = accType(x.dtype());
  Sampler s(b, x, grid.shape(), c);
  Value g = b.convert(grid, c);
  Value out;
  if (interp == kBicubic) {  // 2-d only
    Value ix = unnormalize(b, gridComponent(b, g, 2, 1), s.in_sp[1], ac, false).v;
    Value iy = unnormalize(b, gridComponent(b, g, 2, 0), s.in_sp[0], ac, false).v;
    Value x0 = b.floor(ix), y0 = b.floor(iy);
    std::vector<Value> wx = cubicCoefficients(b, b.sub(ix, x0)), wy = cubicCoefficients(b, b.sub(iy, y0));
    // Each tap folded by the padding mode (CPU's get_value_bounded); rows of the 4x4 neighbourhood x first.
    for (int64_t i = 0; i < 4; ++i) {
      Value yi = fold(b, {b.add(y0, cst(b, double(i - 1), y0)), Value()}, s.in_sp[0], padding, ac).v;
      Value rowv;
      for (int64_t j = 0; j < 4; ++j) {
        Value xj = fold(b, {b.add(x0, cst(b, double(j - 1), x0)), Value()}, s.in_sp[1], padding, ac).v;
        Value t = b.mul(s.read({b.floor(yi), b.floor(xj)}), s.spread(wx[size_t(j)]));
        rowv = j == 0 ? t : b.add(rowv, t);
      }
      Value t = b.mul(rowv, s.spread(wy[size_t(i)]));
      out = i == 0 ? t : b.add(out, t);
    }
  } else {
    std::vector<Value> pos;
    for (int64_t d = 0; d < s.ns; ++d)
      pos.push_back(
          fold(b, unnormalize(b, gridComponent(b, g, s.ns, d), s.in_sp[size_t(d)], ac, false), s.in_sp[size_t(d)],
               padding, ac)
              .v);
    if (interp == kNearest) {
      std::vector<Value> idx;
      for (const Value& p : pos) idx.push_back(b.roundNearestEven(p));
      out = s.read(idx);
    } else {
      for (const Corner& k : corners(b, pos)) {
        Value t = b.mul(s.read(k.idx), s.spread(weight(b, k)));
        out = out.valid() ? b.add(out, t) : t;
      }
    }
  }
  return {b.convert(channelsSecond(b, out), x.dtype())};
}

// grid_sampler_{2,3}d_backward(grad_output, input, grid, interpolation_mode, padding_mode, align_corners,
// output_mask) -> (grad_input, grad_grid)
std::vector<Value> gridSamplerBackwardRule(Context& ctx) {
  Builder& b = ctx.b;
  Value go = ctx.tensor(0), x = ctx.tensor(1), grid = ctx.tensor(2);
  int64_t interp = ctx.toInt(3), padding = ctx.toInt(4);
  bool ac = ctx.toBool(5);
  bool want_input = ctx.outputs[0].dtype != DType::Invalid, want_grid = ctx.outputs[1].dtype != DType::Invalid;
  DType c = accType(x.dtype());
  Sampler s(b, x, grid.shape(), c);
  Value g = b.convert(grid, c);
  std::vector<int64_t> perm = {0};  // grad_output [N, C, spatial...] -> [N, spatial..., C]
  for (int64_t d = 0; d < s.ns; ++d) perm.push_back(2 + d);
  perm.push_back(1);
  Value gout = b.transpose(b.convert(go, c), perm);
  std::vector<Coord> pos;
  for (int64_t d = 0; d < s.ns; ++d)
    pos.push_back(fold(b, unnormalize(b, gridComponent(b, g, s.ns, d), s.in_sp[size_t(d)], ac, true),
                       s.in_sp[size_t(d)], padding, ac));
  Value acc = b.zeros({c, {s.N * numel(s.in_sp), s.C}});
  Value grad_input, grad_grid;
  if (interp == kNearest) {
    std::vector<Value> idx;
    for (const Coord& p : pos) idx.push_back(b.roundNearestEven(p.v));
    if (want_input) acc = s.scatterAdd(acc, idx, b.onesLike(idx[0]), gout);
    if (want_grid) grad_grid = b.zeros({c, grid.shape()});
  } else {
    std::vector<Value> pv;
    for (const Coord& p : pos) pv.push_back(p.v);
    std::vector<Corner> ks = corners(b, pv);
    if (want_input)
      for (const Corner& k : ks) acc = s.scatterAdd(acc, k.idx, weight(b, k), gout);
    if (want_grid) {
      std::vector<Value> comps(size_t(s.ns));
      for (const Corner& k : ks) {
        Value vg = b.reduce(b.mul(s.read(k.idx), gout), {int64_t(s.out.size())}, ReduceKind::Sum);
        for (int64_t d = 0; d < s.ns; ++d) {
          Value t = b.mul(vg, weight(b, k, d));
          Value& cd = comps[size_t(d)];
          cd = !cd.valid() ? (k.upper[size_t(d)] ? t : b.neg(t)) : (k.upper[size_t(d)] ? b.add(cd, t) : b.sub(cd, t));
        }
      }
      Shape one = s.out;
      one.push_back(1);
      std::vector<Value> parts;  // the grid's order: x (width) first
      for (int64_t d = s.ns - 1; d >= 0; --d)
        parts.push_back(b.reshape(b.mul(comps[size_t(d)], pos[size_t(d)].d), one));
      grad_grid = b.concatenate(parts, int64_t(s.out.size()));
    }
  }
  if (want_input) {
    Shape sp = {s.N};
    sp.insert(sp.end(), s.in_sp.begin(), s.in_sp.end());
    sp.push_back(s.C);
    grad_input = b.convert(channelsSecond(b, b.reshape(acc, sp)), x.dtype());
  }
  if (want_grid) grad_grid = b.convert(grad_grid, grid.dtype());
  return {grad_input, grad_grid};
}

// PyTorch CPU samples floating inputs; interpolation 0-2 (3-d: 0-1), padding 0-2, an (N, C, spatial...) input and
// an (N, spatial_out..., n) grid.
bool gridSamplerAccepts(const Context& ctx, size_t first, int64_t ns, bool backward) {
  if (!realDTypes(ctx)) return false;
  Value x = ctx.tensor(first), grid = ctx.tensor(first + 1);
  if (!shlo::isFloat(x.dtype()) || grid.dtype() != x.dtype()) return false;
  const Shape xs = x.shape(), gs = grid.shape();
  if (int64_t(xs.size()) != ns + 2 || gs.size() != xs.size() || gs.back() != ns || gs[0] != xs[0]) return false;
  int64_t interp = ctx.toInt(first + 2), padding = ctx.toInt(first + 3);
  if (interp < 0 || interp > (ns == 2 ? 2 : 1) || padding < 0 || padding > 2) return false;
  return !(backward && interp == kBicubic);
}

}  // namespace

void populateGridSampler(Registry& r) {
  for (int64_t ns : {2, 3}) {
    std::string name = "aten::grid_sampler_" + std::to_string(ns) + "d";
    r.add(name, gridSamplerRule).accepts([ns](const Context& ctx) { return gridSamplerAccepts(ctx, 0, ns, false); });
    r.add(name + "_backward", gridSamplerBackwardRule).accepts([ns](const Context& ctx) {
      return gridSamplerAccepts(ctx, 1, ns, true);
    });
  }
}

}  // namespace torch_tpu::lowering
