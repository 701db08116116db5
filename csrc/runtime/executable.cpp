// Executable: owns one PJRT_LoadedExecutable*. Output metadata is read once at construction and immutable
// afterwards; execute() uses only thread_local scratch space, so it may run concurrently from many threads.
#include <time.h>

#include "runtime/pjrt_util.h"

namespace torch_tpu {
namespace runtime {

namespace {
// Borrowed PJRT_Executable* for metadata queries; destroyed with the holder.
struct UnloadedExe {
  PJRT_Executable* exe = nullptr;
  explicit UnloadedExe(PJRT_LoadedExecutable* loaded) {
    detail::Args<PJRT_LoadedExecutable_GetExecutable_Args> a;
    a->loaded_executable = loaded;
    TPU_PJRT(PJRT_LoadedExecutable_GetExecutable, a.get());
    exe = a->executable;
  }
  ~UnloadedExe() {
    try {
      detail::Args<PJRT_Executable_Destroy_Args> a;
      a->executable = exe;
      detail::consumeErrorCode(TPU_PJRT_FN(PJRT_Executable_Destroy)(a.get()));
    } catch (...) {
    }
  }
};

void destroyLoaded(PJRT_LoadedExecutable* exe) noexcept {
  if (detail::g_forked || detail::closed()) return;  // left to the OS (see runtime::shutdown)
  try {
    detail::Args<PJRT_LoadedExecutable_Destroy_Args> a;
    a->executable = exe;
    detail::consumeErrorCode(TPU_PJRT_FN(PJRT_LoadedExecutable_Destroy)(a.get()));
  } catch (...) {
  }
}
}  // namespace

Executable::Executable(PJRT_LoadedExecutable* exe) : exe_(exe) {
  try {
    UnloadedExe u(exe);
    {
      detail::Args<PJRT_Executable_NumOutputs_Args> a;
      a->executable = u.exe;
      TPU_PJRT(PJRT_Executable_NumOutputs, a.get());
      num_outputs_ = a->num_outputs;
    }
    {
      detail::Args<PJRT_Executable_OutputElementTypes_Args> a;
      a->executable = u.exe;
      TPU_PJRT(PJRT_Executable_OutputElementTypes, a.get());
      if (a->num_output_types != num_outputs_)
        throw Error("PJRT_Executable_OutputElementTypes: " + std::to_string(a->num_output_types) +
                        " types for " + std::to_string(num_outputs_) + " outputs",
                    kErrorInternal);
      for (size_t i = 0; i < num_outputs_; ++i) out_types_.push_back(static_cast<ElementType>(a->output_types[i]));
    }
    {
      detail::Args<PJRT_Executable_OutputDimensions_Args> a;
      a->executable = u.exe;
      TPU_PJRT(PJRT_Executable_OutputDimensions, a.get());
      if (a->num_outputs != num_outputs_)
        throw Error("PJRT_Executable_OutputDimensions: wrong output count", kErrorInternal);
      const int64_t* d = a->dims;
      for (size_t i = 0; i < num_outputs_; ++i) {
        out_dims_.emplace_back(d, d + a->dim_sizes[i]);
        d += a->dim_sizes[i];
        int64_t n = static_cast<int64_t>(elementSize(out_types_[i]));
        for (int64_t e : out_dims_.back()) n *= e;
        out_bytes_ += n;
      }
    }
  } catch (...) {
    destroyLoaded(exe_);
    throw;
  }
}

Executable::~Executable() { destroyLoaded(exe_); }

std::vector<BufferPtr> Executable::execute(int device, const std::vector<Buffer*>& args,
                                           const std::vector<bool>& donate, int launch_id) {
  Client::Impl& im = Client::get().impl();
  PJRT_Device* dev = im.device(device);
  const size_t n = args.size();
  if (!donate.empty() && donate.size() != n)
    throw Error("execute: donate has " + std::to_string(donate.size()) + " entries for " + std::to_string(n) +
                    " arguments",
                kErrorInvalidArgument);

  thread_local std::vector<PJRT_Buffer*> arg_bufs;
  thread_local std::vector<PJRT_Buffer*> out_bufs;
  thread_local std::vector<int64_t> keep;  // non_donatable_input_indices
  arg_bufs.resize(n);
  keep.clear();
  bool any_donated = false;
  for (size_t i = 0; i < n; ++i) {
    Buffer* b = args[i];
    if (b == nullptr) throw Error("execute: argument " + std::to_string(i) + " is null", kErrorInvalidArgument);
    if (b->device_ != device)
      throw Error("execute: argument " + std::to_string(i) + " lives on device " + std::to_string(b->device_) +
                      ", execution is on device " + std::to_string(device),
                  kErrorInvalidArgument);
    arg_bufs[i] = b->raw_;
    bool d = !donate.empty() && donate[i];
    if (d) {
      // A buffer passed more than once can never be donated.
      for (size_t j = 0; j < n && d; ++j)
        if (j != i && args[j] == b) d = false;
    }
    if (d) any_donated = true;
    else keep.push_back(static_cast<int64_t>(i));
  }
  out_bufs.assign(num_outputs_, nullptr);

  detail::Args<PJRT_ExecuteOptions> opts;
  opts->non_donatable_input_indices = keep.data();
  opts->num_non_donatable_input_indices = keep.size();
  opts->launch_id = launch_id;

  PJRT_Buffer* const* arg_list = arg_bufs.data();
  PJRT_Buffer** out_list = out_bufs.data();
  PJRT_Event* done = nullptr;
  detail::Args<PJRT_LoadedExecutable_Execute_Args> a;
  a->executable = exe_;
  a->options = opts.get();
  a->argument_lists = &arg_list;
  a->num_devices = 1;
  a->num_args = n;
  a->output_lists = &out_list;
  a->device_complete_events = &done;
  a->execute_device = dev;
  detail::TracedLaunch* traced =
      detail::g_tracing.load(std::memory_order_relaxed) ? detail::beginTracedLaunch(device) : nullptr;
  try {
    detail::checkAlloc(TPU_PJRT_FN(PJRT_LoadedExecutable_Execute)(a.get()), "PJRT_LoadedExecutable_Execute",
                       out_bytes_, device);
  } catch (...) {
    if (traced) detail::abandonTracedLaunch(traced);
    throw;
  }
  if (traced) detail::endTracedLaunch(traced, done);

  std::vector<BufferPtr> outs;
  outs.reserve(num_outputs_);
  for (size_t i = 0; i < num_outputs_; ++i)
    outs.push_back(std::make_shared<Buffer>(out_bufs[i], out_types_[i], out_dims_[i], device));
  if (done != nullptr) im.trackExecution(device, done);
  im.state[device].launches.fetch_add(1, std::memory_order_relaxed);
  launches_.fetch_add(1, std::memory_order_relaxed);
  timespec now;
  if (clock_gettime(CLOCK_REALTIME_COARSE, &now) == 0)
    last_launch_ns_.store(static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec, std::memory_order_relaxed);

  if (any_donated) {
    // Only inputs the program really aliases are consumed; account for those now.
    for (size_t i = 0; i < n; ++i)
      if (donate[i] && args[i]->accounted_bytes_ != 0 && args[i]->isDeleted()) args[i]->releaseAccounting();
  }
  return outs;
}

std::string Executable::serialize() const {
  if (!TPU_PJRT_HAS(PJRT_Executable_Serialize))
    throw Error("plugin too old for PJRT_Executable_Serialize", kErrorUnimplemented);
  UnloadedExe u(exe_);
  detail::Args<PJRT_Executable_Serialize_Args> a;
  a->executable = u.exe;
  TPU_PJRT(PJRT_Executable_Serialize, a.get());
  std::string out(a->serialized_bytes, a->serialized_bytes_size);
  if (a->serialized_executable_deleter != nullptr) a->serialized_executable_deleter(a->serialized_executable);
  return out;
}

}  // namespace runtime
}  // namespace torch_tpu
