// Attribute text (see attrs.h).
#include "stablehlo/attrs.h"

#include "stablehlo/literals.h"

namespace torch_tpu::shlo::detail {

namespace {

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
  if (isFloat(t) || isFloat8(t) || isComplex(t)) return "FLOAT";
  if (t == DType::Pred || (isInteger(t) && !isSigned(t))) return "UNSIGNED";
  return "SIGNED";
}

}  // namespace

std::string& Attrs::entry(std::string_view name) {
  if (!s_.empty()) s_ += ", ";
  s_ += name;
  s_ += " = ";
  return s_;
}

Attrs& Attrs::entryText(std::string_view text) {
  if (!s_.empty()) s_ += ", ";
  s_ += text;
  return *this;
}

Attrs& Attrs::i64(std::string_view name, int64_t v) {
  appendInt(entry(name), v);
  s_ += " : i64";
  return *this;
}

Attrs& Attrs::i32(std::string_view name, int64_t v) {
  appendInt(entry(name), v);
  s_ += " : i32";
  return *this;
}

Attrs& Attrs::integer(std::string_view name, int64_t v) {
  appendInt(entry(name), v);
  return *this;
}

Attrs& Attrs::boolean(std::string_view name, bool v) {
  entry(name) += v ? "true" : "false";
  return *this;
}

Attrs& Attrs::array(std::string_view name, const std::vector<int64_t>& v) {
  std::string& s = entry(name);
  s += "array<i64";
  for (size_t i = 0; i < v.size(); ++i) {
    s += i ? ", " : ": ";
    appendInt(s, v[i]);
  }
  s += '>';
  return *this;
}

Attrs& Attrs::list(std::string_view name, const std::vector<int64_t>& v) {
  std::string& s = entry(name);
  s += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    appendInt(s, v[i]);
  }
  s += ']';
  return *this;
}

Attrs& Attrs::listIfAny(std::string_view name, const std::vector<int64_t>& v) {
  return v.empty() ? *this : list(name, v);
}

Attrs& Attrs::padding(std::string_view name, const std::vector<std::pair<int64_t, int64_t>>& p) {
  std::string& s = entry(name);
  if (p.empty()) {
    s += "dense<> : tensor<0x2xi64>";
    return *this;
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
  return *this;
}

Attrs& Attrs::dense(std::string_view name, std::string_view literal, const TensorType& t) {
  std::string& s = entry(name);
  s += "dense<";
  s += literal;
  s += "> : ";
  appendType(s, t);
  return *this;
}

Attrs& Attrs::enumeration(std::string_view name, std::string_view enum_name, std::string_view value) {
  std::string& s = entry(name);
  s += "#stablehlo<";
  s += enum_name;
  s += ' ';
  s += value;
  s += '>';
  return *this;
}

Attrs& Attrs::comparison(Cmp dir, DType operand) {
  enumeration("comparison_direction", "comparison_direction", cmpName(dir));
  return enumeration("compare_type", "comparison_type", cmpType(operand));
}

Attrs& Attrs::nested(std::string_view name, std::string_view open, const Attrs& inner) {
  std::string& s = entry(name);
  s += open;
  s += inner.s_;
  s += '>';
  return *this;
}

}  // namespace torch_tpu::shlo::detail
