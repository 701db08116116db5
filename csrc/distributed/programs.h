// Small single-device programs used by the transports (compiled and cached by the core's executable cache).
#pragma once

#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace torch_tpu::dist {

// A buffer with `src`'s values that only the caller holds. With `donate`, `src` is donated to an identity
// program (no copy; the program waits for every earlier reader of `src`), so `src` must have no other holder.
// The result has dimensions `dims` (same element count; default: src's); a reshape is never donated.
runtime::BufferPtr identity(const runtime::BufferPtr& src, bool donate, const std::vector<int64_t>* dims = nullptr);
// `src`'s values (row-major) with dimensions `dims` (same element count), in a new buffer.
runtime::BufferPtr reshapeBuffer(const runtime::BufferPtr& src, const std::vector<int64_t>& dims);

}  // namespace torch_tpu::dist
