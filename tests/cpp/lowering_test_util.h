// Shared by the lowering test's sources (lowering_test.cpp and lowering_test_*.cpp, one executable): host data
// encoding, the call description (In, T(), S(), ...), the test Context, run() (lower, compile, execute) and expect().
#pragma once

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

inline bool g_print = false;
inline std::set<std::string> g_covered;  // rules lowered at least once

// ------------------------------------------------------------------ host data

inline uint16_t toBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7FC0;
  u += 0x7FFF + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}
inline float fromBF16(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t toF16(float f) {  // round to nearest even; enough for test data
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
inline float fromF16(uint16_t h) {
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

inline size_t elemSize(DType t) {
  switch (t) {
    case DType::Pred: case DType::S8: case DType::U8: return 1;
    case DType::S16: case DType::U16: case DType::F16: case DType::BF16: return 2;
    case DType::S32: case DType::U32: case DType::F32: return 4;
    case DType::C128: return 16;
    default: return shlo::isFloat8(t) ? 1 : 8;
  }
}

// A complex element made from one number x: x + (1 - x/2)i (decode gives the real part back).
inline double imagOf(double x) { return 1 - x / 2; }

inline std::vector<unsigned char> encode(DType t, const std::vector<double>& v) {
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

inline std::vector<double> decode(DType t, const std::vector<unsigned char>& bytes) {
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
  std::vector<double> doubles;
  std::string s;
  DType dt = DType::Invalid;
};

inline std::vector<double> pattern(DType t, int64_t n) {
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

inline In T(DType t, Shape s, std::vector<double> d = {}) {
  In a;
  a.kind = Arg::Kind::Tensor;
  a.type = {t, std::move(s)};
  a.data = d.empty() ? pattern(t, a.type.numel()) : std::move(d);
  return a;
}
inline In W(double v, K k = K::Float) {  // wrapped Python number
  In a = T(k == K::Float ? DType::F64 : k == K::Int ? DType::S64 : DType::Pred, {}, {v});
  a.wrapped = true;
  a.skind = k;
  a.sval = v;
  return a;
}
inline In S(double v, K k = K::Float) {  // dynamic Scalar
  In a;
  a.kind = Arg::Kind::Scalar;
  a.skind = k;
  a.sval = v;
  return a;
}
inline In SS(double v, K k = K::Float) {  // static Scalar
  In a = S(v, k);
  a.stat = true;
  return a;
}
inline In D(double v) {  // float argument (dynamic)
  In a = S(v, K::Float);
  a.kind = Arg::Kind::Double;
  return a;
}
inline In DS(double v) {  // float argument with a static value (the rule lists it in static_args)
  In a = D(v);
  a.stat = true;
  return a;
}
inline In I(int64_t v) {
  In a;
  a.kind = Arg::Kind::Int;
  a.i = v;
  return a;
}
inline In B(bool v) {
  In a;
  a.kind = Arg::Kind::Bool;
  a.b = v;
  return a;
}
inline In L(std::vector<int64_t> v) {
  In a;
  a.kind = Arg::Kind::IntList;
  a.ints = std::move(v);
  return a;
}
inline In BL(std::vector<bool> v) {
  In a;
  a.kind = Arg::Kind::BoolList;
  a.bools = std::move(v);
  return a;
}
inline In DL(std::vector<double> v) {  // float[] argument (static values)
  In a;
  a.kind = Arg::Kind::DoubleList;
  a.doubles = std::move(v);
  return a;
}
inline In Str(std::string s) {
  In a;
  a.kind = Arg::Kind::String;
  a.s = std::move(s);
  return a;
}
inline In Dt(DType t) {
  In a;
  a.kind = Arg::Kind::ScalarType;
  a.dt = t;
  return a;
}
inline In N() { return In{}; }
inline In TL(std::vector<In> v) {
  In a;
  a.kind = Arg::Kind::TensorList;
  a.list = std::move(v);
  return a;
}
inline In named(In a, std::string n) {
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
inline Result run(const std::string& op, const std::vector<In>& ins, const std::vector<TensorType>& outs = {},
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
    a.doubles = in.doubles;
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

inline bool same(double a, double b, double tol) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= tol * (1 + std::fabs(b));
}

inline bool near(const std::vector<double>& got, const std::vector<double>& want, double tol) {
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
inline void expect(const std::string& name, const std::string& op, const std::vector<In>& ins,
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
void sweep(const std::string& op, const Range& dtypes, const MakeArgs& make,
                  const std::function<std::vector<TensorType>(DType)>& outs = nullptr) {
  for (DType t : dtypes) {
    test(op + " [" + shlo::mlirName(t) + "]", [&] {
      Result r = run(op, make(t), outs ? outs(t) : std::vector<TensorType>{}, /*execute=*/true);
      (void)r;
    });
  }
}

inline std::vector<In> unaryArgs(DType t) { return {T(t, {2, 3})}; }

// The parts of the test, one per source file.
void compileSweep();         // lowering_test_sweep.cpp: every dtype of the elementwise/reduction/... rules
void coverageCases();        // lowering_test_cases.cpp: one call of each rule the sweeps do not reach
void groupedMMTests();       // lowering_test_numeric.cpp: numeric checks against host-computed values
void complexLinalgTests();
void numericTests();
