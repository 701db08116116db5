#include "distributed/programs.h"

#include "core/executables.h"
#include "core/launch.h"
#include "core/program.h"
#include "stablehlo/builder.h"

namespace torch_tpu::dist {

namespace {

// Runs the one-parameter program `text` on src's device (through the core: its executable cache and launch).
runtime::BufferPtr runOn(const std::string& text, const runtime::BufferPtr& src, bool donate) {
  core::ExecutableLookup ex = core::executableFor(text);
  static const std::vector<bool> kDonate{true};
  core::LaunchOptions opts;
  opts.donate = donate ? &kDonate : nullptr;
  return core::launchExecutable(*ex.exe, src->device(), {src.get()}, opts)[0];
}

}  // namespace

runtime::BufferPtr identity(const runtime::BufferPtr& src, bool donate, const std::vector<int64_t>* out_dims) {
  if (out_dims != nullptr && *out_dims != src->dims()) return reshapeBuffer(src, *out_dims);
  shlo::Builder b;
  shlo::Value x = b.parameter(shlo::TensorType{static_cast<shlo::DType>(src->type()), src->dims()}, donate ? 0 : -1);
  return runOn(b.finish({x}), src, donate);
}

runtime::BufferPtr reshapeBuffer(const runtime::BufferPtr& src, const std::vector<int64_t>& dims) {
  shlo::Builder b;
  shlo::Value x = b.parameter(shlo::TensorType{static_cast<shlo::DType>(src->type()), src->dims()});
  return runOn(b.finish({b.reshape(x, dims)}), src, false);
}

}  // namespace torch_tpu::dist
