// Lowering rules: one rule per ATen operator, emitting StableHLO through shlo::Builder.
//
// Layer 3 of torch-tpu. Depends on the stablehlo layer only: no torch headers, so editing a rule rebuilds in
// seconds. The same rules serve eager mode (one small program per op call, cached by signature) and
// torch.compile (one program per FX graph).
//
// A rule receives a Context: the Builder, the call's arguments in schema order (tensors already materialized as
// logical, contiguous Values), and the result types PyTorch's own meta computation expects. It returns one Value
// per schema result (an invalid Value for a result the caller did not ask for, e.g. an output_mask=false
// gradient). The caller converts a result to the expected dtype when only the dtype differs; a shape mismatch is
// a bug in the rule and raises.
//
// Python numbers (Scalar and float arguments, wrapped-number tensors) are program INPUTS in eager mode, so one
// compiled program serves every value (a learning rate, a fill value). A rule obtains them as Values through
// ctx.scalar(i, dtype). A rule that needs a number at build time (it changes the program's structure, or the
// result's shape, as arange's end does) must list that argument in Rule::static_args (RuleRow::staticArgs); only
// then is Arg::scalar's host value set, and it becomes part of the cache key. Int, bool, int-list, string and dtype
// arguments are always static.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "stablehlo/builder.h"

namespace torch_tpu::lowering {

using shlo::Builder;
using shlo::DType;
using shlo::Shape;
using shlo::TensorType;
using shlo::Value;
using shlo::Cmp;
using shlo::ReduceKind;

// A host number as Python gives it.
struct HostScalar {
  // Complex numbers are always static (known): f is the real part, im the imaginary part.
  enum class Kind { None, Bool, Int, Float, Complex } kind = Kind::None;
  double f = 0;
  double im = 0;
  int64_t i = 0;
  bool b = false;
  bool has_value = false;  // false for a dynamic (runtime) number: only `kind` is known at build time
  bool known() const { return has_value; }
  bool floating() const { return kind == Kind::Float || kind == Kind::Complex; }
  double toDouble() const { return floating() ? f : kind == Kind::Int ? double(i) : double(b); }
  int64_t toInt() const { return floating() ? int64_t(f) : kind == Kind::Int ? i : int64_t(b); }
  // The dtype PyTorch gives a wrapped number of this kind: c128 / f64 / s64 / pred (the "default" categories).
  DType dtype() const {
    return kind == Kind::Complex ? DType::C128
           : kind == Kind::Float ? DType::F64
           : kind == Kind::Int   ? DType::S64
                                 : DType::Pred;
  }
};

struct Arg {
  enum class Kind {
    None,        // an absent optional (Tensor?, int?, float?, ...)
    Tensor,      // `tensor`; wrapped_number marks a Python number passed as a 0-d CPU tensor (x + 2)
    TensorList,  // `tensors` (an absent element of Tensor?[] is an invalid Value)
    Scalar,      // a Scalar argument: obtain it with ctx.scalar(); `scalar` holds its kind (and value if static)
    Double,      // a float argument: likewise dynamic unless static
    Int,         // `i`
    Bool,        // `b`
    IntList,     // `ints` (also SymInt[])
    DoubleList,  // `doubles`
    BoolList,    // `bools`
    String,      // `s`
    ScalarType,  // `dtype`
    Other        // Generator, Layout, Device, MemoryFormat, ...: present but not lowered
  };
  Kind kind = Kind::None;
  std::string name;  // schema argument name
  Value tensor;
  std::vector<Value> tensors;
  bool wrapped_number = false;
  HostScalar scalar;  // Scalar/Double: kind always set; value only when static (or in compiled graphs)
  int64_t i = 0;
  bool b = false;
  std::vector<int64_t> ints;
  std::vector<double> doubles;
  std::vector<bool> bools;
  std::string s;
  DType dtype = DType::Invalid;

  bool isNone() const { return kind == Kind::None; }
};

class Context {
 public:
  Context(Builder& builder, std::string op) : b(builder), op_(std::move(op)) {}
  virtual ~Context() = default;

  Builder& b;
  std::vector<Arg> args;             // in schema order
  std::vector<TensorType> outputs;   // expected result types; dtype Invalid for a result not asked for

  // The value of Scalar/Double argument i (or of a 0-d wrapped-number tensor argument) as a 0-d Value of `dtype`.
  virtual Value scalar(size_t i, DType dtype) = 0;
  // A fresh random state tensor<2xui64> for stablehlo.rng_bit_generator, derived from the device generator
  // (seed, offset). Each call of a random op gets a different state; the same manual_seed replays it.
  virtual Value rngState() = 0;

  // A device-side check (index bounds, integer division by zero): the call is valid only if every element of `ok`
  // (pred) holds. Otherwise the op raises `message` (an IndexError, or a RuntimeError for CheckError::Runtime),
  // reported the way CUDA reports device-side asserts: at the caller's next synchronization, at once under
  // TORCH_TPU_LAUNCH_BLOCKING=1. "{}" in `message` stands for `value` (an integer Value of ok's shape) at a failing
  // element. Contexts that run no program ignore checks (the default).
  enum class CheckError : uint8_t { Index, Runtime };
  virtual void check(Value ok, const std::string& message, Value value = Value(),
                     CheckError error = CheckError::Index) {}

  const std::string& op() const { return op_; }
  const Arg& arg(size_t i) const;
  const Arg& arg(const std::string& name) const;  // by schema name
  size_t argIndex(const std::string& name) const;
  Value tensor(size_t i) const;                   // Tensor argument i (throws if absent)
  bool has(size_t i) const { return i < args.size() && !args[i].isNone(); }
  int64_t toInt(size_t i) const;                  // Int (or static Scalar) argument
  bool toBool(size_t i) const;
  const std::vector<int64_t>& toInts(size_t i) const;
  // A static number (listed in Rule::static_args) or a compile-time constant.
  double staticDouble(size_t i) const;

  // Raises LoweringError(op, msg).
  [[noreturn]] void fail(const std::string& msg) const;

 private:
  std::string op_;
};

// A rule cannot lower this call: what() is noLowering(op, reason). Eager mode falls back to the CPU (or raises in
// strict mode) and a compiled graph leaves the node to eager, both reporting the same words.
class LoweringError : public std::runtime_error {
 public:
  LoweringError(const std::string& op, const std::string& reason);
  const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
};

// The call is invalid: PyTorch's CPU kernel rejects it where its meta kernel does not (operands of different
// dtypes for a matrix product). Eager mode lets the CPU kernel raise its own error; a graph runs the node eagerly.
class InvalidCall : public LoweringError {
 public:
  using LoweringError::LoweringError;
};

using RuleFn = std::function<std::vector<Value>(Context&)>;
// Optional per-call predicate: return false to decline a call (e.g. an unsupported dtype); eager mode then falls
// back to CPU, a compiled graph leaves the op to eager.
using AcceptsFn = std::function<bool(const Context&)>;

// Dtypes PyTorch's CPU kernels support for a few ops only. A call with a tensor (argument or result) of such a
// dtype is lowered only by a rule whose row lists its class (RuleRow::dtypes); every other rule declines it, so
// eager mode runs the CPU kernel, which raises PyTorch's own error where PyTorch has no kernel for the dtype either.
enum DTypeClass : unsigned {
  kFloat8 = 1u << 0,        // float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz
  kFloat8E8M0 = 1u << 1,    // float8_e8m0fnu (fewer kernels than the other float8 types)
  kWideUnsigned = 1u << 2,  // uint16, uint32, uint64
  kComplex = 1u << 3,       // complex64, complex128 (and complex Python numbers)
  kAllFloat8 = kFloat8 | kFloat8E8M0,
  kRestricted = kAllFloat8 | kWideUnsigned | kComplex,
};
unsigned dtypeClass(DType t);  // the DTypeClass of a restricted dtype, 0 for every other dtype

struct Rule {
  std::string op;                        // "aten::add.Tensor", "aten::relu" (no overload)
  RuleFn fn;
  std::vector<std::string> static_args;  // Scalar/float args whose value is built into the program
  AcceptsFn accepts;                     // unset: every call is accepted
  // False for ops eager mode implements natively and must not replace with a program: view ops (a view shares
  // storage in eager mode, while in a functionalized graph it is just a value).
  bool eager = true;
  unsigned dtypes = 0;                   // DTypeClass bits: the restricted dtypes this rule lowers
  // The operand (schema argument index) a product may read through its packed copy: a transposed weight kept
  // row-major once (core/packed.h, compile/plan.h); -1: none.
  int packed_operand = -1;
  // Costly per element (exp, log, trigonometric, erf, ...): a compiled graph computes a result read by several
  // consumers, or broadcast to a larger one, once into its own buffer instead of letting XLA recompute it per use.
  bool transcendental = false;
};

// The row of one registered rule, returned by Registry::add. Typed modifiers set the rule's optional parts and
// chain:
//   r.add("aten::mm", mmRule).accepts(realDTypes);
//   r.add("aten::arange.start", arange).staticArgs({"start", "end"}).accepts(realDTypes);
//   r.add("aten::neg", unarySame(negate)).accepts(elementwiseAccepts);  // a predicate made for the row's op
//   r.add("aten::view", reshapeToOut).graphOnly();
//   r.add("aten::mul.Tensor", binary(mul)).accepts(elementwiseAccepts).complex();
//   r.add("aten::mm", mmRule).accepts(matmulAccepts).packedOperand(1);
//   r.add("aten::exp", unaryFloat(exp)).accepts(elementwiseAccepts).transcendental();
// Eager mode registers a kernel running the rule for every op a rule serves (core/ops.h), except graph-only rows
// and ops the eager layer implements with a kernel of its own (views, copies, storage; csrc/eager).
class RuleRow {
 public:
  explicit RuleRow(Rule& rule) : rule_(rule) {}
  RuleRow& accepts(AcceptsFn fn);
  // A predicate that depends on the op it serves: `for_op(op)` is called once with this row's op name.
  RuleRow& accepts(AcceptsFn (*for_op)(const std::string& op));
  RuleRow& staticArgs(std::vector<std::string> names);
  RuleRow& graphOnly();  // Rule::eager = false
  RuleRow& dtypes(unsigned classes);  // restricted dtype classes (DTypeClass) the rule lowers, like PyTorch's CPU
  RuleRow& complex() { return dtypes(kComplex); }  // the rule computes complex64/complex128 as well
  RuleRow& packedOperand(int arg);  // Rule::packed_operand
  RuleRow& transcendental();        // Rule::transcendental
  const Rule& rule() const { return rule_; }

 private:
  Rule& rule_;
};

class Registry {
 public:
  // Registers the rule of `op` and returns its row; registering the same op twice is an error (one rule per op).
  RuleRow add(const std::string& op, RuleFn fn);
  const Rule* find(const std::string& op) const;
  std::vector<std::string> names() const;

 private:
  std::unordered_map<std::string, Rule> rules_;  // node-based: a Rule stays where it is as rows are added
};

// The process-wide registry, populated on first use by every rule family.
const Registry& registry();

// Why `rule` does not lower this call ("" when it does): a restricted dtype class its row does not list ("no
// complex lowering", "no float8 lowering", ...), else its accepts predicate declining ("the rule declines this
// call"). Eager mode and compiled graphs report this reason for the CPU fallback / the node run eagerly.
std::string declineReason(const Rule& rule, const Context& ctx);
// The one wording of an op that does not lower: "no lowering for aten::X" plus " (reason)" when one is given.
// Eager mode's fallback, compiled graphs and the dynamo backend all report it.
std::string noLowering(const std::string& op, const std::string& reason = "");
inline bool accepts(const Rule& rule, const Context& ctx) { return declineReason(rule, ctx).empty(); }

// Lowers one call: runs the rule and checks/converts its results against ctx.outputs (dtype converted, shape must
// match). Throws LoweringError when the rule fails.
std::vector<Value> lower(const Rule& rule, Context& ctx);

}  // namespace torch_tpu::lowering
