#include "core/ops.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <unordered_map>
#include <vector>

namespace torch_tpu::core {

namespace {

std::string fullName(const c10::OperatorName& n) {
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}


// Same arguments (names and types; alias annotations aside), out arguments of `variant` skipped if asked.
bool sameArgs(const c10::FunctionSchema& functional, const c10::FunctionSchema& variant, bool skip_out) {
  std::vector<const c10::Argument*> v;
  for (const auto& a : variant.arguments())
    if (!(skip_out && a.is_out())) v.push_back(&a);
  const auto& f = functional.arguments();
  if (v.size() != f.size()) return false;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i].name() != v[i]->name()) return false;
    if (f[i].type()->str() != v[i]->type()->str() && f[i].type()->kind() != v[i]->type()->kind()) return false;
  }
  return true;
}

// Functional ops whose names do not follow the `op_` convention of their in-place rule.
const std::unordered_map<std::string, std::string>& irregularFunctional() {
  static const std::unordered_map<std::string, std::string> m = {
      {"aten::normal_functional", "aten::normal_"},
      {"aten::bernoulli.p", "aten::bernoulli_.float"},
  };
  return m;
}

std::map<std::string, OpRule> buildTable() {
  std::map<std::string, OpRule> table;
  const auto& reg = lowering::registry();
  auto& disp = c10::Dispatcher::singleton();
  std::unordered_map<std::string, std::vector<c10::OperatorName>> by_base;
  for (const auto& n : disp.getAllOpNames()) by_base[n.name].push_back(n);
  const std::vector<std::string> names = reg.names();
  // Own names first: a rule registered under a name always serves it.
  for (const std::string& name : names) table[name] = OpRule{reg.find(name), Variant::Own};
  for (const std::string& name : names) {
    const lowering::Rule* rule = reg.find(name);
    c10::OperatorName on = parseOpName(name);
    auto fh = disp.findOp(on);
    if (!fh) continue;  // not an op of this torch version
    const c10::FunctionSchema& fs = fh->schema();
    if (fs.is_mutable()) {
      // An in-place rule (uniform_): its functional form, when the schemas match.
      if (!on.name.empty() && on.name.back() == '_') {
        c10::OperatorName fn(on.name.substr(0, on.name.size() - 1), on.overload_name);
        auto h = disp.findOp(fn);
        if (h && !h->schema().is_mutable() && sameArgs(h->schema(), fs, false))
          table.emplace(fullName(fn), OpRule{rule, Variant::FunctionalOf});
      }
      continue;
    }
    auto ip = disp.findOp(c10::OperatorName(on.name + "_", on.overload_name));
    if (ip && sameArgs(fs, ip->schema(), false)) table.emplace(fullName(ip->operator_name()), OpRule{rule, Variant::InPlace});
    for (const auto& cand : by_base[on.name]) {
      if (cand.overload_name == on.overload_name) continue;
      auto h = disp.findOp(cand);
      if (!h) continue;
      bool has_out = false;
      for (const auto& a : h->schema().arguments()) has_out |= a.is_out();
      if (has_out && sameArgs(fs, h->schema(), true)) table.emplace(fullName(cand), OpRule{rule, Variant::Out});
    }
  }
  for (const auto& kv : irregularFunctional())
    if (const lowering::Rule* r = reg.find(kv.second)) table.emplace(kv.first, OpRule{r, Variant::FunctionalOf});
  // In-place operators whose names do not follow the `op_` convention (`x <<= y` is __ilshift__, the in-place form
  // of __lshift__): the functional op's rule, its arguments being the same.
  static const struct {
    const char* op;
    const char* rule;
    Variant variant;
  } kSameAs[] = {
      {"aten::__ilshift__.Scalar", "aten::__lshift__.Scalar", Variant::InPlace},
      {"aten::__ilshift__.Tensor", "aten::__lshift__.Tensor", Variant::InPlace},
      {"aten::__irshift__.Scalar", "aten::__rshift__.Scalar", Variant::InPlace},
      {"aten::__irshift__.Tensor", "aten::__rshift__.Tensor", Variant::InPlace},
  };
  for (const auto& a : kSameAs) {
    const lowering::Rule* r = reg.find(a.rule);
    auto op = disp.findOp(parseOpName(a.op));
    auto target = disp.findOp(parseOpName(a.rule));
    if (r && op && target && sameArgs(target->schema(), op->schema(), false))
      table.emplace(a.op, OpRule{r, a.variant});
  }
  return table;
}

}  // namespace

c10::OperatorName parseOpName(const std::string& full) {
  auto dot = full.find('.');
  if (dot == std::string::npos) return c10::OperatorName(full, "");
  return c10::OperatorName(full.substr(0, dot), full.substr(dot + 1));
}

const std::map<std::string, OpRule>& opRules() {
  static const std::map<std::string, OpRule> table = buildTable();
  return table;
}

OpRule ruleFor(const std::string& name) {
  const auto& t = opRules();
  auto it = t.find(name);
  return it == t.end() ? OpRule{} : it->second;
}

}  // namespace torch_tpu::core
