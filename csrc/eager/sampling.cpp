// Eager multinomial on the device (aten::multinomial, multinomial.out).
//
// PyTorch checks the arguments, then the probability values (finite, non-negative, a positive sum per row) by
// reading a reduction back on the host, as its own kernels do; the same checks run here, in one device program and
// one synchronization, raising the same RuntimeErrors with the same messages as the CPU kernel. The draw then runs
// on the device with lowered ops (the exponential race of csrc/lowering/rules/sampling.cpp, which is what compiled
// graphs use): argmax_j p_j / E_j with E_j ~ Exp(1) is category j with probability p_j / sum(p); the n largest
// keys are n categories drawn without replacement; with replacement each sample has its own race.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <limits>

namespace torch_tpu {
namespace {

void checkArgs(const at::Tensor& self, int64_t n_sample, bool replacement) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  const int64_t n = self.size(-1);
  TORCH_CHECK(replacement || n_sample <= n,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(n <= (int64_t(1) << 24), "number of categories cannot exceed 2^24");
}

// The value checks of PyTorch's kernels. The fast path (no replacement, or one sample) and the with-replacement
// kernel word them differently; both are reproduced.
void checkValues(const at::Tensor& p, bool fast_path) {
  at::Tensor rows = p.dim() == 1 ? p.unsqueeze(0) : p;
  // One transfer for both conditions; the details of a failure are looked up only then.
  at::Tensor flags = at::stack({rows.ge(0).logical_and(rows.lt(INFINITY)).all(), rows.sum(1).le(0).any()})
                         .to(at::kCPU);
  auto f = flags.accessor<bool, 1>();
  if (!f[0]) {
    TORCH_CHECK(!fast_path, "probability tensor contains either `inf`, `nan` or element < 0");
    const bool neg_or_nan = rows.ge(0).logical_not().any().item<bool>();
    TORCH_CHECK(!neg_or_nan, "invalid multinomial distribution (encountering probability entry < 0)");
    TORCH_CHECK(false, "invalid multinomial distribution (encountering probability entry = infinity or NaN)");
  }
  TORCH_CHECK(!f[1], "invalid multinomial distribution (sum of probabilities <= 0)");
}

// Exp(1) draws of `sizes`, strictly positive (a 0 would make a zero-probability key 0 / 0 = NaN, which wins argmax).
at::Tensor exponentialLike(at::IntArrayRef sizes, const at::TensorOptions& opts, std::optional<at::Generator> gen) {
  const double tiny = opts.dtype() == at::kDouble ? std::numeric_limits<double>::min()
                                                  : double(std::numeric_limits<float>::min());
  // -log(1 - u), u uniform in [0, 1) (uniform_ takes an explicit generator through every path).
  return at::empty(sizes, opts).uniform_(0, 1, std::move(gen)).neg_().log1p_().neg_().clamp_min_(tiny);
}

at::Tensor draw(const at::Tensor& self, int64_t n_sample, bool replacement, std::optional<at::Generator> gen) {
  at::Tensor p = self.scalar_type() == at::kDouble ? self : self.to(at::kFloat);
  if (!replacement || n_sample == 1) {
    at::Tensor keys = p / exponentialLike(p.sizes(), p.options(), std::move(gen));
    if (n_sample == 1) return keys.argmax(-1, /*keepdim=*/true);
    return std::get<1>(keys.topk(n_sample, -1, /*largest=*/true, /*sorted=*/true));
  }
  std::vector<int64_t> sizes = p.sizes().vec();
  sizes.insert(sizes.end() - 1, n_sample);  // [..., n_sample, n]
  at::Tensor keys = p.unsqueeze(-2) / exponentialLike(sizes, p.options(), std::move(gen));
  return keys.argmax(-1);
}

at::Tensor tpu_multinomial(const at::Tensor& self, int64_t n_sample, bool replacement,
                           std::optional<at::Generator> gen) {
  checkArgs(self, n_sample, replacement);
  std::vector<int64_t> out_sizes = self.dim() == 1 ? std::vector<int64_t>{n_sample}
                                                   : std::vector<int64_t>{self.size(0), n_sample};
  if (self.numel() == 0) return at::empty(out_sizes, self.options().dtype(at::kLong));
  checkValues(self, !replacement || n_sample == 1);
  return draw(self, n_sample, replacement, std::move(gen));
}

at::Tensor& tpu_multinomial_out(const at::Tensor& self, int64_t n_sample, bool replacement,
                                std::optional<at::Generator> gen, at::Tensor& out) {
  TORCH_CHECK(out.device() == self.device(), "multinomial arguments must have the same device");
  TORCH_CHECK(out.scalar_type() == at::kLong, "multinomial expects Long tensor out, got: ", out.scalar_type());
  at::Tensor r = tpu_multinomial(self, n_sample, replacement, std::move(gen));
  if (out.sizes() != r.sizes()) out.resize_(r.sizes());
  out.copy_(r);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("multinomial", TORCH_FN(tpu_multinomial));
  m.impl("multinomial.out", TORCH_FN(tpu_multinomial_out));
}

}  // namespace torch_tpu
