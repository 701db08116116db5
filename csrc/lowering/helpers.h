// Helpers shared by the lowering rule families (csrc/lowering/rules/*.cpp): PyTorch's type promotion with wrapped
// numbers, numpy broadcasting of operands, reduction-dimension normalization, accumulation types, and a few
// numerically careful building blocks (NaN-propagating max/min, keepdim reshapes).
//
// No torch headers. Everything here works on Context/Arg/Value only.
#pragma once

#include <cmath>
#include <functional>
#include <vector>

#include "lowering/lowering.h"

namespace torch_tpu::lowering {

// ---- dtype categories and PyTorch result-type computation ----

enum class Category { Bool = 0, Int = 1, Float = 2, Complex = 3 };
Category categoryOf(DType t);

// The dtype PyTorch gives a Python float (torch.get_default_dtype()). torch-tpu assumes float32.
constexpr DType kDefaultFloat = DType::F32;

// One operand of a result-type computation. Priority follows PyTorch: a tensor with dims > 0 beats a 0-d tensor,
// which beats a wrapped number (Python scalar); inside a priority class dtypes promote normally, across classes
// only a higher category (bool < int < float < complex) of a lower class changes the result.
struct TypeOperand {
  enum Priority { Wrapped = 0, ZeroDim = 1, Dim = 2 };
  DType dtype = DType::Invalid;
  Priority priority = Dim;
};
DType resultType(const std::vector<TypeOperand>& operands);
// PyTorch's promoteTypes of two dtypes (torch.promote_types), e.g. u8+s8 -> s16, f16+bf16 -> f32, int+float -> float.
DType promote(DType a, DType b);

// Describes argument i for resultType(): a Tensor (by rank / wrapped_number), a Scalar or a float argument.
// An absent optional gives dtype Invalid (ignored by resultType).
TypeOperand typeOperand(const Context& ctx, size_t i);
// resultType() over the listed arguments.
DType resultTypeOf(const Context& ctx, const std::vector<size_t>& args);

// bf16/f16 -> f32 (PyTorch CPU accumulates reductions/matmul/norms of half types in float); else unchanged.
DType accType(DType t);
// The float dtype a float-valued op (exp, div, mean, ...) gives an input of dtype t: t if float, else f32.
DType toFloat(DType t);
// float32, bfloat16 or float16: the operand dtypes of PyTorch's reduced-precision product kernels (grouped and
// weight-only quantized matmuls).
bool halfOrFloat(DType t);

// ---- shapes and broadcasting ----

Shape broadcastShapes(const std::vector<Shape>& shapes);  // numpy rules; throws BuildError if incompatible
int64_t numel(const Shape& s);

// True when argument i is a Python number for this call: a Scalar/float argument or a wrapped-number tensor.
bool isNumberArg(const Context& ctx, size_t i);
// The rank of argument i (a Python number is 0-d).
Shape argShape(const Context& ctx, size_t i);

// Argument i as a Value of dtype `t` broadcast to `shape`: a tensor is converted and broadcast, a Python number
// comes from ctx.scalar() (or a constant when its value is static), an Int/Bool argument becomes a constant.
Value operand(Context& ctx, size_t i, DType t, const Shape& shape);
// Argument i as a 0-d Value of dtype t (Scalar / float / wrapped number / Int / Bool / 0-d tensor).
Value scalarArg(Context& ctx, size_t i, DType t);

// ---- dimensions ----

// lo, lo + 1, ..., hi - 1 (a list of dimensions).
std::vector<int64_t> range(int64_t lo, int64_t hi);

// Rows of `table` (along dim 0) picked by integer `idx` of any shape: result idx.shape + table.shape[1:] (a 1-D
// table gives its elements).
Value takeRows(Builder& b, Value table, Value idx);

// PyTorch's binary search of sorted boundaries, for every value of `v` at once (log2(n) + 1 steps, the same
// answer as CPU's even where the boundaries are not sorted): while start < end, mid = start + (end - start) / 2;
// start = mid + 1 unless boundary(mid) >= value (right: > value; false for NaNs, which sort last), else end = mid.
// `boundaryAt(mid)` gives the boundaries at positions `mid` (S64, v's shape, in [0, n)). Returns start (S64).
Value binarySearch(Builder& b, const std::function<Value(Value)>& boundaryAt, Value v, int64_t n, bool right);
// The same search over positions [lo, hi) of the n boundaries (lo, hi: S64 of v's shape) in `steps` steps (enough
// for the longest such range: log2(hi - lo) + 1).
Value binarySearch(Builder& b, const std::function<Value(Value)>& boundaryAt, Value v, int64_t n, Value lo, Value hi,
                   int steps, bool right);

// PyTorch CPU's linspace of `steps` >= 2 values from start to end (start, end and their difference `diff`: dtype c,
// shape {steps}), computed in c: step = diff / (steps - 1); the first half start + step i, the second half
// end - step (steps - 1 - i), each a fused multiply-add for float32 and float64 as CPU's compiled kernel has it.
Value linspaceTwoSided(Builder& b, Value start, Value end, Value diff, int64_t steps);

// An optional bool argument: false when absent.
inline bool optBool(const Context& ctx, size_t i) { return ctx.has(i) && ctx.toBool(i); }

// Normalizes a possibly negative dimension for a tensor of rank `rank` (a 0-d tensor accepts -1 and 0 and maps
// them to 0). Raises via ctx on an out-of-range dimension.
int64_t normDim(const Context& ctx, int64_t d, int64_t rank);
// The dimensions to reduce for an `int[1]? dim` argument: absent or empty means all; negatives normalized;
// sorted and deduplicated. A 0-d tensor has nothing to reduce (empty result).
std::vector<int64_t> reduceDims(const Context& ctx, size_t arg, int64_t rank);
std::vector<int64_t> normDims(const Context& ctx, const std::vector<int64_t>& dims, int64_t rank);
// `shape` with `dims` set to 1 (keepdim) or removed.
Shape reducedShape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim);
int64_t reducedCount(const Shape& shape, const std::vector<int64_t>& dims);

// ---- numerics ----

// Splat constant of `like`'s type.
Value cst(Builder& b, double v, const Value& like);
// Splat int64 constant of `shape` (exact for every int64, unlike cst's double).
Value constantS64(Builder& b, int64_t v, const Shape& shape);
// NaN-propagating elementwise max/min (PyTorch maximum/minimum/clamp semantics) for any dtype.
Value nanMax(Builder& b, Value x, Value y);
Value nanMin(Builder& b, Value x, Value y);
Value isNan(Builder& b, Value x);  // pred; all false for non-float dtypes
// |mag| with the sign bit of sgn (floating, same dtype; -0.0 counts as negative): C's copysign.
Value copySign(Builder& b, Value mag, Value sgn);
// v behind an optimization barrier: XLA cannot fold it as a constant (a division by it stays a division instead of
// a multiplication by a reciprocal) nor fuse the op computing it into its user (no fused multiply-add).
Value opaque(Builder& b, Value v);
// Reduction over dims with PyTorch's NaN semantics for Max/Min (a NaN anywhere gives NaN); Pred max/min use Or/And.
Value reduceNan(Builder& b, Value x, const std::vector<int64_t>& dims, ReduceKind kind);
// Sum over dims (x itself when dims is empty), in x's dtype.
Value sumDims(Builder& b, Value x, const std::vector<int64_t>& dims);
// Sum over dims accumulated in accType(out), result converted to `out`.
Value reduceSumAs(Builder& b, Value x, const std::vector<int64_t>& dims, DType out);
// Reshape a reduced value back to keepdim form (`orig` shape with dims set to 1), or leave it.
Value keepDims(Builder& b, Value reduced, const Shape& orig, const std::vector<int64_t>& dims, bool keepdim);
// Broadcast a keepdim-shaped (or reduced) value back over `shape` along the reduced dims.
Value expandReduced(Builder& b, Value reduced, const Shape& shape, const std::vector<int64_t>& dims);

// x[..., idx[...], ...] along `dim` (torch.gather): idx (integer) has the result's shape, x's shape with `dim`
// resized.
Value gatherDim(Builder& b, Value x, int64_t dim, Value idx);
// x's slices at `index` (a 1-D integer tensor) along `dim`: the result has index's length at `dim`.
Value takeAlong(Builder& b, Value x, int64_t dim, Value index);
// The same at constant positions (an empty selection gives an empty result).
Value takeAlong(Builder& b, Value x, int64_t dim, const std::vector<int64_t>& idx);

// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), finite for every finite x.
Value logSigmoid(Builder& b, Value x);

// PyTorch's cubic convolution kernel with parameter A (bicubic interpolation: A = -0.75; anti-aliased bicubic:
// A = -0.5), for x >= 0. conv1 (x <= 1): ((A + 2) x - (A + 3)) x^2 + 1; conv2 (1 < x < 2):
// ((A x - 5A) x + 8A) x - 4A.
Value cubicConvolution1(Builder& b, Value x, double A);
Value cubicConvolution2(Builder& b, Value x, double A);

// gelu(x) as PyTorch CPU computes it: 0.5 x (1 + erf(x / sqrt 2)), or with approximate == "tanh"
// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
Value gelu(Builder& b, Value x, const std::string& approximate);

// Runs `fn` in accType(x.dtype()) (upcasting bf16/f16 to f32) and converts the result back to `out`.
Value inAcc(Builder& b, Value x, DType out, const std::function<Value(Value)>& fn);

// True when every Tensor/TensorList argument has a dtype programs handle (no Invalid inputs). Used as the default
// `accepts` of most rules. Complex calls never reach rules whose row is not listing kComplex (declineReason).
bool realDTypes(const Context& ctx);

}  // namespace torch_tpu::lowering
