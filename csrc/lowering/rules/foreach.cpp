// Foreach family: the `_foreach_*` list ops and the fused optimizers (_fused_adam_, _fused_adamw_, _fused_sgd_,
// _fused_adagrad_).
//
// A functional foreach op applies a per-tensor op to every element of its list arguments; its rule runs the
// per-tensor op's own rule once per element inside ONE program (a sub-context maps the element's arguments), so
// type promotion and numerics are exactly the per-tensor op's. The in-place forms (`_foreach_add_.List`, ...)
// derive from these automatically. Python numbers stay program inputs, shared by all elements.
//
// ScalarList overloads (one Python number per tensor, e.g. `_foreach_div_.ScalarList`) have no rule: PyTorch's
// composite slow path runs them as per-tensor ops, which are lowered.
//
// The fused optimizers write their list arguments and return nothing: their rules are registered under the
// in-place names and return one value per tensor of the mutated lists, in argument order, flattened.
#include <map>
#include <stdexcept>
#include <optional>

#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

using shlo::Cmp;
using shlo::isFloat;

// Where a sub-call argument comes from.
struct Src {
  enum Kind { Parent, Element, None, BoolConst } kind;
  size_t index = 0;  // parent argument (Parent: as is; Element: the k-th element of a TensorList)
  bool value = false;
  std::string name;  // the per-tensor op's argument name (for by-name lookups in its rule)
};
Src P(size_t i, std::string name) { return {Src::Parent, i, false, std::move(name)}; }
Src E(size_t i, std::string name) { return {Src::Element, i, false, std::move(name)}; }
Src N(std::string name) { return {Src::None, 0, false, std::move(name)}; }
Src B(bool v, std::string name) { return {Src::BoolConst, 0, v, std::move(name)}; }

// A per-tensor call inside a foreach program: its numbers come from the parent (cached per argument and dtype,
// so one program input serves every element).
class SubContext final : public Context {
 public:
  SubContext(Context& parent, const std::string& op, std::vector<int> parent_of,
             std::map<std::pair<size_t, DType>, Value>& cache)
      : Context(parent.b, op), parent_(parent), parent_of_(std::move(parent_of)), cache_(cache) {}

  Value scalar(size_t i, DType dtype) override {
    const Arg& a = arg(i);
    if (a.kind == Arg::Kind::Tensor && a.tensor.valid() && !a.wrapped_number) {
      if (a.tensor.rank() != 0) fail("argument '" + a.name + "' is not a scalar");
      return b.convert(a.tensor, dtype);
    }
    int p = i < parent_of_.size() ? parent_of_[i] : -1;
    if (p < 0) {
      if (a.kind == Arg::Kind::Bool) return b.constant(a.b ? 1 : 0, dtype);
      if (a.kind == Arg::Kind::Int) return b.constantInt(a.i, dtype);
      fail("argument '" + a.name + "' has no value");
    }
    auto key = std::make_pair(size_t(p), dtype);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    Value v = parent_.scalar(size_t(p), dtype);
    cache_[key] = v;
    return v;
  }
  Value rngState() override { return parent_.rngState(); }

 private:
  Context& parent_;
  std::vector<int> parent_of_;
  std::map<std::pair<size_t, DType>, Value>& cache_;
};

// Number of elements: the length of the first TensorList argument.
size_t listLength(const Context& ctx) {
  for (const Arg& a : ctx.args)
    if (a.kind == Arg::Kind::TensorList) return a.tensors.size();
  return 0;
}

// `per` applied to each list element, with the per-tensor arguments taken from `srcs`.
RuleFn perElement(const std::string& per, std::vector<Src> srcs) {
  return [per, srcs](Context& ctx) -> std::vector<Value> {
    const Rule* sub = registry().find(per);
    size_t n = listLength(ctx);
    if (ctx.outputs.size() != n) ctx.fail("expected one result per list element");
    std::map<std::pair<size_t, DType>, Value> cache;
    std::vector<Value> out;
    for (size_t k = 0; k < n; ++k) {
      std::vector<Arg> args;
      std::vector<int> parent_of;
      for (const Src& s : srcs) {
        Arg a;
        int p = -1;
        switch (s.kind) {
          case Src::Parent:
            a = ctx.arg(s.index);
            p = int(s.index);
            break;
          case Src::Element: {
            const Arg& l = ctx.arg(s.index);
            a.kind = Arg::Kind::Tensor;
            a.tensor = l.tensors.at(k);
            if (!a.tensor.valid()) a.kind = Arg::Kind::None;
            break;
          }
          case Src::None: break;
          case Src::BoolConst:
            a.kind = Arg::Kind::Bool;
            a.b = s.value;
            break;
        }
        a.name = s.name;
        args.push_back(std::move(a));
        parent_of.push_back(p);
      }
      SubContext sub_ctx(ctx, per, parent_of, cache);
      sub_ctx.args = std::move(args);
      sub_ctx.outputs = {ctx.outputs[k]};
      if (!accepts(*sub, sub_ctx)) ctx.fail(per + " declines element " + std::to_string(k));
      out.push_back(lower(*sub, sub_ctx).at(0));
    }
    return out;
  };
}

// ---- fused optimizers ----

// Values of list argument i (all present).
const std::vector<Value>& list(const Context& ctx, size_t i) { return ctx.arg(i).tensors; }

// A 0-d Value of float/Tensor argument i in dtype c (a float is a program input; a tensor is read and converted).
Value num(Context& ctx, size_t i, DType c) {
  const Arg& a = ctx.arg(i);
  if (a.kind == Arg::Kind::Tensor && !a.wrapped_number) return ctx.b.convert(ctx.b.reshape(a.tensor, {}), c);
  return scalarArg(ctx, i, c);
}

// The fused optimizers' grad_scale (stack argument `arg`, a 0-d tensor): the gradient divided by it, in dtype c.
Value unscaled(Context& ctx, int arg, Value grad, DType c) {
  if (!ctx.has(arg)) return grad;
  Builder& b = ctx.b;
  return b.div(grad, b.broadcastTo(b.convert(b.reshape(ctx.tensor(arg), {}), c), grad.shape()));
}

// The fused optimizers' found_inf (stack argument `arg`): where it is nonzero nothing changes, every result keeps its
// old value (the grads keep their unscaled values, as PyTorch's kernels skip everything).
void unchangedOnFoundInf(Context& ctx, int arg, std::vector<Value>& res, const std::vector<Value>& old) {
  if (!ctx.has(arg)) return;
  Builder& b = ctx.b;
  Value f = b.reshape(ctx.tensor(arg), {});
  Value skip = b.compare(f, b.zerosLike(f), Cmp::NE);
  for (size_t k = 0; k < res.size(); ++k) res[k] = b.select(skip, old[k], res[k]);
}

// _fused_adam_/_fused_adamw_(self[], grads[], exp_avgs[], exp_avg_sqs[], max_exp_avg_sqs[], state_steps[], *,
//   lr, beta1, beta2, weight_decay, eps, bool amsgrad, bool maximize, Tensor? grad_scale, Tensor? found_inf)
std::vector<Value> fusedAdam(Context& ctx, bool adamw) {
  Builder& b = ctx.b;
  const auto& params = list(ctx, 0);
  const auto& grads = list(ctx, 1);
  const auto& avgs = list(ctx, 2);
  const auto& sqs = list(ctx, 3);
  const auto& maxs = list(ctx, 4);
  const auto& steps = list(ctx, 5);
  bool amsgrad = ctx.toBool(11), maximize = ctx.toBool(12);
  size_t n = params.size();
  std::vector<Value> np, ng, na, ns, nm;
  std::map<DType, std::vector<Value>> sc;  // per compute dtype: lr, beta1, beta2, wd, eps
  for (size_t k = 0; k < n; ++k) {
    DType t = params[k].dtype();
    DType c = accType(t);
    if (!sc.count(c)) sc[c] = {num(ctx, 6, c), num(ctx, 7, c), num(ctx, 8, c), num(ctx, 9, c), num(ctx, 10, c)};
    const Shape& shape = params[k].shape();
    auto bc = [&](Value v) { return b.broadcastTo(v, shape); };
    Value lr = sc[c][0], beta1 = sc[c][1], beta2 = sc[c][2], wd = sc[c][3], eps = sc[c][4];
    Value one = b.constant(1, c);
    Value param = b.convert(params[k], c);
    Value grad = unscaled(ctx, 13, b.convert(grads[k], c), c);
    Value grad_out = grad;  // the unscaled gradient is written back
    if (maximize) grad = b.neg(grad);
    if (adamw) param = b.sub(param, b.mul(param, bc(b.mul(lr, wd))));
    else grad = b.add(grad, b.mul(param, bc(wd)));
    Value avg = b.convert(avgs[k], c), sq = b.convert(sqs[k], c);
    avg = b.add(avg, b.mul(bc(b.sub(one, beta1)), b.sub(grad, avg)));
    sq = b.add(b.mul(bc(beta2), sq), b.mul(bc(b.sub(one, beta2)), b.mul(grad, grad)));
    Value step = b.convert(b.reshape(steps[k], {}), c);
    Value bc1 = b.sub(one, b.pow(beta1, step));
    Value bc2sqrt = b.sqrt(b.sub(one, b.pow(beta2, step)));
    Value step_size = b.div(lr, bc1);
    Value denom_src = sq;
    Value mx;
    if (amsgrad) {
      mx = nanMax(b, b.convert(maxs[k], c), sq);
      denom_src = mx;
    }
    Value denom = b.add(b.div(b.sqrt(denom_src), bc(bc2sqrt)), bc(eps));
    param = b.sub(param, b.mul(bc(step_size), b.div(avg, denom)));
    np.push_back(b.convert(param, t));
    ng.push_back(b.convert(grad_out, grads[k].dtype()));
    na.push_back(b.convert(avg, avgs[k].dtype()));
    ns.push_back(b.convert(sq, sqs[k].dtype()));
    if (amsgrad && k < maxs.size()) nm.push_back(b.convert(mx, maxs[k].dtype()));
  }
  // Results in argument order: params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs.
  std::vector<Value> res, old;
  auto append = [&](const std::vector<Value>& vals, const std::vector<Value>& prev) {
    res.insert(res.end(), vals.begin(), vals.end());
    old.insert(old.end(), prev.begin(), prev.end());
  };
  append(np, params);
  append(ng, grads);
  append(na, avgs);
  append(ns, sqs);
  if (amsgrad) append(nm, maxs);
  else append(maxs, maxs);  // max_exp_avg_sqs unchanged
  unchangedOnFoundInf(ctx, 14, res, old);
  return res;
}

// _fused_sgd_(self[], grads[], momentum_buffer_list[], *, weight_decay, momentum, lr, dampening, bool nesterov,
//   bool maximize, bool is_first_step, Tensor? grad_scale, Tensor? found_inf)
std::vector<Value> fusedSgd(Context& ctx) {
  Builder& b = ctx.b;
  const auto& params = list(ctx, 0);
  const auto& grads = list(ctx, 1);
  const auto& bufs = list(ctx, 2);
  bool nesterov = ctx.toBool(7), maximize = ctx.toBool(8), first = ctx.toBool(9);
  bool has_momentum = !bufs.empty();
  size_t n = params.size();
  std::vector<Value> np, ng, nb;
  std::map<DType, std::vector<Value>> sc;
  for (size_t k = 0; k < n; ++k) {
    DType t = params[k].dtype();
    DType c = accType(t);
    if (!sc.count(c)) sc[c] = {num(ctx, 3, c), num(ctx, 4, c), num(ctx, 5, c), num(ctx, 6, c)};
    const Shape& shape = params[k].shape();
    auto bc = [&](Value v) { return b.broadcastTo(v, shape); };
    Value wd = sc[c][0], momentum = sc[c][1], lr = sc[c][2], dampening = sc[c][3];
    Value param = b.convert(params[k], c);
    Value grad = unscaled(ctx, 10, b.convert(grads[k], c), c);
    Value grad_out = grad;
    if (maximize) grad = b.neg(grad);
    grad = b.add(grad, b.mul(param, bc(wd)));
    if (has_momentum) {
      Value buf;
      if (first) {
        buf = grad;
      } else {
        buf = b.convert(bufs[k], c);
        buf = b.add(b.mul(bc(momentum), buf), b.mul(bc(b.sub(b.constant(1, c), dampening)), grad));
      }
      nb.push_back(b.convert(buf, bufs[k].dtype()));
      grad = nesterov ? b.add(grad, b.mul(bc(momentum), buf)) : buf;
    }
    param = b.sub(param, b.mul(bc(lr), grad));
    np.push_back(b.convert(param, t));
    ng.push_back(b.convert(grad_out, grads[k].dtype()));
  }
  std::vector<Value> res = np, old = params;
  res.insert(res.end(), ng.begin(), ng.end());
  old.insert(old.end(), grads.begin(), grads.end());
  res.insert(res.end(), nb.begin(), nb.end());
  old.insert(old.end(), bufs.begin(), bufs.begin() + static_cast<std::ptrdiff_t>(nb.size()));
  unchangedOnFoundInf(ctx, 11, res, old);
  return res;
}

// _fused_adagrad_(self[], grads[], state_sums[], state_steps[], *, lr, lr_decay, weight_decay, eps, bool maximize,
//   Tensor? grad_scale, Tensor? found_inf): PyTorch's CPU kernel, per element: the gradient unscaled (and written
//   back), negated under maximize, plus weight_decay * param; state_sum += grad^2; param -= clr * grad /
//   (sqrt(state_sum) + eps) with clr = lr / (1 + (step - 1) * lr_decay) (the step was already incremented by the
//   optimizer). The plain overload's schema marks state_steps written (the kernel leaves them): `writes_steps`
//   returns them unchanged; the tensor_lr overload does not list them.
std::vector<Value> fusedAdagrad(Context& ctx, bool writes_steps) {
  Builder& b = ctx.b;
  const auto& params = list(ctx, 0);
  const auto& grads = list(ctx, 1);
  const auto& sums = list(ctx, 2);
  const auto& steps = list(ctx, 3);
  bool maximize = ctx.toBool(8);
  size_t n = params.size();
  std::vector<Value> np, ng, ns;
  std::map<DType, std::vector<Value>> sc;  // per compute dtype: lr, lr_decay, weight_decay, eps
  for (size_t k = 0; k < n; ++k) {
    DType t = params[k].dtype();
    DType c = accType(t);
    if (!sc.count(c)) sc[c] = {num(ctx, 4, c), num(ctx, 5, c), num(ctx, 6, c), num(ctx, 7, c)};
    const Shape& shape = params[k].shape();
    auto bc = [&](Value v) { return b.broadcastTo(v, shape); };
    Value lr = sc[c][0], lr_decay = sc[c][1], wd = sc[c][2], eps = sc[c][3];
    Value one = b.constant(1, c);
    Value param = b.convert(params[k], c);
    Value grad = unscaled(ctx, 9, b.convert(grads[k], c), c);
    Value grad_out = grad;  // the unscaled gradient is written back
    if (maximize) grad = b.neg(grad);
    grad = b.add(grad, b.mul(param, bc(wd)));
    Value sum = b.add(b.convert(sums[k], c), b.mul(grad, grad));
    Value step = b.convert(b.reshape(steps[k], {}), c);
    Value clr = b.div(lr, b.add(one, b.mul(b.sub(step, one), lr_decay)));
    Value denom = b.add(b.sqrt(sum), bc(eps));
    param = b.sub(param, b.div(b.mul(bc(clr), grad), denom));
    np.push_back(b.convert(param, t));
    ng.push_back(b.convert(grad_out, grads[k].dtype()));
    ns.push_back(b.convert(sum, sums[k].dtype()));
  }
  // Results in argument order: params, grads, state_sums (and the unchanged state_steps).
  std::vector<Value> res = np, old = params;
  res.insert(res.end(), ng.begin(), ng.end());
  old.insert(old.end(), grads.begin(), grads.end());
  res.insert(res.end(), ns.begin(), ns.end());
  old.insert(old.end(), sums.begin(), sums.end());
  unchangedOnFoundInf(ctx, 10, res, old);
  if (writes_steps) res.insert(res.end(), steps.begin(), steps.end());
  return res;
}

bool floatLists(const Context& ctx) {
  if (!realDTypes(ctx)) return false;
  for (const Value& v : ctx.arg(0).tensors)
    if (!isFloat(v.dtype())) return false;
  return true;
}

}  // namespace

void populateForeach(Registry& r) {
  // _foreach_X is X per element: `r` already holds X (the per-tensor families come first in kFamilies), whose
  // static numbers are static here too (same argument names).
  auto addForeach = [&r](const std::string& foreach_op, const std::string& per_op, std::vector<Src> srcs) {
    const Rule* sub = r.find(per_op);
    if (!sub) throw std::logic_error(foreach_op + " needs a lowering rule for " + per_op);
    r.add(foreach_op, perElement(per_op, std::move(srcs))).staticArgs(sub->static_args).accepts(realDTypes);
  };
  // Unary: _foreach_X(Tensor[] self) -> X(self).
  for (const char* u : {"abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor",
                        "frac", "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt",
                        "sigmoid", "sign", "sin", "sinh", "sqrt", "tan", "tanh", "trunc", "zero", "clone"}) {
    std::string n = u;
    addForeach("aten::_foreach_" + n, "aten::" + n, {E(0, "self")});
  }
  // Binary with alpha: List / Scalar / Tensor forms.
  for (const char* op : {"add", "sub"}) {
    std::string n = op;
    addForeach("aten::_foreach_" + n + ".List", "aten::" + n + ".Tensor",
               {E(0, "self"), E(1, "other"), P(2, "alpha")});
    addForeach("aten::_foreach_" + n + ".Scalar", "aten::" + n + ".Scalar", {E(0, "self"), P(1, "other")});
  }
  addForeach("aten::_foreach_add.Tensor", "aten::add.Tensor", {E(0, "self"), P(1, "other"), P(2, "alpha")});
  for (const char* op : {"mul", "div"}) {
    std::string n = op;
    addForeach("aten::_foreach_" + n + ".List", "aten::" + n + ".Tensor", {E(0, "self"), E(1, "other")});
    addForeach("aten::_foreach_" + n + ".Scalar", "aten::" + n + ".Scalar", {E(0, "self"), P(1, "other")});
    addForeach("aten::_foreach_" + n + ".Tensor", "aten::" + n + ".Tensor", {E(0, "self"), P(1, "other")});
  }
  addForeach("aten::_foreach_clamp_min.List", "aten::clamp_min.Tensor", {E(0, "self"), E(1, "min")});
  addForeach("aten::_foreach_clamp_min.Scalar", "aten::clamp_min", {E(0, "self"), P(1, "min")});
  addForeach("aten::_foreach_clamp_max.List", "aten::clamp_max.Tensor", {E(0, "self"), E(1, "max")});
  addForeach("aten::_foreach_clamp_max.Scalar", "aten::clamp_max", {E(0, "self"), P(1, "max")});
  addForeach("aten::_foreach_maximum.List", "aten::maximum", {E(0, "self"), E(1, "other")});
  addForeach("aten::_foreach_maximum.Scalar", "aten::clamp_min", {E(0, "self"), P(1, "min")});
  addForeach("aten::_foreach_minimum.List", "aten::minimum", {E(0, "self"), E(1, "other")});
  addForeach("aten::_foreach_minimum.Scalar", "aten::clamp_max", {E(0, "self"), P(1, "max")});
  addForeach("aten::_foreach_pow.List", "aten::pow.Tensor_Tensor", {E(0, "self"), E(1, "exponent")});
  addForeach("aten::_foreach_pow.Scalar", "aten::pow.Tensor_Scalar", {E(0, "self"), P(1, "exponent")});
  addForeach("aten::_foreach_pow.ScalarAndTensor", "aten::pow.Scalar", {P(0, "self"), E(1, "exponent")});
  for (const char* op : {"addcmul", "addcdiv"}) {
    std::string n = op;
    addForeach("aten::_foreach_" + n + ".Scalar", "aten::" + n,
               {E(0, "self"), E(1, "tensor1"), E(2, "tensor2"), P(3, "value")});
  }
  addForeach("aten::_foreach_lerp.List", "aten::lerp.Tensor", {E(0, "self"), E(1, "end"), E(2, "weight")});
  addForeach("aten::_foreach_lerp.Scalar", "aten::lerp.Scalar", {E(0, "self"), E(1, "end"), P(2, "weight")});
  // _foreach_norm.Scalar(self[], Scalar ord=2, ScalarType? dtype) -> linalg_vector_norm(x, ord, None, False, dtype)
  addForeach("aten::_foreach_norm.Scalar", "aten::linalg_vector_norm",
             {E(0, "self"), P(1, "ord"), N("dim"), B(false, "keepdim"), P(2, "dtype")});
  addForeach("aten::_foreach_max", "aten::max", {E(0, "self")});

  // ---- fused optimizers (in-place names: they return nothing) ----
  for (bool adamw : {false, true}) {
    for (const char* ov : {"", ".tensor_lr"})
      r.add(std::string(adamw ? "aten::_fused_adamw_" : "aten::_fused_adam_") + ov,
            [adamw](Context& ctx) { return fusedAdam(ctx, adamw); })
          .accepts(floatLists);
  }
  for (const char* ov : {"", ".tensor_lr"}) r.add(std::string("aten::_fused_sgd_") + ov, fusedSgd).accepts(floatLists);
  r.add("aten::_fused_adagrad_", [](Context& ctx) { return fusedAdagrad(ctx, true); }).accepts(floatLists);
  r.add("aten::_fused_adagrad_.tensor_lr", [](Context& ctx) { return fusedAdagrad(ctx, false); })
      .accepts(floatLists);
}

}  // namespace torch_tpu::lowering
