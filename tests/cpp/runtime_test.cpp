// Tests for the runtime layer against the PJRT plugin named by $TORCH_TPU_PJRT_PLUGIN (the CPU plugin in CI).
// Self-contained (no gtest). Prints plugin facts and launch latencies.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pjrt_c_api.h"
#include "runtime/runtime.h"
#include "harness.h"

using namespace torch_tpu::runtime;

template <class F>
static bool throwsError(F&& f, std::string* msg = nullptr, int* code = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (msg) *msg = e.what();
    if (code) *code = e.code();
    return true;
  }
  return false;
}

static const char* kAdd4 = R"(
module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xf32>) {
    %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
)";

static std::string addProgram(int n) {
  std::string t = "tensor<" + std::to_string(n) + "xf32>";
  return "module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
         "  func.func public @main(%arg0: " + t + ", %arg1: " + t + ") -> (" + t + ") {\n"
         "    %0 = \"stablehlo.add\"(%arg0, %arg1) : (" + t + ", " + t + ") -> " + t + "\n"
         "    return %0 : " + t + "\n  }\n}\n";
}

static std::vector<float> readF32(Buffer& b) {
  std::vector<float> v(b.numElements());
  b.toHost(v.data(), v.size() * sizeof(float));
  return v;
}

static double nowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main() {
  std::string plugin = Client::pluginPathFromEnv();
  if (plugin.empty()) {
    std::fprintf(stderr, "TORCH_TPU_PJRT_PLUGIN is not set\n");
    return 2;
  }

  // --- 6b. errors before init
  test("get() before init throws", [] {
    CHECK(!Client::initialized());
    CHECK(throwsError([] { Client::get(); }));
  });
  test("nonexistent plugin path names the path and pip install", [] {
    std::string msg;
    CHECK(throwsError([] { Client::init("/nonexistent/xla_cpu_pjrt.so"); }, &msg));
    std::printf("  message: %s\n", msg.c_str());
    CHECK(msg.find("pip install xla-cpu-pjrt") != std::string::npos);
    CHECK(msg.find("/nonexistent/xla_cpu_pjrt.so") != std::string::npos);
    CHECK(throwsError([] { Client::init("/nonexistent/libtpu.so"); }, &msg));
    CHECK(msg.find("pip install torch-tpu[tpu]") != std::string::npos);
    CHECK(throwsError([] { Client::init("/usr/lib/x86_64-linux-gnu/libm.so.6"); }, &msg));  // not a plugin
    std::printf("  message: %s\n", msg.c_str());
    CHECK(msg.find("GetPjrtApi") != std::string::npos || msg.find("not found") != std::string::npos);
    CHECK(!Client::initialized());
  });

  test("preload: a missing required library fails init with its hint, others are named if the plugin fails", [&] {
    std::string msg;
    setPreloadLibraries({{"libtorch_tpu_test_no_such_driver.so.1", true, "the test driver is not installed"}});
    CHECK(throwsError([&] { Client::init(plugin); }, &msg));
    std::printf("  message: %s\n", msg.c_str());
    CHECK(msg.find("the test driver is not installed") != std::string::npos);
    CHECK(msg.find("libtorch_tpu_test_no_such_driver.so.1") != std::string::npos);
    CHECK(!Client::initialized());
    setPreloadLibraries({{"libtorch_tpu_test_no_such_lib.so.3", false, "pip install test-lib"}});
    CHECK(throwsError([] { Client::init("/usr/lib/x86_64-linux-gnu/libm.so.6"); }, &msg));  // not a plugin
    std::printf("  message: %s\n", msg.c_str());
    CHECK(msg.find("libtorch_tpu_test_no_such_lib.so.3 (pip install test-lib)") != std::string::npos);
    CHECK(!Client::initialized());
  });

  // --- 1/2. load + create with options
  Client* cp = nullptr;
  test("init with cpu_device_count=2", [&] {
    // A library that loads and one that does not: the plugin still starts, and both are reported.
    setPreloadLibraries({{"libm.so.6", false, ""}, {"libtorch_tpu_test_no_such_lib.so.3", false, "pip install x"}});
    Client& c = Client::init(plugin, {{"cpu_device_count", int64_t{2}}});
    CHECK(c.plugin().preloaded == std::vector<std::string>{"libm.so.6"});
    CHECK(c.plugin().preload_failed.size() == 1 &&
          c.plugin().preload_failed[0].find("libtorch_tpu_test_no_such_lib.so.3: ") == 0);
    setPreloadLibraries({});
    cp = &c;
    CHECK(Client::initialized());
    CHECK(&Client::get() == &c);
    CHECK(&Client::init(plugin) == &c);  // idempotent for the same path
    const PluginInfo& p = c.plugin();
    std::printf("  plugin: %s\n  PJRT C API %d.%d (header %d.%d), platform '%s' version '%s', padded structs: %s\n",
                p.path.c_str(), p.api_major, p.api_minor, PJRT_API_MAJOR, PJRT_API_MINOR, p.platform_name.c_str(),
                p.platform_version.c_str(), p.padded_structs ? "accepted" : "REJECTED (exact sizes used)");
    std::string ext;
    for (const auto& e : p.extensions) ext += (ext.empty() ? "" : ", ") + e;
    std::printf("  extensions: %s\n", ext.c_str());
    for (const auto& e : p.extensions) CHECK(!e.empty());
    if (p.platform_name == "cpu") {  // xla-cpu-pjrt: layouts among its extensions, no profiler
      CHECK(std::find(p.extensions.begin(), p.extensions.end(), "layouts") != p.extensions.end());
      CHECK(std::find(p.extensions.begin(), p.extensions.end(), "profiler") == p.extensions.end());
    }
    for (auto& kv : p.attributes) std::printf("  attribute %s = %s\n", kv.first.c_str(), kv.second.c_str());
    CHECK(c.deviceCount() == 2);
    for (int d = 0; d < c.deviceCount(); ++d)
      std::printf("  device %d: kind '%s', '%s'\n", d, c.deviceKind(d).c_str(), c.deviceDebugString(d).c_str());
    CHECK(throwsError([&] { c.deviceKind(2); }));
  });
  if (cp == nullptr) {
    std::printf("FAILED: no client\n");
    return 1;
  }
  Client& c = *cp;

  // --- 1. ABI: struct_size below the plugin's size is rejected, a zero-padded larger one accepted
  test("ABI: struct_size checks", [&] {
    // Raw calls against the plugin's PJRT_Api (PJRT_Buffer_ElementType on a public raw handle).
    float x = 1;
    BufferPtr b = c.fromHost(&x, ElementType::F32, {}, 0);
    // Find the PJRT_Api through dlsym on the already-loaded plugin.
    void* h = dlopen(c.plugin().path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != nullptr);
    auto get = reinterpret_cast<const PJRT_Api* (*)()>(dlsym(h, "GetPjrtApi"));
    const PJRT_Api* api = get();
    std::printf("  PJRT_Api struct_size %zu (header PJRT_Api_STRUCT_SIZE %zu)\n", api->struct_size,
                (size_t)PJRT_Api_STRUCT_SIZE);
    struct {
      PJRT_Buffer_ElementType_Args v;
      char pad[4096];
    } big;
    std::memset(&big, 0, sizeof(big));
    big.v.struct_size = sizeof(big);
    big.v.buffer = b->raw();
    PJRT_Error* err = api->PJRT_Buffer_ElementType(&big.v);
    CHECK(err == nullptr);
    CHECK(big.v.type == PJRT_Buffer_Type_F32);
    PJRT_Buffer_ElementType_Args small;
    std::memset(&small, 0, sizeof(small));
    small.struct_size = PJRT_Buffer_ElementType_Args_STRUCT_SIZE - 1;
    small.buffer = b->raw();
    err = api->PJRT_Buffer_ElementType(&small);
    std::printf("  undersized struct_size: %s\n", err ? "rejected" : "ACCEPTED");
    CHECK(err != nullptr);
    if (err) {
      PJRT_Error_Message_Args m;
      std::memset(&m, 0, sizeof(m));
      m.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
      m.error = err;
      api->PJRT_Error_Message(&m);
      std::printf("  plugin says: %.*s\n", (int)m.message_size, m.message);
      PJRT_Error_Destroy_Args d;
      std::memset(&d, 0, sizeof(d));
      d.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
      d.error = err;
      api->PJRT_Error_Destroy(&d);
    }
  });

  // --- 3. compile + execute, on device 0 and device 1
  ExecutablePtr add4;
  test("compile + execute add on device 0 and 1", [&] {
    add4 = c.compile(kAdd4);
    CHECK(add4->numOutputs() == 1);
    CHECK(add4->outputType(0) == ElementType::F32);
    CHECK(add4->outputDims(0) == std::vector<int64_t>{4});
    float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
    for (int d = 0; d < 2; ++d) {
      BufferPtr x = c.fromHost(a, ElementType::F32, {4}, d);
      BufferPtr y = c.fromHost(b, ElementType::F32, {4}, d);
      CHECK(x->queryDevice() == d);
      auto outs = add4->execute(d, {x.get(), y.get()});
      CHECK(outs.size() == 1);
      CHECK(outs[0]->device() == d);
      CHECK(outs[0]->queryDevice() == d);
      CHECK(outs[0]->dims() == std::vector<int64_t>{4});
      auto v = readF32(*outs[0]);
      CHECK(v == (std::vector<float>{11, 22, 33, 44}));
    }
    // inputs on the wrong device are refused before reaching the plugin
    BufferPtr x0 = c.fromHost(a, ElementType::F32, {4}, 0);
    BufferPtr y1 = c.fromHost(b, ElementType::F32, {4}, 1);
    CHECK(throwsError([&] { add4->execute(1, {x0.get(), y1.get()}); }));
  });

  // --- 4. multiple outputs, 0-d, empty tensors, dtypes
  test("multiple outputs, 0-d and empty tensors", [&] {
    const char* prog = R"(
module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<f32>, %arg1: tensor<0xf32>, %arg2: tensor<2x3xf32>) -> (tensor<f32>, tensor<0xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
    %0 = "stablehlo.multiply"(%arg0, %arg0) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %1 = "stablehlo.negate"(%arg1) : (tensor<0xf32>) -> tensor<0xf32>
    %2 = "stablehlo.negate"(%arg2) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0, %1, %2, %arg2 : tensor<f32>, tensor<0xf32>, tensor<2x3xf32>, tensor<2x3xf32>
  }
}
)";
    ExecutablePtr e = c.compile(prog);
    CHECK(e->numOutputs() == 4);
    float s = 3;
    float m[6] = {1, 2, 3, 4, 5, 6};
    for (int d = 0; d < 2; ++d) {
      BufferPtr a0 = c.fromHost(&s, ElementType::F32, {}, d);
      BufferPtr a1 = c.fromHost(nullptr, ElementType::F32, {0}, d);
      BufferPtr a2 = c.fromHost(m, ElementType::F32, {2, 3}, d);
      CHECK(a0->numElements() == 1 && a0->byteSize() == 4 && a0->dims().empty());
      CHECK(a1->numElements() == 0 && a1->byteSize() == 0);
      auto outs = e->execute(d, {a0.get(), a1.get(), a2.get()});
      CHECK(outs.size() == 4);
      float r = 0;
      outs[0]->toHost(&r, 4);
      CHECK(r == 9);
      CHECK(outs[0]->dims().empty());
      CHECK(outs[1]->dims() == std::vector<int64_t>{0});
      outs[1]->toHost(nullptr, 0);
      CHECK((outs[2]->dims() == std::vector<int64_t>{2, 3}));
      CHECK(readF32(*outs[2]) == (std::vector<float>{-1, -2, -3, -4, -5, -6}));
      CHECK(readF32(*outs[3]) == (std::vector<float>{1, 2, 3, 4, 5, 6}));
      for (auto& o : outs) CHECK(o->queryDevice() == d);
    }
  });

  test("dtype round trips (pred, bf16, s64, others)", [&] {
    bool p[5] = {true, false, true, true, false};
    BufferPtr bp = c.fromHost(p, ElementType::Pred, {5}, 1);
    bool pr[5] = {};
    bp->toHost(pr, sizeof(pr));
    CHECK(std::memcmp(p, pr, 5) == 0);
    CHECK(bp->type() == ElementType::Pred && bp->byteSize() == 5);

    uint16_t bf[3] = {0x3f80, 0xc000, 0x7f80};  // 1, -2, inf
    BufferPtr bb = c.fromHost(bf, ElementType::BF16, {3}, 0);
    uint16_t bfr[3] = {};
    bb->toHost(bfr, sizeof(bfr));
    CHECK(std::memcmp(bf, bfr, sizeof(bf)) == 0);

    int64_t s[2][2] = {{-1, 1LL << 40}, {7, -(1LL << 62)}};
    BufferPtr bs = c.fromHost(s, ElementType::S64, {2, 2}, 0);
    int64_t sr[2][2] = {};
    bs->toHost(sr, sizeof(sr));
    CHECK(std::memcmp(s, sr, sizeof(s)) == 0);
    CHECK(bs->byteSize() == 32);

    for (ElementType t : {ElementType::S8, ElementType::S16, ElementType::S32, ElementType::U8, ElementType::U16,
                          ElementType::U32, ElementType::U64, ElementType::F16, ElementType::F64, ElementType::C64,
                          ElementType::C128}) {
      size_t es = elementSize(t);
      std::vector<unsigned char> src(es * 3), dst(es * 3, 0xAA);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 % 61);  // finite values
      BufferPtr b = c.fromHost(src.data(), t, {3}, 1);
      b->toHost(dst.data(), dst.size());
      if (src != dst) std::printf("  round trip mismatch for %s\n", elementTypeName(t));
      CHECK(src == dst);
    }
    CHECK(std::string(elementTypeName(ElementType::BF16)) == "bf16");
    CHECK(std::string(elementTypeName(ElementType::Pred)) == "pred");
    CHECK(std::string(elementTypeName(ElementType::S64)) == "s64");
    CHECK(elementSize(ElementType::Pred) == 1 && elementSize(ElementType::C128) == 16);
    // too-small destination is an Error, not a crash
    CHECK(throwsError([&] { bs->toHost(sr, 8); }));
  });

  test("toHostAsync, awaitReady, copyToDevice", [&] {
    float a[4] = {1, 2, 3, 4};
    BufferPtr x = c.fromHost(a, ElementType::F32, {4}, 0);
    x->awaitReady();
    CHECK(x->isReady());
    float r[4] = {};
    EventPtr ev = x->toHostAsync(r, sizeof(r));
    ev->await();
    CHECK(std::memcmp(a, r, sizeof(a)) == 0);
    BufferPtr y = c.copyToDevice(*x, 1);
    CHECK(y->device() == 1 && y->queryDevice() == 1);
    CHECK(readF32(*y) == (std::vector<float>{1, 2, 3, 4}));
  });

  // --- 6. errors from the plugin
  test("bad program gives Error with the plugin's message", [&] {
    std::string msg;
    int code = 0;
    CHECK(throwsError([&] { c.compile("module { this is not mlir }"); }, &msg, &code));
    std::printf("  code %d, message: %.300s\n", code, msg.c_str());
    CHECK(msg.find("PJRT_Client_Compile") != std::string::npos);
    CHECK(msg.size() > strlen("PJRT_Client_Compile: "));
    // type error inside a well-formed module
    const char* bad = R"(
module @m {
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<3xf32>) {
    %0 = "stablehlo.negate"(%arg0) : (tensor<4xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}
)";
    CHECK(throwsError([&] { c.compile(bad); }, &msg));
    std::printf("  message: %.300s\n", msg.c_str());
    // wrong argument count at execute
    float a[4] = {};
    BufferPtr x = c.fromHost(a, ElementType::F32, {4}, 0);
    CHECK(throwsError([&] { add4->execute(0, {x.get()}); }, &msg));
    std::printf("  execute with 1 arg: %.300s\n", msg.c_str());
    CHECK(throwsError([&] { c.compile(kAdd4, 2); }, &msg, &code));
    CHECK(code == kErrorUnimplemented);
  });

  // --- 5. donation
  test("donation", [&] {
    const char* prog = R"(
module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32> {tf.aliasing_output = 0 : i32}) -> tensor<4xf32> {
    %0 = "stablehlo.add"(%arg0, %arg0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
)";
    ExecutablePtr e = c.compile(prog);
    float a[4] = {1, 2, 3, 4};
    for (int d = 0; d < 2; ++d) {
      BufferPtr x = c.fromHost(a, ElementType::F32, {4}, d);
      int64_t live0 = c.liveBytes(d);
      auto outs = e->execute(d, {x.get()}, {true});
      CHECK(readF32(*outs[0]) == (std::vector<float>{2, 4, 6, 8}));
      CHECK(x->isDeleted());
      CHECK(c.liveBytes(d) == live0);  // input freed, output allocated
      CHECK(throwsError([&] { readF32(*x); }));  // donated buffer is gone: Error, not a crash
      // not donated: input survives
      BufferPtr y = c.fromHost(a, ElementType::F32, {4}, d);
      auto outs2 = e->execute(d, {y.get()});
      CHECK(!y->isDeleted());
      CHECK(readF32(*outs2[0]) == (std::vector<float>{2, 4, 6, 8}));
      CHECK(readF32(*y) == (std::vector<float>{1, 2, 3, 4}));
    }
    // same buffer twice with donation requested: must not be donated
    BufferPtr z = c.fromHost(a, ElementType::F32, {4}, 0);
    auto o = add4->execute(0, {z.get(), z.get()}, {true, true});
    CHECK(readF32(*o[0]) == (std::vector<float>{2, 4, 6, 8}));
    CHECK(!z->isDeleted());
    CHECK(readF32(*z) == (std::vector<float>{1, 2, 3, 4}));
    CHECK(throwsError([&] { add4->execute(0, {z.get(), z.get()}, {true}); }));  // wrong donate length
  });

  // --- 9. memory stats, accounting, synchronize
  test("memoryStats / live bytes accounting", [&] {
    for (int d = 0; d < 2; ++d) {
      auto ms = c.memoryStats(d);
      if (ms) std::printf("  device %d plugin memory stats: in use %lld, peak %lld, limit %lld\n", d,
                          (long long)ms->bytes_in_use, (long long)ms->peak_bytes_in_use, (long long)ms->bytes_limit);
      else std::printf("  device %d: PJRT_Device_MemoryStats UNIMPLEMENTED -> nullopt\n", d);
    }
    int64_t base = c.liveBytes(1);
    c.resetPeak(1);
    CHECK(c.peakLiveBytes(1) == base);
    {
      std::vector<float> big(1 << 20);
      BufferPtr b = c.fromHost(big.data(), ElementType::F32, {1 << 20}, 1);
      CHECK(c.liveBytes(1) == base + (4 << 20));
      CHECK(c.liveBytes(0) >= 0);
    }
    CHECK(c.liveBytes(1) == base);
    CHECK(c.peakLiveBytes(1) == base + (4 << 20));
  });

  test("synchronize under async execution", [&] {
    // A chain of dependent adds of a large array; synchronize must wait for all of them.
    const int n = 1 << 20;
    ExecutablePtr e = c.compile(addProgram(n));
    std::vector<float> ones(n, 1.0f);
    for (int d = 0; d < 2; ++d) {
      BufferPtr acc = c.fromHost(ones.data(), ElementType::F32, {n}, d);
      BufferPtr one = c.fromHost(ones.data(), ElementType::F32, {n}, d);
      std::vector<BufferPtr> keep;
      for (int i = 0; i < 100; ++i) {
        acc = e->execute(d, {acc.get(), one.get()})[0];
        keep.push_back(acc);
      }
      c.synchronize(d);
      for (auto& b : keep) CHECK(b->isReady());
      std::vector<float> out(n);
      acc->toHost(out.data(), out.size() * 4);
      CHECK(out[0] == 101.0f && out[n - 1] == 101.0f);
      CHECK(throwsError([&] { acc->toHostAsync(out.data(), 4); }));  // dst too small
    }
  });

  // --- serialize / deserialize
  test("serialize / deserialize", [&] {
    std::string bytes;
    int code = 0;
    std::string msg;
    if (throwsError([&] { bytes = add4->serialize(); }, &msg, &code)) {
      std::printf("  serialize not available: %s\n", msg.c_str());
      CHECK(code == kErrorUnimplemented);
      return;
    }
    std::printf("  serialized executable: %zu bytes\n", bytes.size());
    ExecutablePtr e2;
    if (throwsError([&] { e2 = c.deserialize(bytes); }, &msg)) {
      std::printf("  deserialize failed: %s\n", msg.c_str());
      return;
    }
    float a[4] = {1, 2, 3, 4};
    for (int d = 0; d < 2; ++d) {
      BufferPtr x = c.fromHost(a, ElementType::F32, {4}, d);
      auto o = e2->execute(d, {x.get(), x.get()});
      CHECK(readF32(*o[0]) == (std::vector<float>{2, 4, 6, 8}));
    }
  });

  // --- 7. threads
  test("4 threads x 300 iterations execute + toHost", [&] {
    std::atomic<int> bad{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t) {
      ts.emplace_back([&, t] {
        try {
          int d = t % 2;
          for (int i = 0; i < 300; ++i) {
            float a[4] = {float(t), float(i), 1, 2}, b[4] = {1, 1, 1, 1};
            BufferPtr x = c.fromHost(a, ElementType::F32, {4}, d);
            BufferPtr y = c.fromHost(b, ElementType::F32, {4}, d);
            auto o = add4->execute(d, {x.get(), y.get()});
            float r[4];
            o[0]->toHost(r, sizeof(r));
            if (r[0] != t + 1 || r[1] != i + 1 || r[2] != 2 || r[3] != 3) ++bad;
            if (i % 50 == 0) c.synchronize(d);
          }
        } catch (const std::exception& e) {
          std::fprintf(stderr, "  thread %d: %s\n", t, e.what());
          ++bad;
        }
      });
    }
    for (auto& t : ts) t.join();
    CHECK(bad == 0);
    c.synchronize(0);
    c.synchronize(1);
  });

  // --- 7b. reservations count in the live bytes and their peak
  test("reserve: counted in live bytes", [&] {
    c.synchronize(0);
    int64_t live = c.liveBytes(0);
    c.reserve(0, 1 << 20);
    CHECK(c.liveBytes(0) == live + (1 << 20));
    CHECK(c.reservedBytes(0) >= (1 << 20));
    CHECK(c.peakLiveBytes(0) >= live + (1 << 20));
    c.reserve(0, -(1 << 20));
    CHECK(c.liveBytes(0) == live);
  });

  // --- 7b2. launch tracing (profilers): every launch while a trace is active, with its label and times
  test("launch trace: records labelled launches with completion times, nothing outside a trace", [&] {
    Client& c = *cp;
    ExecutablePtr e = c.compile(addProgram(1 << 16));
    std::vector<float> v(1 << 16, 1.0f);
    BufferPtr x = c.fromHost(v.data(), ElementType::F32, {1 << 16}, 0);
    BufferPtr y = c.fromHost(v.data(), ElementType::F32, {1 << 16}, 1);
    CHECK(!launchTraceActive());
    e->execute(0, {x.get(), x.get()});
    static std::atomic<uint64_t> corr{100};
    startLaunchTrace([]() -> uint64_t { return corr++; });
    CHECK(launchTraceActive());
    const std::string op = "aten::add.Tensor", graph = "graph_0", ops = "a, b";
    {
      LaunchScope s("eager", &op);
      for (int i = 0; i < 3; ++i) e->execute(0, {x.get(), x.get()});
      {
        LaunchScope inner("fused", &graph, &ops);
        e->execute(1, {y.get(), y.get()});
      }
      e->execute(0, {x.get(), x.get()});  // the outer label again
    }
    e->execute(0, {x.get(), x.get()});  // no label
    std::vector<LaunchRecord> r = stopLaunchTrace();
    CHECK(!launchTraceActive());
    e->execute(0, {x.get(), x.get()});  // after the trace: not recorded
    c.synchronize(0);
    CHECK(r.size() == 6);
    if (r.size() != 6) return;
    for (size_t i = 0; i < r.size(); ++i) {
      CHECK(r[i].seq == i);
      CHECK(r[i].correlation == 100 + i);
      CHECK(r[i].launch_ns > 0 && r[i].launch_ns <= r[i].queued_ns && r[i].queued_ns <= r[i].done_ns);
      CHECK(!r[i].failed);
      CHECK(r[i].thread != 0);
      if (i) CHECK(r[i].launch_ns >= r[i - 1].launch_ns);
    }
    CHECK(r[0].kind == "eager" && r[0].name == op && r[0].detail.empty() && r[0].device == 0);
    CHECK(r[3].kind == "fused" && r[3].name == graph && r[3].detail == ops && r[3].device == 1);
    CHECK(r[4].kind == "eager" && r[4].name == op);
    CHECK(r[5].kind.empty() && r[5].name.empty());
    std::printf("  traced 65536-float add: %.1f us launch -> done\n", (r[0].done_ns - r[0].launch_ns) / 1e3);
    // A new trace starts empty; a launch that fails to start is not recorded.
    startLaunchTrace();
    CHECK(throwsError([&] { e->execute(0, {x.get()}); }));
    e->execute(0, {x.get(), x.get()});
    r = stopLaunchTrace();
    CHECK(r.size() == 1 && r[0].correlation == 0);
  });

  // --- 7c. a child forked after the client started cannot use the plugin: every call throws, nothing hangs
  test("forked child: every call throws instead of hanging", [&] {
    float v[4] = {1, 2, 3, 4};
    BufferPtr x = c.fromHost(v, ElementType::F32, {4}, 0);
    ExecutablePtr e = c.compile(kAdd4);
    CHECK(!Client::inForkedChild());
    pid_t pid = fork();
    if (pid == 0) {
      int bad = 0;
      std::string msg;
      if (!Client::inForkedChild()) bad |= 1;
      if (!throwsError([&] { c.fromHost(v, ElementType::F32, {4}, 0); }, &msg)) bad |= 2;
      if (msg.find("cannot re-initialize tpu in a forked subprocess") == std::string::npos) bad |= 4;
      if (!throwsError([&] { readF32(*x); })) bad |= 8;
      if (!throwsError([&] { e->execute(0, {x.get(), x.get()}); })) bad |= 16;
      if (!throwsError([&] { c.synchronize(0); })) bad |= 32;
      x.reset();  // destroying a buffer in the child touches nothing
      _exit(bad);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    std::printf("  child exit status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(!Client::inForkedChild());
    CHECK(readF32(*x)[3] == 4.0f);  // the parent is unaffected
  });

  // --- 8. latency
  test("latency", [&] {
    const int n = 1024;
    ExecutablePtr e = c.compile(addProgram(n));
    std::vector<float> v(n, 1.0f);
    BufferPtr x = c.fromHost(v.data(), ElementType::F32, {n}, 0);
    BufferPtr y = c.fromHost(v.data(), ElementType::F32, {n}, 0);
    std::vector<Buffer*> args{x.get(), y.get()};
    for (int i = 0; i < 200; ++i) e->execute(0, args);
    c.synchronize(0);
    const int iters = 5000;
    std::vector<BufferPtr> keep;
    keep.reserve(iters);
    double t0 = nowUs();
    for (int i = 0; i < iters; ++i) keep.push_back(e->execute(0, args)[0]);
    double t1 = nowUs();
    c.synchronize(0);
    double t2 = nowUs();
    keep.clear();
    std::printf("  execute() launch of 1k-float add: %.2f us/call (sync of %d launches took %.0f us)\n",
                (t1 - t0) / iters, iters, t2 - t1);
    // launch + wait per call
    t0 = nowUs();
    for (int i = 0; i < 1000; ++i) e->execute(0, args)[0]->awaitReady();
    t1 = nowUs();
    std::printf("  execute() + awaitReady: %.2f us/call\n", (t1 - t0) / 1000);
    float s = 1;
    for (int i = 0; i < 200; ++i) c.fromHost(&s, ElementType::F32, {}, 0);
    t0 = nowUs();
    for (int i = 0; i < iters; ++i) c.fromHost(&s, ElementType::F32, {}, 0);
    t1 = nowUs();
    std::printf("  fromHost of a 4-byte scalar (incl. destroy): %.2f us/call\n", (t1 - t0) / iters);
    std::vector<float> r(n);
    t0 = nowUs();
    for (int i = 0; i < 1000; ++i) x->toHost(r.data(), r.size() * sizeof(float));
    t1 = nowUs();
    std::printf("  toHost of 1k floats: %.2f us/call\n", (t1 - t0) / 1000);
  });

  std::printf("%s (%d failed checks)\n", g_failures == 0 ? "ALL PASSED" : "FAILED", g_failures);
  return g_failures == 0 ? 0 : 1;
}
