// torch_tpu._C._dlpack_import: a DLPack capsule that PyTorch exported from a tpu tensor, imported as a tpu tensor that
// aliases the same storage (as PyTorch's own import does for CPU and CUDA tensors).
//
// PyTorch's importer (at::fromDLPack) wraps the capsule's data pointer in a storage of its own (from_blob). A tpu
// storage's data pointer is an opaque handle (csrc/core/storage.h), not memory, so that storage holds no device
// buffer and cannot be used. Instead, the exporting tensor is found through the capsule's manager context: ATen's
// exporter (toDLPack, toDLPackVersioned) allocates {at::Tensor handle; DLManagedTensor[Versioned] tensor;} and points
// manager_ctx at it. The import checks that layout (the capsule's struct is the context's second member) and that the
// handle is a tpu tensor whose data pointer, dtype and sizes are the capsule's before reading anything else, builds
// a tensor on the handle's storage with the capsule's sizes and strides, and consumes the capsule (renamed
// used_dltensor[_versioned], its deleter called: the new tensor holds the storage).
#include <ATen/DLConvertor.h>
#include <ATen/dlpack.h>
#include <torch/extension.h>

#include <vector>

#include "python/bindings.h"

namespace py = pybind11;

namespace torch_tpu {

namespace {

template <class T>
struct AtenExport {  // the layout of ATen's DLPack export context (manager_ctx)
  at::Tensor handle;
  T tensor;
};

template <class T>
py::object importCapsule(PyObject* capsule, const char* name, const char* used) {
  auto* m = static_cast<T*>(PyCapsule_GetPointer(capsule, name));
  if (m == nullptr) throw py::error_already_set();
  const DLTensor& dl = m->dl_tensor;
  if (dl.device.device_type != kDLExtDev) return py::none();  // not an extension device: PyTorch's importer
  auto* ctx = static_cast<AtenExport<T>*>(m->manager_ctx);
  TORCH_CHECK_VALUE(ctx != nullptr && &ctx->tensor == m,
                    "tpu: cannot import this DLPack capsule: its device is an extension device (kDLExtDev) but it was "
                    "not exported by PyTorch from a tpu tensor (torch.utils.dlpack.to_dlpack / Tensor.__dlpack__); "
                    "tpu imports only its own tensors, other producers' device memory is not shareable with the "
                    "PJRT runtime");
  const at::Tensor& h = ctx->handle;
  TORCH_CHECK_VALUE(h.defined() && h.device().type() == c10::DeviceType::PrivateUse1 &&
                        static_cast<char*>(dl.data) + dl.byte_offset == static_cast<char*>(h.data_ptr()) &&
                        at::toScalarType(dl.dtype) == h.scalar_type() && dl.ndim == h.dim(),
                    "tpu: cannot import this DLPack capsule: it does not describe the tpu tensor it was exported "
                    "from");
  std::vector<int64_t> sizes(dl.shape, dl.shape + dl.ndim);
  std::vector<int64_t> strides;
  if (dl.strides != nullptr) {
    strides.assign(dl.strides, dl.strides + dl.ndim);
  } else {
    strides.assign(static_cast<size_t>(dl.ndim), 1);
    for (int64_t i = dl.ndim - 2; i >= 0; --i) strides[i] = strides[i + 1] * std::max<int64_t>(sizes[i + 1], 1);
  }
  TORCH_CHECK_VALUE(at::IntArrayRef(sizes) == h.sizes(), "tpu: cannot import this DLPack capsule: its shape ",
                    at::IntArrayRef(sizes), " is not its tensor's ", h.sizes());
  at::Tensor out = at::empty({0}, h.options()).set_(h.storage(), h.storage_offset(), sizes, strides);
  if (PyCapsule_SetName(capsule, used) != 0) throw py::error_already_set();
  if (m->deleter != nullptr) m->deleter(m);
  return py::reinterpret_steal<py::object>(THPVariable_Wrap(out));
}

}  // namespace

void bindDLPack(py::module_& m) {
  // Returns the imported tensor, or None when the capsule is not of an extension device (PyTorch imports it).
  m.def("_dlpack_import", [](py::object capsule) -> py::object {
    PyObject* c = capsule.ptr();
    if (PyCapsule_IsValid(c, "dltensor")) return importCapsule<DLManagedTensor>(c, "dltensor", "used_dltensor");
    if (PyCapsule_IsValid(c, "dltensor_versioned"))
      return importCapsule<DLManagedTensorVersioned>(c, "dltensor_versioned", "used_dltensor_versioned");
    return py::none();
  });
}

}  // namespace torch_tpu
