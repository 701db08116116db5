// Foreign StableHLO modules inside our programs: a module produced elsewhere (jax.export, a Pallas kernel in
// interpret mode, inductor's Pallas code generator, hand-written text) becomes private functions of a Builder's
// module plus one func.call per use. XLA inlines the call, so the kernel costs no launch of its own.
//
// Part of layer 2 (stablehlo): no torch, no PJRT.
//
// Accepted text: one MLIR module (`module ... {...}` or `"builtin.module"() ({...})`), or bare top-level functions,
// in generic or pretty op syntax, whose top-level operations are all func.func with bodies. Locations (`loc(...)`)
// and `#alias = ...` / `!alias = ...` definitions are resolved away. Module attributes are dropped (our module
// carries its own). Every function is renamed `<prefix><name>` and made private; the prefix is derived from the
// module's text, so the same module always gets the same names and two modules never clash.
//
// The entry function's signature must be ranked, statically shaped tensors of element types DType knows.
// Thread-safety: a parsed ForeignModule is immutable and may be shared between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stablehlo/builder.h"

namespace torch_tpu::shlo {

class ForeignModule {
 public:
  // Parses `text`; `entry` names the function a call invokes. Throws BuildError naming what cannot be embedded
  // (no function `entry`, a top-level op other than func.func, a non-tensor or dynamic entry type, unbalanced text).
  static std::shared_ptr<const ForeignModule> parse(const std::string& text, const std::string& entry = "main");

  const std::vector<TensorType>& inputs() const { return inputs_; }
  const std::vector<TensorType>& outputs() const { return outputs_; }
  // Prefix of every function name once embedded ("foreign_<16 hex digits>_"), and the entry's embedded name.
  const std::string& prefix() const { return prefix_; }
  std::string entrySymbol() const { return prefix_ + entry_; }
  // The module's functions, renamed and private, as top-level text for a module body.
  const std::string& functions() const { return functions_; }
  // Targets of stablehlo.custom_call ops in the module (plugins may lack them: named in compile errors).
  const std::vector<std::string>& customCallTargets() const { return custom_calls_; }
  // "(tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>)"
  std::string signature() const;

 private:
  std::string entry_, prefix_, functions_;
  std::vector<TensorType> inputs_, outputs_;
  std::vector<std::string> custom_calls_;
};

// Parses one MLIR tensor type ("tensor<2x3xf32>", "tensor<bf16>"); throws BuildError for anything else.
TensorType parseTensorType(const std::string& text);

// Emits `func.call` of m's entry with `args` (their types must equal m.inputs()) and adds m's functions to the
// program (once per Builder, however often it is called). Returns one Value per entry result.
std::vector<Value> callForeign(Builder& b, const ForeignModule& m, const std::vector<Value>& args);

}  // namespace torch_tpu::shlo
