// Convolution family: convolution / convolution_overrideable / _convolution (1-d, 2-d, 3-d; groups, stride,
// padding, dilation, transposed with output_padding) and convolution_backward(_overrideable).
//
// Every case is one stablehlo.convolution in the standard layout (input N C spatial..., kernel O I spatial...):
//   forward               conv(x, w) with rhs_dilation = dilation, feature groups = groups
//   transposed forward    conv(x, regroup(w) reversed) with lhs_dilation = stride, padding d*(k-1)-p (+output_padding)
//   grad_input            the transposed conv of grad_output (for a transposed forward: the plain conv)
//   grad_weight           conv of the input (batch and feature dims swapped) with grad_output as the kernel,
//                         window strides = dilation, rhs_dilation = stride, batch groups = groups
//   grad_bias             sum of grad_output over every dim but 1
// (the formulas of JAX's conv_general_dilated transposes). Padding may come out negative, which crops.
// bf16/f16 convolve in f32 (PyTorch CPU accumulates in float) and round once.
// im2col / col2im (F.unfold / F.fold): one gather / one scatter-add at patch positions computed with iotas.
#include <algorithm>
#include <limits>

#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

using Pads = std::vector<std::pair<int64_t, int64_t>>;

struct ConvParams {
  int64_t nsp = 0;  // spatial dims
  std::vector<int64_t> stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
};

// An int list of one entry per spatial dim (a single entry is repeated, as PyTorch's expand_param_if_needed does).
std::vector<int64_t> expand(const Context& ctx, const std::vector<int64_t>& v, int64_t n, int64_t dflt,
                            const char* what) {
  if (v.empty()) return std::vector<int64_t>(size_t(n), dflt);
  if (v.size() == 1) return std::vector<int64_t>(size_t(n), v[0]);
  if (int64_t(v.size()) != n) ctx.fail(std::string(what) + " needs " + std::to_string(n) + " entries");
  return v;
}

Builder::ConvDims standardDims(int64_t nsp) {
  Builder::ConvDims d;
  d.input_batch = 0;
  d.input_feature = 1;
  d.kernel_output_feature = 0;
  d.kernel_input_feature = 1;
  d.output_batch = 0;
  d.output_feature = 1;
  for (int64_t k = 0; k < nsp; ++k) {
    d.input_spatial.push_back(2 + k);
    d.kernel_spatial.push_back(2 + k);
    d.output_spatial.push_back(2 + k);
  }
  return d;
}

// The result shape stablehlo.convolution gives (the builder checks it).
Shape convShape(const Value& lhs, const Value& rhs, const Builder::ConvDims& d, const std::vector<int64_t>& strides,
                const Pads& pads, const std::vector<int64_t>& ld, const std::vector<int64_t>& rd, int64_t bgc) {
  Shape out(size_t(lhs.rank()));
  out[size_t(d.output_batch)] = lhs.shape()[size_t(d.input_batch)] / bgc;
  out[size_t(d.output_feature)] = rhs.shape()[size_t(d.kernel_output_feature)];
  for (size_t i = 0; i < d.input_spatial.size(); ++i) {
    int64_t x = lhs.shape()[size_t(d.input_spatial[i])];
    int64_t padded = (x > 0 ? (x - 1) * ld[i] + 1 : 0) + pads[i].first + pads[i].second;
    int64_t eff = (rhs.shape()[size_t(d.kernel_spatial[i])] - 1) * rd[i] + 1;
    out[size_t(d.output_spatial[i])] = padded < eff ? 0 : (padded - eff) / strides[i] + 1;
  }
  return out;
}

Value conv(Builder& b, Value lhs, Value rhs, const Builder::ConvDims& d, const std::vector<int64_t>& strides,
           const Pads& pads, const std::vector<int64_t>& ld, const std::vector<int64_t>& rd, int64_t fgc, int64_t bgc) {
  Shape out = convShape(lhs, rhs, d, strides, pads, ld, rd, bgc);
  return b.convolution(lhs, rhs, d, strides, pads, ld, rd, fgc, bgc, out);
}

// Kernel (A, B, k...) whose dim 0 holds g groups -> (g*B, A/g, k...): swaps the roles of its two feature dims
// group by group (the kernel of the transposed convolution).
Value regroup(Builder& b, Value w, int64_t g) {
  const Shape& s = w.shape();
  int64_t A = s[0], B = s[1];
  Shape split = {g, A / g, B};
  split.insert(split.end(), s.begin() + 2, s.end());
  std::vector<int64_t> perm = {0, 2, 1};
  for (int64_t k = 3; k < int64_t(split.size()); ++k) perm.push_back(k);
  Shape merged = {g * B, A / g};
  merged.insert(merged.end(), s.begin() + 2, s.end());
  return b.reshape(b.transpose(b.reshape(w, split), perm), merged);
}

std::vector<int64_t> spatialDims(int64_t nsp) {
  std::vector<int64_t> d;
  for (int64_t k = 0; k < nsp; ++k) d.push_back(2 + k);
  return d;
}

std::vector<int64_t> ones(int64_t n) { return std::vector<int64_t>(size_t(n), 1); }

int64_t dilated(int64_t n, int64_t d) { return n > 0 ? (n - 1) * d + 1 : 0; }

// Plain (non-transposed) convolution of x (N, C, sp) with w (O, C/g, k).
Value convForward(Builder& b, Value x, Value w, const ConvParams& p) {
  Pads pads;
  for (int64_t i = 0; i < p.nsp; ++i) pads.push_back({p.padding[i], p.padding[i]});
  return conv(b, x, w, standardDims(p.nsp), p.stride, pads, ones(p.nsp), p.dilation, p.groups, 1);
}

// The input gradient of a plain convolution: grad (N, O, osp), w (O, C/g, k) -> (N, C, in_sp).
Value convInputGrad(Builder& b, Value grad, Value w, const ConvParams& p, const Shape& in_sp) {
  Value wt = b.reverse(regroup(b, w, p.groups), spatialDims(p.nsp));
  Pads pads;
  for (int64_t i = 0; i < p.nsp; ++i) {
    int64_t kd = dilated(w.shape()[size_t(2 + i)], p.dilation[i]);
    int64_t od = dilated(grad.shape()[size_t(2 + i)], p.stride[i]);
    int64_t lo = kd - p.padding[i] - 1;
    int64_t hi = in_sp[size_t(i)] + kd - 1 - od - lo;
    pads.push_back({lo, hi});
  }
  return conv(b, grad, wt, standardDims(p.nsp), ones(p.nsp), pads, p.stride, p.dilation, p.groups, 1);
}

// The weight gradient of a plain convolution: x (N, C, in_sp), grad (N, O, osp) -> (O, C/g, k_sp).
Value convWeightGrad(Builder& b, Value x, Value grad, const ConvParams& p, const Shape& k_sp) {
  Builder::ConvDims d;
  d.input_batch = 1;  // C plays the batch
  d.input_feature = 0;
  d.kernel_input_feature = 0;  // N contracts
  d.kernel_output_feature = 1;
  d.output_batch = 1;
  d.output_feature = 0;
  d.input_spatial = d.kernel_spatial = d.output_spatial = spatialDims(p.nsp);
  Pads pads;
  for (int64_t i = 0; i < p.nsp; ++i) {
    int64_t kd = dilated(k_sp[size_t(i)], p.dilation[i]);
    int64_t od = dilated(grad.shape()[size_t(2 + i)], p.stride[i]);
    int64_t in = x.shape()[size_t(2 + i)];
    int64_t lo = p.padding[i];
    pads.push_back({lo, od - in + kd - lo - 1});
  }
  return conv(b, x, grad, d, p.dilation, pads, ones(p.nsp), p.stride, 1, p.groups);
}

// The input gradient of a transposed convolution: the plain convolution of grad (N, Cout, osp) with w, its high
// padding chosen so the result has the input's size in_sp exactly (output_padding may exceed what the plain
// convolution's size formula can give back).
Value convTransposedInputGrad(Builder& b, Value grad, Value w, const ConvParams& p, const Shape& in_sp) {
  Pads pads;
  for (int64_t i = 0; i < p.nsp; ++i) {
    int64_t kd = dilated(w.shape()[size_t(2 + i)], p.dilation[i]);
    int64_t osp = grad.shape()[size_t(2 + i)];
    pads.push_back({p.padding[i], (in_sp[size_t(i)] - 1) * p.stride[i] + kd - osp - p.padding[i]});
  }
  return conv(b, grad, w, standardDims(p.nsp), p.stride, pads, ones(p.nsp), p.dilation, p.groups, 1);
}

// Transposed convolution of x (N, Cin, sp) with w (Cin, Cout/g, k).
Value convTransposed(Builder& b, Value x, Value w, const ConvParams& p) {
  Value wt = b.reverse(regroup(b, w, p.groups), spatialDims(p.nsp));
  Pads pads;
  for (int64_t i = 0; i < p.nsp; ++i) {
    int64_t e = p.dilation[i] * (w.shape()[size_t(2 + i)] - 1) - p.padding[i];
    pads.push_back({e, e + p.output_padding[i]});
  }
  return conv(b, x, wt, standardDims(p.nsp), ones(p.nsp), pads, p.stride, p.dilation, p.groups, 1);
}

// (stride, padding, dilation, transposed, output_padding, groups) starting at argument `first`.
ConvParams params(const Context& ctx, size_t first, int64_t nsp) {
  ConvParams p;
  p.nsp = nsp;
  p.stride = expand(ctx, ctx.toInts(first), nsp, 1, "stride");
  p.padding = expand(ctx, ctx.toInts(first + 1), nsp, 0, "padding");
  p.dilation = expand(ctx, ctx.toInts(first + 2), nsp, 1, "dilation");
  p.transposed = ctx.toBool(first + 3);
  p.output_padding = expand(ctx, ctx.toInts(first + 4), nsp, 0, "output_padding");
  p.groups = ctx.toInt(first + 5);
  if (p.groups < 1) ctx.fail("groups must be positive");
  return p;
}

// convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups, ...)
std::vector<Value> convolutionRule(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0), w = ctx.tensor(1);
  int64_t nsp = w.rank() - 2;
  if (nsp < 1) ctx.fail("weight must have at least 3 dimensions");
  bool unbatched = x.rank() == w.rank() - 1;
  if (unbatched) {
    Shape s = x.shape();
    s.insert(s.begin(), 1);
    x = b.reshape(x, s);
  }
  ConvParams p = params(ctx, 3, nsp);
  // PyTorch raises "Output size is too small" when a spatial output size is not positive; its meta kernel for
  // transposed convolutions does not, so the call goes to the CPU kernel, which raises
  if (!ctx.outputs.empty() && ctx.outputs[0].shape.size() >= size_t(nsp)) {
    const Shape& os = ctx.outputs[0].shape;
    for (size_t k = os.size() - size_t(nsp); k < os.size(); ++k)
      if (os[k] <= 0) ctx.fail("output size is too small");
  }
  DType out = ctx.outputs[0].dtype != DType::Invalid ? ctx.outputs[0].dtype : x.dtype();
  DType c = accType(promote(x.dtype(), w.dtype()));
  Value xc = b.convert(x, c), wc = b.convert(w, c);
  Value y = p.transposed ? convTransposed(b, xc, wc, p) : convForward(b, xc, wc, p);
  if (ctx.has(2)) y = b.add(y, b.broadcastInDim(b.convert(ctx.tensor(2), c), y.shape(), {1}));
  if (unbatched) y = b.reshape(y, Shape(y.shape().begin() + 1, y.shape().end()));
  return {b.convert(y, out)};
}

// convolution_backward(grad_output, input, weight, bias_sizes?, stride, padding, dilation, transposed,
//                      output_padding, groups, output_mask) (first = 4)
// convolution_backward_overrideable(grad_output, input, weight, stride, ..., groups, output_mask) (first = 3)
std::vector<Value> convolutionBackwardRule(Context& ctx, size_t first) {
  Builder& b = ctx.b;
  Value g = ctx.tensor(0), x = ctx.tensor(1), w = ctx.tensor(2);
  int64_t nsp = w.rank() - 2;
  if (nsp < 1) ctx.fail("weight must have at least 3 dimensions");
  ConvParams p = params(ctx, first, nsp);
  std::vector<bool> mask = ctx.arg(first + 6).bools;
  mask.resize(3, true);
  auto wanted = [&](size_t k) { return mask[k] && k < ctx.outputs.size() && ctx.outputs[k].dtype != DType::Invalid; };
  bool unbatched = x.rank() == w.rank() - 1;
  auto batch = [&](Value v) {
    if (!unbatched) return v;
    Shape s = v.shape();
    s.insert(s.begin(), 1);
    return b.reshape(v, s);
  };
  DType c = accType(promote(x.dtype(), w.dtype()));
  Value gc = b.convert(batch(g), c), xc = b.convert(batch(x), c), wc = b.convert(w, c);
  Shape in_sp(xc.shape().begin() + 2, xc.shape().end());
  Shape k_sp(w.shape().begin() + 2, w.shape().end());
  std::vector<Value> res(3);
  if (wanted(0)) {
    Value gi = p.transposed ? convTransposedInputGrad(b, gc, wc, p, in_sp) : convInputGrad(b, gc, wc, p, in_sp);
    if (gi.shape() != xc.shape()) ctx.fail("grad_input has shape " + gi.type.str() + ", expected " + xc.type.str());
    if (unbatched) gi = b.reshape(gi, x.shape());
    res[0] = b.convert(gi, ctx.outputs[0].dtype);
  }
  if (wanted(1)) {
    // A transposed convolution's weight gradient is the plain one with the roles of input and grad swapped.
    Value gw = p.transposed ? convWeightGrad(b, gc, xc, p, k_sp) : convWeightGrad(b, xc, gc, p, k_sp);
    res[1] = b.convert(gw, ctx.outputs[1].dtype);
  }
  if (wanted(2)) {
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < gc.rank(); ++d)
      if (d != 1) dims.push_back(d);
    res[2] = b.convert(b.reduce(gc, dims, ReduceKind::Sum), ctx.outputs[2].dtype);
  }
  return res;
}

// Real dtypes; negative padding is left to PyTorch's CPU kernel, which raises for it (the meta kernel does not).
bool convAccepts(const Context& ctx) {
  if (!realDTypes(ctx)) return false;
  for (const Arg& a : ctx.args)
    if (a.name == "padding" && a.kind == Arg::Kind::IntList)
      for (int64_t v : a.ints)
        if (v < 0) return false;
  return true;
}

// The patch grid of im2col / col2im: for kernel offset (ki, kj) and block (bi, bj), the flat position
// r * W + c of the image element it reads or writes, r = bi * stride_h - pad_h + ki * dilation_h (c likewise),
// shaped (kh * kw * bh * bw) in the order of the columns tensor's (C, kh, kw, L) layout. Out-of-image positions
// (the zero padding) map to `outside`. Computed with iotas, so the program's size does not grow with the kernel.
Value patchPositions(Builder& b, const std::vector<int64_t>& ks, const std::vector<int64_t>& dil,
                     const std::vector<int64_t>& pad, const std::vector<int64_t>& st, int64_t bh, int64_t bw,
                     int64_t H, int64_t W, int64_t outside) {
  Shape grid{ks[0], ks[1], bh, bw};
  auto num = [&](int64_t v) { return b.broadcastTo(b.constantInt(v, DType::S64), grid); };
  auto io = [&](int64_t d) { return b.iota({DType::S64, grid}, d); };
  Value r = b.add(b.add(b.mul(io(2), num(st[0])), b.mul(io(0), num(dil[0]))), num(-pad[0]));
  Value c = b.add(b.add(b.mul(io(3), num(st[1])), b.mul(io(1), num(dil[1]))), num(-pad[1]));
  Value inside = b.andOp(b.andOp(b.compare(r, num(0), Cmp::GE), b.compare(r, num(H), Cmp::LT)),
                         b.andOp(b.compare(c, num(0), Cmp::GE), b.compare(c, num(W), Cmp::LT)));
  Value flat = b.select(inside, b.add(b.mul(r, num(W)), c), num(outside));
  return b.reshape(flat, {ks[0] * ks[1] * bh * bw, 1});
}

int64_t blocks(int64_t size, int64_t k, int64_t dil, int64_t pad, int64_t st) {
  return (size + 2 * pad - dil * (k - 1) - 1) / st + 1;
}

// col2im(self, output_size, kernel_size, dilation, padding, stride) (F.fold): columns (N, C*kh*kw, L) or
// (C*kh*kw, L) summed into the image (N, C, H, W): one scatter-add of every column element at its patch position
// into a flat image with one extra slot that takes the padding's elements and is cut off. Sums in accType.
// im2col/col2im's window arguments as CPU's im2col_shape_check/col2im_shape_check want them (kernel sizes, dilations
// and strides positive, paddings not negative, all within int): otherwise the CPU kernel raises PyTorch's error.
void checkUnfoldWindows(const Context& ctx, const std::vector<int64_t>& ks, const std::vector<int64_t>& dil,
                        const std::vector<int64_t>& pad, const std::vector<int64_t>& st) {
  const int64_t big = std::numeric_limits<int32_t>::max();
  for (size_t i = 0; i < ks.size(); ++i)
    if (ks[i] <= 0 || dil[i] <= 0 || pad[i] < 0 || st[i] <= 0 || ks[i] > big || dil[i] > big || pad[i] > big ||
        st[i] > big)
      throw InvalidCall(ctx.op(), "window argument out of range");
}

std::vector<Value> col2imRule(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  const std::vector<int64_t> os = ctx.toInts(1), ks = ctx.toInts(2), dil = ctx.toInts(3), pad = ctx.toInts(4),
                             st = ctx.toInts(5);
  if (os.size() != 2 || ks.size() != 2 || dil.size() != 2 || pad.size() != 2 || st.size() != 2)
    ctx.fail("needs two entries per size argument");
  checkUnfoldWindows(ctx, ks, dil, pad, st);
  bool batched = x.rank() == 3;
  int64_t N = batched ? x.shape()[0] : 1, CK = x.shape()[batched ? 1 : 0], L = x.shape().back();
  int64_t K = ks[0] * ks[1], C = CK / K, H = os[0], W = os[1];
  int64_t bh = blocks(H, ks[0], dil[0], pad[0], st[0]), bw = blocks(W, ks[1], dil[1], pad[1], st[1]);
  if (bh * bw != L) ctx.fail("column count does not match the blocks of output_size");
  DType acc = accType(x.dtype());
  Value out = b.zeros({acc, {N, C, H * W + 1}});
  if (N * C * K * L > 0) {
    Value idx = patchPositions(b, ks, dil, pad, st, bh, bw, H, W, H * W);
    Value upd = b.reshape(b.convert(x, acc), {N, C, K * L});
    Builder::ScatterDims sd;
    sd.update_window_dims = {0, 1};
    sd.inserted_window_dims = {2};
    sd.scatter_dims_to_operand_dims = {2};
    sd.index_vector_dim = 1;
    out = b.scatter(out, idx, upd, sd, ReduceKind::Sum);
  }
  out = b.sliceInDim(out, 0, H * W, 1, 2);
  return {b.convert(b.reshape(out, ctx.outputs[0].shape), x.dtype())};
}

// im2col(self, kernel_size, dilation, padding, stride) (F.unfold): the image (N, C, H, W) or (C, H, W) to columns
// (N, C*kh*kw, L): one gather from the flat image with a zero appended, which the padding's positions read.
std::vector<Value> im2colRule(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  const std::vector<int64_t> ks = ctx.toInts(1), dil = ctx.toInts(2), pad = ctx.toInts(3), st = ctx.toInts(4);
  if (ks.size() != 2 || dil.size() != 2 || pad.size() != 2 || st.size() != 2)
    ctx.fail("needs two entries per size argument");
  checkUnfoldWindows(ctx, ks, dil, pad, st);
  bool batched = x.rank() == 4;
  int64_t N = batched ? x.shape()[0] : 1, C = x.shape()[batched ? 1 : 0];
  int64_t H = x.shape()[size_t(x.rank() - 2)], W = x.shape()[size_t(x.rank() - 1)];
  int64_t bh = blocks(H, ks[0], dil[0], pad[0], st[0]), bw = blocks(W, ks[1], dil[1], pad[1], st[1]);
  int64_t K = ks[0] * ks[1], L = bh * bw;
  if (N * C * K * L == 0 || H * W == 0) return {b.zeros(ctx.outputs[0])};
  Value flat = b.reshape(x, {N, C, H * W});
  flat = b.concatenate({flat, b.zeros({x.dtype(), {N, C, 1}})}, 2);
  Value idx = patchPositions(b, ks, dil, pad, st, bh, bw, H, W, H * W);
  Builder::GatherDims gd;
  gd.offset_dims = {0, 1};
  gd.collapsed_slice_dims = {2};
  gd.start_index_map = {2};
  gd.index_vector_dim = 1;
  Value cols = b.gather(flat, idx, gd, {N, C, 1}, {N, C, K * L}, /*indices_are_sorted=*/false);
  return {b.reshape(cols, ctx.outputs[0].shape)};
}

}  // namespace

void populateConv(Registry& r) {
  r.add("aten::convolution", convolutionRule).accepts(convAccepts);
  r.add("aten::convolution_overrideable", convolutionRule).accepts(convAccepts);
  r.add("aten::_convolution", convolutionRule).accepts(convAccepts);
  r.add("aten::_convolution.deprecated", convolutionRule).accepts(convAccepts);
  r.add("aten::convolution_backward", [](Context& ctx) { return convolutionBackwardRule(ctx, 4); })
      .accepts(convAccepts);
  r.add("aten::convolution_backward_overrideable", 
          [](Context& ctx) { return convolutionBackwardRule(ctx, 3); }).accepts(convAccepts);
  r.add("aten::col2im", col2imRule).accepts(realDTypes).complex();
  r.add("aten::im2col", im2colRule).accepts(realDTypes).complex();
}

}  // namespace torch_tpu::lowering
