#include "eager/overlap.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/StorageImpl.h>

#include <cstring>
#include <unordered_map>

namespace torch_tpu {

namespace {

// Host twins: one zero-filled host storage per tpu storage, views with the same offsets and strides.
struct Twins {
  std::unordered_map<const c10::StorageImpl*, c10::Storage> storages;

  at::Tensor operator()(const at::Tensor& t) {
    if (!t.defined() || !t.is_privateuseone()) return t;
    const c10::StorageImpl* key = t.storage().unsafeGetStorageImpl();
    auto it = storages.find(key);
    if (it == storages.end()) {
      at::Tensor bytes = at::zeros({static_cast<int64_t>(t.storage().nbytes())}, at::TensorOptions().dtype(at::kByte));
      it = storages.emplace(key, bytes.storage()).first;
    }
    at::Tensor m = at::empty({0}, t.options().device(at::kCPU));
    m.set_(it->second, t.storage_offset(), t.sizes(), t.strides());
    return m;
  }

  c10::IValue operator()(const c10::IValue& v) {
    if (v.isTensor()) return (*this)(v.toTensor());
    if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back((*this)(t));
      return out;
    }
    if (v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList()) {
      auto list = v.toList();
      if (list.size() > 0 && (list.get(0).isTensor() || list.get(0).isNone())) {
        c10::List<std::optional<at::Tensor>> out;
        for (const c10::IValue& e : v.toListRef())
          out.push_back(e.isTensor() ? std::optional<at::Tensor>((*this)(e.toTensor())) : std::nullopt);
        return out;
      }
    }
    if (v.isDevice() && v.toDevice().is_privateuseone()) return c10::Device(c10::kCPU);
    if (v.isGenerator()) return at::detail::createCPUGenerator();  // leaves the device's random stream alone
    return v;
  }
};

}  // namespace

void checkWriteOverlap(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t base) {
  Twins twin;
  torch::jit::Stack cpu;
  for (size_t i = base; i < stack.size(); ++i) cpu.push_back(twin(stack[i]));
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu);
  } catch (const c10::Error& e) {
    // Only the overlap errors: anything else the zero-filled twins provoke is not the call's error.
    if (std::strncmp(e.msg().c_str(), "unsupported operation:", 22) == 0) throw;
  }
}

}  // namespace torch_tpu
