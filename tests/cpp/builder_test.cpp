// Tests for the StableHLO builder: text checks, error checks, and every method compiled and run on the PJRT plugin
// named by $TORCH_TPU_PJRT_PLUGIN (numbers checked against host references). Self-contained (no gtest).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "runtime/runtime.h"
#include "stablehlo/builder.h"
#include "harness.h"

using namespace torch_tpu;
using shlo::Builder;
using shlo::Cmp;
using shlo::DType;
using shlo::ReduceKind;
using shlo::Shape;
using shlo::TensorType;
using shlo::Value;


template <class F>
static std::string buildError(F&& f) {
  try {
    f();
  } catch (const shlo::BuildError& e) {
    return e.what();
  }
  return "";
}

// ------------------------------------------------------------------ host tensors

struct HostT {
  TensorType type;
  std::vector<unsigned char> bytes;
  template <class T>
  std::vector<T> as() const {
    std::vector<T> v(bytes.size() / sizeof(T));
    std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
};

static size_t elemSize(DType t) {
  switch (t) {
    case DType::Pred: case DType::S8: case DType::U8: return 1;
    case DType::S16: case DType::U16: case DType::F16: case DType::BF16: return 2;
    case DType::S32: case DType::U32: case DType::F32: return 4;
    case DType::C128: return 16;
    default: return 8;
  }
}

template <class T>
static HostT H(DType t, Shape shape, const std::vector<T>& vals) {
  HostT h{TensorType{t, std::move(shape)}, {}};
  h.bytes.resize(vals.size() * sizeof(T));
  std::memcpy(h.bytes.data(), vals.data(), h.bytes.size());
  if (h.bytes.size() != static_cast<size_t>(h.type.numel()) * elemSize(t)) {
    std::fprintf(stderr, "bad host tensor size\n");
    std::abort();
  }
  return h;
}
static HostT F32(Shape s, const std::vector<float>& v) { return H<float>(DType::F32, std::move(s), v); }
static HostT S32(Shape s, const std::vector<int32_t>& v) { return H<int32_t>(DType::S32, std::move(s), v); }

static bool g_print = false;

// Builds a program whose parameters have the types of `inputs`, compiles it, runs it and returns the results.
static std::vector<HostT> exec(const std::vector<HostT>& inputs,
                               const std::function<std::vector<Value>(Builder&, const std::vector<Value>&)>& fn) {
  Builder b;
  std::vector<Value> params;
  for (const HostT& h : inputs) params.push_back(b.parameter(h.type));
  std::vector<Value> res = fn(b, params);
  std::string text = b.finish(res);
  if (g_print) std::printf("%s", text.c_str());
  runtime::Client& c = runtime::Client::get();
  runtime::ExecutablePtr exe;
  try {
    exe = c.compile(text);
  } catch (...) {
    std::fprintf(stderr, "---- program that failed to compile:\n%s----\n", text.c_str());
    throw;
  }
  std::vector<runtime::BufferPtr> bufs;
  std::vector<runtime::Buffer*> args;
  for (const HostT& h : inputs) {
    bufs.push_back(c.fromHost(h.bytes.data(), static_cast<runtime::ElementType>(h.type.dtype), h.type.shape, 0));
    args.push_back(bufs.back().get());
  }
  std::vector<runtime::BufferPtr> outs = exe->execute(0, args);
  std::vector<HostT> host;
  for (size_t i = 0; i < outs.size(); ++i) {
    HostT h{res.at(i).type, {}};
    h.bytes.resize(static_cast<size_t>(h.type.numel()) * elemSize(h.type.dtype));
    outs[i]->toHost(h.bytes.data(), h.bytes.size());
    CHECK(static_cast<int>(outs[i]->type()) == static_cast<int>(h.type.dtype));
    CHECK(outs[i]->dims() == h.type.shape);
    host.push_back(std::move(h));
  }
  return host;
}

static HostT exec1(const std::vector<HostT>& inputs, const std::function<Value(Builder&, const std::vector<Value>&)>& fn) {
  return exec(inputs, [&](Builder& b, const std::vector<Value>& p) { return std::vector<Value>{fn(b, p)}; }).at(0);
}

static bool same(double a, double b, double tol) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= tol * (1 + std::fabs(b));
}

template <class T, class U>
static bool near(const std::vector<T>& got, const std::vector<U>& want, double tol = 1e-5) {
  bool ok = got.size() == want.size();
  for (size_t i = 0; ok && i < got.size(); ++i) ok = same(static_cast<double>(got[i]), static_cast<double>(want[i]), tol);
  if (!ok) {
    std::fprintf(stderr, "  got:  ");
    for (auto g : got) std::fprintf(stderr, "%.9g ", static_cast<double>(g));
    std::fprintf(stderr, "\n  want: ");
    for (auto w : want) std::fprintf(stderr, "%.9g ", static_cast<double>(w));
    std::fprintf(stderr, "\n");
  }
  return ok;
}

static const float kInf = std::numeric_limits<float>::infinity();
static const float kNaN = std::numeric_limits<float>::quiet_NaN();

// ------------------------------------------------------------------ tests

static void textTests() {
  test("text: add program with donation", [] {
    Builder b;
    Value x = b.parameter({DType::F32, {4}});
    Value y = b.parameter({DType::F32, {4}}, 0);
    std::string t = b.finish({b.add(x, y)});
    const char* want =
        "module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
        "  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32> {tf.aliasing_output = 0 : i32}) -> "
        "(tensor<4xf32>) {\n"
        "    %0 = \"stablehlo.add\"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
        "    return %0 : tensor<4xf32>\n"
        "  }\n"
        "}\n";
    CHECK(t == want);
    if (t != want) std::fprintf(stderr, "%s", t.c_str());
  });
  test("text: trivial transposes and broadcasts fold", [] {
    Builder b;
    Value x = b.parameter({DType::F32, {2, 3, 4}});
    Value t = b.transpose(x, {0, 2, 1});
    CHECK(b.isTranspose(t) && !b.isTranspose(x));
    Value back = b.transpose(t, {0, 2, 1});
    CHECK(back.id == x.id);  // the two cancel
    Value other = b.transpose(t, {1, 0, 2});  // [4, 2, 3]: one transpose of x by the composed permutation
    CHECK(other.shape() == (Shape{4, 2, 3}));
    CHECK(b.broadcastInDim(x, {2, 3, 4}, {0, 1, 2}).id == x.id);
    std::string text = b.finish({back, other});
    size_t n = 0;
    for (size_t p = text.find("stablehlo.transpose"); p != std::string::npos; p = text.find("stablehlo.transpose", p + 1))
      ++n;
    CHECK(n == 2);  // t and the composed one, never a transpose of t
    CHECK(contains(text, "permutation = array<i64: 2, 0, 1>"));
    CHECK(!contains(text, "broadcast_in_dim"));
  });
  test("text: constants", [] {
    Builder b;
    auto lit = [&](Value v) { return b.ref(v); };
    (void)lit;
    b.constant(1.0, DType::F32);
    b.constant(0.1, DType::F32);
    b.constant(std::numeric_limits<double>::infinity(), DType::F32);
    b.constant(-std::numeric_limits<double>::infinity(), DType::BF16);
    b.constant(std::nan(""), DType::F16);
    b.constant(1e10, DType::F64);
    b.constantInt(-1, DType::U8);
    b.constantInt(-5, DType::S32);
    b.constant(2.0, DType::Pred);
    b.constantI64s({1, 2, 3}, DType::S64);
    b.constantI64s({}, DType::S64);
    b.constantF(0.5, DType::C64, {2});
    b.zeros({DType::Pred, {2, 3}});
    std::string t = b.finish({});
    CHECK(contains(t, "{value = dense<1.0> : tensor<f32>} : () -> tensor<f32>"));
    CHECK(contains(t, "dense<0.10000000149011612> : tensor<f32>"));
    CHECK(contains(t, "dense<0x7F800000> : tensor<f32>"));
    CHECK(contains(t, "dense<0xFF80> : tensor<bf16>"));
    CHECK(contains(t, "dense<0x7E00> : tensor<f16>"));
    CHECK(contains(t, "dense<1.0e+10> : tensor<f64>"));
    CHECK(contains(t, "dense<255> : tensor<ui8>"));
    CHECK(contains(t, "dense<-5> : tensor<i32>"));
    CHECK(contains(t, "dense<true> : tensor<i1>"));
    CHECK(contains(t, "dense<[1, 2, 3]> : tensor<3xi64>"));
    CHECK(contains(t, "dense<> : tensor<0xi64>"));
    CHECK(contains(t, "dense<(0.5, 0.0)> : tensor<2xcomplex<f32>>"));
    CHECK(contains(t, "dense<false> : tensor<2x3xi1>"));
    CHECK(contains(t, "return\n"));
  });
  test("text: compare / dot / reduce", [] {
    Builder b;
    Value x = b.parameter({DType::F32, {2, 3, 4}});
    Value y = b.parameter({DType::F32, {2, 4, 5}});
    Value u = b.parameter({DType::U32, {3}});
    b.compare(x, x, Cmp::GT);
    b.compare(u, u, Cmp::LT);
    b.dotGeneral(x, y, {0}, {0}, {2}, {1});
    b.reduce(x, {2, 0}, ReduceKind::Sum);
    std::string t = b.finish({});
    CHECK(contains(t, "comparison_direction = #stablehlo<comparison_direction GT>, compare_type = "
                      "#stablehlo<comparison_type FLOAT>"));
    CHECK(contains(t, "#stablehlo<comparison_type UNSIGNED>"));
    CHECK(contains(t, "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions "
                      "= [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>, "
                      "precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]} : "
                      "(tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>"));
    CHECK(contains(t, "{dimensions = array<i64: 0, 2>} : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<3xf32>"));
    CHECK(contains(t, "\"stablehlo.return\""));
  });
  test("errors: clear BuildError messages", [] {
    Builder b;
    Value x = b.parameter({DType::F32, {4}});
    Value i = b.parameter({DType::S32, {4}});
    Value m = b.parameter({DType::F32, {2, 3}});
    std::string e = buildError([&] { b.add(x, i); });
    CHECK(contains(e, "add") && contains(e, "tensor<4xf32>") && contains(e, "tensor<4xi32>"));
    CHECK(contains(buildError([&] { b.exp(i); }), "exp"));
    CHECK(contains(buildError([&] { b.andOp(x, x); }), "andOp"));
    CHECK(contains(buildError([&] { b.reshape(x, {3}); }), "element count"));
    CHECK(contains(buildError([&] { b.broadcastInDim(m, {2, 4}, {0, 1}); }), "broadcast"));
    CHECK(contains(buildError([&] { b.transpose(m, {0, 0}); }), "repeated"));
    CHECK(contains(buildError([&] { b.dotGeneral(m, m, {}, {}, {1}, {0}); }), "size mismatch"));
    CHECK(contains(buildError([&] { b.slice(x, {0}, {5}, {1}); }), "slice"));
    CHECK(contains(buildError([&] { b.select(x, x, x); }), "pred"));
    CHECK(contains(buildError([&] { b.concatenate({x, m}, 0); }), "concatenate"));
    CHECK(contains(buildError([&] { b.add(Value{}, x); }), "invalid Value"));
    CHECK(contains(buildError([&] { b.bitcastConvert(x, DType::S64); }), "bit widths"));
    CHECK(contains(buildError([&] { b.reduce(x, {0}, ReduceKind::And); }), "And"));
    std::printf("  e.g.: %s\n", e.c_str());
  });
  test("promoteTypes", [] {
    using shlo::promoteTypes;
    CHECK(promoteTypes(DType::Pred, DType::S8) == DType::S8);
    CHECK(promoteTypes(DType::U8, DType::S8) == DType::S16);
    CHECK(promoteTypes(DType::U8, DType::S32) == DType::S32);
    CHECK(promoteTypes(DType::S64, DType::F16) == DType::F16);
    CHECK(promoteTypes(DType::BF16, DType::F16) == DType::F32);
    CHECK(promoteTypes(DType::F32, DType::F64) == DType::F64);
    CHECK(promoteTypes(DType::C64, DType::F64) == DType::C128);
    CHECK(promoteTypes(DType::S32, DType::S64) == DType::S64);
    CHECK(promoteTypes(DType::Pred, DType::Pred) == DType::Pred);
    CHECK(promoteTypes(DType::U8, DType::Pred) == DType::U8);
    CHECK(promoteTypes(DType::BF16, DType::S64) == DType::BF16);
  });
  test("timing: build a small program", [] {
    const int N = 20000;
    auto t0 = std::chrono::steady_clock::now();
    size_t total = 0;
    for (int i = 0; i < N; ++i) {
      Builder b;
      Value x = b.parameter({DType::F32, {4, 8}});
      Value y = b.parameter({DType::F32, {4, 8}});
      total += b.finish({b.add(x, y)}).size();
    }
    double us1 = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / N;
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < N; ++i) {
      Builder b;
      Value x = b.parameter({DType::F32, {4, 8}});
      Value y = b.parameter({DType::F32, {8}});
      Value z = b.mul(x, b.broadcastTo(y, {4, 8}));
      z = b.add(z, b.scalarLike(1.0, z));
      total += b.finish({b.reduce(z, {1}, ReduceKind::Sum)}).size();
    }
    double us2 = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / N;
    std::printf("  one add: %.2f us per program; bcast+mul+add+reduce: %.2f us per program (%zu)\n", us1, us2,
                total);
    CHECK(us1 < 50);
  });
}

static void runTests() {
  test("run: binary float ops", [] {
    std::vector<float> a{1.5f, -2.0f, 3.0f, 0.25f}, c{0.5f, 3.0f, -2.0f, 4.0f};
    auto res = exec({F32({4}, a), F32({4}, c)}, [](Builder& b, const std::vector<Value>& p) {
      return std::vector<Value>{b.add(p[0], p[1]), b.sub(p[0], p[1]), b.mul(p[0], p[1]), b.div(p[0], p[1]),
                                b.rem(p[0], p[1]), b.pow(p[0], p[1]), b.max(p[0], p[1]), b.min(p[0], p[1]),
                                b.atan2(p[0], p[1])};
    });
    std::vector<std::function<double(double, double)>> ref{
        [](double x, double y) { return x + y; },       [](double x, double y) { return x - y; },
        [](double x, double y) { return x * y; },       [](double x, double y) { return x / y; },
        [](double x, double y) { return std::fmod(x, y); }, [](double x, double y) { return std::pow(x, y); },
        [](double x, double y) { return std::max(x, y); }, [](double x, double y) { return std::min(x, y); },
        [](double x, double y) { return std::atan2(x, y); }};
    for (size_t k = 0; k < ref.size(); ++k) {
      std::vector<double> want;
      for (size_t i = 0; i < a.size(); ++i) want.push_back(ref[k](a[i], c[i]));
      CHECK(near(res[k].as<float>(), want));
    }
  });
  test("run: integer binary + bit ops", [] {
    std::vector<int32_t> a{7, -7, 12, -1}, c{2, 2, 3, 1};
    auto res = exec({S32({4}, a), S32({4}, c)}, [](Builder& b, const std::vector<Value>& p) {
      return std::vector<Value>{b.div(p[0], p[1]),       b.rem(p[0], p[1]),       b.andOp(p[0], p[1]),
                                b.orOp(p[0], p[1]),      b.xorOp(p[0], p[1]),     b.shiftLeft(p[0], p[1]),
                                b.shiftRightArithmetic(p[0], p[1]), b.shiftRightLogical(p[0], p[1]),
                                b.notOp(p[0]),           b.popcnt(p[0]),          b.clz(p[0]),
                                b.abs(p[0]),             b.neg(p[0]),             b.sign(p[0]),
                                b.pow(p[0], p[1])};
    });
    std::vector<std::vector<int32_t>> want{
        {3, -3, 4, -1},
        {1, -1, 0, 0},
        {7 & 2, -7 & 2, 12 & 3, -1 & 1},
        {7 | 2, -7 | 2, 12 | 3, -1 | 1},
        {7 ^ 2, -7 ^ 2, 12 ^ 3, -1 ^ 1},
        {28, -28, 96, -2},
        {1, -2, 1, -1},
        {1, static_cast<int32_t>(static_cast<uint32_t>(-7) >> 2), 1, 0x7FFFFFFF},
        {~7, ~-7, ~12, ~-1},
        {3, 30, 2, 32},
        {29, 0, 28, 0},
        {7, 7, 12, 1},
        {-7, 7, -12, 1},
        {1, -1, 1, -1},
        {49, 49, 1728, -1}};
    for (size_t k = 0; k < want.size(); ++k) {
      bool ok = res[k].as<int32_t>() == want[k];
      if (!ok) std::fprintf(stderr, "  int op #%zu mismatch (first got %d want %d)\n", k, res[k].as<int32_t>()[0],
                            want[k][0]);
      CHECK(ok);
    }
  });
  test("run: unary float ops", [] {
    std::vector<float> a{0.5f, 1.25f, 2.5f, -0.75f};
    std::vector<float> pos{0.5f, 1.25f, 2.5f, 3.75f};
    using UF = Value (Builder::*)(Value);
    struct U { const char* name; UF f; double (*ref)(double); bool positive; };
    std::vector<U> ops{
        {"exp", &Builder::exp, [](double x) { return std::exp(x); }, false},
        {"expm1", &Builder::expm1, [](double x) { return std::expm1(x); }, false},
        {"log", &Builder::log, [](double x) { return std::log(x); }, true},
        {"log1p", &Builder::log1p, [](double x) { return std::log1p(x); }, false},
        {"sqrt", &Builder::sqrt, [](double x) { return std::sqrt(x); }, true},
        {"rsqrt", &Builder::rsqrt, [](double x) { return 1 / std::sqrt(x); }, true},
        {"cbrt", &Builder::cbrt, [](double x) { return std::cbrt(x); }, false},
        {"tanh", &Builder::tanh, [](double x) { return std::tanh(x); }, false},
        {"logistic", &Builder::logistic, [](double x) { return 1 / (1 + std::exp(-x)); }, false},
        {"sin", &Builder::sin, [](double x) { return std::sin(x); }, false},
        {"cos", &Builder::cos, [](double x) { return std::cos(x); }, false},
        {"tan", &Builder::tan, [](double x) { return std::tan(x); }, false},
        {"floor", &Builder::floor, [](double x) { return std::floor(x); }, false},
        {"ceil", &Builder::ceil, [](double x) { return std::ceil(x); }, false},
        {"roundNearestEven", &Builder::roundNearestEven, [](double x) { return std::nearbyint(x); }, false},
        {"roundNearestAfz", &Builder::roundNearestAfz, [](double x) { return std::round(x); }, false},
        {"sign", &Builder::sign, [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }, false},
        {"abs", &Builder::abs, [](double x) { return std::fabs(x); }, false},
        {"neg", &Builder::neg, [](double x) { return -x; }, false},
    };
    auto res = exec({F32({4}, a), F32({4}, pos)}, [&](Builder& b, const std::vector<Value>& p) {
      std::vector<Value> out;
      for (auto& u : ops) out.push_back((b.*u.f)(u.positive ? p[1] : p[0]));
      return out;
    });
    for (size_t k = 0; k < ops.size(); ++k) {
      std::vector<double> want;
      for (float x : ops[k].positive ? pos : a) want.push_back(ops[k].ref(x));
      bool ok = near(res[k].as<float>(), want, 2e-6);
      if (!ok) std::fprintf(stderr, "  op %s\n", ops[k].name);
      CHECK(ok);
    }
  });
  test("run: chlo ops accepted by the plugin", [] {
    std::vector<float> a{0.25f, -0.5f, 0.75f, 0.1f};
    std::vector<float> big{1.25f, 2.5f, 3.75f, 4.5f};
    struct C { const char* name; double (*ref)(double); bool big; };
    std::vector<C> ops{{"erf", [](double x) { return std::erf(x); }, false},
                       {"erfc", [](double x) { return std::erfc(x); }, false},
                       {"lgamma", [](double x) { return std::lgamma(x); }, true},
                       {"asin", [](double x) { return std::asin(x); }, false},
                       {"acos", [](double x) { return std::acos(x); }, false},
                       {"atan", [](double x) { return std::atan(x); }, false},
                       {"sinh", [](double x) { return std::sinh(x); }, false},
                       {"cosh", [](double x) { return std::cosh(x); }, false},
                       {"asinh", [](double x) { return std::asinh(x); }, false},
                       {"acosh", [](double x) { return std::acosh(x); }, true},
                       {"atanh", [](double x) { return std::atanh(x); }, false},
                       {"tan", [](double x) { return std::tan(x); }, false}};
    auto res = exec({F32({4}, a), F32({4}, big)}, [&](Builder& b, const std::vector<Value>& p) {
      std::vector<Value> out;
      for (auto& c : ops) out.push_back(b.chlo(c.name, c.big ? p[1] : p[0]));
      out.push_back(b.chlo("erf_inv", p[0]));
      out.push_back(b.chlo("digamma", p[1]));
      return out;
    });
    for (size_t k = 0; k < ops.size(); ++k) {
      std::vector<double> want;
      for (float x : ops[k].big ? big : a) want.push_back(ops[k].ref(x));
      bool ok = near(res[k].as<float>(), want, 1e-5);
      if (!ok) std::fprintf(stderr, "  chlo.%s\n", ops[k].name);
      CHECK(ok);
    }
    // erf(erf_inv(x)) == x
    std::vector<double> back;
    for (float y : res[ops.size()].as<float>()) back.push_back(std::erf(y));
    CHECK(near(back, a, 1e-5));
    // digamma(1.25), digamma(2.5), ... via the recurrence psi(x+1) = psi(x) + 1/x against a known value
    std::vector<float> dg = res[ops.size() + 1].as<float>();
    CHECK(same(dg[1], 0.7031566406452432, 1e-5));  // psi(2.5)
  });
  test("run: compare / select / clamp / isFinite", [] {
    std::vector<float> a{1.0f, kNaN, 3.0f, -kInf}, c{2.0f, 1.0f, 3.0f, 0.0f};
    auto res = exec({F32({4}, a), F32({4}, c)}, [](Builder& b, const std::vector<Value>& p) {
      Value gt = b.compare(p[0], p[1], Cmp::GT);
      return std::vector<Value>{b.compare(p[0], p[1], Cmp::EQ), b.compare(p[0], p[1], Cmp::NE),
                                b.compare(p[0], p[1], Cmp::LT), b.compare(p[0], p[1], Cmp::LE), gt,
                                b.compare(p[0], p[1], Cmp::GE), b.select(gt, p[0], p[1]),
                                b.select(b.constantInt(1, DType::Pred), p[0], p[1]),
                                b.clamp(b.constant(0.0, DType::F32), p[1], b.constant(2.5, DType::F32)),
                                b.isFinite(p[0])};
    });
    CHECK((res[0].as<uint8_t>() == std::vector<uint8_t>{0, 0, 1, 0}));
    CHECK((res[1].as<uint8_t>() == std::vector<uint8_t>{1, 1, 0, 1}));
    CHECK((res[2].as<uint8_t>() == std::vector<uint8_t>{1, 0, 0, 1}));
    CHECK((res[3].as<uint8_t>() == std::vector<uint8_t>{1, 0, 1, 1}));
    CHECK((res[4].as<uint8_t>() == std::vector<uint8_t>{0, 0, 0, 0}));
    CHECK((res[5].as<uint8_t>() == std::vector<uint8_t>{0, 0, 1, 0}));
    CHECK(near(res[6].as<float>(), std::vector<float>{2, 1, 3, 0}));
    CHECK(near(res[7].as<float>(), a));
    CHECK(near(res[8].as<float>(), std::vector<float>{2, 1, 2.5f, 0}));
    CHECK((res[9].as<uint8_t>() == std::vector<uint8_t>{1, 0, 1, 0}));
  });
  test("run: unsigned compare, convert, bitcast", [] {
    std::vector<uint32_t> u{1, 0xFFFFFFFFu, 5, 0};
    std::vector<float> f{-1.7f, 2.9f, 0.0f, 300.5f};
    auto res = exec({H<uint32_t>(DType::U32, {4}, u), F32({4}, f)}, [](Builder& b, const std::vector<Value>& p) {
      return std::vector<Value>{b.compare(p[0], b.scalarLike(2, p[0]), Cmp::GT),
                                b.convert(p[1], DType::S32),
                                b.convert(p[1], DType::Pred),
                                b.convert(p[1], DType::F64),
                                b.convert(p[1], DType::BF16),
                                b.convert(b.convert(p[1], DType::Pred), DType::F32),
                                b.bitcastConvert(p[1], DType::U32),
                                b.convert(p[0], DType::F32),
                                b.sign(p[0]),
                                b.abs(p[0])};
    });
    CHECK((res[0].as<uint8_t>() == std::vector<uint8_t>{0, 1, 1, 0}));
    CHECK((res[1].as<int32_t>() == std::vector<int32_t>{-1, 2, 0, 300}));
    CHECK((res[2].as<uint8_t>() == std::vector<uint8_t>{1, 1, 0, 1}));
    CHECK(near(res[3].as<double>(), f));
    std::vector<uint16_t> bf = res[4].as<uint16_t>();
    CHECK(bf[0] == 0xBFDA);  // -1.7 -> bf16 -1.703125
    CHECK(near(res[5].as<float>(), std::vector<float>{1, 1, 0, 1}));
    uint32_t bits;
    std::memcpy(&bits, &f[1], 4);
    CHECK(res[6].as<uint32_t>()[1] == bits);
    CHECK(near(res[7].as<float>(), std::vector<double>{1, 4294967295.0, 5, 0}, 1e-6));
    CHECK((res[8].as<uint32_t>() == std::vector<uint32_t>{1, 1, 1, 0}));
    CHECK(res[9].as<uint32_t>() == u);
  });
  test("run: constants round-trip exactly (f32/f64/f16/bf16/ints/pred/complex)", [] {
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> vals{0.1, -0.0, 1e-30, 3.4028234663852886e38, 1e-45, inf, -inf, 1.0 / 3.0, 65504.0, 1e-7};
    auto res = exec({}, [&](Builder& b, const std::vector<Value>&) {
      std::vector<Value> out;
      for (double v : vals) {
        out.push_back(b.constant(v, DType::F32));
        out.push_back(b.constant(v, DType::F64));
        out.push_back(b.constant(v, DType::F16));
        out.push_back(b.constant(v, DType::BF16));
      }
      out.push_back(b.constant(std::nan(""), DType::F32));
      out.push_back(b.constantInt(std::numeric_limits<int64_t>::min(), DType::S64));
      out.push_back(b.constantInt(-1, DType::U64));
      out.push_back(b.constantInt(-1, DType::U8));
      out.push_back(b.constantInt(-128, DType::S8));
      out.push_back(b.constant(3.0, DType::Pred));
      out.push_back(b.constantF(2.5, DType::C64, {2}));
      out.push_back(b.constantI64s({5, -6, 7}, DType::S16));
      out.push_back(b.constant(-3.9, DType::S32));
      out.push_back(b.constantF(1.5, DType::F32, {2, 3}));
      return out;
    });
    size_t k = 0;
    for (double v : vals) {
      float f32 = static_cast<float>(v);
      uint32_t got32 = res[k++].as<uint32_t>()[0], want32;
      std::memcpy(&want32, &f32, 4);
      CHECK(got32 == want32);
      double got64 = res[k++].as<double>()[0];
      CHECK(std::memcmp(&got64, &v, 8) == 0);
      _Float16 h = static_cast<_Float16>(v);
      uint16_t want16;
      std::memcpy(&want16, &h, 2);
      uint16_t got16 = res[k++].as<uint16_t>()[0];
      if (got16 != want16) std::fprintf(stderr, "  f16 %g: got %04x want %04x\n", v, got16, want16);
      CHECK(got16 == want16);
      uint16_t gotbf = res[k++].as<uint16_t>()[0];
      uint32_t u = want32 + 0x7FFF + ((want32 >> 16) & 1);  // round-to-nearest-even to bf16
      uint16_t wantbf = static_cast<uint16_t>(u >> 16);
      if (gotbf != wantbf) std::fprintf(stderr, "  bf16 %g: got %04x want %04x\n", v, gotbf, wantbf);
      CHECK(gotbf == wantbf);
    }
    CHECK(std::isnan(res[k++].as<float>()[0]));
    CHECK(res[k++].as<int64_t>()[0] == std::numeric_limits<int64_t>::min());
    CHECK(res[k++].as<uint64_t>()[0] == ~uint64_t{0});
    CHECK(res[k++].as<uint8_t>()[0] == 255);
    CHECK(res[k++].as<int8_t>()[0] == -128);
    CHECK(res[k++].as<uint8_t>()[0] == 1);
    CHECK(near(res[k++].as<float>(), std::vector<float>{2.5f, 0, 2.5f, 0}));
    CHECK((res[k++].as<int16_t>() == std::vector<int16_t>{5, -6, 7}));
    CHECK(res[k++].as<int32_t>()[0] == -3);
    CHECK(near(res[k++].as<float>(), std::vector<float>(6, 1.5f)));
  });
  test("run: iota / reshape / broadcast / transpose", [] {
    auto res = exec({F32({3}, {1, 2, 3})}, [](Builder& b, const std::vector<Value>& p) {
      Value io = b.iota({DType::S32, {2, 3}}, 1);
      Value bc = b.broadcastTo(p[0], {2, 3});
      Value bd = b.broadcastInDim(p[0], {3, 2}, {0});
      Value tr = b.transpose(b.reshape(b.iota({DType::F32, {6}}, 0), {2, 3}), {1, 0});
      Value sc = b.broadcastTo(b.constant(7, DType::F32), {2, 2});
      return std::vector<Value>{io, bc, bd, tr, sc};
    });
    CHECK((res[0].as<int32_t>() == std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
    CHECK(near(res[1].as<float>(), std::vector<float>{1, 2, 3, 1, 2, 3}));
    CHECK(near(res[2].as<float>(), std::vector<float>{1, 1, 2, 2, 3, 3}));
    CHECK(near(res[3].as<float>(), std::vector<float>{0, 3, 1, 4, 2, 5}));
    CHECK(near(res[4].as<float>(), std::vector<float>{7, 7, 7, 7}));
  });
  test("run: slice / concat / pad / reverse", [] {
    std::vector<float> a{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    auto res = exec({F32({3, 4}, a)}, [](Builder& b, const std::vector<Value>& p) {
      return std::vector<Value>{b.slice(p[0], {0, 1}, {3, 4}, {2, 2}), b.sliceInDim(p[0], 1, 3, 1, 0),
                                b.concatenate({p[0], p[0]}, 1),
                                b.pad(b.sliceInDim(p[0], 0, 1, 1, 0), b.constant(-1, DType::F32), {0, 1}, {1, -1},
                                      {0, 1}),
                                b.reverse(p[0], {0, 1})};
    });
    CHECK(near(res[0].as<float>(), std::vector<float>{1, 3, 9, 11}));
    CHECK(near(res[1].as<float>(), std::vector<float>{4, 5, 6, 7, 8, 9, 10, 11}));
    CHECK(res[2].type.shape == (Shape{3, 8}));
    CHECK(near(res[2].as<float>(), std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7, 8, 9, 10, 11,
                                                      8, 9, 10, 11}));
    // row [0 1 2 3] -> interior 1: [0 -1 1 -1 2 -1 3] -> low 1, high -1: [-1 0 -1 1 -1 2 -1]; plus one pad row
    CHECK(res[3].type.shape == (Shape{2, 7}));
    CHECK(near(res[3].as<float>(), std::vector<float>{-1, 0, -1, 1, -1, 2, -1, -1, -1, -1, -1, -1, -1, -1}));
    std::vector<float> rev(a.rbegin(), a.rend());
    CHECK(near(res[4].as<float>(), rev));
  });
  test("run: reduce (all kinds, dtypes)", [] {
    std::vector<float> a{1, -2, 3, 4, 5, -6};
    std::vector<int32_t> ia{1, 6, 3, 4, 5, 2};
    std::vector<uint8_t> pa{1, 0, 1, 1, 1, 1};
    auto res = exec({F32({2, 3}, a), S32({2, 3}, ia), H<uint8_t>(DType::Pred, {2, 3}, pa)},
                    [](Builder& b, const std::vector<Value>& p) {
                      return std::vector<Value>{
                          b.reduce(p[0], {1}, ReduceKind::Sum),  b.reduce(p[0], {0}, ReduceKind::Prod),
                          b.reduce(p[0], {0, 1}, ReduceKind::Max), b.reduce(p[0], {1}, ReduceKind::Min),
                          b.reduce(p[1], {1}, ReduceKind::And),  b.reduce(p[1], {1}, ReduceKind::Or),
                          b.reduce(p[1], {0, 1}, ReduceKind::Max), b.reduce(p[2], {1}, ReduceKind::And),
                          b.reduce(p[2], {0}, ReduceKind::Or),    b.reduce(p[1], {0}, ReduceKind::Sum)};
                    });
    CHECK(near(res[0].as<float>(), std::vector<float>{2, 3}));
    CHECK(near(res[1].as<float>(), std::vector<float>{4, -10, -18}));
    CHECK(near(res[2].as<float>(), std::vector<float>{5}));
    CHECK(near(res[3].as<float>(), std::vector<float>{-2, -6}));
    CHECK((res[4].as<int32_t>() == std::vector<int32_t>{1 & 6 & 3, 4 & 5 & 2}));
    CHECK((res[5].as<int32_t>() == std::vector<int32_t>{1 | 6 | 3, 4 | 5 | 2}));
    CHECK(res[6].as<int32_t>()[0] == 6);
    CHECK((res[7].as<uint8_t>() == std::vector<uint8_t>{0, 1}));
    CHECK((res[8].as<uint8_t>() == std::vector<uint8_t>{1, 1, 1}));
    CHECK((res[9].as<int32_t>() == std::vector<int32_t>{5, 11, 5}));
  });
  test("run: dotGeneral (matmul, batched, mixed result)", [] {
    std::vector<float> a{1, 2, 3, 4, 5, 6}, c{1, 0, 0, 1, 1, 1};
    auto res = exec({F32({2, 3}, a), F32({3, 2}, c)}, [](Builder& b, const std::vector<Value>& p) {
      Value mm = b.dotGeneral(p[0], p[1], {}, {}, {1}, {0});
      Value ba = b.reshape(p[0], {1, 2, 3});
      Value bb = b.reshape(p[1], {1, 3, 2});
      Value bmm = b.dotGeneral(ba, bb, {0}, {0}, {2}, {1});
      Value outer = b.dotGeneral(b.sliceInDim(b.reshape(p[0], {6}), 0, 2, 1, 0),
                                 b.sliceInDim(b.reshape(p[1], {6}), 0, 3, 1, 0), {}, {}, {}, {});
      Value ii = b.convert(p[0], DType::S32);
      Value imm = b.dotGeneral(ii, b.convert(p[1], DType::S32), {}, {}, {1}, {0});
      return std::vector<Value>{mm, bmm, outer, imm};
    });
    std::vector<float> want{1 + 3, 2 + 3, 4 + 6, 5 + 6};
    CHECK(near(res[0].as<float>(), want));
    CHECK(near(res[1].as<float>(), want));
    CHECK(near(res[2].as<float>(), std::vector<float>{1, 0, 0, 2, 0, 0}));
    CHECK((res[3].as<int32_t>() == std::vector<int32_t>{4, 5, 10, 11}));
  });
  test("run: dynamicSlice / dynamicUpdateSlice (mixed index types, clamping)", [] {
    std::vector<float> a{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    auto res = exec({F32({3, 4}, a), S32({}, {1}), H<int64_t>(DType::S64, {}, {3})},
                    [](Builder& b, const std::vector<Value>& p) {
                      Value ds = b.dynamicSlice(p[0], {p[1], p[2]}, {2, 2});  // col start clamped to 2
                      Value upd = b.constantF(-1, DType::F32, {1, 2});
                      Value dus = b.dynamicUpdateSlice(p[0], upd, {p[1], p[1]});
                      return std::vector<Value>{ds, dus};
                    });
    CHECK(near(res[0].as<float>(), std::vector<float>{6, 7, 10, 11}));
    CHECK(near(res[1].as<float>(), std::vector<float>{0, 1, 2, 3, 4, -1, -1, 7, 8, 9, 10, 11}));
  });
  test("run: gather / scatter", [] {
    std::vector<float> a{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    auto res = exec({F32({3, 4}, a), S32({2, 1}, {2, 0})}, [](Builder& b, const std::vector<Value>& p) {
      // rows 2 and 0 (index_select along dim 0)
      Builder::GatherDims gd{{1}, {0}, {0}, 1, {}, {}};
      Value g = b.gather(p[0], p[1], gd, {1, 4}, {2, 4});
      Builder::ScatterDims sd{{1}, {0}, {0}, 1, {}, {}};
      Value upd = b.constantF(1, DType::F32, {2, 4});
      Value s_add = b.scatter(p[0], p[1], upd, sd, ReduceKind::Sum);
      Value s_set = b.scatter(p[0], p[1], upd, sd, std::nullopt);
      Value s_max = b.scatter(p[0], p[1], b.constantF(5, DType::F32, {2, 4}), sd, ReduceKind::Max);
      return std::vector<Value>{g, s_add, s_set, s_max};
    });
    CHECK(near(res[0].as<float>(), std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3}));
    CHECK(near(res[1].as<float>(), std::vector<float>{1, 2, 3, 4, 4, 5, 6, 7, 9, 10, 11, 12}));
    CHECK(near(res[2].as<float>(), std::vector<float>{1, 1, 1, 1, 4, 5, 6, 7, 1, 1, 1, 1}));
    CHECK(near(res[3].as<float>(), std::vector<float>{5, 5, 5, 5, 4, 5, 6, 7, 8, 9, 10, 11}));
    std::string e = buildError([] {
      Builder b;
      Value o = b.parameter({DType::F32, {3, 4}});
      Value i = b.parameter({DType::S32, {2, 1}});
      b.gather(o, i, Builder::GatherDims{{1}, {0}, {0}, 1, {}, {}}, {1, 4}, {2, 3});
    });
    CHECK(contains(e, "does not match the computed [2, 4]"));
  });
  test("run: rngBitGenerator (THREE_FRY)", [] {
    std::vector<uint64_t> st{42, 7};
    auto res = exec({H<uint64_t>(DType::U64, {2}, st)}, [](Builder& b, const std::vector<Value>& p) {
      std::vector<Value> r1 = b.rngBitGenerator(p[0], {DType::U32, {1000}});
      std::vector<Value> r2 = b.rngBitGenerator(r1[0], {DType::U64, {4}});
      std::vector<Value> r3 = b.rngBitGenerator(p[0], {DType::U32, {1000}});
      return std::vector<Value>{r1[0], r1[1], r2[1], r3[1]};
    });
    CHECK(res[0].as<uint64_t>() != st);                    // state advanced
    CHECK(res[1].as<uint32_t>() == res[3].as<uint32_t>());  // deterministic
    std::vector<uint32_t> bits = res[1].as<uint32_t>();
    double mean = 0;
    for (uint32_t x : bits) mean += x / 4294967296.0;
    mean /= bits.size();
    std::printf("  mean of 1000 uniform draws: %.4f\n", mean);
    CHECK(mean > 0.45 && mean < 0.55);
    std::vector<uint64_t> b64 = res[2].as<uint64_t>();
    CHECK(b64[0] != b64[1]);
  });
  test("run: sort (NaN last, descending NaN first, stable, multi-operand)", [] {
    std::vector<float> a{3, kNaN, -1, 2, -kInf, 2, 0};
    auto res = exec({F32({7}, a)}, [](Builder& b, const std::vector<Value>& p) {
      Value idx = b.iota({DType::S32, {7}}, 0);
      std::vector<Value> asc = b.sort({p[0], idx}, 0, false, true);
      std::vector<Value> desc = b.sort({p[0], idx}, 0, true, true);
      Value m = b.reshape(b.iota({DType::S32, {6}}, 0), {2, 3});
      Value ms = b.sort({b.neg(m)}, 1, false, false)[0];
      return std::vector<Value>{asc[0], asc[1], desc[0], desc[1], ms};
    });
    CHECK(near(res[0].as<float>(), std::vector<float>{-kInf, -1, 0, 2, 2, 3, kNaN}));
    CHECK((res[1].as<int32_t>() == std::vector<int32_t>{4, 2, 6, 3, 5, 0, 1}));
    CHECK(near(res[2].as<float>(), std::vector<float>{kNaN, 3, 2, 2, 0, -1, -kInf}));
    CHECK((res[3].as<int32_t>() == std::vector<int32_t>{1, 0, 3, 5, 6, 2, 4}));
    CHECK((res[4].as<int32_t>() == std::vector<int32_t>{-2, -1, 0, -5, -4, -3}));
  });
  test("run: argReduce (ties -> first, NaN wins)", [] {
    std::vector<float> a{1, 5, 5, 2, kNaN, 3, kNaN, 0, -kInf, -kInf, -kInf, -kInf};
    auto res = exec({F32({3, 4}, a)}, [](Builder& b, const std::vector<Value>& p) {
      Value idx = b.iota({DType::S64, {3, 4}}, 1);
      std::vector<Value> mx = b.argReduce(p[0], idx, 1, true);
      std::vector<Value> mn = b.argReduce(p[0], idx, 1, false);
      Value ii = b.convert(b.reshape(b.iota({DType::S32, {12}}, 0), {3, 4}), DType::S32);
      ii = b.rem(ii, b.scalarLike(3, ii));  // [0 1 2 0 | 1 2 0 1 | 2 0 1 2]
      std::vector<Value> imx = b.argReduce(ii, b.iota({DType::S32, {3, 4}}, 1), 1, true);
      std::vector<Value> col = b.argReduce(p[0], b.iota({DType::S32, {3, 4}}, 0), 0, false);
      return std::vector<Value>{mx[0], mx[1], mn[0], mn[1], imx[0], imx[1], col[1]};
    });
    CHECK(near(res[0].as<float>(), std::vector<float>{5, kNaN, -kInf}));
    CHECK((res[1].as<int64_t>() == std::vector<int64_t>{1, 0, 0}));
    CHECK(near(res[2].as<float>(), std::vector<float>{1, kNaN, -kInf}));
    CHECK((res[3].as<int64_t>() == std::vector<int64_t>{0, 0, 0}));
    CHECK((res[4].as<int32_t>() == std::vector<int32_t>{2, 2, 2}));
    CHECK((res[5].as<int32_t>() == std::vector<int32_t>{2, 1, 0}));
    // columns: [1,NaN,-inf] [5,3,-inf] [5,NaN,-inf] [2,0,-inf] -> min: 1 (NaN), 2, 1, 2
    CHECK((res[6].as<int32_t>() == std::vector<int32_t>{1, 2, 1, 2}));
  });
  test("run: reduceWindow (max pool, avg-pool sum with padding, dilation)", [] {
    std::vector<float> a{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    auto res = exec({F32({1, 1, 4, 4}, a)}, [](Builder& b, const std::vector<Value>& p) {
      Value mp = b.reduceWindow(p[0], b.constant(-INFINITY, DType::F32), ReduceKind::Max, {1, 1, 2, 2},
                                {1, 1, 2, 2}, {}, {}, {});
      Value sp = b.reduceWindow(p[0], b.constant(0, DType::F32), ReduceKind::Sum, {1, 1, 3, 3}, {1, 1, 2, 2}, {},
                                {}, {{0, 0}, {0, 0}, {1, 1}, {1, 1}});
      Value dl = b.reduceWindow(p[0], b.constant(0, DType::F32), ReduceKind::Sum, {1, 1, 2, 2}, {}, {}, {1, 1, 2, 2},
                                {});
      return std::vector<Value>{mp, sp, dl};
    });
    CHECK(res[0].type.shape == (Shape{1, 1, 2, 2}));
    CHECK(near(res[0].as<float>(), std::vector<float>{6, 8, 14, 16}));
    CHECK(res[1].type.shape == (Shape{1, 1, 2, 2}));
    CHECK(near(res[1].as<float>(), std::vector<float>{1 + 2 + 5 + 6, 2 + 3 + 4 + 6 + 7 + 8, 5 + 6 + 9 + 10 + 13 + 14,
                                                      6 + 7 + 8 + 10 + 11 + 12 + 14 + 15 + 16}));
    CHECK(res[2].type.shape == (Shape{1, 1, 2, 2}));
    CHECK(near(res[2].as<float>(), std::vector<float>{1 + 3 + 9 + 11, 2 + 4 + 10 + 12, 5 + 7 + 13 + 15,
                                                      6 + 8 + 14 + 16}));
  });
  test("run: convolution (NCHW/OIHW, padding, stride, groups)", [] {
    std::vector<float> x(1 * 2 * 4 * 4);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3;
    std::vector<float> w(3 * 2 * 3 * 3);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) * 0.5f - 1;
    Builder::ConvDims cd{0, 1, {2, 3}, 0, 1, {2, 3}, 0, 1, {2, 3}};
    auto res = exec({F32({1, 2, 4, 4}, x), F32({3, 2, 3, 3}, w), F32({2, 1, 3, 3}, std::vector<float>(w.begin(), w.begin() + 18))},
                    [&](Builder& b, const std::vector<Value>& p) {
                      Value c1 = b.convolution(p[0], p[1], cd, {2, 2}, {{1, 1}, {1, 1}}, {}, {}, 1, 1, {1, 3, 2, 2});
                      Value c2 = b.convolution(p[0], p[2], cd, {1, 1}, {}, {}, {}, 2, 1, {1, 2, 2, 2});
                      return std::vector<Value>{c1, c2};
                    });
    auto X = [&](int c, int h, int ww) -> double {
      if (h < 0 || h >= 4 || ww < 0 || ww >= 4) return 0;
      return x[static_cast<size_t>((c * 4 + h) * 4 + ww)];
    };
    std::vector<double> want1;
    for (int o = 0; o < 3; ++o)
      for (int oh = 0; oh < 2; ++oh)
        for (int ow = 0; ow < 2; ++ow) {
          double s = 0;
          for (int c = 0; c < 2; ++c)
            for (int kh = 0; kh < 3; ++kh)
              for (int kw = 0; kw < 3; ++kw)
                s += X(c, oh * 2 - 1 + kh, ow * 2 - 1 + kw) * w[static_cast<size_t>(((o * 2 + c) * 3 + kh) * 3 + kw)];
          want1.push_back(s);
        }
    CHECK(near(res[0].as<float>(), want1));
    std::vector<double> want2;
    for (int o = 0; o < 2; ++o)
      for (int oh = 0; oh < 2; ++oh)
        for (int ow = 0; ow < 2; ++ow) {
          double s = 0;
          for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw) s += X(o, oh + kh, ow + kw) * w[static_cast<size_t>((o * 3 + kh) * 3 + kw)];
          want2.push_back(s);
        }
    CHECK(near(res[1].as<float>(), want2));
  });
  test("run: multi-key sort (lexicographic, NaN ties)", [] {
    std::vector<float> k0{2, 1, kNaN, 2, 1, kNaN};
    std::vector<int32_t> k1{5, 9, 3, 1, 2, 0};
    auto res = exec({F32({6}, k0), S32({6}, k1)}, [](Builder& b, const std::vector<Value>& p) {
      Value idx = b.iota({DType::S32, {6}}, 0);
      std::vector<Value> asc = b.sort({p[0], p[1], idx}, 0, false, true, 2);
      std::vector<Value> desc = b.sort({p[0], p[1], idx}, 0, true, false, 2);
      return std::vector<Value>{asc[2], desc[2]};
    });
    CHECK((res[0].as<int32_t>() == std::vector<int32_t>{4, 1, 3, 0, 5, 2}));
    CHECK((res[1].as<int32_t>() == std::vector<int32_t>{2, 5, 0, 3, 1, 4}));
  });
  test("run: integer reduce identities (u8 min, s8 max, u16 and), zero-size tensors", [] {
    std::vector<uint8_t> u{200, 100, 250};
    std::vector<int8_t> s8{-100, -128, -5};
    auto res = exec({H<uint8_t>(DType::U8, {3}, u), H<int8_t>(DType::S8, {3}, s8)},
                    [](Builder& b, const std::vector<Value>& p) {
                      Value empty = b.zeros({DType::F32, {0, 3}});
                      return std::vector<Value>{b.reduce(p[0], {0}, ReduceKind::Min),
                                                b.reduce(p[1], {0}, ReduceKind::Max),
                                                b.reduce(b.convert(p[0], DType::U16), {0}, ReduceKind::And),
                                                b.reduce(empty, {0}, ReduceKind::Sum),
                                                b.reduce(empty, {0}, ReduceKind::Max),
                                                b.constantI64s({}, DType::S32)};
                    });
    CHECK(res[0].as<uint8_t>()[0] == 100);
    CHECK(res[1].as<int8_t>()[0] == -5);
    CHECK(res[2].as<uint16_t>()[0] == (200 & 100 & 250));
    CHECK(near(res[3].as<float>(), std::vector<float>{0, 0, 0}));
    CHECK(near(res[4].as<float>(), std::vector<float>{-kInf, -kInf, -kInf}));
    CHECK(res[5].type.shape == (Shape{0}));
  });
  test("run: gather with operand_batching_dims (take_along_dim)", [] {
    std::vector<float> a{0, 1, 2, 3, 4, 5};
    auto res = exec({F32({2, 3}, a), S32({2, 2, 1}, {2, 0, 1, 1})}, [](Builder& b, const std::vector<Value>& p) {
      Builder::GatherDims gd{{}, {1}, {1}, 2, {0}, {0}};
      return std::vector<Value>{b.gather(p[0], p[1], gd, {1, 1}, {2, 2})};
    });
    CHECK(near(res[0].as<float>(), std::vector<float>{2, 0, 4, 4}));
  });
  test("run: chlo is_inf / complex arithmetic", [] {
    std::vector<float> a{1, kInf, -kInf, kNaN};
    std::vector<float> c{1, 2, 3, -1};  // two complex64 numbers: 1+2i, 3-i
    auto res = exec({F32({4}, a), H<float>(DType::C64, {2}, c)}, [](Builder& b, const std::vector<Value>& p) {
      return std::vector<Value>{b.chlo("is_inf", p[0]), b.mul(p[1], p[1]), b.add(p[1], b.scalarLike(1, p[1])),
                                b.convert(p[1], DType::F32)};
    });
    CHECK((res[0].as<uint8_t>() == std::vector<uint8_t>{0, 1, 1, 0}));
    CHECK(near(res[1].as<float>(), std::vector<float>{-3, 4, 8, -6}));
    CHECK(near(res[2].as<float>(), std::vector<float>{2, 2, 4, -1}));
    CHECK(near(res[3].as<float>(), std::vector<float>{1, 3}));
  });
  test("run: donated parameter (tf.aliasing_output) compiles and runs", [] {
    Builder b;
    Value x = b.parameter({DType::F32, {4}}, 0);
    Value y = b.parameter({DType::F32, {4}});
    std::string text = b.finish({b.add(x, y)});
    runtime::Client& c = runtime::Client::get();
    runtime::ExecutablePtr exe = c.compile(text);
    std::vector<float> v{1, 2, 3, 4};
    runtime::BufferPtr bx = c.fromHost(v.data(), runtime::ElementType::F32, {4}, 0);
    runtime::BufferPtr by = c.fromHost(v.data(), runtime::ElementType::F32, {4}, 0);
    auto outs = exe->execute(0, {bx.get(), by.get()}, {true, false});
    std::vector<float> o(4);
    outs.at(0)->toHost(o.data(), 16);
    CHECK(near(o, std::vector<float>{2, 4, 6, 8}));
  });
  test("run: bf16 / f16 arithmetic, raw escape hatch, parameter passthrough", [] {
    std::vector<float> a{1.5f, -2.25f, 3.0f, 100.0f};
    auto res = exec({F32({4}, a)}, [](Builder& b, const std::vector<Value>& p) {
      Value h = b.convert(p[0], DType::BF16);
      Value hh = b.add(h, b.scalarLike(1.0, h));
      Value f = b.convert(p[0], DType::F16);
      Value ff = b.mul(f, b.scalarLike(2.0, f));
      Value r = b.raw("\"stablehlo.cosine\"(" + b.ref(p[0]) + ")", "(tensor<4xf32>) -> tensor<4xf32>", p[0].type);
      return std::vector<Value>{b.convert(hh, DType::F32), b.convert(ff, DType::F32), r, p[0]};
    });
    CHECK(near(res[0].as<float>(), std::vector<float>{2.5f, -1.25f, 4.0f, 101.0f}));
    CHECK(near(res[1].as<float>(), std::vector<float>{3.0f, -4.5f, 6.0f, 200.0f}));
    CHECK(near(res[2].as<float>(), std::vector<double>{std::cos(1.5), std::cos(-2.25), std::cos(3.0), std::cos(100.0)}));
    CHECK(near(res[3].as<float>(), a));
  });
}

int main() {
  textTests();
  std::string plugin = runtime::Client::pluginPathFromEnv();
  if (plugin.empty()) {
    std::fprintf(stderr, "TORCH_TPU_PJRT_PLUGIN is not set; skipping plugin tests\n");
    ++g_failures;
  } else {
    runtime::Client::init(plugin);
    g_print = std::getenv("BUILDER_TEST_PRINT") != nullptr;
    runTests();
  }
  if (g_failures) {
    std::printf("FAILED: %d check(s)\n", g_failures);
    return 1;
  }
  std::printf("ALL PASSED\n");
  return 0;
}
