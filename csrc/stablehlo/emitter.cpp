// The emitter behind shlo::Builder: value naming, op and region text, parameters and the finished module, and the
// operand checks every op builder uses. See builder_impl.h; the op builders live in ops_*.cpp by kind.
#include <algorithm>
#include <atomic>

#include "stablehlo/builder_impl.h"

namespace torch_tpu::shlo {

namespace detail {

// ---------------------------------------------------------------- errors and checks

void fail(const char* op, const std::string& msg) {
  throw BuildError(std::string("stablehlo builder: ") + op + ": " + msg);
}

void requireSameType(const char* op, const Value& a, const Value& b) {
  if (a.type != b.type)
    fail(op, "operand types differ: " + a.type.str() + " vs " + b.type.str() +
                 " (no implicit broadcasting or promotion; use broadcastTo/convert first)");
}

namespace {

bool allowed(DType t, unsigned mask) {
  if (t == DType::Pred) return mask & kPred;
  if (isInteger(t)) return mask & (isSigned(t) ? kSInt : kUInt);
  if (isFloat(t) || isFloat8(t)) return mask & kFloat;
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

}  // namespace

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

}  // namespace detail

using namespace detail;

namespace {

const char* reduceKindName(ReduceKind k) {
  switch (k) {
    case ReduceKind::Sum: return "Sum";
    case ReduceKind::Prod: return "Prod";
    case ReduceKind::Max: return "Max";
    case ReduceKind::Min: return "Min";
    case ReduceKind::And: return "And";
    case ReduceKind::Or: return "Or";
    case ReduceKind::Xor: return "Xor";
  }
  return "?";
}

}  // namespace

// ================================================================== Impl

Builder::Impl::Impl() {
  body.reserve(1024);
  slots.reserve(32);
  types.reserve(32);
}

void Builder::Impl::badValue(const char* op, const Value& v) const {
  if (finished) fail(op, "the builder was already finished");
  if (v.id < 0 || static_cast<size_t>(v.id) >= slots.size())
    fail(op, "invalid Value (id " + std::to_string(v.id) + ") - not produced by this builder");
  fail(op, "Value %" + std::to_string(v.id) + " carries type " + v.type.str() + " but was created as " +
               types[static_cast<size_t>(v.id)].str());
}

std::vector<Value> Builder::Impl::emitMulti(const char* name, const Value* ops, size_t nops, std::string_view regions,
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

Value Builder::Impl::emit(const char* name, std::initializer_list<Value> ops, std::string_view attrs,
                          const TensorType& result, std::string_view regions) {
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

Value Builder::Impl::constantLiteral(const std::string& lit, const TensorType& t) {
  return emit("stablehlo.constant", {}, Attrs().dense("value", lit, t), t);
}

// ------------------------------------------------------------ regions

Builder::Impl::Region::Region(Impl& impl) : I(impl) {
  s.reserve(512);
  header = "({\n      ^bb0(";
}

std::string Builder::Impl::Region::arg(DType t) {
  std::string name = "%" + std::to_string(I.nextNum++);
  if (header.back() != '(') header += ", ";
  header += name;
  header += ": ";
  appendScalarType(header, t);
  return name;
}

std::string Builder::Impl::Region::op(const char* name,
                                      std::initializer_list<std::pair<std::string_view, DType>> ops, DType result,
                                      std::string_view attrs) {
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

std::string Builder::Impl::Region::cmp(std::string_view a, std::string_view b, DType t, Cmp c) {
  return op("stablehlo.compare", {{a, t}, {b, t}}, DType::Pred, Attrs().comparison(c, t));
}

std::string Builder::Impl::Region::finish(std::initializer_list<std::pair<std::string_view, DType>> vals) {
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

const char* Builder::Impl::combinerOp(const char* op, ReduceKind k, DType t) {
  if (t == DType::Pred) {
    switch (k) {
      case ReduceKind::Sum: case ReduceKind::Max: case ReduceKind::Or: return "stablehlo.or";
      case ReduceKind::Xor: return "stablehlo.xor";
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
    case ReduceKind::Xor:
      if (!isInteger(t))
        fail(op, std::string(reduceKindName(k)) + " reduction needs a pred or integer operand, got " + mlirName(t));
      return k == ReduceKind::And ? "stablehlo.and" : k == ReduceKind::Or ? "stablehlo.or" : "stablehlo.xor";
  }
  return "stablehlo.add";
}

std::string Builder::Impl::combinerRegion(const char* op, ReduceKind k, DType t) {
  const char* name = combinerOp(op, k, t);
  Region r(*this);
  std::string a = r.arg(t), b = r.arg(t);
  std::string c = r.bin(name, a, b, t);
  return r.finish({{c, t}});
}

// ================================================================== Builder: signature, module text

namespace {
std::atomic<PrecisionSource> g_precision_source{nullptr};
}  // namespace

void setMatmulPrecisionSource(PrecisionSource source) { g_precision_source.store(source); }

Precision matmulPrecision() {
  PrecisionSource s = g_precision_source.load(std::memory_order_relaxed);
  return s ? s() : Precision::Highest;
}

const char* precisionName(Precision p) {
  switch (p) {
    case Precision::Default: return "DEFAULT";
    case Precision::High: return "HIGH";
    case Precision::Highest: return "HIGHEST";
  }
  return "DEFAULT";
}

Builder::Builder() : impl_(std::make_shared<Impl>()) { impl_->precision = matmulPrecision(); }

Precision Builder::precision() const { return impl_->precision; }
void Builder::setPrecision(Precision p) { impl_->precision = p; }

std::string Builder::precisionConfig(DType operand, const char* dialect) const {
  const char* name = precisionName(operand == DType::F32 ? impl_->precision : Precision::Default);
  std::string one = std::string("#") + dialect + "<precision " + name + ">";
  return "precision_config = [" + one + ", " + one + "]";
}

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

std::string Builder::finish(const std::vector<Value>& results) { return finish(results, nullptr); }

std::string Builder::finish(const std::vector<Value>& results, MainLayout* layout, int num_replicas,
                            int num_partitions) {
  Impl& I = *impl_;
  for (const Value& r : results) I.check("finish", r);
  if (num_replicas < 1 || num_partitions < 1) fail("finish", "replica and partition counts must be positive");
  I.finished = true;
  std::string s;
  s.reserve(I.body.size() + 256 + 48 * (I.params.size() + results.size()));
  s += "module @m attributes {mhlo.num_partitions = ";
  appendInt(s, num_partitions);
  s += " : i32, mhlo.num_replicas = ";
  appendInt(s, num_replicas);
  s += " : i32} {\n  func.func public @main(";
  std::string type;
  for (size_t i = 0; i < I.params.size(); ++i) {
    if (i) s += ", ";
    s += "%arg";
    appendInt(s, static_cast<int64_t>(i));
    s += ": ";
    type.clear();
    appendType(type, I.params[i]);
    s += type;
    if (layout) layout->arg_types.push_back(type);
    if (I.donate[i] >= 0) {
      s += " {";
      s += Attrs().i32("tf.aliasing_output", I.donate[i]).str();
      s += '}';
    }
  }
  s += ") -> (";
  for (size_t i = 0; i < results.size(); ++i) {
    if (i) s += ", ";
    type.clear();
    appendType(type, results[i].type);
    s += type;
    if (layout) layout->result_types.push_back(type);
  }
  s += ") {\n";
  if (layout) layout->body_begin = s.size();
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
  s += "\n";
  if (layout) layout->body_end = s.size();
  s += "  }\n";
  if (layout) layout->top_begin = s.size();
  s += I.toplevel;
  if (layout) layout->top_end = s.size();
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

}  // namespace torch_tpu::shlo
