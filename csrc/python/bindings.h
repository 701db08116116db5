// torch_tpu._C is one pybind11 module; each layer's bindings live in their own file.
#pragma once

#include <pybind11/pybind11.h>

namespace torch_tpu {

void bindCompile(pybind11::module_& m);      // csrc/python/compile_bindings.cpp
void bindForeign(pybind11::module_& m);      // csrc/python/foreign_bindings.cpp
void bindDistributed(pybind11::module_& m);  // csrc/python/dist_bindings.cpp
void bindSettings(pybind11::module_& m);     // csrc/python/settings_bindings.cpp
void bindDLPack(pybind11::module_& m);       // csrc/python/dlpack_bindings.cpp

}  // namespace torch_tpu
