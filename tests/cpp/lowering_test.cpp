// Tests for the lowering rules (csrc/lowering/rules): every rule is lowered for representative argument types and
// dtypes and the program is compiled and run on the PJRT plugin named by $TORCH_TPU_PJRT_PLUGIN; a set of calls is
// also checked against host-computed numbers. Torch-free and self-contained (no gtest).
//
// Every registered rule must be lowered by some case here: a rule no case reaches fails the test unless
// kNotLowered lists it with the reason. New rules get a row in kCases (coverageCases) or a sweep in compileSweep.
//
//   lowering_test            run everything
//   lowering_test --numeric  only the numeric checks (no coverage requirement)
//   lowering_test --list     print the registered rule names
//   LOWERING_TEST_PRINT=1    print every program
//   LOWERING_TEST_ONLY=str   run only the cases whose name contains str (no coverage requirement)
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "lowering/foreign.h"
#include "lowering/helpers.h"
#include "lowering/lowering.h"
#include "runtime/runtime.h"
#include "harness.h"

using namespace torch_tpu;
using namespace torch_tpu::lowering;
using K = HostScalar::Kind;

static bool g_print = false;
static std::set<std::string> g_covered;  // rules lowered at least once

// ------------------------------------------------------------------ host data

static uint16_t toBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7FC0;
  u += 0x7FFF + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}
static float fromBF16(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
static uint16_t toF16(float f) {  // round to nearest even; enough for test data
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = int32_t((x >> 23) & 0xFF) - 127 + 15;
  uint32_t mant = x & 0x7FFFFF;
  if (std::isnan(f)) return uint16_t(sign | 0x7E00);
  if (exp >= 31) return uint16_t(sign | 0x7C00);
  if (exp <= 0) {
    if (exp < -10) return uint16_t(sign);
    mant |= 0x800000;
    uint32_t shift = uint32_t(14 - exp);
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = sign | (uint32_t(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return uint16_t(h);
}
static float fromF16(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  float f;
  if (exp == 0) f = std::ldexp(float(mant), -24);
  else if (exp == 31) f = mant ? NAN : INFINITY;
  else f = std::ldexp(float(mant | 0x400), int(exp) - 25);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u |= sign;
  std::memcpy(&f, &u, 4);
  return f;
}

static size_t elemSize(DType t) {
  switch (t) {
    case DType::Pred: case DType::S8: case DType::U8: return 1;
    case DType::S16: case DType::U16: case DType::F16: case DType::BF16: return 2;
    case DType::S32: case DType::U32: case DType::F32: return 4;
    case DType::C128: return 16;
    default: return shlo::isFloat8(t) ? 1 : 8;
  }
}

// A complex element made from one number x: x + (1 - x/2)i (decode gives the real part back).
static double imagOf(double x) { return 1 - x / 2; }

static std::vector<unsigned char> encode(DType t, const std::vector<double>& v) {
  std::vector<unsigned char> out(v.size() * elemSize(t));
  for (size_t k = 0; k < v.size(); ++k) {
    unsigned char* p = out.data() + k * elemSize(t);
    double x = v[k];
    switch (t) {
      case DType::Pred: *p = x != 0; break;
      case DType::S8: { int8_t y = int8_t(x); std::memcpy(p, &y, 1); break; }
      case DType::U8: { uint8_t y = uint8_t(x); std::memcpy(p, &y, 1); break; }
      case DType::S16: { int16_t y = int16_t(x); std::memcpy(p, &y, 2); break; }
      case DType::U16: { uint16_t y = uint16_t(x); std::memcpy(p, &y, 2); break; }
      case DType::S32: { int32_t y = int32_t(x); std::memcpy(p, &y, 4); break; }
      case DType::U32: { uint32_t y = uint32_t(x); std::memcpy(p, &y, 4); break; }
      case DType::S64: { int64_t y = int64_t(x); std::memcpy(p, &y, 8); break; }
      case DType::U64: { uint64_t y = uint64_t(x); std::memcpy(p, &y, 8); break; }
      case DType::F16: { uint16_t y = toF16(float(x)); std::memcpy(p, &y, 2); break; }
      case DType::BF16: { uint16_t y = toBF16(float(x)); std::memcpy(p, &y, 2); break; }
      case DType::F32: { float y = float(x); std::memcpy(p, &y, 4); break; }
      case DType::F64: std::memcpy(p, &x, 8); break;
      case DType::C64: { float y[2] = {float(x), float(imagOf(x))}; std::memcpy(p, y, 8); break; }
      case DType::C128: { double y[2] = {x, imagOf(x)}; std::memcpy(p, y, 16); break; }
      default:
        if (shlo::isFloat8(t)) *p = uint8_t(x);  // float8 data are given as bit patterns
        break;
    }
  }
  return out;
}

static std::vector<double> decode(DType t, const std::vector<unsigned char>& bytes) {
  size_t n = bytes.size() / elemSize(t);
  std::vector<double> out(n);
  for (size_t k = 0; k < n; ++k) {
    const unsigned char* p = bytes.data() + k * elemSize(t);
    switch (t) {
      case DType::Pred: out[k] = *p ? 1 : 0; break;
      case DType::S8: { int8_t y; std::memcpy(&y, p, 1); out[k] = y; break; }
      case DType::U8: out[k] = *p; break;
      case DType::S16: { int16_t y; std::memcpy(&y, p, 2); out[k] = y; break; }
      case DType::U16: { uint16_t y; std::memcpy(&y, p, 2); out[k] = y; break; }
      case DType::S32: { int32_t y; std::memcpy(&y, p, 4); out[k] = y; break; }
      case DType::U32: { uint32_t y; std::memcpy(&y, p, 4); out[k] = y; break; }
      case DType::S64: { int64_t y; std::memcpy(&y, p, 8); out[k] = double(y); break; }
      case DType::U64: { uint64_t y; std::memcpy(&y, p, 8); out[k] = double(y); break; }
      case DType::F16: { uint16_t y; std::memcpy(&y, p, 2); out[k] = fromF16(y); break; }
      case DType::BF16: { uint16_t y; std::memcpy(&y, p, 2); out[k] = fromBF16(y); break; }
      case DType::F32: { float y; std::memcpy(&y, p, 4); out[k] = y; break; }
      case DType::F64: std::memcpy(&out[k], p, 8); break;
      case DType::C64: { float y; std::memcpy(&y, p, 4); out[k] = y; break; }
      case DType::C128: std::memcpy(&out[k], p, 8); break;
      default:
        if (shlo::isFloat8(t)) out[k] = *p;  // bit patterns
        break;
    }
  }
  return out;
}

// ------------------------------------------------------------------ call description

struct In {
  Arg::Kind kind = Arg::Kind::None;
  std::string name;
  TensorType type;
  std::vector<double> data;
  bool wrapped = false;
  std::vector<In> list;  // TensorList elements (kind None = absent)
  K skind = K::None;
  double sval = 0;
  bool stat = false;  // static Scalar value
  int64_t i = 0;
  bool b = false;
  std::vector<int64_t> ints;
  std::vector<bool> bools;
  std::string s;
  DType dt = DType::Invalid;
};

static std::vector<double> pattern(DType t, int64_t n) {
  std::vector<double> v(n);
  for (int64_t k = 0; k < n; ++k) {
    double x = double((k * 7) % 11) - 5;  // -5..5
    if (t == DType::Pred) x = k % 3 == 1;
    else if (shlo::isFloat(t)) x = x / 4 + 0.125;
    else if (!shlo::isSigned(t)) x = std::fabs(x);
    v[k] = x;
  }
  return v;
}

static In T(DType t, Shape s, std::vector<double> d = {}) {
  In a;
  a.kind = Arg::Kind::Tensor;
  a.type = {t, std::move(s)};
  a.data = d.empty() ? pattern(t, a.type.numel()) : std::move(d);
  return a;
}
static In W(double v, K k = K::Float) {  // wrapped Python number
  In a = T(k == K::Float ? DType::F64 : k == K::Int ? DType::S64 : DType::Pred, {}, {v});
  a.wrapped = true;
  a.skind = k;
  a.sval = v;
  return a;
}
static In S(double v, K k = K::Float) {  // dynamic Scalar
  In a;
  a.kind = Arg::Kind::Scalar;
  a.skind = k;
  a.sval = v;
  return a;
}
static In SS(double v, K k = K::Float) {  // static Scalar
  In a = S(v, k);
  a.stat = true;
  return a;
}
static In D(double v) {  // float argument (dynamic)
  In a = S(v, K::Float);
  a.kind = Arg::Kind::Double;
  return a;
}
static In DS(double v) {  // float argument with a static value (the rule lists it in static_args)
  In a = D(v);
  a.stat = true;
  return a;
}
static In I(int64_t v) {
  In a;
  a.kind = Arg::Kind::Int;
  a.i = v;
  return a;
}
static In B(bool v) {
  In a;
  a.kind = Arg::Kind::Bool;
  a.b = v;
  return a;
}
static In L(std::vector<int64_t> v) {
  In a;
  a.kind = Arg::Kind::IntList;
  a.ints = std::move(v);
  return a;
}
static In BL(std::vector<bool> v) {
  In a;
  a.kind = Arg::Kind::BoolList;
  a.bools = std::move(v);
  return a;
}
static In Str(std::string s) {
  In a;
  a.kind = Arg::Kind::String;
  a.s = std::move(s);
  return a;
}
static In Dt(DType t) {
  In a;
  a.kind = Arg::Kind::ScalarType;
  a.dt = t;
  return a;
}
static In N() { return In{}; }
static In TL(std::vector<In> v) {
  In a;
  a.kind = Arg::Kind::TensorList;
  a.list = std::move(v);
  return a;
}
static In named(In a, std::string n) {
  a.name = std::move(n);
  return a;
}

// The test's Context: Scalar/float arguments become program parameters (or constants when static), the random
// state a tensor<2xui64> parameter.
class TestContext final : public Context {
 public:
  struct Feed {
    TensorType type;
    std::vector<double> data;
  };
  TestContext(Builder& b, const std::string& op, std::vector<Feed>& feeds) : Context(b, op), feeds_(feeds) {}
  std::vector<double> svals;  // per arg: the host value of a Scalar/Double

  Value scalar(size_t i, DType dtype) override {
    const Arg& a = arg(i);
    if (a.kind == Arg::Kind::Tensor && a.tensor.valid()) {
      if (a.tensor.rank() != 0) fail("argument '" + a.name + "' is not a scalar");
      return b.convert(a.tensor, dtype);
    }
    if (a.kind == Arg::Kind::Int) return b.constantInt(a.i, dtype);
    if (a.kind == Arg::Kind::Bool) return b.constant(a.b, dtype);
    if (a.kind != Arg::Kind::Scalar && a.kind != Arg::Kind::Double) fail("argument '" + a.name + "' is not a number");
    if (a.scalar.known()) {
      if (a.scalar.kind == K::Int) return b.constantInt(a.scalar.i, dtype);
      return b.constant(a.scalar.toDouble(), dtype);
    }
    Value p = b.parameter({dtype, {}});
    feeds_.push_back({{dtype, {}}, {svals.at(i)}});
    return p;
  }
  Value rngState() override {
    Value p = b.parameter({DType::U64, {2}});
    feeds_.push_back({{DType::U64, {2}}, {double(42 + rng_calls_++), 0}});
    return p;
  }

 private:
  std::vector<Feed>& feeds_;
  int rng_calls_ = 0;
};

struct Result {
  std::vector<TensorType> types;
  std::vector<std::vector<double>> vals;
  bool declined = false;
  std::string text;  // the program
};

// Lowers `op` for the call `ins`. With `outs`, goes through lower() (result shapes checked, dtypes converted);
// without, calls the rule directly and takes the result types it produced. Compiles, and runs when `execute`.
static Result run(const std::string& op, const std::vector<In>& ins, const std::vector<TensorType>& outs = {},
                  bool execute = true) {
  const Rule* rule = registry().find(op);
  if (!rule) throw std::runtime_error("no rule for " + op);
  Builder b;
  std::vector<TestContext::Feed> feeds;
  TestContext ctx(b, op, feeds);
  auto tensorParam = [&](const In& in) {
    feeds.push_back({in.type, in.data});
    return b.parameter(in.type);
  };
  for (size_t k = 0; k < ins.size(); ++k) {
    const In& in = ins[k];
    Arg a;
    a.kind = in.kind;
    a.name = in.name.empty() ? "arg" + std::to_string(k) : in.name;
    a.wrapped_number = in.wrapped;
    a.scalar.kind = in.skind;
    if (in.kind == Arg::Kind::Tensor) a.tensor = tensorParam(in);
    if (in.kind == Arg::Kind::TensorList)
      for (const In& e : in.list) a.tensors.push_back(e.kind == Arg::Kind::Tensor ? tensorParam(e) : Value());
    if (in.stat) {
      a.scalar.has_value = true;
      a.scalar.f = in.sval;
      a.scalar.i = int64_t(in.sval);
      a.scalar.b = in.sval != 0;
    }
    a.i = in.i;
    a.b = in.b;
    a.ints = in.ints;
    a.bools = in.bools;
    a.s = in.s;
    a.dtype = in.dt;
    ctx.args.push_back(a);
    ctx.svals.push_back(in.sval);
  }
  ctx.outputs = outs;
  Result res;
  if (!accepts(*rule, ctx)) {
    res.declined = true;
    return res;
  }
  g_covered.insert(op);
  std::vector<Value> vals;
  if (outs.empty()) {
    try {
      vals = rule->fn(ctx);
    } catch (const shlo::BuildError& e) {
      throw LoweringError(op, e.what());
    }
  } else {
    vals = lower(*rule, ctx);
  }
  std::vector<Value> live;
  for (auto& v : vals)
    if (v.valid()) live.push_back(v);
  std::string text = b.finish(live);
  res.text = text;
  if (g_print) std::printf("---- %s\n%s", op.c_str(), text.c_str());
  runtime::Client& c = runtime::Client::get();
  runtime::ExecutablePtr exe;
  try {
    exe = c.compile(text);
  } catch (...) {
    std::fprintf(stderr, "---- %s: program that failed to compile:\n%s----\n", op.c_str(), text.c_str());
    throw;
  }
  for (auto& v : live) res.types.push_back(v.type);
  if (!execute) return res;
  std::vector<runtime::BufferPtr> bufs;
  std::vector<runtime::Buffer*> args;
  for (auto& f : feeds) {
    auto bytes = encode(f.type.dtype, f.data);
    bufs.push_back(c.fromHost(bytes.data(), static_cast<runtime::ElementType>(f.type.dtype), f.type.shape, 0));
    args.push_back(bufs.back().get());
  }
  auto outsb = exe->execute(0, args);
  for (size_t k = 0; k < outsb.size(); ++k) {
    std::vector<unsigned char> bytes(size_t(live[k].type.numel()) * elemSize(live[k].dtype()));
    outsb[k]->toHost(bytes.data(), bytes.size());
    res.vals.push_back(decode(live[k].dtype(), bytes));
  }
  return res;
}

static bool same(double a, double b, double tol) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= tol * (1 + std::fabs(b));
}

static bool near(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  bool ok = got.size() == want.size();
  for (size_t i = 0; ok && i < got.size(); ++i) ok = same(got[i], want[i], tol);
  if (!ok) {
    std::fprintf(stderr, "  got:  ");
    for (auto g : got) std::fprintf(stderr, "%.9g ", g);
    std::fprintf(stderr, "\n  want: ");
    for (auto w : want) std::fprintf(stderr, "%.9g ", w);
    std::fprintf(stderr, "\n");
  }
  return ok;
}

// Runs op and checks result k's dtype and values.
static void expect(const std::string& name, const std::string& op, const std::vector<In>& ins,
                   const std::vector<TensorType>& outs, const std::vector<std::vector<double>>& want,
                   double tol = 1e-5, const std::vector<DType>& want_types = {}) {
  test(name, [&] {
    Result r = run(op, ins, outs);
    CHECK(!r.declined);
    if (r.declined) return;
    CHECK(r.vals.size() >= want.size());
    for (size_t k = 0; k < want.size() && k < r.vals.size(); ++k) {
      if (want[k].empty()) continue;
      bool ok = near(r.vals[k], want[k], tol);
      if (!ok) std::fprintf(stderr, "  (%s, result %zu)\n", name.c_str(), k);
      CHECK(ok);
    }
    for (size_t k = 0; k < want_types.size() && k < r.types.size(); ++k) {
      if (r.types[k].dtype != want_types[k])
        std::fprintf(stderr, "  %s: result %zu has %s\n", name.c_str(), k, r.types[k].str().c_str());
      CHECK(r.types[k].dtype == want_types[k]);
    }
  });
}

// ------------------------------------------------------------------ compile sweep

static const double kNaN = std::numeric_limits<double>::quiet_NaN();
static const double kInf = std::numeric_limits<double>::infinity();

static const DType kFloats[] = {DType::F32, DType::BF16, DType::F16, DType::F64};
static const DType kAll[] = {DType::F32, DType::BF16, DType::F16, DType::F64, DType::S64, DType::S32,
                             DType::S16, DType::S8,   DType::U8,  DType::Pred};

using MakeArgs = std::function<std::vector<In>(DType)>;

// Lowers and compiles op for every dtype in `dtypes` (declined calls are fine).
template <class Range>
static void sweep(const std::string& op, const Range& dtypes, const MakeArgs& make,
                  const std::function<std::vector<TensorType>(DType)>& outs = nullptr) {
  for (DType t : dtypes) {
    test(op + " [" + shlo::mlirName(t) + "]", [&] {
      Result r = run(op, make(t), outs ? outs(t) : std::vector<TensorType>{}, /*execute=*/true);
      (void)r;
    });
  }
}

static std::vector<In> unaryArgs(DType t) { return {T(t, {2, 3})}; }

static void compileSweep() {
  // complex64 and complex128 through the rules marked complex()
  const DType kComplex[] = {DType::C64, DType::C128};
  for (const char* op : {"aten::neg", "aten::abs", "aten::sgn", "aten::exp", "aten::expm1", "aten::log", "aten::log2",
                         "aten::log10", "aten::log1p", "aten::sqrt", "aten::rsqrt", "aten::reciprocal", "aten::sin",
                         "aten::cos", "aten::tan", "aten::tanh", "aten::sigmoid", "aten::isnan", "aten::angle",
                         "aten::conj_physical", "aten::clone", "aten::view_as_real", "aten::sum", "aten::mean"})
    sweep(std::string(op), kComplex, unaryArgs);
  for (const char* op : {"aten::add.Tensor", "aten::sub.Tensor", "aten::mul.Tensor", "aten::div.Tensor",
                         "aten::pow.Tensor_Tensor", "aten::eq.Tensor", "aten::ne.Tensor"}) {
    sweep(std::string(op), kComplex, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(DType::F32, {3})}; });
    sweep(std::string(op), kComplex, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {2, 3})}; });
  }
  sweep("aten::mm", kComplex, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3, 4})}; });
  sweep("aten::cat", kComplex, [](DType t) { return std::vector<In>{TL({T(t, {2, 3}), T(t, {1, 3})}), I(0)}; });
  sweep("aten::where.self", kComplex,
        [](DType t) { return std::vector<In>{T(DType::Pred, {2, 3}), T(t, {2, 3}), T(t, {3})}; });
  sweep("aten::_to_copy", kComplex, [](DType t) { return std::vector<In>{T(t, {2, 3}), Dt(DType::F32)}; });
  sweep("aten::index_select", kComplex,
        [](DType t) { return std::vector<In>{T(t, {4, 3}), I(0), T(DType::S64, {2}, {3, 1})}; });
  for (const char* op : {"aten::neg", "aten::abs", "aten::sign", "aten::sgn", "aten::floor", "aten::ceil", "aten::round",
                         "aten::trunc", "aten::frac", "aten::relu", "aten::exp", "aten::exp2", "aten::expm1", "aten::log",
                         "aten::log2", "aten::log10", "aten::log1p", "aten::sqrt", "aten::rsqrt", "aten::reciprocal",
                         "aten::sin", "aten::cos", "aten::tan", "aten::tanh", "aten::sigmoid", "aten::erf", "aten::erfc",
                         "aten::erfinv", "aten::lgamma", "aten::digamma", "aten::asin", "aten::acos", "aten::atan",
                         "aten::sinh", "aten::cosh", "aten::asinh", "aten::acosh", "aten::atanh", "aten::isnan",
                         "aten::isinf", "aten::isposinf", "aten::isneginf", "aten::logical_not", "aten::bitwise_not",
                         "aten::silu", "aten::mish", "aten::hardsigmoid", "aten::hardswish", "aten::deg2rad",
                         "aten::rad2deg", "aten::sinc"}) {
    std::string o = op;
    bool float_only = o == "aten::silu" || o == "aten::mish" || o == "aten::hardsigmoid" || o == "aten::hardswish";
    if (float_only) sweep(o, kFloats, unaryArgs);
    else sweep(o, kAll, unaryArgs);
  }
  sweep("aten::gelu", kFloats, [](DType t) { return std::vector<In>{T(t, {4}), Str("none")}; });
  sweep("aten::gelu", kFloats, [](DType t) { return std::vector<In>{T(t, {4}), Str("tanh")}; });
  sweep("aten::round.decimals", kFloats, [](DType t) { return std::vector<In>{T(t, {4}), I(2)}; });
  sweep("aten::nan_to_num", kAll, [](DType t) { return std::vector<In>{T(t, {4}), N(), D(1e30), N()}; });
  sweep("aten::logit", kFloats, [](DType t) { return std::vector<In>{T(t, {4}), D(1e-6)}; });
  for (const char* op : {"aten::add.Tensor", "aten::sub.Tensor", "aten::rsub.Tensor"}) {
    std::string o = op;
    sweep(o, kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3}), S(2, K::Int)}; });
    sweep(o, kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), W(2.5), S(1, K::Int)}; });
    sweep(o, kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(DType::F64, {}), N()}; });
  }
  for (const char* op : {"aten::add.Scalar", "aten::sub.Scalar", "aten::rsub.Scalar"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), S(3, K::Int), S(1, K::Int)}; });
  for (const char* op : {"aten::mul.Tensor", "aten::div.Tensor", "aten::maximum", "aten::minimum", "aten::fmax",
                         "aten::fmin", "aten::remainder.Tensor", "aten::fmod.Tensor", "aten::floor_divide",
                         "aten::pow.Tensor_Tensor", "aten::atan2", "aten::hypot", "aten::copysign.Tensor",
                         "aten::xlogy.Tensor", "aten::logaddexp", "aten::bitwise_and.Tensor", "aten::bitwise_or.Tensor",
                         "aten::bitwise_xor.Tensor", "aten::logical_and", "aten::logical_or", "aten::logical_xor",
                         "aten::eq.Tensor", "aten::ne.Tensor", "aten::lt.Tensor", "aten::le.Tensor", "aten::gt.Tensor",
                         "aten::ge.Tensor", "aten::clamp_min.Tensor", "aten::clamp_max.Tensor"}) {
    std::string o = op;
    bool float_only = o == "aten::hypot" || o == "aten::logaddexp" || o == "aten::xlogy.Tensor" ||
                      o == "aten::copysign.Tensor" || o == "aten::atan2";
    std::vector<DType> ds(std::begin(kAll), std::end(kAll));
    if (float_only) ds.assign(std::begin(kFloats), std::end(kFloats));
    sweep(o, ds, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {2, 1})}; });
    sweep(o, ds, [](DType t) { return std::vector<In>{T(t, {3}), W(2, K::Int)}; });
  }
  for (const char* op : {"aten::mul.Scalar", "aten::div.Scalar", "aten::remainder.Scalar", "aten::fmod.Scalar",
                         "aten::floor_divide.Scalar", "aten::pow.Tensor_Scalar", "aten::bitwise_and.Scalar",
                         "aten::bitwise_or.Scalar", "aten::bitwise_xor.Scalar", "aten::eq.Scalar", "aten::ne.Scalar",
                         "aten::lt.Scalar", "aten::le.Scalar", "aten::gt.Scalar", "aten::ge.Scalar", "aten::clamp_min",
                         "aten::clamp_max"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), S(2, K::Int)}; });
  sweep("aten::pow.Tensor_Scalar", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), S(0.5)}; });
  sweep("aten::pow.Scalar", kAll, [](DType t) { return std::vector<In>{S(2.0), T(t, {2, 3})}; });
  sweep("aten::remainder.Scalar_Tensor", kAll, [](DType t) { return std::vector<In>{S(7, K::Int), T(t, {2, 3})}; });
  for (const char* mode : {"trunc", "floor"}) {
    std::string m = mode;
    sweep("aten::div.Tensor_mode", kAll, [m](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3}), Str(m)}; });
    sweep("aten::div.Scalar_mode", kAll, [m](DType t) { return std::vector<In>{T(t, {2, 3}), S(3, K::Int), Str(m)}; });
  }
  sweep("aten::div.Tensor_mode", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3}), N()}; });
  sweep("aten::where.self", kAll,
        [](DType t) { return std::vector<In>{T(DType::Pred, {2, 3}), T(t, {2, 3}), T(t, {3})}; });
  sweep("aten::where.self", kAll, [](DType t) { return std::vector<In>{T(DType::Pred, {2, 3}), T(t, {2, 3}), W(0)}; });
  sweep("aten::clamp", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), S(-1, K::Int), S(2, K::Int)}; });
  sweep("aten::clamp", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), N(), S(2.5)}; });
  sweep("aten::clamp.Tensor", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3}), N()}; });
  sweep("aten::masked_fill.Scalar", kAll,
        [](DType t) { return std::vector<In>{T(t, {2, 3}), T(DType::Pred, {3}), S(1, K::Int)}; });
  sweep("aten::masked_fill.Tensor", kAll,
        [](DType t) { return std::vector<In>{T(t, {2, 3}), T(DType::Pred, {2, 3}), T(t, {})}; });
  sweep("aten::leaky_relu", kFloats, [](DType t) { return std::vector<In>{T(t, {4}), S(0.01)}; });
  sweep("aten::hardtanh", kAll, [](DType t) { return std::vector<In>{T(t, {4}), S(-1, K::Int), S(1, K::Int)}; });
  sweep("aten::threshold", kAll, [](DType t) { return std::vector<In>{T(t, {4}), S(0, K::Int), S(7, K::Int)}; });
  sweep("aten::elu", kFloats, [](DType t) { return std::vector<In>{T(t, {4}), S(1, K::Int), S(1, K::Int), S(1, K::Int)}; });
  sweep("aten::softplus", kFloats, [](DType t) { return std::vector<In>{T(t, {4}), S(1, K::Int), S(20, K::Int)}; });
  sweep("aten::threshold_backward", kAll, [](DType t) { return std::vector<In>{T(t, {4}), T(t, {4}), S(0, K::Int)}; });
  for (const char* op : {"aten::silu_backward", "aten::mish_backward", "aten::tanh_backward", "aten::sigmoid_backward",
                         "aten::hardsigmoid_backward", "aten::hardswish_backward"})
    sweep(std::string(op), kFloats, [](DType t) { return std::vector<In>{T(t, {4}), T(t, {4})}; });
  for (const char* a : {"none", "tanh"}) {
    std::string s = a;
    sweep("aten::gelu_backward", kFloats, [s](DType t) { return std::vector<In>{T(t, {4}), T(t, {4}), Str(s)}; });
  }
  sweep("aten::leaky_relu_backward", kFloats,
        [](DType t) { return std::vector<In>{T(t, {4}), T(t, {4}), S(0.2), B(false)}; });
  sweep("aten::hardtanh_backward", kFloats,
        [](DType t) { return std::vector<In>{T(t, {4}), T(t, {4}), S(-1, K::Int), S(1, K::Int)}; });
  sweep("aten::softplus_backward", kFloats,
        [](DType t) { return std::vector<In>{T(t, {4}), T(t, {4}), S(1, K::Int), S(20, K::Int)}; });
  for (bool is_result : {false, true})
    sweep("aten::elu_backward", kFloats, [is_result](DType t) {
      return std::vector<In>{T(t, {4}), S(1, K::Int), S(1, K::Int), S(1, K::Int), B(is_result), T(t, {4})};
    });
  for (const char* op : {"aten::addcmul", "aten::addcdiv"})
    sweep(std::string(op), kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3}), T(t, {2, 1}), S(0.5)}; });
  sweep("aten::addcmul", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3}), T(t, {2, 1}), S(2, K::Int)}; });
  sweep("aten::lerp.Scalar", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3}), S(0.3)}; });
  sweep("aten::lerp.Tensor", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3}), T(t, {2, 3})}; });

  // ---- reductions ----
  sweep("aten::sum.dim_IntList", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3, 4}), L({-1, 0}), B(true), N()}; });
  sweep("aten::sum.dim_IntList", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), N(), B(false), N()}; });
  sweep("aten::sum.dim_IntList", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({1}), B(false), Dt(DType::F32)}; });
  sweep("aten::sum", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), N()}; });
  sweep("aten::sum", kAll, [](DType t) { return std::vector<In>{T(t, {}), N()}; });
  sweep("aten::mean.dim", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3, 4}), L({1}), B(true), N()}; });
  sweep("aten::mean", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), N()}; });
  sweep("aten::prod", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), N()}; });
  sweep("aten::prod.dim_int", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(-1), B(true), N()}; });
  for (const char* op : {"aten::amax", "aten::amin"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3, 4}), L({0, 2}), B(false)}; });
  for (const char* op : {"aten::max", "aten::min"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3})}; });
  for (const char* op : {"aten::argmax", "aten::argmin"}) {
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(1), B(true)}; });
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), N(), B(false)}; });
  }
  for (const char* op : {"aten::max.dim", "aten::min.dim"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(0), B(false)}; });
  for (const char* op : {"aten::any", "aten::all"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3})}; });
  for (const char* op : {"aten::any.dim", "aten::all.dim"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(1), B(true)}; });
  for (const char* op : {"aten::any.dims", "aten::all.dims"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), N(), B(false)}; });
  sweep("aten::count_nonzero.dim_IntList", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({0})}; });
  for (const char* op : {"aten::var.correction", "aten::std.correction", "aten::var_mean.correction",
                         "aten::std_mean.correction"}) {
    sweep(std::string(op), kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({1}), N(), B(true)}; });
    sweep(std::string(op), kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), N(), S(0, K::Int), B(false)}; });
  }
  for (double ord : std::vector<double>{2.0, 1.0, 0.0, 3.0, kInf, -kInf})
    sweep("aten::linalg_vector_norm", kFloats,
          [ord](DType t) { return std::vector<In>{T(t, {2, 3}), SS(ord), L({1}), B(false), N()}; });
  sweep("aten::norm.ScalarOpt_dim", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), SS(2), L({1}), B(true)}; });
  sweep("aten::logsumexp", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({1}), B(false)}; });
  for (const char* op : {"aten::cumsum", "aten::cumprod"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(1), N()}; });
  sweep("aten::trace", kAll, [](DType t) { return std::vector<In>{T(t, {3, 3})}; });

  // ---- linalg ----
  std::vector<DType> mmTypes = {DType::F32, DType::BF16, DType::F16, DType::F64, DType::S64, DType::S32};
  sweep("aten::mm", mmTypes, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3, 4})}; });
  sweep("aten::bmm", mmTypes, [](DType t) { return std::vector<In>{T(t, {5, 2, 3}), T(t, {5, 3, 4})}; });
  sweep("aten::mv", mmTypes, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3})}; });
  sweep("aten::dot", mmTypes, [](DType t) { return std::vector<In>{T(t, {3}), T(t, {3})}; });
  sweep("aten::vdot", mmTypes, [](DType t) { return std::vector<In>{T(t, {3}), T(t, {3})}; });
  sweep("aten::addmm", mmTypes,
        [](DType t) { return std::vector<In>{T(t, {4}), T(t, {2, 3}), T(t, {3, 4}), S(1, K::Int), S(1, K::Int)}; });
  sweep("aten::baddbmm", mmTypes, [](DType t) {
    return std::vector<In>{T(t, {5, 2, 4}), T(t, {5, 2, 3}), T(t, {5, 3, 4}), S(0.5), S(2.0)};
  });
  sweep("aten::addbmm", mmTypes, [](DType t) {
    return std::vector<In>{T(t, {2, 4}), T(t, {5, 2, 3}), T(t, {5, 3, 4}), S(1, K::Int), S(1, K::Int)};
  });
  sweep("aten::addmv", mmTypes,
        [](DType t) { return std::vector<In>{T(t, {2}), T(t, {2, 3}), T(t, {3}), S(1, K::Int), S(1, K::Int)}; });
  for (bool g : {false, true})
    sweep("aten::_addmm_activation", kFloats, [g](DType t) {
      return std::vector<In>{T(t, {4}), T(t, {2, 3}), T(t, {3, 4}), S(1, K::Int), S(1, K::Int), B(g)};
    });

  // ---- factory ----
  sweep("aten::fill.Scalar", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), S(1.5)}; });
  sweep("aten::fill.Tensor", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(DType::F32, {})}; });
  sweep("aten::zero", kAll, unaryArgs);
  sweep("aten::clone", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), N()}; });
  for (DType to : kAll)
    sweep("aten::_to_copy", kAll, [to](DType t) { return std::vector<In>{T(t, {2, 3}), Dt(to)}; });
  sweep("aten::full", kAll, [](DType) { return std::vector<In>{L({2, 3}), S(2.5), N()}; },
        [](DType t) { return std::vector<TensorType>{{t, {2, 3}}}; });
  sweep("aten::zeros_like", kAll, unaryArgs, [](DType t) { return std::vector<TensorType>{{t, {2, 3}}}; });
  sweep("aten::ones_like", kAll, unaryArgs, [](DType t) { return std::vector<TensorType>{{t, {2, 3}}}; });
  sweep("aten::arange.start_out", kAll, [](DType t) {
    return std::vector<In>{named(S(0, K::Int), "start"), named(S(5, K::Int), "end"), named(S(1, K::Int), "step"),
                           named(T(t, {5}), "out")};
  }, [](DType t) { return std::vector<TensorType>{{t, {5}}}; });
  sweep("aten::full_like", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), S(3, K::Int), N()}; },
        [](DType t) { return std::vector<TensorType>{{t, {2, 3}}}; });
  sweep("aten::new_full", kAll, [](DType t) { return std::vector<In>{T(t, {1}), L({2, 3}), S(3, K::Int), N()}; },
        [](DType t) { return std::vector<TensorType>{{t, {2, 3}}}; });
  for (const char* op : {"aten::new_zeros", "aten::new_ones"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {1}), L({2, 3}), N()}; },
          [](DType t) { return std::vector<TensorType>{{t, {2, 3}}}; });
  for (const char* op : {"aten::zeros", "aten::ones"})
    sweep(std::string(op), kAll, [](DType) { return std::vector<In>{L({2, 3}), N()}; },
          [](DType t) { return std::vector<TensorType>{{t, {2, 3}}}; });
  sweep("aten::scalar_tensor", kAll, [](DType) { return std::vector<In>{S(2.5), N()}; },
        [](DType t) { return std::vector<TensorType>{{t, {}}}; });
  sweep("aten::arange", kAll, [](DType) { return std::vector<In>{named(S(4, K::Int), "end"), N()}; },
        [](DType t) { return std::vector<TensorType>{{t, {4}}}; });
  sweep("aten::arange.start", kAll,
        [](DType) { return std::vector<In>{named(S(1, K::Int), "start"), named(S(4, K::Int), "end"), N()}; },
        [](DType t) { return std::vector<TensorType>{{t, {3}}}; });
  sweep("aten::arange.start_step", kAll, [](DType) {
    return std::vector<In>{named(S(1, K::Int), "start"), named(S(4, K::Int), "end"), named(S(1, K::Int), "step"), N()};
  }, [](DType t) { return std::vector<TensorType>{{t, {3}}}; });
  sweep("aten::bernoulli", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), N()}; });
  sweep("aten::bernoulli_.Tensor", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(DType::F32, {3}), N()}; });
  sweep("aten::uniform_", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), DS(-1), DS(1), N()}; });
  sweep("aten::normal_", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), D(0), DS(1), N()}; });
  sweep("aten::normal.Tensor_float", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), DS(2), N()}; },
        [](DType t) { return std::vector<TensorType>{{t, {2, 3}}}; });
  sweep("aten::cauchy_", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), D(0), DS(1), N()}; });
  sweep("aten::log_normal_", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), D(1), DS(2), N()}; });
  sweep("aten::geometric_", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), DS(0.3), N()}; });
  sweep("aten::bernoulli_.float", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), D(0.3), N()}; });
  sweep("aten::exponential_", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), DS(1.5), N()}; });
  sweep("aten::random_.from", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(0), I(2), N()}; });
  sweep("aten::random_.from", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(0), N(), N()}; });
  sweep("aten::random_.to", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(2), N()}; });
  sweep("aten::random_", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), N()}; });

  // ---- nn ----
  for (const char* op : {"aten::_softmax", "aten::_log_softmax"})
    sweep(std::string(op), kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(-1), B(false)}; });
  for (const char* op : {"aten::_softmax_backward_data", "aten::_log_softmax_backward_data"})
    sweep(std::string(op), kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {2, 3}), I(1), Dt(t)}; });
  sweep("aten::native_layer_norm", kFloats,
        [](DType t) { return std::vector<In>{T(t, {2, 3, 4}), L({4}), T(t, {4}), T(t, {4}), D(1e-5)}; });
  sweep("aten::native_layer_norm", kFloats,
        [](DType t) { return std::vector<In>{T(t, {2, 3, 4}), L({3, 4}), N(), N(), D(1e-5)}; });
  sweep("aten::native_layer_norm_backward", kFloats, [](DType t) {
    return std::vector<In>{T(t, {2, 3, 4}), T(t, {2, 3, 4}), L({4}), T(t, {2, 3, 1}), T(t, {2, 3, 1}, std::vector<double>(6, 1.0)),
                           T(t, {4}), T(t, {4}), BL({true, true, true})};
  });
  sweep("aten::embedding", kFloats, [](DType t) {
    return std::vector<In>{T(t, {5, 3}), T(DType::S64, {2, 2}, {0, 4, 2, 2}), I(-1), B(false), B(false)};
  });
  for (bool scale : {false, true})
    sweep("aten::embedding_dense_backward", kFloats, [scale](DType t) {
      return std::vector<In>{T(t, {2, 2, 3}), T(DType::S64, {2, 2}, {0, 4, 2, 2}), I(5), I(4), B(scale)};
    });
  sweep("aten::index_select", kAll,
        [](DType t) { return std::vector<In>{T(t, {4, 3}), I(1), T(DType::S64, {2}, {2, 0})}; });
  for (int64_t red : {0, 1, 2}) {
    sweep("aten::nll_loss_forward", kFloats, [red](DType t) {
      return std::vector<In>{T(t, {3, 4}), T(DType::S64, {3}, {1, -100, 3}), T(t, {4}), I(red), I(-100)};
    });
    sweep("aten::nll_loss_backward", kFloats, [red](DType t) {
      return std::vector<In>{red == 0 ? T(t, {3}) : T(t, {}), T(t, {3, 4}), T(DType::S64, {3}, {1, -100, 3}), N(), I(red),
                             I(-100), T(t, {}, {2})};
    });
    sweep("aten::mse_loss", kFloats, [red](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {2, 3}), I(red)}; });
    sweep("aten::mse_loss_backward", kFloats, [red](DType t) {
      return std::vector<In>{red == 0 ? T(t, {2, 3}) : T(t, {}), T(t, {2, 3}), T(t, {2, 3}), I(red)};
    });
  }
  sweep("aten::nll_loss2d_forward", kFloats, [](DType t) {
    return std::vector<In>{T(t, {2, 3, 2, 2}), T(DType::S64, {2, 2, 2}, {0, 1, 2, 0, 1, 2, 0, 1}), N(), I(1), I(-100)};
  });
  sweep("aten::nll_loss2d_backward", kFloats, [](DType t) {
    return std::vector<In>{T(t, {}), T(t, {2, 3, 2, 2}), T(DType::S64, {2, 2, 2}, {0, 1, 2, 0, 1, 2, 0, 1}), N(), I(1),
                           I(-100), T(t, {}, {8})};
  });
  sweep("aten::native_dropout", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), D(0.5), B(true)}; });
  sweep("aten::native_dropout_backward", kFloats,
        [](DType t) { return std::vector<In>{T(t, {2, 3}), T(DType::Pred, {2, 3}), D(2.0)}; });
  // recurrent cells (rules/rnn.cpp): B = 2, H = 2; optional biases and gradients present and absent
  for (bool bias : {true, false}) {
    sweep("aten::_thnn_fused_lstm_cell", kFloats, [bias](DType t) {
      return std::vector<In>{T(t, {2, 8}), T(t, {2, 8}), T(t, {2, 2}), bias ? T(t, {8}) : N(), bias ? T(t, {8}) : N()};
    });
    sweep("aten::_thnn_fused_lstm_cell_backward_impl", kFloats, [bias](DType t) {
      return std::vector<In>{T(t, {2, 2}), bias ? T(t, {2, 2}) : N(), T(t, {2, 2}), T(t, {2, 2}), T(t, {2, 8}), B(bias)};
    });
    sweep("aten::_thnn_fused_gru_cell", kFloats, [bias](DType t) {
      return std::vector<In>{T(t, {2, 6}), T(t, {2, 6}), T(t, {2, 2}), bias ? T(t, {6}) : N(), bias ? T(t, {6}) : N()};
    });
    sweep("aten::_thnn_fused_gru_cell_backward", kFloats,
          [bias](DType t) { return std::vector<In>{T(t, {2, 2}), T(t, {2, 10}), B(bias)}; });
  }

  // ---- shape ----
  sweep("aten::cat", kAll, [](DType t) { return std::vector<In>{TL({T(t, {2, 3}), T(t, {0}), T(t, {1, 3})}), I(-2)}; });
  sweep("aten::stack", kAll, [](DType t) { return std::vector<In>{TL({T(t, {2, 3}), T(t, {2, 3})}), I(-1)}; });
  sweep("aten::constant_pad_nd", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({1, 2, -1, 0}), S(0, K::Int)}; });
  sweep("aten::gather", kAll,
        [](DType t) { return std::vector<In>{T(t, {3, 4}), I(1), T(DType::S64, {2, 2}, {0, 3, 1, 1}), B(false)}; });
  sweep("aten::scatter.src", kAll, [](DType t) {
    return std::vector<In>{T(t, {3, 4}), I(1), T(DType::S64, {2, 2}, {0, 3, 1, 1}), T(t, {3, 3})};
  });
  sweep("aten::scatter.value", kAll,
        [](DType t) { return std::vector<In>{T(t, {3, 4}), I(0), T(DType::S64, {2, 2}, {0, 2, 1, 1}), S(1, K::Int)}; });
  sweep("aten::scatter_add", kAll, [](DType t) {
    return std::vector<In>{T(t, {3, 4}), I(1), T(DType::S64, {2, 2}, {0, 3, 1, 1}), T(t, {2, 2})};
  });
  for (const char* red : {"sum", "prod", "mean", "amax", "amin"}) {
    std::string rd = red;
    for (bool inc : {true, false})
      sweep("aten::scatter_reduce.two", kAll, [rd, inc](DType t) {
        return std::vector<In>{T(t, {3, 4}), I(1), T(DType::S64, {2, 2}, {0, 3, 1, 1}), T(t, {2, 2}), Str(rd), B(inc)};
      });
  }
  sweep("aten::index_add", kAll, [](DType t) {
    return std::vector<In>{T(t, {4, 3}), I(0), T(DType::S64, {2}, {3, 1}), T(t, {2, 3}), S(1, K::Int)};
  });
  sweep("aten::index_copy", kAll,
        [](DType t) { return std::vector<In>{T(t, {4, 3}), I(1), T(DType::S64, {2}, {2, 0}), T(t, {4, 2})}; });
  sweep("aten::index_fill.int_Scalar", kAll,
        [](DType t) { return std::vector<In>{T(t, {4, 3}), I(1), T(DType::S64, {2}, {2, 0}), S(1, K::Int)}; });
  sweep("aten::index.Tensor", kAll, [](DType t) {
    return std::vector<In>{T(t, {4, 3, 2}), TL({N(), T(DType::S64, {2, 2}, {0, 2, -1, 1}), T(DType::S64, {2}, {1, 0})})};
  });
  sweep("aten::index.Tensor", kAll, [](DType t) {
    return std::vector<In>{T(t, {4, 3, 2}), TL({T(DType::S64, {2}, {3, 1}), N(), T(DType::S32, {2}, {1, 0})})};
  });
  for (bool acc : {false, true}) {
    sweep("aten::index_put", kAll, [acc](DType t) {
      return std::vector<In>{T(t, {4, 3}), TL({T(DType::S64, {2}, {3, 1})}), T(t, {3}), B(acc)};
    });
    sweep("aten::index_put", kAll, [acc](DType t) {
      return std::vector<In>{T(t, {4, 3}), TL({T(DType::Pred, {4, 3})}), T(t, {}), B(acc)};
    });
  }
  sweep("aten::flip", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({-1, 0})}; });
  sweep("aten::roll", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({1, -1}), L({0, 1})}; });
  sweep("aten::roll", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({2}), L({})}; });
  for (const char* op : {"aten::tril", "aten::triu"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3, 3}), I(-1)}; });
  sweep("aten::repeat", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({2, 1, 2})}; });
  sweep("aten::sort", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(-1), B(true)}; });
  sweep("aten::sort.stable", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), N(), I(0), B(false)}; });
  sweep("aten::topk", kAll, [](DType t) { return std::vector<In>{T(t, {2, 5}), I(2), I(-1), B(true), B(true)}; });
  sweep("aten::slice_backward", kAll,
        [](DType t) { return std::vector<In>{T(t, {2, 2}), L({2, 5}), I(1), I(1), I(4), I(2)}; });
  sweep("aten::select_backward", kAll, [](DType t) { return std::vector<In>{T(t, {2}), L({2, 5}), I(1), I(-2)}; });
  sweep("aten::slice_scatter", kAll,
        [](DType t) { return std::vector<In>{T(t, {2, 5}), T(t, {2, 2}), I(1), I(1), I(4), I(2)}; });
  sweep("aten::select_scatter", kAll, [](DType t) { return std::vector<In>{T(t, {2, 5}), T(t, {2}), I(1), I(3)}; });
  sweep("aten::_index_put_impl", kAll, [](DType t) {
    return std::vector<In>{T(t, {4, 3}), TL({T(DType::S64, {2}, {3, 1})}), T(t, {3}), B(true), B(false)};
  });
  sweep("aten::_unsafe_index_put", kAll, [](DType t) {
    return std::vector<In>{T(t, {4, 3}), TL({T(DType::S64, {2}, {3, 1})}), T(t, {3}), B(false)};
  });
  sweep("aten::_unsafe_index.Tensor", kAll,
        [](DType t) { return std::vector<In>{T(t, {4, 3}), TL({T(DType::S64, {2}, {3, 1})})}; });
  sweep("aten::index_fill.int_Tensor", kAll,
        [](DType t) { return std::vector<In>{T(t, {4, 3}), I(0), T(DType::S64, {1}, {2}), T(t, {})}; });
  sweep("aten::scatter.reduce", kAll, [](DType t) {
    return std::vector<In>{T(t, {3, 4}), I(1), T(DType::S64, {2, 2}, {0, 3, 1, 1}), T(t, {2, 2}), Str("multiply")};
  });
  auto outAs = [](Shape s) { return [s](DType t) { return std::vector<TensorType>{{t, s}}; }; };
  for (const char* op : {"aten::view_copy", "aten::_reshape_copy", "aten::_unsafe_view"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({3, 2})}; }, outAs({3, 2}));
  sweep("aten::unsqueeze_copy", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(1)}; }, outAs({2, 1, 3}));
  sweep("aten::squeeze_copy", kAll, [](DType t) { return std::vector<In>{T(t, {2, 1, 3})}; }, outAs({2, 3}));
  sweep("aten::squeeze_copy.dim", kAll, [](DType t) { return std::vector<In>{T(t, {2, 1, 3}), I(1)}; }, outAs({2, 3}));
  sweep("aten::squeeze_copy.dims", kAll, [](DType t) { return std::vector<In>{T(t, {2, 1, 3}), L({1})}; }, outAs({2, 3}));
  sweep("aten::expand_copy", kAll, [](DType t) { return std::vector<In>{T(t, {1, 3}), L({2, -1}), B(false)}; },
        outAs({2, 3}));
  sweep("aten::t_copy", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3})}; });
  sweep("aten::transpose_copy.int", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3, 4}), I(0), I(-1)}; });
  sweep("aten::alias", kAll, unaryArgs);
  sweep("aten::copy", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(DType::F32, {3}), B(false)}; },
        outAs({2, 3}));
  sweep("aten::permute_copy", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3, 4}), L({2, 0, 1})}; });
  sweep("aten::slice_copy.Tensor", kAll, [](DType t) { return std::vector<In>{T(t, {2, 5}), I(1), I(1), I(100), I(2)}; });
  sweep("aten::select_copy.int", kAll, [](DType t) { return std::vector<In>{T(t, {2, 5}), I(1), I(-1)}; });
}

// ------------------------------------------------------------------ coverage table

// One lowering (compiled and run, f32 unless the op needs another dtype) of each rule the sweeps above do not reach.
// Result types are what PyTorch's meta kernels give for the same call (ops writing arguments they do not return,
// like _native_batch_norm_legit's running statistics, list those after the schema's results); an empty list calls
// the rule without checking its results (ops that return nothing and write their list arguments).
struct Case {
  std::string op;
  std::vector<In> args;
  std::vector<TensorType> outs;
};

static void coverageCases() {
  const DType f32 = DType::F32, f64 = DType::F64, s64 = DType::S64, s32 = DType::S32, pred = DType::Pred,
              u8 = DType::U8;
  (void)f64;
  const std::vector<Case> kCases = {
      {"aten::angle", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::mm.dtype", {T(DType::BF16, {2, 3}), T(DType::BF16, {3, 4}), Dt(f32)}, {{f32, {2, 4}}}},
      {"aten::bmm.dtype", {T(DType::F16, {2, 2, 3}), T(DType::F16, {2, 3, 4}), Dt(f32)}, {{f32, {2, 2, 4}}}},
      {"aten::addmm.dtype", {T(f32, {4}), T(DType::BF16, {2, 3}), T(DType::BF16, {3, 4}), Dt(f32), S(1.0), S(2.0)},
       {{f32, {2, 4}}}},
      {"aten::baddbmm.dtype",
       {T(DType::BF16, {2, 2, 4}), T(DType::BF16, {2, 2, 3}), T(DType::BF16, {2, 3, 4}), Dt(f32), S(1.0), S(1.0)},
       {{f32, {2, 2, 4}}}},
      {"aten::_int_mm", {T(DType::S8, {2, 3}), T(DType::S8, {3, 4})}, {{s32, {2, 4}}}},
      {"aten::_scaled_mm",
       {T(DType::F8E4M3FN, {2, 3}, {0x38, 0x40, 0xb8, 0x30, 0x00, 0x48}), T(DType::F8E4M3FN, {3, 2}, {0x38, 0x38, 0x38, 0x40, 0x38, 0x30}),
        T(f32, {}, {0.5}), T(f32, {}, {2.0}), N(), N(), Dt(DType::BF16), B(false)},
       {{DType::BF16, {2, 2}}}},
      {"aten::_scaled_mm_v2",
       {T(DType::F8E4M3FN, {2, 3}, {0x38, 0x40, 0xb8, 0x30, 0x00, 0x48}), T(DType::F8E4M3FN, {3, 2}, {0x38, 0x38, 0x38, 0x40, 0x38, 0x30}),
        TL({T(f32, {2, 1}, {0.5, 1.0})}), L({1}), L({0}), TL({T(f32, {1, 2}, {2.0, 4.0})}), L({1}), L({0}), N(), Dt(f32),
        L({}), B(false)},
       {{f32, {2, 2}}}},
      {"aten::conj_physical", {T(DType::C64, {2, 3})}, {{DType::C64, {2, 3}}}},
      {"aten::polar", {T(f32, {2, 3}), T(f32, {2, 3})}, {{DType::C64, {2, 3}}}},
      {"aten::complex", {T(f32, {2, 3}), T(f32, {2, 3})}, {{DType::C64, {2, 3}}}},
      {"aten::_neg_view", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::view_as_real", {T(DType::C64, {2, 3})}, {{f32, {2, 3, 2}}}},
      {"aten::view_as_complex", {T(f32, {2, 3, 2})}, {{DType::C64, {2, 3}}}},
      {"aten::_fft_c2c", {T(DType::C64, {4, 3, 8}), L({2, 0}), I(1), B(false)}, {{DType::C64, {4, 3, 8}}}},
      {"aten::_fft_r2c", {T(f32, {4, 8}), L({1}), I(2), B(true)}, {{DType::C64, {4, 5}}}},
      {"aten::_fft_c2r", {T(DType::C64, {4, 5}), L({1}), I(2), I(8)}, {{f32, {4, 8}}}},
      {"aten::multinomial", {T(f32, {2, 5}), I(3), B(false), N()}, {{s64, {2, 3}}}},
      {"aten::signbit", {T(f32, {2, 3})}, {{pred, {2, 3}}}},
      {"aten::frexp.Tensor", {T(f32, {2, 3})}, {{f32, {2, 3}}, {s32, {2, 3}}}},
      {"aten::i0", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::special_entr", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::special_erfcx", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::special_i0e", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::special_i1", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::special_i1e", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::special_log_ndtr", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::special_modified_bessel_i0", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::special_modified_bessel_i1", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::special_ndtri", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::special_spherical_bessel_j0", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::log_sigmoid_forward", {T(f32, {2, 3})}, {{f32, {2, 3}}, {f32, {2, 3}}}},
      {"aten::heaviside", {T(f32, {2, 3}), T(f32, {3})}, {{f32, {2, 3}}}},
      {"aten::logaddexp2", {T(f32, {2, 3}), T(f32, {3})}, {{f32, {2, 3}}}},
      {"aten::nextafter", {T(f32, {2, 3}), T(f32, {3})}, {{f32, {2, 3}}}},
      {"aten::special_xlog1py", {T(f32, {2, 3}), T(f32, {3})}, {{f32, {2, 3}}}},
      {"aten::special_zeta", {T(f32, {2, 3}), T(f32, {3})}, {{f32, {2, 3}}}},
      {"aten::special_xlog1py.other_scalar", {T(f32, {2, 3}), S(2.0)}, {{f32, {2, 3}}}},
      {"aten::special_zeta.other_scalar", {T(f32, {2, 3}), S(2.0)}, {{f32, {2, 3}}}},
      {"aten::special_xlog1py.self_scalar", {S(2.0), T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::special_zeta.self_scalar", {S(2.0), T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::gcd", {T(s64, {3}, {12, -18, 7}), T(s64, {3}, {8, 4, 0})}, {{s64, {3}}}},
      {"aten::lcm", {T(s64, {3}, {12, -18, 7}), T(s64, {3}, {8, 4, 0})}, {{s64, {3}}}},
      {"aten::bitwise_left_shift.Tensor", {T(s64, {3}), T(s64, {3}, {1, 2, 3})}, {{s64, {3}}}},
      {"aten::bitwise_left_shift.Tensor_Scalar", {T(s64, {3}), S(2, K::Int)}, {{s64, {3}}}},
      {"aten::bitwise_left_shift.Scalar_Tensor", {S(5, K::Int), T(s64, {3}, {1, 2, 3})}, {{s64, {3}}}},
      {"aten::bitwise_right_shift.Tensor", {T(s64, {3}), T(s64, {3}, {1, 2, 3})}, {{s64, {3}}}},
      {"aten::bitwise_right_shift.Tensor_Scalar", {T(s64, {3}), S(2, K::Int)}, {{s64, {3}}}},
      {"aten::bitwise_right_shift.Scalar_Tensor", {S(5, K::Int), T(s64, {3}, {1, 2, 3})}, {{s64, {3}}}},
      {"aten::polygamma", {I(1), T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::polygamma", {I(3), T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::special_chebyshev_polynomial_t", {T(f32, {4}), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_chebyshev_polynomial_t.n_scalar", {T(f32, {4}), S(3, K::Int)}, {{f32, {4}}}},
      {"aten::special_chebyshev_polynomial_t.x_scalar", {S(0.5), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_chebyshev_polynomial_u", {T(f32, {4}), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_chebyshev_polynomial_u.n_scalar", {T(f32, {4}), S(3, K::Int)}, {{f32, {4}}}},
      {"aten::special_chebyshev_polynomial_u.x_scalar", {S(0.5), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_chebyshev_polynomial_v", {T(f32, {4}), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_chebyshev_polynomial_v.n_scalar", {T(f32, {4}), S(3, K::Int)}, {{f32, {4}}}},
      {"aten::special_chebyshev_polynomial_v.x_scalar", {S(0.5), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_chebyshev_polynomial_w", {T(f32, {4}), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_chebyshev_polynomial_w.n_scalar", {T(f32, {4}), S(3, K::Int)}, {{f32, {4}}}},
      {"aten::special_chebyshev_polynomial_w.x_scalar", {S(0.5), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_hermite_polynomial_h", {T(f32, {4}), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_hermite_polynomial_h.n_scalar", {T(f32, {4}), S(3, K::Int)}, {{f32, {4}}}},
      {"aten::special_hermite_polynomial_h.x_scalar", {S(0.5), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_hermite_polynomial_he", {T(f32, {4}), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_hermite_polynomial_he.n_scalar", {T(f32, {4}), S(3, K::Int)}, {{f32, {4}}}},
      {"aten::special_hermite_polynomial_he.x_scalar", {S(0.5), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_laguerre_polynomial_l", {T(f32, {4}), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_laguerre_polynomial_l.n_scalar", {T(f32, {4}), S(3, K::Int)}, {{f32, {4}}}},
      {"aten::special_laguerre_polynomial_l.x_scalar", {S(0.5), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_legendre_polynomial_p", {T(f32, {4}), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_legendre_polynomial_p.n_scalar", {T(f32, {4}), S(3, K::Int)}, {{f32, {4}}}},
      {"aten::special_legendre_polynomial_p.x_scalar", {S(0.5), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_shifted_chebyshev_polynomial_t", {T(f32, {4}), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_shifted_chebyshev_polynomial_t.n_scalar", {T(f32, {4}), S(3, K::Int)}, {{f32, {4}}}},
      {"aten::special_shifted_chebyshev_polynomial_t.x_scalar", {S(0.5), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_shifted_chebyshev_polynomial_u", {T(f32, {4}), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_shifted_chebyshev_polynomial_u.n_scalar", {T(f32, {4}), S(3, K::Int)}, {{f32, {4}}}},
      {"aten::special_shifted_chebyshev_polynomial_u.x_scalar", {S(0.5), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_shifted_chebyshev_polynomial_v", {T(f32, {4}), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_shifted_chebyshev_polynomial_v.n_scalar", {T(f32, {4}), S(3, K::Int)}, {{f32, {4}}}},
      {"aten::special_shifted_chebyshev_polynomial_v.x_scalar", {S(0.5), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_shifted_chebyshev_polynomial_w", {T(f32, {4}), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::special_shifted_chebyshev_polynomial_w.n_scalar", {T(f32, {4}), S(3, K::Int)}, {{f32, {4}}}},
      {"aten::special_shifted_chebyshev_polynomial_w.x_scalar", {S(0.5), T(f32, {4}, {0, 1, 3, 12})}, {{f32, {4}}}},
      {"aten::softshrink", {T(f32, {2, 3}), S(0.5)}, {{f32, {2, 3}}}},
      {"aten::hardshrink", {T(f32, {2, 3}), S(0.5)}, {{f32, {2, 3}}}},
      {"aten::softshrink_backward", {T(f32, {2, 3}), T(f32, {2, 3}), S(0.5)}, {{f32, {2, 3}}}},
      {"aten::hardshrink_backward", {T(f32, {2, 3}), T(f32, {2, 3}), S(0.5)}, {{f32, {2, 3}}}},
      {"aten::_prelu_kernel", {T(f32, {2, 3, 4}), T(f32, {1, 3, 1})}, {{f32, {2, 3, 4}}}},
      {"aten::_prelu_kernel_backward", {T(f32, {2, 3, 4}), T(f32, {2, 3, 4}), T(f32, {1, 3, 1})}, {{f32, {2, 3, 4}}, {f32, {2, 3, 4}}}},
      {"aten::logit_backward", {T(f32, {2, 3}), T(f32, {2, 3}), N()}, {{f32, {2, 3}}}},
      {"aten::logit_backward", {T(f32, {2, 3}), T(f32, {2, 3}), D(1e-06)}, {{f32, {2, 3}}}},
      {"aten::log_sigmoid_backward", {T(f32, {2, 3}), T(f32, {2, 3}), T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::view", {T(f32, {2, 3}), L({3, 2})}, {{f32, {3, 2}}}},
      {"aten::reshape", {T(f32, {2, 3}), L({6})}, {{f32, {6}}}},
      {"aten::_reshape_alias", {T(f32, {2, 3}), L({3, 2}), L({2, 1})}, {{f32, {3, 2}}}},
      {"aten::view_as", {T(f32, {2, 3}), T(f32, {3, 2})}, {{f32, {3, 2}}}},
      {"aten::expand", {T(f32, {1, 3}), L({2, 3}), B(false)}, {{f32, {2, 3}}}},
      {"aten::expand_as", {T(f32, {1, 3}), T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::permute", {T(f32, {2, 3, 4}), L({2, 0, 1})}, {{f32, {4, 2, 3}}}},
      {"aten::transpose.int", {T(f32, {2, 3, 4}), I(0), I(2)}, {{f32, {4, 3, 2}}}},
      {"aten::swapaxes", {T(f32, {2, 3, 4}), I(1), I(-1)}, {{f32, {2, 4, 3}}}},
      {"aten::t", {T(f32, {2, 3})}, {{f32, {3, 2}}}},
      {"aten::movedim.int", {T(f32, {2, 3, 4}), I(0), I(2)}, {{f32, {3, 4, 2}}}},
      {"aten::squeeze", {T(f32, {2, 1, 3})}, {{f32, {2, 3}}}},
      {"aten::squeeze.dim", {T(f32, {2, 1, 3}), I(1)}, {{f32, {2, 3}}}},
      {"aten::squeeze.dims", {T(f32, {2, 1, 3}), L({1})}, {{f32, {2, 3}}}},
      {"aten::unsqueeze", {T(f32, {2, 3}), I(1)}, {{f32, {2, 1, 3}}}},
      {"aten::flatten.using_ints", {T(f32, {2, 3, 4}), I(1), I(2)}, {{f32, {2, 12}}}},
      {"aten::unflatten.int", {T(f32, {2, 12}), I(1), L({3, 4})}, {{f32, {2, 3, 4}}}},
      {"aten::slice.Tensor", {T(f32, {2, 5}), I(1), I(1), I(4), I(2)}, {{f32, {2, 2}}}},
      {"aten::narrow", {T(f32, {2, 5}), I(1), I(1), I(3)}, {{f32, {2, 3}}}},
      {"aten::select.int", {T(f32, {2, 5}), I(1), I(-1)}, {{f32, {2}}}},
      {"aten::as_strided", {T(f32, {3, 4}), L({2, 2}), L({4, 1}), I(1)}, {{f32, {2, 2}}}},
      {"aten::as_strided_copy", {T(f32, {3, 4}), L({2, 3}), L({1, 2}), N()}, {{f32, {2, 3}}}},
      {"aten::diagonal", {T(f32, {3, 4}), I(1), I(0), I(1)}, {{f32, {3}}}},
      {"aten::unfold", {T(f32, {2, 7}), I(1), I(3), I(2)}, {{f32, {2, 3, 3}}}},
      {"aten::split.Tensor", {T(f32, {5, 2}), I(2), I(0)}, {{f32, {2, 2}}, {f32, {2, 2}}, {f32, {1, 2}}}},
      {"aten::split_with_sizes", {T(f32, {5, 2}), L({2, 3}), I(0)}, {{f32, {2, 2}}, {f32, {3, 2}}}},
      {"aten::chunk", {T(f32, {5, 2}), I(2), I(0)}, {{f32, {3, 2}}, {f32, {2, 2}}}},
      {"aten::tensor_split.sections", {T(f32, {5, 2}), I(3), I(0)}, {{f32, {2, 2}}, {f32, {2, 2}}, {f32, {1, 2}}}},
      {"aten::unsafe_split.Tensor", {T(f32, {5, 2}), I(2), I(0)}, {{f32, {2, 2}}, {f32, {2, 2}}, {f32, {1, 2}}}},
      {"aten::unsafe_split_with_sizes", {T(f32, {5, 2}), L({4, 1}), I(0)}, {{f32, {4, 2}}, {f32, {1, 2}}}},
      {"aten::unbind.int", {T(f32, {3, 2}), I(1)}, {{f32, {3}}, {f32, {3}}}},
      {"aten::_conj", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::detach", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::lift_fresh", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::lift_fresh_copy", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::conj", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::resolve_conj", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::resolve_neg", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::contiguous", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"prims::convert_element_type", {T(f32, {2, 3}), Dt(s64)}, {{s64, {2, 3}}}},
      {"aten::empty.memory_format", {L({2, 3})}, {{f32, {2, 3}}}},
      {"aten::empty_strided", {L({2, 3}), L({3, 1})}, {{f32, {2, 3}}}},
      {"aten::empty_permuted", {L({2, 3}), L({1, 0})}, {{f32, {2, 3}}}},
      {"aten::empty_like", {T(f32, {2, 3})}, {{f32, {2, 3}}}},
      {"aten::new_empty", {T(f32, {2, 3}), L({4})}, {{f32, {4}}}},
      {"aten::new_empty_strided", {T(f32, {2, 3}), L({4}), L({1})}, {{f32, {4}}}},
      {"aten::eye", {I(3)}, {{f32, {3, 3}}}},
      {"aten::eye.m", {I(2), I(3)}, {{f32, {2, 3}}}},
      {"aten::linspace", {S(0.0), S(1.0), I(5)}, {{f32, {5}}}},
      {"aten::linspace.Tensor_Tensor", {T(f32, {}), T(f32, {}), I(5)}, {{f32, {5}}}},
      {"aten::linspace.Tensor_Scalar", {T(f32, {}), S(2.0), I(5)}, {{f32, {5}}}},
      {"aten::linspace.Scalar_Tensor", {S(0.0), T(f32, {}), I(5)}, {{f32, {5}}}},
      {"aten::logspace", {S(0.0), S(2.0), I(4), D(10.0)}, {{f32, {4}}}},
      {"aten::logspace.Tensor_Tensor", {T(f32, {}), T(f32, {}), I(4), D(2.0)}, {{f32, {4}}}},
      {"aten::logspace.Tensor_Scalar", {T(f32, {}), S(2.0), I(4), D(2.0)}, {{f32, {4}}}},
      {"aten::logspace.Scalar_Tensor", {S(0.0), T(f32, {}), I(4), D(2.0)}, {{f32, {4}}}},
      {"aten::tril_indices", {I(3), I(4), I(0)}, {{s64, {2, 6}}}},
      {"aten::triu_indices", {I(3), I(4), I(1)}, {{s64, {2, 6}}}},
      {"aten::aminmax", {T(f32, {2, 3}), I(1), B(false)}, {{f32, {2}}, {f32, {2}}}},
      {"aten::nansum", {T(f32, {2, 3}), L({1}), B(false)}, {{f32, {2}}}},
      {"aten::histc", {T(f32, {6}), I(4), S(0, K::Int), S(0, K::Int)}, {{f32, {4}}}},
      {"aten::histc", {T(s32, {6}), I(4), S(0, K::Int), S(3, K::Int)}, {{s32, {4}}}},
      // _grouped_mm: 2-D x 3-D (MoE forward), 2-D x 2-D (weight gradient), 3-D x 2-D, 3-D x 3-D
      {"aten::_grouped_mm", {T(f32, {10, 4}), T(f32, {3, 4, 5}), T(s32, {3}, {2, 2, 7}), N(), N()}, {{f32, {10, 5}}}},
      {"aten::_grouped_mm", {T(DType::BF16, {10, 4}), T(DType::BF16, {3, 4, 5}), T(s32, {3}, {3, 6, 10}), N(), N()},
       {{DType::BF16, {10, 5}}}},
      {"aten::_grouped_mm", {T(f32, {4, 10}), T(f32, {10, 5}), T(s32, {3}, {2, 2, 7}), N(), N()}, {{f32, {3, 4, 5}}}},
      {"aten::_grouped_mm", {T(f32, {3, 6, 4}), T(f32, {4, 10}), T(s32, {3}, {4, 4, 9}), N(), N()}, {{f32, {6, 10}}}},
      {"aten::_grouped_mm", {T(f32, {3, 6, 4}), T(f32, {3, 4, 5}), N(), N(), N()}, {{f32, {3, 6, 5}}}},
      // tpu::moe_experts: 4 tokens, top-2 of 3 experts (index 3: an expert-parallel sentinel), hidden 8, I = 4
      {"tpu::moe_experts", {T(f32, {4, 8}), T(s64, {4, 2}, {0, 2, 1, 2, 3, 0, 2, 2}), T(f32, {4, 2}),
                            T(f32, {3, 8, 8}), T(f32, {3, 8, 4})}, {{f32, {4, 8}}}},
      {"aten::renorm", {T(f32, {3, 4}), SS(2.0), I(0), S(1.0)}, {{f32, {3, 4}}}},
      {"aten::_cdist_forward", {T(f32, {3, 2}), T(f32, {4, 2}), SS(2.0), N()}, {{f32, {3, 4}}}},
      {"aten::_cdist_backward", {T(f32, {3, 4}), T(f32, {3, 2}), T(f32, {4, 2}), SS(2.0), T(f32, {3, 4})}, {{f32, {3, 2}}}},
      {"aten::median", {T(f32, {2, 3})}, {{f32, {}}}},
      {"aten::median.dim", {T(f32, {2, 3}), I(1), B(false)}, {{f32, {2}}, {s64, {2}}}},
      {"aten::nanmedian", {T(f32, {2, 3})}, {{f32, {}}}},
      {"aten::nanmedian.dim", {T(f32, {2, 3}), I(1), B(true)}, {{f32, {2, 1}}, {s64, {2, 1}}}},
      {"aten::mode", {T(f32, {2, 3}), I(1), B(false)}, {{f32, {2}}, {s64, {2}}}},
      {"aten::kthvalue", {T(f32, {2, 3}), I(2), I(1), B(false)}, {{f32, {2}}, {s64, {2}}}},
      {"aten::cummax", {T(f32, {2, 3}), I(1)}, {{f32, {2, 3}}, {s64, {2, 3}}}},
      {"aten::cummin", {T(f32, {2, 3}), I(0)}, {{f32, {2, 3}}, {s64, {2, 3}}}},
      {"aten::logcumsumexp", {T(f32, {2, 3}), I(1)}, {{f32, {2, 3}}}},
      {"aten::addr", {T(f32, {2, 3}), T(f32, {2}), T(f32, {3}), S(1, K::Int), S(2, K::Int)}, {{f32, {2, 3}}}},
      {"aten::linalg_cross", {T(f32, {2, 3}), T(f32, {2, 3}), I(-1)}, {{f32, {2, 3}}}},
      {"aten::linalg_cholesky_ex", {T(f32, {3, 3}, {4.0, 1.0, 0.5, 1.0, 3.0, 0.25, 0.5, 0.25, 2.0}), B(false), B(false)}, {{f32, {3, 3}}, {s32, {}}}},
      {"aten::cholesky", {T(f32, {3, 3}, {4.0, 1.0, 0.5, 1.0, 3.0, 0.25, 0.5, 0.25, 2.0}), B(true)}, {{f32, {3, 3}}}},
      {"aten::cholesky_inverse", {T(f32, {3, 3}, {4.0, 1.0, 0.5, 1.0, 3.0, 0.25, 0.5, 0.25, 2.0}), B(false)}, {{f32, {3, 3}}}},
      {"aten::_cholesky_solve_helper", {T(f32, {3, 2}), T(f32, {3, 3}, {4.0, 1.0, 0.5, 1.0, 3.0, 0.25, 0.5, 0.25, 2.0}), B(false)}, {{f32, {3, 2}}}},
      {"aten::linalg_solve_triangular", {T(f32, {3, 3}, {4.0, 1.0, 0.5, 1.0, 3.0, 0.25, 0.5, 0.25, 2.0}), T(f32, {3, 2}), B(true), B(true), B(false)}, {{f32, {3, 2}}}},
      {"aten::triangular_solve", {T(f32, {3, 2}), T(f32, {3, 3}, {4.0, 1.0, 0.5, 1.0, 3.0, 0.25, 0.5, 0.25, 2.0}), B(true), B(false), B(false)}, {{f32, {3, 2}}, {f32, {3, 3}}}},
      {"aten::linalg_lu_factor_ex", {T(f32, {3, 3}, {4.0, 1.0, 0.5, 1.0, 3.0, 0.25, 0.5, 0.25, 2.0}), B(true), B(false)}, {{f32, {3, 3}}, {s32, {3}}, {s32, {}}}},
      {"aten::linalg_qr", {T(f32, {2, 4, 3}), Str("reduced")}, {{f32, {2, 4, 3}}, {f32, {2, 3, 3}}}},
      {"aten::linalg_householder_product", {T(f32, {4, 3}), T(f32, {2})}, {{f32, {4, 3}}}},
      {"aten::_linalg_eigh", {T(f32, {3, 3}, {4.0, 1.0, 0.5, 1.0, 3.0, 0.25, 0.5, 0.25, 2.0}), Str("L"), B(true)}, {{f32, {3}}, {f32, {3, 3}}}},
      {"aten::_linalg_svd", {T(f32, {2, 4, 3}), B(false), B(true), N()}, {{f32, {2, 4, 3}}, {f32, {2, 3}}, {f32, {2, 3, 3}}}},
      {"aten::ormqr", {T(f32, {4, 3}), T(f32, {2}), T(f32, {4, 2}), B(true), B(false)}, {{f32, {4, 2}}}},
      {"aten::_linalg_det", {T(f32, {3, 3}, {4.0, 1.0, 0.5, 1.0, 3.0, 0.25, 0.5, 0.25, 2.0})}, {{f32, {}}, {f32, {3, 3}}, {s32, {3}}}},
      {"aten::_linalg_slogdet", {T(f32, {3, 3}, {4.0, 1.0, 0.5, 1.0, 3.0, 0.25, 0.5, 0.25, 2.0})}, {{f32, {}}, {f32, {}}, {f32, {3, 3}}, {s32, {3}}}},
      {"aten::linalg_lu_solve", {T(f32, {3, 3}, {4.0, 1.0, 0.5, 1.0, 3.0, 0.25, 0.5, 0.25, 2.0}), T(s32, {3}, {1, 2, 3}), T(f32, {3, 2}), B(true), B(false)}, {{f32, {3, 2}}}},
      {"aten::_linalg_solve_ex", {T(f32, {3, 3}, {4.0, 1.0, 0.5, 1.0, 3.0, 0.25, 0.5, 0.25, 2.0}), T(f32, {3, 2}), B(true), B(false)}, {{f32, {3, 2}}, {f32, {3, 3}}, {s32, {3}}, {s32, {}}}},
      {"aten::linalg_inv_ex", {T(f32, {3, 3}, {4.0, 1.0, 0.5, 1.0, 3.0, 0.25, 0.5, 0.25, 2.0}), B(false)}, {{f32, {3, 3}}, {s32, {}}}},
      {"aten::linalg_lu", {T(f32, {3, 3}, {4.0, 1.0, 0.5, 1.0, 3.0, 0.25, 0.5, 0.25, 2.0}), B(true)}, {{f32, {3, 3}}, {f32, {3, 3}}, {f32, {3, 3}}}},
      {"aten::lu_unpack", {T(f32, {3, 3}, {4.0, 1.0, 0.5, 1.0, 3.0, 0.25, 0.5, 0.25, 2.0}), T(s32, {3}, {1, 2, 3}), B(true), B(true)}, {{f32, {3, 3}}, {f32, {3, 3}}, {f32, {3, 3}}}},
      {"aten::glu", {T(f32, {2, 4}), I(1)}, {{f32, {2, 2}}}},
      {"aten::glu_backward", {T(f32, {2, 3}), T(f32, {2, 6}), I(1)}, {{f32, {2, 6}}}},
      {"aten::pixel_shuffle", {T(f32, {1, 4, 2, 3}), I(2)}, {{f32, {1, 1, 4, 6}}}},
      {"aten::pixel_unshuffle", {T(f32, {1, 1, 4, 6}), I(2)}, {{f32, {1, 4, 2, 3}}}},
      {"aten::_weight_norm_interface", {T(f32, {4, 3, 2}), T(f32, {4, 1, 1}), I(0)}, {{f32, {4, 3, 2}}, {f32, {4, 1, 1}}}},
      {"aten::_weight_norm_interface", {T(DType::BF16, {4, 3}), T(DType::BF16, {1, 3}), I(1)}, {{DType::BF16, {4, 3}}, {f32, {1, 3}}}},
      {"aten::_weight_norm_interface_backward", {T(f32, {4, 3}), T(f32, {4, 3}), T(f32, {4, 1}), T(f32, {4, 1}), I(0)}, {{f32, {4, 3}}, {f32, {4, 1}}}},
      {"aten::col2im", {T(f32, {1, 4, 4}), L({3, 3}), L({2, 2}), L({1, 1}), L({0, 0}), L({1, 1})}, {{f32, {1, 1, 3, 3}}}},
      {"aten::col2im", {T(DType::C64, {4, 4}), L({3, 3}), L({2, 2}), L({1, 1}), L({0, 0}), L({1, 1})}, {{DType::C64, {1, 3, 3}}}},
      {"aten::col2im", {T(DType::BF16, {2, 8, 8}), L({4, 3}), L({2, 2}), L({2, 1}), L({1, 0}), L({1, 1})}, {{DType::BF16, {2, 2, 4, 3}}}},
      {"aten::im2col", {T(f32, {1, 1, 3, 3}), L({2, 2}), L({1, 1}), L({1, 1}), L({2, 2})}, {{f32, {1, 4, 4}}}},
      {"aten::im2col", {T(DType::C64, {2, 3, 3}), L({2, 2}), L({1, 1}), L({0, 0}), L({1, 1})}, {{DType::C64, {8, 4}}}},
      {"aten::binary_cross_entropy", {T(f32, {2, 3}), T(f32, {2, 3}), T(f32, {3}), I(0)}, {{f32, {2, 3}}}},
      {"aten::binary_cross_entropy_backward", {T(f32, {2, 3}), T(f32, {2, 3}), T(f32, {2, 3}), N(), I(0)}, {{f32, {2, 3}}}},
      {"aten::binary_cross_entropy_with_logits", {T(f32, {2, 3}), T(f32, {2, 3}), N(), T(f32, {3}), I(0)}, {{f32, {2, 3}}}},
      {"aten::smooth_l1_loss", {T(f32, {2, 3}), T(f32, {2, 3}), I(0), D(0.5)}, {{f32, {2, 3}}}},
      {"aten::smooth_l1_loss_backward", {T(f32, {2, 3}), T(f32, {2, 3}), T(f32, {2, 3}), I(0), D(0.5)}, {{f32, {2, 3}}}},
      {"aten::huber_loss", {T(f32, {2, 3}), T(f32, {2, 3}), I(0), D(0.5)}, {{f32, {2, 3}}}},
      {"aten::huber_loss_backward", {T(f32, {2, 3}), T(f32, {2, 3}), T(f32, {2, 3}), I(0), D(0.5)}, {{f32, {2, 3}}}},
      {"aten::binary_cross_entropy", {T(f32, {2, 3}), T(f32, {2, 3}), T(f32, {3}), I(1)}, {{f32, {}}}},
      {"aten::binary_cross_entropy_backward", {T(f32, {}), T(f32, {2, 3}), T(f32, {2, 3}), N(), I(1)}, {{f32, {2, 3}}}},
      {"aten::binary_cross_entropy_with_logits", {T(f32, {2, 3}), T(f32, {2, 3}), N(), T(f32, {3}), I(1)}, {{f32, {}}}},
      {"aten::smooth_l1_loss", {T(f32, {2, 3}), T(f32, {2, 3}), I(1), D(0.5)}, {{f32, {}}}},
      {"aten::smooth_l1_loss_backward", {T(f32, {}), T(f32, {2, 3}), T(f32, {2, 3}), I(1), D(0.5)}, {{f32, {2, 3}}}},
      {"aten::huber_loss", {T(f32, {2, 3}), T(f32, {2, 3}), I(1), D(0.5)}, {{f32, {}}}},
      {"aten::huber_loss_backward", {T(f32, {}), T(f32, {2, 3}), T(f32, {2, 3}), I(1), D(0.5)}, {{f32, {2, 3}}}},
      {"aten::multi_margin_loss", {T(f32, {3, 4}), T(s64, {3}, {0, 3, 1}), SS(2, K::Int), S(0.5), T(f32, {4}), I(1)}, {{f32, {}}}},
      {"aten::multi_margin_loss", {T(f32, {3, 4}), T(s64, {3}, {0, 3, 1}), SS(1, K::Int), S(1, K::Int), N(), I(0)}, {{f32, {3}}}},
      {"aten::multi_margin_loss_backward", {T(f32, {}), T(f32, {3, 4}), T(s64, {3}, {0, 3, 1}), SS(2, K::Int), S(0.5), T(f32, {4}), I(1)}, {{f32, {3, 4}}}},
      {"aten::multilabel_margin_loss_forward", {T(f32, {2, 4}), T(s64, {2, 4}, {1, 3, -1, 0, 2, -1, 1, 1}), I(1)}, {{f32, {}}, {f32, {2, 4}}}},
      {"aten::multilabel_margin_loss_backward", {T(f32, {2}), T(f32, {2, 4}), T(s64, {2, 4}, {1, 3, -1, 0, 2, -1, 1, 1}), I(0), T(f32, {2, 4}, {0, 1, 0, 1, 0, 0, 1, 0})}, {{f32, {2, 4}}}},
      {"aten::_ctc_loss", {T(f32, {5, 2, 4}), T(s64, {2, 3}, {1, 2, 2, 3, 1, 0}), L({5, 4}), L({3, 2}), I(0), B(false)}, {{f32, {2}}, {f32, {2, 5, 7}}}},
      {"aten::_ctc_loss_backward", {T(f32, {2}), T(f32, {5, 2, 4}), T(s64, {3}, {1, 2, 3}), L({5, 4}), L({2, 1}), T(f32, {2}), T(f32, {2, 5, 5}), I(0), B(true)}, {{f32, {5, 2, 4}}}},
      {"aten::take", {T(f32, {2, 3}), T(s64, {2, 2}, {0, 5, -1, 2})}, {{f32, {2, 2}}}},
      {"aten::put", {T(f32, {2, 3}), T(s64, {2}, {0, -1}), T(f32, {2}), B(true)}, {{f32, {2, 3}}}},
      {"aten::index_reduce", {T(f32, {4, 3}), I(0), T(s64, {2}, {3, 1}), T(f32, {2, 3}), Str("prod"), B(true)}, {{f32, {4, 3}}}},
      {"aten::index_reduce", {T(f32, {4, 3}), I(0), T(s64, {2}, {3, 1}), T(f32, {2, 3}), Str("mean"), B(true)}, {{f32, {4, 3}}}},
      {"aten::index_reduce", {T(f32, {4, 3}), I(0), T(s64, {2}, {3, 1}), T(f32, {2, 3}), Str("amax"), B(true)}, {{f32, {4, 3}}}},
      {"aten::index_reduce", {T(f32, {4, 3}), I(0), T(s64, {2}, {3, 1}), T(f32, {2, 3}), Str("amin"), B(true)}, {{f32, {4, 3}}}},
      {"aten::masked_scatter", {T(f32, {2, 3}), T(pred, {2, 3}, {1, 0, 1, 0, 1, 1}), T(f32, {6})}, {{f32, {2, 3}}}},
      {"aten::isin.Tensor_Tensor", {T(s64, {4}, {1, 2, 3, 4}), T(s64, {2}, {2, 4}), B(false), B(false)}, {{pred, {4}}}},
      {"aten::isin.Tensor_Scalar", {T(s64, {4}, {1, 2, 3, 4}), S(3, K::Int), B(false), B(true)}, {{pred, {4}}}},
      {"aten::isin.Scalar_Tensor", {S(3, K::Int), T(s64, {4}, {1, 2, 3, 4}), B(false), B(false)}, {{pred, {}}}},
      {"aten::searchsorted.Tensor", {T(f32, {4}, {1, 2, 3, 4}), T(f32, {2, 3}), B(false), B(false), N(), N()}, {{s64, {2, 3}}}},
      {"aten::searchsorted.Scalar", {T(f32, {4}, {1, 2, 3, 4}), S(2.5), B(true), B(false), Str("right"), N()}, {{s32, {}}}},
      {"aten::bucketize.Tensor", {T(f32, {2, 3}), T(f32, {4}, {1, 2, 3, 4}), B(false), B(true)}, {{s64, {2, 3}}}},
      {"aten::bucketize.Scalar", {S(2.5), T(f32, {4}, {1, 2, 3, 4}), B(true), B(false)}, {{s32, {}}}},
      {"aten::channel_shuffle", {T(f32, {1, 4, 2}), I(2)}, {{f32, {1, 4, 2}}}},
      {"aten::native_channel_shuffle", {T(f32, {1, 4, 2}), I(2)}, {{f32, {1, 4, 2}}}},
      {"aten::unfold_backward", {T(f32, {2, 3, 3}), L({2, 7}), I(1), I(3), I(2)}, {{f32, {2, 7}}}},
      {"aten::reflection_pad1d", {T(f32, {1, 2, 5}), L({2, 1})}, {{f32, {1, 2, 8}}}},
      {"aten::reflection_pad1d_backward", {T(f32, {1, 2, 8}), T(f32, {1, 2, 5}), L({2, 1})}, {{f32, {1, 2, 5}}}},
      {"aten::reflection_pad2d", {T(f32, {1, 2, 4, 5}), L({1, 2, 2, 0})}, {{f32, {1, 2, 6, 8}}}},
      {"aten::reflection_pad2d_backward", {T(f32, {1, 2, 6, 8}), T(f32, {1, 2, 4, 5}), L({1, 2, 2, 0})}, {{f32, {1, 2, 4, 5}}}},
      {"aten::reflection_pad3d", {T(f32, {1, 1, 3, 4, 5}), L({1, 1, 2, 0, 1, 2})}, {{f32, {1, 1, 6, 6, 7}}}},
      {"aten::reflection_pad3d_backward", {T(f32, {1, 1, 6, 6, 7}), T(f32, {1, 1, 3, 4, 5}), L({1, 1, 2, 0, 1, 2})}, {{f32, {1, 1, 3, 4, 5}}}},
      {"aten::replication_pad1d", {T(f32, {1, 2, 5}), L({2, 1})}, {{f32, {1, 2, 8}}}},
      {"aten::replication_pad1d_backward", {T(f32, {1, 2, 8}), T(f32, {1, 2, 5}), L({2, 1})}, {{f32, {1, 2, 5}}}},
      {"aten::replication_pad2d", {T(f32, {1, 2, 4, 5}), L({1, 2, 2, 0})}, {{f32, {1, 2, 6, 8}}}},
      {"aten::replication_pad2d_backward", {T(f32, {1, 2, 6, 8}), T(f32, {1, 2, 4, 5}), L({1, 2, 2, 0})}, {{f32, {1, 2, 4, 5}}}},
      {"aten::replication_pad3d", {T(f32, {1, 1, 3, 4, 5}), L({1, 1, 2, 0, 1, 2})}, {{f32, {1, 1, 6, 6, 7}}}},
      {"aten::replication_pad3d_backward", {T(f32, {1, 1, 6, 6, 7}), T(f32, {1, 1, 3, 4, 5}), L({1, 1, 2, 0, 1, 2})}, {{f32, {1, 1, 3, 4, 5}}}},
      {"aten::native_group_norm", {T(f32, {2, 4, 3}), T(f32, {4}), T(f32, {4}), I(2), I(4), I(3), I(2), D(1e-05)}, {{f32, {2, 4, 3}}, {f32, {2, 2}}, {f32, {2, 2}}}},
      {"aten::native_group_norm_backward", {T(f32, {2, 4, 3}), T(f32, {2, 4, 3}), T(f32, {2, 2}), T(f32, {2, 2}), T(f32, {4}), I(2), I(4), I(3), I(2), BL({true, true, true})}, {{f32, {2, 4, 3}}, {f32, {4}}, {f32, {4}}}},
      {"aten::native_batch_norm", {T(f32, {2, 3, 4}), T(f32, {3}), T(f32, {3}), T(f32, {3}), T(f32, {3}), B(true), D(0.1), D(1e-05)}, {{f32, {2, 3, 4}}, {f32, {3}}, {f32, {3}}}},
      {"aten::_native_batch_norm_legit", {T(f32, {2, 3, 4}), T(f32, {3}), T(f32, {3}), T(f32, {3}), T(f32, {3}), B(true), D(0.1), D(1e-05)}, {{f32, {2, 3, 4}}, {f32, {3}}, {f32, {3}}, {f32, {3}}, {f32, {3}}}},
      {"aten::_native_batch_norm_legit_functional", {T(f32, {2, 3, 4}), T(f32, {3}), T(f32, {3}), T(f32, {3}), T(f32, {3}), B(true), D(0.1), D(1e-05)}, {{f32, {2, 3, 4}}, {f32, {3}}, {f32, {3}}, {f32, {3}}, {f32, {3}}}},
      {"aten::native_batch_norm", {T(f32, {2, 3, 4}), T(f32, {3}), T(f32, {3}), T(f32, {3}), T(f32, {3}), B(false), D(0.1), D(1e-05)}, {{f32, {2, 3, 4}}, {f32, {3}}, {f32, {3}}}},
      {"aten::_native_batch_norm_legit", {T(f32, {2, 3, 4}), T(f32, {3}), T(f32, {3}), T(f32, {3}), T(f32, {3}), B(false), D(0.1), D(1e-05)}, {{f32, {2, 3, 4}}, {f32, {3}}, {f32, {3}}, {f32, {3}}, {f32, {3}}}},
      {"aten::_native_batch_norm_legit_functional", {T(f32, {2, 3, 4}), T(f32, {3}), T(f32, {3}), T(f32, {3}), T(f32, {3}), B(false), D(0.1), D(1e-05)}, {{f32, {2, 3, 4}}, {f32, {3}}, {f32, {3}}, {f32, {3}}, {f32, {3}}}},
      {"aten::_native_batch_norm_legit.no_stats", {T(f32, {2, 3, 4}), T(f32, {3}), T(f32, {3}), B(true), D(0.1), D(1e-05)}, {{f32, {2, 3, 4}}, {f32, {3}}, {f32, {3}}}},
      {"aten::_native_batch_norm_legit_no_training", {T(f32, {2, 3, 4}), T(f32, {3}), T(f32, {3}), T(f32, {3}), T(f32, {3}), D(0.1), D(1e-05)}, {{f32, {2, 3, 4}}, {f32, {3}}, {f32, {3}}}},
      {"aten::_batch_norm_with_update", {T(f32, {2, 3, 4}), T(f32, {3}), T(f32, {3}), T(f32, {3}), T(f32, {3}), D(0.1), D(1e-05)}, {{f32, {2, 3, 4}}, {f32, {3}}, {f32, {3}}, {u8, {0}}, {f32, {3}}, {f32, {3}}}},
      {"aten::_batch_norm_with_update_functional", {T(f32, {2, 3, 4}), T(f32, {3}), T(f32, {3}), T(f32, {3}), T(f32, {3}), D(0.1), D(1e-05)}, {{f32, {2, 3, 4}}, {f32, {3}}, {f32, {3}}, {u8, {0}}, {f32, {3}}, {f32, {3}}}},
      {"aten::_batch_norm_no_update", {T(f32, {2, 3, 4}), T(f32, {3}), T(f32, {3}), T(f32, {3}), T(f32, {3}), D(0.1), D(1e-05)}, {{f32, {2, 3, 4}}, {f32, {3}}, {f32, {3}}, {u8, {0}}}},
      {"aten::batch_norm_update_stats", {T(f32, {2, 3, 4}), T(f32, {3}), T(f32, {3}), D(0.1)}, {{f32, {3}}, {f32, {3}}}},
      {"aten::native_batch_norm_backward", {T(f32, {2, 3, 4}), T(f32, {2, 3, 4}), T(f32, {3}), T(f32, {3}), T(f32, {3}), T(f32, {3}), T(f32, {3}), B(true), D(1e-05), BL({true, true, true})}, {{f32, {2, 3, 4}}, {f32, {3}}, {f32, {3}}}},
      {"aten::native_batch_norm_backward", {T(f32, {2, 3, 4}), T(f32, {2, 3, 4}), T(f32, {3}), T(f32, {3}), T(f32, {3}), T(f32, {3}), T(f32, {3}), B(false), D(1e-05), BL({true, true, true})}, {{f32, {2, 3, 4}}, {f32, {3}}, {f32, {3}}}},
      {"aten::batch_norm_backward", {T(f32, {2, 3, 4}), T(f32, {2, 3, 4}), T(f32, {3}), T(f32, {3}), T(f32, {3}), T(f32, {3}), T(f32, {3}), B(true), D(1e-05), BL({true, true, true}), T(u8, {0})}, {{f32, {2, 3, 4}}, {f32, {3}}, {f32, {3}}}},
      {"aten::_fused_rms_norm", {T(f32, {2, 3, 4}), L({4}), T(f32, {4}), D(1e-06)}, {{f32, {2, 3, 4}}, {f32, {2, 3, 1}}}},
      {"aten::_fused_rms_norm_backward", {T(f32, {2, 3, 4}), T(f32, {2, 3, 4}), L({4}), T(f32, {2, 3, 1}), T(f32, {4}), BL({true, true})}, {{f32, {2, 3, 4}}, {f32, {4}}}},
      {"aten::convolution", {T(f32, {1, 2, 5, 5}), T(f32, {4, 2, 3, 3}), T(f32, {4}), L({1, 1}), L({1, 1}), L({1, 1}), B(false), L({0, 0}), I(1)}, {{f32, {1, 4, 5, 5}}}},
      {"aten::convolution_overrideable", {T(f32, {1, 2, 5, 5}), T(f32, {4, 2, 3, 3}), T(f32, {4}), L({1, 1}), L({1, 1}), L({1, 1}), B(false), L({0, 0}), I(1)}, {{f32, {1, 4, 5, 5}}}},
      {"aten::_convolution", {T(f32, {1, 2, 5, 5}), T(f32, {4, 2, 3, 3}), T(f32, {4}), L({1, 1}), L({1, 1}), L({1, 1}), B(false), L({0, 0}), I(1), B(false), B(false), B(false), B(false)}, {{f32, {1, 4, 5, 5}}}},
      {"aten::_convolution.deprecated", {T(f32, {1, 2, 5, 5}), T(f32, {4, 2, 3, 3}), T(f32, {4}), L({1, 1}), L({1, 1}), L({1, 1}), B(false), L({0, 0}), I(1), B(false), B(false), B(false)}, {{f32, {1, 4, 5, 5}}}},
      {"aten::convolution_backward", {T(f32, {1, 4, 5, 5}), T(f32, {1, 2, 5, 5}), T(f32, {4, 2, 3, 3}), L({4}), L({1, 1}), L({1, 1}), L({1, 1}), B(false), L({0, 0}), I(1), BL({true, true, true})}, {{f32, {1, 2, 5, 5}}, {f32, {4, 2, 3, 3}}, {f32, {4}}}},
      {"aten::convolution_backward_overrideable", {T(f32, {1, 4, 5, 5}), T(f32, {1, 2, 5, 5}), T(f32, {4, 2, 3, 3}), L({1, 1}), L({1, 1}), L({1, 1}), B(false), L({0, 0}), I(1), BL({true, true, true})}, {{f32, {1, 2, 5, 5}}, {f32, {4, 2, 3, 3}}, {f32, {4}}}},
      {"aten::avg_pool2d", {T(f32, {1, 2, 5, 5}), L({2, 2}), L({2, 2}), L({0, 0}), B(false), B(true), N()}, {{f32, {1, 2, 2, 2}}}},
      {"aten::avg_pool2d_backward", {T(f32, {1, 2, 2, 2}), T(f32, {1, 2, 5, 5}), L({2, 2}), L({2, 2}), L({0, 0}), B(false), B(true), N()}, {{f32, {1, 2, 5, 5}}}},
      {"aten::max_pool2d_with_indices", {T(f32, {1, 2, 5, 5}), L({2, 2}), L({2, 2}), L({0, 0}), L({1, 1}), B(false)}, {{f32, {1, 2, 2, 2}}, {s64, {1, 2, 2, 2}}}},
      {"aten::max_pool2d_with_indices_backward", {T(f32, {1, 2, 2, 2}), T(f32, {1, 2, 5, 5}), L({2, 2}), L({2, 2}), L({0, 0}), L({1, 1}), B(false), T(s64, {1, 2, 2, 2})}, {{f32, {1, 2, 5, 5}}}},
      {"aten::_adaptive_avg_pool2d", {T(f32, {1, 2, 5, 5}), L({3, 3})}, {{f32, {1, 2, 3, 3}}}},
      {"aten::_adaptive_avg_pool2d_backward", {T(f32, {1, 2, 3, 3}), T(f32, {1, 2, 5, 5})}, {{f32, {1, 2, 5, 5}}}},
      {"aten::avg_pool3d", {T(f32, {1, 2, 5, 5, 5}), L({2, 2, 2}), L({2, 2, 2}), L({0, 0, 0}), B(false), B(true), N()}, {{f32, {1, 2, 2, 2, 2}}}},
      {"aten::avg_pool3d_backward", {T(f32, {1, 2, 2, 2, 2}), T(f32, {1, 2, 5, 5, 5}), L({2, 2, 2}), L({2, 2, 2}), L({0, 0, 0}), B(false), B(true), N()}, {{f32, {1, 2, 5, 5, 5}}}},
      {"aten::max_pool3d_with_indices", {T(f32, {1, 2, 5, 5, 5}), L({2, 2, 2}), L({2, 2, 2}), L({0, 0, 0}), L({1, 1, 1}), B(false)}, {{f32, {1, 2, 2, 2, 2}}, {s64, {1, 2, 2, 2, 2}}}},
      {"aten::max_pool3d_with_indices_backward", {T(f32, {1, 2, 2, 2, 2}), T(f32, {1, 2, 5, 5, 5}), L({2, 2, 2}), L({2, 2, 2}), L({0, 0, 0}), L({1, 1, 1}), B(false), T(s64, {1, 2, 2, 2, 2})}, {{f32, {1, 2, 5, 5, 5}}}},
      {"aten::_adaptive_avg_pool3d", {T(f32, {1, 2, 5, 5, 5}), L({3, 3, 3})}, {{f32, {1, 2, 3, 3, 3}}}},
      {"aten::_adaptive_avg_pool3d_backward", {T(f32, {1, 2, 3, 3, 3}), T(f32, {1, 2, 5, 5, 5})}, {{f32, {1, 2, 5, 5, 5}}}},
      {"aten::max_unpool2d", {T(f32, {1, 2, 2, 2}), T(s64, {1, 2, 2, 2}, {0, 3, 10, 15, 1, 6, 9, 12}), L({4, 4})}, {{f32, {1, 2, 4, 4}}}},
      {"aten::max_unpool3d", {T(f32, {1, 1, 1, 2, 2}), T(s64, {1, 1, 1, 2, 2}, {0, 3, 5, 7}), L({2, 2, 2}), L({2, 2, 2}), L({0, 0, 0})}, {{f32, {1, 1, 2, 2, 2}}}},
      {"aten::adaptive_max_pool2d", {T(f32, {1, 2, 5, 7}), L({3, 2})}, {{f32, {1, 2, 3, 2}}, {s64, {1, 2, 3, 2}}}},
      {"aten::adaptive_max_pool2d_backward", {T(f32, {1, 2, 3, 2}), T(f32, {1, 2, 5, 7}), T(s64, {1, 2, 3, 2}, {0, 3, 14, 20, 29, 34, 1, 2, 8, 13, 28, 30})}, {{f32, {1, 2, 5, 7}}}},
      {"aten::adaptive_max_pool3d", {T(f32, {1, 2, 3, 5, 4}), L({2, 3, 1})}, {{f32, {1, 2, 2, 3, 1}}, {s64, {1, 2, 2, 3, 1}}}},
      {"aten::adaptive_max_pool3d_backward", {T(f32, {1, 1, 2, 1, 1}), T(f32, {1, 1, 3, 2, 2}), T(s64, {1, 1, 2, 1, 1}, {1, 10})}, {{f32, {1, 1, 3, 2, 2}}}},
      {"aten::fractional_max_pool2d", {T(f32, {1, 2, 7, 6}), L({2, 2}), L({3, 3}), T(f32, {1, 2, 2}, {0.1, 0.7, 0.5, 0.9})}, {{f32, {1, 2, 3, 3}}, {s64, {1, 2, 3, 3}}}},
      {"aten::fractional_max_pool2d_backward", {T(f32, {1, 1, 2, 2}), T(f32, {1, 1, 4, 4}), L({2, 2}), L({2, 2}), T(s64, {1, 1, 2, 2}, {0, 3, 9, 15})}, {{f32, {1, 1, 4, 4}}}},
      {"aten::fractional_max_pool3d", {T(f32, {1, 1, 5, 6, 5}), L({2, 2, 2}), L({3, 3, 2}), T(f32, {1, 1, 3}, {0.2, 0.6, 0.4})}, {{f32, {1, 1, 3, 3, 2}}, {s64, {1, 1, 3, 3, 2}}}},
      {"aten::fractional_max_pool3d_backward", {T(f32, {1, 1, 1, 1, 2}), T(f32, {1, 1, 2, 2, 2}), L({2, 2, 1}), L({1, 1, 2}), T(s64, {1, 1, 1, 1, 2}, {3, 6})}, {{f32, {1, 1, 2, 2, 2}}}},
      {"aten::upsample_nearest1d", {T(f32, {1, 2, 3}), L({5}), N()}, {{f32, {1, 2, 5}}}},
      {"aten::upsample_nearest1d_backward", {T(f32, {1, 2, 5}), L({5}), L({1, 2, 3}), N()}, {{f32, {1, 2, 3}}}},
      {"aten::_upsample_nearest_exact1d", {T(f32, {1, 2, 3}), L({5}), N()}, {{f32, {1, 2, 5}}}},
      {"aten::_upsample_nearest_exact1d_backward", {T(f32, {1, 2, 5}), L({5}), L({1, 2, 3}), N()}, {{f32, {1, 2, 3}}}},
      {"aten::upsample_linear1d", {T(f32, {1, 2, 3}), L({5}), B(false), N()}, {{f32, {1, 2, 5}}}},
      {"aten::upsample_linear1d_backward", {T(f32, {1, 2, 5}), L({5}), L({1, 2, 3}), B(true), N()}, {{f32, {1, 2, 3}}}},
      {"aten::upsample_nearest2d", {T(f32, {1, 2, 3, 3}), L({5, 5}), N(), N()}, {{f32, {1, 2, 5, 5}}}},
      {"aten::upsample_nearest2d_backward", {T(f32, {1, 2, 5, 5}), L({5, 5}), L({1, 2, 3, 3}), N(), N()}, {{f32, {1, 2, 3, 3}}}},
      {"aten::_upsample_nearest_exact2d", {T(f32, {1, 2, 3, 3}), L({5, 5}), N(), N()}, {{f32, {1, 2, 5, 5}}}},
      {"aten::_upsample_nearest_exact2d_backward", {T(f32, {1, 2, 5, 5}), L({5, 5}), L({1, 2, 3, 3}), N(), N()}, {{f32, {1, 2, 3, 3}}}},
      {"aten::upsample_bilinear2d", {T(f32, {1, 2, 3, 3}), L({5, 5}), B(false), N(), N()}, {{f32, {1, 2, 5, 5}}}},
      {"aten::upsample_bilinear2d_backward", {T(f32, {1, 2, 5, 5}), L({5, 5}), L({1, 2, 3, 3}), B(true), N(), N()}, {{f32, {1, 2, 3, 3}}}},
      {"aten::upsample_nearest3d", {T(f32, {1, 2, 3, 3, 3}), L({5, 5, 5}), N(), N(), N()}, {{f32, {1, 2, 5, 5, 5}}}},
      {"aten::upsample_nearest3d_backward", {T(f32, {1, 2, 5, 5, 5}), L({5, 5, 5}), L({1, 2, 3, 3, 3}), N(), N(), N()}, {{f32, {1, 2, 3, 3, 3}}}},
      {"aten::_upsample_nearest_exact3d", {T(f32, {1, 2, 3, 3, 3}), L({5, 5, 5}), N(), N(), N()}, {{f32, {1, 2, 5, 5, 5}}}},
      {"aten::_upsample_nearest_exact3d_backward", {T(f32, {1, 2, 5, 5, 5}), L({5, 5, 5}), L({1, 2, 3, 3, 3}), N(), N(), N()}, {{f32, {1, 2, 3, 3, 3}}}},
      {"aten::upsample_trilinear3d", {T(f32, {1, 2, 3, 3, 3}), L({5, 5, 5}), B(false), N(), N(), N()}, {{f32, {1, 2, 5, 5, 5}}}},
      {"aten::upsample_trilinear3d_backward", {T(f32, {1, 2, 5, 5, 5}), L({5, 5, 5}), L({1, 2, 3, 3, 3}), B(true), N(), N(), N()}, {{f32, {1, 2, 3, 3, 3}}}},
  };
  for (const Case& c : kCases) test(c.op, [&] { run(c.op, c.args, c.outs); });

  // foreach ops: the per-tensor rule applied to each element of two-element lists.
  auto list = [] { return TL({T(DType::F32, {2, 3}), T(DType::F32, {4})}); };
  const std::vector<TensorType> two = {{f32, {2, 3}}, {f32, {4}}}, two0d = {{f32, {}}, {f32, {}}};
  auto each = [&](const std::string& op, std::vector<In> args, const std::vector<TensorType>& outs) {
    test(op, [&] { run(op, args, outs); });
  };
  for (const char* u : {"abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor",
                        "frac", "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt",
                        "sigmoid", "sign", "sin", "sinh", "sqrt", "tan", "tanh", "trunc", "zero", "clone"})
    each(std::string("aten::_foreach_") + u, {list()}, two);
  for (std::string n : {"add", "sub"}) {
    each("aten::_foreach_" + n + ".List", {list(), list(), S(2, K::Int)}, two);
    each("aten::_foreach_" + n + ".Scalar", {list(), S(0.5)}, two);
  }
  each("aten::_foreach_add.Tensor", {list(), T(f32, {}), S(1, K::Int)}, two);
  for (std::string n : {"mul", "div"}) {
    each("aten::_foreach_" + n + ".List", {list(), list()}, two);
    each("aten::_foreach_" + n + ".Scalar", {list(), S(0.5)}, two);
    each("aten::_foreach_" + n + ".Tensor", {list(), T(f32, {})}, two);
  }
  for (std::string n : {"clamp_min", "clamp_max", "maximum", "minimum"}) {
    each("aten::_foreach_" + n + ".List", {list(), list()}, two);
    each("aten::_foreach_" + n + ".Scalar", {list(), S(0.5)}, two);
  }
  each("aten::_foreach_pow.List", {list(), list()}, two);
  each("aten::_foreach_pow.Scalar", {list(), S(2.0)}, two);
  each("aten::_foreach_pow.ScalarAndTensor", {S(2.0), list()}, two);
  for (std::string n : {"addcmul", "addcdiv"}) each("aten::_foreach_" + n + ".Scalar", {list(), list(), list(), S(0.5)}, two);
  each("aten::_foreach_lerp.List", {list(), list(), list()}, two);
  each("aten::_foreach_lerp.Scalar", {list(), list(), S(0.25)}, two);
  each("aten::_foreach_norm.Scalar", {list(), SS(2.0), N()}, two0d);
  each("aten::_foreach_max", {list()}, two0d);

  // fused optimizers: they return nothing and write their lists (the rule returns the new values).
  auto steps = [] { return TL({T(DType::F32, {}, {3}), T(DType::F32, {}, {3})}); };
  for (std::string op : {"aten::_fused_adam_", "aten::_fused_adamw_"}) {
    each(op, {list(), list(), list(), list(), TL({}), steps(), D(1e-3), D(0.9), D(0.999), D(0.01), D(1e-8), B(false),
              B(false), N(), N()}, {});
    each(op + ".tensor_lr", {list(), list(), list(), list(), list(), steps(), T(f32, {}, {1e-3}), D(0.9), D(0.999),
                             D(0.01), D(1e-8), B(true), B(true), N(), N()}, {});
  }
  each("aten::_fused_sgd_", {list(), list(), list(), D(0.01), D(0.9), D(0.1), D(0), B(false), B(false), B(true), N(), N()},
       {});
  each("aten::_fused_sgd_.tensor_lr", {list(), list(), list(), D(0.01), D(0.9), T(f32, {}, {0.1}), D(0), B(true),
                                       B(false), B(false), N(), N()}, {});
}

// Rules this test does not lower, each with the reason (where else it is tested). A rule that no case lowers and
// that is not listed here fails the test, and so does a listed rule that a case does lower.
static const std::map<std::string, std::string> kNotLowered = {
};

// ------------------------------------------------------------------ numeric checks


// _grouped_mm against host loops, for each form; rows/columns of no group and empty groups give zeros.
static void groupedMMTests() {
  const DType f32 = DType::F32, s32 = DType::S32;
  auto vals = [](int64_t n, double scale) {
    std::vector<double> v;
    v.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) v[size_t(k)] = double((k * 5) % 13 - 6) * scale;
    return v;
  };
  // Group of row r for cumulative ends `offs`, or -1 past the last.
  auto groupOf = [](const std::vector<double>& offs, int64_t r) {
    for (size_t g = 0; g < offs.size(); ++g)
      if (r < int64_t(offs[g])) return int64_t(g);
    return int64_t(-1);
  };
  // Uneven groups, an empty one, rows past the end; and a length that is no multiple of the tile.
  for (auto offs : {std::vector<double>{2, 2, 7}, std::vector<double>{0, 9, 9}, std::vector<double>{3, 3, 10}}) {
    std::string tag = "offs " + std::to_string(int(offs[0])) + "," + std::to_string(int(offs[1])) + "," +
                      std::to_string(int(offs[2]));
    const int64_t Lr = 10, Kc = 4, Nc = 5, G = 3;
    auto x = vals(Lr * Kc, 0.25), w = vals(G * Kc * Nc, 0.5);
    std::vector<double> want(static_cast<size_t>(Lr * Nc), 0.0);
    for (int64_t r = 0; r < Lr; ++r) {
      int64_t g = groupOf(offs, r);
      if (g < 0) continue;
      for (int64_t n = 0; n < Nc; ++n)
        for (int64_t k = 0; k < Kc; ++k) want[size_t(r * Nc + n)] += x[size_t(r * Kc + k)] * w[size_t((g * Kc + k) * Nc + n)];
    }
    expect("grouped_mm 2d x 3d " + tag, "aten::_grouped_mm", {T(f32, {Lr, Kc}, x), T(f32, {G, Kc, Nc}, w),
           T(s32, {G}, offs), N(), N()}, {{f32, {Lr, Nc}}}, {want});
    // 3-D x 2-D: a [G, M, Kc] x b [Kc, Lr] with the columns of b grouped.
    const int64_t M = 3;
    auto a3 = vals(G * M * Kc, 0.5), bt = vals(Kc * Lr, 0.25);
    std::vector<double> want3(static_cast<size_t>(M * Lr), 0.0);
    for (int64_t c = 0; c < Lr; ++c) {
      int64_t g = groupOf(offs, c);
      if (g < 0) continue;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < Kc; ++k) want3[size_t(m * Lr + c)] += a3[size_t((g * M + m) * Kc + k)] * bt[size_t(k * Lr + c)];
    }
    expect("grouped_mm 3d x 2d " + tag, "aten::_grouped_mm", {T(f32, {G, M, Kc}, a3), T(f32, {Kc, Lr}, bt),
           T(s32, {G}, offs), N(), N()}, {{f32, {M, Lr}}}, {want3});
    // 2-D x 2-D: a [P, Lr] x c [Lr, Q] -> [G, P, Q], the contraction split by groups.
    const int64_t P = 3, Q = 2;
    auto a2 = vals(P * Lr, 0.25), c2 = vals(Lr * Q, 0.5);
    std::vector<double> want2(static_cast<size_t>(G * P * Q), 0.0);
    for (int64_t r = 0; r < Lr; ++r) {
      int64_t g = groupOf(offs, r);
      if (g < 0) continue;
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) want2[size_t((g * P + p) * Q + q)] += a2[size_t(p * Lr + r)] * c2[size_t(r * Q + q)];
    }
    expect("grouped_mm 2d x 2d " + tag, "aten::_grouped_mm", {T(f32, {P, Lr}, a2), T(f32, {Lr, Q}, c2),
           T(s32, {G}, offs), N(), N()}, {{f32, {G, P, Q}}}, {want2});
  }
  // Many rows over many groups: several tiles per group and several groups per tile.
  {
    const int64_t Lr = 300, Kc = 3, Nc = 2, G = 7;
    std::vector<double> offs = {0, 40, 41, 41, 200, 250, 290};
    auto x = vals(Lr * Kc, 0.125), w = vals(G * Kc * Nc, 0.5);
    std::vector<double> want(static_cast<size_t>(Lr * Nc), 0.0);
    for (int64_t r = 0; r < Lr; ++r) {
      int64_t g = groupOf(offs, r);
      if (g < 0) continue;
      for (int64_t n = 0; n < Nc; ++n)
        for (int64_t k = 0; k < Kc; ++k) want[size_t(r * Nc + n)] += x[size_t(r * Kc + k)] * w[size_t((g * Kc + k) * Nc + n)];
    }
    expect("grouped_mm 2d x 3d many groups", "aten::_grouped_mm", {T(f32, {Lr, Kc}, x), T(f32, {G, Kc, Nc}, w),
           T(s32, {G}, offs), N(), N()}, {{f32, {Lr, Nc}}}, {want});
  }
  // Decoding shapes: about as many rows as groups (tokens x top-k against the experts), most groups of 0-2 rows and
  // one longer than the window (its rows past the first window go through the loop). The first windows are one
  // batched product (a dot_general with a batch dimension), with a window below the usual 8 rows; forward and the
  // weight gradient (2-D x 2-D) against host loops.
  for (int64_t Lr : {int64_t(16), int64_t(8)}) {
    const int64_t Kc = 3, Nc = 2, G = 16, P = 2;
    std::vector<double> sizes(size_t(G), 1.0);
    if (Lr == 16) {
      sizes[1] = 0, sizes[2] = 2, sizes[4] = 0, sizes[7] = 0, sizes[9] = 6, sizes[10] = 0, sizes[12] = 0,
      sizes[13] = 0, sizes[15] = 0;  // 2 + 6 + 7 x 1 = 15 rows: the last row is in no group
    } else {
      for (auto& v : sizes) v = 0;
      sizes[0] = 1, sizes[3] = 3, sizes[8] = 1, sizes[11] = 2, sizes[15] = 1;  // 8
    }
    std::vector<double> offs(static_cast<size_t>(G));
    double run_sum = 0;
    for (int64_t g = 0; g < G; ++g) offs[size_t(g)] = run_sum += sizes[size_t(g)];
    auto x = vals(Lr * Kc, 0.125), w = vals(G * Kc * Nc, 0.5), a2 = vals(P * Lr, 0.25), c2 = vals(Lr * Nc, 0.5);
    std::vector<double> want(static_cast<size_t>(Lr * Nc), 0.0), want2(static_cast<size_t>(G * P * Nc), 0.0);
    for (int64_t r = 0; r < Lr; ++r) {
      int64_t g = groupOf(offs, r);
      if (g < 0) continue;
      for (int64_t n = 0; n < Nc; ++n) {
        for (int64_t k = 0; k < Kc; ++k) want[size_t(r * Nc + n)] += x[size_t(r * Kc + k)] * w[size_t((g * Kc + k) * Nc + n)];
        for (int64_t p = 0; p < P; ++p) want2[size_t((g * P + p) * Nc + n)] += a2[size_t(p * Lr + r)] * c2[size_t(r * Nc + n)];
      }
    }
    std::string tag = " decoding, " + std::to_string(Lr) + " rows over 16 groups";
    expect("grouped_mm 2d x 3d" + tag, "aten::_grouped_mm", {T(f32, {Lr, Kc}, x), T(f32, {G, Kc, Nc}, w),
           T(s32, {G}, offs), N(), N()}, {{f32, {Lr, Nc}}}, {want});
    expect("grouped_mm 2d x 2d" + tag, "aten::_grouped_mm", {T(f32, {P, Lr}, a2), T(f32, {Lr, Nc}, c2),
           T(s32, {G}, offs), N(), N()}, {{f32, {G, P, Nc}}}, {want2});
    test("grouped_mm" + tag + ": first windows batched", [&] {
      Result r = run("aten::_grouped_mm", {T(f32, {Lr, Kc}, x), T(f32, {G, Kc, Nc}, w), T(s32, {G}, offs), N(), N()},
                     {{f32, {Lr, Nc}}}, /*execute=*/false);
      CHECK(r.text.find("lhs_batching_dimensions = [0]") != std::string::npos);
    });
  }
}

// float32 -> float8 with PyTorch's rounding, saturation and NaN rules (the bit patterns torch's CPU cast gives), and
// back (exact).
static void mm_f8_casts() {
  const std::vector<double> x = {0.0, -0.0, 1.0, 3.0, 448.0, 464.0, 470.0, 1000.0, kInf, -kInf, kNaN, 1e-3, -1.0 / 512,
                                 5e-6, 57344.0, 61440.0, 70000.0, 240.0, 250.0, 0.3};
  const std::vector<std::pair<DType, std::vector<double>>> want = {
      {DType::F8E4M3FN, {0, 128, 56, 68, 126, 126, 126, 126, 126, 254, 127, 1, 129, 0, 126, 126, 126, 119, 120, 42}},
      {DType::F8E5M2, {0, 128, 60, 66, 95, 95, 95, 100, 124, 252, 127, 20, 152, 0, 123, 124, 124, 92, 92, 53}},
      {DType::F8E4M3FNUZ, {0, 0, 64, 76, 128, 128, 128, 128, 128, 128, 128, 1, 130, 0, 128, 128, 128, 127, 128, 50}},
      {DType::F8E5M2FNUZ, {0, 0, 64, 70, 99, 99, 99, 104, 128, 128, 128, 24, 156, 1, 127, 128, 128, 96, 96, 57}},
      {DType::F8E8M0FNU, {0, 0, 127, 129, 136, 136, 136, 137, 255, 255, 255, 117, 118, 109, 143, 143, 143, 135, 135, 125}},
  };
  const int64_t n = int64_t(x.size());
  for (const auto& [t, bits] : want) {
    const std::string name = std::string("f32 -> ") + shlo::mlirName(t);
    expect(name, "aten::_to_copy", {T(DType::F32, {n}, x), Dt(t), N(), N(), N(), B(false), N()}, {{t, {n}}}, {bits}, 0,
           {t});
    // back to f32: 1.0 and 3.0 (rounded to 4.0 in e8m0) survive
    expect(name + " -> f32", "aten::_to_copy", {T(t, {2}, {bits[2], bits[3]}), Dt(DType::F32), N(), N(), N(), B(false), N()},
           {{DType::F32, {2}}}, {{1.0, t == DType::F8E8M0FNU ? 4.0 : 3.0}}, 0, {DType::F32});
  }
}

// Complex linear algebra (LU, Cholesky, triangular solves, det/slogdet, QR, cross) against PyTorch CPU's results for the
// same inputs. An input element x is x + (1 - x/2)i, so the values below are the real parts of PyTorch's complex
// results (integer and real results are checked whole); they depend on the inputs' imaginary parts and on every
// conjugation. Then complex64 and complex128 calls of each rule compile and run.
static void complexLinalgTests() {
  const DType c64 = DType::C64, f32 = DType::F32, s32 = DType::S32;
  // upper: the lower-left element (9) is not read
  expect("complex solve_triangular upper", "aten::linalg_solve_triangular",
         {T(c64, {2, 2}, {3, 7, 9, 4}), T(c64, {2, 1}, {1, 2}), B(true), B(true), B(false)}, {},
         {{-0.885532591, 0.470588235}}, 1e-5, {c64});
  expect("complex solve_triangular right lower unit", "aten::linalg_solve_triangular",
         {T(c64, {2, 2}, {3, 7, 5, 4}), T(c64, {1, 2}, {1, 2}), B(false), B(false), B(true)}, {}, {{-9, 2}}, 1e-5,
         {c64});
  // transpose=True is the plain transpose for complex matrices
  expect("complex triangular_solve transpose", "aten::triangular_solve",
         {T(c64, {2, 1}, {1, 2}), T(c64, {2, 2}, {3, 7, 9, 4}), B(true), B(true), B(false)}, {},
         {{0.297297297, -0.100953895}}, 1e-5, {c64, c64});
  // Cholesky reads one triangle (upper=True: the upper one) and the real part of the diagonal; U = L^H
  expect("complex cholesky_ex upper", "aten::linalg_cholesky_ex",
         {T(c64, {3, 3}, {2, 0.5, 1, 9, 2, 0.5, 9, 9, 2}), B(true), B(false)}, {},
         {{1.41421356, 0.353553391, 0.707106781, 0, 1.26243812, 0.0495073771, 0, 0, 0.863190616}, {0}}, 1e-5,
         {c64, s32});
  expect("complex cholesky_ex lower", "aten::linalg_cholesky_ex",
         {T(c64, {3, 3}, {2, 9, 9, 0.5, 2, 9, 1, 0.5, 2}), B(false), B(false)}, {},
         {{1.41421356, 0, 0, 0.353553391, 1.26243812, 0, 0.707106781, 0.0495073771, 0.863190616}, {0}}, 1e-5,
         {c64, s32});
  expect("complex cholesky upper", "aten::cholesky", {T(c64, {3, 3}, {2, 0.5, 1, 9, 2, 0.5, 9, 9, 2}), B(true)}, {},
         {{1.41421356, 0.353553391, 0.707106781, 0, 1.26243812, 0.0495073771, 0, 0, 0.863190616}}, 1e-5, {c64});
  expect("f32 cholesky_ex upper reads the upper triangle", "aten::linalg_cholesky_ex",
         {T(f32, {3, 3}, {4, 1, 0.5, 9, 3, 0.25, 9, 9, 2}), B(true), B(false)}, {},
         {{2, 0.5, 0.25, 0, 1.6583124, 0.0753778361, 0, 0, 1.38989862}, {0}}, 1e-5, {f32, s32});
  expect("complex cholesky_solve upper", "aten::_cholesky_solve_helper",
         {T(c64, {2, 2}, {1, 2, 3, 4}), T(c64, {2, 2}, {2, 0.5, 9, 3}), B(true)}, {},
         {{0.170608108, 0.39527027, 0.277027027, 0.378378378}}, 1e-5, {c64});
  // a Cholesky factor's diagonal is real (LAPACK's potri reads only its real part)
  expect("complex cholesky_inverse lower", "aten::cholesky_inverse", {T(c64, {2, 2}, {2, 9, 0.5, 2}), B(false)}, {},
         {{0.30078125, -0.0625, -0.0625, 0.25}}, 1e-5, {c64});
  // the pivot is LAPACK's: the largest |re| + |im| (-0.8 + 1.4i, 2.2), not the largest modulus (2 + 0i)
  expect("complex lu_factor_ex pivot", "aten::linalg_lu_factor_ex", {T(c64, {2, 2}, {2, 1, -0.8, 3}), B(true), B(false)},
         {}, {{-0.8, 3, -0.615384615, 3.38461538}, {2, 2}, {0}}, 1e-5, {c64, s32, s32});
  expect("complex det", "aten::_linalg_det", {T(c64, {2, 2}, {1, 2, 3, 4})}, {}, {{-1.5}}, 1e-5, {c64, c64, s32});
  // sign is the phase det / |det| = -0.6 + 0.8i; logabsdet real
  expect("complex slogdet", "aten::_linalg_slogdet", {T(c64, {2, 2}, {1, 2, 3, 4})},
         {{c64, {}}, {f32, {}}, {c64, {2, 2}}, {s32, {2}}}, {{-0.6}, {0.916290732}}, 1e-5, {c64, f32, c64, s32});
  expect("complex inv", "aten::linalg_inv_ex", {T(c64, {2, 2}, {1, 2, 3, 4}), B(false)}, {},
         {{-1.28, 0.48, 0.88, -0.08}, {0}}, 1e-5, {c64, s32});
  expect("complex lu_solve right adjoint", "aten::linalg_lu_solve",
         {T(c64, {2, 2}, {3, 1, 0.5, 2}), T(s32, {2}, {2, 2}), T(c64, {2, 2}, {1, 2, 3, 4}), B(false), B(true)},
         {{c64, {2, 2}}}, {{0.432432432, 0, 0.658783784, 0.875}}, 1e-5, {c64});
  expect("complex solve right", "aten::_linalg_solve_ex",
         {T(c64, {2, 2}, {1, 2, 3, 4}), T(c64, {2, 2}, {1, 0, 2, -1}), B(false), B(false)},
         {{c64, {2, 2}}, {c64, {2, 2}}, {s32, {2}}, {s32, {}}}, {{-1.6, 0.6, -4.7, 1.7}}, 1e-5, {c64});
  expect("complex solve", "aten::_linalg_solve_ex",
         {T(c64, {2, 2}, {1, 2, 3, 4}), T(c64, {2, 2}, {1, 0, 2, -1}), B(true), B(false)},
         {{c64, {2, 2}}, {c64, {2, 2}}, {s32, {2}}, {s32, {}}}, {{0.2, -0.4, 0.3, -0.1}}, 1e-5, {c64});
  expect("complex lu_unpack", "aten::lu_unpack",
         {T(c64, {3, 3}, {3, 1, 2, 0.5, 2, 1, -1, 0.25, 4}), T(s32, {3}, {3, 2, 3}), B(true), B(true)},
         {{c64, {3, 3}}, {c64, {3, 3}}, {c64, {3, 3}}},
         {{0, 0, 1, 0, 1, 0, 1, 0, 0}, {1, 0, 0, 0.5, 1, 0, -1, 0.25, 1}, {3, 1, 2, 0, 2, 1, 0, 0, 4}}, 1e-6,
         {c64, c64, c64});
  expect("complex cross", "aten::linalg_cross", {T(c64, {3}, {1, 2, 3}), T(c64, {3}, {4, -1, 0.5}), I(-1)}, {},
         {{3.25, 11.375, -9.75}}, 1e-5, {c64});

  // QR with LAPACK's Householder conventions (R's diagonal real, beta = -sign(Re alpha) * norm)
  expect("complex qr reduced", "aten::linalg_qr", {T(c64, {3, 2}, {1, 2, 3, 4, 5, -1}), Str("reduced")},
         {{c64, {3, 2}}, {c64, {2, 2}}},
         {{-0.162757692, -0.392896531, -0.488273075, -0.711688022, -0.813788459, 0.447426655},
          {-6.14410286, -1.17999327, 0, -4.7364306}}, 1e-5, {c64, c64});
  expect("complex qr complete", "aten::linalg_qr", {T(c64, {3, 2}, {1, 2, 3, 4, 5, -1}), Str("complete")},
         {{c64, {3, 3}}, {c64, {3, 2}}},
         {{-0.162757692, -0.392896531, -0.772894705, -0.488273075, -0.711688022, 0.41715685, -0.813788459,
           0.447426655, -0.0592896425},
          {-6.14410286, -1.17999327, 0, -4.7364306, 0, 0}}, 1e-5, {c64, c64});
  expect("f32 qr reduced", "aten::linalg_qr", {T(f32, {3, 2}, {1, 2, 3, 4, 5, -1}), Str("reduced")},
         {{f32, {3, 2}}, {f32, {2, 2}}},
         {{-0.169030905, -0.403187543, -0.507092595, -0.746888041, -0.845154345, 0.528770208},
          {-5.91607952, -1.5212779, 0, -4.32269764}}, 1e-5, {f32, f32});
  // Hermitian eigendecomposition (eigenvalues ascending, from the chosen triangle) and singular values (descending)
  const std::vector<double> sym3 = {4, 1, 0.5, 1, 3, 0.25, 0.5, 0.25, 2};
  expect("f32 eigh lower", "aten::_linalg_eigh", {T(f32, {3, 3}, sym3), Str("L"), B(true)}, {{f32, {3}}, {f32, {3, 3}}},
         {{1.88168021, 2.38676037, 4.73155942}}, 1e-5, {f32, f32});
  expect("f32 eigh upper reads the upper triangle", "aten::_linalg_eigh",
         {T(f32, {3, 3}, {4, 1, 0.5, 7, 3, 0.25, 9, -5, 2}), Str("U"), B(false)}, {{f32, {3}}, {f32, {0}}},
         {{1.88168021, 2.38676037, 4.73155942}}, 1e-5, {f32});
  expect("complex eigh lower", "aten::_linalg_eigh", {T(c64, {3, 3}, sym3), Str("L"), B(true)},
         {{f32, {3}}, {c64, {3, 3}}}, {{1.30702261, 2.52702075, 5.16595664}}, 1e-5, {f32, c64});
  expect("f32 svd", "aten::_linalg_svd", {T(f32, {3, 2}, {1, 2, 3, 4, 5, -1}), B(true), B(true), N()},
         {{f32, {3, 3}}, {f32, {2}}, {f32, {2, 2}}}, {{}, {6.27708167, 4.07409447}}, 1e-5, {f32, f32, f32});
  expect("complex svd", "aten::_linalg_svd", {T(c64, {3, 2}, {1, 2, 3, 4, 5, -1}), B(false), B(true), N()},
         {{c64, {3, 2}}, {f32, {2}}, {c64, {2, 2}}}, {{}, {6.4562319, 4.50744603}}, 1e-5, {c64, f32, c64});
  expect("complex logaddexp", "aten::logaddexp", {T(c64, {2}, {1, 2}), T(c64, {2}, {0.5, 3})}, {{c64, {2}}},
         {{1.46671739, 3.28859437}}, 1e-5, {c64});
  expect("complex householder_product", "aten::linalg_householder_product",
         {T(c64, {3, 2}, {1, 2, 3, 4, 5, -1}), T(c64, {2}, {0.5, 1.5})}, {{c64, {3, 2}}},
         {{0.5, -11.640625, -1.875, -37.5, -3.625, -62.5625}}, 1e-5, {c64});
  // ormqr: transpose is the conjugate transpose for complex Q
  expect("complex ormqr left adjoint", "aten::ormqr",
         {T(c64, {3, 2}, {1, 2, 3, 4, 5, -1}), T(c64, {2}, {0.5, 1.5}), T(c64, {3, 2}, {1, 0, 2, -1, 3, 1}), B(true),
          B(true)},
         {{c64, {3, 2}}}, {{-13, -7, -273.746094, -42.2265625, 187.714844, 118.039062}}, 1e-5, {c64});
  expect("complex ormqr right", "aten::ormqr",
         {T(c64, {3, 2}, {1, 2, 3, 4, 5, -1}), T(c64, {2}, {0.5, 1.5}), T(c64, {2, 3}, {1, 0, 2, -1, 3, 1}), B(false),
          B(false)},
         {{c64, {2, 3}}}, {{-4.375, -127.789062, 59.8320312, -8.125, -157.976562, 97.4804688}}, 1e-5, {c64});
  expect("f32 ormqr left", "aten::ormqr",
         {T(f32, {3, 2}, {1, 2, 3, 4, 5, -1}), T(f32, {2}, {0.5, 1.5}), T(f32, {3, 2}, {1, 0, 2, -1, 3, 1}), B(true),
          B(false)},
         {{f32, {3, 2}}}, {{-8.5, 2, -25, 8, -46, 8}}, 1e-5, {f32});

  const DType kComplex[] = {DType::C64, DType::C128};
  auto sq = [](DType t) { return T(t, {2, 3, 3}, {4, 1, 0.5, 1, 3, 0.25, 0.5, 0.25, 2, 2, 0, 1, 0, 3, 0, 1, 0, 4}); };
  sweep("aten::linalg_solve_triangular", kComplex,
        [&](DType t) { return std::vector<In>{sq(t), T(t, {2, 3, 2}), B(false), B(true), B(false)}; });
  sweep("aten::linalg_cholesky_ex", kComplex, [&](DType t) { return std::vector<In>{sq(t), B(true), B(false)}; });
  sweep("aten::linalg_lu_factor_ex", kComplex, [&](DType t) { return std::vector<In>{sq(t), B(true), B(false)}; });
  sweep("aten::linalg_qr", kComplex, [&](DType t) { return std::vector<In>{sq(t), Str("complete")}; },
        [](DType t) { return std::vector<TensorType>{{t, {2, 3, 3}}, {t, {2, 3, 3}}}; });
  sweep("aten::linalg_inv_ex", kComplex, [&](DType t) { return std::vector<In>{sq(t), B(false)}; });
  sweep("aten::_linalg_slogdet", kComplex, [&](DType t) { return std::vector<In>{sq(t)}; }, [](DType t) {
    return std::vector<TensorType>{{t, {2}}, {t == DType::C128 ? DType::F64 : DType::F32, {2}}, {t, {2, 3, 3}}, {DType::S32, {2, 3}}};
  });
}

static void numericTests() {
  const DType f32 = DType::F32, s64 = DType::S64;
  // complex numbers: an input element x is x + (1 - x/2)i; complex results are checked by their real parts
  const DType c64 = DType::C64;
  expect("complex abs", "aten::abs", {T(c64, {2}, {3, 0})}, {}, {{std::sqrt(9.25), 1}}, 1e-6, {f32});
  expect("complex angle", "aten::angle", {T(c64, {2}, {1, 4})}, {}, {{std::atan2(0.5, 1.0), std::atan2(-1.0, 4.0)}},
         1e-6, {f32});
  expect("complex mul", "aten::mul.Tensor", {T(c64, {1}, {1}), T(c64, {1}, {4})}, {}, {{4 + 0.5}}, 1e-6, {c64});
  expect("view_as_real", "aten::view_as_real", {T(c64, {2}, {3, 2})}, {}, {{3, -0.5, 2, 0}}, 0, {f32});
  expect("fft r2c", "aten::_fft_r2c", {T(f32, {4}, {1, 2, 3, 4}), L({0}), I(0), B(true)}, {}, {{10, -2, -2}}, 1e-5,
         {c64});
  expect("fft c2c forward", "aten::_fft_c2c", {T(c64, {4}, {1, 2, 3, 4}), L({0}), I(0), B(true)}, {},
         {{10, -1, -2, -3}}, 1e-5, {c64});
  expect("fft c2c inverse by n", "aten::_fft_c2c", {T(c64, {4}, {1, 2, 3, 4}), L({0}), I(2), B(false)}, {},
         {{2.5, -0.75, -0.5, -0.25}}, 1e-5, {c64});
  expect("fft c2r", "aten::_fft_c2r", {T(c64, {3}, {10, -2, -2}), L({0}), I(2), I(4)}, {}, {{1, 2, 3, 4}}, 1e-5,
         {f32});
  // type promotion with wrapped numbers: int tensor + 2.5 -> float32; int8 + int64 wrapped stays int8
  expect("add int + wrapped float", "aten::add.Tensor", {T(DType::S32, {3}, {1, 2, 3}), W(2.5), S(1, K::Int)}, {},
         {{3.5, 4.5, 5.5}}, 1e-6, {f32});
  expect("add int8 + wrapped int", "aten::add.Tensor", {T(DType::S8, {2}, {1, 100}), W(300, K::Int), S(1, K::Int)}, {},
         {{45, -112}}, 0, {DType::S8});
  expect("add alpha", "aten::add.Tensor", {T(f32, {2, 2}, {1, 2, 3, 4}), T(f32, {2}, {10, 20}), S(-2, K::Int)}, {},
         {{-19, -38, -17, -36}});
  expect("add bool", "aten::add.Tensor", {T(DType::Pred, {3}, {0, 1, 0}), T(DType::Pred, {3}, {0, 0, 1}), S(1, K::Int)},
         {}, {{0, 1, 1}}, 0, {DType::Pred});
  expect("add 0-d f64 tensor to int tensor -> f64", "aten::add.Tensor",
         {T(DType::S32, {2}, {1, 2}), T(DType::F64, {}, {0.5}), S(1, K::Int)}, {}, {{1.5, 2.5}}, 0, {DType::F64});
  expect("add f16 + 0-d f32 -> f16", "aten::add.Tensor", {T(DType::F16, {2}, {1, 2}), T(f32, {}, {0.5}), S(1, K::Int)},
         {}, {{1.5, 2.5}}, 0, {DType::F16});
  expect("div int true", "aten::div.Tensor", {T(s64, {3}, {7, -7, 1}), T(s64, {3}, {2, 2, 0})}, {},
         {{3.5, -3.5, kInf}}, 1e-6, {f32});
  expect("div trunc int", "aten::div.Tensor_mode", {T(s64, {4}, {7, -7, 7, -7}), T(s64, {4}, {2, 2, -2, -2}), Str("trunc")},
         {}, {{3, -3, -3, 3}}, 0, {s64});
  expect("div floor int", "aten::div.Tensor_mode", {T(s64, {4}, {7, -7, 7, -7}), T(s64, {4}, {2, 2, -2, -2}), Str("floor")},
         {}, {{3, -4, -4, 3}}, 0, {s64});
  expect("div floor float", "aten::div.Tensor_mode",
         {T(f32, {5}, {7, -7, 7, -7, 1}), T(f32, {5}, {2, 2, -2, -2, 0}), Str("floor")}, {}, {{3, -4, -4, 3, kInf}});
  expect("div trunc float", "aten::div.Tensor_mode", {T(f32, {2}, {7.5, -7.5}), T(f32, {2}, {2, 2}), Str("trunc")}, {},
         {{3, -3}});
  expect("remainder", "aten::remainder.Tensor", {T(s64, {4}, {7, -7, 7, -7}), T(s64, {4}, {3, 3, -3, -3})}, {},
         {{1, 2, -2, -1}}, 0);
  expect("remainder float", "aten::remainder.Tensor", {T(f32, {2}, {-7.5, 7.5}), T(f32, {2}, {2, -2})}, {},
         {{0.5, -0.5}});
  expect("fmod", "aten::fmod.Tensor", {T(s64, {2}, {-7, 7}), T(s64, {2}, {3, -3})}, {}, {{-1, 1}}, 0);
  expect("pow int negative exponents", "aten::pow.Tensor_Tensor",
         {T(s64, {5}, {1, -1, 2, -1, 3}), T(s64, {5}, {-3, -3, -3, -2, 3})}, {}, {{1, -1, 0, 1, 27}}, 0, {s64});
  expect("pow float scalar", "aten::pow.Tensor_Scalar", {T(f32, {3}, {4, 9, 2}), S(0.5)}, {}, {{2, 3, std::sqrt(2.0)}});
  expect("pow int tensor ^ float scalar -> float", "aten::pow.Tensor_Scalar", {T(s64, {2}, {4, 9}), S(0.5)}, {}, {{2, 3}},
         1e-6, {f32});
  expect("pow.Scalar", "aten::pow.Scalar", {S(2, K::Int), T(f32, {3}, {0, 1, 3})}, {}, {{1, 2, 8}});
  expect("maximum NaN", "aten::maximum", {T(f32, {3}, {1, kNaN, 3}), T(f32, {3}, {2, 0, kNaN})}, {}, {{2, kNaN, kNaN}});
  expect("minimum NaN", "aten::minimum", {T(f32, {3}, {1, kNaN, 3}), T(f32, {3}, {2, 0, kNaN})}, {}, {{1, kNaN, kNaN}});
  expect("fmax", "aten::fmax", {T(f32, {3}, {1, kNaN, 3}), T(f32, {3}, {2, 0, kNaN})}, {}, {{2, 0, 3}});
  expect("clamp NaN", "aten::clamp", {T(f32, {4}, {-3, 0.5, 3, kNaN}), S(-1, K::Int), S(1, K::Int)}, {},
         {{-1, 0.5, 1, kNaN}});
  expect("clamp int with float bound -> float", "aten::clamp", {T(s64, {3}, {-3, 0, 3}), N(), S(1.5)}, {},
         {{-3, 0, 1.5}}, 1e-6, {f32});
  expect("lt uint8 vs -1 (wraps to 255)", "aten::lt.Scalar", {T(DType::U8, {2}, {1, 255}), S(-1, K::Int)}, {},
         {{1, 0}}, 0, {DType::Pred});
  expect("lt int vs 2.5", "aten::lt.Scalar", {T(s64, {3}, {2, 3, -1}), S(2.5)}, {}, {{1, 0, 1}}, 0);
  expect("ne NaN", "aten::ne.Tensor", {T(f32, {2}, {kNaN, 1}), T(f32, {2}, {kNaN, 1})}, {}, {{1, 0}}, 0);
  expect("where broadcast", "aten::where.self",
         {T(DType::Pred, {2, 2}, {1, 0, 0, 1}), T(f32, {2, 2}, {1, 2, 3, 4}), W(0)}, {}, {{1, 0, 0, 4}}, 0, {f32});
  expect("masked_fill", "aten::masked_fill.Scalar", {T(f32, {2, 2}, {1, 2, 3, 4}), T(DType::Pred, {2}, {1, 0}), S(-1, K::Int)},
         {}, {{-1, 2, -1, 4}});
  expect("relu", "aten::relu", {T(f32, {4}, {-1, 0, 2, kNaN})}, {}, {{0, 0, 2, kNaN}});
  expect("relu int", "aten::relu", {T(s64, {3}, {-1, 0, 2})}, {}, {{0, 0, 2}}, 0, {s64});
  expect("sign", "aten::sign", {T(f32, {4}, {-2, 0, 3, kNaN})}, {}, {{-1, 0, 1, 0}});
  expect("round half even", "aten::round", {T(f32, {4}, {0.5, 1.5, 2.5, -0.5})}, {}, {{0, 2, 2, -0.0}});
  expect("trunc", "aten::trunc", {T(f32, {3}, {-1.7, 1.7, 0})}, {}, {{-1, 1, 0}});
  expect("exp of int -> float", "aten::exp", {T(s64, {2}, {0, 1})}, {}, {{1, std::exp(1.0)}}, 1e-6, {f32});
  expect("sigmoid", "aten::sigmoid", {T(f32, {3}, {0, 100, -100})}, {}, {{0.5, 1, 0}});
  auto gelu = [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); };
  auto gelu_t = [](double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  };
  expect("gelu", "aten::gelu", {T(f32, {3}, {-1, 0.5, 2}), Str("none")}, {}, {{gelu(-1), gelu(0.5), gelu(2)}});
  expect("gelu tanh", "aten::gelu", {T(f32, {3}, {-1, 0.5, 2}), Str("tanh")}, {}, {{gelu_t(-1), gelu_t(0.5), gelu_t(2)}});
  {
    auto dg = [&](double x) { return (gelu(x + 1e-4) - gelu(x - 1e-4)) / 2e-4; };
    auto dgt = [&](double x) { return (gelu_t(x + 1e-4) - gelu_t(x - 1e-4)) / 2e-4; };
    expect("gelu_backward", "aten::gelu_backward", {T(DType::F64, {3}, {2, 2, 2}), T(DType::F64, {3}, {-1, 0.5, 2}), Str("none")},
           {}, {{2 * dg(-1), 2 * dg(0.5), 2 * dg(2)}}, 1e-6);
    expect("gelu_backward tanh", "aten::gelu_backward",
           {T(DType::F64, {3}, {2, 2, 2}), T(DType::F64, {3}, {-1, 0.5, 2}), Str("tanh")}, {},
           {{2 * dgt(-1), 2 * dgt(0.5), 2 * dgt(2)}}, 1e-6);
    auto silu = [](double x) { return x / (1 + std::exp(-x)); };
    auto ds = [&](double x) { return (silu(x + 1e-4) - silu(x - 1e-4)) / 2e-4; };
    expect("silu_backward", "aten::silu_backward", {T(DType::F64, {2}, {1, 1}), T(DType::F64, {2}, {-1, 2})}, {},
           {{ds(-1), ds(2)}}, 1e-6);
  }
  expect("threshold_backward", "aten::threshold_backward",
         {T(f32, {3}, {5, 6, 7}), T(f32, {3}, {-1, 0, 1}), S(0, K::Int)}, {}, {{0, 0, 7}});
  expect("tanh_backward", "aten::tanh_backward", {T(f32, {2}, {2, 2}), T(f32, {2}, {0.5, 0})}, {}, {{1.5, 2}});
  expect("lerp", "aten::lerp.Scalar", {T(f32, {2}, {1, 1}), T(f32, {2}, {3, 5}), S(0.75)}, {}, {{2.5, 4}});
  expect("addcdiv", "aten::addcdiv", {T(f32, {2}, {1, 1}), T(f32, {2}, {1, 2}), T(f32, {2}, {4, 4}), S(2, K::Int)}, {},
         {{1.5, 2}});
  expect("bf16 add rounds once", "aten::mul.Tensor", {T(DType::BF16, {1}, {3}), T(DType::BF16, {1}, {1.0078125})}, {},
         {{3.03125}}, 0, {DType::BF16});

  // reductions
  expect("sum dims keepdim", "aten::sum.dim_IntList", {T(f32, {2, 3}, {1, 2, 3, 4, 5, 6}), L({-1}), B(true), N()},
         {{f32, {2, 1}}}, {{6, 15}});
  expect("sum all of bool -> int64", "aten::sum.dim_IntList", {T(DType::Pred, {3}, {1, 0, 1}), N(), B(false), N()}, {},
         {{2}}, 0, {s64});
  expect("sum empty dim list = all", "aten::sum.dim_IntList", {T(f32, {2, 2}, {1, 2, 3, 4}), L({}), B(false), N()}, {},
         {{10}});
  expect("sum of empty", "aten::sum", {T(f32, {0, 3}), N()}, {}, {{0}});
  expect("mean", "aten::mean.dim", {T(f32, {2, 3}, {1, 2, 3, 4, 5, 6}), L({0}), B(false), N()}, {}, {{2.5, 3.5, 4.5}});
  expect("mean bf16 accumulates in f32", "aten::mean",
         {T(DType::BF16, {4}, {256, 1, 1, 1}), N()}, {}, {{65}}, 0, {DType::BF16});  // bf16 sums would give 64
  expect("amax NaN", "aten::amax", {T(f32, {2, 2}, {1, kNaN, 3, 4}), L({1}), B(false)}, {}, {{kNaN, 4}});
  expect("max full", "aten::max", {T(s64, {3}, {1, 7, 3})}, {}, {{7}});
  expect("argmax first max", "aten::argmax", {T(f32, {2, 3}, {1, 5, 5, 7, 0, 7}), I(1), B(false)}, {}, {{1, 0}}, 0,
         {s64});
  expect("argmax flat", "aten::argmax", {T(f32, {2, 3}, {1, 5, 5, 7, 0, 7}), N(), B(false)}, {}, {{3}}, 0);
  expect("argmin NaN", "aten::argmin", {T(f32, {3}, {1, kNaN, 0}), I(0), B(false)}, {}, {{1}}, 0);
  expect("max.dim", "aten::max.dim", {T(f32, {2, 2}, {1, 4, 3, 2}), I(1), B(true)}, {}, {{4, 3}, {1, 0}});
  expect("prod int -> int64", "aten::prod", {T(DType::S32, {3}, {2, 3, 4}), N()}, {}, {{24}}, 0, {s64});
  expect("any", "aten::any.dim", {T(f32, {2, 2}, {0, 0, 0, 2}), I(1), B(false)}, {}, {{0, 1}}, 0, {DType::Pred});
  expect("all", "aten::all", {T(s64, {3}, {1, 2, 0})}, {}, {{0}}, 0);
  expect("var unbiased", "aten::var.correction", {T(f32, {4}, {1, 2, 3, 4}), N(), N(), B(false)}, {}, {{5.0 / 3}});
  expect("var correction 0", "aten::var.correction", {T(f32, {4}, {1, 2, 3, 4}), L({0}), S(0, K::Int), B(false)}, {},
         {{1.25}});
  expect("std_mean", "aten::std_mean.correction", {T(f32, {2, 2}, {1, 3, 2, 2}), L({1}), N(), B(false)}, {},
         {{std::sqrt(2.0), 0}, {2, 2}});
  expect("vector norm 2", "aten::linalg_vector_norm", {T(f32, {2}, {3, -4}), SS(2), N(), B(false), N()}, {}, {{5}});
  expect("vector norm inf", "aten::linalg_vector_norm", {T(f32, {2}, {3, -4}), SS(INFINITY), N(), B(false), N()}, {},
         {{4}});
  expect("vector norm 3", "aten::linalg_vector_norm", {T(f32, {2}, {1, 2}), SS(3), N(), B(false), N()}, {},
         {{std::cbrt(9.0)}});
  expect("logsumexp", "aten::logsumexp", {T(f32, {2, 2}, {0, 0, -kInf, -kInf}), L({1}), B(false)}, {},
         {{std::log(2.0), -kInf}});
  expect("cumsum int -> int64", "aten::cumsum", {T(DType::S32, {2, 3}, {1, 2, 3, 4, 5, 6}), I(1), N()}, {},
         {{1, 3, 6, 4, 9, 15}}, 0, {s64});
  expect("cumprod", "aten::cumprod", {T(f32, {4}, {1, 2, 3, 4}), I(0), N()}, {}, {{1, 2, 6, 24}});

  // linalg
  expect("mm", "aten::mm", {T(f32, {2, 2}, {1, 2, 3, 4}), T(f32, {2, 2}, {5, 6, 7, 8})}, {}, {{19, 22, 43, 50}});
  expect("mm int", "aten::mm", {T(s64, {1, 2}, {1, 2}), T(s64, {2, 1}, {3, 4})}, {}, {{11}}, 0, {s64});
  expect("addmm beta 0 ignores NaN", "aten::addmm",
         {T(f32, {2}, {kNaN, kNaN}), T(f32, {1, 2}, {1, 2}), T(f32, {2, 2}, {1, 0, 0, 1}), S(0, K::Int), S(2, K::Int)},
         {}, {{2, 4}});
  expect("addmm bias", "aten::addmm",
         {T(f32, {2}, {10, 20}), T(f32, {1, 2}, {1, 2}), T(f32, {2, 2}, {1, 0, 0, 1}), S(0.5), S(1, K::Int)}, {},
         {{6, 12}});
  expect("bmm", "aten::bmm", {T(f32, {2, 1, 2}, {1, 2, 3, 4}), T(f32, {2, 2, 1}, {1, 1, 2, 2})}, {}, {{3, 14}});
  expect("dot", "aten::dot", {T(f32, {3}, {1, 2, 3}), T(f32, {3}, {4, 5, 6})}, {}, {{32}});
  expect("_int_mm", "aten::_int_mm", {T(DType::S8, {1, 3}, {100, 100, -100}), T(DType::S8, {3, 1}, {127, 127, 1})},
         {{DType::S32, {1, 1}}}, {{25300}}, 0, {DType::S32});
  expect("mm.dtype bf16 -> f32 keeps the f32 sum", "aten::mm.dtype",
         {T(DType::BF16, {1, 3}, {256, 1, 1}), T(DType::BF16, {3, 1}, {1, 1, 1}), Dt(f32)}, {{f32, {1, 1}}}, {{258}}, 0,
         {f32});
  // 1.0, 2.0, -1.0, 0.5, 0, 4.0 (e4m3fn bits) x 1, 2, 1, 1, 1, 0.5; scales 0.5 and 2 cancel
  expect("_scaled_mm tensor-wise", "aten::_scaled_mm",
         {T(DType::F8E4M3FN, {2, 3}, {0x38, 0x40, 0xb8, 0x30, 0x00, 0x48}),
          T(DType::F8E4M3FN, {3, 2}, {0x38, 0x38, 0x40, 0x38, 0x38, 0x30}), T(f32, {}, {0.5}), T(f32, {}, {2.0}), N(), N(),
          Dt(f32), B(false)},
         {{f32, {2, 2}}}, {{4, 2.5, 4.5, 2.5}}, 0, {f32});
  mm_f8_casts();
  expect("mm bf16 accumulates in f32", "aten::mm",
         {T(DType::BF16, {1, 3}, {256, 1, 1}), T(DType::BF16, {3, 1}, {1, 1, 1})}, {}, {{258}}, 0, {DType::BF16});

  // factory
  expect("fill", "aten::fill.Scalar", {T(s64, {3}), S(7, K::Int)}, {}, {{7, 7, 7}}, 0, {s64});
  expect("to_copy float->int truncates", "aten::_to_copy", {T(f32, {3}, {-1.7, 1.7, 2}), Dt(DType::S32)}, {},
         {{-1, 1, 2}}, 0, {DType::S32});
  expect("to_copy float->bool", "aten::_to_copy", {T(f32, {3}, {0, 0.1, kNaN}), Dt(DType::Pred)}, {}, {{0, 1, 1}}, 0);
  expect("arange", "aten::arange.start_out",
         {named(S(1.0), "start"), named(S(2, K::Int), "end"), named(S(0.25), "step"), named(T(f32, {4}), "out")},
         {{f32, {4}}}, {{1, 1.25, 1.5, 1.75}});
  expect("arange int", "aten::arange.start_out",
         {named(S(-3, K::Int), "start"), named(S(3, K::Int), "end"), named(S(2, K::Int), "step"), named(T(s64, {3}), "out")},
         {{s64, {3}}}, {{-3, -1, 1}}, 0);
  test("uniform_ range and spread", [&] {
    Result r = run("aten::uniform_", {T(f32, {1000}), DS(2), DS(5), N()});
    double lo = 1e9, hi = -1e9, mean = 0;
    for (double v : r.vals[0]) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      mean += v / 1000;
    }
    CHECK(lo >= 2 && hi < 5 && hi > 4.9 && lo < 2.1);
    CHECK(std::fabs(mean - 3.5) < 0.15);
  });
  test("normal_ moments", [&] {
    Result r = run("aten::normal_", {T(f32, {4000}), D(1), DS(2), N()});
    double mean = 0, var = 0;
    for (double v : r.vals[0]) mean += v / 4000;
    for (double v : r.vals[0]) var += (v - mean) * (v - mean) / 4000;
    CHECK(std::fabs(mean - 1) < 0.15);
    CHECK(std::fabs(std::sqrt(var) - 2) < 0.15);
  });
  test("bernoulli_ rate", [&] {
    Result r = run("aten::bernoulli_.float", {T(f32, {4000}), D(0.25), N()});
    double mean = 0;
    for (double v : r.vals[0]) {
      CHECK(v == 0 || v == 1);
      mean += v / 4000;
    }
    CHECK(std::fabs(mean - 0.25) < 0.05);
  });
  test("random_ range", [&] {
    Result r = run("aten::random_.from", {T(s64, {1000}), I(-3), I(4), N()});
    std::set<double> seen(r.vals[0].begin(), r.vals[0].end());
    CHECK(*seen.begin() == -3 && *seen.rbegin() == 3 && seen.size() == 7);
  });

  // nn
  expect("softmax", "aten::_softmax", {T(f32, {2, 2}, {0, std::log(3.0), 1000, 1000}), I(1), B(false)}, {},
         {{0.25, 0.75, 0.5, 0.5}});
  expect("softmax half_to_float", "aten::_softmax", {T(DType::BF16, {2}, {0, 0}), I(0), B(true)}, {}, {{0.5, 0.5}}, 0,
         {f32});
  expect("log_softmax", "aten::_log_softmax", {T(f32, {2}, {0, std::log(3.0)}), I(0), B(false)}, {},
         {{std::log(0.25), std::log(0.75)}});
  expect("softmax_backward", "aten::_softmax_backward_data",
         {T(f32, {2}, {1, 0}), T(f32, {2}, {0.25, 0.75}), I(0), Dt(f32)}, {}, {{0.25 * 0.75, -0.25 * 0.75}});
  expect("log_softmax_backward", "aten::_log_softmax_backward_data",
         {T(f32, {2}, {1, 0}), T(f32, {2}, {std::log(0.25), std::log(0.75)}), I(0), Dt(f32)}, {}, {{0.75, -0.75}});
  expect("layer_norm", "aten::native_layer_norm",
         {T(f32, {1, 4}, {1, 2, 3, 4}), L({4}), T(f32, {4}, {1, 1, 2, 2}), T(f32, {4}, {0, 0, 0, 1}), D(0)}, {},
         {{-1.5 / std::sqrt(1.25), -0.5 / std::sqrt(1.25), 1.0 / std::sqrt(1.25), 3.0 / std::sqrt(1.25) + 1},
          {2.5},
          {1 / std::sqrt(1.25)}});
  {
    // layer norm backward vs finite differences of sum(g * layer_norm(x)) in f64
    std::vector<double> x = {0.3, -1.2, 2.0, 0.7}, g = {1.0, -2.0, 0.5, 3.0}, w = {0.5, 1.5, -1.0, 2.0};
    auto f = [&](const std::vector<double>& xs) {
      double m = 0, v = 0;
      for (double e : xs) m += e / 4;
      for (double e : xs) v += (e - m) * (e - m) / 4;
      double s = 0;
      for (int k = 0; k < 4; ++k) s += g[k] * w[k] * (xs[k] - m) / std::sqrt(v + 1e-5);
      return s;
    };
    std::vector<double> dx(4);
    for (int k = 0; k < 4; ++k) {
      auto xp = x, xm = x;
      xp[k] += 1e-6;
      xm[k] -= 1e-6;
      dx[k] = (f(xp) - f(xm)) / 2e-6;
    }
    double m = 0, v = 0;
    for (double e : x) m += e / 4;
    for (double e : x) v += (e - m) * (e - m) / 4;
    double rstd = 1 / std::sqrt(v + 1e-5);
    std::vector<double> dw(4), db = g;
    for (int k = 0; k < 4; ++k) dw[k] = g[k] * (x[k] - m) * rstd;
    expect("layer_norm_backward", "aten::native_layer_norm_backward",
           {T(DType::F64, {1, 4}, g), T(DType::F64, {1, 4}, x), L({4}), T(DType::F64, {1, 1}, {m}),
            T(DType::F64, {1, 1}, {rstd}), T(DType::F64, {4}, w), T(DType::F64, {4}), BL({true, true, true})},
           {}, {dx, dw, db}, 1e-5);
  }
  expect("embedding", "aten::embedding",
         {T(f32, {3, 2}, {1, 2, 3, 4, 5, 6}), T(s64, {2, 2}, {2, 0, 1, 2}), I(-1), B(false), B(false)}, {},
         {{5, 6, 1, 2, 3, 4, 5, 6}});
  expect("embedding_dense_backward", "aten::embedding_dense_backward",
         {T(f32, {3, 2}, {1, 1, 2, 2, 3, 3}), T(s64, {3}, {2, 0, 2}), I(4), I(0), B(false)}, {},
         {{0, 0, 0, 0, 4, 4, 0, 0}});
  expect("embedding_dense_backward scale", "aten::embedding_dense_backward",
         {T(f32, {3, 2}, {1, 1, 2, 2, 3, 3}), T(s64, {3}, {2, 0, 2}), I(4), I(-1), B(true)}, {},
         {{2, 2, 0, 0, 2, 2, 0, 0}});
  expect("index_select", "aten::index_select", {T(f32, {2, 3}, {1, 2, 3, 4, 5, 6}), I(1), T(s64, {2}, {2, 0})}, {},
         {{3, 1, 6, 4}});
  // nll_loss: self = log-probs [3, 2], targets {1, -100, 0}, weight {1, 2}
  expect("nll_loss mean weighted ignore", "aten::nll_loss_forward",
         {T(f32, {3, 2}, {-1, -2, -3, -4, -5, -6}), T(s64, {3}, {1, -100, 0}), T(f32, {2}, {1, 2}), I(1), I(-100)}, {},
         {{(2 * 2 + 5 * 1) / 3.0}, {3}});
  expect("nll_loss none", "aten::nll_loss_forward",
         {T(f32, {3, 2}, {-1, -2, -3, -4, -5, -6}), T(s64, {3}, {1, -100, 0}), N(), I(0), I(-100)}, {}, {{2, 0, 5}});
  expect("nll_loss sum 1-d", "aten::nll_loss_forward",
         {T(f32, {2}, {-1, -2}), T(s64, {}, {1}), N(), I(2), I(-100)}, {}, {{2}, {1}});
  expect("nll_loss_backward mean", "aten::nll_loss_backward",
         {T(f32, {}, {1}), T(f32, {3, 2}), T(s64, {3}, {1, -100, 0}), T(f32, {2}, {1, 2}), I(1), I(-100), T(f32, {}, {3})},
         {}, {{0, -2.0 / 3, 0, 0, -1.0 / 3, 0}});
  expect("mse_loss mean", "aten::mse_loss", {T(f32, {2}, {1, 3}), T(f32, {2}, {0, 0}), I(1)}, {}, {{5}});
  expect("mse_loss_backward", "aten::mse_loss_backward",
         {T(f32, {}, {1}), T(f32, {2}, {1, 3}), T(f32, {2}, {0, 0}), I(1)}, {}, {{1, 3}});
  test("dropout keeps about 1-p and scales", [&] {
    Result r = run("aten::native_dropout", {T(f32, {2000}, std::vector<double>(2000, 1.0)), D(0.25), B(true)});
    double kept = 0;
    for (size_t k = 0; k < 2000; ++k) {
      CHECK(r.vals[0][k] == 0 || std::fabs(r.vals[0][k] - 4.0 / 3) < 1e-6);
      CHECK((r.vals[0][k] != 0) == (r.vals[1][k] != 0));
      kept += r.vals[1][k] / 2000;
    }
    CHECK(std::fabs(kept - 0.75) < 0.05);
  });

  // shape
  expect("cat skips legacy empty", "aten::cat",
         {TL({T(f32, {1, 2}, {1, 2}), T(f32, {0}), T(f32, {1, 2}, {3, 4})}), I(-1)}, {}, {{1, 2, 3, 4}});
  expect("cat promotes", "aten::cat", {TL({T(s64, {1}, {1}), T(f32, {1}, {2.5})}), I(0)}, {}, {{1, 2.5}}, 0, {f32});
  expect("stack", "aten::stack", {TL({T(f32, {2}, {1, 2}), T(f32, {2}, {3, 4})}), I(1)}, {}, {{1, 3, 2, 4}});
  expect("constant_pad_nd", "aten::constant_pad_nd", {T(f32, {1, 2}, {1, 2}), L({1, -1}), S(9, K::Int)}, {}, {{9, 1}});
  expect("gather", "aten::gather", {T(f32, {2, 2}, {1, 2, 3, 4}), I(1), T(s64, {2, 2}, {0, 0, 1, 0}), B(false)}, {},
         {{1, 1, 4, 3}});
  expect("scatter.src", "aten::scatter.src",
         {T(f32, {2, 3}), I(1), T(s64, {1, 2}, {2, 0}), T(f32, {2, 2}, {7, 8, 9, 9})}, {},
         {{8, pattern(f32, 6)[1], 7, pattern(f32, 6)[3], pattern(f32, 6)[4], pattern(f32, 6)[5]}});
  // weight norm: rows (3, 4) and (0, 5) have norms 5 and 5; g = (10, 1)
  expect("weight_norm", "aten::_weight_norm_interface", {T(f32, {2, 2}, {3, 4, 0, 5}), T(f32, {2, 1}, {10, 1}), I(0)},
         {{DType::F32, {2, 2}}, {DType::F32, {2, 1}}}, {{6, 8, 0, 1}, {5, 5}});
  // col2im / im2col (F.fold / F.unfold), 1-d patches of width 2; padding 1 on the right of the width
  expect("col2im overlap-add", "aten::col2im", {T(f32, {1, 2, 3}, {1, 2, 3, 4, 5, 6}), L({1, 4}), L({1, 2}), L({1, 1}),
         L({0, 0}), L({1, 1})}, {{DType::F32, {1, 1, 1, 4}}}, {{1, 6, 8, 6}});
  expect("col2im padding dropped", "aten::col2im", {T(f32, {1, 2, 3}, {1, 2, 3, 4, 5, 6}), L({1, 2}), L({1, 2}),
         L({1, 1}), L({0, 1}), L({1, 1})}, {{DType::F32, {1, 1, 1, 2}}}, {{6, 8}});
  expect("im2col padding reads zeros", "aten::im2col", {T(f32, {1, 1, 1, 3}, {1, 2, 3}), L({1, 2}), L({1, 1}),
         L({0, 1}), L({1, 1})}, {{DType::F32, {1, 2, 4}}}, {{0, 1, 2, 3, 1, 2, 3, 0}});
  expect("scatter_add duplicates", "aten::scatter_add",
         {T(f32, {3}, {0, 0, 0}), I(0), T(s64, {3}, {1, 1, 2}), T(f32, {3}, {1, 2, 3})}, {}, {{0, 3, 3}});
  expect("scatter_reduce amax exclude self", "aten::scatter_reduce.two",
         {T(f32, {3}, {10, 10, 10}), I(0), T(s64, {3}, {1, 1, 2}), T(f32, {3}, {1, 2, 3}), Str("amax"), B(false)}, {},
         {{10, 2, 3}});
  expect("scatter_reduce mean", "aten::scatter_reduce.two",
         {T(f32, {3}, {3, 3, 3}), I(0), T(s64, {3}, {1, 1, 2}), T(f32, {3}, {0, 3, 5}), Str("mean"), B(true)}, {},
         {{3, 2, 4}});
  expect("index_add", "aten::index_add",
         {T(f32, {3}, {0, 0, 0}), I(0), T(s64, {2}, {2, 2}), T(f32, {2}, {1, 2}), S(2, K::Int)}, {}, {{0, 0, 6}});
  expect("index.Tensor adjacent", "aten::index.Tensor",
         {T(f32, {2, 3}, {1, 2, 3, 4, 5, 6}), TL({N(), T(s64, {2}, {2, -3})})}, {{f32, {2, 2}}}, {{3, 1, 6, 4}});
  expect("index.Tensor two", "aten::index.Tensor",
         {T(f32, {2, 3}, {1, 2, 3, 4, 5, 6}), TL({T(s64, {2}, {1, 0}), T(s64, {2}, {0, 2})})}, {}, {{4, 3}});
  expect("index.Tensor non-adjacent", "aten::index.Tensor",
         {T(f32, {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}), TL({T(s64, {1}, {1}), N(), T(s64, {1}, {0})})}, {{f32, {1, 2}}},
         {{4, 6}});
  expect("index_put accumulate", "aten::index_put",
         {T(f32, {3}, {0, 0, 0}), TL({T(s64, {3}, {0, 0, 2})}), T(f32, {3}, {1, 2, 3}), B(true)}, {}, {{3, 0, 3}});
  expect("index_put rows", "aten::index_put",
         {T(f32, {2, 2}, {0, 0, 0, 0}), TL({T(s64, {1}, {1})}), T(f32, {2}, {5, 6}), B(false)}, {}, {{0, 0, 5, 6}});
  expect("index_put mask", "aten::index_put",
         {T(f32, {3}, {1, 2, 3}), TL({T(DType::Pred, {3}, {1, 0, 1})}), T(f32, {}, {0}), B(false)}, {}, {{0, 2, 0}});
  // a lone mask with one row for every selected row (x[mask] = pad_token): data-independent, a select
  expect("index_put mask row", "aten::index_put",
         {T(f32, {3, 2}, {1, 2, 3, 4, 5, 6}), TL({T(DType::Pred, {3}, {0, 1, 1})}), T(f32, {1, 2}, {7, 8}), B(false)}, {},
         {{1, 2, 7, 8, 7, 8}});
  expect("index_put mask after a slice, accumulate", "aten::index_put",
         {T(f32, {2, 2}, {1, 2, 3, 4}), TL({N(), T(DType::Pred, {2}, {1, 0})}), T(f32, {2, 1}, {10, 20}), B(true)}, {},
         {{11, 2, 23, 4}});
  expect("flip", "aten::flip", {T(f32, {2, 2}, {1, 2, 3, 4}), L({0})}, {}, {{3, 4, 1, 2}});
  expect("roll", "aten::roll", {T(f32, {4}, {1, 2, 3, 4}), L({1}), L({0})}, {}, {{4, 1, 2, 3}});
  expect("roll flat", "aten::roll", {T(f32, {2, 2}, {1, 2, 3, 4}), L({-1}), L({})}, {}, {{2, 3, 4, 1}});
  expect("tril", "aten::tril", {T(f32, {2, 2}, {1, 2, 3, 4}), I(0)}, {}, {{1, 0, 3, 4}});
  expect("triu -1", "aten::triu", {T(f32, {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}), I(1)}, {}, {{0, 2, 3, 0, 0, 6, 0, 0, 0}});
  expect("repeat", "aten::repeat", {T(f32, {2}, {1, 2}), L({2, 2})}, {}, {{1, 2, 1, 2, 1, 2, 1, 2}});
  expect("sort descending", "aten::sort", {T(f32, {4}, {1, 3, kNaN, 2}), I(0), B(true)}, {},
         {{kNaN, 3, 2, 1}, {2, 1, 3, 0}});
  expect("topk", "aten::topk", {T(f32, {4}, {1, 3, 0, 2}), I(2), I(0), B(true), B(true)}, {}, {{3, 2}, {1, 3}});
  expect("slice_backward", "aten::slice_backward", {T(f32, {2}, {1, 2}), L({5}), I(0), I(1), I(4), I(2)}, {},
         {{0, 1, 0, 2, 0}});
  expect("select_backward", "aten::select_backward", {T(f32, {2}, {1, 2}), L({2, 3}), I(1), I(-1)}, {},
         {{0, 0, 1, 0, 0, 2}});
  expect("slice_scatter", "aten::slice_scatter",
         {T(f32, {4}, {1, 1, 1, 1}), T(f32, {2}, {7, 8}), I(0), I(0), N(), I(2)}, {}, {{7, 1, 8, 1}});

  // ---- the tpu namespace: fused kernels and foreign programs ----
  expect("tpu::swiglu", "tpu::swiglu", {T(f32, {3}, {-1, 0, 2}), T(f32, {3}, {2, 3, -1})}, {},
         {{-0.53788284274, 0, -1.76159415596}});
  expect("tpu::swiglu bf16", "tpu::swiglu", {T(DType::BF16, {2}, {-1, 2}), T(DType::BF16, {2}, {2, -1})}, {},
         {{-0.5390625, -1.7578125}}, 1e-6, {DType::BF16});
  expect("tpu::swiglu_backward", "tpu::swiglu_backward",
         {T(f32, {3}, {1, 1, 1}), T(f32, {3}, {-1, 0, 2}), T(f32, {3}, {2, 3, -1})}, {},
         {{0.14465897626, 1.5, -1.09078424878}, {-0.26894142137, 0, 1.76159415596}});
  lowering::registerForeignProgram(
      "lowering_test.kernel",
      "func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {\n"
      "  %0 = stablehlo.add %a, %b : tensor<2xf32>\n"
      "  %1 = stablehlo.multiply %a, %b : tensor<2xf32>\n"
      "  return %0, %1 : tensor<2xf32>, tensor<2xf32>\n"
      "}\n");
  expect("tpu::stablehlo_call", "tpu::stablehlo_call",
         {TL({T(f32, {2}, {1, 2}), T(f32, {2}, {3, 4})}), Str("lowering_test.kernel")}, {{f32, {2}}, {f32, {2}}},
         {{4, 6}, {3, 8}});
  test("tpu::stablehlo_call: no program for the argument types", [] {
    bool threw = false;
    try {
      run("tpu::stablehlo_call", {TL({T(f32, {3}, {1, 2, 3}), T(f32, {3}, {3, 4, 5})}), Str("lowering_test.kernel")},
          {{f32, {3}}, {f32, {3}}});
    } catch (const LoweringError& e) {
      threw = std::string(e.what()).find("no program of kernel 'lowering_test.kernel' takes (tensor<3xf32>, "
                                         "tensor<3xf32>); registered:") != std::string::npos;
    }
    CHECK(threw);
  });
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--list") {
    for (const std::string& n : registry().names()) std::printf("%s\n", n.c_str());
    return 0;
  }
  std::string plugin = runtime::Client::pluginPathFromEnv();
  if (plugin.empty()) {
    std::fprintf(stderr, "TORCH_TPU_PJRT_PLUGIN is not set\n");
    return 1;
  }
  runtime::Client::init(plugin);
  g_print = std::getenv("LOWERING_TEST_PRINT") != nullptr;
  if (const char* only = std::getenv("LOWERING_TEST_ONLY")) g_only = only;
  g_print_passes = false;  // thousands of cases: failures only
  bool numeric_only = argc > 1 && std::string(argv[1]) == "--numeric";
  numericTests();
  groupedMMTests();
  complexLinalgTests();
  if (!numeric_only) {
    compileSweep();
    coverageCases();
  }
  // Every registered rule is lowered by some case, or listed in kNotLowered with its reason.
  if (!numeric_only && g_only.empty()) {
    std::vector<std::string> missing;
    for (const std::string& n : registry().names())
      if (!g_covered.count(n) && !kNotLowered.count(n)) missing.push_back(n);
    if (!missing.empty()) {
      std::printf("[FAIL] rules no case lowers (%zu): add a row to kCases or list them in kNotLowered with the reason:",
                  missing.size());
      for (auto& n : missing) std::printf(" %s", n.c_str());
      std::printf("\n");
      g_failures += int(missing.size());
    }
    for (const auto& [n, why] : kNotLowered) {
      if (!registry().find(n)) {
        std::printf("[FAIL] kNotLowered lists %s, which has no rule\n", n.c_str());
        ++g_failures;
      } else if (g_covered.count(n)) {
        std::printf("[FAIL] kNotLowered lists %s, which a case lowers: remove it from the list\n", n.c_str());
        ++g_failures;
      }
    }
  }
  if (g_failures) {
    std::printf("FAILED: %d check(s)\n", g_failures);
    return 1;
  }
  std::printf("ALL PASSED (%zu rules exercised)\n", g_covered.size());
  return 0;
}
