// Foreign StableHLO modules as private functions of our programs. See foreign.h.
//
// The text is handled with a small scanner that knows MLIR's lexical structure (string literals, brackets, `->`,
// symbol references) rather than a full parser: top-level operations end at a newline outside every bracket, which
// holds for the output of MLIR's printer in both syntaxes and for hand-written modules laid out one op per line.
#include "stablehlo/foreign.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <string_view>

namespace torch_tpu::shlo {

namespace {

using sv = std::string_view;

[[noreturn]] void fail(const std::string& msg) { throw BuildError("foreign module: " + msg); }

bool isIdChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.' || c == '-'; }
bool isIdStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

sv trim(sv s) {
  while (!s.empty() && isSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && isSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::string excerpt(sv s) {
  s = trim(s);
  std::string e(s.substr(0, std::min<size_t>(s.size(), 80)));
  std::replace(e.begin(), e.end(), '\n', ' ');
  return e + (s.size() > 80 ? "..." : "");
}

// Index just past the string literal starting at s[i] == '"'.
size_t skipString(sv s, size_t i) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') ++i;
    else if (s[i] == '"') return i + 1;
  }
  fail("unterminated string literal");
}

size_t skipSpace(sv s, size_t i) {
  while (i < s.size()) {
    if (isSpace(s[i])) ++i;
    else if (s.compare(i, 2, "//") == 0) {  // comment to the end of the line
      while (i < s.size() && s[i] != '\n') ++i;
    } else break;
  }
  return i;
}

bool isOpen(char c) { return c == '(' || c == '[' || c == '{' || c == '<'; }
bool isClose(char c) { return c == ')' || c == ']' || c == '}' || c == '>'; }

// Index of the bracket closing the one at s[i].
size_t matchClose(sv s, size_t i) {
  int depth = 0;
  for (size_t j = i; j < s.size(); ++j) {
    char c = s[j];
    if (c == '"') { j = skipString(s, j) - 1; continue; }
    if (c == '-' && j + 1 < s.size() && s[j + 1] == '>') { ++j; continue; }  // "->" is no bracket
    if (isOpen(c)) ++depth;
    else if (isClose(c) && --depth == 0) return j;
  }
  fail("unbalanced brackets after '" + excerpt(s.substr(i)) + "'");
}

// End of the top-level item starting at s[i]: the first newline outside brackets (or the end).
size_t itemEnd(sv s, size_t i) {
  int depth = 0;
  for (size_t j = i; j < s.size(); ++j) {
    char c = s[j];
    if (c == '"') { j = skipString(s, j) - 1; continue; }
    if (c == '-' && j + 1 < s.size() && s[j + 1] == '>') { ++j; continue; }
    if (isOpen(c)) ++depth;
    else if (isClose(c)) --depth;
    else if (c == '\n' && depth <= 0) return j;
    if (depth < 0) fail("unbalanced brackets in '" + excerpt(s.substr(i)) + "'");
  }
  if (depth != 0) fail("unbalanced brackets in '" + excerpt(s.substr(i)) + "'");
  return s.size();
}

// Splits `s` at commas outside brackets and strings.
std::vector<sv> splitTop(sv s) {
  std::vector<sv> out;
  s = trim(s);
  if (s.empty()) return out;
  int depth = 0;
  size_t start = 0;
  for (size_t j = 0; j < s.size(); ++j) {
    char c = s[j];
    if (c == '"') { j = skipString(s, j) - 1; continue; }
    if (c == '-' && j + 1 < s.size() && s[j + 1] == '>') { ++j; continue; }
    if (isOpen(c)) ++depth;
    else if (isClose(c)) --depth;
    else if (c == ',' && depth == 0) {
      out.push_back(trim(s.substr(start, j - start)));
      start = j + 1;
    }
  }
  out.push_back(trim(s.substr(start)));
  return out;
}

// Position of the first '{' outside brackets and strings in s (npos if none).
size_t findTopBrace(sv s) {
  int depth = 0;
  for (size_t j = 0; j < s.size(); ++j) {
    char c = s[j];
    if (c == '"') { j = skipString(s, j) - 1; continue; }
    if (c == '-' && j + 1 < s.size() && s[j + 1] == '>') { ++j; continue; }
    if (c == '{' && depth == 0) return j;
    if (isOpen(c)) ++depth;
    else if (isClose(c)) --depth;
  }
  return sv::npos;
}

bool startsWithWord(sv s, size_t i, sv word) {
  return s.compare(i, word.size(), word) == 0 && (i + word.size() >= s.size() || !isIdChar(s[i + word.size()]));
}

// Removes every location: `loc(...)` attached to ops, arguments and regions (and the space before it).
std::string stripLocations(sv s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char c = s[i];
    if (c == '"') {
      size_t e = skipString(s, i);
      out.append(s.substr(i, e - i));
      i = e;
      continue;
    }
    if (c == 'l' && s.compare(i, 4, "loc(") == 0 && (i == 0 || !isIdChar(s[i - 1])) && (i == 0 || s[i - 1] != '#')) {
      i = matchClose(s, i + 3) + 1;
      while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

// A symbol reference at s[i] == '@': the name and the index past it.
std::pair<std::string, size_t> readSymbol(sv s, size_t i) {
  size_t j = i + 1;
  if (j < s.size() && s[j] == '"') {
    size_t e = skipString(s, j);
    return {std::string(s.substr(j + 1, e - j - 2)), e};
  }
  while (j < s.size() && isIdChar(s[j])) ++j;
  return {std::string(s.substr(i + 1, j - i - 1)), j};
}

bool bareSymbol(const std::string& name) {
  if (name.empty() || !isIdStart(name[0])) return false;
  return std::all_of(name.begin(), name.end(), isIdChar);
}

std::string symbolRef(const std::string& name) { return bareSymbol(name) ? "@" + name : "@\"" + name + "\""; }

uint64_t fnv1a(sv s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// `#name = value` / `!name = value` alias definitions (printed before or after the module).
struct Alias {
  char sigil;
  std::string name, value;
};

// Replaces uses of the aliases in s by their values (values may use earlier aliases).
std::string substituteAliases(sv s, const std::vector<Alias>& aliases) {
  if (aliases.empty()) return std::string(s);
  std::map<std::pair<char, std::string>, const Alias*> by;
  for (const Alias& a : aliases) by[{a.sigil, a.name}] = &a;
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char c = s[i];
    if (c == '"') {
      size_t e = skipString(s, i);
      out.append(s.substr(i, e - i));
      i = e;
      continue;
    }
    if ((c == '#' || c == '!') && (i == 0 || !isIdChar(s[i - 1]))) {
      size_t j = i + 1;
      while (j < s.size() && isIdChar(s[j])) ++j;
      auto it = by.find({c, std::string(s.substr(i + 1, j - i - 1))});
      if (it != by.end() && (j >= s.size() || s[j] != '<')) {
        out += substituteAliases(it->second->value, aliases);
        i = j;
        continue;
      }
    }
    out += c;
    ++i;
  }
  return out;
}

DType elementType(sv e) {
  static const std::pair<sv, DType> kTypes[] = {
      {"i1", DType::Pred}, {"i8", DType::S8},    {"i16", DType::S16},   {"i32", DType::S32},
      {"i64", DType::S64}, {"ui8", DType::U8},   {"ui16", DType::U16},  {"ui32", DType::U32},
      {"ui64", DType::U64}, {"f16", DType::F16}, {"f32", DType::F32},   {"f64", DType::F64},
      {"bf16", DType::BF16}, {"complex<f32>", DType::C64}, {"complex<f64>", DType::C128}};
  for (const auto& [name, t] : kTypes)
    if (e == name) return t;
  return DType::Invalid;
}

std::vector<TensorType> parseTypeList(sv s) {
  s = trim(s);
  if (!s.empty() && s.front() == '(') {
    size_t e = matchClose(s, 0);
    if (trim(s.substr(e + 1)).size()) fail("cannot read the type list '" + excerpt(s) + "'");
    s = s.substr(1, e - 1);
  }
  std::vector<TensorType> out;
  for (sv t : splitTop(s)) out.push_back(parseTensorType(std::string(t)));
  return out;
}

struct Function {
  std::vector<std::string> pieces;  // literal text between symbol references
  std::vector<std::string> refs;    // symbol names referenced between pieces (pieces.size() == refs.size() + 1)
  std::vector<bool> quoted;         // per reference: a sym_name string (else an @reference)
};

// Splits a function's rewritten text at references to the module's own symbols.
void splitRefs(sv text, const std::vector<std::string>& symbols, Function& f) {
  std::string cur;
  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    if (c == '"') {
      size_t e = skipString(text, i);
      cur.append(text.substr(i, e - i));
      i = e;
      continue;
    }
    if (c == '\x02') {  // a function's own sym_name (generic syntax)
      size_t e = text.find('\x02', i + 1);
      f.pieces.push_back(std::move(cur));
      cur.clear();
      f.refs.emplace_back(text.substr(i + 1, e - i - 1));
      f.quoted.push_back(true);
      i = e + 1;
      continue;
    }
    if (c == '@') {
      auto [name, e] = readSymbol(text, i);
      if (std::find(symbols.begin(), symbols.end(), name) != symbols.end()) {
        f.pieces.push_back(std::move(cur));
        cur.clear();
        f.refs.push_back(name);
        f.quoted.push_back(false);
        i = e;
        continue;
      }
    }
    cur += c;
    ++i;
  }
  f.pieces.push_back(std::move(cur));
}

struct RawFunction {
  std::string name;
  std::string text;  // rewritten: private, without argument/result attributes; its own name as "@name" (pretty)
                     // or between \x02 markers (generic sym_name)
  std::vector<TensorType> inputs, outputs;
};

// Pretty syntax: func.func [visibility] @name(%a: T {attrs}, ...) -> (T {attrs}, ...) [attributes {...}] {body}
RawFunction parsePretty(sv op) {
  RawFunction f;
  size_t i = skipSpace(op, std::string_view("func.func").size());
  for (sv vis : {sv("public"), sv("private"), sv("nested")})
    if (startsWithWord(op, i, vis)) i = skipSpace(op, i + vis.size());
  if (i >= op.size() || op[i] != '@') fail("cannot read the function header '" + excerpt(op) + "'");
  auto [name, after] = readSymbol(op, i);
  f.name = name;
  i = skipSpace(op, after);
  if (i >= op.size() || op[i] != '(') fail("cannot read the arguments of @" + name);
  size_t close = matchClose(op, i);
  std::string args;
  for (sv a : splitTop(op.substr(i + 1, close - i - 1))) {
    size_t colon = a.find(':');
    if (colon == sv::npos) fail("cannot read argument '" + excerpt(a) + "' of @" + name);
    sv ty = a.substr(colon + 1);
    size_t brace = findTopBrace(ty);
    if (brace != sv::npos) ty = ty.substr(0, brace);
    ty = trim(ty);
    f.inputs.push_back(TensorType{});  // stays invalid for a non-tensor argument (fine in helpers, not in the entry)
    try {
      f.inputs.back() = parseTensorType(std::string(ty));
    } catch (const BuildError&) {
    }
    if (!args.empty()) args += ", ";
    args += std::string(trim(a.substr(0, colon))) + ": " + std::string(ty);
  }
  i = skipSpace(op, close + 1);
  std::string results;
  if (op.compare(i, 2, "->") == 0) {
    i = skipSpace(op, i + 2);
    std::vector<sv> res;
    if (i < op.size() && op[i] == '(') {
      size_t e = matchClose(op, i);
      res = splitTop(op.substr(i + 1, e - i - 1));
      i = e + 1;
    } else {
      size_t e = i;
      while (e < op.size() && op[e] != '{' && !startsWithWord(op, e, "attributes")) {
        if (isOpen(op[e])) e = matchClose(op, e);
        ++e;
      }
      res.push_back(trim(op.substr(i, e - i)));
      i = e;
    }
    for (sv r : res) {
      size_t brace = findTopBrace(r);
      sv ty = trim(brace == sv::npos ? r : r.substr(0, brace));
      if (!results.empty()) results += ", ";
      results += std::string(ty);
      try {
        f.outputs.push_back(parseTensorType(std::string(ty)));
      } catch (const BuildError&) {
        f.outputs.push_back(TensorType{});
      }
    }
  }
  i = skipSpace(op, i);
  std::string fattrs;
  if (startsWithWord(op, i, "attributes")) {
    i = skipSpace(op, i + 10);
    size_t e = matchClose(op, i);
    fattrs = " attributes " + std::string(op.substr(i, e - i + 1));
    i = skipSpace(op, e + 1);
  }
  if (i >= op.size() || op[i] != '{') fail("function @" + name + " has no body (declarations cannot be embedded)");
  f.text = "  func.func private " + symbolRef(name) + "(" + args + ")" +
           (results.empty() ? "" : " -> (" + results + ")") + fattrs + " " + std::string(trim(op.substr(i))) + "\n";
  return f;
}

// Generic syntax: "func.func"() <{function_type = ..., sym_name = "name", ...}> ({...}) [{attrs}] : () -> ()
RawFunction parseGeneric(sv op) {
  RawFunction f;
  size_t i = skipSpace(op, std::string_view("\"func.func\"").size());
  if (i >= op.size() || op[i] != '(') fail("cannot read '" + excerpt(op) + "'");
  i = skipSpace(op, matchClose(op, i) + 1);
  if (op.compare(i, 2, "<{") != 0) fail("function without properties: '" + excerpt(op) + "'");
  size_t close = matchClose(op, i);  // the '>' closing "<{"
  sv props = op.substr(i + 2, close - i - 3);
  std::string rest(op.substr(close + 1));
  std::string kept;
  std::string name;
  sv ftype;
  for (sv p : splitTop(props)) {
    size_t eq = p.find('=');
    sv key = trim(eq == sv::npos ? p : p.substr(0, eq));
    sv val = eq == sv::npos ? sv() : trim(p.substr(eq + 1));
    if (key == "sym_name") {
      if (val.size() < 2 || val.front() != '"') fail("cannot read sym_name in '" + excerpt(op) + "'");
      name = std::string(val.substr(1, val.size() - 2));
      continue;
    }
    if (key == "sym_visibility" || key == "arg_attrs" || key == "res_attrs") continue;
    if (key == "function_type") ftype = val;
    if (!kept.empty()) kept += ", ";
    kept += std::string(p);
  }
  if (name.empty()) fail("function without sym_name: '" + excerpt(op) + "'");
  if (ftype.empty()) fail("function @" + name + " without function_type");
  size_t arrow = sv::npos;
  {
    // function_type = (inputs) -> results
    size_t e = ftype[0] == '(' ? matchClose(ftype, 0) : sv::npos;
    if (e == sv::npos) fail("cannot read the type of @" + name);
    arrow = ftype.find("->", e);
    if (arrow == sv::npos) fail("cannot read the type of @" + name);
    auto tryList = [&](sv s, std::vector<TensorType>& out) {
      try {
        out = parseTypeList(s);
      } catch (const BuildError&) {
        out.clear();
        out.push_back(TensorType{});  // marks "not all tensors"
      }
    };
    tryList(ftype.substr(0, e + 1), f.inputs);
    tryList(ftype.substr(arrow + 2), f.outputs);
  }
  f.name = name;
  // The name between two \x02 markers: the rename pass writes it as a string (other uses are @references).
  f.text = "  \"func.func\"() <{" + kept + (kept.empty() ? "" : ", ") + "sym_name = \x02" + name +
           "\x02, sym_visibility = \"private\"}>" + rest + "\n";
  return f;
}

}  // namespace

TensorType parseTensorType(const std::string& text) {
  sv s = trim(text);
  if (s.compare(0, 7, "tensor<") != 0 || s.back() != '>')
    throw BuildError("foreign module: unsupported type '" + std::string(s) + "' (tensors only)");
  sv in = s.substr(7, s.size() - 8);
  TensorType t;
  size_t i = 0;
  while (i < in.size() && (std::isdigit(static_cast<unsigned char>(in[i])) || in[i] == '?')) {
    size_t j = i;
    while (j < in.size() && std::isdigit(static_cast<unsigned char>(in[j]))) ++j;
    if (in[i] == '?' || j >= in.size() || in[j] != 'x')
      throw BuildError("foreign module: dynamic or malformed shape in '" + std::string(s) + "'");
    t.shape.push_back(std::stoll(std::string(in.substr(i, j - i))));
    i = j + 1;
  }
  t.dtype = elementType(in.substr(i));
  if (t.dtype == DType::Invalid)
    throw BuildError("foreign module: unsupported element type in '" + std::string(s) + "'");
  return t;
}

std::shared_ptr<const ForeignModule> ForeignModule::parse(const std::string& input, const std::string& entry) {
  // 1. Top-level items: alias definitions, then one module (or bare functions).
  std::vector<Alias> aliases;
  std::vector<sv> items;
  sv all(input);
  for (size_t i = skipSpace(all, 0); i < all.size(); i = skipSpace(all, i)) {
    size_t e = itemEnd(all, i);
    sv item = trim(all.substr(i, e - i));
    if ((item[0] == '#' || item[0] == '!') && item.size() > 1 && isIdChar(item[1])) {
      size_t eq = item.find('=');
      if (eq == sv::npos) fail("cannot read the alias definition '" + excerpt(item) + "'");
      Alias a{item[0], std::string(trim(item.substr(1, eq - 1))), std::string(trim(item.substr(eq + 1)))};
      if (a.value.compare(0, 4, "loc(") != 0) aliases.push_back(std::move(a));  // location aliases go away
    } else if (item.compare(0, 3, "{-#") == 0) {
      fail("dialect resources ({-# ... #-}) are not supported: print constants inline");
    } else {
      items.push_back(item);
    }
    i = e;
  }
  if (items.empty()) fail("no module in the text");

  // 2. The body holding the functions.
  sv body;
  std::string bodyStore;
  if (items.size() == 1 && (startsWithWord(items[0], 0, "module") || items[0].compare(0, 16, "\"builtin.module\"") == 0)) {
    sv m = items[0];
    size_t i;
    if (m[0] == 'm') {
      i = skipSpace(m, 6);
      if (i < m.size() && m[i] == '@') i = skipSpace(m, readSymbol(m, i).second);
      if (startsWithWord(m, i, "attributes")) i = skipSpace(m, matchClose(m, skipSpace(m, i + 10)) + 1);
      if (i >= m.size() || m[i] != '{') fail("cannot read the module header '" + excerpt(m) + "'");
    } else {
      i = skipSpace(m, 16);
      if (i < m.size() && m[i] == '(') i = skipSpace(m, matchClose(m, i) + 1);
      if (m.compare(i, 2, "<{") == 0) i = skipSpace(m, matchClose(m, i) + 1);
      if (i >= m.size() || m[i] != '(') fail("cannot read the module header '" + excerpt(m) + "'");
      i = skipSpace(m, i + 1);
      if (i >= m.size() || m[i] != '{') fail("cannot read the module region '" + excerpt(m) + "'");
    }
    size_t close = matchClose(m, i);
    body = m.substr(i + 1, close - i - 1);
  } else {
    for (sv it : items) {
      if (startsWithWord(it, 0, "module") || it.compare(0, 16, "\"builtin.module\"") == 0)
        fail("more than one module in the text");
    }
    bodyStore = std::string(all);
    body = bodyStore;
  }
  std::string cleaned = substituteAliases(stripLocations(body), aliases);

  // 3. Functions.
  std::vector<RawFunction> raws;
  sv b(cleaned);
  for (size_t i = skipSpace(b, 0); i < b.size(); i = skipSpace(b, i)) {
    size_t e = itemEnd(b, i);
    sv op = trim(b.substr(i, e - i));
    i = e;
    if (op.empty()) continue;
    if (op[0] == '#' || op[0] == '!') continue;  // an alias defined outside a module (bare functions)
    if (op[0] == '^') continue;                   // the module block's label
    if (startsWithWord(op, 0, "func.func")) raws.push_back(parsePretty(op));
    else if (op.compare(0, 11, "\"func.func\"") == 0) raws.push_back(parseGeneric(op));
    else {
      size_t n = 0;
      while (n < op.size() && !isSpace(op[n]) && op[n] != '(') ++n;
      fail("top-level operation " + std::string(op.substr(0, n)) + " cannot be embedded (only func.func)");
    }
  }
  if (raws.empty()) fail("the module has no functions");

  auto m = std::make_shared<ForeignModule>();
  m->entry_ = entry;
  std::vector<std::string> symbols;
  for (const RawFunction& f : raws) {
    if (std::find(symbols.begin(), symbols.end(), f.name) != symbols.end()) fail("function @" + f.name + " defined twice");
    symbols.push_back(f.name);
  }
  const RawFunction* ent = nullptr;
  for (const RawFunction& f : raws)
    if (f.name == entry) ent = &f;
  if (!ent) fail("no function @" + entry + " (functions: @" + symbols[0] + (symbols.size() > 1 ? ", ..." : "") + ")");
  auto allTensors = [](const std::vector<TensorType>& ts) {
    return std::all_of(ts.begin(), ts.end(), [](const TensorType& t) { return t.dtype != DType::Invalid; });
  };
  if (!allTensors(ent->inputs) || !allTensors(ent->outputs))
    fail("@" + entry + " has arguments or results that are not statically shaped tensors of a supported type");
  if (ent->outputs.empty()) fail("@" + entry + " returns nothing");
  m->inputs_ = ent->inputs;
  m->outputs_ = ent->outputs;

  // 4. Names: a prefix from the text, every reference to the module's own symbols renamed.
  uint64_t h = fnv1a(entry);
  for (const RawFunction& f : raws) h = fnv1a(f.text, h);
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  m->prefix_ = std::string("foreign_") + hex + "_";
  for (const RawFunction& raw : raws) {
    Function f;
    splitRefs(raw.text, symbols, f);
    for (size_t k = 0; k < f.refs.size(); ++k) {
      m->functions_ += f.pieces[k];
      m->functions_ += f.quoted[k] ? "\"" + m->prefix_ + f.refs[k] + "\"" : symbolRef(m->prefix_ + f.refs[k]);
    }
    m->functions_ += f.pieces.back();
  }
  // 5. custom_call targets (generic: call_target_name = "x"; pretty: stablehlo.custom_call @x).
  sv fx(cleaned);
  for (size_t i = 0; i < fx.size(); ++i) {
    if (fx[i] == '"') {
      i = skipString(fx, i) - 1;
      continue;
    }
    std::string target;
    if (fx.compare(i, 17, "call_target_name ") == 0 || fx.compare(i, 17, "call_target_name=") == 0) {
      size_t q = fx.find('"', i);
      if (q != sv::npos) {
        size_t e = skipString(fx, q);
        target = std::string(fx.substr(q + 1, e - q - 2));
        i = e - 1;
      }
    } else if (fx.compare(i, 21, "stablehlo.custom_call") == 0 && (i == 0 || !isIdChar(fx[i - 1]))) {
      size_t j = skipSpace(fx, i + 21);
      if (j < fx.size() && fx[j] == '@') {
        auto [name, e] = readSymbol(fx, j);
        target = name;
        i = e - 1;
      }
    }
    if (!target.empty() && std::find(m->custom_calls_.begin(), m->custom_calls_.end(), target) == m->custom_calls_.end())
      m->custom_calls_.push_back(target);
  }
  return m;
}

std::string ForeignModule::signature() const {
  std::string s = "(";
  for (size_t i = 0; i < inputs_.size(); ++i) s += (i ? ", " : "") + inputs_[i].str();
  s += ") -> (";
  for (size_t i = 0; i < outputs_.size(); ++i) s += (i ? ", " : "") + outputs_[i].str();
  return s + ")";
}

std::vector<Value> callForeign(Builder& b, const ForeignModule& m, const std::vector<Value>& args) {
  if (args.size() != m.inputs().size())
    throw BuildError("callForeign: " + m.entrySymbol() + " takes " + std::to_string(m.inputs().size()) +
                     " arguments, got " + std::to_string(args.size()));
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].type != m.inputs()[i])
      throw BuildError("callForeign: argument " + std::to_string(i) + " of " + m.entrySymbol() + " is " +
                       args[i].type.str() + ", the function takes " + m.inputs()[i].str());
  b.addTopLevel(m.prefix(), m.functions());
  return b.genericOp("func.call", args, "callee = " + symbolRef(m.entrySymbol()), m.outputs());
}

}  // namespace torch_tpu::shlo
