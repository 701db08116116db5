// Native tensor-metadata kernels (views, resize_, set_, empty): see views.cpp.
#pragma once

#include <c10/core/Storage.h>

#include <cstddef>

namespace torch_tpu {

// Grows (or shrinks) a storage to `newsize` bytes, keeping its contents (PrivateUse1 hooks' resize).
void resizeStorageBytes(const c10::Storage& storage, size_t newsize);

}  // namespace torch_tpu
