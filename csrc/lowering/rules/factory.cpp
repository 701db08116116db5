// Factory family: fill, clone, _to_copy, arange, full/zeros/ones-like constructors and the random ops.
//
// Random ops draw bits from stablehlo.rng_bit_generator with the state ctx.rngState() gives (a fresh one per call,
// derived from the device generator). The random rules are registered under PyTorch's in-place names (uniform_,
// normal_, ...), which are the only forms those ops have; each returns the new value of `self`.
#include <cmath>
#include <limits>

#include "lowering/families.h"
#include "lowering/helpers.h"
#include "lowering/rules/random_common.h"

namespace torch_tpu::lowering {
namespace rnd {

Value uniformFromBits(Builder& b, Value bits, DType c) {
  int keep = c == DType::F64 ? 53 : 24;
  Value top = b.shiftRightLogical(bits, b.constantF(shlo::bitWidth(bits.dtype()) - keep, bits.dtype(), bits.shape()));
  return b.mul(b.convert(top, c), b.constantF(std::ldexp(1.0, -keep), c, bits.shape()));
}

Value uniform01(Context& ctx, const Shape& shape, DType want) {
  DType c = want == DType::F64 ? DType::F64 : DType::F32;
  DType bits = want == DType::F64 ? DType::U64 : DType::U32;
  return uniformFromBits(ctx.b, ctx.b.rngBitGenerator(ctx.rngState(), {bits, shape})[1], c);
}

Value leadingEntry(Builder& b, Value u, int64_t k) {
  const Shape& s = u.shape();
  std::vector<int64_t> lo(s.size(), 0), hi = s, st(s.size(), 1);
  lo[0] = k;
  hi[0] = k + 1;
  return b.reshape(b.slice(u, lo, hi, st), Shape(s.begin() + 1, s.end()));
}

Value boxMuller(Builder& b, Value u1, Value u2) {
  u1 = b.sub(b.onesLike(u1), u1);
  Value radius = b.sqrt(b.mul(cst(b, -2.0, u1), b.log(u1)));
  return b.mul(radius, b.cos(b.mul(cst(b, 2.0 * M_PI, u2), u2)));
}

DType drawType(DType t) { return t == DType::F64 ? DType::F64 : DType::F32; }

bool floatSelf(const Context& ctx) { return realDTypes(ctx) && shlo::isFloat(ctx.tensor(0).dtype()); }

double staticOr(const Context& ctx, size_t i, double dflt) {
  if (!ctx.has(i)) return dflt;
  const Arg& a = ctx.arg(i);
  if (a.kind == Arg::Kind::Int) return double(a.i);
  if ((a.kind == Arg::Kind::Scalar || a.kind == Arg::Kind::Double) && a.scalar.known()) return a.scalar.toDouble();
  return NAN;
}

}  // namespace rnd

namespace {

using namespace rnd;
using shlo::Cmp;
using shlo::isFloat;

// The real draws a random fill of `self` makes: of its draw type and shape, or for complex numbers of the
// component type with a trailing dimension of 2 (real part, imaginary part).
struct Draws {
  bool complex;
  DType type;
  Shape shape;
};

Draws drawsFor(const Value& self) {
  Draws d{shlo::isComplex(self.dtype()), drawType(self.dtype()), self.shape()};
  if (d.complex) {
    d.type = shlo::componentType(self.dtype());
    d.shape.push_back(2);
  }
  return d;
}

// Values drawn as drawsFor(self) says, as self's dtype (complex numbers from the pairs).
Value drawnAs(Builder& b, Value v, const Value& self) {
  if (!shlo::isComplex(self.dtype())) return b.convert(v, self.dtype());
  const Shape& s = v.shape();
  std::vector<int64_t> lo(s.size(), 0), hi = s, st(s.size(), 1);
  hi.back() = 1;
  Value re = b.reshape(b.slice(v, lo, hi, st), self.shape());
  lo.back() = 1;
  hi.back() = 2;
  Value im = b.reshape(b.slice(v, lo, hi, st), self.shape());
  return b.complex(re, im);
}

// Number of mantissa digits of a float dtype (std::numeric_limits<T>::digits).
int digits(DType t) {
  switch (t) {
    case DType::F16: return 11;
    case DType::BF16: return 8;
    case DType::F32: return 24;
    default: return 53;
  }
}

// Inclusive maximum of an integer dtype as uint64 (bool: 1).
uint64_t intMax(DType t) {
  switch (t) {
    case DType::Pred: return 1;
    case DType::S8: return 127;
    case DType::U8: return 255;
    case DType::S16: return 32767;
    case DType::U16: return 65535;
    case DType::S32: return 2147483647ull;
    case DType::U32: return 4294967295ull;
    case DType::U64: return ~0ull;
    default: return 9223372036854775807ull;
  }
}

// Largest finite value of a float dtype (std::numeric_limits<T>::max()); complex: its components'.
double floatMax(DType t) {
  switch (t) {
    case DType::F16: return 65504.0;
    case DType::BF16: return 3.3895313892515355e38;
    case DType::F32: case DType::C64: return 3.4028234663852886e38;
    default: return 1.7976931348623157e308;
  }
}

// PyTorch's CPU kernels check the bounds of random_ and uniform_ against the tensor's dtype (their meta kernels do
// not): a call they reject or warn about is an InvalidCall, so eager mode lets the CPU kernel raise its error (or warn
// and draw), and a graph runs the node eagerly.
void checkRandomBounds(const Context& ctx, DType t, double from, double to_inc) {
  bool ok;
  if (isFloat(t)) {
    const double exact = std::ldexp(1.0, digits(t));  // beyond +-2^digits PyTorch warns: not every integer exists
    ok = from >= -exact && from <= exact && to_inc >= -exact && to_inc <= exact;
  } else {
    const double hi = double(intMax(t));
    const double lo = t == DType::Pred || t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64
                          ? 0.0 : -hi - 1.0;
    ok = from >= lo && from <= hi && to_inc >= lo && to_inc <= hi;
  }
  if (!ok) throw InvalidCall(ctx.op(), "random_ bounds out of the dtype's range");
}

// Integers uniform in [from, from + range) (range 0 means the full 64-bit range), converted to `t`.
Value randomRange(Context& ctx, const TensorType& type, int64_t from, uint64_t range) {
  Builder& b = ctx.b;
  Value bits = b.rngBitGenerator(ctx.rngState(), {DType::U64, type.shape})[1];
  if (range != 0) bits = b.rem(bits, b.broadcastTo(b.constantInt(int64_t(range), DType::U64), type.shape));
  Value v = b.add(b.bitcastConvert(bits, DType::S64), b.broadcastTo(b.constantInt(from, DType::S64), type.shape));
  return b.convert(v, type.dtype);
}

std::vector<Value> fillLike(Context& ctx, size_t value_i, const TensorType& type) {
  return {ctx.b.broadcastTo(scalarArg(ctx, value_i, type.dtype), type.shape)};
}

// Result type of a factory op: ctx.outputs[0] (PyTorch's meta computation knows size/dtype/defaults).
const TensorType& outType(const Context& ctx) {
  if (ctx.outputs.empty() || ctx.outputs[0].dtype == DType::Invalid) ctx.fail("no expected result type");
  return ctx.outputs[0];
}


// Standard normal draws of `shape` in dtype c (Box-Muller on two uniform draws per element).
Value standardNormal(Context& ctx, const Shape& shape, DType c) {
  Builder& b = ctx.b;
  Shape s2 = shape;
  s2.insert(s2.begin(), 2);
  Value u = uniform01(ctx, s2, c);
  return boxMuller(b, leadingEntry(b, u, 0), leadingEntry(b, u, 1));
}



// The accepts predicate of a random op whose parameters PyTorch validates (from <= to, sigma > 0, ...): those
// parameters are static (part of the program, see the rows' staticArgs), and `valid` declines a bad call, which then
// goes to the CPU kernel and raises PyTorch's error there. Floating self only, or any non-bool self for `integers`.
AcceptsFn randomAccepts(std::function<bool(const Context&)> valid, bool integers = false) {
  return [valid, integers](const Context& ctx) {
    // (complex calls reach this only for rows listing kComplex: normal_)
    bool dtype_ok = floatSelf(ctx) || shlo::isComplex(ctx.tensor(0).dtype()) ||
                    (integers && realDTypes(ctx) && ctx.tensor(0).dtype() != DType::Pred);
    return dtype_ok && valid(ctx);
  };
}

}  // namespace

void populateFactory(Registry& r) {
  r.add("aten::fill.Scalar", [](Context& ctx) { return fillLike(ctx, 1, ctx.tensor(0).type); }).dtypes(kRestricted);
  r.add("aten::fill.Tensor", [](Context& ctx) { return fillLike(ctx, 1, ctx.tensor(0).type); }).dtypes(kRestricted);
  r.add("aten::zero", [](Context& ctx) -> std::vector<Value> { return {ctx.b.zerosLike(ctx.tensor(0))}; })
      .dtypes(kRestricted);
  r.add("aten::clone", [](Context& ctx) -> std::vector<Value> { return {ctx.tensor(0)}; }).dtypes(kRestricted);
  // Graph-only: in eager mode alias is a view (PyTorch's kernel), and _to_copy also crosses devices (PyTorch's
  // kernel: an empty tensor and copy_).
  r.add("aten::alias", [](Context& ctx) -> std::vector<Value> { return {ctx.tensor(0)}; })
      .graphOnly().dtypes(kRestricted);
  r.add("aten::_to_copy", [](Context& ctx) -> std::vector<Value> {
    Value x = ctx.tensor(0);
    DType to = ctx.has(1) && ctx.arg(1).kind == Arg::Kind::ScalarType ? ctx.arg(1).dtype : x.dtype();
    return {ctx.b.convert(x, to)};
  }).graphOnly().dtypes(kRestricted);
  // full/zeros/ones/... : the value broadcast to the expected result type.
  r.add("aten::full", [](Context& ctx) { return fillLike(ctx, 1, outType(ctx)); }).dtypes(kRestricted);
  r.add("aten::full_like", [](Context& ctx) { return fillLike(ctx, 1, outType(ctx)); }).dtypes(kRestricted);
  r.add("aten::new_full", [](Context& ctx) { return fillLike(ctx, 2, outType(ctx)); }).dtypes(kRestricted);
  r.add("aten::scalar_tensor", [](Context& ctx) { return fillLike(ctx, 0, outType(ctx)); }).dtypes(kRestricted);
  // _efficientzerotensor (the gradient autograd gives for an input a function ignores, e.g. sgn at real inputs): CPU
  // and CUDA make a storage-less ZeroTensor; here it is an ordinary tensor of zeros.
  for (const char* op : {"aten::zeros", "aten::zeros_like", "aten::new_zeros", "aten::_efficientzerotensor"})
    r.add(op, [](Context& ctx) -> std::vector<Value> { return {ctx.b.zeros(outType(ctx))}; }).dtypes(kRestricted);
  for (const char* op : {"aten::ones", "aten::ones_like", "aten::new_ones"})
    r.add(op, [](Context& ctx) -> std::vector<Value> {
      const TensorType& t = outType(ctx);
      return {ctx.b.constantF(1, t.dtype, t.shape)};
    }).dtypes(kRestricted);

  // arange: start + iota * step in the result dtype (float math in accType; integers in int64). The size comes
  // from ctx.outputs (PyTorch computed it from the same numbers).
  auto arange = [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    const TensorType& t = outType(ctx);
    if (t.rank() != 1) ctx.fail("expected a 1-d result");
    DType c = isFloat(t.dtype) ? accType(t.dtype) : DType::S64;
    size_t start_i = ctx.argIndex("start");
    Value start = b.broadcastTo(scalarArg(ctx, start_i, c), t.shape);
    Value idx = b.convert(b.iota({DType::S64, t.shape}, 0), c);
    Value v = idx;
    for (size_t i = 0; i < ctx.args.size(); ++i)
      if (ctx.args[i].name == "step" && ctx.has(i)) v = b.mul(idx, b.broadcastTo(scalarArg(ctx, i, c), t.shape));
    return {b.convert(b.add(start, v), t.dtype)};
  };
  // The functional forms' result size depends on the numbers, so they are static there; arange.start_out (what
  // torch.arange(..., out=) and the eager factory path use) gets a resized `out`, so its numbers stay inputs.
  r.add("aten::arange.start_out", arange).accepts(realDTypes);
  r.add("aten::arange.start_step", arange).staticArgs({"start", "end", "step"}).accepts(realDTypes);
  r.add("aten::arange.start", arange).staticArgs({"start", "end"}).accepts(realDTypes);
  r.add("aten::arange", [](Context& ctx) -> std::vector<Value> {  // arange(end): 0, 1, ...
    const TensorType& t = outType(ctx);
    Builder& b = ctx.b;
    DType c = isFloat(t.dtype) ? accType(t.dtype) : DType::S64;
    return {b.convert(b.convert(b.iota({DType::S64, t.shape}, 0), c), t.dtype)};
  }).staticArgs({"end"}).accepts(realDTypes);

  // eye(n) / eye.m(n, m): ones on the main diagonal (shape from the expected result).
  for (const char* op : {"aten::eye", "aten::eye.m"})
    r.add(op, [](Context& ctx) -> std::vector<Value> {
      Builder& b = ctx.b;
      const TensorType& t = outType(ctx);
      if (t.rank() != 2) ctx.fail("expected a 2-d result");
      Value diag = b.compare(b.iota({DType::S64, t.shape}, 0), b.iota({DType::S64, t.shape}, 1), Cmp::EQ);
      return {b.convert(diag, t.dtype)};
    }).accepts(realDTypes).dtypes(kFloat8 | kComplex);
  // linspace / logspace (start, end, steps[, base]): PyTorch CPU's two-sided formula (the first half counts up from
  // start, the second half down from end), in CPU's types. start and end are first converted to the result dtype
  // (integers truncate). linspace: integer results compute in f64 and truncate; every other dtype computes in itself
  // (half and bfloat16 round after each step, as c10::Half arithmetic does; float32 and float64 take each value as one
  // fused multiply-add, as CPU's compiled kernel does: linspaceTwoSided). logspace: the exponent and the power
  // compute in f64 (the base in f32 for integer results; complex results in their own type), a single step is
  // base ** start without rounding start first, and the power is converted to the result dtype.
  auto spaced = [](bool log) {
    return [log](Context& ctx) -> std::vector<Value> {
      Builder& b = ctx.b;
      const TensorType& t = outType(ctx);
      int64_t steps = ctx.toInt(2);
      const bool integral = !isFloat(t.dtype) && !shlo::isComplex(t.dtype);
      if (steps == 0) return {b.zeros(t)};
      const DType c = shlo::isComplex(t.dtype) ? t.dtype : (integral || log) ? DType::F64 : t.dtype;
      auto power = [&](Value e) -> Value {
        Value base = ctx.has(3) ? b.broadcastTo(scalarArg(ctx, 3, c), t.shape) : b.constantF(10.0, c, t.shape);
        if (integral) base = b.convert(b.convert(base, DType::F32), c);
        return b.pow(base, e);
      };
      Value start = b.broadcastTo(scalarArg(ctx, 0, c), t.shape);
      Value end = b.broadcastTo(scalarArg(ctx, 1, c), t.shape);
      if (steps == 1) return {b.convert(log ? power(start) : b.convert(start, t.dtype), t.dtype)};
      if (!shlo::isComplex(t.dtype)) {  // the result dtype's start and end
        start = b.convert(b.convert(start, t.dtype), c);
        end = b.convert(b.convert(end, t.dtype), c);
      }
      // logspace of floats: their difference in the result dtype, the rest in f64
      Value diff = log && !integral && !shlo::isComplex(t.dtype)
                       ? b.convert(b.sub(b.convert(end, t.dtype), b.convert(start, t.dtype)), c)
                       : b.sub(end, start);
      Value v = linspaceTwoSided(b, start, end, diff, steps);
      if (log) {
        v = power(v);
        // CPU stores each power with a scalar double -> integer conversion: through int32 for the narrower types
        if (integral && t.dtype != DType::S64) v = b.convert(v, DType::S32);
      }
      return {b.convert(v, t.dtype)};
    };
  };
  // The out= forms (their arguments differ from the functional ones': no dtype or device) take out's dtype.
  for (const char* ov : {"", ".Tensor_Tensor", ".Tensor_Scalar", ".Scalar_Tensor", ".out", ".Tensor_Tensor_out",
                         ".Tensor_Scalar_out", ".Scalar_Tensor_out"}) {
    r.add(std::string("aten::linspace") + ov, spaced(false)).accepts(realDTypes).complex();
    r.add(std::string("aten::logspace") + ov, spaced(true)).accepts(realDTypes).complex();
  }
  // tril_indices / triu_indices(row, col, offset): every number is static; the indices are a constant.
  for (bool lower : {true, false})
    r.add(lower ? "aten::tril_indices" : "aten::triu_indices", [lower](Context& ctx) -> std::vector<Value> {
      Builder& b = ctx.b;
      const TensorType& t = outType(ctx);
      int64_t rows = ctx.toInt(0), cols = ctx.toInt(1), off = ctx.has(2) ? ctx.toInt(2) : 0;
      std::vector<int64_t> rr, cc;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          if (lower ? j - i <= off : j - i >= off) {
            rr.push_back(i);
            cc.push_back(j);
          }
      if (int64_t(rr.size()) * 2 != t.numel()) ctx.fail("unexpected result size");
      if (rr.empty()) return {b.zeros(t)};
      rr.insert(rr.end(), cc.begin(), cc.end());
      return {b.convert(b.reshape(b.constantI64s(rr, DType::S64), t.shape), t.dtype)};
    }).accepts(realDTypes);

  // ---- random ----
  // uniform_(self, float from=0, float to=1, *, generator); PyTorch requires from <= to (and a finite range)
  r.add("aten::uniform_", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0);
    {
      const double from = staticOr(ctx, 1, 0.0), to = staticOr(ctx, 2, 1.0), mx = floatMax(self.dtype());
      // PyTorch CPU: from and to within the dtype's finite range, to - from <= its maximum
      if (!(from >= -mx && from <= mx && to >= -mx && to <= mx && to - from <= mx))
        throw InvalidCall(ctx.op(), "uniform_ bounds out of the dtype's range");
    }
    // complex, as PyTorch: the real and imaginary parts each drawn from [from, to)
    const Draws d = drawsFor(self);
    const DType c = d.type;
    const Shape& shape = d.shape;
    Value u = uniform01(ctx, shape, c);
    Value from = ctx.has(1) ? b.broadcastTo(scalarArg(ctx, 1, c), shape) : b.zerosLike(u);
    Value to = ctx.has(2) ? b.broadcastTo(scalarArg(ctx, 2, c), shape) : b.onesLike(u);
    return {drawnAs(b, b.add(from, b.mul(u, b.sub(to, from))), self)};
  }).staticArgs({"from", "to"}).accepts(randomAccepts([](const Context& ctx) {
    double from = staticOr(ctx, 1, 0.0), to = staticOr(ctx, 2, 1.0);
    return from <= to && std::isfinite(to - from);
  })).complex();
  // normal_(self, float mean=0, float std=1, *, generator); PyTorch requires std >= 0
  r.add("aten::normal_", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0);
    // Complex, as PyTorch: the real and imaginary parts are independent normals of standard deviation std / sqrt(2)
    // (the modulus has variance std^2), both shifted by the mean.
    const Draws d = drawsFor(self);
    const DType c = d.type;
    const Shape& shape = d.shape;
    Value z = standardNormal(ctx, shape, c);
    Value mean = ctx.has(1) ? b.broadcastTo(scalarArg(ctx, 1, c), shape) : b.zerosLike(z);
    Value stdv = ctx.has(2) ? b.broadcastTo(scalarArg(ctx, 2, c), shape) : b.onesLike(z);
    if (d.complex) stdv = b.mul(stdv, b.constantF(M_SQRT1_2, c, shape));
    return {drawnAs(b, b.add(mean, b.mul(z, stdv)), self)};
  }).staticArgs({"std"}).accepts(randomAccepts([](const Context& ctx) { return staticOr(ctx, 2, 1.0) >= 0; }))
      .complex();
  // normal.Tensor_Tensor(mean, std) / normal.float_Tensor(float mean, std): mean + std * z, broadcast. std >= 0 is
  // checked by reading std's minimum back, as CUDA's kernel does (eager/call_checks.cpp).
  for (const char* op : {"aten::normal.Tensor_Tensor", "aten::normal.float_Tensor"})
    r.add(op, [](Context& ctx) -> std::vector<Value> {
      Builder& b = ctx.b;
      const TensorType& t = outType(ctx);
      const DType c = drawType(t.dtype);
      Value z = standardNormal(ctx, t.shape, c);
      Value mean = ctx.arg(0).kind == Arg::Kind::Tensor ? b.broadcastTo(b.convert(ctx.tensor(0), c), t.shape)
                                                        : b.broadcastTo(scalarArg(ctx, 0, c), t.shape);
      Value stdv = b.broadcastTo(b.convert(ctx.tensor(1), c), t.shape);
      return {b.convert(b.add(mean, b.mul(z, stdv)), t.dtype)};
    }).accepts([](const Context& ctx) {
      return shlo::isFloat(outType(ctx).dtype) && shlo::isFloat(ctx.tensor(1).dtype()) &&
             (ctx.arg(0).kind != Arg::Kind::Tensor || shlo::isFloat(ctx.tensor(0).dtype()));
    });
  // normal.Tensor_float(mean, float std=1): mean + std * z.
  r.add("aten::normal.Tensor_float", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    const TensorType& t = outType(ctx);
    DType c = drawType(t.dtype);
    Value z = standardNormal(ctx, t.shape, c);
    Value mean = b.broadcastTo(b.convert(ctx.tensor(0), c), t.shape);
    Value stdv = ctx.has(1) ? b.broadcastTo(scalarArg(ctx, 1, c), t.shape) : b.onesLike(z);
    return {b.convert(b.add(mean, b.mul(z, stdv)), t.dtype)};
  }).staticArgs({"std"}).accepts(randomAccepts([](const Context& ctx) { return staticOr(ctx, 1, 1.0) >= 0; }));
  // cauchy_(self, median=0, sigma=1): median + sigma * tan(pi * (u - 1/2)); PyTorch requires sigma > 0
  r.add("aten::cauchy_", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0);
    DType c = drawType(self.dtype());
    Value u = uniform01(ctx, self.shape(), c);
    Value t = b.tan(b.mul(cst(b, M_PI, u), b.sub(u, cst(b, 0.5, u))));
    Value median = ctx.has(1) ? b.broadcastTo(scalarArg(ctx, 1, c), self.shape()) : b.zerosLike(u);
    Value sigma = ctx.has(2) ? b.broadcastTo(scalarArg(ctx, 2, c), self.shape()) : b.onesLike(u);
    return {b.convert(b.add(median, b.mul(sigma, t)), self.dtype())};
  }).staticArgs({"sigma"}).accepts(randomAccepts([](const Context& ctx) { return staticOr(ctx, 2, 1.0) > 0; }));
  // log_normal_(self, mean=1, std=2): exp(mean + std * z); PyTorch requires std > 0
  r.add("aten::log_normal_", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0);
    DType c = drawType(self.dtype());
    Value z = standardNormal(ctx, self.shape(), c);
    Value mean = ctx.has(1) ? b.broadcastTo(scalarArg(ctx, 1, c), self.shape()) : cst(b, 1.0, z);
    Value stdv = ctx.has(2) ? b.broadcastTo(scalarArg(ctx, 2, c), self.shape()) : cst(b, 2.0, z);
    return {b.convert(b.exp(b.add(mean, b.mul(z, stdv))), self.dtype())};
  }).staticArgs({"std"}).accepts(randomAccepts([](const Context& ctx) { return staticOr(ctx, 2, 2.0) > 0; }));
  // geometric_(self, p): the number of Bernoulli(p) trials up to the first success, ceil(log(u) / log(1 - p));
  // PyTorch requires 0 < p < 1
  r.add("aten::geometric_", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0);
    DType c = drawType(self.dtype());
    Value u01 = uniform01(ctx, self.shape(), c);
    Value u = b.sub(cst(b, 1.0, u01), u01);  // (0, 1]: log is finite
    Value p = b.broadcastTo(scalarArg(ctx, 1, c), self.shape());
    Value k = b.max(b.ceil(b.div(b.log(u), b.log1p(b.neg(p)))), cst(b, 1.0, u));
    return {b.convert(k, self.dtype())};
  }).staticArgs({"p"}).accepts(randomAccepts([](const Context& ctx) {
    double p = staticOr(ctx, 1, NAN);
    return p > 0 && p < 1;
  }, /*integers=*/true));
  // bernoulli_.float(self, float p=0.5): 1 with probability p.
  r.add("aten::bernoulli_.float", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0);
    DType c = drawType(self.dtype());
    Value u = uniform01(ctx, self.shape(), c);
    Value p = ctx.has(1) ? b.broadcastTo(scalarArg(ctx, 1, c), self.shape()) : cst(b, 0.5, u);
    return {b.convert(b.compare(u, p, Cmp::LT), self.dtype())};
  }).accepts(realDTypes);
  // bernoulli_.Tensor(self, Tensor p) and bernoulli(self = probabilities)
  r.add("aten::bernoulli_.Tensor", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0);
    DType c = drawType(self.dtype());
    Value u = uniform01(ctx, self.shape(), c);
    Value p = b.broadcastTo(b.convert(ctx.tensor(1), c), self.shape());
    return {b.convert(b.compare(u, p, Cmp::LT), self.dtype())};
  }).accepts(realDTypes);
  r.add("aten::bernoulli", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value p = ctx.tensor(0);
    DType c = drawType(p.dtype());
    Value u = uniform01(ctx, p.shape(), c);
    return {b.convert(b.compare(u, b.convert(p, c), Cmp::LT), p.dtype())};
  }).accepts(floatSelf);
  // exponential_(self, float lambd=1): -log(1 - u) / lambd; PyTorch requires lambd > 0
  r.add("aten::exponential_", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value self = ctx.tensor(0);
    DType c = drawType(self.dtype());
    Value u = uniform01(ctx, self.shape(), c);
    Value lambd = ctx.has(1) ? b.broadcastTo(scalarArg(ctx, 1, c), self.shape()) : b.onesLike(u);
    Value e = b.div(b.neg(b.log1p(b.neg(u))), lambd);
    return {b.convert(e, self.dtype())};
  }).staticArgs({"lambd"}).accepts(randomAccepts([](const Context& ctx) { return staticOr(ctx, 1, 1.0) > 0; }));
  // randperm.generator_out(n, generator, out): 0..n-1 ordered by random 64-bit keys (a stable sort, so a tie
  // keeps a valid permutation), in the result's dtype (CPU's own n checks run in its kernel: the meta raises first).
  auto randperm = [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    const TensorType& t = ctx.outputs[0];
    int64_t n = t.shape.empty() ? 0 : t.shape[0];
    if (n <= 1) return {b.convert(b.iota({DType::S64, t.shape}, 0), t.dtype)};
    Value keys = b.rngBitGenerator(ctx.rngState(), {DType::U64, {n}})[1];
    Value perm = b.sort({keys, b.iota({DType::S64, {n}}, 0)}, 0, false, true)[1];
    return {b.convert(perm, t.dtype)};
  };
  // Every randperm call reaches its generator out= form (PyTorch's composites of the others), whose meta kernel
  // (torch_tpu/_backward_meta.py) makes CPU's checks; the row still declines what CPU's kernel refuses.
  r.add("aten::randperm.generator_out", randperm).accepts([](const Context& ctx) {
      // CPU's kernel refuses n beyond what the dtype holds exactly (its errors): those calls decline.
      const TensorType& t = ctx.outputs[0];
      if (t.shape.size() != 1) return false;
      int64_t n = t.shape[0];
      auto fits = [n](int digits) { return n <= (int64_t(1) << digits) + 1; };
      switch (t.dtype) {
        case DType::F16: return fits(11);
        case DType::BF16: return fits(8);
        case DType::F32: return fits(24);
        case DType::F64: return true;
        case DType::S8: return n - 1 <= 127;
        case DType::U8: return n - 1 <= 255;
        case DType::S16: return n - 1 <= 32767;
        case DType::U16: return n - 1 <= 65535;
        case DType::S32: return n - 1 <= 2147483647;
        case DType::U32: case DType::S64: case DType::U64: return true;
        default: return false;
      }
    });
  // random_.from(self, int from, int? to), random_.to(self, int to), random_(self): integers in [from, to).
  auto randomRule = [](int form) {
    return [form](Context& ctx) -> std::vector<Value> {
      Value self = ctx.tensor(0);
      DType t = self.dtype();
      int64_t from = 0;
      uint64_t range;  // 0 = all 64-bit values
      auto defaultTo = [&]() -> uint64_t {  // exclusive upper bound when `to` is absent
        return isFloat(t) ? (uint64_t(1) << digits(t)) + 1 : intMax(t) + 1;
      };
      if (form == 0) {  // random_.from
        from = ctx.toInt(1);
        if (ctx.has(2)) {
          if (from >= ctx.toInt(2)) throw InvalidCall(ctx.op(), "random_ expects 'from' to be less than 'to'");
          checkRandomBounds(ctx, t, double(from), double(ctx.toInt(2)) - 1.0);
          range = uint64_t(ctx.toInt(2)) - uint64_t(from);
        } else {
          checkRandomBounds(ctx, t, double(from), double(from));
          uint64_t to = defaultTo();
          range = to - uint64_t(from);  // wraps to 0 for the full int64 range
        }
      } else if (form == 1) {  // random_.to
        if (ctx.toInt(1) <= 0) throw InvalidCall(ctx.op(), "random_ expects 'from' to be less than 'to'");
        checkRandomBounds(ctx, t, 0.0, double(ctx.toInt(1)) - 1.0);
        range = uint64_t(ctx.toInt(1));
      } else {
        range = isFloat(t) ? (uint64_t(1) << digits(t)) + 1 : intMax(t) + 1;
      }
      return {randomRange(ctx, self.type, from, range)};
    };
  };
  r.add("aten::random_.from", randomRule(0)).accepts(realDTypes);
  r.add("aten::random_.to", randomRule(1)).accepts(realDTypes);
  r.add("aten::random_", randomRule(2)).accepts(realDTypes);
}

}  // namespace torch_tpu::lowering
