// Pieces shared by the pointwise rule families (rules/elementwise.cpp, rules/special.cpp, rules/activation.cpp):
// the elementwise accept predicate, RuleFn factories for the common forms of a pointwise rule, and the numeric
// building blocks more than one of those families uses.
//
// Conventions: the promoted dtype T is computed from the arguments (resultTypeOf honors wrapped numbers and 0-d
// tensors); floating math runs in accType(T) (bf16/f16 upcast to f32, as PyTorch CPU's vectorized kernels do) and
// is rounded to T once at the end.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lowering/helpers.h"

namespace torch_tpu::lowering {

using Fn1 = std::function<Value(Builder&, Value)>;
using Fn2 = std::function<Value(Builder&, Value, Value)>;
// A backward formula: (ctx, compute dtype, grad, x) -> grad_input. Extra scalar arguments are fetched from ctx.
using FnCtx = std::function<Value(Context&, DType /*compute*/, Value /*g*/, Value /*x*/)>;

// ---- accept predicate ----

// The accepts predicate of an elementwise rule for `op`: declines bool operands for ops PyTorch
// rejects them for (except div.*_mode with no rounding mode, which is true division), integer operands of ops PyTorch
// CPU implements for floating dtypes only, a bool alpha with a non-bool result, and heaviside of two dtypes -- so
// that the CPU kernel raises PyTorch's error.
AcceptsFn elementwiseAccepts(const std::string& op);

// ---- rule factories ----

// Unary op on a tensor whose result keeps the input dtype (neg, abs, floor, relu, ...). fn sees accType values.
RuleFn unarySame(Fn1 fn);

// Unary op with a floating result (exp, sin, sigmoid, ...): integer/bool inputs become float32 first.
RuleFn unaryFloat(Fn1 fn);

// Binary op on args (0, 1) computed in the promoted dtype T (accType for halves), result T.
// `float_result`: integer promotion gives float32 (true division, atan2).
RuleFn binary(Fn2 fn, bool float_result = false);

// Backward-style op of (grad = arg gi, x = arg xi) computed in their promoted dtype (accType for halves).
RuleFn gradOp(size_t gi, size_t xi, FnCtx fn);

// ---- operands ----

// Common broadcast shape of the listed arguments (Python numbers are 0-d).
Shape commonShape(const Context& ctx, const std::vector<size_t>& idx);

// The listed arguments as Values of dtype t broadcast to their common shape.
std::vector<Value> operands(Context& ctx, const std::vector<size_t>& idx, DType t);

// Computation dtype for a result dtype: half types in f32, bool arithmetic in s64 where the op needs numbers.
DType computeType(DType t);

// ---- numeric building blocks ----

Value cmpc(Builder& b, Value x, double v, Cmp c);  // x compared with the constant v
Value truncF(Builder& b, Value x);                // round toward zero (floats; integers unchanged)
Value sigmoidF(Builder& b, Value x);              // 1 / (1 + exp(-x)), as PyTorch CPU
Value digammaF(Builder& b, Value x);              // CHLO's digamma with CPU's value at +-0: -+inf
// The power series of the modified Bessel function I_order (order 0 or 1) at x, `terms` terms, in Horner form (every
// partial value stays finite: XLA reassociates products with constants, which in the term-by-term form overflows):
// (x/2)^order sum_k (x^2/4)^k / (k! (k + order)!).
Value besselISeries(Builder& b, Value x, int order, int terms);
// clamp with PyTorch's NaN semantics (a NaN operand or bound gives NaN); lo/hi may be null.
Value clampOp(Builder& b, Value x, const Value* lo, const Value* hi);

}  // namespace torch_tpu::lowering
