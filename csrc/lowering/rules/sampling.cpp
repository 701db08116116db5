// Sampling family: drawing category indices from probability rows (aten::multinomial), the op generate() uses
// for do_sample=True after its top-k / top-p / temperature processors (which lower through other families).
//
// Algorithm (exact, one program, no host synchronization): the exponential race. With E_j ~ Exp(1) independent,
// argmax_j p_j / E_j is category j with probability p_j / sum(p) (the Gumbel-max trick with the exponential taken);
// the n largest keys, in order, are a draw of n categories without replacement with the same sequential
// probabilities as drawing one, removing it, renormalizing. Zero-probability categories get key 0 and lose to every
// positive one. With replacement each sample races independently over its own draws.
//
// Registered for compiled graphs (Rule::eager = false): eager mode runs csrc/eager/sampling.cpp, which first checks
// the values as PyTorch does (one synchronization, the same error messages) and composes lowered ops.
#include <limits>

#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

// Exp(1) draws of `shape` in dtype `t` (f32 or f64), strictly positive: -log(1 - u) with u in [0, 1) is 0 when
// u == 0 (probability 2^-24 per f32 element), which would tie a zero-probability category's key 0 / 0; the
// smallest normal number replaces it.
Value exponentialPositive(Context& ctx, const Shape& shape, DType t) {
  Builder& b = ctx.b;
  Value u;
  if (t == DType::F64) {
    Value bits = b.rngBitGenerator(ctx.rngState(), {DType::U64, shape})[1];
    Value top = b.shiftRightLogical(bits, b.constantF(11, DType::U64, shape));
    u = b.mul(b.convert(top, DType::F64), b.constantF(std::ldexp(1.0, -53), DType::F64, shape));
  } else {
    Value bits = b.rngBitGenerator(ctx.rngState(), {DType::U32, shape})[1];
    Value top = b.shiftRightLogical(bits, b.constantF(8, DType::U32, shape));
    u = b.mul(b.convert(top, DType::F32), b.constantF(std::ldexp(1.0, -24), DType::F32, shape));
  }
  Value e = b.neg(b.log1p(b.neg(u)));
  double tiny = t == DType::F64 ? std::numeric_limits<double>::min() : double(std::numeric_limits<float>::min());
  return b.max(e, b.constantF(tiny, t, shape));
}

// multinomial(Tensor self, int num_samples, bool replacement=False, *, Generator? generator=None) -> Tensor
std::vector<Value> multinomial(Context& ctx) {
  Builder& b = ctx.b;
  Value p = ctx.tensor(0);
  const int64_t n_sample = ctx.toInt(1);
  const bool replacement = ctx.has(2) && ctx.toBool(2);
  const TensorType& out = ctx.outputs.at(0);
  if (p.rank() < 1 || p.rank() > 2) ctx.fail("prob_dist must be 1 or 2 dim");
  if (!shlo::isFloat(p.dtype())) ctx.fail("multinomial only supports floating-point dtypes for input");
  const bool one_d = p.rank() == 1;
  const int64_t n = p.shape().back();
  const int64_t rows = one_d ? 1 : p.shape()[0];
  if (n_sample <= 0) ctx.fail("cannot sample n_sample <= 0 samples");
  if (!replacement && n_sample > n) ctx.fail("cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  if (rows == 0 || n == 0) return {b.zeros(out)};
  const DType t = p.dtype() == DType::F64 ? DType::F64 : DType::F32;
  Value probs = b.reshape(b.convert(p, t), {rows, n});
  Value result;  // [rows, n_sample] s64
  if (!replacement || n_sample == 1) {
    Value keys = b.div(probs, exponentialPositive(ctx, {rows, n}, t));
    Value iota = b.iota({DType::S64, {rows, n}}, 1);
    if (n_sample == 1) {
      result = b.reshape(b.argReduce(keys, iota, 1, /*is_max=*/true)[1], {rows, 1});
    } else {
      // The n_sample largest keys, largest first (ties keep the lower index, as a stable sort does).
      std::vector<Value> sorted = b.sort({keys, iota}, 1, /*descending=*/true, /*stable=*/true);
      result = b.slice(sorted[1], {0, 0}, {rows, n_sample}, {1, 1});
    }
  } else {
    // One race per sample: keys [rows, n_sample, n].
    Shape s3 = {rows, n_sample, n};
    Value keys = b.div(b.broadcastInDim(probs, s3, {0, 2}), exponentialPositive(ctx, s3, t));
    Value iota = b.iota({DType::S64, s3}, 2);
    result = b.argReduce(keys, iota, 2, /*is_max=*/true)[1];
  }
  return {b.convert(b.reshape(result, out.shape), out.dtype)};
}

}  // namespace

void populateSampling(Registry& r) {
  // Graphs only: eager mode runs csrc/eager/sampling.cpp (value checks, then lowered ops).
  r.add("aten::multinomial", multinomial).graphOnly();
}

}  // namespace torch_tpu::lowering
