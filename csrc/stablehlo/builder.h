// StableHLO program builder: emits one MLIR text module (generic op syntax) with a single public @main (plus the
// private functions of embedded foreign modules, stablehlo/foreign.h).
//
// Layer 2 of torch-tpu. Depends on nothing but the C++ standard library (no torch, no PJRT).
// Thread-safety: a Builder is used by one thread at a time; distinct Builders are independent.
// Values are cheap handles (an SSA id plus its type) that stay valid for the Builder's lifetime.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace torch_tpu::shlo {

// Element types, numbered like PJRT_Buffer_Type so the runtime can use them unchanged.
enum class DType : int32_t {
  Invalid = 0, Pred, S8, S16, S32, S64, U8, U16, U32, U64, F16, F32, F64, BF16, C64, C128,
  F8E5M2 = 16, F8E4M3FN = 17, F8E5M2FNUZ = 19, F8E4M3FNUZ = 20, F8E8M0FNU = 28  // PJRT's numbers
};

bool isFloat(DType t);      // F16, F32, F64, BF16
bool isFloat8(DType t);     // the F8* types: storage types, converted to and from f32 (see Builder::convert)
bool isInteger(DType t);    // S*, U*
bool isSigned(DType t);     // S* and floats
bool isComplex(DType t);
DType componentType(DType t);  // a complex dtype's real and imaginary parts (C64 -> F32, C128 -> F64); others: t
int bitWidth(DType t);      // Pred = 1
const char* mlirName(DType t);  // "f32", "bf16", "i1", "i64", "ui8", "complex<f32>", ...

using Shape = std::vector<int64_t>;

struct TensorType {
  DType dtype = DType::Invalid;
  Shape shape;
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const;
  std::string str() const;  // "tensor<2x3xf32>", "tensor<f32>"
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
};

struct Value {
  int id = -1;
  TensorType type;
  bool valid() const { return id >= 0; }
  DType dtype() const { return type.dtype; }
  const Shape& shape() const { return type.shape; }
  int64_t rank() const { return type.rank(); }
};

// Thrown for misuse (shape/dtype mismatch between operands, bad dimension numbers). Carries a clear message.
class BuildError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

enum class Cmp { EQ, NE, LT, LE, GT, GE };

// The precision of float32 products (dot_general, convolution, ragged dots), PyTorch's float32 matmul precision:
// "highest" -> HIGHEST, "high" -> HIGH, "medium" -> DEFAULT (on a TPU: one bfloat16 pass). A Builder takes the
// process setting when it is constructed; the torch layers install the source that reads torch's global setting.
enum class Precision : uint8_t { Default, High, Highest };
using PrecisionSource = Precision (*)();
void setMatmulPrecisionSource(PrecisionSource source);
Precision matmulPrecision();  // the source's current value (Highest when no source is installed)
const char* precisionName(Precision p);  // "DEFAULT", "HIGH", "HIGHEST"
enum class ReduceKind { Sum, Prod, Max, Min, And, Or, Xor };  // And/Or/Xor: bitwise (logical for pred)

class Builder {
 public:
  Builder();

  // ---- function signature ----
  // Adds a parameter of @main. `donate_to_output` >= 0 marks it {tf.aliasing_output = N : i32}.
  Value parameter(const TensorType& t, int donate_to_output = -1);
  // Finishes the module; `results` become @main's results in order. The Builder may not be used afterwards.
  std::string finish(const std::vector<Value>& results);
  // Where a finished module's @main lies in its text, and @main's signature: what a caller needs to call the program
  // as a private function of another module (fused eager) without parsing the text.
  struct MainLayout {
    std::vector<std::string> arg_types;     // per parameter, its MLIR type (no attributes)
    std::vector<std::string> result_types;  // per result
    size_t body_begin = 0, body_end = 0;    // @main's operations and its return, whole lines
    size_t top_begin = 0, top_end = 0;      // the top-level functions @main calls (foreign kernels)
  };
  // finish(results) for a program over `num_replicas` x `num_partitions` devices (its module attributes);
  // `layout`, when given, receives where @main's parts are.
  std::string finish(const std::vector<Value>& results, MainLayout* layout, int num_replicas = 1,
                     int num_partitions = 1);

  // ---- constants ----
  Value constant(double v, DType t);                   // 0-d; for integer/pred dtypes v is converted (pred: v != 0)
  Value constantInt(int64_t v, DType t);               // 0-d, exact for 64-bit integers
  Value constantF(double v, DType t, const Shape& shape);  // splat constant of any shape
  Value constantI64s(const std::vector<int64_t>& vals, DType t);  // 1-d dense constant (integer dtypes)
  Value zeros(const TensorType& t);                    // splat 0 (false for pred)
  Value iota(const TensorType& t, int64_t dim);

  // ---- elementwise (operands must have identical types unless noted; no implicit broadcasting) ----
  Value add(Value a, Value b);
  Value sub(Value a, Value b);
  Value mul(Value a, Value b);
  Value div(Value a, Value b);        // integer division truncates toward zero, as stablehlo.divide
  Value rem(Value a, Value b);        // sign follows the dividend (C fmod), as stablehlo.remainder
  Value pow(Value a, Value b);
  Value max(Value a, Value b);
  Value min(Value a, Value b);
  Value atan2(Value a, Value b);
  Value andOp(Value a, Value b);      // logical for pred, bitwise for integers
  Value orOp(Value a, Value b);
  Value xorOp(Value a, Value b);
  Value shiftLeft(Value a, Value b);
  Value shiftRightArithmetic(Value a, Value b);
  Value shiftRightLogical(Value a, Value b);
  Value neg(Value a);
  Value abs(Value a);                 // result type = operand type; complex: the modulus (component type)
  Value exp(Value a);
  Value expm1(Value a);
  Value log(Value a);
  Value log1p(Value a);
  Value sqrt(Value a);
  Value rsqrt(Value a);
  Value cbrt(Value a);
  Value tanh(Value a);
  Value logistic(Value a);            // sigmoid
  Value sin(Value a);
  Value cos(Value a);
  Value tan(Value a);
  Value floor(Value a);
  Value ceil(Value a);
  Value roundNearestEven(Value a);
  Value roundNearestAfz(Value a);
  Value sign(Value a);
  Value notOp(Value a);               // logical for pred, bitwise for integers
  Value isFinite(Value a);            // -> pred
  Value popcnt(Value a);
  Value clz(Value a);
  // CHLO ops (legalized by every XLA compiler): erf, erfc, erf_inv, lgamma, digamma, asin, acos, atan, sinh, cosh,
  // asinh, acosh, atanh. Emitted as "chlo.<name>".
  Value chlo(const std::string& name, Value a);

  Value compare(Value a, Value b, Cmp dir);  // -> pred, same shape; picks FLOAT/SIGNED/UNSIGNED compare type
  Value select(Value pred, Value on_true, Value on_false);  // pred may be 0-d or same shape
  Value clamp(Value lo, Value x, Value hi);  // lo/hi 0-d or same shape as x
  Value convert(Value a, DType to);          // no-op (returns a) if same dtype; float->int truncates; ->pred is != 0
                                             // float8 goes through f32 with PyTorch's rounding (toFloat8)
  Value toFloat8(Value f32, DType to);       // c10's fp8 conversion (saturation, fnuz NaN, e8m0 rounding) exactly
  Value bitcastConvert(Value a, DType to);   // same bit width only
  // Complex numbers: the components of a complex value (f32 for c64, f64 for c128), and the complex value of two
  // components of the same float type (f32 -> c64, f64 -> c128).
  Value realPart(Value a);
  Value imagPart(Value a);
  Value complex(Value re, Value im);
  Value conj(Value a);  // complex: re - i im; other dtypes: a
  // stablehlo.fft over the last lengths.size() dimensions. kind: "FFT", "IFFT" (complex -> complex), "RFFT"
  // (f32/f64 -> complex, last dimension n/2+1), "IRFFT" (complex -> f32/f64, last dimension lengths.back()).
  Value fft(Value a, const std::string& kind, const std::vector<int64_t>& lengths);

  // ---- shape ----
  Value reshape(Value a, const Shape& shape);                      // no-op if same shape
  Value broadcastInDim(Value a, const Shape& shape, const std::vector<int64_t>& dims);
  // numpy-style broadcast of `a` to `shape` (aligns trailing dimensions); no-op if already that shape
  Value broadcastTo(Value a, const Shape& shape);
  // No-op for the identity permutation; a transpose of a transpose is one transpose of the first operand (none if
  // the two cancel).
  Value transpose(Value a, const std::vector<int64_t>& perm);
  bool isTranspose(Value a) const;  // whether `a` is a transpose's result (in the region being built)
  Value slice(Value a, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
              const std::vector<int64_t>& strides);
  Value sliceInDim(Value a, int64_t start, int64_t limit, int64_t stride, int64_t dim);
  Value dynamicSlice(Value a, const std::vector<Value>& starts, const std::vector<int64_t>& sizes);  // starts: 0-d integer
  Value dynamicUpdateSlice(Value a, Value update, const std::vector<Value>& starts);
  Value concatenate(const std::vector<Value>& vals, int64_t dim);
  Value pad(Value a, Value pad_value /*0-d*/, const std::vector<int64_t>& low, const std::vector<int64_t>& high,
            const std::vector<int64_t>& interior);
  Value reverse(Value a, const std::vector<int64_t>& dims);

  // ---- reductions ----
  // Reduces `dims` away (result shape drops them). init is the identity of `kind` for a's dtype unless given.
  Value reduce(Value a, const std::vector<int64_t>& dims, ReduceKind kind);
  // Variadic reduce of (values, indices) to the arg-max/arg-min along one dimension: returns {value, index}.
  // Ties pick the smallest index; NaN wins for floats (like PyTorch).
  std::vector<Value> argReduce(Value a, Value indices, int64_t dim, bool is_max);
  // Windowed reduction (pooling). Sizes are per dimension of `a`; padding is (low, high) per dimension.
  Value reduceWindow(Value a, Value init /*0-d*/, ReduceKind kind, const std::vector<int64_t>& window,
                     const std::vector<int64_t>& strides, const std::vector<int64_t>& base_dilations,
                     const std::vector<int64_t>& window_dilations,
                     const std::vector<std::pair<int64_t, int64_t>>& padding);

  // ---- linear algebra / convolution ----
  Value dotGeneral(Value lhs, Value rhs, const std::vector<int64_t>& lhs_batch, const std::vector<int64_t>& rhs_batch,
                   const std::vector<int64_t>& lhs_contract, const std::vector<int64_t>& rhs_contract,
                   DType result = DType::Invalid /* default: lhs dtype */);
  struct ConvDims {  // dimension numbers, e.g. NCHW / OIHW / NCHW for 2-d
    int64_t input_batch, input_feature; std::vector<int64_t> input_spatial;
    int64_t kernel_output_feature, kernel_input_feature; std::vector<int64_t> kernel_spatial;
    int64_t output_batch, output_feature; std::vector<int64_t> output_spatial;
  };
  Value convolution(Value lhs, Value rhs, const ConvDims& dims, const std::vector<int64_t>& window_strides,
                    const std::vector<std::pair<int64_t, int64_t>>& padding, const std::vector<int64_t>& lhs_dilation,
                    const std::vector<int64_t>& rhs_dilation, int64_t feature_group_count, int64_t batch_group_count,
                    const Shape& result_shape, DType result = DType::Invalid);
  // Eigendecomposition of Hermitian (real: symmetric) matrices a [..., n, n], read from their lower triangle, by
  // XLA's Jacobi eigensolver (stablehlo.custom_call "Eigh": expanded into HLO by XLA's compilers, native on TPU).
  // Returns {eigenvectors [..., n, n] (as columns, orthonormal), eigenvalues [..., n] (real, ascending)}.
  std::vector<Value> eigh(Value a);

  // ---- indexing ----
  struct GatherDims {
    std::vector<int64_t> offset_dims, collapsed_slice_dims, start_index_map;
    int64_t index_vector_dim;
    std::vector<int64_t> operand_batching_dims, start_indices_batching_dims;  // usually empty
  };
  Value gather(Value operand, Value indices, const GatherDims& dims, const std::vector<int64_t>& slice_sizes,
               const Shape& result_shape, bool indices_are_sorted = false);
  struct ScatterDims {
    std::vector<int64_t> update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims;
    int64_t index_vector_dim;
    std::vector<int64_t> input_batching_dims, scatter_indices_batching_dims;  // usually empty
  };
  // combiner: nullopt = replace (update wins), else Sum/Prod/Max/Min.
  Value scatter(Value operand, Value indices, Value updates, const ScatterDims& dims,
                std::optional<ReduceKind> combiner, bool indices_are_sorted = false, bool unique_indices = false);
  // Sort `operands` (same shape) along `dim` comparing operands[0] only.
  // NaNs sort last ascending (first descending) like PyTorch; -0.0 == 0.0. Returns all operands permuted.
  std::vector<Value> sort(const std::vector<Value>& operands, int64_t dim, bool descending, bool stable);
  // Same, comparing operands[0..num_keys) lexicographically (ties on key i are broken by key i+1).
  std::vector<Value> sort(const std::vector<Value>& operands, int64_t dim, bool descending, bool stable,
                          int num_keys);

  // ---- control flow (ops_control.cpp) ----
  // stablehlo.while over the loop values `init`: `cond` maps the current values to a 0-d pred, `body` to the next
  // values (same types). Both receive the region's block arguments and emit into it through this Builder. Values
  // made inside a region must not be used outside it; values from outside may be read inside (carrying them in
  // `init` is the portable choice, as every XLA compiler accepts it). Returns the final values.
  using LoopCond = std::function<Value(Builder&, const std::vector<Value>&)>;
  using LoopBody = std::function<std::vector<Value>(Builder&, const std::vector<Value>&)>;
  std::vector<Value> whileLoop(const std::vector<Value>& init, const LoopCond& cond, const LoopBody& body);
  // A counted loop for i = 0 .. trip_count-1 (i: 0-d s32) built on whileLoop; `body` gets (i, values) and returns
  // the next values. trip_count 0 returns `init` without a loop.
  using ForBody = std::function<std::vector<Value>(Builder&, Value i, const std::vector<Value>&)>;
  std::vector<Value> forLoop(int64_t trip_count, const std::vector<Value>& init, const ForBody& body);

  // ---- functions (ops_control.cpp) ----
  // Defines the private function @name(arg_types) -> (results) of the module: `body` receives its arguments and
  // emits its ops through this Builder, like a loop body; values from outside must not be used inside (a function
  // is isolated from above). Returns the result types. Defining a name twice is a BuildError (see hasFunction).
  // A function may be defined while another's body is being built (it is not nested in it).
  using FuncBody = std::function<std::vector<Value>(Builder&, const std::vector<Value>&)>;
  std::vector<TensorType> function(const std::string& name, const std::vector<TensorType>& arg_types,
                                   const FuncBody& body);
  bool hasFunction(const std::string& name) const;
  // `func.call @name(args)`; `results` are the function's result types (at least one).
  std::vector<Value> call(const std::string& name, const std::vector<Value>& args,
                          const std::vector<TensorType>& results);

  // ---- random ----
  // stablehlo.rng_bit_generator with THREE_FRY. state: tensor<2xui64>. Returns {new_state, bits of `t` (unsigned)}.
  std::vector<Value> rngBitGenerator(Value state, const TensorType& t);

  // ---- helpers built on the above (used by many lowering rules) ----
  Value scalarLike(double v, const Value& like);   // splat of v with like's type
  Value zerosLike(const Value& like);
  Value onesLike(const Value& like);
  // Flattened index arithmetic helpers etc. may be added here when several rules need them.

  // Raw escape hatch: emits `%N = <text> : <signature>` verbatim and returns a value of type `result`.
  // text is e.g. "\"stablehlo.cosine\"(%3)" ; signature e.g. "(tensor<4xf32>) -> tensor<4xf32>". Prefer typed methods.
  Value raw(const std::string& text, const std::string& signature, const TensorType& result);
  std::string ref(const Value& v) const;  // "%7"

  // ---- foreign functions (used by stablehlo/foreign.h) ----
  // Adds whole top-level operations (e.g. private functions) to the module after @main, once per `key`. Returns
  // false, adding nothing, if `key` was added before.
  bool addTopLevel(const std::string& key, const std::string& text);
  // A generic op with one or more results: `"name"(operands) {attrs} : (operand types) -> (results)`. `attrs` is
  // the attribute dictionary's inside ("callee = @f"), or empty.
  std::vector<Value> genericOp(const std::string& name, const std::vector<Value>& operands, const std::string& attrs,
                               const std::vector<TensorType>& results);

  int numParameters() const;

  // The precision of this program's float32 products (see Precision); set at construction from matmulPrecision().
  Precision precision() const;
  void setPrecision(Precision p);
  // The precision_config attribute of a product whose operands have dtype `operand` in `dialect` ("stablehlo",
  // "chlo"): the program's precision for f32 operands, DEFAULT for every other dtype.
  std::string precisionConfig(DType operand, const char* dialect = "stablehlo") const;

 private:
  Value intDivRem(Value a, Value b, bool quotient);  // div/rem of integers (ops_elementwise.cpp)

  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// Type promotion helpers shared by rules: PyTorch-style "result type" of two dtypes (no Python scalars involved).
DType promoteTypes(DType a, DType b);

}  // namespace torch_tpu::shlo
