// Attribute text of an op in generic syntax: the `name = value` entries between `{` and `}` (or between `<` and
// `>` of a dialect attribute such as #stablehlo.gather<...>), joined by ", " in the order they are added.
// Internal to the stablehlo layer: every op builder writes its attributes through this one helper.
//
//   Attrs().array("broadcast_dimensions", dims)        broadcast_dimensions = array<i64: 0, 1>
//   Attrs().i64("dimension", 1).boolean("is_stable", true)   dimension = 1 : i64, is_stable = true
//   Attrs().nested("dimension_numbers", "#stablehlo.gather<", Attrs().list("offset_dims", {1}))
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stablehlo/builder.h"

namespace torch_tpu::shlo::detail {

class Attrs {
 public:
  Attrs& i64(std::string_view name, int64_t v);      // name = v : i64
  Attrs& i32(std::string_view name, int64_t v);      // name = v : i32
  Attrs& integer(std::string_view name, int64_t v);  // name = v          (a field of a dialect attribute)
  Attrs& boolean(std::string_view name, bool v);     // name = true | false
  Attrs& array(std::string_view name, const std::vector<int64_t>& v);  // name = array<i64: 0, 1>
  Attrs& list(std::string_view name, const std::vector<int64_t>& v);   // name = [0, 1]
  Attrs& listIfAny(std::string_view name, const std::vector<int64_t>& v);  // list(), left out when v is empty
  // name = dense<[[lo, hi], ...]> : tensor<Nx2xi64>  (window padding per dimension)
  Attrs& padding(std::string_view name, const std::vector<std::pair<int64_t, int64_t>>& p);
  // name = dense<literal> : tensor<...>  (literal: the element text, e.g. "1.0" or "[1, 2]")
  Attrs& dense(std::string_view name, std::string_view literal, const TensorType& t);
  // name = #stablehlo<enum_name value>, e.g. rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>
  Attrs& enumeration(std::string_view name, std::string_view enum_name, std::string_view value);
  // comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type FLOAT>
  // (FLOAT, SIGNED or UNSIGNED from the operands' dtype).
  Attrs& comparison(Cmp dir, DType operand);
  // name = <open><inner's entries>>, e.g. nested("dot_dimension_numbers", "#stablehlo.dot<", inner).
  Attrs& nested(std::string_view name, std::string_view open, const Attrs& inner);
  // A whole entry as text ("precision_config = [...]").
  Attrs& entryText(std::string_view text);

  const std::string& str() const { return s_; }
  bool empty() const { return s_.empty(); }
  operator std::string_view() const { return s_; }  // what Builder::Impl::emit takes

 private:
  std::string& entry(std::string_view name);  // ", " (after the first entry) + "name = "
  std::string s_;
};

}  // namespace torch_tpu::shlo::detail
