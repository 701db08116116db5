// Which lowering rule serves an ATen op, for eager mode and graphs alike.
//
// A rule is registered under one op name (lowering::registry()). It also serves the op's in-place form (`add_`:
// results written into self) and out= forms (`add.out`: out arguments are not rule arguments, results written into
// them), matched by schema; and a rule registered for an in-place op also serves its functional form, which is
// what functionalized graphs contain (`uniform` -> `uniform_`, `normal_functional` -> `normal_`).
#pragma once

#include <ATen/core/operator_name.h>

#include <map>
#include <string>

#include "lowering/lowering.h"

namespace torch_tpu::core {

enum class Variant : uint8_t {
  Own,           // the op the rule is registered under
  InPlace,       // the in-place form of a functional rule's op
  Out,           // an out= form of a functional rule's op
  FunctionalOf,  // the functional form of an in-place rule's op
};

struct OpRule {
  const lowering::Rule* rule = nullptr;
  Variant variant = Variant::Own;
};

// The rule serving `name` ("aten::add_.Tensor"); rule is nullptr when none does.
OpRule ruleFor(const std::string& name);
// "aten::add.Tensor" -> {"aten::add", "Tensor"}; no dot: an empty overload name.
c10::OperatorName parseOpName(const std::string& full);
// Every op name a rule serves, resolved once from the registry and the dispatcher's schemas.
const std::map<std::string, OpRule>& opRules();

}  // namespace torch_tpu::core
