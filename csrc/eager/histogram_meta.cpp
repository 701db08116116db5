// Meta kernels for histogram and histogramdd's parts (PyTorch has none), so their lowering rules
// (csrc/lowering/rules/histogram.cpp) can run: the lowering kernel takes result types and argument checks from the
// meta kernels. The checks are CPU's (aten/src/ATen/native/Histogram.cpp), with its messages; a data range that is not
// finite is found on the device.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include <cmath>
#include <optional>
#include <vector>

namespace torch_tpu {
namespace {

using Doubles = std::optional<c10::ArrayRef<double>>;

// histogramdd_check_inputs: bin edge tensors and weights against the input.
void checkInputs(const at::Tensor& input, at::TensorList bins, const std::optional<at::Tensor>& weight) {
  TORCH_CHECK(input.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions, but got ",
              input.dim());
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), "\"histogramdd\" not implemented for '",
              input.scalar_type(), "'");
  const int64_t n = input.size(-1);
  TORCH_CHECK(int64_t(bins.size()) == n, "torch.histogramdd: expected ", n, " sequences of bin edges for a ", n,
              "-dimensional histogram but got ", bins.size());
  for (const auto d : c10::irange(n)) {
    const at::Tensor& e = bins[d];
    TORCH_CHECK(input.dtype() == e.dtype(), "torch.histogramdd: input tensor and bins tensors should",
                " have the same dtype, but got input with dtype ", input.dtype(), " and bins for dimension ", d,
                " with dtype ", e.dtype());
    TORCH_CHECK(e.dim() == 1, "torch.histogramdd: bins tensor should have one dimension,", " but got ", e.dim(),
                " dimensions in the bins tensor for dimension ", d);
    TORCH_CHECK(e.numel() > 0, "torch.histogramdd: bins tensor should have at least 1 element,", " but got ",
                e.numel(), " elements in the bins tensor for dimension ", d);
  }
  if (weight.has_value()) {
    TORCH_CHECK(input.dtype() == weight->dtype(), "torch.histogramdd: if weight tensor is provided,"
                " input tensor and weight tensor should have the same dtype, but got input(", input.dtype(), ")",
                ", and weight(", weight->dtype(), ")");
    auto in_sizes = input.sizes().vec();
    in_sizes.pop_back();
    auto w_sizes = weight->sizes().vec();
    if (w_sizes.empty()) w_sizes = {1};
    TORCH_CHECK(in_sizes == w_sizes, "torch.histogramdd: if weight tensor is provided it should have"
                " the same shape as the input tensor excluding its innermost dimension, but got input with shape ",
                input.sizes(), " and weight with shape ", weight->sizes());
  }
}

// The part of select_outer_bin_edges a meta kernel can check: the range's length and values.
void checkRange(int64_t n, Doubles range) {
  if (!range.has_value()) return;
  TORCH_CHECK(int64_t(range->size()) == 2 * n, "torch.histogramdd: for a ", n, "-dimensional histogram",
              " range should have ", 2 * n, " elements, but got ", range->size());
  for (const auto d : c10::irange(n)) {
    const double lo = (*range)[2 * d], hi = (*range)[2 * d + 1];
    TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), "torch.histogramdd: dimension ", d, "'s range [", lo, ", ",
                hi, "] is not finite");
    TORCH_CHECK(lo <= hi, "torch.histogramdd: min should not exceed max, but got", " min ", lo, " max ", hi,
                " for dimension ", d);
  }
}

// Equal-width bins: the input as points, the bin counts checked, the edges' (meta) tensors.
std::vector<at::Tensor> equalWidthEdges(const at::Tensor& self, at::IntArrayRef bins, Doubles range) {
  TORCH_CHECK(self.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions");
  const int64_t n = self.size(-1);
  TORCH_CHECK(int64_t(bins.size()) == n, "torch.histogramdd: expected ", n, " bin counts for a ", n,
              "-dimensional histogram but got ", bins.size());
  checkRange(n, range);
  std::vector<at::Tensor> edges;
  for (const auto d : c10::irange(n)) {
    TORCH_CHECK(bins[d] > 0, "torch.histogram(): bins must be > 0, but got ", bins[d], " for dimension ", d);
    edges.push_back(at::empty({bins[d] + 1}, self.options()));
  }
  return edges;
}

at::Tensor histShape(const at::Tensor& self, at::TensorList edges) {
  std::vector<int64_t> shape;
  for (const at::Tensor& e : edges) shape.push_back(e.numel() - 1);
  return at::empty(shape, self.options());
}

at::Tensor points(const at::Tensor& self) { return self.reshape({self.numel(), 1}); }
std::optional<at::Tensor> flatWeight(const std::optional<at::Tensor>& w) {
  return w.has_value() ? std::optional<at::Tensor>(w->reshape({w->numel()})) : w;
}

void checkOut(const at::Tensor& self, const at::Tensor& out, const char* what) {
  TORCH_CHECK(self.dtype() == out.dtype(), "torch.histogram: input tensor and ", what,
              " tensor should have the same dtype, but got input ", self.dtype(), " and ", what, " ", out.dtype());
}

// ---- histogram ----

std::tuple<at::Tensor, at::Tensor> histogramBinCt(const at::Tensor& self, int64_t bins, Doubles range,
                                                  const std::optional<at::Tensor>& weight, bool /*density*/) {
  at::Tensor pts = points(self);
  auto edges = equalWidthEdges(pts, {bins}, range);
  checkInputs(pts, edges, flatWeight(weight));
  return {histShape(self, edges), edges[0]};
}

std::tuple<at::Tensor&, at::Tensor&> histogramBinCtOut(const at::Tensor& self, int64_t bins, Doubles range,
                                                       const std::optional<at::Tensor>& weight, bool density,
                                                       at::Tensor& hist, at::Tensor& bin_edges) {
  auto [h, e] = histogramBinCt(self, bins, range, weight, density);
  checkOut(self, hist, "hist");
  checkOut(self, bin_edges, "bin_edges");
  at::native::resize_output(hist, h.sizes());
  at::native::resize_output(bin_edges, e.sizes());
  return {hist, bin_edges};
}

std::tuple<at::Tensor, at::Tensor> histogramBinsTensor(const at::Tensor& self, const at::Tensor& bins,
                                                       const std::optional<at::Tensor>& weight, bool /*density*/) {
  checkInputs(points(self), {bins}, flatWeight(weight));
  return {histShape(self, {bins}), at::empty_like(bins, at::MemoryFormat::Contiguous)};
}

std::tuple<at::Tensor&, at::Tensor&> histogramBinsTensorOut(const at::Tensor& self, const at::Tensor& bins,
                                                            const std::optional<at::Tensor>& weight, bool density,
                                                            at::Tensor& hist, at::Tensor& bin_edges) {
  auto [h, e] = histogramBinsTensor(self, bins, weight, density);
  checkOut(self, hist, "hist");
  checkOut(self, bin_edges, "bin_edges");
  at::native::resize_output(hist, h.sizes());
  at::native::resize_output(bin_edges, e.sizes());
  return {hist, bin_edges};
}

// ---- histogramdd ----

std::vector<at::Tensor> binEdges(const at::Tensor& self, at::IntArrayRef bins, Doubles range,
                                 const std::optional<at::Tensor>& /*weight*/, bool /*density*/) {
  return equalWidthEdges(self, bins, range);
}

void binEdgesOut(const at::Tensor& self, at::IntArrayRef bins, Doubles range, const std::optional<at::Tensor>& weight,
                 bool density, at::TensorList out) {
  auto edges = binEdges(self, bins, range, weight, density);
  TORCH_CHECK(out.size() == edges.size(), "torch.histogramdd: expected ", edges.size(), " bin edge tensors");
  for (const auto d : c10::irange(edges.size())) {
    checkOut(self, out[d], "bin_edges");
    at::native::resize_output(out[d], edges[d].sizes());
  }
}

at::Tensor fromBinCts(const at::Tensor& self, at::IntArrayRef bins, Doubles range,
                      const std::optional<at::Tensor>& weight, bool /*density*/) {
  auto edges = equalWidthEdges(self, bins, range);
  checkInputs(self, edges, weight);
  return histShape(self, edges);
}

at::Tensor& fromBinCtsOut(const at::Tensor& self, at::IntArrayRef bins, Doubles range,
                          const std::optional<at::Tensor>& weight, bool density, at::Tensor& out) {
  at::Tensor h = fromBinCts(self, bins, range, weight, density);
  checkOut(self, out, "hist");
  at::native::resize_output(out, h.sizes());
  return out;
}

at::Tensor fromBinTensors(const at::Tensor& self, at::TensorList bins, const std::optional<at::Tensor>& weight,
                          bool /*density*/) {
  checkInputs(self, bins, weight);
  return histShape(self, bins);
}

at::Tensor& fromBinTensorsOut(const at::Tensor& self, at::TensorList bins, const std::optional<at::Tensor>& weight,
                              bool density, at::Tensor& out) {
  at::Tensor h = fromBinTensors(self, bins, weight, density);
  checkOut(self, out, "hist");
  at::native::resize_output(out, h.sizes());
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("histogram.bin_ct", TORCH_FN(histogramBinCt));
  m.impl("histogram.bin_ct_out", TORCH_FN(histogramBinCtOut));
  m.impl("histogram.bins_tensor", TORCH_FN(histogramBinsTensor));
  m.impl("histogram.bins_tensor_out", TORCH_FN(histogramBinsTensorOut));
  m.impl("_histogramdd_bin_edges", TORCH_FN(binEdges));
  m.impl("_histogramdd_bin_edges.out", TORCH_FN(binEdgesOut));
  m.impl("_histogramdd_from_bin_cts", TORCH_FN(fromBinCts));
  m.impl("_histogramdd_from_bin_cts.out", TORCH_FN(fromBinCtsOut));
  m.impl("_histogramdd_from_bin_tensors", TORCH_FN(fromBinTensors));
  m.impl("_histogramdd_from_bin_tensors.out", TORCH_FN(fromBinTensorsOut));
}

}  // namespace torch_tpu
