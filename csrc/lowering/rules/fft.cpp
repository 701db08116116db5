// FFT family: PyTorch's three FFT primitives (every torch.fft function, stft and istft decompose into them) as
// stablehlo.fft over up to three dimensions.
//
//   _fft_c2c(self, dim, normalization, forward)       complex -> complex
//   _fft_r2c(self, dim, normalization, onesided)      real -> complex (the last of `dim` halved when onesided)
//   _fft_c2r(self, dim, normalization, last_dim_size) complex (onesided) -> real
//
// `normalization` is PyTorch's fft_norm_mode: 0 none, 1 by 1/sqrt(n), 2 by 1/n, n the product of the signal sizes.
// stablehlo's inverse transforms divide by n themselves; the rules undo that and apply PyTorch's mode. The
// transformed dimensions are moved last (in `dim` order, so the halved one is last), transformed, and moved back.
#include <algorithm>
#include <cmath>

#include "lowering/families.h"
#include "lowering/helpers.h"

namespace torch_tpu::lowering {
namespace {

struct Moved {
  std::vector<int64_t> perm, inverse;
};

// The permutation moving `dims` (in their order) after the other dimensions, and its inverse.
Moved moveLast(int64_t rank, const std::vector<int64_t>& dims) {
  Moved m;
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) m.perm.push_back(d);
  for (int64_t d : dims) m.perm.push_back(d);
  m.inverse.assign(size_t(rank), 0);
  for (int64_t i = 0; i < rank; ++i) m.inverse[size_t(m.perm[size_t(i)])] = i;
  return m;
}

std::vector<int64_t> fftDims(const Context& ctx, int64_t rank) {
  std::vector<int64_t> dims;
  for (int64_t d : ctx.toInts(1)) dims.push_back(normDim(ctx, d, rank));
  return dims;
}

// Scales an unnormalized transform by PyTorch's mode for n signal elements.
Value normalize(Builder& b, Value v, int64_t mode, int64_t n) {
  if (mode == 0 || n <= 1) return v;
  double s = mode == 1 ? 1.0 / std::sqrt(double(n)) : 1.0 / double(n);
  return b.mul(v, b.scalarLike(s, v));
}

bool fftAccepts(const Context& ctx) {
  const size_t k = ctx.toInts(1).size();
  if (k < 1 || k > 3) return false;  // stablehlo.fft transforms 1 to 3 dimensions
  DType t = ctx.tensor(0).dtype();
  return t == DType::F32 || t == DType::F64 || t == DType::C64 || t == DType::C128;
}

// The unnormalized inverse of stablehlo's inverse transform: times n.
Value unnormalizeInverse(Builder& b, Value v, int64_t n) { return n > 1 ? b.mul(v, b.scalarLike(double(n), v)) : v; }

}  // namespace

void populateFft(Registry& r) {
  r.add("aten::_fft_c2c", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    std::vector<int64_t> dims = fftDims(ctx, x.rank());
    const int64_t mode = ctx.toInt(2);
    const bool forward = ctx.arg(3).b;
    if (dims.empty()) return {x};
    Moved m = moveLast(x.rank(), dims);
    Value t = b.transpose(x, m.perm);
    std::vector<int64_t> len;
    int64_t n = 1;
    for (int64_t d : dims) {
      len.push_back(x.shape()[size_t(d)]);
      n *= x.shape()[size_t(d)];
    }
    if (n == 0) return {b.zeros(ctx.outputs.at(0))};
    Value y = b.fft(t, forward ? "FFT" : "IFFT", len);
    if (!forward) y = unnormalizeInverse(b, y, n);
    return {b.transpose(normalize(b, y, mode, n), m.inverse)};
  }).accepts(fftAccepts).complex();

  r.add("aten::_fft_r2c", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    std::vector<int64_t> dims = fftDims(ctx, x.rank());
    const int64_t mode = ctx.toInt(2);
    const bool onesided = ctx.arg(3).b;
    Moved m = moveLast(x.rank(), dims);
    Value t = b.transpose(x, m.perm);
    std::vector<int64_t> len;
    int64_t n = 1;
    for (int64_t d : dims) {
      len.push_back(x.shape()[size_t(d)]);
      n *= x.shape()[size_t(d)];
    }
    if (n == 0) return {b.zeros(ctx.outputs.at(0))};
    Value y = onesided ? b.fft(t, "RFFT", len) : b.fft(b.convert(t, ctx.outputs.at(0).dtype), "FFT", len);
    return {b.transpose(normalize(b, y, mode, n), m.inverse)};
  }).accepts([](const Context& ctx) { return fftAccepts(ctx) && !shlo::isComplex(ctx.tensor(0).dtype()); }).complex();

  r.add("aten::_fft_c2r", [](Context& ctx) -> std::vector<Value> {
    Builder& b = ctx.b;
    Value x = ctx.tensor(0);
    std::vector<int64_t> dims = fftDims(ctx, x.rank());
    const int64_t mode = ctx.toInt(2);
    const int64_t last = ctx.toInt(3);
    Moved m = moveLast(x.rank(), dims);
    Value t = b.transpose(x, m.perm);
    std::vector<int64_t> len;
    int64_t n = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
      int64_t s = i + 1 == dims.size() ? last : x.shape()[size_t(dims[i])];
      len.push_back(s);
      n *= s;
    }
    if (n == 0) return {b.zeros(ctx.outputs.at(0))};
    // stablehlo's IRFFT reads fft_length/2 + 1 input elements along the last dimension: cut or zero-pad to that.
    const int64_t need = last / 2 + 1, have = t.shape().back();
    if (have > need) {
      t = b.sliceInDim(t, 0, need, 1, t.rank() - 1);
    } else if (have < need) {
      std::vector<int64_t> lo(size_t(t.rank()), 0), hi(size_t(t.rank()), 0), in(size_t(t.rank()), 0);
      hi.back() = need - have;
      t = b.pad(t, b.zeros({t.dtype(), {}}), lo, hi, in);
    }
    Value y = unnormalizeInverse(b, b.fft(t, "IRFFT", len), n);
    return {b.transpose(normalize(b, y, mode, n), m.inverse)};
  }).accepts([](const Context& ctx) { return fftAccepts(ctx) && shlo::isComplex(ctx.tensor(0).dtype()); }).complex();
}

}  // namespace torch_tpu::lowering
