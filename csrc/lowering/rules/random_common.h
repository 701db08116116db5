// Random draws shared by the random rule files (factory.cpp: uniform_, normal_, bernoulli, ...; distributions.cpp:
// gamma, Dirichlet, Poisson, binomial, rrelu). Defined in factory.cpp.
#pragma once

#include "lowering/helpers.h"

namespace torch_tpu::lowering::rnd {

// Uniform [0, 1) values of dtype c (F64: the top 53 of the random bits; F32: the top 24) from random bits (U32 or
// U64).
Value uniformFromBits(Builder& b, Value bits, DType c);
// Uniform floats in [0, 1) of dtype F64 (53 random bits) or F32 (24 random bits, used for every other dtype).
// `shape` may have an extra leading dimension for ops that need several draws per element.
Value uniform01(Context& ctx, const Shape& shape, DType want);
// Entry k of `u`'s leading dimension (draws made several per element), of u's shape without that dimension.
Value leadingEntry(Builder& b, Value u, int64_t k);
// Standard normal values from two uniform [0, 1) draws of the same shape (Box-Muller; 1 - u1 keeps the log finite).
Value boxMuller(Builder& b, Value u1, Value u2);
// The dtype a random op of dtype t draws in: F64 for F64, else F32.
DType drawType(DType t);
// The accepts predicate of ops on a floating self.
bool floatSelf(const Context& ctx);
// The value of static float argument i, `dflt` when absent, or NaN when its value is not known when lowering (then
// every parameter check fails and the call declines).
double staticOr(const Context& ctx, size_t i, double dflt);

}  // namespace torch_tpu::lowering::rnd
