// Collective programs across the devices of one process on the plugin named by $TORCH_TPU_PJRT_PLUGIN (the CPU
// plugin with 4 virtual devices in CI), launched one device per thread; pending, uninitialized and host-visible
// buffers. Self-contained (no gtest).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/runtime.h"
#include "stablehlo/builder.h"
#include "stablehlo/collectives.h"
#include "harness.h"

using namespace torch_tpu;
using runtime::Buffer;
using runtime::BufferPtr;
using runtime::Client;
using runtime::ElementType;

static std::vector<float> readF32(Buffer& b) {
  std::vector<float> v(static_cast<size_t>(b.numElements()));
  b.toHost(v.data(), v.size() * sizeof(float));
  return v;
}

static int g_launch = 1;

// Runs `exe` on devices 0..n-1, one thread each, with input ins[r]; returns the first output of each.
static std::vector<BufferPtr> launchAll(runtime::Executable& exe, const std::vector<BufferPtr>& ins) {
  const int n = static_cast<int>(ins.size());
  const int launch = g_launch++;
  std::vector<BufferPtr> outs(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] { outs[static_cast<size_t>(r)] = exe.execute(r, {ins[static_cast<size_t>(r)].get()}, {}, launch)[0]; });
  for (auto& t : threads) t.join();
  return outs;
}

using OpFn = std::function<shlo::Value(shlo::Builder&, shlo::Value)>;

static runtime::ExecutablePtr build(int n, const shlo::TensorType& in, const OpFn& op) {
  shlo::Builder b;
  shlo::Value x = b.parameter(in);
  shlo::Value y = op(b, x);
  std::string text = shlo::finishReplicated(b, {y}, n);
  runtime::DeviceAssignment da;
  da.num_replicas = n;
  return Client::get().compile(text, da);
}

int main() {
  std::string plugin = Client::pluginPathFromEnv();
  if (plugin.empty()) {
    std::fprintf(stderr, "TORCH_TPU_PJRT_PLUGIN is not set\n");
    return 2;
  }
  const int n = 4;
  Client& c = Client::init(plugin, {{"cpu_device_count", int64_t{n}}});
  if (c.deviceCount() < n) {
    std::printf("SKIP: %d devices\n", c.deviceCount());
    return 0;
  }
  shlo::ReplicaGroups all = {{0, 1, 2, 3}};
  const int64_t len = 8;
  std::vector<BufferPtr> ins;
  for (int r = 0; r < n; ++r) {
    std::vector<float> v(len);
    for (int64_t i = 0; i < len; ++i) v[static_cast<size_t>(i)] = static_cast<float>(100 * r + i);
    ins.push_back(c.fromHost(v.data(), ElementType::F32, {len}, r));
  }
  shlo::TensorType t{shlo::DType::F32, {len}};

  test("global device ids and process index", [&] {
    for (int d = 0; d < n; ++d) {
      CHECK(c.globalDeviceId(d) >= 0);
      CHECK(c.processIndex(d) == 0);
    }
    CHECK(c.globalDeviceId(0) != c.globalDeviceId(1));
    CHECK(c.deviceMemoryIsHostMemory() == (c.plugin().platform_name == "cpu"));
  });

  test("all_reduce sum and max, repeated launches", [&] {
    auto sum = build(n, t, [&](shlo::Builder& b, shlo::Value x) { return shlo::allReduce(b, x, "stablehlo.add", all, 1); });
    auto mx = build(n, t, [&](shlo::Builder& b, shlo::Value x) { return shlo::allReduce(b, x, "stablehlo.maximum", all, 1); });
    for (int iter = 0; iter < 3; ++iter) {
      auto outs = launchAll(*sum, ins);
      for (int r = 0; r < n; ++r) {
        auto v = readF32(*outs[static_cast<size_t>(r)]);
        for (int64_t i = 0; i < len; ++i) CHECK(v[static_cast<size_t>(i)] == static_cast<float>(600 + 4 * i));
      }
      outs = launchAll(*mx, ins);
      auto v = readF32(*outs[2]);
      for (int64_t i = 0; i < len; ++i) CHECK(v[static_cast<size_t>(i)] == static_cast<float>(300 + i));
    }
  });

  test("all_reduce in two groups", [&] {
    shlo::ReplicaGroups pairs = {{0, 2}, {1, 3}};
    auto exe = build(n, t, [&](shlo::Builder& b, shlo::Value x) { return shlo::allReduce(b, x, "stablehlo.add", pairs, 1); });
    auto outs = launchAll(*exe, ins);
    CHECK(readF32(*outs[0])[1] == 0 + 1 + 200 + 1);
    CHECK(readF32(*outs[3])[1] == 100 + 1 + 300 + 1);
  });

  test("all_gather", [&] {
    auto exe = build(n, t, [&](shlo::Builder& b, shlo::Value x) { return shlo::allGather(b, x, 0, all, 1); });
    auto outs = launchAll(*exe, ins);
    auto v = readF32(*outs[1]);
    CHECK(v.size() == static_cast<size_t>(n * len));
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < len; ++i) CHECK(v[static_cast<size_t>(r * len + i)] == static_cast<float>(100 * r + i));
  });

  test("reduce_scatter", [&] {
    auto exe = build(n, t, [&](shlo::Builder& b, shlo::Value x) {
      return shlo::reduceScatter(b, x, 0, "stablehlo.add", all, 1);
    });
    auto outs = launchAll(*exe, ins);
    for (int r = 0; r < n; ++r) {
      auto v = readF32(*outs[static_cast<size_t>(r)]);
      CHECK(v.size() == 2);
      for (int64_t i = 0; i < 2; ++i) CHECK(v[static_cast<size_t>(i)] == static_cast<float>(600 + 4 * (2 * r + i)));
    }
  });

  test("all_to_all", [&] {
    auto exe = build(n, t, [&](shlo::Builder& b, shlo::Value x) { return shlo::allToAll(b, x, 0, 0, all, 0); });
    auto outs = launchAll(*exe, ins);
    for (int r = 0; r < n; ++r) {
      auto v = readF32(*outs[static_cast<size_t>(r)]);
      // block j of the result is block r of replica j's input
      for (int j = 0; j < n; ++j)
        for (int64_t i = 0; i < 2; ++i)
          CHECK(v[static_cast<size_t>(2 * j + i)] == static_cast<float>(100 * j + 2 * r + i));
    }
  });

  test("collective_permute (ring)", [&] {
    auto exe = build(n, t, [&](shlo::Builder& b, shlo::Value x) {
      return shlo::collectivePermute(b, x, {{0, 1}, {1, 2}, {2, 3}, {3, 0}}, 0);
    });
    auto outs = launchAll(*exe, ins);
    CHECK(readF32(*outs[1])[3] == 3);
    CHECK(readF32(*outs[0])[3] == 303);
  });

  test("bad replica groups are a BuildError", [&] {
    bool threw = false;
    try {
      shlo::Builder b;
      shlo::Value x = b.parameter(t);
      shlo::allReduce(b, x, "stablehlo.add", {{0, 1}, {1, 2}}, 1);
    } catch (const shlo::BuildError& e) {
      threw = std::string(e.what()).find("two groups") != std::string::npos;
    }
    CHECK(threw);
  });

  test("pending buffer: programs wait for fulfill", [&] {
    auto pend = c.pending(ElementType::F32, {len}, 0);
    if (!pend) {
      std::printf("  plugin has no alias buffers\n");
      return;
    }
    shlo::Builder b;
    shlo::Value x = b.parameter(t), y = b.parameter(t);
    std::string text = b.finish({b.add(x, y)});
    auto exe = c.compile(text);
    auto out = exe->execute(0, {pend->buffer().get(), ins[0].get()})[0];
    CHECK(!pend->fulfilled());
    std::vector<float> host = readF32(*ins[0]);
    BufferPtr value = c.fromHost(host.data(), ElementType::F32, {len}, 0);
    pend->fulfill(value);  // consumes `value`
    CHECK(value->isDeleted());
    CHECK(pend->fulfilled());
    auto v = readF32(*out);
    for (int64_t i = 0; i < len; ++i) CHECK(v[static_cast<size_t>(i)] == static_cast<float>(2 * i));
    // an unfulfilled pending buffer is released without hanging its readers
    auto pend2 = c.pending(ElementType::F32, {len}, 0);
    auto out2 = exe->execute(0, {pend2->buffer().get(), ins[0].get()})[0];
    pend2.reset();
    out2->awaitReady();
  });

  test("uninitialized buffers and host pointers", [&] {
    if (!c.deviceMemoryIsHostMemory()) return;
    auto u = c.uninitialized(ElementType::F32, {len}, 1);
    auto* p = static_cast<float*>(u->unsafePointer());
    for (int64_t i = 0; i < len; ++i) p[i] = static_cast<float>(i * i);
    auto v = readF32(*u);
    for (int64_t i = 0; i < len; ++i) CHECK(v[static_cast<size_t>(i)] == static_cast<float>(i * i));
    ins[2]->awaitReady();
    auto* q = static_cast<const float*>(ins[2]->unsafePointer());
    CHECK(q[5] == 205);
  });

  if (g_failures) {
    std::printf("FAILED: %d checks\n", g_failures);
    return 1;
  }
  std::printf("ALL PASSED\n");
  return 0;
}
