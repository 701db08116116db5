// StableHLO text emitter (generic op syntax). See builder.h.
#include "stablehlo/builder.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>

namespace torch_tpu::shlo {

namespace {

// ---------------------------------------------------------------- text helpers

inline void appendInt(std::string& s, int64_t v) {
  char b[24];
  auto r = std::to_chars(b, b + sizeof(b), v);
  s.append(b, r.ptr);
}
inline void appendUInt(std::string& s, uint64_t v) {
  char b[24];
  auto r = std::to_chars(b, b + sizeof(b), v);
  s.append(b, r.ptr);
}

inline void appendType(std::string& s, const TensorType& t) {
  s += "tensor<";
  for (int64_t d : t.shape) {
    appendInt(s, d);
    s += 'x';
  }
  s += mlirName(t.dtype);
  s += '>';
}
inline void appendScalarType(std::string& s, DType t) {
  s += "tensor<";
  s += mlirName(t);
  s += '>';
}

std::string shapeStr(const Shape& sh) {
  std::string s = "[";
  for (size_t i = 0; i < sh.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(sh[i]);
  }
  s += ']';
  return s;
}

// "array<i64: 0, 1>"
void appendArray(std::string& s, const std::vector<int64_t>& v) {
  s += "array<i64";
  for (size_t i = 0; i < v.size(); ++i) {
    s += i ? ", " : ": ";
    appendInt(s, v[i]);
  }
  s += '>';
}
// "[0, 1]"
void appendList(std::string& s, const std::vector<int64_t>& v) {
  s += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    appendInt(s, v[i]);
  }
  s += ']';
}
// "dense<[[0, 0], [1, 1]]> : tensor<2x2xi64>"
void appendPadding(std::string& s, const std::vector<std::pair<int64_t, int64_t>>& p) {
  if (p.empty()) {
    s += "dense<> : tensor<0x2xi64>";
    return;
  }
  s += "dense<[";
  for (size_t i = 0; i < p.size(); ++i) {
    if (i) s += ", ";
    s += '[';
    appendInt(s, p[i].first);
    s += ", ";
    appendInt(s, p[i].second);
    s += ']';
  }
  s += "]> : tensor<";
  appendInt(s, static_cast<int64_t>(p.size()));
  s += "x2xi64>";
}

// ---------------------------------------------------------------- float literals

uint16_t floatToBf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
double bf16BitsToDouble(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

#if defined(__FLT16_MANT_DIG__)
uint16_t doubleToF16Bits(double v) {
  _Float16 h = static_cast<_Float16>(v);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
double f16BitsToDouble(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<double>(h);
}
#else
uint16_t doubleToF16Bits(double v) {
  float f = static_cast<float>(v);
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t ax = x & 0x7FFFFFFF;
  if (ax >= 0x7F800000) return static_cast<uint16_t>(sign | 0x7C00 | (ax > 0x7F800000 ? 0x200 : 0));
  if (ax >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);  // overflow after rounding
  if (ax < 0x38800000) {                                               // subnormal half
    float af;
    std::memcpy(&af, &ax, 4);
    uint32_t m = static_cast<uint32_t>(std::nearbyint(af * 16777216.0f));  // 2^24
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t r = ax + 0xC8000FFF + ((ax >> 13) & 1);  // rebias (-112<<23) and round-to-nearest-even
  return static_cast<uint16_t>(sign | (r >> 13));
}
double f16BitsToDouble(uint16_t b) {
  int e = (b >> 10) & 0x1F, m = b & 0x3FF;
  double s = (b & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return s * std::ldexp(m, -24);
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : s * std::numeric_limits<double>::infinity();
  return s * std::ldexp(m + 1024, e - 25);
}
#endif

void appendHex(std::string& s, uint64_t bits, int digits) {
  static const char* kHex = "0123456789ABCDEF";
  s += "0x";
  for (int i = digits - 1; i >= 0; --i) s += kHex[(bits >> (4 * i)) & 0xF];
}

// Appends a literal of `v` rounded to the real float type `t`: a decimal that round-trips exactly through the
// MLIR parser (which reads a double and converts), or the hex bit pattern for inf/nan.
void appendFloatLit(std::string& s, double v, DType t) {
  double r;
  uint64_t bits;
  int digits;
  switch (t) {
    case DType::F64:
      r = v;
      std::memcpy(&bits, &r, 8);
      digits = 16;
      break;
    case DType::F16: {
      uint16_t h = doubleToF16Bits(v);
      bits = h;
      r = f16BitsToDouble(h);
      digits = 4;
      break;
    }
    case DType::BF16: {
      uint16_t h = floatToBf16Bits(static_cast<float>(v));
      bits = h;
      r = bf16BitsToDouble(h);
      digits = 4;
      break;
    }
    default: {  // F32
      float f = static_cast<float>(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      bits = u;
      r = f;
      digits = 8;
      break;
    }
  }
  if (!std::isfinite(r)) {
    appendHex(s, bits, digits);
    return;
  }
  char buf[40];
  auto res = std::to_chars(buf, buf + sizeof(buf), r);
  std::string_view sv(buf, static_cast<size_t>(res.ptr - buf));
  size_t e = sv.find('e');
  std::string_view mant = sv.substr(0, e);
  if (mant.find('.') == std::string_view::npos) {
    s.append(mant);
    s += ".0";
    if (e != std::string_view::npos) s.append(sv.substr(e));
  } else {
    s.append(sv);
  }
}

int64_t wrapSigned(int64_t v, int bits) {
  if (bits >= 64) return v;
  uint64_t u = static_cast<uint64_t>(v) & ((uint64_t{1} << bits) - 1);
  if (u >> (bits - 1)) u |= ~((uint64_t{1} << bits) - 1);
  return static_cast<int64_t>(u);
}
uint64_t wrapUnsigned(int64_t v, int bits) {
  uint64_t u = static_cast<uint64_t>(v);
  if (bits >= 64) return u;
  return u & ((uint64_t{1} << bits) - 1);
}

// Integer / pred literal.
void appendIntLit(std::string& s, int64_t v, DType t) {
  if (t == DType::Pred) {
    s += v ? "true" : "false";
  } else if (isSigned(t)) {
    appendInt(s, wrapSigned(v, bitWidth(t)));
  } else {
    appendUInt(s, wrapUnsigned(v, bitWidth(t)));
  }
}

DType complexComponent(DType t) { return t == DType::C128 ? DType::F64 : DType::F32; }

// Converts a double to the int64 bit pattern used for integer constants (saturating, NaN -> 0).
int64_t doubleToInt(double v, DType t) {
  if (t == DType::Pred) return v != 0;  // NaN -> true, like bool(nan)
  if (std::isnan(v)) return 0;
  if (t == DType::U64 && v >= 9223372036854775808.0) {
    if (v >= 18446744073709551615.0) return -1;
    return static_cast<int64_t>(static_cast<uint64_t>(v));
  }
  if (v >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
  if (v <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

// Appends one element literal of dtype t for value v (floats: rounded; complex: (v, 0)).
void appendElemLit(std::string& s, double v, DType t) {
  if (isFloat(t)) {
    appendFloatLit(s, v, t);
  } else if (isComplex(t)) {
    s += '(';
    appendFloatLit(s, v, complexComponent(t));
    s += ", ";
    appendFloatLit(s, 0.0, complexComponent(t));
    s += ')';
  } else {
    appendIntLit(s, doubleToInt(v, t), t);
  }
}

const char* cmpName(Cmp c) {
  switch (c) {
    case Cmp::EQ: return "EQ";
    case Cmp::NE: return "NE";
    case Cmp::LT: return "LT";
    case Cmp::LE: return "LE";
    case Cmp::GT: return "GT";
    case Cmp::GE: return "GE";
  }
  return "EQ";
}
const char* cmpType(DType t) {
  if (isFloat(t) || isComplex(t)) return "FLOAT";
  if (t == DType::Pred || (isInteger(t) && !isSigned(t))) return "UNSIGNED";
  return "SIGNED";
}
void appendCmpAttrs(std::string& s, Cmp c, DType t) {
  s += "comparison_direction = #stablehlo<comparison_direction ";
  s += cmpName(c);
  s += ">, compare_type = #stablehlo<comparison_type ";
  s += cmpType(t);
  s += '>';
}

const char* reduceKindName(ReduceKind k) {
  switch (k) {
    case ReduceKind::Sum: return "Sum";
    case ReduceKind::Prod: return "Prod";
    case ReduceKind::Max: return "Max";
    case ReduceKind::Min: return "Min";
    case ReduceKind::And: return "And";
    case ReduceKind::Or: return "Or";
  }
  return "?";
}

[[noreturn]] void fail(const char* op, const std::string& msg) {
  throw BuildError(std::string("stablehlo builder: ") + op + ": " + msg);
}

std::string dimsStr(const std::vector<int64_t>& v) { return shapeStr(v); }

}  // namespace

// ================================================================== Impl

struct Builder::Impl {
  // Naming of value ids: sub == -2: "%arg<num>"; sub == -1: "%<num>"; sub >= 0: "%<num>#<sub>".
  struct Slot {
    int32_t num;
    int32_t sub;
  };
  std::vector<Slot> slots;
  std::vector<TensorType> types;  // per id
  std::vector<TensorType> params;
  std::vector<int> donate;
  std::string body;
  int nextNum = 0;
  bool finished = false;
  std::string toplevel;                   // addTopLevel: text after @main
  std::vector<std::string> toplevel_keys;

  Impl() {
    body.reserve(1024);
    slots.reserve(32);
    types.reserve(32);
  }

  void appendRef(std::string& s, int id) const {
    const Slot& sl = slots[static_cast<size_t>(id)];
    if (sl.sub == -2) {
      s += "%arg";
      appendInt(s, sl.num);
    } else {
      s += '%';
      appendInt(s, sl.num);
      if (sl.sub >= 0) {
        s += '#';
        appendInt(s, sl.sub);
      }
    }
  }

  void check(const char* op, const Value& v) const {
    if (finished) fail(op, "the builder was already finished");
    if (v.id < 0 || static_cast<size_t>(v.id) >= slots.size())
      fail(op, "invalid Value (id " + std::to_string(v.id) + ") - not produced by this builder");
    if (v.type != types[static_cast<size_t>(v.id)])
      fail(op, "Value %" + std::to_string(v.id) + " carries type " + v.type.str() + " but was created as " +
                   types[static_cast<size_t>(v.id)].str());
  }

  Value newValue(const TensorType& t, int32_t num, int32_t sub) {
    Value v;
    v.id = static_cast<int>(slots.size());
    v.type = t;
    slots.push_back({num, sub});
    types.push_back(t);
    return v;
  }

  // Emits `%N = "name"(ops) REGIONS {ATTRS} : (types) -> result(s)`; returns the result values.
  std::vector<Value> emitMulti(const char* name, const Value* ops, size_t nops, std::string_view regions,
                               std::string_view attrs, const TensorType* results, size_t nres) {
    if (finished) fail(name, "the builder was already finished");
    int num = nextNum++;
    std::string& s = body;
    s += "    %";
    appendInt(s, num);
    if (nres != 1) {
      s += ':';
      appendInt(s, static_cast<int64_t>(nres));
    }
    s += " = \"";
    s += name;
    s += "\"(";
    for (size_t i = 0; i < nops; ++i) {
      if (i) s += ", ";
      appendRef(s, ops[i].id);
    }
    s += ')';
    if (!regions.empty()) {
      s += ' ';
      s += regions;
    }
    if (!attrs.empty()) {
      s += " {";
      s += attrs;
      s += '}';
    }
    s += " : (";
    for (size_t i = 0; i < nops; ++i) {
      if (i) s += ", ";
      appendType(s, ops[i].type);
    }
    s += ") -> ";
    if (nres != 1) s += '(';
    for (size_t i = 0; i < nres; ++i) {
      if (i) s += ", ";
      appendType(s, results[i]);
    }
    if (nres != 1) s += ')';
    s += '\n';
    std::vector<Value> out;
    out.reserve(nres);
    for (size_t i = 0; i < nres; ++i)
      out.push_back(newValue(results[i], num, nres == 1 ? -1 : static_cast<int32_t>(i)));
    return out;
  }

  Value emit(const char* name, std::initializer_list<Value> ops, std::string_view attrs, const TensorType& result,
             std::string_view regions = {}) {
    if (finished) fail(name, "the builder was already finished");
    int num = nextNum++;
    std::string& s = body;
    s += "    %";
    appendInt(s, num);
    s += " = \"";
    s += name;
    s += "\"(";
    bool first = true;
    for (const Value& v : ops) {
      if (!first) s += ", ";
      first = false;
      appendRef(s, v.id);
    }
    s += ')';
    if (!regions.empty()) {
      s += ' ';
      s += regions;
    }
    if (!attrs.empty()) {
      s += " {";
      s += attrs;
      s += '}';
    }
    s += " : (";
    first = true;
    for (const Value& v : ops) {
      if (!first) s += ", ";
      first = false;
      appendType(s, v.type);
    }
    s += ") -> ";
    appendType(s, result);
    s += '\n';
    return newValue(result, num, -1);
  }

  Value emitVec(const char* name, const std::vector<Value>& ops, std::string_view attrs, const TensorType& result,
                std::string_view regions = {}) {
    return emitMulti(name, ops.data(), ops.size(), regions, attrs, &result, 1)[0];
  }

  Value constantLiteral(const std::string& lit, const TensorType& t) {
    std::string attrs;
    attrs.reserve(40 + lit.size());
    attrs += "value = dense<";
    attrs += lit;
    attrs += "> : ";
    appendType(attrs, t);
    return emit("stablehlo.constant", {}, attrs, t);
  }

  // ------------------------------------------------------------ regions
  // A region is written with fresh SSA numbers from the same counter so names never clash.
  struct Region {
    Impl& I;
    std::string s;
    std::string header;
    explicit Region(Impl& impl) : I(impl) {
      s.reserve(512);
      header = "({\n      ^bb0(";
    }
    std::string arg(DType t) {
      std::string name = "%" + std::to_string(I.nextNum++);
      if (header.back() != '(') header += ", ";
      header += name;
      header += ": ";
      appendScalarType(header, t);
      return name;
    }
    // Emits a scalar op in the region.
    std::string op(const char* name, std::initializer_list<std::pair<std::string_view, DType>> ops, DType result,
                   std::string_view attrs = {}) {
      std::string res = "%" + std::to_string(I.nextNum++);
      s += "      ";
      s += res;
      s += " = \"";
      s += name;
      s += "\"(";
      bool first = true;
      for (auto& o : ops) {
        if (!first) s += ", ";
        first = false;
        s += o.first;
      }
      s += ')';
      if (!attrs.empty()) {
        s += " {";
        s += attrs;
        s += '}';
      }
      s += " : (";
      first = true;
      for (auto& o : ops) {
        if (!first) s += ", ";
        first = false;
        appendScalarType(s, o.second);
      }
      s += ") -> ";
      appendScalarType(s, result);
      s += '\n';
      return res;
    }
    std::string cmp(std::string_view a, std::string_view b, DType t, Cmp c) {
      std::string attrs;
      appendCmpAttrs(attrs, c, t);
      return op("stablehlo.compare", {{a, t}, {b, t}}, DType::Pred, attrs);
    }
    std::string bin(const char* name, std::string_view a, std::string_view b, DType t) {
      return op(name, {{a, t}, {b, t}}, t);
    }
    std::string select(std::string_view p, std::string_view a, std::string_view b, DType t) {
      return op("stablehlo.select", {{p, DType::Pred}, {a, t}, {b, t}}, t);
    }
    // Closes the region returning `vals`.
    std::string finish(std::initializer_list<std::pair<std::string_view, DType>> vals) {
      std::string out;
      out.reserve(header.size() + s.size() + 96);
      out += header;
      out += "):\n";
      out += s;
      out += "      \"stablehlo.return\"(";
      bool first = true;
      for (auto& v : vals) {
        if (!first) out += ", ";
        first = false;
        out += v.first;
      }
      out += ") : (";
      first = true;
      for (auto& v : vals) {
        if (!first) out += ", ";
        first = false;
        appendScalarType(out, v.second);
      }
      out += ") -> ()\n    })";
      return out;
    }
  };

  static const char* combinerOp(const char* op, ReduceKind k, DType t) {
    if (t == DType::Pred) {
      switch (k) {
        case ReduceKind::Sum: case ReduceKind::Max: case ReduceKind::Or: return "stablehlo.or";
        default: return "stablehlo.and";
      }
    }
    switch (k) {
      case ReduceKind::Sum: return "stablehlo.add";
      case ReduceKind::Prod: return "stablehlo.multiply";
      case ReduceKind::Max:
      case ReduceKind::Min:
        if (isComplex(t)) fail(op, "Max/Min reduction is not defined for complex " + std::string(mlirName(t)));
        return k == ReduceKind::Max ? "stablehlo.maximum" : "stablehlo.minimum";
      case ReduceKind::And:
      case ReduceKind::Or:
        if (!isInteger(t))
          fail(op, std::string(reduceKindName(k)) + " reduction needs a pred or integer operand, got " + mlirName(t));
        return k == ReduceKind::And ? "stablehlo.and" : "stablehlo.or";
    }
    return "stablehlo.add";
  }

  // Binary scalar region "(a, b) -> combine(a, b)".
  std::string combinerRegion(const char* op, ReduceKind k, DType t) {
    const char* name = combinerOp(op, k, t);
    Region r(*this);
    std::string a = r.arg(t), b = r.arg(t);
    std::string c = r.bin(name, a, b, t);
    return r.finish({{c, t}});
  }
};

// ================================================================== Builder

namespace {

void requireSameType(const char* op, const Value& a, const Value& b) {
  if (a.type != b.type)
    fail(op, "operand types differ: " + a.type.str() + " vs " + b.type.str() +
                 " (no implicit broadcasting or promotion; use broadcastTo/convert first)");
}

enum Allow : unsigned {
  kPred = 1,
  kSInt = 2,
  kUInt = 4,
  kFloat = 8,
  kComplex = 16,
  kInt = kSInt | kUInt,
  kNum = kInt | kFloat | kComplex,
  kAll = kPred | kNum,
  kFC = kFloat | kComplex,
  kBits = kPred | kInt,
};

bool allowed(DType t, unsigned mask) {
  if (t == DType::Pred) return mask & kPred;
  if (isInteger(t)) return mask & (isSigned(t) ? kSInt : kUInt);
  if (isFloat(t)) return mask & kFloat;
  if (isComplex(t)) return mask & kComplex;
  return false;
}

std::string allowedStr(unsigned mask) {
  std::string s;
  auto add = [&](const char* n) {
    if (!s.empty()) s += "/";
    s += n;
  };
  if (mask & kPred) add("pred");
  if ((mask & kInt) == kInt) {
    add("integer");
  } else {
    if (mask & kSInt) add("signed integer");
    if (mask & kUInt) add("unsigned integer");
  }
  if (mask & kFloat) add("float");
  if (mask & kComplex) add("complex");
  return s;
}

void requireDType(const char* op, const Value& v, unsigned mask) {
  if (!allowed(v.dtype(), mask))
    fail(op, std::string("operand dtype ") + mlirName(v.dtype()) + " not supported (needs " + allowedStr(mask) +
                 "), operand type " + v.type.str());
}

void checkDimsUnique(const char* op, const std::vector<int64_t>& dims, int64_t rank, const char* what) {
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 0)), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= rank)
      fail(op, std::string(what) + " " + dimsStr(dims) + " out of range for rank " + std::to_string(rank));
    if (seen[static_cast<size_t>(d)]) fail(op, std::string(what) + " " + dimsStr(dims) + " has a repeated dimension");
    seen[static_cast<size_t>(d)] = true;
  }
}

void checkShape(const char* op, const Shape& s) {
  for (int64_t d : s)
    if (d < 0) fail(op, "negative dimension size in shape " + shapeStr(s));
}

bool contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

Builder::Builder() : impl_(std::make_shared<Impl>()) {}

Value Builder::parameter(const TensorType& t, int donate_to_output) {
  if (impl_->finished) fail("parameter", "the builder was already finished");
  if (t.dtype == DType::Invalid) fail("parameter", "invalid dtype");
  checkShape("parameter", t.shape);
  int idx = static_cast<int>(impl_->params.size());
  impl_->params.push_back(t);
  impl_->donate.push_back(donate_to_output);
  return impl_->newValue(t, idx, -2);
}

int Builder::numParameters() const { return static_cast<int>(impl_->params.size()); }

std::string Builder::ref(const Value& v) const {
  impl_->check("ref", v);
  std::string s;
  impl_->appendRef(s, v.id);
  return s;
}

std::string Builder::finish(const std::vector<Value>& results) {
  Impl& I = *impl_;
  for (const Value& r : results) I.check("finish", r);
  I.finished = true;
  std::string s;
  s.reserve(I.body.size() + 256 + 48 * (I.params.size() + results.size()));
  s += "module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
       "  func.func public @main(";
  for (size_t i = 0; i < I.params.size(); ++i) {
    if (i) s += ", ";
    s += "%arg";
    appendInt(s, static_cast<int64_t>(i));
    s += ": ";
    appendType(s, I.params[i]);
    if (I.donate[i] >= 0) {
      s += " {tf.aliasing_output = ";
      appendInt(s, I.donate[i]);
      s += " : i32}";
    }
  }
  s += ") -> (";
  for (size_t i = 0; i < results.size(); ++i) {
    if (i) s += ", ";
    appendType(s, results[i].type);
  }
  s += ") {\n";
  s += I.body;
  s += "    return";
  for (size_t i = 0; i < results.size(); ++i) {
    s += i ? ", " : " ";
    I.appendRef(s, results[i].id);
  }
  if (!results.empty()) {
    s += " : ";
    for (size_t i = 0; i < results.size(); ++i) {
      if (i) s += ", ";
      appendType(s, results[i].type);
    }
  }
  s += "\n  }\n";
  s += I.toplevel;
  s += "}\n";
  std::string().swap(I.body);
  return s;
}

// ------------------------------------------------------------------ foreign functions (stablehlo/foreign.h)

bool Builder::addTopLevel(const std::string& key, const std::string& text) {
  Impl& I = *impl_;
  if (I.finished) fail("addTopLevel", "the builder was already finished");
  if (std::find(I.toplevel_keys.begin(), I.toplevel_keys.end(), key) != I.toplevel_keys.end()) return false;
  I.toplevel_keys.push_back(key);
  I.toplevel += text;
  if (!text.empty() && text.back() != '\n') I.toplevel += '\n';
  return true;
}

std::vector<Value> Builder::genericOp(const std::string& name, const std::vector<Value>& operands,
                                      const std::string& attrs, const std::vector<TensorType>& results) {
  for (const Value& v : operands) impl_->check("genericOp", v);
  if (results.empty()) fail("genericOp", name + ": at least one result is needed");
  for (const TensorType& t : results) checkShape("genericOp", t.shape);
  return impl_->emitMulti(name.c_str(), operands.data(), operands.size(), {}, attrs, results.data(), results.size());
}

Value Builder::raw(const std::string& text, const std::string& signature, const TensorType& result) {
  Impl& I = *impl_;
  if (I.finished) fail("raw", "the builder was already finished");
  int num = I.nextNum++;
  I.body += "    %";
  appendInt(I.body, num);
  I.body += " = ";
  I.body += text;
  I.body += " : ";
  I.body += signature;
  I.body += '\n';
  return I.newValue(result, num, -1);
}

// ------------------------------------------------------------------ constants

Value Builder::constant(double v, DType t) { return constantF(v, t, {}); }

Value Builder::constantInt(int64_t v, DType t) {
  if (t == DType::Invalid) fail("constantInt", "invalid dtype");
  std::string lit;
  if (isFloat(t)) {
    appendFloatLit(lit, static_cast<double>(v), t);
  } else if (isComplex(t)) {
    appendElemLit(lit, static_cast<double>(v), t);
  } else {
    appendIntLit(lit, t == DType::Pred ? (v != 0) : v, t);
  }
  return impl_->constantLiteral(lit, TensorType{t, {}});
}

Value Builder::constantF(double v, DType t, const Shape& shape) {
  if (t == DType::Invalid) fail("constant", "invalid dtype");
  checkShape("constant", shape);
  std::string lit;
  appendElemLit(lit, v, t);
  return impl_->constantLiteral(lit, TensorType{t, shape});
}

Value Builder::constantI64s(const std::vector<int64_t>& vals, DType t) {
  if (!(isInteger(t) || t == DType::Pred))
    fail("constantI64s", std::string("needs an integer or pred dtype, got ") + mlirName(t));
  std::string lit;
  lit.reserve(vals.size() * 4 + 4);
  if (!vals.empty()) {
    lit += '[';
    for (size_t i = 0; i < vals.size(); ++i) {
      if (i) lit += ", ";
      appendIntLit(lit, t == DType::Pred ? (vals[i] != 0) : vals[i], t);
    }
    lit += ']';
  }
  return impl_->constantLiteral(lit, TensorType{t, {static_cast<int64_t>(vals.size())}});
}

Value Builder::zeros(const TensorType& t) { return constantF(0.0, t.dtype, t.shape); }

Value Builder::iota(const TensorType& t, int64_t dim) {
  checkShape("iota", t.shape);
  if (dim < 0 || dim >= t.rank())
    fail("iota", "iota_dimension " + std::to_string(dim) + " out of range for " + t.str());
  if (t.dtype == DType::Pred || t.dtype == DType::Invalid) fail("iota", "needs a numeric dtype, got " + t.str());
  std::string attrs = "iota_dimension = ";
  appendInt(attrs, dim);
  attrs += " : i64";
  return impl_->emit("stablehlo.iota", {}, attrs, t);
}

Value Builder::scalarLike(double v, const Value& like) { return constantF(v, like.dtype(), like.shape()); }
Value Builder::zerosLike(const Value& like) { return constantF(0.0, like.dtype(), like.shape()); }
Value Builder::onesLike(const Value& like) { return constantF(1.0, like.dtype(), like.shape()); }

// ------------------------------------------------------------------ elementwise

#define TPU_BINARY(Method, opname, mask)                                 \
  Value Builder::Method(Value a, Value b) {                              \
    impl_->check(#Method, a);                                            \
    impl_->check(#Method, b);                                            \
    requireSameType(#Method, a, b);                                      \
    requireDType(#Method, a, mask);                                      \
    return impl_->emit("stablehlo." opname, {a, b}, {}, a.type);         \
  }

TPU_BINARY(add, "add", kAll)
TPU_BINARY(sub, "subtract", kNum)
TPU_BINARY(mul, "multiply", kAll)
TPU_BINARY(div, "divide", kNum)
TPU_BINARY(rem, "remainder", kNum)
TPU_BINARY(pow, "power", kNum)
TPU_BINARY(max, "maximum", kAll)
TPU_BINARY(min, "minimum", kAll)
TPU_BINARY(atan2, "atan2", kFC)
TPU_BINARY(andOp, "and", kBits)
TPU_BINARY(orOp, "or", kBits)
TPU_BINARY(xorOp, "xor", kBits)
TPU_BINARY(shiftLeft, "shift_left", kInt)
TPU_BINARY(shiftRightArithmetic, "shift_right_arithmetic", kInt)
TPU_BINARY(shiftRightLogical, "shift_right_logical", kInt)
#undef TPU_BINARY

#define TPU_UNARY(Method, opname, mask)                     \
  Value Builder::Method(Value a) {                          \
    impl_->check(#Method, a);                               \
    requireDType(#Method, a, mask);                         \
    return impl_->emit("stablehlo." opname, {a}, {}, a.type); \
  }

TPU_UNARY(neg, "negate", kSInt | kUInt | kFloat | kComplex)
TPU_UNARY(exp, "exponential", kFC)
TPU_UNARY(expm1, "exponential_minus_one", kFC)
TPU_UNARY(log, "log", kFC)
TPU_UNARY(log1p, "log_plus_one", kFC)
TPU_UNARY(sqrt, "sqrt", kFC)
TPU_UNARY(rsqrt, "rsqrt", kFC)
TPU_UNARY(cbrt, "cbrt", kFC)
TPU_UNARY(tanh, "tanh", kFC)
TPU_UNARY(logistic, "logistic", kFC)
TPU_UNARY(sin, "sine", kFC)
TPU_UNARY(cos, "cosine", kFC)
TPU_UNARY(tan, "tan", kFC)
TPU_UNARY(floor, "floor", kFloat)
TPU_UNARY(ceil, "ceil", kFloat)
TPU_UNARY(roundNearestEven, "round_nearest_even", kFloat)
TPU_UNARY(roundNearestAfz, "round_nearest_afz", kFloat)
TPU_UNARY(notOp, "not", kBits)
TPU_UNARY(popcnt, "popcnt", kInt)
TPU_UNARY(clz, "count_leading_zeros", kInt)
#undef TPU_UNARY

Value Builder::abs(Value a) {
  impl_->check("abs", a);
  requireDType("abs", a, kSInt | kUInt | kFloat | kPred);
  if (a.dtype() == DType::Pred || (isInteger(a.dtype()) && !isSigned(a.dtype()))) return a;
  return impl_->emit("stablehlo.abs", {a}, {}, a.type);
}

Value Builder::sign(Value a) {
  impl_->check("sign", a);
  requireDType("sign", a, kSInt | kUInt | kFloat | kComplex | kPred);
  if (a.dtype() == DType::Pred) return a;
  if (isInteger(a.dtype()) && !isSigned(a.dtype())) return convert(compare(a, zerosLike(a), Cmp::NE), a.dtype());
  return impl_->emit("stablehlo.sign", {a}, {}, a.type);
}

Value Builder::isFinite(Value a) {
  impl_->check("isFinite", a);
  requireDType("isFinite", a, kFloat);
  return impl_->emit("stablehlo.is_finite", {a}, {}, TensorType{DType::Pred, a.shape()});
}

Value Builder::chlo(const std::string& name, Value a) {
  impl_->check("chlo", a);
  static const char* kPredResult[] = {"is_inf", "is_neg_inf", "is_pos_inf"};
  static const char* kKnown[] = {"erf",   "erfc", "erf_inv", "lgamma", "digamma", "asin",  "acos",
                                 "atan",  "sinh", "cosh",    "asinh",  "acosh",   "atanh", "tan",
                                 "bessel_i1e", "conj", "is_inf", "is_neg_inf", "is_pos_inf"};
  bool known = false;
  for (const char* k : kKnown) known = known || name == k;
  if (!known) fail("chlo", "unknown unary CHLO op '" + name + "'");
  requireDType(("chlo." + name).c_str(), a, kFC);
  bool pred = false;
  for (const char* k : kPredResult) pred = pred || name == k;
  std::string full = "chlo." + name;
  return impl_->emit(full.c_str(), {a}, {}, pred ? TensorType{DType::Pred, a.shape()} : a.type);
}

Value Builder::compare(Value a, Value b, Cmp dir) {
  impl_->check("compare", a);
  impl_->check("compare", b);
  requireSameType("compare", a, b);
  if (isComplex(a.dtype()) && dir != Cmp::EQ && dir != Cmp::NE)
    fail("compare", "complex operands only support EQ/NE");
  std::string attrs;
  attrs.reserve(120);
  appendCmpAttrs(attrs, dir, a.dtype());
  return impl_->emit("stablehlo.compare", {a, b}, attrs, TensorType{DType::Pred, a.shape()});
}

Value Builder::select(Value pred, Value on_true, Value on_false) {
  impl_->check("select", pred);
  impl_->check("select", on_true);
  impl_->check("select", on_false);
  if (pred.dtype() != DType::Pred) fail("select", "predicate must be pred (i1), got " + pred.type.str());
  requireSameType("select", on_true, on_false);
  if (pred.rank() != 0 && pred.shape() != on_true.shape())
    fail("select", "predicate shape " + pred.type.str() + " must be 0-d or match the operands " + on_true.type.str());
  return impl_->emit("stablehlo.select", {pred, on_true, on_false}, {}, on_true.type);
}

Value Builder::clamp(Value lo, Value x, Value hi) {
  impl_->check("clamp", lo);
  impl_->check("clamp", x);
  impl_->check("clamp", hi);
  for (const Value* b : {&lo, &hi}) {
    if (b->dtype() != x.dtype())
      fail("clamp", "bound dtype " + b->type.str() + " differs from operand " + x.type.str());
    if (b->rank() != 0 && b->shape() != x.shape())
      fail("clamp", "bound " + b->type.str() + " must be 0-d or match operand " + x.type.str());
  }
  requireDType("clamp", x, kAll & ~kComplex);
  return impl_->emit("stablehlo.clamp", {lo, x, hi}, {}, x.type);
}

Value Builder::convert(Value a, DType to) {
  impl_->check("convert", a);
  if (to == DType::Invalid) fail("convert", "invalid target dtype");
  if (a.dtype() == to) return a;
  if (to == DType::Pred) return compare(a, zerosLike(a), Cmp::NE);
  if (isComplex(a.dtype()) && !isComplex(to)) {
    // complex -> real: take the real part (like numpy / torch with a warning)
    Value re = impl_->emit("stablehlo.real", {a}, {}, TensorType{complexComponent(a.dtype()), a.shape()});
    return convert(re, to);
  }
  return impl_->emit("stablehlo.convert", {a}, {}, TensorType{to, a.shape()});
}

Value Builder::bitcastConvert(Value a, DType to) {
  impl_->check("bitcastConvert", a);
  if (to == DType::Invalid) fail("bitcastConvert", "invalid target dtype");
  if (a.dtype() == to) return a;
  if (bitWidth(a.dtype()) != bitWidth(to))
    fail("bitcastConvert", std::string("bit widths differ: ") + mlirName(a.dtype()) + " (" +
                               std::to_string(bitWidth(a.dtype())) + ") vs " + mlirName(to) + " (" +
                               std::to_string(bitWidth(to)) + ")");
  return impl_->emit("stablehlo.bitcast_convert", {a}, {}, TensorType{to, a.shape()});
}

// ------------------------------------------------------------------ shape

Value Builder::reshape(Value a, const Shape& shape) {
  impl_->check("reshape", a);
  checkShape("reshape", shape);
  if (a.shape() == shape) return a;
  TensorType t{a.dtype(), shape};
  if (t.numel() != a.type.numel())
    fail("reshape", "element count differs: " + a.type.str() + " cannot become " + t.str());
  return impl_->emit("stablehlo.reshape", {a}, {}, t);
}

Value Builder::broadcastInDim(Value a, const Shape& shape, const std::vector<int64_t>& dims) {
  impl_->check("broadcastInDim", a);
  checkShape("broadcastInDim", shape);
  if (static_cast<int64_t>(dims.size()) != a.rank())
    fail("broadcastInDim", "broadcast_dimensions " + dimsStr(dims) + " must have one entry per operand dimension of " +
                               a.type.str());
  checkDimsUnique("broadcastInDim", dims, static_cast<int64_t>(shape.size()), "broadcast_dimensions");
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t src = a.shape()[i], dst = shape[static_cast<size_t>(dims[i])];
    if (src != 1 && src != dst)
      fail("broadcastInDim", "operand " + a.type.str() + " dimension " + std::to_string(i) + " (size " +
                                 std::to_string(src) + ") cannot broadcast to result " + shapeStr(shape) +
                                 " dimension " + std::to_string(dims[i]));
  }
  std::string attrs = "broadcast_dimensions = ";
  appendArray(attrs, dims);
  return impl_->emit("stablehlo.broadcast_in_dim", {a}, attrs, TensorType{a.dtype(), shape});
}

Value Builder::broadcastTo(Value a, const Shape& shape) {
  impl_->check("broadcastTo", a);
  if (a.shape() == shape) return a;
  int64_t r = a.rank(), R = static_cast<int64_t>(shape.size());
  if (r > R) fail("broadcastTo", "cannot broadcast " + a.type.str() + " to lower-rank shape " + shapeStr(shape));
  std::vector<int64_t> dims(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) {
    dims[static_cast<size_t>(i)] = R - r + i;
    int64_t src = a.shape()[static_cast<size_t>(i)], dst = shape[static_cast<size_t>(R - r + i)];
    if (src != 1 && src != dst)
      fail("broadcastTo", "shape " + shapeStr(a.shape()) + " is not broadcastable to " + shapeStr(shape));
  }
  return broadcastInDim(a, shape, dims);
}

Value Builder::transpose(Value a, const std::vector<int64_t>& perm) {
  impl_->check("transpose", a);
  if (static_cast<int64_t>(perm.size()) != a.rank())
    fail("transpose", "permutation " + dimsStr(perm) + " does not match rank of " + a.type.str());
  checkDimsUnique("transpose", perm, a.rank(), "permutation");
  bool identity = true;
  Shape out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    identity = identity && perm[i] == static_cast<int64_t>(i);
    out[i] = a.shape()[static_cast<size_t>(perm[i])];
  }
  if (identity) return a;
  std::string attrs = "permutation = ";
  appendArray(attrs, perm);
  return impl_->emit("stablehlo.transpose", {a}, attrs, TensorType{a.dtype(), out});
}

Value Builder::slice(Value a, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
                     const std::vector<int64_t>& strides_in) {
  impl_->check("slice", a);
  size_t r = static_cast<size_t>(a.rank());
  std::vector<int64_t> strides = strides_in.empty() ? std::vector<int64_t>(r, 1) : strides_in;
  if (start.size() != r || limit.size() != r || strides.size() != r)
    fail("slice", "start " + dimsStr(start) + " / limit " + dimsStr(limit) + " / strides " + dimsStr(strides) +
                      " must each have one entry per dimension of " + a.type.str());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    if (strides[i] <= 0) fail("slice", "strides must be positive, got " + dimsStr(strides));
    if (start[i] < 0 || start[i] > limit[i] || limit[i] > a.shape()[i])
      fail("slice", "need 0 <= start <= limit <= dim size in dimension " + std::to_string(i) + ": start " +
                        dimsStr(start) + ", limit " + dimsStr(limit) + ", operand " + a.type.str());
    out[i] = (limit[i] - start[i] + strides[i] - 1) / strides[i];
  }
  std::string attrs;
  attrs.reserve(96);
  attrs += "start_indices = ";
  appendArray(attrs, start);
  attrs += ", limit_indices = ";
  appendArray(attrs, limit);
  attrs += ", strides = ";
  appendArray(attrs, strides);
  return impl_->emit("stablehlo.slice", {a}, attrs, TensorType{a.dtype(), out});
}

Value Builder::sliceInDim(Value a, int64_t start, int64_t limit, int64_t stride, int64_t dim) {
  impl_->check("sliceInDim", a);
  if (dim < 0 || dim >= a.rank())
    fail("sliceInDim", "dimension " + std::to_string(dim) + " out of range for " + a.type.str());
  size_t r = static_cast<size_t>(a.rank());
  std::vector<int64_t> st(r, 0), li(a.shape().begin(), a.shape().end()), sd(r, 1);
  st[static_cast<size_t>(dim)] = start;
  li[static_cast<size_t>(dim)] = limit;
  sd[static_cast<size_t>(dim)] = stride;
  return slice(a, st, li, sd);
}

namespace {
// All start indices must share one integer type; unify to s64 when they differ (or s32 if all fit).
std::vector<Value> unifyStarts(Builder& b, const char* op, const std::vector<Value>& starts) {
  bool same = true;
  for (const Value& s : starts) {
    if (s.rank() != 0 || !isInteger(s.dtype())) fail(op, "start indices must be 0-d integers, got " + s.type.str());
    same = same && s.dtype() == starts[0].dtype();
  }
  if (same) return starts;
  std::vector<Value> out;
  for (const Value& s : starts) out.push_back(b.convert(s, DType::S64));
  return out;
}
}  // namespace

Value Builder::dynamicSlice(Value a, const std::vector<Value>& starts_in, const std::vector<int64_t>& sizes) {
  impl_->check("dynamicSlice", a);
  for (const Value& s : starts_in) impl_->check("dynamicSlice", s);
  if (static_cast<int64_t>(starts_in.size()) != a.rank() || static_cast<int64_t>(sizes.size()) != a.rank())
    fail("dynamicSlice", "need one start index and one size per dimension of " + a.type.str() + " (got " +
                             std::to_string(starts_in.size()) + " starts, sizes " + dimsStr(sizes) + ")");
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] < 0 || sizes[i] > a.shape()[i])
      fail("dynamicSlice", "slice sizes " + dimsStr(sizes) + " exceed operand " + a.type.str());
  std::vector<Value> ops;
  ops.reserve(starts_in.size() + 1);
  ops.push_back(a);
  for (const Value& s : unifyStarts(*this, "dynamicSlice", starts_in)) ops.push_back(s);
  std::string attrs = "slice_sizes = ";
  appendArray(attrs, sizes);
  return impl_->emitVec("stablehlo.dynamic_slice", ops, attrs, TensorType{a.dtype(), sizes});
}

Value Builder::dynamicUpdateSlice(Value a, Value update, const std::vector<Value>& starts_in) {
  impl_->check("dynamicUpdateSlice", a);
  impl_->check("dynamicUpdateSlice", update);
  for (const Value& s : starts_in) impl_->check("dynamicUpdateSlice", s);
  if (update.dtype() != a.dtype() || update.rank() != a.rank())
    fail("dynamicUpdateSlice", "update " + update.type.str() + " must have the dtype and rank of operand " +
                                   a.type.str());
  for (size_t i = 0; i < a.shape().size(); ++i)
    if (update.shape()[i] > a.shape()[i])
      fail("dynamicUpdateSlice", "update " + update.type.str() + " is larger than operand " + a.type.str());
  if (static_cast<int64_t>(starts_in.size()) != a.rank())
    fail("dynamicUpdateSlice", "need one start index per dimension of " + a.type.str());
  std::vector<Value> ops{a, update};
  for (const Value& s : unifyStarts(*this, "dynamicUpdateSlice", starts_in)) ops.push_back(s);
  return impl_->emitVec("stablehlo.dynamic_update_slice", ops, {}, a.type);
}

Value Builder::concatenate(const std::vector<Value>& vals, int64_t dim) {
  if (vals.empty()) fail("concatenate", "needs at least one operand");
  for (const Value& v : vals) impl_->check("concatenate", v);
  const Value& f = vals[0];
  if (dim < 0 || dim >= f.rank())
    fail("concatenate", "dimension " + std::to_string(dim) + " out of range for " + f.type.str());
  if (vals.size() == 1) return f;
  Shape out = f.shape();
  out[static_cast<size_t>(dim)] = 0;
  for (const Value& v : vals) {
    bool ok = v.dtype() == f.dtype() && v.rank() == f.rank();
    for (int64_t i = 0; ok && i < f.rank(); ++i)
      ok = i == dim || v.shape()[static_cast<size_t>(i)] == f.shape()[static_cast<size_t>(i)];
    if (!ok)
      fail("concatenate", "operand " + v.type.str() + " does not match " + f.type.str() +
                              " outside dimension " + std::to_string(dim));
    out[static_cast<size_t>(dim)] += v.shape()[static_cast<size_t>(dim)];
  }
  std::string attrs = "dimension = ";
  appendInt(attrs, dim);
  attrs += " : i64";
  return impl_->emitVec("stablehlo.concatenate", vals, attrs, TensorType{f.dtype(), out});
}

Value Builder::pad(Value a, Value pad_value, const std::vector<int64_t>& low, const std::vector<int64_t>& high,
                   const std::vector<int64_t>& interior_in) {
  impl_->check("pad", a);
  impl_->check("pad", pad_value);
  size_t r = static_cast<size_t>(a.rank());
  std::vector<int64_t> interior = interior_in.empty() ? std::vector<int64_t>(r, 0) : interior_in;
  if (pad_value.rank() != 0 || pad_value.dtype() != a.dtype())
    fail("pad", "padding value must be a 0-d " + std::string(mlirName(a.dtype())) + ", got " + pad_value.type.str());
  if (low.size() != r || high.size() != r || interior.size() != r)
    fail("pad", "low " + dimsStr(low) + " / high " + dimsStr(high) + " / interior " + dimsStr(interior) +
                    " must each have one entry per dimension of " + a.type.str());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    if (interior[i] < 0) fail("pad", "interior padding must be >= 0, got " + dimsStr(interior));
    int64_t d = a.shape()[i];
    out[i] = low[i] + high[i] + d + std::max<int64_t>(d - 1, 0) * interior[i];
    if (out[i] < 0) fail("pad", "negative padding makes dimension " + std::to_string(i) + " negative");
  }
  std::string attrs;
  attrs += "edge_padding_low = ";
  appendArray(attrs, low);
  attrs += ", edge_padding_high = ";
  appendArray(attrs, high);
  attrs += ", interior_padding = ";
  appendArray(attrs, interior);
  return impl_->emit("stablehlo.pad", {a, pad_value}, attrs, TensorType{a.dtype(), out});
}

Value Builder::reverse(Value a, const std::vector<int64_t>& dims) {
  impl_->check("reverse", a);
  checkDimsUnique("reverse", dims, a.rank(), "dimensions");
  if (dims.empty()) return a;
  std::string attrs = "dimensions = ";
  appendArray(attrs, dims);
  return impl_->emit("stablehlo.reverse", {a}, attrs, a.type);
}

// ------------------------------------------------------------------ reductions

namespace {
Value identityOf(Builder& b, ReduceKind k, DType t) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (k) {
    case ReduceKind::Sum:
    case ReduceKind::Or:
      return b.constantInt(0, t);
    case ReduceKind::Prod:
      return b.constantInt(1, t);
    case ReduceKind::And:
      return b.constantInt(t == DType::Pred ? 1 : -1, t);  // all ones (wrapped for unsigned)
    case ReduceKind::Max:
      if (isFloat(t)) return b.constant(-inf, t);
      if (t == DType::Pred) return b.constantInt(0, t);
      if (isSigned(t)) return b.constantInt(std::numeric_limits<int64_t>::min() >> (64 - bitWidth(t)), t);
      return b.constantInt(0, t);
    case ReduceKind::Min:
      if (isFloat(t)) return b.constant(inf, t);
      if (t == DType::Pred) return b.constantInt(1, t);
      if (isSigned(t)) return b.constantInt(std::numeric_limits<int64_t>::max() >> (64 - bitWidth(t)), t);
      return b.constantInt(-1, t);  // wraps to the unsigned maximum
  }
  return b.constantInt(0, t);
}
}  // namespace

Value Builder::reduce(Value a, const std::vector<int64_t>& dims, ReduceKind kind) {
  impl_->check("reduce", a);
  checkDimsUnique("reduce", dims, a.rank(), "dimensions");
  const char* op = Impl::combinerOp("reduce", kind, a.dtype());  // validates dtype
  (void)op;
  if (dims.empty()) return a;
  Value init = identityOf(*this, kind, a.dtype());
  std::string region = impl_->combinerRegion("reduce", kind, a.dtype());
  std::vector<int64_t> sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  Shape out;
  for (int64_t i = 0; i < a.rank(); ++i)
    if (!contains(dims, i)) out.push_back(a.shape()[static_cast<size_t>(i)]);
  std::string attrs = "dimensions = ";
  appendArray(attrs, sorted);
  return impl_->emit("stablehlo.reduce", {a, init}, attrs, TensorType{a.dtype(), out}, region);
}

std::vector<Value> Builder::argReduce(Value a, Value indices, int64_t dim, bool is_max) {
  impl_->check("argReduce", a);
  impl_->check("argReduce", indices);
  if (dim < 0 || dim >= a.rank())
    fail("argReduce", "dimension " + std::to_string(dim) + " out of range for " + a.type.str());
  if (indices.shape() != a.shape() || !isInteger(indices.dtype()))
    fail("argReduce", "indices must be an integer tensor shaped like the values: values " + a.type.str() +
                          ", indices " + indices.type.str());
  requireDType("argReduce", a, kAll & ~kComplex);
  DType vt = a.dtype(), it = indices.dtype();
  Value vinit = identityOf(*this, is_max ? ReduceKind::Max : ReduceKind::Min, vt);
  Value iinit = constantInt(0, it);

  Impl::Region r(*impl_);
  std::string av = r.arg(vt), ai = r.arg(it), bv = r.arg(vt), bi = r.arg(it);
  // pick_a: a strictly better (or a NaN and b not); tie: equal (or both NaN) -> smaller index
  std::string better = r.cmp(av, bv, vt, is_max ? Cmp::GT : Cmp::LT);
  std::string tie = r.cmp(av, bv, vt, Cmp::EQ);
  if (isFloat(vt)) {
    std::string anan = r.cmp(av, av, vt, Cmp::NE);
    std::string bnan = r.cmp(bv, bv, vt, Cmp::NE);
    std::string bnum = r.op("stablehlo.not", {{bnan, DType::Pred}}, DType::Pred);
    std::string anan_only = r.bin("stablehlo.and", anan, bnum, DType::Pred);
    better = r.bin("stablehlo.or", better, anan_only, DType::Pred);
    std::string both = r.bin("stablehlo.and", anan, bnan, DType::Pred);
    tie = r.bin("stablehlo.or", tie, both, DType::Pred);
  }
  std::string val = r.select(better, av, bv, vt);
  std::string minidx = r.bin("stablehlo.minimum", ai, bi, it);
  std::string pickidx = r.select(better, ai, bi, it);
  std::string idx = r.select(tie, minidx, pickidx, it);
  std::string region = r.finish({{val, vt}, {idx, it}});

  Shape out;
  for (int64_t i = 0; i < a.rank(); ++i)
    if (i != dim) out.push_back(a.shape()[static_cast<size_t>(i)]);
  std::string attrs = "dimensions = ";
  appendArray(attrs, {dim});
  Value ops[4] = {a, indices, vinit, iinit};
  TensorType res[2] = {TensorType{vt, out}, TensorType{it, out}};
  return impl_->emitMulti("stablehlo.reduce", ops, 4, region, attrs, res, 2);
}

Value Builder::reduceWindow(Value a, Value init, ReduceKind kind, const std::vector<int64_t>& window,
                            const std::vector<int64_t>& strides_in, const std::vector<int64_t>& base_dil_in,
                            const std::vector<int64_t>& win_dil_in,
                            const std::vector<std::pair<int64_t, int64_t>>& padding_in) {
  impl_->check("reduceWindow", a);
  impl_->check("reduceWindow", init);
  size_t r = static_cast<size_t>(a.rank());
  if (init.rank() != 0 || init.dtype() != a.dtype())
    fail("reduceWindow", "init must be a 0-d " + std::string(mlirName(a.dtype())) + ", got " + init.type.str());
  auto ones = [&](const std::vector<int64_t>& v) { return v.empty() ? std::vector<int64_t>(r, 1) : v; };
  std::vector<int64_t> strides = ones(strides_in), bd = ones(base_dil_in), wd = ones(win_dil_in);
  auto padding = padding_in.empty() ? std::vector<std::pair<int64_t, int64_t>>(r, {0, 0}) : padding_in;
  if (window.size() != r || strides.size() != r || bd.size() != r || wd.size() != r || padding.size() != r)
    fail("reduceWindow", "window " + dimsStr(window) + ", strides, dilations and padding need one entry per "
                         "dimension of " + a.type.str());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    if (window[i] <= 0 || strides[i] <= 0 || bd[i] <= 0 || wd[i] <= 0)
      fail("reduceWindow", "window sizes, strides and dilations must be positive");
    int64_t padded = (a.shape()[i] > 0 ? (a.shape()[i] - 1) * bd[i] + 1 : 0) + padding[i].first + padding[i].second;
    int64_t eff = (window[i] - 1) * wd[i] + 1;
    out[i] = padded < eff ? 0 : (padded - eff) / strides[i] + 1;
  }
  std::string region = impl_->combinerRegion("reduceWindow", kind, a.dtype());
  std::string attrs;
  attrs += "window_dimensions = ";
  appendArray(attrs, window);
  attrs += ", window_strides = ";
  appendArray(attrs, strides);
  attrs += ", base_dilations = ";
  appendArray(attrs, bd);
  attrs += ", window_dilations = ";
  appendArray(attrs, wd);
  attrs += ", padding = ";
  appendPadding(attrs, padding);
  return impl_->emit("stablehlo.reduce_window", {a, init}, attrs, TensorType{a.dtype(), out}, region);
}

// ------------------------------------------------------------------ linear algebra

Value Builder::dotGeneral(Value lhs, Value rhs, const std::vector<int64_t>& lb, const std::vector<int64_t>& rb,
                          const std::vector<int64_t>& lc, const std::vector<int64_t>& rc, DType result) {
  impl_->check("dotGeneral", lhs);
  impl_->check("dotGeneral", rhs);
  if (lhs.dtype() != rhs.dtype())
    fail("dotGeneral", "operand dtypes differ: " + lhs.type.str() + " vs " + rhs.type.str());
  if (lb.size() != rb.size() || lc.size() != rc.size())
    fail("dotGeneral", "batching/contracting dimension lists must pair up: lhs_batch " + dimsStr(lb) +
                           ", rhs_batch " + dimsStr(rb) + ", lhs_contract " + dimsStr(lc) + ", rhs_contract " +
                           dimsStr(rc));
  std::vector<int64_t> lall = lb, rall = rb;
  lall.insert(lall.end(), lc.begin(), lc.end());
  rall.insert(rall.end(), rc.begin(), rc.end());
  checkDimsUnique("dotGeneral", lall, lhs.rank(), "lhs batching+contracting dimensions");
  checkDimsUnique("dotGeneral", rall, rhs.rank(), "rhs batching+contracting dimensions");
  for (size_t i = 0; i < lall.size(); ++i)
    if (lhs.shape()[static_cast<size_t>(lall[i])] != rhs.shape()[static_cast<size_t>(rall[i])])
      fail("dotGeneral", "size mismatch between lhs dimension " + std::to_string(lall[i]) + " and rhs dimension " +
                             std::to_string(rall[i]) + ": " + lhs.type.str() + " vs " + rhs.type.str());
  Shape out;
  for (int64_t d : lb) out.push_back(lhs.shape()[static_cast<size_t>(d)]);
  for (int64_t i = 0; i < lhs.rank(); ++i)
    if (!contains(lall, i)) out.push_back(lhs.shape()[static_cast<size_t>(i)]);
  for (int64_t i = 0; i < rhs.rank(); ++i)
    if (!contains(rall, i)) out.push_back(rhs.shape()[static_cast<size_t>(i)]);
  std::string attrs;
  attrs.reserve(160);
  attrs += "dot_dimension_numbers = #stablehlo.dot<";
  bool first = true;
  auto field = [&](const char* name, const std::vector<int64_t>& v) {
    if (v.empty()) return;
    if (!first) attrs += ", ";
    first = false;
    attrs += name;
    attrs += " = ";
    appendList(attrs, v);
  };
  field("lhs_batching_dimensions", lb);
  field("rhs_batching_dimensions", rb);
  field("lhs_contracting_dimensions", lc);
  field("rhs_contracting_dimensions", rc);
  attrs += '>';
  return impl_->emit("stablehlo.dot_general", {lhs, rhs}, attrs,
                     TensorType{result == DType::Invalid ? lhs.dtype() : result, out});
}

Value Builder::convolution(Value lhs, Value rhs, const ConvDims& d, const std::vector<int64_t>& strides_in,
                           const std::vector<std::pair<int64_t, int64_t>>& padding_in,
                           const std::vector<int64_t>& lhs_dil_in, const std::vector<int64_t>& rhs_dil_in,
                           int64_t feature_group_count, int64_t batch_group_count, const Shape& result_shape,
                           DType result) {
  impl_->check("convolution", lhs);
  impl_->check("convolution", rhs);
  if (lhs.dtype() != rhs.dtype())
    fail("convolution", "operand dtypes differ: " + lhs.type.str() + " vs " + rhs.type.str());
  size_t ns = d.input_spatial.size();
  if (d.kernel_spatial.size() != ns || d.output_spatial.size() != ns || lhs.rank() != static_cast<int64_t>(ns + 2) ||
      rhs.rank() != static_cast<int64_t>(ns + 2) || static_cast<int64_t>(result_shape.size()) != lhs.rank())
    fail("convolution", "ranks do not match the " + std::to_string(ns) + " spatial dimensions: input " +
                            lhs.type.str() + ", kernel " + rhs.type.str() + ", result " + shapeStr(result_shape));
  std::vector<int64_t> in = {d.input_batch, d.input_feature}, kn = {d.kernel_output_feature, d.kernel_input_feature},
                       on = {d.output_batch, d.output_feature};
  in.insert(in.end(), d.input_spatial.begin(), d.input_spatial.end());
  kn.insert(kn.end(), d.kernel_spatial.begin(), d.kernel_spatial.end());
  on.insert(on.end(), d.output_spatial.begin(), d.output_spatial.end());
  checkDimsUnique("convolution", in, lhs.rank(), "input dimension numbers");
  checkDimsUnique("convolution", kn, rhs.rank(), "kernel dimension numbers");
  checkDimsUnique("convolution", on, lhs.rank(), "output dimension numbers");
  auto ones = [&](const std::vector<int64_t>& v) { return v.empty() ? std::vector<int64_t>(ns, 1) : v; };
  std::vector<int64_t> strides = ones(strides_in), ld = ones(lhs_dil_in), rd = ones(rhs_dil_in);
  auto padding = padding_in.empty() ? std::vector<std::pair<int64_t, int64_t>>(ns, {0, 0}) : padding_in;
  if (strides.size() != ns || ld.size() != ns || rd.size() != ns || padding.size() != ns)
    fail("convolution", "strides/padding/dilations need one entry per spatial dimension (" + std::to_string(ns) + ")");
  if (feature_group_count < 1 || batch_group_count < 1) fail("convolution", "group counts must be >= 1");
  const Shape& L = lhs.shape();
  const Shape& K = rhs.shape();
  auto at = [](const Shape& s, int64_t i) { return s[static_cast<size_t>(i)]; };
  if (at(L, d.input_feature) != at(K, d.kernel_input_feature) * feature_group_count)
    fail("convolution", "input features (" + std::to_string(at(L, d.input_feature)) +
                            ") must equal kernel input features (" + std::to_string(at(K, d.kernel_input_feature)) +
                            ") * feature_group_count (" + std::to_string(feature_group_count) + ")");
  Shape expect(static_cast<size_t>(lhs.rank()));
  expect[static_cast<size_t>(d.output_batch)] = at(L, d.input_batch) / batch_group_count;
  expect[static_cast<size_t>(d.output_feature)] = at(K, d.kernel_output_feature);
  for (size_t i = 0; i < ns; ++i) {
    int64_t x = at(L, d.input_spatial[i]);
    int64_t padded = (x > 0 ? (x - 1) * ld[i] + 1 : 0) + padding[i].first + padding[i].second;
    int64_t eff = (at(K, d.kernel_spatial[i]) - 1) * rd[i] + 1;
    expect[static_cast<size_t>(d.output_spatial[i])] = padded < eff ? 0 : (padded - eff) / strides[i] + 1;
  }
  if (expect != result_shape)
    fail("convolution", "result shape " + shapeStr(result_shape) + " does not match the computed " +
                            shapeStr(expect) + " (input " + lhs.type.str() + ", kernel " + rhs.type.str() + ")");
  std::string attrs;
  attrs.reserve(400);
  attrs += "batch_group_count = ";
  appendInt(attrs, batch_group_count);
  attrs += " : i64, dimension_numbers = #stablehlo.conv<raw input_batch_dimension = ";
  appendInt(attrs, d.input_batch);
  attrs += ", input_feature_dimension = ";
  appendInt(attrs, d.input_feature);
  attrs += ", input_spatial_dimensions = ";
  appendList(attrs, d.input_spatial);
  attrs += ", kernel_input_feature_dimension = ";
  appendInt(attrs, d.kernel_input_feature);
  attrs += ", kernel_output_feature_dimension = ";
  appendInt(attrs, d.kernel_output_feature);
  attrs += ", kernel_spatial_dimensions = ";
  appendList(attrs, d.kernel_spatial);
  attrs += ", output_batch_dimension = ";
  appendInt(attrs, d.output_batch);
  attrs += ", output_feature_dimension = ";
  appendInt(attrs, d.output_feature);
  attrs += ", output_spatial_dimensions = ";
  appendList(attrs, d.output_spatial);
  attrs += ">, feature_group_count = ";
  appendInt(attrs, feature_group_count);
  attrs += " : i64, lhs_dilation = ";
  appendArray(attrs, ld);
  attrs += ", padding = ";
  appendPadding(attrs, padding);
  attrs += ", rhs_dilation = ";
  appendArray(attrs, rd);
  attrs += ", window_strides = ";
  appendArray(attrs, strides);
  return impl_->emit("stablehlo.convolution", {lhs, rhs}, attrs,
                     TensorType{result == DType::Invalid ? lhs.dtype() : result, result_shape});
}

// ------------------------------------------------------------------ indexing

Value Builder::gather(Value operand, Value indices, const GatherDims& d, const std::vector<int64_t>& slice_sizes,
                      const Shape& result_shape, bool indices_are_sorted) {
  impl_->check("gather", operand);
  impl_->check("gather", indices);
  if (!isInteger(indices.dtype())) fail("gather", "indices must be integers, got " + indices.type.str());
  if (static_cast<int64_t>(slice_sizes.size()) != operand.rank())
    fail("gather", "slice_sizes " + dimsStr(slice_sizes) + " needs one entry per dimension of " + operand.type.str());
  if (d.index_vector_dim < 0 || d.index_vector_dim > indices.rank())
    fail("gather", "index_vector_dim " + std::to_string(d.index_vector_dim) + " out of range for indices " +
                       indices.type.str());
  int64_t ivsize = d.index_vector_dim == indices.rank() ? 1 : indices.shape()[static_cast<size_t>(d.index_vector_dim)];
  if (static_cast<int64_t>(d.start_index_map.size()) != ivsize)
    fail("gather", "start_index_map " + dimsStr(d.start_index_map) + " must have " + std::to_string(ivsize) +
                       " entries (index vector size of " + indices.type.str() + ")");
  checkDimsUnique("gather", d.start_index_map, operand.rank(), "start_index_map");
  checkDimsUnique("gather", d.collapsed_slice_dims, operand.rank(), "collapsed_slice_dims");
  checkDimsUnique("gather", d.operand_batching_dims, operand.rank(), "operand_batching_dims");
  for (size_t i = 0; i < slice_sizes.size(); ++i)
    if (slice_sizes[i] < 0 || slice_sizes[i] > operand.shape()[i])
      fail("gather", "slice_sizes " + dimsStr(slice_sizes) + " exceed operand " + operand.type.str());
  for (int64_t c : d.collapsed_slice_dims)
    if (slice_sizes[static_cast<size_t>(c)] > 1)
      fail("gather", "collapsed dimension " + std::to_string(c) + " must have slice size <= 1");
  // expected result shape
  Shape batch;
  for (int64_t i = 0; i < indices.rank(); ++i)
    if (i != d.index_vector_dim) batch.push_back(indices.shape()[static_cast<size_t>(i)]);
  Shape offs;
  for (int64_t i = 0; i < operand.rank(); ++i)
    if (!contains(d.collapsed_slice_dims, i) && !contains(d.operand_batching_dims, i))
      offs.push_back(slice_sizes[static_cast<size_t>(i)]);
  if (offs.size() != d.offset_dims.size())
    fail("gather", "offset_dims " + dimsStr(d.offset_dims) + " must have " + std::to_string(offs.size()) +
                       " entries (operand rank minus collapsed/batching dims)");
  size_t rr = batch.size() + offs.size();
  checkDimsUnique("gather", d.offset_dims, static_cast<int64_t>(rr), "offset_dims");
  Shape expect(rr);
  size_t bi = 0, oi = 0;
  std::vector<int64_t> od = d.offset_dims;
  std::sort(od.begin(), od.end());
  for (size_t i = 0; i < rr; ++i) expect[i] = contains(od, static_cast<int64_t>(i)) ? offs[oi++] : batch[bi++];
  if (expect != result_shape)
    fail("gather", "result shape " + shapeStr(result_shape) + " does not match the computed " + shapeStr(expect));
  std::string attrs;
  attrs.reserve(256);
  attrs += "dimension_numbers = #stablehlo.gather<offset_dims = ";
  appendList(attrs, d.offset_dims);
  if (!d.collapsed_slice_dims.empty()) {
    attrs += ", collapsed_slice_dims = ";
    appendList(attrs, d.collapsed_slice_dims);
  }
  if (!d.operand_batching_dims.empty()) {
    attrs += ", operand_batching_dims = ";
    appendList(attrs, d.operand_batching_dims);
  }
  if (!d.start_indices_batching_dims.empty()) {
    attrs += ", start_indices_batching_dims = ";
    appendList(attrs, d.start_indices_batching_dims);
  }
  attrs += ", start_index_map = ";
  appendList(attrs, d.start_index_map);
  attrs += ", index_vector_dim = ";
  appendInt(attrs, d.index_vector_dim);
  attrs += ">, indices_are_sorted = ";
  attrs += indices_are_sorted ? "true" : "false";
  attrs += ", slice_sizes = ";
  appendArray(attrs, slice_sizes);
  return impl_->emit("stablehlo.gather", {operand, indices}, attrs, TensorType{operand.dtype(), result_shape});
}

Value Builder::scatter(Value operand, Value indices, Value updates, const ScatterDims& d,
                       std::optional<ReduceKind> combiner, bool indices_are_sorted, bool unique_indices) {
  impl_->check("scatter", operand);
  impl_->check("scatter", indices);
  impl_->check("scatter", updates);
  if (!isInteger(indices.dtype())) fail("scatter", "indices must be integers, got " + indices.type.str());
  if (updates.dtype() != operand.dtype())
    fail("scatter", "updates " + updates.type.str() + " must have the dtype of operand " + operand.type.str());
  if (d.index_vector_dim < 0 || d.index_vector_dim > indices.rank())
    fail("scatter", "index_vector_dim " + std::to_string(d.index_vector_dim) + " out of range for indices " +
                        indices.type.str());
  int64_t ivsize = d.index_vector_dim == indices.rank() ? 1 : indices.shape()[static_cast<size_t>(d.index_vector_dim)];
  if (static_cast<int64_t>(d.scatter_dims_to_operand_dims.size()) != ivsize)
    fail("scatter", "scatter_dims_to_operand_dims " + dimsStr(d.scatter_dims_to_operand_dims) + " must have " +
                        std::to_string(ivsize) + " entries");
  int64_t scatter_rank = indices.rank() - (d.index_vector_dim < indices.rank() ? 1 : 0);
  if (updates.rank() != scatter_rank + static_cast<int64_t>(d.update_window_dims.size()))
    fail("scatter", "updates " + updates.type.str() + " rank must be " +
                        std::to_string(scatter_rank + static_cast<int64_t>(d.update_window_dims.size())) +
                        " (scatter batch rank + update_window_dims)");
  if (static_cast<int64_t>(d.update_window_dims.size() + d.inserted_window_dims.size() +
                           d.input_batching_dims.size()) != operand.rank())
    fail("scatter", "update_window_dims + inserted_window_dims + input_batching_dims must cover operand rank " +
                        std::to_string(operand.rank()));
  checkDimsUnique("scatter", d.update_window_dims, updates.rank(), "update_window_dims");
  checkDimsUnique("scatter", d.inserted_window_dims, operand.rank(), "inserted_window_dims");
  checkDimsUnique("scatter", d.scatter_dims_to_operand_dims, operand.rank(), "scatter_dims_to_operand_dims");
  DType t = operand.dtype();
  std::string region;
  if (combiner) {
    region = impl_->combinerRegion("scatter", *combiner, t);
  } else {
    Impl::Region r(*impl_);
    r.arg(t);
    std::string b = r.arg(t);
    region = r.finish({{b, t}});
  }
  std::string attrs;
  attrs.reserve(256);
  attrs += "indices_are_sorted = ";
  attrs += indices_are_sorted ? "true" : "false";
  attrs += ", scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = ";
  appendList(attrs, d.update_window_dims);
  if (!d.inserted_window_dims.empty()) {
    attrs += ", inserted_window_dims = ";
    appendList(attrs, d.inserted_window_dims);
  }
  if (!d.input_batching_dims.empty()) {
    attrs += ", input_batching_dims = ";
    appendList(attrs, d.input_batching_dims);
  }
  if (!d.scatter_indices_batching_dims.empty()) {
    attrs += ", scatter_indices_batching_dims = ";
    appendList(attrs, d.scatter_indices_batching_dims);
  }
  attrs += ", scatter_dims_to_operand_dims = ";
  appendList(attrs, d.scatter_dims_to_operand_dims);
  attrs += ", index_vector_dim = ";
  appendInt(attrs, d.index_vector_dim);
  attrs += ">, unique_indices = ";
  attrs += unique_indices ? "true" : "false";
  return impl_->emit("stablehlo.scatter", {operand, indices, updates}, attrs, operand.type, region);
}

std::vector<Value> Builder::sort(const std::vector<Value>& operands, int64_t dim, bool descending, bool stable) {
  return sort(operands, dim, descending, stable, 1);
}

std::vector<Value> Builder::sort(const std::vector<Value>& operands, int64_t dim, bool descending, bool stable,
                                 int num_keys) {
  if (operands.empty()) fail("sort", "needs at least one operand");
  for (const Value& v : operands) impl_->check("sort", v);
  const Value& k = operands[0];
  for (const Value& v : operands)
    if (v.shape() != k.shape())
      fail("sort", "all operands must have the same shape: " + k.type.str() + " vs " + v.type.str());
  if (dim < 0 || dim >= k.rank()) fail("sort", "dimension " + std::to_string(dim) + " out of range for " + k.type.str());
  if (num_keys < 1 || num_keys > static_cast<int>(operands.size()))
    fail("sort", "num_keys " + std::to_string(num_keys) + " must be in [1, " + std::to_string(operands.size()) + "]");
  for (int i = 0; i < num_keys; ++i) requireDType("sort", operands[static_cast<size_t>(i)], kAll & ~kComplex);
  Impl::Region r(*impl_);
  std::vector<std::string> xs, ys;
  for (const Value& v : operands) {
    xs.push_back(r.arg(v.dtype()));
    ys.push_back(r.arg(v.dtype()));
  }
  // Per key: ascending "x before y" = x < y, or (x is a number and y is NaN); descending: x > y, or (x is NaN and y
  // is a number). Ties (x == y, or both NaN) defer to the next key.
  std::string res;
  for (int i = num_keys - 1; i >= 0; --i) {
    DType kt = operands[static_cast<size_t>(i)].dtype();
    const std::string& x = xs[static_cast<size_t>(i)];
    const std::string& y = ys[static_cast<size_t>(i)];
    std::string before = r.cmp(x, y, kt, descending ? Cmp::GT : Cmp::LT);
    std::string xnan, ynan;
    if (isFloat(kt)) {
      xnan = r.cmp(x, x, kt, Cmp::NE);
      ynan = r.cmp(y, y, kt, Cmp::NE);
      std::string nanpart =
          descending ? r.bin("stablehlo.and", xnan, r.op("stablehlo.not", {{ynan, DType::Pred}}, DType::Pred),
                             DType::Pred)
                     : r.bin("stablehlo.and", r.op("stablehlo.not", {{xnan, DType::Pred}}, DType::Pred), ynan,
                             DType::Pred);
      before = r.bin("stablehlo.or", before, nanpart, DType::Pred);
    }
    if (!res.empty()) {
      std::string eq = r.cmp(x, y, kt, Cmp::EQ);
      if (isFloat(kt)) eq = r.bin("stablehlo.or", eq, r.bin("stablehlo.and", xnan, ynan, DType::Pred), DType::Pred);
      before = r.bin("stablehlo.or", before, r.bin("stablehlo.and", eq, res, DType::Pred), DType::Pred);
    }
    res = before;
  }
  std::string region = r.finish({{res, DType::Pred}});
  std::string attrs = "dimension = ";
  appendInt(attrs, dim);
  attrs += " : i64, is_stable = ";
  attrs += stable ? "true" : "false";
  std::vector<TensorType> res_types;
  res_types.reserve(operands.size());
  for (const Value& v : operands) res_types.push_back(v.type);
  return impl_->emitMulti("stablehlo.sort", operands.data(), operands.size(), region, attrs, res_types.data(),
                          res_types.size());
}

// ------------------------------------------------------------------ random

std::vector<Value> Builder::rngBitGenerator(Value state, const TensorType& t) {
  impl_->check("rngBitGenerator", state);
  if (state.type != TensorType{DType::U64, {2}})
    fail("rngBitGenerator", "state must be tensor<2xui64> for THREE_FRY, got " + state.type.str());
  checkShape("rngBitGenerator", t.shape);
  if (!isInteger(t.dtype) && !isFloat(t.dtype))
    fail("rngBitGenerator", "output must be an integer (usually unsigned) type, got " + t.str());
  TensorType res[2] = {state.type, t};
  return impl_->emitMulti("stablehlo.rng_bit_generator", &state, 1, {},
                          "rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>", res, 2);
}

}  // namespace torch_tpu::shlo
