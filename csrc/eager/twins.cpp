#include "eager/twins.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cstring>

namespace torch_tpu {

at::Tensor AliasTwins::operator()(const at::Tensor& t) {
  if (!t.defined() || !t.is_privateuseone()) return t;
  const c10::StorageImpl* key = t.storage().unsafeGetStorageImpl();
  auto it = storages_.find(key);
  if (it == storages_.end()) {
    const int64_t n = static_cast<int64_t>(t.storage().nbytes());
    const auto bytes = at::TensorOptions().dtype(at::kByte).device(device_);
    at::Tensor base = at::empty({n}, bytes);
    // Zeroed here rather than by at::zeros, whose parallel fill would wake the intra-op thread pool.
    if (device_ == c10::kCPU && n > 0) std::memset(base.data_ptr(), 0, size_t(n));
    it = storages_.emplace(key, base.storage()).first;
  }
  at::Tensor m = at::empty({0}, t.options().device(device_));
  m.set_(it->second, t.storage_offset(), t.sizes(), t.strides());
  return m;
}

c10::IValue AliasTwins::operator()(const c10::IValue& v) {
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
  if (v.isDevice() && v.toDevice().is_privateuseone()) return c10::Device(device_);
  if (device_ == c10::kCPU && v.isGenerator()) return at::detail::createCPUGenerator();
  return v;
}

}  // namespace torch_tpu
