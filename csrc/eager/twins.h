// Twins of a call's tpu tensors on another device (meta for shape inference, CPU for a kernel's own error checks).
// Tensors sharing a tpu storage share one twin storage, with the same offsets and strides, so PyTorch's alias and
// overlap checks see exactly what they would see on CPU.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/core/StorageImpl.h>

#include <unordered_map>

namespace torch_tpu {

class AliasTwins {
 public:
  // kMeta: storages without memory; kCPU: zero-filled host storages (and a fresh CPU generator for a tpu one, so
  // the device's random stream is left alone).
  explicit AliasTwins(c10::DeviceType device) : device_(device) {}

  at::Tensor operator()(const at::Tensor& t);
  // Tensors, tensor lists, optional-tensor lists, tpu devices and generators; other values as they are.
  c10::IValue operator()(const c10::IValue& v);

 private:
  c10::DeviceType device_;
  std::unordered_map<const c10::StorageImpl*, c10::Storage> storages_;
};

}  // namespace torch_tpu
