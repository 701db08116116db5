// Tests for stablehlo/viewprog (reading and writing strided views of a storage's buffer inside a program): every
// layout kind (identity, contiguous ranges, nested strides, broadcast and overlapping strides, reinterpreted element
// types) is compiled and run on the PJRT plugin named by $TORCH_TPU_PJRT_PLUGIN and checked against a host
// reference. Torch-free and self-contained (no gtest).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "runtime/runtime.h"
#include "stablehlo/builder.h"
#include "stablehlo/viewprog.h"
#include "harness.h"

using namespace torch_tpu;
using shlo::Builder;
using shlo::DType;
using shlo::TensorType;
using shlo::Value;
using viewprog::Layout;

static int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Flat element positions of a view, row-major over its sizes.
static std::vector<int64_t> positions(const Layout& v) {
  std::vector<int64_t> out;
  std::vector<int64_t> idx(v.sizes.size(), 0);
  int64_t n = numel(v.sizes);
  for (int64_t k = 0; k < n; ++k) {
    int64_t p = v.offset;
    for (size_t d = 0; d < v.sizes.size(); ++d) p += idx[d] * v.strides[d];
    out.push_back(p);
    for (int64_t d = static_cast<int64_t>(v.sizes.size()) - 1; d >= 0; --d) {
      if (++idx[d] < v.sizes[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

static std::vector<float> iotaBuffer(int64_t n) {
  std::vector<float> b(n);
  for (int64_t i = 0; i < n; ++i) b[i] = float(i) + 0.5f;
  return b;
}

static runtime::BufferPtr upload(const void* data, DType t, const std::vector<int64_t>& dims) {
  return runtime::Client::get().fromHost(data, static_cast<runtime::ElementType>(t), dims, 0);
}

static runtime::BufferPtr offsetBuffer(int64_t off) { return upload(&off, DType::S64, {}); }

template <class T>
static std::vector<T> download(const runtime::BufferPtr& b) {
  std::vector<T> out(static_cast<size_t>(b->numElements()));
  b->toHost(out.data(), out.size() * sizeof(T));
  return out;
}

// Reads view `v` of a float buffer of dims `bdims`; checks the values against the host reference. The offset is a
// program input unless the view is the identity.
static void checkRead(const std::string& name, const std::vector<int64_t>& bdims, const Layout& v) {
  test("read " + name, [&] {
    const bool identity = viewprog::isIdentity(bdims, v);
    Builder b;
    Value buf = b.parameter(TensorType{DType::F32, bdims});
    Value off = identity ? Value() : b.parameter(TensorType{DType::S64, {}});
    Value r = viewprog::read(b, buf, v, off, DType::F32);
    CHECK(r.shape() == v.sizes);
    auto exe = runtime::Client::get().compile(b.finish({r}));
    std::vector<float> host = iotaBuffer(numel(bdims));
    auto hb = upload(host.data(), DType::F32, bdims);
    std::vector<runtime::Buffer*> args{hb.get()};
    runtime::BufferPtr ob;
    if (!identity) {
      ob = offsetBuffer(v.offset);
      args.push_back(ob.get());
    }
    auto got = download<float>(exe->execute(0, args)[0]);
    std::vector<int64_t> pos = positions(v);
    CHECK(got.size() == pos.size());
    for (size_t k = 0; k < pos.size() && k < got.size(); ++k) CHECK(got[k] == host[pos[k]]);
  });
}

// Writes `update` (k + 100 for element k) into view `v` of a float buffer; checks the whole new buffer.
static void checkWrite(const std::string& name, const std::vector<int64_t>& bdims, const Layout& v) {
  test("write " + name, [&] {
    const bool identity = viewprog::isIdentity(bdims, v);
    Builder b;
    Value buf = b.parameter(TensorType{DType::F32, bdims});
    Value off = identity ? Value() : b.parameter(TensorType{DType::S64, {}});
    Value upd = b.parameter(TensorType{DType::F32, v.sizes});
    Value r = viewprog::write(b, buf, v, off, upd);
    CHECK(r.shape() == bdims);
    auto exe = runtime::Client::get().compile(b.finish({r}));
    std::vector<float> host = iotaBuffer(numel(bdims));
    std::vector<float> u(numel(v.sizes));
    for (size_t k = 0; k < u.size(); ++k) u[k] = float(k) + 100.0f;
    auto hb = upload(host.data(), DType::F32, bdims);
    auto ub = upload(u.data(), DType::F32, v.sizes);
    std::vector<runtime::Buffer*> args{hb.get()};
    runtime::BufferPtr ob;
    if (!identity) {
      ob = offsetBuffer(v.offset);
      args.push_back(ob.get());
    }
    args.push_back(ub.get());
    auto got = download<float>(exe->execute(0, args)[0]);
    std::vector<float> want = host;
    std::vector<int64_t> pos = positions(v);
    for (size_t k = 0; k < pos.size(); ++k) want[pos[k]] = u[k];
    CHECK(got == want);
  });
}

int main() {
  std::string plugin = runtime::Client::pluginPathFromEnv();
  if (plugin.empty()) {
    std::fprintf(stderr, "TORCH_TPU_PJRT_PLUGIN is not set\n");
    return 1;
  }
  runtime::Client::init(plugin);

  test("layout predicates", [] {
    CHECK(viewprog::isContiguous({{2, 3}, {3, 1}, 0}));
    CHECK(viewprog::isContiguous({{2, 1, 3}, {3, 7, 1}, 5}));  // size-1 dims ignore their stride
    CHECK(!viewprog::isContiguous({{2, 3}, {1, 2}, 0}));
    CHECK(viewprog::isIdentity({6}, {{2, 3}, {3, 1}, 0}));
    CHECK(!viewprog::isIdentity({6}, {{2, 3}, {3, 1}, 1}));    // offset
    CHECK(!viewprog::isIdentity({8}, {{2, 3}, {3, 1}, 0}));    // covers part of the buffer
    CHECK(!viewprog::isIdentity({6}, {{3, 2}, {1, 3}, 0}));    // transposed
  });

  // Identity and reshaped identity.
  checkRead("identity", {2, 3}, {{2, 3}, {3, 1}, 0});
  checkRead("identity reshaped", {6}, {{3, 2}, {2, 1}, 0});
  // Contiguous ranges at an offset.
  checkRead("contiguous range", {24}, {{2, 3}, {3, 1}, 7});
  checkRead("row", {4, 6}, {{6}, {1}, 12});
  // Nested strides: slices with steps, column, transposes, 3-d permutes.
  checkRead("step slice", {20}, {{5}, {3}, 2});
  checkRead("column", {4, 5}, {{4}, {5}, 3});
  checkRead("transpose", {3, 4}, {{4, 3}, {1, 4}, 0});
  checkRead("sub-block", {6, 8}, {{3, 4}, {8, 2}, 9});
  checkRead("permute 3d", {2, 3, 4}, {{4, 2, 3}, {1, 12, 4}, 0});
  // Broadcast (stride 0), overlapping windows (unfold), non-nested strides (gather path).
  checkRead("expand", {3}, {{4, 3}, {0, 1}, 0});
  checkRead("overlapping windows", {10}, {{4, 3}, {2, 1}, 1});
  checkRead("non-nested", {30}, {{3, 4}, {7, 3}, 2});
  // Empty views and 0-d views.
  checkRead("empty", {5}, {{0, 3}, {3, 1}, 0});
  checkRead("scalar", {5}, {{}, {}, 3});

  checkWrite("identity", {2, 3}, {{2, 3}, {3, 1}, 0});
  checkWrite("contiguous range", {24}, {{2, 3}, {3, 1}, 7});
  checkWrite("step slice", {20}, {{5}, {3}, 2});
  checkWrite("transpose", {3, 4}, {{4, 3}, {1, 4}, 0});
  checkWrite("sub-block", {6, 8}, {{3, 4}, {8, 2}, 9});
  checkWrite("non-nested", {30}, {{3, 4}, {7, 3}, 2});
  checkWrite("scalar", {5}, {{}, {}, 3});

  test("reinterpreted element type", [] {
    // An s32 view of an f32 buffer is a bitcast; a u8 view of an f32 buffer sees its bytes.
    Builder b;
    Value buf = b.parameter(TensorType{DType::F32, {2}});
    Value as_int = viewprog::read(b, buf, {{2}, {1}, 0}, Value(), DType::S32);
    Value off = b.parameter(TensorType{DType::S64, {}});
    Value bytes = viewprog::read(b, buf, {{4}, {1}, 4}, off, DType::U8);
    auto exe = runtime::Client::get().compile(b.finish({as_int, bytes}));
    float host[2] = {1.5f, -2.0f};
    auto hb = upload(host, DType::F32, {2});
    auto ob = offsetBuffer(4);
    auto outs = exe->execute(0, {hb.get(), ob.get()});
    auto ints = download<int32_t>(outs[0]);
    auto u8 = download<uint8_t>(outs[1]);
    int32_t w0, w1;
    std::memcpy(&w0, &host[0], 4);
    std::memcpy(&w1, &host[1], 4);
    CHECK(ints.size() == 2 && ints[0] == w0 && ints[1] == w1);
    uint8_t want[4];
    std::memcpy(want, &host[1], 4);
    CHECK(u8.size() == 4 && std::memcmp(u8.data(), want, 4) == 0);
  });

  if (g_failures) {
    std::printf("FAILED: %d check(s)\n", g_failures);
    return 1;
  }
  std::printf("ALL PASSED\n");
  return 0;
}
