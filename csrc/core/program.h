// Storage programs: how every device program reads and writes tpu tensors, for eager ops and compiled graphs alike.
//
// A storage program is a StableHLO program whose inputs are the buffers of the storages behind the tensors it
// reads, plus small host values (storage offsets, Python numbers, random keys), and whose outputs are the new
// buffers of the storages it writes, followed by its fresh results. Three pieces:
//
//  - Signature: the tensors of one call over their storages (a storage read by several views is one input), with
//    their layouts and the cache-key bytes that decide which compiled program serves the call. Built on every call.
//  - ProgramBuilder: emits a program for a signature. read(t) gives a tensor's value (views are sliced or gathered
//    from their storage's buffer inside the program, see stablehlo/viewprog.h), write(t, v) replaces a view's
//    elements in its storage's new buffer, and storages written whose buffer nobody else holds are donated.
//  - Program: the compiled result and its launch: parameters -> buffers -> execute -> written storages take their
//    new buffers -> fresh results wrapped as tensors.
//
// Eager mode (csrc/eager/kernel.cpp) turns an IValue stack into a Signature and one op's arguments; compile mode
// (csrc/compile/graph.cpp) turns a graph description into a Signature and a whole graph. Both lower through the same
// rules and launch through Program::launch.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/FunctionRef.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/checks.h"
#include "core/launch.h"
#include "core/storage.h"
#include "runtime/runtime.h"
#include "stablehlo/builder.h"
#include "stablehlo/viewprog.h"

namespace torch_tpu::core {

// ---- cache-key bytes ----
inline void put(std::string& k, const void* p, size_t n) { k.append(static_cast<const char*>(p), n); }
template <class T>
inline void put(std::string& k, T v) {
  put(k, &v, sizeof(v));
}
inline void putInts(std::string& k, c10::IntArrayRef v) {
  put<uint32_t>(k, static_cast<uint32_t>(v.size()));
  put(k, v.data(), v.size() * sizeof(int64_t));
}

// A value of dtype `t` as its storage holds it: converted to t's compute type (core/dtype.h toDType), and for
// complex32 rounded to two halves packed in a 32-bit word (storageDType). `fromStorage` reads such words back as
// complex64; other dtypes pass through both unchanged.
shlo::Value toStorage(shlo::Builder& b, shlo::Value v, at::ScalarType t);
shlo::Value fromStorage(shlo::Builder& b, shlo::Value v, at::ScalarType t);

// PyTorch's message for tensors of one call on different devices (a RuntimeError, as on CPU).
[[noreturn]] void deviceMismatch(int device, const c10::Device& other);

// The tensors of one call and the storages behind them.
class Signature {
 public:
  struct Entry {
    at::Tensor t;
    int slot;       // storage slot
    bool identity;  // the tensor is its storage's whole buffer in row-major order, same dtype
    bool writes;    // the call may write this tensor
  };
  int device = -1;
  std::string key;                           // cache key: callers append their own facts around add()
  std::vector<Entry> tensors;
  std::vector<TpuStorage*> storages;         // distinct storages (slots)
  std::vector<runtime::BufferPtr> buffers;   // their buffers (null: never written, reads as zeros)
  std::vector<shlo::Shape> bdims;            // buffer dims (the flat element count when never written)
  std::vector<shlo::DType> btype;            // buffer element type
  std::vector<uint8_t> written;              // per slot: the call may write it
  std::vector<uint8_t> donatable;            // per slot: written, and nobody else holds the buffer (see seal)
  // Written storages are donated whatever their size (no TORCH_TPU_DONATE_MIN_BYTES floor): compiled graphs, whose
  // state (a static KV cache, running statistics) is updated in place like jax.jit's donated arguments instead of
  // being copied into a new buffer on every call. Set before seal; clear() resets it.
  bool donate_any_size = false;
  // A written tensor overlaps itself (a stride-0 dimension) or partially overlaps another tensor of the call: PyTorch
  // rejects such writes for most ops (at::assert_no_internal_overlap / assert_no_partial_overlap); see seal.
  bool overlap_hazard = false;
  // A written tensor shares memory with another tensor of the call (any overlap, the same tensor included): out=
  // forms of gather, take, cat, ... reject even that.
  bool write_alias = false;
  std::vector<uint8_t> pending;              // per slot: the value is pending in the fused-eager trace (recording)
  // Fused eager records the call instead of launching it: pending storages are read as they will be (no flush), and
  // nothing is donated (the recorder decides about buffers when it launches the trace).
  bool recording = false;

  // Adds a tpu tensor (on the signature's device; the first tensor decides it) and appends its key bytes. `writes`:
  // the call may write the tensor's storage. Returns the tensor's index.
  int add(const at::Tensor& t, bool writes);
  // Appends the per-storage facts (has a buffer; for written storages, donatable) once every tensor is added, and
  // sets overlap_hazard.
  void seal();
  // Empties the signature, keeping its capacity (a signature reused call after call allocates nothing).
  void clear();

  viewprog::Layout layout(int ti) const;
};

// One program input.
struct Param {
  enum class Kind : uint8_t {
    Storage,  // index: storage slot
    Offset,   // index: tensor; its storage offset (0-d s64), so x[i] shares one program for every i
    Rng,      // a fresh random key from the generator (tensor<2xui64>)
    Host,     // index: the caller's; supplied at launch by the caller (numbers, packed weights, ...)
  };
  Kind kind;
  int index;
  shlo::DType dtype;
};

// The dims of a dense, non-overlapping layout in memory order (outermost first): by decreasing stride, ties (size-1
// dims) in dim order.
std::vector<int64_t> memoryOrder(c10::IntArrayRef strides);

struct Program {
  runtime::ExecutablePtr exe;
  std::vector<Param> params;
  std::vector<bool> donated;        // per param: donated to the written storage's new buffer
  bool any_donation = false;
  std::vector<int> written_slots;   // the first outputs: these storages' new buffers
  struct Result {
    at::ScalarType dtype;
    std::vector<int64_t> sizes;
    // Empty: contiguous. Otherwise the strides PyTorch's meta kernel gives the result (channels_last, the layout of
    // a permuted input), dense and non-overlapping: the program stores the value in that order (dims()).
    std::vector<int64_t> strides;
    std::vector<int64_t> dims() const;  // the buffer's dims: sizes in memory order, outermost first
  };
  // A fresh result's tensor on `device` over `buffer` (or a pending storage when buffer is null), with r's strides.
  static at::Tensor wrapResult(runtime::BufferPtr buffer, const Result& r, int device);
  std::vector<Result> results;      // then the fresh results
  CheckSites checks;                // then, when set, the flag of the program's device-side checks (core/checks.h)

  using HostFn = c10::function_ref<runtime::BufferPtr(const Param&)>;
  // Runs the program on sig.device with sig's buffers; `host` supplies Host parameters, `gen` the random keys (the
  // device's default generator when absent). Written storages take their new buffers; returns the fresh results.
  // Drops sig's buffer references once the program is launched (a donated buffer must not be held).
  // `launch_id`: a program spanning several devices (compiled with a device assignment) is launched by each
  // participant with the launch id of this run, shared by all of them (runtime::Executable::execute).
  // `label`: what a profiler names the launch (core/launch.h; kind null: the caller's runtime::LaunchScope).
  std::vector<at::Tensor> launch(Signature& sig, HostFn host, const std::optional<at::Generator>& gen = std::nullopt,
                                 int launch_id = 0, const LaunchOptions& label = {}) const;
};

// The value of a parameter that is not a storage (an Offset, a fresh random key, a Host value), as a buffer on
// sig.device: the one binder of Program::launch and of fused-eager recording (eager/fused_record.cpp).
runtime::BufferPtr bindParam(const Param& p, const Signature& sig, Program::HostFn host,
                             const std::optional<at::Generator>& gen);

// Builds the program of one signature. `written_slots`: the storages the program writes, in output order (every one
// must receive at least one write()).
class ProgramBuilder {
 public:
  ProgramBuilder(const Signature& sig, std::vector<int> written_slots);

  shlo::Builder b;
  const Signature& sig;

  // Tensor ti's value, in its dtype and sizes (read once; reads see the storages before any write).
  shlo::Value read(int ti);
  // Replaces tensor ti's elements in its storage's new buffer with `v` (converted to ti's dtype, broadcast to its
  // sizes). Writes to one storage apply in call order.
  void write(int ti, shlo::Value v);
  // A caller-supplied input (Param::Kind::Host, `index` is the caller's).
  shlo::Value hostParam(const shlo::TensorType& t, int index);
  // A random key input for stablehlo.rng_bit_generator.
  shlo::Value rngState();
  // A device-side check of op `op` (lowering::Context::check): finish() folds every check into one flag output.
  // A no-op when device checks are off (TORCH_TPU_DEVICE_CHECKS=0).
  void check(const std::string& op, shlo::Value ok, const std::string& message, shlo::Value value, bool index_error);

  // Finishes the program: outputs are the written storages' new buffers, then `results` (whose torch types are
  // given in `result_types`), then the flag of the checks if any. Returns the program text; `prog` receives params
  // and output bookkeeping.
  // `num_replicas` > 1: a program over that many devices (replicas), for collectives inside it.
  // `layout`, when given, receives where @main's parts lie in the text (shlo::Builder::MainLayout).
  std::string finish(const std::vector<shlo::Value>& results, std::vector<Program::Result> result_types,
                     Program& prog, int num_replicas = 1, shlo::Builder::MainLayout* layout = nullptr);

  int numParams() const { return static_cast<int>(params_.size()); }

 private:
  // A tensor's logical value from the raw one (and back): its conjugate and negative bits applied.
  shlo::Value logical(const at::Tensor& t, shlo::Value v);
  shlo::Value storage(int slot);
  shlo::Value offset(int ti);

  std::vector<int> written_;
  std::vector<shlo::Value> storage_vals_, offsets_, reads_, new_bufs_;
  std::vector<Param> params_;
  std::vector<bool> donated_;
  std::vector<shlo::Value> check_fail_, check_value_;  // per check: 0-d pred (it fails), 0-d s64 (a bad value)
  std::vector<CheckSite> check_sites_;
};

}  // namespace torch_tpu::core
