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
#include <algorithm>

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
}

}  // namespace torch_tpu::lowering
