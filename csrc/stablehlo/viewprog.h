// Reading and writing strided views of a device buffer inside a program.
//
// A storage's buffer keeps the shape of the tensor that produced it. A tensor reading the storage describes
// itself by a Layout (sizes, strides and offset in elements). A layout that covers the buffer exactly in
// row-major order ("identity") uses the buffer as it is; any other view flattens the buffer and is sliced
// (strides that nest), or gathered (anything else) inside the consuming program. Writes into a view produce the
// storage's whole new buffer (dynamic_update_slice for a contiguous range, scatter otherwise). Offsets are
// program inputs (0-d s64), so x[i] for every i shares one program.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stablehlo/builder.h"

namespace torch_tpu::viewprog {

struct Layout {
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
};

// True when the layout covers the whole buffer (numel equal) in row-major order from offset 0.
bool isIdentity(const std::vector<int64_t>& buffer_dims, const Layout& v);
bool isContiguous(const Layout& v);  // row-major strides (size-1 dims ignored)

// Reads the view from `buf` (the storage's buffer). `offset` is the 0-d s64 offset (ignored for identity).
// `dtype` is the tensor's element type; a buffer of another type with the same bit width is bitcast.
shlo::Value read(shlo::Builder& b, const shlo::Value& buf, const Layout& v, const shlo::Value& offset,
                 shlo::DType dtype);

// Returns `buf` with the elements of the view replaced by `update` (shape v.sizes, converted to the buffer's type).
shlo::Value write(shlo::Builder& b, const shlo::Value& buf, const Layout& v, const shlo::Value& offset,
                  shlo::Value update);

}  // namespace torch_tpu::viewprog
