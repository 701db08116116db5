#include <algorithm>
#include <mutex>

#include "lowering/families.h"
#include "lowering/lowering.h"

namespace torch_tpu::lowering {

const Arg& Context::arg(size_t i) const {
  if (i >= args.size()) fail("argument index " + std::to_string(i) + " out of range");
  return args[i];
}

size_t Context::argIndex(const std::string& name) const {
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].name == name) return i;
  fail("no argument named '" + name + "'");
}

const Arg& Context::arg(const std::string& name) const { return args[argIndex(name)]; }

Value Context::tensor(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::Kind::Tensor || !a.tensor.valid())
    fail("argument " + std::to_string(i) + " ('" + a.name + "') is not a tensor");
  return a.tensor;
}

int64_t Context::toInt(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind == Arg::Kind::Int) return a.i;
  if (a.kind == Arg::Kind::Bool) return a.b;
  if ((a.kind == Arg::Kind::Scalar || a.kind == Arg::Kind::Double) && a.scalar.known()) return a.scalar.toInt();
  fail("argument " + std::to_string(i) + " ('" + a.name + "') is not a static integer");
}

bool Context::toBool(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind == Arg::Kind::Bool) return a.b;
  if (a.kind == Arg::Kind::Int) return a.i != 0;
  fail("argument " + std::to_string(i) + " ('" + a.name + "') is not a bool");
}

const std::vector<int64_t>& Context::toInts(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::Kind::IntList) fail("argument " + std::to_string(i) + " ('" + a.name + "') is not an int list");
  return a.ints;
}

double Context::staticDouble(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind == Arg::Kind::Int) return double(a.i);
  if (a.kind == Arg::Kind::Bool) return double(a.b);
  if ((a.kind == Arg::Kind::Scalar || a.kind == Arg::Kind::Double) && a.scalar.known()) return a.scalar.toDouble();
  fail("argument " + std::to_string(i) + " ('" + a.name + "') has no static value (list it in static_args)");
}

void Context::fail(const std::string& msg) const { throw LoweringError(op_, msg); }

std::string noLowering(const std::string& op, const std::string& reason) {
  return "no lowering for " + op + (reason.empty() ? std::string() : " (" + reason + ")");
}

LoweringError::LoweringError(const std::string& op, const std::string& reason)
    : std::runtime_error(noLowering(op, reason)), reason_(reason) {}

RuleRow Registry::add(const std::string& op, RuleFn fn) {
  auto [it, inserted] = rules_.try_emplace(op);
  if (!inserted) throw std::logic_error("two lowering rules for " + op);
  it->second.op = op;
  it->second.fn = std::move(fn);
  return RuleRow(it->second);
}

RuleRow& RuleRow::accepts(AcceptsFn fn) {
  rule_.accepts = std::move(fn);
  return *this;
}

RuleRow& RuleRow::accepts(AcceptsFn (*for_op)(const std::string& op)) { return accepts(for_op(rule_.op)); }

RuleRow& RuleRow::staticArgs(std::vector<std::string> names) {
  rule_.static_args = std::move(names);
  return *this;
}

RuleRow& RuleRow::graphOnly() {
  rule_.eager = false;
  return *this;
}

RuleRow& RuleRow::dtypes(unsigned classes) {
  rule_.dtypes |= classes;
  return *this;
}

RuleRow& RuleRow::packedOperand(int arg) {
  rule_.packed_operand = arg;
  return *this;
}

RuleRow& RuleRow::transcendental() {
  rule_.transcendental = true;
  return *this;
}

unsigned dtypeClass(DType t) {
  switch (t) {
    case DType::F8E5M2: case DType::F8E4M3FN: case DType::F8E5M2FNUZ: case DType::F8E4M3FNUZ: return kFloat8;
    case DType::F8E8M0FNU: return kFloat8E8M0;
    case DType::U16: case DType::U32: case DType::U64: return kWideUnsigned;
    case DType::C64: case DType::C128: return kComplex;
    default: return 0;
  }
}

namespace {

const char* className(unsigned cls) {
  if (cls & kComplex) return "complex";
  if (cls & kAllFloat8) return "float8";
  return "uint16/uint32/uint64";
}

}  // namespace

std::string declineReason(const Rule& rule, const Context& ctx) {
  if ((rule.dtypes & kRestricted) != kRestricted) {
    unsigned used = 0;
    for (const Arg& a : ctx.args) {
      if (a.kind == Arg::Kind::Tensor && a.tensor.valid()) used |= dtypeClass(a.tensor.dtype());
      if (a.kind == Arg::Kind::TensorList)
        for (const Value& v : a.tensors)
          if (v.valid()) used |= dtypeClass(v.dtype());
      if (a.kind == Arg::Kind::ScalarType) used |= dtypeClass(a.dtype);
      if (a.kind == Arg::Kind::Scalar && a.scalar.kind == HostScalar::Kind::Complex) used |= kComplex;
    }
    for (const TensorType& t : ctx.outputs) used |= dtypeClass(t.dtype);
    if (unsigned missing = used & ~rule.dtypes) return std::string("no ") + className(missing) + " lowering";
  }
  if (rule.accepts && !rule.accepts(ctx)) return "the rule declines this call";
  return "";
}

const Rule* Registry::find(const std::string& op) const {
  auto it = rules_.find(op);
  return it == rules_.end() ? nullptr : &it->second;
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> out;
  out.reserve(rules_.size());
  for (auto& kv : rules_) out.push_back(kv.first);
  std::sort(out.begin(), out.end());
  return out;
}

const Registry& registry() {
  static Registry* reg = [] {
    auto* r = new Registry();
    using Populate = void (*)(Registry&);
    static const Populate kFamilies[] = {
        populateElementwise,
        populateSpecial,
        populateBessel,
        populateActivation,
        populateReduction,
        populateHistogram,
        populateLinalg,
        populateLinalgSolve,
        populateLinalgDecomp,
        populateFactory,
        populateNN,
        populateLosses,
        populateNorm,
        populateIndexing,
        populateSortSearch,
        populateMovement,
        populateCopy,
        populateViews,
        populateCompileExtra,
        populateConv,
        populatePooling,
        populateGridSampler,
        populateEmbeddingBag,
        populateDistributions,
        populateSegmentReduce,
        populateSampling,
        populateRnn,
        populateGrouped,
        populatePackedMm,
        populateFused,
        populateForeign,
        populateFft,
        populateForeach,  // last: its rules wrap the per-tensor rules registered above
    };
    for (Populate p : kFamilies) p(*r);
    return r;
  }();
  return *reg;
}

std::vector<Value> lower(const Rule& rule, Context& ctx) {
  std::vector<Value> results;
  try {
    results = rule.fn(ctx);
  } catch (const shlo::BuildError& e) {
    throw LoweringError(rule.op, e.what());
  }
  if (results.size() != ctx.outputs.size())
    ctx.fail("rule returned " + std::to_string(results.size()) + " results, schema has " +
             std::to_string(ctx.outputs.size()));
  for (size_t k = 0; k < results.size(); ++k) {
    const TensorType& want = ctx.outputs[k];
    if (want.dtype == DType::Invalid) continue;  // result not asked for
    Value& v = results[k];
    if (!v.valid()) ctx.fail("rule returned no value for result " + std::to_string(k));
    if (v.shape() != want.shape) {
      // A rule may return a value of the right element count in another shape only by mistake.
      ctx.fail("result " + std::to_string(k) + " has type " + v.type.str() + ", expected " + want.str());
    }
    if (v.dtype() != want.dtype) v = ctx.b.convert(v, want.dtype);
  }
  return results;
}

}  // namespace torch_tpu::lowering
