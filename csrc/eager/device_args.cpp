#include "eager/device_args.h"

#include <ATen/ATen.h>
#include <c10/core/Layout.h>

#include <algorithm>
#include <optional>

#include "core/client.h"

namespace torch_tpu {

namespace {

bool isDeviceType(const c10::TypePtr& t) {
  c10::TypePtr e = t;
  if (e->kind() == c10::TypeKind::OptionalType) e = e->containedType(0);
  return e->kind() == c10::TypeKind::DeviceObjType;
}

// The tpu device of the call's first tpu tensor (the device the lowering kernel would run the op on), or -1.
int inputDevice(const torch::jit::Stack& stack, size_t base, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const c10::IValue& v = stack[base + i];
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (t.defined() && t.is_privateuseone()) return t.device().index();
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector())
        if (t.defined() && t.is_privateuseone()) return t.device().index();
    }
  }
  return -1;
}

}  // namespace

DeviceArgs deviceArgsOf(const c10::FunctionSchema& schema) {
  DeviceArgs da;
  const auto& args = schema.arguments();
  // out= and in-place forms: the result is the written argument, wherever it is.
  for (const auto& a : args)
    if (a.alias_info() && a.alias_info()->isWrite()) return da;
  for (size_t i = 0; i < args.size(); ++i) {
    const int si = static_cast<int>(i);
    if (isDeviceType(args[i].type())) da.device = si;
    else if (args[i].name() == "layout") da.layout = si;
    else if (args[i].name() == "pin_memory") da.pin_memory = si;
  }
  da.factory = da.device >= 0 && std::none_of(args.begin(), args.end(), [](const c10::Argument& a) {
    return a.name() == "self";
  });
  return da;
}

bool runWhereAsked(const c10::OperatorHandle& op, const DeviceArgs& da, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  const size_t base = stack->size() - n;
  const c10::IValue* dv = da.device >= 0 ? &(*stack)[base + da.device] : nullptr;
  const bool pinned = da.pin_memory >= 0 && (*stack)[base + da.pin_memory].isBool() &&
                      (*stack)[base + da.pin_memory].toBool();
  const bool other_layout = da.layout >= 0 && !(*stack)[base + da.layout].isNone() &&
                            (*stack)[base + da.layout].toLayout() != c10::kStrided;
  std::optional<c10::Device> asked;
  if (dv && dv->isDevice()) asked = dv->toDevice();
  bool elsewhere = false;
  int from = -1;
  if (!asked && da.factory && dv) asked = c10::Device(c10::kCPU);  // the default device
  if (asked) {
    from = inputDevice(*stack, base, n);
    if (!asked->is_privateuseone()) {
      elsewhere = true;
    } else {
      // A device without an index is the current device, as on CUDA (zeros_like(x_on_1, device="cuda") is on the
      // current device).
      const int to = asked->has_index() ? asked->index() : currentDevice();
      elsewhere = from >= 0 && to != from;
    }
  }
  if (!elsewhere && !pinned && !other_layout) return false;

  // The op's device-generic kernel makes its result where the options say (an empty tensor there, then filled or
  // computed), as it does for CPU and CUDA inputs; tpu's empty tensors refuse pinning as CUDA's do.
  for (c10::DispatchKey k : {c10::DispatchKey::CompositeExplicitAutograd,
                             c10::DispatchKey::CompositeExplicitAutogradNonFunctional}) {
    if (op.hasKernelForDispatchKey(k)) {
      op.callBoxedForDispatchKey(k, *stack);
      return true;
    }
  }

  // No such kernel: computed on the inputs' device by the lowering kernel, then copied where asked.
  TORCH_CHECK_NOT_IMPLEMENTED(!other_layout, "tpu: ", op.schema().operator_name(),
                              " cannot produce a result of layout ", (*stack)[base + da.layout].toLayout());
  const c10::Device to = asked ? *asked : c10::Device(c10::DeviceType::PrivateUse1, from);
  TORCH_CHECK(!pinned || to.is_cpu(), "Only dense CPU tensors can be pinned");
  if (from < 0) from = inputDevice(*stack, base, n);
  TORCH_INTERNAL_ASSERT(from >= 0, "tpu: ", op.schema().operator_name(), " reached the tpu kernel without a tpu tensor");
  if (dv) (*stack)[base + da.device] = c10::IValue(c10::Device(c10::DeviceType::PrivateUse1, from));
  if (da.pin_memory >= 0 && pinned) (*stack)[base + da.pin_memory] = c10::IValue(false);
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
  const size_t nret = op.schema().returns().size();
  auto move = [&](const at::Tensor& t) {
    if (!t.defined()) return t;
    at::Tensor r = t.to(to);
    return pinned ? r.pin_memory() : r;
  };
  for (size_t k = stack->size() - nret; k < stack->size(); ++k) {
    c10::IValue& r = (*stack)[k];
    if (r.isTensor()) {
      r = move(r.toTensor());
    } else if (r.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : r.toTensorVector()) out.push_back(move(t));
      r = std::move(out);
    }
  }
  return true;
}

}  // namespace torch_tpu
