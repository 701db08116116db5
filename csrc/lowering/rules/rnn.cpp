// RNN family: the fused LSTM and GRU cells PyTorch calls on every accelerator device (aten/src/ATen/native/RNN.cpp
// uses them for cuda, xpu and privateuseone inputs), and their backward:
//
//   _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias?, hidden_bias?) -> (hy, cy, workspace)
//   _thnn_fused_lstm_cell_backward_impl(grad_hy?, grad_cy?, cx, cy, workspace, has_bias)
//       -> (grad_gates, grad_cx, grad_bias?)
//   _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias?, hidden_bias?) -> (hy, workspace)
//   _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias)
//       -> (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias?, grad_hidden_bias?)
//
// nn.LSTM/GRU/LSTMCell/GRUCell reach these through the composite aten::lstm / gru / lstm_cell / gru_cell (the matrix
// products stay mm/addmm calls); nn.RNN's cells are composite (linear + tanh/relu) and need nothing here. The
// workspaces have the CUDA kernels' layouts (RNN.cu), so a workspace means the same on every device:
//   LSTM [B, 4H]: the activated gates i, f, g, o (sigmoid, sigmoid, tanh, sigmoid).
//   GRU  [B, 5H]: r, z (sigmoid), n (tanh), hx, and the hidden-side new-gate pre-activation hn + b_hn.
// Gate order is PyTorch's: LSTM (i, f, g, o), GRU (r, z, n). Half-precision operands compute in f32 (accType) and
// round once, like the CUDA kernels' accscalar_t.
#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

// Every tensor argument is a floating dtype (the CUDA kernels dispatch on floating types only).
bool floatTensors(const Context& ctx) {
  if (!realDTypes(ctx)) return false;
  for (const Arg& a : ctx.args)
    if (a.kind == Arg::Kind::Tensor && !a.wrapped_number && !shlo::isFloat(a.tensor.dtype())) return false;
  return true;
}

// Chunk k (of width h) of the last dimension of a [B, n*h] value.
Value chunk(Builder& b, Value x, int64_t k, int64_t h) { return b.sliceInDim(x, k * h, (k + 1) * h, 1, 1); }

// input_gates + hidden_gates + input_bias + hidden_bias in dtype c (biases optional, broadcast over the batch).
Value gatesSum(Context& ctx, Value ig, Value hg, DType c) {
  Builder& b = ctx.b;
  Value s = b.add(b.convert(ig, c), b.convert(hg, c));
  for (size_t i : {size_t(3), size_t(4)})
    if (ctx.has(i)) s = b.add(s, b.broadcastInDim(b.convert(ctx.tensor(i), c), s.shape(), {1}));
  return s;
}

// The dtype of result k PyTorch's meta kernel gave, or `d` when the caller passed none.
DType outType(const Context& ctx, size_t k, DType d) {
  return k < ctx.outputs.size() && ctx.outputs[k].dtype != DType::Invalid ? ctx.outputs[k].dtype : d;
}
// Whether the optional result k is asked for (absent from ctx.outputs: decided by the rule alone).
bool wanted(const Context& ctx, size_t k) {
  return ctx.outputs.empty() || (k < ctx.outputs.size() && ctx.outputs[k].dtype != DType::Invalid);
}

// sig * (1 - sig): the sigmoid's derivative from its value.
Value dSigmoid(Builder& b, Value s) { return b.mul(b.sub(b.onesLike(s), s), s); }
// 1 - t^2: tanh's derivative from its value.
Value dTanh(Builder& b, Value t) { return b.sub(b.onesLike(t), b.mul(t, t)); }

std::vector<Value> lstmCellRule(Context& ctx) {
  Builder& b = ctx.b;
  Value ig = ctx.tensor(0), hg = ctx.tensor(1), cx = ctx.tensor(2);
  if (ig.rank() != 2 || cx.rank() != 2 || ig.shape() != hg.shape() || ig.shape()[1] != 4 * cx.shape()[1] ||
      ig.shape()[0] != cx.shape()[0])
    ctx.fail("expects input_gates and hidden_gates [B, 4H] and cx [B, H]");
  DType out = ig.dtype(), c = accType(out);
  int64_t h = cx.shape()[1];
  Value g = gatesSum(ctx, ig, hg, c);
  Value i = b.logistic(chunk(b, g, 0, h)), f = b.logistic(chunk(b, g, 1, h));
  Value n = b.tanh(chunk(b, g, 2, h)), o = b.logistic(chunk(b, g, 3, h));
  Value cy = b.add(b.mul(f, b.convert(cx, c)), b.mul(i, n));
  Value hy = b.mul(o, b.tanh(cy));
  Value ws = b.concatenate({i, f, n, o}, 1);
  return {b.convert(hy, outType(ctx, 0, out)), b.convert(cy, outType(ctx, 1, out)),
          b.convert(ws, outType(ctx, 2, out))};
}

// (grad_hy?, grad_cy?, cx, cy, workspace, has_bias): an absent gradient is zero; both absent give no results.
std::vector<Value> lstmCellBackwardRule(Context& ctx) {
  Builder& b = ctx.b;
  if (!ctx.has(0) && !ctx.has(1)) return {Value(), Value(), Value()};
  Value cx = ctx.tensor(2), cy = ctx.tensor(3), ws = ctx.tensor(4);
  DType out = ws.dtype(), c = accType(out);
  int64_t h = cx.shape()[1];
  if (ws.rank() != 2 || ws.shape()[0] != cx.shape()[0] || ws.shape()[1] != 4 * h)
    ctx.fail("expects workspace [B, 4H] for cx [B, H]");
  Value wc = b.convert(ws, c);
  Value i = chunk(b, wc, 0, h), f = chunk(b, wc, 1, h), n = chunk(b, wc, 2, h), o = chunk(b, wc, 3, h);
  Value zero = b.zerosLike(b.convert(cx, c));
  Value go = ctx.has(0) ? b.convert(ctx.tensor(0), c) : zero;
  Value gc = ctx.has(1) ? b.convert(ctx.tensor(1), c) : zero;
  Value tcy = b.tanh(b.convert(cy, c));
  Value gog = b.mul(go, tcy);
  Value gcx = b.add(b.mul(b.mul(go, o), dTanh(b, tcy)), gc);  // d loss / d cy, through hy and directly
  Value gig = b.mul(b.mul(gcx, n), dSigmoid(b, i));
  Value gfg = b.mul(b.mul(gcx, b.convert(cx, c)), dSigmoid(b, f));
  Value gng = b.mul(b.mul(gcx, i), dTanh(b, n));
  gog = b.mul(gog, dSigmoid(b, o));
  // The gate gradients round to the workspace's dtype before the bias sum, as the CUDA kernel stores them.
  Value gates = b.convert(b.concatenate({gig, gfg, gng, gog}, 1), outType(ctx, 0, out));
  std::vector<Value> res{gates, b.convert(b.mul(gcx, f), outType(ctx, 1, out)), Value()};
  if (ctx.toBool(5) && wanted(ctx, 2)) res[2] = reduceSumAs(b, gates, {0}, outType(ctx, 2, out));
  return res;
}

std::vector<Value> gruCellRule(Context& ctx) {
  Builder& b = ctx.b;
  Value ig = ctx.tensor(0), hg = ctx.tensor(1), hx = ctx.tensor(2);
  if (ig.rank() != 2 || hx.rank() != 2 || ig.shape() != hg.shape() || ig.shape()[1] != 3 * hx.shape()[1] ||
      ig.shape()[0] != hx.shape()[0])
    ctx.fail("expects input_gates and hidden_gates [B, 3H] and hx [B, H]");
  DType out = ig.dtype(), c = accType(out);
  int64_t h = hx.shape()[1];
  Value igc = b.convert(ig, c), hgc = b.convert(hg, c);
  Value b1 = ctx.has(3) ? b.broadcastInDim(b.convert(ctx.tensor(3), c), igc.shape(), {1}) : Value();
  Value b2 = ctx.has(4) ? b.broadcastInDim(b.convert(ctx.tensor(4), c), igc.shape(), {1}) : Value();
  // r and z: input + hidden + biases; n: input + its bias + r * (hidden + its bias).
  Value rz = b.add(chunk(b, igc, 0, 2 * h), chunk(b, hgc, 0, 2 * h));
  Value in = chunk(b, igc, 2, h), hn = chunk(b, hgc, 2, h);
  if (b1.valid()) {
    rz = b.add(rz, chunk(b, b1, 0, 2 * h));
    in = b.add(in, chunk(b, b1, 2, h));
  }
  if (b2.valid()) {
    rz = b.add(rz, chunk(b, b2, 0, 2 * h));
    hn = b.add(hn, chunk(b, b2, 2, h));
  }
  Value r = b.logistic(chunk(b, rz, 0, h)), z = b.logistic(chunk(b, rz, 1, h));
  Value n = b.tanh(b.add(in, b.mul(r, hn)));
  Value hxc = b.convert(hx, c);
  Value hy = b.add(n, b.mul(z, b.sub(hxc, n)));
  Value ws = b.concatenate({r, z, n, hxc, hn}, 1);
  return {b.convert(hy, outType(ctx, 0, out)), b.convert(ws, outType(ctx, 1, out))};
}

// (grad_hy, workspace, has_bias)
std::vector<Value> gruCellBackwardRule(Context& ctx) {
  Builder& b = ctx.b;
  Value gy = ctx.tensor(0), ws = ctx.tensor(1);
  if (gy.rank() != 2 || ws.rank() != 2 || ws.shape()[0] != gy.shape()[0] || ws.shape()[1] != 5 * gy.shape()[1])
    ctx.fail("expects grad_hy [B, H] and workspace [B, 5H]");
  DType out = ws.dtype(), c = accType(out);
  int64_t h = gy.shape()[1];
  Value wc = b.convert(ws, c), go = b.convert(gy, c);
  Value r = chunk(b, wc, 0, h), z = chunk(b, wc, 1, h), n = chunk(b, wc, 2, h);
  Value hx = chunk(b, wc, 3, h), hn = chunk(b, wc, 4, h);
  Value gz = b.mul(b.mul(go, b.sub(hx, n)), dSigmoid(b, z));
  Value ghx = b.mul(go, z);
  Value gn = b.mul(b.mul(go, b.sub(b.onesLike(z), z)), dTanh(b, n));
  Value ghn = b.mul(gn, r);
  Value gr = b.mul(b.mul(gn, hn), dSigmoid(b, r));
  Value gin = b.convert(b.concatenate({gr, gz, gn}, 1), outType(ctx, 0, out));
  Value ghid = b.convert(b.concatenate({gr, gz, ghn}, 1), outType(ctx, 1, out));
  std::vector<Value> res{gin, ghid, b.convert(ghx, outType(ctx, 2, out)), Value(), Value()};
  if (ctx.toBool(2))
    for (size_t k : {size_t(3), size_t(4)})
      if (wanted(ctx, k)) res[k] = reduceSumAs(b, k == 3 ? gin : ghid, {0}, outType(ctx, k, out));
  return res;
}

}  // namespace

void populateRnn(Registry& r) {
  r.add("aten::_thnn_fused_lstm_cell", lstmCellRule).accepts(floatTensors);
  r.add("aten::_thnn_fused_lstm_cell_backward_impl", lstmCellBackwardRule).accepts(floatTensors);
  r.add("aten::_thnn_fused_gru_cell", gruCellRule).accepts(floatTensors);
  r.add("aten::_thnn_fused_gru_cell_backward", gruCellBackwardRule).accepts(floatTensors);
}

}  // namespace torch_tpu::lowering
