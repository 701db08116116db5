// Op arguments as both modes see them: the schema kind of each argument, the lowering::Arg of a host value, and the
// lowering Context whose numbers are constants or program inputs.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

#include "core/program.h"
#include "lowering/lowering.h"

namespace torch_tpu::core {

// The kind of a schema argument (an Optional's element kind).
enum class ArgKind : uint8_t {
  Tensor,      // Tensor
  TensorList,  // Tensor[], Tensor?[]
  Scalar,      // Scalar (a Python number that takes part in type promotion)
  Float,       // float
  Int,         // int, SymInt
  Bool,        // bool
  IntList,     // int[], SymInt[]
  FloatList,   // float[]
  BoolList,    // bool[]
  ScalarList,  // Scalar[]
  String,      // str
  ScalarType,  // ScalarType (dtype)
  Device,      // Device
  Generator,   // Generator
  Other,       // Layout, MemoryFormat, ...
};
constexpr int kNumArgKinds = static_cast<int>(ArgKind::Other) + 1;

ArgKind argKind(const c10::Argument& a);  // from a schema (eager mode)
const char* argKindName(ArgKind k);       // "Tensor", "Scalar", ... (Python passes these for graph nodes)
ArgKind argKindFromName(const std::string& name);

// A Python number as a rule sees it; `with_value` false leaves only its kind (a program input supplies the value).
lowering::HostScalar hostScalar(const c10::Scalar& v, bool with_value);

// The lowering argument of a host (non-tensor) value of an argument of kind `k`. A Scalar or float value is
// `dynamic` when it becomes a program input (eager mode, unless the rule lists it in static_args) instead of a
// constant. A number in a Tensor argument (graphs) becomes a wrapped-number constant tensor built with `b`.
lowering::Arg hostArg(shlo::Builder& b, const std::string& name, ArgKind k, const c10::IValue& v, bool dynamic);

// The Context both modes lower a call through. A dynamic number argument i becomes a Host parameter whose index is
// host_index[i] (the caller's way of finding the value at launch).
class CallContext final : public lowering::Context {
 public:
  CallContext(ProgramBuilder& pb, const std::string& op) : Context(pb.b, op), pb_(pb) {}
  std::vector<int> host_index;  // per argument (-1: none)

  shlo::Value scalar(size_t i, shlo::DType dtype) override;
  shlo::Value rngState() override { return pb_.rngState(); }

 private:
  ProgramBuilder& pb_;
};

}  // namespace torch_tpu::core
