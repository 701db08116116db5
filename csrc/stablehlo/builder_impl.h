// The emitter behind shlo::Builder (Builder::Impl) and the operand checks its op builders share. Internal to the
// stablehlo layer: included by emitter.cpp and the ops_*.cpp files that implement Builder's methods by kind.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "stablehlo/attrs.h"
#include "stablehlo/builder.h"
#include "stablehlo/literals.h"

namespace torch_tpu::shlo {

namespace detail {

// ---- errors and operand checks (BuildError with "stablehlo builder: <op>: <msg>") ----

[[noreturn]] void fail(const char* op, const std::string& msg);
inline std::string dimsStr(const std::vector<int64_t>& v) { return shapeStr(v); }

void requireSameType(const char* op, const Value& a, const Value& b);

// Dtype classes an operand may have.
enum Allow : unsigned {
  kPred = 1,
  kSInt = 2,
  kUInt = 4,
  kFloat = 8,
  kComplex = 16,
  kInt = kSInt | kUInt,
  kNum = kInt | kFloat | kComplex,
  kAll = kPred | kNum,
  kFC = kFloat | kComplex,
  kBits = kPred | kInt,
};
void requireDType(const char* op, const Value& v, unsigned mask);
// Every entry of `dims` in [0, rank) and none repeated; `what` names the list in the message.
void checkDimsUnique(const char* op, const std::vector<int64_t>& dims, int64_t rank, const char* what);
void checkShape(const char* op, const Shape& s);  // no negative sizes
bool contains(const std::vector<int64_t>& v, int64_t x);

}  // namespace detail

// One module's text under construction. Values are numbered as they are emitted; a parameter is "%argN", a
// single-result op "%N", result k of a multi-result op "%N#k".
struct Builder::Impl {
  // Naming of value ids: sub == -2: "%arg<num>"; sub == -1: "%<num>"; sub >= 0: "%<num>#<sub>".
  struct Slot {
    int32_t num;
    int32_t sub;
  };
  std::vector<Slot> slots;
  std::vector<TensorType> types;  // per id
  std::vector<TensorType> params;
  std::vector<int> donate;
  std::string body;
  int nextNum = 0;
  bool finished = false;
  // Transposes emitted so far (result id -> operand and permutation, and the region they were emitted in): a
  // transpose of a transpose is emitted as one transpose of the first operand, or none.
  struct TransposeOf {
    Value src;
    std::vector<int64_t> perm;
    int region;
  };
  std::unordered_map<int, TransposeOf> transposes;
  int region = 0;       // the while-loop region being built (0: @main's body)
  int next_region = 0;
  std::string toplevel;                   // addTopLevel: text after @main
  Precision precision = Precision::Highest;  // of float32 products (Builder::precision)
  std::vector<std::string> toplevel_keys;

  Impl();

  void appendRef(std::string& s, int id) const {
    const Slot& sl = slots[static_cast<size_t>(id)];
    if (sl.sub == -2) {
      s += "%arg";
      detail::appendInt(s, sl.num);
    } else {
      s += '%';
      detail::appendInt(s, sl.num);
      if (sl.sub >= 0) {
        s += '#';
        detail::appendInt(s, sl.sub);
      }
    }
  }
  // Throws unless v was produced by this (unfinished) builder with the type it carries.
  void check(const char* op, const Value& v) const {
    if (finished || v.id < 0 || static_cast<size_t>(v.id) >= slots.size() || v.type != types[static_cast<size_t>(v.id)])
      badValue(op, v);
  }
  [[noreturn]] void badValue(const char* op, const Value& v) const;  // check()'s error
  Value newValue(const TensorType& t, int32_t num, int32_t sub) {
    Value v;
    v.id = static_cast<int>(slots.size());
    v.type = t;
    slots.push_back({num, sub});
    types.push_back(t);
    return v;
  }

  // Emits `%N = "name"(ops) REGIONS {ATTRS} : (types) -> result(s)`; returns the result values.
  std::vector<Value> emitMulti(const char* name, const Value* ops, size_t nops, std::string_view regions,
                               std::string_view attrs, const TensorType* results, size_t nres);
  Value emit(const char* name, std::initializer_list<Value> ops, std::string_view attrs, const TensorType& result,
             std::string_view regions = {});
  Value emitVec(const char* name, const std::vector<Value>& ops, std::string_view attrs, const TensorType& result,
                std::string_view regions = {}) {
    return emitMulti(name, ops.data(), ops.size(), regions, attrs, &result, 1)[0];
  }
  // stablehlo.constant of `lit` (the text inside dense<...>) with type t.
  Value constantLiteral(const std::string& lit, const TensorType& t);

  // ---- regions ----
  // A region is written with fresh SSA numbers from the same counter so names never clash. Its ops work on 0-d
  // values named by their SSA text.
  struct Region {
    Impl& I;
    std::string s;
    std::string header;
    explicit Region(Impl& impl);
    std::string arg(DType t);  // a new block argument
    // Emits a scalar op in the region; returns its result's name.
    std::string op(const char* name, std::initializer_list<std::pair<std::string_view, DType>> ops, DType result,
                   std::string_view attrs = {});
    std::string cmp(std::string_view a, std::string_view b, DType t, Cmp c);
    std::string bin(const char* name, std::string_view a, std::string_view b, DType t) {
      return op(name, {{a, t}, {b, t}}, t);
    }
    std::string select(std::string_view p, std::string_view a, std::string_view b, DType t) {
      return op("stablehlo.select", {{p, DType::Pred}, {a, t}, {b, t}}, t);
    }
    // Closes the region returning `vals`; returns its text.
    std::string finish(std::initializer_list<std::pair<std::string_view, DType>> vals);
  };

  // The stablehlo op combining two values for reduction `k` over dtype t (validates the dtype; `op` names the
  // calling builder method in errors).
  static const char* combinerOp(const char* op, ReduceKind k, DType t);
  // Binary scalar region "(a, b) -> combine(a, b)".
  std::string combinerRegion(const char* op, ReduceKind k, DType t);
};

}  // namespace torch_tpu::shlo
