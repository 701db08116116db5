// The one boxed kernel that runs every ATen op with a lowering rule on the device.
//
// A call is an IValue stack. Its tensors become a core::Signature (storages, layouts, cache-key bytes) and its other
// arguments add their own key bytes: numbers that change from call to call (Python scalars, storage offsets, random
// keys) are program inputs, so one program serves them all. On a miss, PyTorch's meta kernels give the result types
// (and raise PyTorch's own errors for bad input), the rule lowers the op into a storage program, and writes into
// mutated arguments (in-place, out=, arguments a schema declares written) are part of the same program. On a hit the
// program is launched asynchronously and its results are wrapped.
#include "eager/kernel.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/SmallVector.h>
#include <c10/util/strides.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <optional>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "core/args.h"
#include "core/cache_key.h"
#include "core/client.h"
#include "core/config.h"
#include "core/dtype.h"
#include "core/executables.h"
#include "core/global_state.h"
#include "core/lru.h"
#include "core/ops.h"
#include "core/packed.h"
#include "core/pressure.h"
#include "core/program.h"
#include "core/scalars.h"
#include "eager/copy.h"
#include "eager/cpu_judges.h"
#include "eager/device_args.h"
#include "eager/entry.h"
#include "eager/fallback.h"
#include "eager/fused.h"
#include "eager/overlap.h"
#include "eager/twins.h"

namespace torch_tpu {

using core::ArgKind;
using core::KeyTag;
using lowering::Arg;
using shlo::DType;
using shlo::TensorType;
using shlo::Value;

namespace {

// ---------------------------------------------------------------------------------------------------------------
// Per-operator facts, computed once per schema.

struct OpInfo {
  core::OpRule op;
  std::string name;                    // "aten::add_.Tensor"
  std::vector<ArgKind> kinds;          // per schema argument
  std::vector<int> rule_args;          // stack index of each rule argument (out= variants leave out arguments)
  std::vector<uint8_t> is_static;      // per stack argument: a Scalar/float whose value is built into the program
  // per stack argument: the schema's default of a Scalar/float argument that is otherwise a program input. A call
  // that passes the default (add's alpha=1, addmm's beta=1 and alpha=1) gets it built into the program: one input
  // less to pass and launch (each costs the plugin per call), one multiply less.
  std::vector<std::optional<c10::Scalar>> number_default;
  std::vector<uint8_t> is_mutated;     // per stack argument: Tensor(a!) / Tensor(a!)[]
  std::vector<int> mutated_args;       // stack indices of mutated arguments
  std::vector<int> return_alias;       // per return: stack index of the mutated argument it aliases, or -1
  std::vector<bool> return_is_list;    // per return: Tensor[] (else Tensor)
  int generator_arg = -1;
  bool returns_ok = true;              // every return is a Tensor or Tensor[]
  bool void_returns = false;           // returns nothing: results go to mutated_args, in order
  int packable_arg = -1;  // the product's right operand, read through its packed copy when it qualifies (core/packed.h)
  DeviceArgs device_args;  // device / layout / pin_memory arguments (eager/device_args.h)
  // The range factories' out= forms (arange, range, linspace, logspace): PyTorch's CPU kernels resize `out` only when
  // its number of elements differs from the result's, and otherwise fill it in its own shape, in logical order
  // (torch.arange(4, out=x.narrow(1, 1, 2)) fills a 2x2 view); their meta kernels resize it to the 1-d result.
  bool keeps_out_shape = false;
  // An in-place op (add_, atan2_, ...): its written tensor is never resized; a broadcast shape other than its own is
  // PyTorch's "output with shape ... doesn't match the broadcast shape" error (some of PyTorch's Python meta kernels
  // resize it with a warning instead, as for out=).
  bool in_place = false;
  // put_/put: CPU's kernel raises (or warns) PyTorch's nondeterministic alert when accumulate=False under
  // torch.use_deterministic_algorithms(True); the stack index of `accumulate`, or -1 for other ops.
  int alert_unless_accumulate = -1;
};

std::string fullName(const c10::OperatorName& n) {
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

std::mutex g_info_mu;
std::unordered_map<const c10::FunctionSchema*, std::unique_ptr<OpInfo>> g_infos;

const OpInfo& buildInfo(const c10::OperatorHandle& op) {
  const c10::FunctionSchema& schema = op.schema();
  std::lock_guard<std::mutex> g(g_info_mu);
  auto it = g_infos.find(&schema);
  if (it != g_infos.end()) return *it->second;
  auto info = std::make_unique<OpInfo>();
  info->name = fullName(schema.operator_name());
  info->op = core::ruleFor(info->name);
  TORCH_INTERNAL_ASSERT(info->op.rule != nullptr, "no rule registered for ", info->name);
  const auto& args = schema.arguments();
  info->is_static.assign(args.size(), 0);
  info->is_mutated.assign(args.size(), 0);
  for (size_t i = 0; i < args.size(); ++i) {
    info->kinds.push_back(core::argKind(args[i]));
    if (info->kinds.back() == ArgKind::Generator) info->generator_arg = static_cast<int>(i);
    for (const auto& s : info->op.rule->static_args)
      if (s == args[i].name()) info->is_static[i] = 1;
    info->number_default.emplace_back();
    const ArgKind kind = info->kinds.back();
    if (!info->is_static[i] && (kind == ArgKind::Scalar || kind == ArgKind::Float) && args[i].default_value() &&
        (args[i].default_value()->isInt() || args[i].default_value()->isDouble()))
      info->number_default.back() = args[i].default_value()->toScalar();
    if (args[i].alias_info() && args[i].alias_info()->isWrite()) {
      info->is_mutated[i] = 1;
      info->mutated_args.push_back(static_cast<int>(i));
    }
    if (!(info->op.variant == core::Variant::Out && args[i].is_out())) info->rule_args.push_back(static_cast<int>(i));
  }
  info->void_returns = schema.returns().empty();
  for (const auto& ret : schema.returns()) {
    bool is_list = ret.type()->kind() == c10::TypeKind::ListType &&
                   ret.type()->containedType(0)->kind() == c10::TypeKind::TensorType;
    if (ret.type()->kind() != c10::TypeKind::TensorType && !is_list) info->returns_ok = false;
    info->return_is_list.push_back(is_list);
    int alias = -1;
    if (ret.alias_info() && ret.alias_info()->isWrite()) {
      for (size_t i = 0; i < args.size(); ++i)
        if (args[i].alias_info() && args[i].alias_info()->isWrite() &&
            args[i].alias_info()->beforeSets() == ret.alias_info()->beforeSets())
          alias = static_cast<int>(i);
    }
    info->return_alias.push_back(alias);
  }
  if (info->op.variant == core::Variant::Own) info->packable_arg = info->op.rule->packed_operand;
  info->device_args = deviceArgsOf(schema);
  for (const char* f : {"aten::arange.", "aten::range.", "aten::linspace.", "aten::logspace."})
    if (info->name.rfind(f, 0) == 0 && schema.is_mutable() && info->mutated_args.size() == 1 &&
        args[info->mutated_args[0]].is_out())
      info->keeps_out_shape = true;
  {
    const std::string& base = schema.name();
    bool any_out = false;
    for (int i : info->mutated_args) any_out = any_out || args[i].is_out();
    info->in_place = !any_out && !base.empty() && base.back() == '_' && base.find("resize") == std::string::npos &&
                     base != "aten::set_";
  }
  if (schema.name() == "aten::put_" || schema.name() == "aten::put")
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].name() == "accumulate") info->alert_unless_accumulate = static_cast<int>(i);
  const OpInfo& out = *info;
  g_infos.emplace(&schema, std::move(info));
  return out;
}

// Per-thread memo of the shared table (infos are never removed): no lock on the hot path.
const OpInfo& infoFor(const c10::OperatorHandle& op) {
  thread_local std::unordered_map<const void*, const OpInfo*> memo;
  const void* key = &op.schema();
  auto it = memo.find(key);
  if (it != memo.end()) return *it->second;
  const OpInfo& info = buildInfo(op);
  memo.emplace(key, &info);
  return info;
}

// ---------------------------------------------------------------------------------------------------------------
// Programs and the cache.

struct CacheStats {
  std::atomic<int64_t> requests{0}, hits{0}, misses{0}, compiles{0}, disk_hits{0};
  std::atomic<int64_t> compile_ns{0}, disk_ns{0}, lower_ns{0};
};
CacheStats g_stats;

std::mutex g_cache_mu;
core::LruMap<std::shared_ptr<EagerProgram>> g_cache;  // call signature -> program
const bool g_cache_trimmer = [] {
  core::registerExecutableHolder([] {
    std::unique_lock<std::mutex> g(g_cache_mu, std::try_to_lock);
    if (g.owns_lock()) g_cache.trimOldestHalf();
  });
  return true;
}();
std::atomic<uint64_t> g_next_id{1};

int64_t nsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
}

// ---------------------------------------------------------------------------------------------------------------
// A call's arguments: its tensors as a Signature, every argument's key bytes.

struct Call {
  core::Signature sig;
  std::vector<int> first_tensor;  // per stack argument: index of its first tensor in sig.tensors (-1: none)
  int pack_arg = -1;              // stack argument read through its packed copy (see packDecision), or -1
};

// The Call of the current kernel invocation on this thread: reused (capacity kept), one per nesting level (a CPU
// fallback copies through the kernel again). Emptied on release, so no tensor outlives its call.
class CallScope {
 public:
  CallScope() {
    thread_local std::vector<std::unique_ptr<Call>> pool;
    thread_local size_t depth = 0;
    depth_ = &depth;
    if (pool.size() <= depth) pool.push_back(std::make_unique<Call>());
    call_ = pool[depth].get();
    ++depth;
  }
  ~CallScope() {
    call_->sig.clear();
    --*depth_;
  }
  // The call, empty (a retry starts over).
  Call& get() {
    if (used_) call_->sig.clear();
    used_ = true;
    return *call_;
  }

 private:
  Call* call_;
  size_t* depth_;
  bool used_ = false;
};

// A Python number (or 0-d CPU tensor) given for a tensor argument: a program input, keyed by its dtype.
bool isCpuScalar(const at::Tensor& t) { return t.dim() == 0 && t.is_cpu(); }

// The host-parameter index of element `pos` of list argument `si` (a 0-d CPU tensor): above every stack index.
constexpr int kListHostBase = 1 << 20;
int listHostIndex(int si, int pos) { return kListHostBase + (si << 12) + pos; }

void scanTensor(Call& c, int si, const at::Tensor& t, bool writes) {
  core::KeyWriter k(c.sig.key);
  if (!t.defined()) {
    k.tag(KeyTag::UndefinedTensor);
    return;
  }
  if (!t.is_privateuseone()) {
    if (isCpuScalar(t)) {
      k.tag(KeyTag::CpuScalar);
      k.value<int8_t>(static_cast<int8_t>(t.scalar_type()));
      k.value<uint8_t>(t.unsafeGetTensorImpl()->is_wrapped_number());
      return;
    }
    core::deviceMismatch(c.sig.device < 0 ? 0 : c.sig.device, t.device());
  }
  int ti = c.sig.add(t, writes);
  if (c.first_tensor[si] < 0) c.first_tensor[si] = ti;
}

// Whether stack argument i (a Scalar or float) is built into the program for this call: a static argument of the
// rule, or the schema's default value (same kind and value: 1 and 1.0 are different calls).
bool builtIn(const OpInfo& info, size_t i, const c10::Scalar& v) {
  if (info.is_static[i]) return true;
  const std::optional<c10::Scalar>& d = info.number_default[i];
  if (!d) return false;
  if (d->isIntegral(false)) return v.isIntegral(false) && v.toLong() == d->toLong();
  return v.isFloatingPoint() && v.toDouble() == d->toDouble() && !std::signbit(v.toDouble()) == !std::signbit(d->toDouble());
}

KeyTag numberKind(const c10::Scalar& v) {
  return v.isBoolean() ? KeyTag::Bool : v.isIntegral(false) ? KeyTag::Integer : KeyTag::Floating;
}

void scanNumber(core::KeyWriter& k, const c10::Scalar& v, bool is_static) {
  if (v.isComplex()) {  // complex numbers are always built into the program (core/args.h)
    k.tag(KeyTag::Complex);
    k.value<double>(v.toComplexDouble().real());
    k.value<double>(v.toComplexDouble().imag());
    return;
  }
  k.tag(numberKind(v));
  if (is_static) {
    if (v.isFloatingPoint()) k.value<double>(v.toDouble());
    else k.value<int64_t>(v.toLong());
  }
}

int64_t intOf(const c10::IValue& e) { return e.isInt() ? e.toInt() : e.toSymInt().guard_int(__FILE__, __LINE__); }

// Inference products read a transposed weight through its packed copy (core/packed.h): with autograd off, when the
// operand is the transpose of its whole storage, that storage has a buffer (in fused recording: is not pending), and
// no other tensor of the call shares it.
int packDecision(const OpInfo& info, const torch::jit::Stack& stack, size_t base, const Call& c) {
  const int si = info.packable_arg;
  if (si < 0 || at::GradMode::is_enabled() || !core::packWeightsEnabled()) return -1;
  const c10::IValue& v = stack[base + si];
  const int ti = c.first_tensor[si];
  // (a conjugate or negative view is read through its bits by the program, never as a packed copy)
  if (!v.isTensor() || ti < 0 || v.toTensor().is_conj() || v.toTensor().is_neg() ||
      !core::isPackableTranspose(v.toTensor()))
    return -1;
  const int slot = c.sig.tensors[ti].slot;
  if (!c.sig.buffers[slot] || c.sig.written[slot]) return -1;
  for (size_t j = 0; j < c.sig.tensors.size(); ++j)
    if (static_cast<int>(j) != ti && c.sig.tensors[j].slot == slot) return -1;
  return si;
}

void scan(const OpInfo& info, const c10::FunctionSchema& schema, const torch::jit::Stack& stack, size_t base, Call& c) {
  const size_t n = info.kinds.size();
  core::KeyWriter k(c.sig.key);
  c.first_tensor.assign(n, -1);
  k.bytes(&schema, sizeof(&schema));
  core::putGlobalStateKey(c.sig.key);  // torch's settings programs and result types depend on (core/global_state.h)
  for (size_t i = 0; i < n; ++i) {
    const c10::IValue& v = stack[base + i];
    const int si = static_cast<int>(i);
    if (v.isNone()) {
      k.tag(KeyTag::None);
      continue;
    }
    switch (info.kinds[i]) {
      case ArgKind::Tensor:
        scanTensor(c, si, v.toTensor(), info.is_mutated[i]);
        break;
      case ArgKind::TensorList:
        k.tag(KeyTag::ListBegin);
        for (const c10::IValue& e : v.toListRef()) {
          if (e.isTensor()) scanTensor(c, si, e.toTensor(), info.is_mutated[i]);
          else k.tag(KeyTag::ListHole);
        }
        k.tag(KeyTag::ListEnd);
        break;
      case ArgKind::Scalar:
      case ArgKind::Float:
      {
        const c10::Scalar x = v.toScalar();
        const bool built = builtIn(info, i, x);
        if (built && !info.is_static[i]) k.tag(KeyTag::DefaultBuiltIn);
        scanNumber(k, x, built);
        break;
      }
      case ArgKind::Int:
        k.tag(KeyTag::Int);
        k.value<int64_t>(intOf(v));
        break;
      case ArgKind::Bool:
        k.tag(KeyTag::BoolArg);
        k.value<uint8_t>(v.toBool());
        break;
      case ArgKind::IntList:
        k.tag(KeyTag::IntList);
        if (v.isIntList()) {
          k.ints(v.toDimVector());
        } else {
          for (const c10::IValue& e : v.toListRef()) k.value<int64_t>(intOf(e));
        }
        break;
      case ArgKind::FloatList:
      case ArgKind::ScalarList:  // static values
        k.tag(KeyTag::NumberList);
        for (const c10::IValue& e : v.toListRef()) {
          c10::Scalar x = e.toScalar();
          k.tag(numberKind(x));
          k.value<double>(x.toDouble());
        }
        break;
      case ArgKind::BoolList:
        k.tag(KeyTag::BoolList);
        for (const c10::IValue& e : v.toListRef()) k.value<uint8_t>(e.toBool());
        break;
      case ArgKind::String: {
        k.tag(KeyTag::String);
        k.string(v.toStringRef());
        break;
      }
      case ArgKind::ScalarType:
        k.tag(KeyTag::ScalarType);
        k.value<int64_t>(v.toInt());
        break;
      case ArgKind::Device:
        k.tag(KeyTag::Device);
        k.value<int8_t>(v.toDevice().index());
        break;
      case ArgKind::Generator:
        k.tag(KeyTag::Generator);
        break;
      case ArgKind::Other:
        k.tag(KeyTag::Other);
        break;
    }
  }
  if (c.sig.device < 0) {
    // Factories: the device argument, else the current device.
    for (size_t i = 0; i < n; ++i) {
      const c10::IValue& v = stack[base + i];
      if (v.isDevice() && v.toDevice().is_privateuseone())
        c.sig.device = v.toDevice().has_index() ? v.toDevice().index() : currentDevice();
    }
    if (c.sig.device < 0) c.sig.device = currentDevice();
  }
  k.value<int8_t>(static_cast<int8_t>(c.sig.device));
  c.sig.seal();
  c.pack_arg = packDecision(info, stack, base, c);
  k.value<int8_t>(static_cast<int8_t>(c.pack_arg));
}

// ---------------------------------------------------------------------------------------------------------------
// Building a program on a cache miss.

std::shared_ptr<EagerProgram> buildProgram(const c10::OperatorHandle& op, const OpInfo& info,
                                      const torch::jit::Stack& stack, size_t base, const Call& c,
                                      bool& needs_resize) {
  const c10::FunctionSchema& schema = op.schema();
  const auto& args = schema.arguments();
  const core::Signature& sig = c.sig;
  auto t_start = std::chrono::steady_clock::now();
  auto prog = std::make_shared<EagerProgram>();
  prog->id = g_next_id.fetch_add(1);
  prog->op = info.name;
  auto fallback = [&](std::string why) {
    prog->fallback = true;
    prog->fallback_reason = std::move(why);
    return prog;
  };

  // 1. Result types (and PyTorch's own argument checks) from the meta kernels.
  torch::jit::Stack meta;
  meta.reserve(args.size());
  AliasTwins toMeta(c10::kMeta);  // aliasing as on CPU: PyTorch's overlap checks (out= aliasing an input) hold
  for (size_t i = 0; i < args.size(); ++i) meta.push_back(toMeta(stack[base + i]));
  const std::vector<c10::IValue> meta_args(meta.begin(), meta.end());  // in-place meta kernels update these
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
  } catch (const c10::NotImplementedError& e) {
    return fallback("no meta kernel");
  } catch (const std::exception& e) {
    // PyTorch rejected the call. Its Python meta kernels sometimes raise another exception type than the CPU
    // kernel does; the CPU kernel run on the same arguments raises exactly what a CPU user would see.
    if (fallbackStrict()) throw;
    prog->error_on_cpu = true;
    return prog;
  }
  judgeOnCpu(op, info.name, info.op.variant == core::Variant::Out, stack, base);
  std::vector<TensorType> out_types;  // per flat result
  std::vector<at::ScalarType> out_dtypes;  // per flat result (complex32 computes as complex64: core/dtype.h)
  std::vector<std::vector<int64_t>> out_strides;  // per flat result: the meta result's strides when not contiguous
  std::vector<std::pair<int, int>> writes;  // (flat result, tensor index) written into an argument
  const c10::MemoryFormat conv_format = convolutionMemoryFormat(info.name, stack, base);
  auto addType = [&](const at::Tensor& m) -> bool {
    // A fresh result keeps the layout PyTorch's meta kernel gives it (TensorIterator follows its inputs' memory
    // format: channels_last in, channels_last out), when that layout is dense: the program stores it in that order.
    // Strides of size-1 dims count too (a channels_last (n, c, 1, 1) tensor is also contiguous, and its strides
    // propagate to results PyTorch's way).
    const bool strided = m.defined() && m.dim() > 1 && m.storage_offset() == 0 &&
                         m.strides() != c10::IntArrayRef(c10::contiguous_strides(m.sizes())) &&
                         m.is_non_overlapping_and_dense();
    if (m.defined() && conv_format == c10::MemoryFormat::ChannelsLast && m.dim() == 4)
      out_strides.push_back(c10::get_channels_last_strides_2d(m.sizes()));
    else if (m.defined() && conv_format == c10::MemoryFormat::ChannelsLast3d && m.dim() == 5)
      out_strides.push_back(c10::get_channels_last_strides_3d(m.sizes()));
    else
      out_strides.push_back(strided ? m.strides().vec() : std::vector<int64_t>{});
    out_dtypes.push_back(m.defined() ? m.scalar_type() : at::kFloat);
    if (!m.defined()) {
      out_types.push_back(TensorType{});
      return true;
    }
    if (!supportedDType(m.scalar_type())) {
      fallback(std::string("unsupported result dtype ") + c10::toString(m.scalar_type()));
      return false;
    }
    out_types.push_back(TensorType{toDType(m.scalar_type()), m.sizes().vec()});
    return true;
  };
  // The tensors of stack argument si, in order.
  auto tensorsOf = [&](int si) {
    std::vector<int> r;
    int ti = c.first_tensor[si];
    if (ti < 0) return r;
    const c10::IValue& v = stack[base + si];
    if (v.isTensor()) return std::vector<int>{ti};
    for (const c10::IValue& e : v.toListRef())
      if (e.isTensor() && e.toTensor().defined() && e.toTensor().is_privateuseone()) r.push_back(ti++);
    return r;
  };
  // A mutated argument's tensor ti: its meta twin after the meta kernel (list_pos: position among the list's
  // tensors).
  auto writtenType = [&](int si, size_t list_pos) -> at::Tensor {
    const c10::IValue& m = meta_args[si];
    if (m.isTensor()) return m.toTensor();
    size_t pos = 0;
    for (const c10::IValue& e : m.toListRef())
      if (e.isTensor() && e.toTensor().defined() && pos++ == list_pos) return e.toTensor();
    return at::Tensor();
  };
  auto writeMutated = [&](int si) -> bool {
    std::vector<int> ts = tensorsOf(si);
    for (size_t j = 0; j < ts.size(); ++j) {
      writes.push_back({static_cast<int>(out_types.size()), ts[j]});
      if (!addType(writtenType(si, j))) return false;
    }
    return true;
  };
  if (!info.void_returns) {
    TORCH_INTERNAL_ASSERT(meta.size() == schema.returns().size());
    for (size_t k = 0; k < meta.size(); ++k) {
      std::vector<int> flat;
      if (info.return_is_list[k]) {
        for (const at::Tensor& m : meta[k].toTensorList()) {
          flat.push_back(static_cast<int>(out_types.size()));
          if (!addType(m)) return prog;
        }
      } else {
        const at::Tensor m = meta[k].isTensor() ? meta[k].toTensor() : at::Tensor();
        flat.push_back(m.defined() ? static_cast<int>(out_types.size()) : -1);
        if (!addType(m)) return prog;
      }
      int alias = info.return_alias[k];
      if (alias >= 0) {
        std::vector<int> ts = tensorsOf(alias);
        for (size_t j = 0; j < flat.size() && j < ts.size(); ++j)
          if (flat[j] >= 0) writes.push_back({flat[j], ts[j]});
      }
      prog->ret_flat.push_back(std::move(flat));
    }
    // Arguments the op writes without returning them (running statistics of _native_batch_norm_legit): the rule
    // returns their new values after the schema's results.
    for (int si : info.mutated_args)
      if (std::find(info.return_alias.begin(), info.return_alias.end(), si) == info.return_alias.end() &&
          !writeMutated(si))
        return prog;
  } else {
    // Results go into the mutated arguments' tensors, in order; their types are the arguments' own.
    for (int si : info.mutated_args)
      if (!writeMutated(si)) return prog;
  }
  prog->num_flat = static_cast<int>(out_types.size());
  // out=/in-place: the real argument must have the meta result's shape.
  for (const auto& w : writes) {
    const at::Tensor& real = sig.tensors[w.second].t;
    if (real.sizes() != c10::IntArrayRef(out_types[w.first].shape)) {
      if (info.keeps_out_shape && real.numel() == c10::multiply_integers(out_types[w.first].shape)) continue;
      TORCH_CHECK(!info.in_place, "output with shape ", real.sizes(), " doesn't match the broadcast shape ",
                  c10::IntArrayRef(out_types[w.first].shape));
      needs_resize = true;
      real.resize_(out_types[w.first].shape);
      // An out= tensor resized by the call takes the strides of the functional op's result (TensorIterator follows
      // its inputs' permutation), as CPU's kernels restride it; the Meta key's out= kernels leave it contiguous.
      if (info.op.variant == core::Variant::Out) {
        const std::vector<int64_t> st = functionalResultStrides(info.op.rule->op, args, meta_args, w.first);
        if (!st.empty()) real.unsafeGetTensorImpl()->set_sizes_and_strides(out_types[w.first].shape, st);
      }
    }
  }
  if (needs_resize) return nullptr;
  for (const auto& e : sig.tensors)
    if (!supportedDType(e.t.scalar_type()))
      return fallback(std::string("unsupported dtype ") + c10::toString(e.t.scalar_type()));

  // 2. The program.
  std::vector<int> written;  // storage slots written, in order of first write
  for (const auto& w : writes) {
    int slot = sig.tensors[w.second].slot;
    if (std::find(written.begin(), written.end(), slot) == written.end()) written.push_back(slot);
  }
  core::ProgramBuilder pb(sig, written);
  core::CallContext ctx(pb, info.name);
  for (int si : info.rule_args) {
    const c10::IValue& v = stack[base + si];
    const ArgKind kind = info.kinds[si];
    const std::string& name = args[si].name();
    Arg a;
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      a.name = name;
      if (!t.defined()) {
        a.kind = Arg::Kind::None;
      } else if (si == c.pack_arg) {
        // The operand (a transposed weight) as its packed copy: the same values, row-major, which the product reads
        // in the fast layout.
        a.kind = Arg::Kind::Tensor;
        a.tensor = pb.hostParam(TensorType{toDType(t.scalar_type()), {t.sizes().begin(), t.sizes().end()}}, si);
      } else if (t.is_privateuseone()) {
        a.kind = Arg::Kind::Tensor;
        a.tensor = pb.read(c.first_tensor[si]);
      } else {  // a 0-d CPU tensor: a program input
        a.kind = Arg::Kind::Tensor;
        a.tensor = pb.hostParam(TensorType{toDType(t.scalar_type()), {}}, si);
        a.wrapped_number = t.unsafeGetTensorImpl()->is_wrapped_number();
      }
    } else if (kind == ArgKind::TensorList && !v.isNone()) {
      a.name = name;
      a.kind = Arg::Kind::TensorList;
      int ti = c.first_tensor[si];
      int pos = 0;
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor() && e.toTensor().defined()) {
          const at::Tensor& t = e.toTensor();
          if (t.is_privateuseone()) {
            a.tensors.push_back(pb.read(ti++));
          } else {
            // A 0-d CPU tensor in a list the op only reads (a Tensor lr in an optimizer's foreach step): a program
            // input, as CUDA accepts it; a list the op writes must be on the device.
            TORCH_CHECK_NOT_IMPLEMENTED(isCpuScalar(t) && !info.is_mutated[si] && pos < 4096,
                                        "tpu: CPU tensor in a tensor list");
            a.tensors.push_back(pb.hostParam(TensorType{toDType(t.scalar_type()), {}}, listHostIndex(si, pos)));
          }
        } else {
          a.tensors.push_back(Value());
        }
        ++pos;
      }
    } else {
      bool dynamic = (kind == ArgKind::Scalar || kind == ArgKind::Float) && !v.isNone() && !builtIn(info, si, v.toScalar());
      a = core::hostArg(pb.b, name, kind, v, dynamic);
    }
    ctx.args.push_back(std::move(a));
    ctx.host_index.push_back(si);
  }
  ctx.outputs = out_types;

  const lowering::Rule& rule = *info.op.rule;
  if (std::string why = lowering::declineReason(rule, ctx); !why.empty()) return fallback(why);
  std::vector<Value> results;
  try {
    results = lowering::lower(rule, ctx);
  } catch (const lowering::InvalidCall&) {
    prog->error_on_cpu = true;  // the CPU kernel raises PyTorch's error
    return prog;
  } catch (const lowering::LoweringError& e) {
    return fallback(e.reason());
  } catch (const shlo::BuildError& e) {
    return fallback(e.what());
  }

  // 3. Writes into argument storages, then fresh results.
  std::vector<bool> is_written(results.size(), false);
  for (const auto& w : writes) {
    is_written[w.first] = true;
    Value v = results[w.first];
    const at::Tensor& real = sig.tensors[w.second].t;
    if (info.keeps_out_shape && v.valid() && real.sizes() != c10::IntArrayRef(v.shape()))
      v = pb.b.reshape(v, real.sizes().vec());  // the same number of elements, in the out tensor's shape
    pb.write(w.second, v);
  }
  std::vector<Value> fresh;
  std::vector<core::Program::Result> fresh_types;
  for (size_t k = 0; k < results.size(); ++k) {
    if (is_written[k] || out_types[k].dtype == DType::Invalid) continue;
    core::Program::Result r{out_dtypes[k], out_types[k].shape, out_strides[k]};
    Value v = r.dtype == at::kComplexHalf ? core::toStorage(pb.b, results[k], r.dtype) : results[k];
    fresh.push_back(r.strides.empty() ? v : pb.b.transpose(v, core::memoryOrder(r.strides)));
    fresh_types.push_back(std::move(r));
    prog->fresh_flat.push_back(static_cast<int>(k));
  }
  prog->text = pb.finish(fresh, std::move(fresh_types), prog->prog, 1, &prog->layout);
  g_stats.lower_ns += nsSince(t_start);
  try {
    prog->executable();
  } catch (const std::exception& e) {
    return fallback(std::string("compile failed: ") + e.what());
  }
  return prog;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Entries.

const runtime::ExecutablePtr& EagerProgram::executable() {
  std::call_once(exe_once_, [this] {
    // Eager programs are cached by call signature here; the executable comes from the disk cache or the compiler.
    core::ExecutableLookup ex = core::executableFor(text, core::ExecutableCaches{false, true});
    if (ex.source == core::ExecutableLookup::Source::Disk) {
      g_stats.disk_hits++;
      g_stats.disk_ns += static_cast<int64_t>(ex.seconds * 1e9);
    } else {
      g_stats.compiles++;
      g_stats.compile_ns += static_cast<int64_t>(ex.seconds * 1e9);
    }
    prog.exe = std::move(ex.exe);
  });
  return prog.exe;
}

const EagerProgram::Function& EagerProgram::function() {
  std::call_once(fn_once_, [this] {
    // @main becomes the private function @e<id>: its parameters and results from the builder's layout (no donation
    // attributes in a private function), its body and the top-level functions it calls cut from the text.
    const shlo::Builder::MainLayout& L = layout;
    TORCH_INTERNAL_ASSERT(L.body_end > L.body_begin && L.body_end <= L.top_begin && L.top_end <= text.size(),
                          "tpu: program of ", op, " has no @main layout");
    Function fn;
    fn.arg_types = L.arg_types;
    fn.result_types = L.result_types;
    std::string head = "  func.func private @e" + std::to_string(id) + "(";
    for (size_t i = 0; i < L.arg_types.size(); ++i) {
      if (i) head += ", ";
      head += "%arg" + std::to_string(i) + ": " + L.arg_types[i];
    }
    head += ") -> (";
    for (size_t i = 0; i < L.result_types.size(); ++i) head += (i ? ", " : "") + L.result_types[i];
    head += ") {\n";
    fn.text = head + text.substr(L.body_begin, L.body_end - L.body_begin) + "  }\n";
    fn.top = text.substr(L.top_begin, L.top_end - L.top_begin);
    fn_ = std::move(fn);
  });
  return fn_;
}

namespace {

// ---------------------------------------------------------------------------------------------------------------
// Launch.

void launch(const std::shared_ptr<EagerProgram>& ep, const OpInfo& info, torch::jit::Stack* stack, size_t base, Call& c,
            bool record) {
  const EagerProgram& p = *ep;
  std::optional<at::Generator> gen;
  if (info.generator_arg >= 0) {
    const c10::IValue& g = (*stack)[base + info.generator_arg];
    if (g.isGenerator()) gen = g.toGenerator();
  }
  // The packed weight, made (by an eager program) before this launch starts.
  runtime::BufferPtr packed;
  if (c.pack_arg >= 0) {  // the operand is the transpose of the weight's storage: the weight is its transpose back
    std::optional<fused::Pause> pause;  // recording: the copy is made now, from the weight's current buffer
    if (record) pause.emplace();
    packed = core::packedTranspose((*stack)[base + c.pack_arg].toTensor().transpose(-2, -1),
                                   c.sig.buffers[c.sig.tensors[c.first_tensor[c.pack_arg]].slot]);
  }
  // Host inputs: Python numbers (Scalar / float arguments) and 0-d CPU tensors, by stack index; the packed weight.
  auto host = [&](const core::Param& prm) -> runtime::BufferPtr {
    if (prm.index == c.pack_arg) return packed;
    if (prm.index >= kListHostBase) {  // a 0-d CPU tensor in a list argument
      const int rel = prm.index - kListHostBase;
      const at::Tensor t = (*stack)[base + (rel >> 12)].toListRef()[rel & 0xfff].toTensor();
      return scalarBuffer(t.item(), prm.dtype, c.sig.device);
    }
    const c10::IValue& v = (*stack)[base + prm.index];
    c10::Scalar x = v.isTensor() ? v.toTensor().item() : v.toScalar();
    return scalarBuffer(x, prm.dtype, c.sig.device);
  };
  std::vector<at::Tensor> fresh;
  if (record) {
    fresh = fused::record(ep, c.sig, host, gen);
  } else {
    core::LaunchOptions label;  // what a profiler names the program
    label.kind = "eager";
    label.name = &p.op;
    fresh = p.prog.launch(c.sig, host, gen, 0, label);
  }
  c10::SmallVector<at::Tensor, 4> by_flat(p.num_flat);
  for (size_t j = 0; j < fresh.size(); ++j) by_flat[p.fresh_flat[j]] = std::move(fresh[j]);
  c10::SmallVector<c10::IValue, 4> rets;
  for (size_t k = 0; k < p.ret_flat.size(); ++k) {
    int alias = info.return_alias[k];
    if (alias >= 0) {
      rets.push_back((*stack)[base + alias]);
    } else if (info.return_is_list[k]) {
      c10::List<at::Tensor> list;
      for (int f : p.ret_flat[k]) list.push_back(by_flat[f]);
      rets.push_back(std::move(list));
    } else {
      int f = p.ret_flat[k][0];
      rets.push_back(f >= 0 ? by_flat[f] : at::Tensor());
    }
  }
  stack->erase(stack->begin() + base, stack->end());
  for (auto& r : rets) stack->push_back(std::move(r));
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------

void loweringKernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  // A child forked after the runtime started cannot use the device: the op that touches it raises the fork error
  // itself (never a compile failure, a fallback to the CPU or a warning first).
  if (C10_UNLIKELY(inBadFork())) TORCH_CHECK(false, runtime::kForkedMessage);
  const OpInfo& info = infoFor(op);
  // A result asked for on another device (full_like(x, 1, device="cpu")), pinned or in another layout.
  if (C10_UNLIKELY(info.device_args.any()) && runWhereAsked(op, info.device_args, stack)) return;
  const c10::FunctionSchema& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const size_t base = stack->size() - nargs;
  if (C10_UNLIKELY(info.alert_unless_accumulate >= 0) && at::globalContext().deterministicAlgorithms() &&
      !(*stack)[base + info.alert_unless_accumulate].toBool())
    at::globalContext().alertNotDeterministic("put_");
  const bool recording = fused::recordNext();
  bool counted = false;
  CallScope scope;
  for (int attempt = 0; attempt < 4; ++attempt) {
    // Fused eager: the recorder's lock covers reading the storages and recording, not building a program.
    std::unique_lock<std::recursive_mutex> flk;
    if (recording) flk = std::unique_lock<std::recursive_mutex>(fused::mutex());
    Call& c = scope.get();
    c.sig.recording = recording;
    scan(info, schema, *stack, base, c);
    // A written tensor that overlaps itself or another argument: PyTorch's kernels reject some of these (partial
    // overlaps; for out= forms and index ops such as index_fill_(self, index=self), any overlap). The CPU kernel
    // decides on host twins that alias alike, once per aliasing layout (overlap.cpp).
    if (C10_UNLIKELY(c.sig.overlap_hazard || c.sig.write_alias)) {
      if (flk) flk.unlock();
      checkWriteOverlap(op, *stack, base);
      if (recording) flk = std::unique_lock<std::recursive_mutex>(fused::mutex());
    }
    std::shared_ptr<EagerProgram> prog;
    {
      std::lock_guard<std::mutex> g(g_cache_mu);
      if (auto* e = g_cache.find(c.sig.key)) prog = *e;
    }
    if (!counted) {
      g_stats.requests++;
      (prog ? g_stats.hits : g_stats.misses)++;
      counted = true;
    }
    if (!prog) {
      if (flk) flk.unlock();
      c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(c.sig.device)));
      bool needs_resize = false;
      prog = buildProgram(op, info, *stack, base, c, needs_resize);
      if (!prog) continue;  // an out= argument was resized: scan again
      if (prog->error_on_cpu) {
        // Not cached: the CPU kernel raises PyTorch's own error (or, should it accept the call, computes it). An
        // overlap error is found on host twins that alias as the tpu tensors do (the fallback copies lose that).
        checkWriteOverlap(op, *stack, base);
        cpuRunForError(op, stack);
        return;
      }
      {
        std::lock_guard<std::mutex> g(g_cache_mu);
        g_cache.insert(c.sig.key, prog, core::programCacheLimit());
      }
      // Recording reads the storages again under the recorder's lock (another thread may have launched the trace).
      if (recording && !prog->fallback && info.returns_ok) continue;
    }
    if (prog->fallback || !info.returns_ok) {
      if (flk) flk.unlock();
      if (prog->fallback) noteLoweringFallback(info.name, prog->fallback_reason);
      cpuFallback(op, stack);
      return;
    }
    launch(prog, info, stack, base, c, recording);
    return;
  }
  TORCH_INTERNAL_ASSERT(false, "tpu: the call signature did not settle for ", info.name);
}

KernelCacheStats kernelCacheStats() {
  KernelCacheStats r;
  r.requests = g_stats.requests;
  r.hits = g_stats.hits;
  r.misses = g_stats.misses;
  r.compiles = g_stats.compiles;
  r.disk_hits = g_stats.disk_hits;
  r.compile_seconds = g_stats.compile_ns / 1e9;
  r.disk_seconds = g_stats.disk_ns / 1e9;
  r.lower_seconds = g_stats.lower_ns / 1e9;
  {
    std::lock_guard<std::mutex> g(g_cache_mu);
    r.entries = static_cast<int64_t>(g_cache.size());
    r.evictions = g_cache.evictions();
  }
  return r;
}

void clearKernelCache() {
  std::lock_guard<std::mutex> g(g_cache_mu);
  g_cache.clear();
}

// ---------------------------------------------------------------------------------------------------------------
// Registration: every op a rule serves (core/ops.h), except graph-only rows and the ops the eager layer implements
// with kernels of its own (views, copies, storage: registered for PrivateUse1 when the library loads; they may
// still run a rule through loweringKernel, as copy_ and clone do).

std::vector<std::string> registerLoweringKernels() {
  // Each call registers the ops defined since the previous one (an op of a rule defined from Python after import);
  // one IMPL library per operator namespace (aten, tpu, ...).
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  static std::vector<std::string> names;
  static std::unordered_set<std::string> done;
  static std::unordered_map<std::string, torch::Library*> libs;
  {
    auto& disp = c10::Dispatcher::singleton();
    for (const auto& [full, op] : core::opRules()) {
      if (done.count(full)) continue;
      if (!op.rule->eager || op.variant == core::Variant::FunctionalOf) continue;
      auto dot = full.find('.');
      auto h = disp.findOp(dot == std::string::npos ? c10::OperatorName(full, "")
                                                    : c10::OperatorName(full.substr(0, dot), full.substr(dot + 1)));
      if (!h || h->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) ||
          h->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1))
        continue;
      bool tensor_returns = true;
      for (const auto& ret : h->schema().returns()) {
        bool tensor_list = ret.type()->kind() == c10::TypeKind::ListType &&
                           ret.type()->containedType(0)->kind() == c10::TypeKind::TensorType;
        if (ret.type()->kind() != c10::TypeKind::TensorType && !tensor_list) tensor_returns = false;
      }
      if (!tensor_returns) continue;
      std::string ns = full.substr(0, full.find("::"));
      torch::Library*& lib = libs[ns];
      if (!lib) lib = new torch::Library(torch::Library::IMPL, ns, c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
      lib->impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&loweringKernel>());
      done.insert(full);
      names.push_back(full);
    }
  }
  return names;
}

}  // namespace torch_tpu
