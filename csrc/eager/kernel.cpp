// The one boxed kernel that runs every ATen op with a lowering rule on the device.
//
// For a call it builds a cache key from the operator, the arguments' dtypes, shapes and view layouts, and the
// static attributes; on a miss it asks PyTorch's meta kernels for the result types (this also raises PyTorch's own
// errors for bad input), lowers the op with its rule into a StableHLO program, compiles it and caches it; then it
// launches the program asynchronously and wraps the outputs. Numbers that change from call to call (Python
// scalars, storage offsets, random keys) are program inputs, so one program serves them all.
//
// In-place and out= variants share the functional rule: the results are written into the mutated arguments'
// storages inside the same program, and the storages take the new buffers.
#include "eager/kernel.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <list>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "eager/fallback.h"
#include "eager/generator.h"
#include "eager/scalars.h"
#include "eager/storage.h"
#include "eager/viewprog.h"
#include "lowering/lowering.h"

namespace torch_tpu {

using lowering::Arg;
using shlo::DType;
using shlo::TensorType;
using shlo::Value;

namespace {

// ---------------------------------------------------------------------------------------------------------------
// Per-operator facts, computed once per OperatorHandle.

struct OpInfo {
  const lowering::Rule* rule = nullptr;
  std::string name;                      // "aten::add_.Tensor"
  std::vector<int> rule_args;            // stack argument index for each rule argument
  std::vector<int> return_alias;         // per return: stack index of the mutated argument it aliases, or -1
  std::vector<bool> return_is_list;      // per return: Tensor[] (else Tensor)
  std::vector<int> mutated_args;         // stack indices of arguments the op writes (Tensor(a!), Tensor(a!)[])
  std::unordered_set<int> static_args;   // stack indices whose Scalar/float value is static
  int generator_arg = -1;
  bool returns_ok = true;                // every return is a Tensor or Tensor[]
  bool void_returns = false;             // returns nothing: results go to mutated_args, in order
};

std::mutex g_info_mu;
std::unordered_map<const c10::FunctionSchema*, std::unique_ptr<OpInfo>> g_infos;
std::unordered_map<std::string, const lowering::Rule*> g_op_rules;  // registered op name -> rule

std::string fullName(const c10::OperatorName& n) {
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

const OpInfo& infoFor(const c10::OperatorHandle& op) {
  const c10::FunctionSchema& schema = op.schema();
  std::lock_guard<std::mutex> g(g_info_mu);
  auto it = g_infos.find(&schema);
  if (it != g_infos.end()) return *it->second;
  auto info = std::make_unique<OpInfo>();
  info->name = fullName(schema.operator_name());
  auto r = g_op_rules.find(info->name);
  TORCH_INTERNAL_ASSERT(r != g_op_rules.end(), "no rule registered for ", info->name);
  info->rule = r->second;
  const auto& args = schema.arguments();
  bool own_rule = info->rule->op == info->name;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!own_rule && args[i].is_out()) continue;
    info->rule_args.push_back(static_cast<int>(i));
    for (const auto& s : info->rule->static_args)
      if (s == args[i].name()) info->static_args.insert(static_cast<int>(i));
    if (args[i].type()->kind() == c10::TypeKind::OptionalType &&
        args[i].type()->containedType(0)->kind() == c10::TypeKind::GeneratorType)
      info->generator_arg = static_cast<int>(i);
  }
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].alias_info() && args[i].alias_info()->isWrite()) info->mutated_args.push_back(static_cast<int>(i));
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
  const OpInfo& out = *info;
  g_infos.emplace(&schema, std::move(info));
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Compiled programs and the cache.

enum class Src : uint8_t { Storage, Offset, Scalar, CpuTensor, Rng };
struct Param {
  Src kind;
  int index;       // Storage: storage slot; Offset: tensor slot; Scalar/CpuTensor: stack index; Rng: 0
  DType dtype;     // Scalar: requested dtype
  int donate = -1; // Storage: output index it is donated to
};

struct Program {
  bool fallback = false;                  // no rule applies: run on CPU
  bool error_on_cpu = false;              // the meta kernel rejected the call: let the CPU kernel raise
  std::string fallback_reason;
  runtime::ExecutablePtr exe;
  std::vector<Param> params;
  // Results are "flat": one per returned tensor (Tensor[] returns expanded), or, for ops returning nothing, one
  // per tensor of the mutated arguments. Outputs: first the new buffers of written storages (written_slots
  // order), then the fresh results.
  std::vector<int> written_slots;
  struct Result { int flat; at::ScalarType dtype; std::vector<int64_t> sizes; };
  std::vector<Result> results;            // fresh (not written into an argument) and defined
  std::vector<std::pair<int, int>> writes;  // (flat result, tensor slot) written into an argument
  std::vector<std::vector<int>> ret_flat;   // per return: its flat results (-1: undefined)
  bool has_donation = false;
};

struct CacheStats {
  std::atomic<int64_t> requests{0}, hits{0}, compiles{0};
  std::atomic<int64_t> compile_ns{0};
};
CacheStats g_stats;

std::mutex g_cache_mu;
std::unordered_map<std::string, std::shared_ptr<Program>> g_cache;

// ---------------------------------------------------------------------------------------------------------------
// Argument scan.

struct TensorSlot {
  at::Tensor t;
  int storage_slot;
  bool identity;
  int stack_index;
  int list_index;  // position inside a Tensor[] / Tensor?[] argument
};

struct Scan {
  std::vector<TensorSlot> tensors;               // tpu tensors in stack order (lists flattened)
  std::vector<TpuStorage*> storages;             // distinct storages
  std::vector<runtime::BufferPtr> buffers;       // their buffers, same order (null: never written)
  std::vector<std::vector<int64_t>> bdims;       // buffer dims (flat element count when never written)
  std::vector<DType> btype;                      // buffer element type
  int device = -1;
  std::string key;
};

inline void put(std::string& k, const void* p, size_t n) { k.append(static_cast<const char*>(p), n); }
template <class T>
inline void put(std::string& k, T v) {
  put(k, &v, sizeof(v));
}
inline void putInts(std::string& k, c10::IntArrayRef v) {
  put<uint32_t>(k, static_cast<uint32_t>(v.size()));
  put(k, v.data(), v.size() * sizeof(int64_t));
}

[[noreturn]] void deviceMismatch(const at::Tensor& a, int device) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, tpu:", device,
              " and ", a.device(), "!");
}

// A buffer only its storage (and this call) holds, large enough that donating beats copying.
bool donatable(const runtime::BufferPtr& buf) {
  return buf.use_count() <= 2 && buf->byteSize() >= donateMinBytes();
}

void scanTensor(Scan& s, const at::Tensor& t, int stack_index, int list_index = 0) {
  if (!t.defined()) {
    put<uint8_t>(s.key, 'u');
    return;
  }
  if (!t.is_privateuseone()) {
    if (t.dim() == 0 && t.is_cpu()) {  // a CPU scalar (Python number or 0-d tensor): a program input
      put<uint8_t>(s.key, 'c');
      put<int8_t>(s.key, static_cast<int8_t>(t.scalar_type()));
      put<uint8_t>(s.key, t.unsafeGetTensorImpl()->is_wrapped_number());
      return;
    }
    deviceMismatch(t, s.device < 0 ? 0 : s.device);
  }
  int dev = t.device().index();
  if (s.device < 0) s.device = dev;
  else if (dev != s.device) TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, tpu:", s.device, " and tpu:", dev, "!");
  TpuStorage* st = storageOf(t);
  int slot = -1;
  for (size_t i = 0; i < s.storages.size(); ++i)
    if (s.storages[i] == st) slot = static_cast<int>(i);
  if (slot < 0) {
    slot = static_cast<int>(s.storages.size());
    s.storages.push_back(st);
    runtime::BufferPtr buf = st->get();
    if (buf) {
      s.bdims.push_back(buf->dims());
      s.btype.push_back(DType(buf->type()));
    } else {  // never written: reads as zeros, no program input
      s.bdims.push_back({static_cast<int64_t>(st->nbytes / t.element_size())});
      s.btype.push_back(toDType(t.scalar_type()));
    }
    put<uint8_t>(s.key, buf ? (donatable(buf) ? 'D' : 'b') : 'z');
    s.buffers.push_back(std::move(buf));
  }
  viewprog::Layout l{t.sizes().vec(), t.strides().vec(), t.storage_offset()};
  bool identity = viewprog::isIdentity(s.bdims[slot], l) && toDType(t.scalar_type()) == s.btype[slot];
  s.tensors.push_back({t, slot, identity, stack_index, list_index});
  put<uint8_t>(s.key, 't');
  put<int8_t>(s.key, static_cast<int8_t>(t.scalar_type()));
  put<int8_t>(s.key, static_cast<int8_t>(slot));
  put<uint8_t>(s.key, identity);
  putInts(s.key, t.sizes());
  if (!identity) {
    putInts(s.key, t.strides());
    putInts(s.key, s.bdims[slot]);
    put<int8_t>(s.key, static_cast<int8_t>(s.btype[slot]));
  }
}

void scanScalar(std::string& k, const c10::Scalar& v, bool is_static) {
  if (v.isBoolean()) put<uint8_t>(k, 'b');
  else if (v.isIntegral(false)) put<uint8_t>(k, 'i');
  else if (v.isFloatingPoint()) put<uint8_t>(k, 'f');
  else TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu: complex scalars are not supported");
  if (is_static) {
    if (v.isFloatingPoint()) put<double>(k, v.toDouble());
    else put<int64_t>(k, v.toLong());
  }
}

lowering::HostScalar hostScalar(const c10::Scalar& v, bool with_value) {
  lowering::HostScalar h;
  if (v.isBoolean()) {
    h.kind = lowering::HostScalar::Kind::Bool;
    if (with_value) h.b = v.toBool();
  } else if (v.isIntegral(false)) {
    h.kind = lowering::HostScalar::Kind::Int;
    if (with_value) h.i = v.toLong();
  } else {
    h.kind = lowering::HostScalar::Kind::Float;
    if (with_value) h.f = v.toDouble();
  }
  h.has_value = with_value;  // otherwise kind only: the value is a program input
  return h;
}

bool isScalarTypeArg(const c10::Argument& a) {
  auto t = a.real_type();
  if (t->kind() == c10::TypeKind::OptionalType) t = t->containedType(0);
  return t->kind() == c10::TypeKind::ScalarTypeType;
}

bool isOtherArg(const c10::Argument& a) {
  auto t = a.real_type();
  if (t->kind() == c10::TypeKind::OptionalType) t = t->containedType(0);
  switch (t->kind()) {
    case c10::TypeKind::LayoutType:
    case c10::TypeKind::MemoryFormatType:
    case c10::TypeKind::DeviceObjType:
    case c10::TypeKind::GeneratorType:
      return true;
    default:
      return false;
  }
}

// Scalar[] (e.g. _foreach_add.ScalarList): numbers, static (in the cache key), passed to rules as a DoubleList.
bool isScalarListArg(const c10::Argument& a) {
  auto t = a.real_type();
  if (t->kind() == c10::TypeKind::OptionalType) t = t->containedType(0);
  return t->kind() == c10::TypeKind::ListType && t->containedType(0)->kind() == c10::TypeKind::NumberType;
}

bool isFloatArg(const c10::Argument& a) {
  auto t = a.real_type();
  if (t->kind() == c10::TypeKind::OptionalType) t = t->containedType(0);
  return t->kind() == c10::TypeKind::FloatType;
}

void scan(const OpInfo& info, const c10::FunctionSchema& schema, const torch::jit::Stack& stack, size_t base,
          Scan& s) {
  const auto& args = schema.arguments();
  s.key.reserve(256);
  put(s.key, &schema, sizeof(&schema));
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = stack[base + i];
    const int si = static_cast<int>(i);
    if (v.isTensor()) {
      scanTensor(s, v.toTensor(), si);
    } else if (v.isList() && isScalarListArg(args[i])) {
      put<uint8_t>(s.key, 'Q');
      for (const c10::IValue& e : v.toListRef()) {
        c10::Scalar x = e.toScalar();
        put<uint8_t>(s.key, x.isFloatingPoint() ? 'f' : x.isBoolean() ? 'b' : 'i');
        put<double>(s.key, x.toDouble());
      }
    } else if (v.isTensorList()) {
      put<uint8_t>(s.key, 'L');
      int li = 0;
      for (const at::Tensor& t : v.toTensorList()) scanTensor(s, t, si, li++);
      put<uint8_t>(s.key, 'l');
    } else if (v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList()) {
      put<uint8_t>(s.key, 'L');
      int li = 0;
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) scanTensor(s, e.toTensor(), si, li);
        else put<uint8_t>(s.key, 'n');
        ++li;
      }
      put<uint8_t>(s.key, 'l');
    } else if (v.isNone()) {
      put<uint8_t>(s.key, 'N');
    } else if (isOtherArg(args[i])) {
      put<uint8_t>(s.key, 'o');
      if (v.isDevice()) {
        put<int8_t>(s.key, v.toDevice().index());
      }
    } else if (isScalarTypeArg(args[i])) {
      put<uint8_t>(s.key, 'd');
      put<int64_t>(s.key, v.toInt());
    } else if (v.isScalar() && (args[i].real_type()->kind() == c10::TypeKind::NumberType || isFloatArg(args[i]) ||
                                (args[i].real_type()->kind() == c10::TypeKind::OptionalType &&
                                 args[i].real_type()->containedType(0)->kind() == c10::TypeKind::NumberType))) {
      scanScalar(s.key, v.toScalar(), info.static_args.count(si) > 0);
    } else if (v.isInt()) {
      put<uint8_t>(s.key, 'I');
      put<int64_t>(s.key, v.toInt());
    } else if (v.isSymInt()) {
      put<uint8_t>(s.key, 'I');
      put<int64_t>(s.key, v.toSymInt().guard_int(__FILE__, __LINE__));
    } else if (v.isBool()) {
      put<uint8_t>(s.key, 'B');
      put<uint8_t>(s.key, v.toBool());
    } else if (v.isDouble()) {
      put<uint8_t>(s.key, 'F');
      put<double>(s.key, v.toDouble());
    } else if (v.isIntList()) {
      put<uint8_t>(s.key, 'J');
      putInts(s.key, v.toDimVector());
    } else if (v.isList()) {  // SymInt[] and other lists
      put<uint8_t>(s.key, 'K');
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isInt()) put<int64_t>(s.key, e.toInt());
        else if (e.isSymInt()) put<int64_t>(s.key, e.toSymInt().guard_int(__FILE__, __LINE__));
        else if (e.isDouble()) put<double>(s.key, e.toDouble());
        else if (e.isBool()) put<uint8_t>(s.key, e.toBool());
        else TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu: unsupported list element in ", schema.name());
      }
    } else if (v.isString()) {
      put<uint8_t>(s.key, 'S');
      const std::string& str = v.toStringRef();
      put<uint32_t>(s.key, static_cast<uint32_t>(str.size()));
      s.key.append(str);
    } else if (v.isGenerator()) {
      put<uint8_t>(s.key, 'g');
    } else {
      TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu: unsupported argument '", args[i].name(), "' of ", schema.name());
    }
  }
  if (s.device < 0) {
    // Factories: the device argument, else the current device.
    for (size_t i = 0; i < args.size(); ++i) {
      const c10::IValue& v = stack[base + i];
      if (v.isDevice() && v.toDevice().is_privateuseone()) s.device = v.toDevice().has_index() ? v.toDevice().index() : currentDevice();
    }
    if (s.device < 0) s.device = currentDevice();
  }
  put<int8_t>(s.key, static_cast<int8_t>(s.device));
}

// ---------------------------------------------------------------------------------------------------------------
// Building a program on a cache miss.

// Meta twins of the call's tensors. Tensors sharing a storage share a meta storage, so PyTorch's overlap checks
// (an out= argument aliasing an input) behave as on CPU.
struct MetaMaker {
  std::unordered_map<TpuStorage*, c10::Storage> storages;

  at::Tensor operator()(const at::Tensor& t) {
    if (!t.defined() || !t.is_privateuseone()) return t;
    TpuStorage* st = storageOf(t);
    auto it = storages.find(st);
    if (it == storages.end()) {
      at::Tensor base = at::empty({static_cast<int64_t>(t.storage().nbytes())},
                                  at::TensorOptions().dtype(at::kByte).device(c10::kMeta));
      it = storages.emplace(st, base.storage()).first;
    }
    at::Tensor m = at::empty({0}, t.options().device(c10::kMeta));
    m.set_(it->second, t.storage_offset(), t.sizes(), t.strides());
    return m;
  }

  c10::IValue operator()(const c10::IValue& v) {
    if (v.isTensor()) return (*this)(v.toTensor());
    if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back((*this)(t));
      return out;
    }
    if (v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList()) {
      auto list = v.toList();
      if (list.size() > 0 && (list.get(0).isTensor() || list.get(0).isNone())) {
        c10::List<std::optional<at::Tensor>> out;
        for (const c10::IValue& e : v.toListRef())
          out.push_back(e.isTensor() ? std::optional<at::Tensor>((*this)(e.toTensor())) : std::nullopt);
        return out;
      }
    }
    if (v.isDevice() && v.toDevice().is_privateuseone()) return c10::Device(c10::kMeta);
    return v;
  }
};

class EagerContext final : public lowering::Context {
 public:
  EagerContext(shlo::Builder& b, const std::string& op, Program& prog, const torch::jit::Stack& stack, size_t base,
               std::vector<Value>& cpu_tensor_values)
      : Context(b, op), prog_(prog), stack_(stack), base_(base), cpu_values_(cpu_tensor_values) {}

  std::vector<int> stack_index;  // per rule arg

  Value scalar(size_t i, DType dtype) override {
    const Arg& a = arg(i);
    if (a.kind == Arg::Kind::Tensor && a.tensor.valid()) {
      if (a.tensor.rank() != 0) fail("argument '" + a.name + "' is not a scalar");
      return b.convert(a.tensor, dtype);
    }
    if (a.kind != Arg::Kind::Scalar && a.kind != Arg::Kind::Double && a.kind != Arg::Kind::Int &&
        a.kind != Arg::Kind::Bool)
      fail("argument '" + a.name + "' is not a number");
    if (a.kind == Arg::Kind::Int || a.kind == Arg::Kind::Bool || a.scalar.known()) {
      // Static: a constant.
      double v = a.kind == Arg::Kind::Int ? double(a.i) : a.kind == Arg::Kind::Bool ? double(a.b) : a.scalar.toDouble();
      if (a.kind == Arg::Kind::Int || (a.scalar.kind == lowering::HostScalar::Kind::Int))
        return b.constantInt(a.kind == Arg::Kind::Int ? a.i : a.scalar.i, dtype);
      return b.constant(v, dtype);
    }
    Value p = b.parameter(TensorType{dtype, {}});
    prog_.params.push_back({Src::Scalar, stack_index[i], dtype});
    return p;
  }

  Value rngState() override {
    Value p = b.parameter(TensorType{DType::U64, {2}});
    prog_.params.push_back({Src::Rng, 0, DType::U64});
    return p;
  }

 private:
  Program& prog_;
  const torch::jit::Stack& stack_;
  size_t base_;
  std::vector<Value>& cpu_values_;
};

std::shared_ptr<Program> buildProgram(const c10::OperatorHandle& op, const OpInfo& info, const torch::jit::Stack& stack,
                                      size_t base, const Scan& s, bool& needs_resize) {
  const c10::FunctionSchema& schema = op.schema();
  const auto& args = schema.arguments();
  auto prog = std::make_shared<Program>();

  // 1. Result types (and PyTorch's own argument checks) from the meta kernels.
  torch::jit::Stack meta;
  meta.reserve(args.size());
  MetaMaker toMeta;
  for (size_t i = 0; i < args.size(); ++i) meta.push_back(toMeta(stack[base + i]));
  const std::vector<c10::IValue> meta_args(meta.begin(), meta.end());  // in-place meta kernels update these
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
  } catch (const c10::NotImplementedError& e) {
    prog->fallback = true;
    prog->fallback_reason = "no meta kernel";
    return prog;
  } catch (const std::exception& e) {
    // PyTorch rejected the call. Its Python meta kernels sometimes raise another exception type than the CPU
    // kernel does; the CPU kernel run on the same arguments raises exactly what a CPU user would see.
    if (fallbackStrict()) throw;
    prog->error_on_cpu = true;
    return prog;
  }
  // Flat results and their types.
  std::vector<TensorType> out_types;
  auto addType = [&](const at::Tensor& m) -> bool {
    if (!m.defined()) {
      out_types.push_back(TensorType{});
      return true;
    }
    if (!supportedDType(m.scalar_type())) {
      prog->fallback = true;
      prog->fallback_reason = std::string("unsupported result dtype ") + c10::toString(m.scalar_type());
      return false;
    }
    out_types.push_back(TensorType{toDType(m.scalar_type()), m.sizes().vec()});
    return true;
  };
  // Tensor slots of each stack argument, in order.
  auto slotsOf = [&](int si) {
    std::vector<int> r;
    for (size_t ti = 0; ti < s.tensors.size(); ++ti)
      if (s.tensors[ti].stack_index == si) r.push_back(static_cast<int>(ti));
    return r;
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
        std::vector<int> slots = slotsOf(alias);
        for (size_t j = 0; j < flat.size() && j < slots.size(); ++j)
          if (flat[j] >= 0) prog->writes.push_back({flat[j], slots[j]});
      }
      prog->ret_flat.push_back(std::move(flat));
    }
    // Arguments the op writes without returning them (running statistics of _native_batch_norm_legit): the rule
    // returns their new values after the schema's results.
    for (int si : info.mutated_args) {
      if (std::find(info.return_alias.begin(), info.return_alias.end(), si) != info.return_alias.end()) continue;
      for (int ti : slotsOf(si)) {
        prog->writes.push_back({static_cast<int>(out_types.size()), ti});
        if (!addType(meta_args[si].isTensor() ? meta_args[si].toTensor()
                                              : meta_args[si].toTensorList().get(s.tensors[ti].list_index)))
          return prog;
      }
    }
  } else {
    // Results go into the mutated arguments' tensors, in order; their types are the arguments' own.
    for (int si : info.mutated_args) {
      for (int ti : slotsOf(si)) {
        prog->writes.push_back({static_cast<int>(out_types.size()), ti});
        if (!addType(meta_args[si].isTensor() ? meta_args[si].toTensor()
                                              : meta_args[si].toTensorList().get(s.tensors[ti].list_index)))
          return prog;
      }
    }
  }
  // out=/in-place: the real argument must have the meta result's shape.
  for (const auto& w : prog->writes) {
    const at::Tensor& real = s.tensors[w.second].t;
    if (real.sizes() != c10::IntArrayRef(out_types[w.first].shape)) {
      needs_resize = true;
      real.resize_(out_types[w.first].shape);
    }
  }
  if (needs_resize) return nullptr;
  for (const auto& t : s.tensors)
    if (!supportedDType(t.t.scalar_type())) {
      prog->fallback = true;
      prog->fallback_reason = std::string("unsupported dtype ") + c10::toString(t.t.scalar_type());
      return prog;
    }

  // 2. The program.
  shlo::Builder b;
  std::vector<int> written;  // storage slots written, in order
  for (const auto& w : prog->writes) {
    int slot = s.tensors[w.second].storage_slot;
    if (std::find(written.begin(), written.end(), slot) == written.end()) written.push_back(slot);
  }
  prog->written_slots = written;

  std::vector<Value> storage_vals(s.storages.size());
  // Dims each written slot's new buffer will have: the view's sizes for a whole-storage write, else unchanged.
  auto newDims = [&](int slot) -> std::vector<int64_t> {
    for (const auto& w : prog->writes) {
      const auto& ts = s.tensors[w.second];
      if (ts.storage_slot == slot) return ts.identity ? ts.t.sizes().vec() : s.bdims[slot];
    }
    return s.bdims[slot];
  };
  auto storageValue = [&](int slot) -> Value {
    if (!storage_vals[slot].valid()) {
      TensorType bt{s.btype[slot], s.bdims[slot]};
      if (!s.buffers[slot]) {
        storage_vals[slot] = b.zeros(bt);
        return storage_vals[slot];
      }
      int donate = -1;
      auto w = std::find(written.begin(), written.end(), slot);
      // A written storage whose buffer nobody else holds is donated to its new buffer.
      if (w != written.end() && donatable(s.buffers[slot]) && newDims(slot) == s.bdims[slot])
        donate = static_cast<int>(w - written.begin());
      storage_vals[slot] = b.parameter(bt, donate);
      prog->params.push_back({Src::Storage, slot, s.btype[slot], donate});
      if (donate >= 0) prog->has_donation = true;
    }
    return storage_vals[slot];
  };
  std::vector<Value> offsets(s.tensors.size());
  auto offsetValue = [&](size_t ti) -> Value {
    if (s.tensors[ti].identity) return Value();
    if (!offsets[ti].valid()) {
      offsets[ti] = b.parameter(TensorType{DType::S64, {}});
      prog->params.push_back({Src::Offset, static_cast<int>(ti), DType::S64});
    }
    return offsets[ti];
  };
  auto layoutOf = [](const at::Tensor& t) {
    return viewprog::Layout{t.sizes().vec(), t.strides().vec(), t.storage_offset()};
  };
  // Values of tensor slots, read lazily (an out= argument is never read).
  std::vector<Value> tvals(s.tensors.size());
  auto tensorValue = [&](size_t ti) -> Value {
    if (!tvals[ti].valid()) {
      const auto& ts = s.tensors[ti];
      tvals[ti] = viewprog::read(b, storageValue(ts.storage_slot), layoutOf(ts.t), offsetValue(ti),
                                 toDType(ts.t.scalar_type()));
    }
    return tvals[ti];
  };

  EagerContext ctx(b, info.name, *prog, stack, base, tvals);
  // Context arguments.
  size_t tcursor = 0;
  // Map stack index -> first tensor slot index.
  std::vector<int> first_slot(args.size(), -1);
  for (size_t ti = 0; ti < s.tensors.size(); ++ti)
    if (first_slot[s.tensors[ti].stack_index] < 0) first_slot[s.tensors[ti].stack_index] = static_cast<int>(ti);
  (void)tcursor;
  auto cpuScalarValue = [&](const at::Tensor& t, int si) -> Value {
    Value p = b.parameter(TensorType{toDType(t.scalar_type()), {}});
    prog->params.push_back({Src::CpuTensor, si, toDType(t.scalar_type())});
    return p;
  };
  for (int si : info.rule_args) {
    const c10::Argument& sa = args[si];
    const c10::IValue& v = stack[base + si];
    Arg a;
    a.name = sa.name();
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) {
        a.kind = Arg::Kind::None;
      } else {
        a.kind = Arg::Kind::Tensor;
        if (t.is_privateuseone()) {
          a.tensor = tensorValue(first_slot[si]);
        } else {
          a.tensor = cpuScalarValue(t, si);
          a.wrapped_number = t.unsafeGetTensorImpl()->is_wrapped_number();
        }
      }
    } else if (v.isList() && isScalarListArg(sa)) {
      a.kind = Arg::Kind::DoubleList;
      for (const c10::IValue& e : v.toListRef()) a.doubles.push_back(e.toScalar().toDouble());
    } else if (v.isTensorList() ||
               (v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList() && !isScalarTypeArg(sa))) {
      a.kind = Arg::Kind::TensorList;
      int ti = first_slot[si];
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor() && e.toTensor().defined()) {
          TORCH_CHECK_NOT_IMPLEMENTED(e.toTensor().is_privateuseone(), "tpu: CPU tensor in a tensor list");
          a.tensors.push_back(tensorValue(ti++));
        } else {
          a.tensors.push_back(Value());
        }
      }
    } else if (v.isNone()) {
      a.kind = Arg::Kind::None;
    } else if (isOtherArg(sa)) {
      a.kind = Arg::Kind::Other;
    } else if (isScalarTypeArg(sa)) {
      a.kind = Arg::Kind::ScalarType;
      a.dtype = toDType(static_cast<at::ScalarType>(v.toInt()));
    } else if (v.isScalar() && (sa.real_type()->kind() == c10::TypeKind::NumberType || isFloatArg(sa) ||
                                (sa.real_type()->kind() == c10::TypeKind::OptionalType &&
                                 sa.real_type()->containedType(0)->kind() == c10::TypeKind::NumberType))) {
      a.kind = isFloatArg(sa) ? Arg::Kind::Double : Arg::Kind::Scalar;
      bool st = info.static_args.count(si) > 0;
      a.scalar = hostScalar(v.toScalar(), st);
    } else if (v.isInt() || v.isSymInt()) {
      a.kind = Arg::Kind::Int;
      a.i = v.isInt() ? v.toInt() : v.toSymInt().guard_int(__FILE__, __LINE__);
    } else if (v.isBool()) {
      a.kind = Arg::Kind::Bool;
      a.b = v.toBool();
    } else if (v.isDouble()) {
      a.kind = Arg::Kind::Double;
      a.scalar = hostScalar(c10::Scalar(v.toDouble()), true);
    } else if (v.isIntList() || v.isList()) {
      if (v.isDoubleList()) {
        a.kind = Arg::Kind::DoubleList;
        for (double d : v.toDoubleVector()) a.doubles.push_back(d);
      } else if (v.isBoolList()) {
        a.kind = Arg::Kind::BoolList;
        for (bool d : v.toBoolList()) a.bools.push_back(d);
      } else {
        a.kind = Arg::Kind::IntList;
        for (const c10::IValue& e : v.toListRef())
          a.ints.push_back(e.isInt() ? e.toInt() : e.toSymInt().guard_int(__FILE__, __LINE__));
      }
    } else if (v.isString()) {
      a.kind = Arg::Kind::String;
      a.s = v.toStringRef();
    } else {
      a.kind = Arg::Kind::Other;
    }
    ctx.args.push_back(std::move(a));
    ctx.stack_index.push_back(si);
  }
  ctx.outputs = out_types;

  if (info.rule->accepts && !info.rule->accepts(ctx)) {
    prog->fallback = true;
    prog->fallback_reason = "rule declines this call";
    return prog;
  }
  std::vector<Value> results;
  try {
    results = lowering::lower(*info.rule, ctx);
  } catch (const lowering::LoweringError& e) {
    prog->fallback = true;
    prog->fallback_reason = e.what();
    return prog;
  } catch (const shlo::BuildError& e) {
    prog->fallback = true;
    prog->fallback_reason = std::string(info.name) + ": " + e.what();
    return prog;
  }

  // 3. Outputs: written storages' new buffers, then fresh results.
  std::vector<Value> outs;
  std::vector<bool> is_written(results.size(), false);
  for (const auto& w : prog->writes) is_written[w.first] = true;
  for (int slot : written) {
    Value cur = Value();
    for (const auto& w : prog->writes) {
      const auto& ts = s.tensors[w.second];
      if (ts.storage_slot != slot) continue;
      if (ts.identity) {
        // The whole storage is overwritten: the result becomes its buffer, in the view's shape.
        cur = b.convert(results[w.first], s.btype[slot]);
        continue;
      }
      if (!cur.valid()) cur = storageValue(slot);
      cur = viewprog::write(b, cur, layoutOf(ts.t), offsetValue(w.second), results[w.first]);
    }
    outs.push_back(cur);
  }
  for (size_t k = 0; k < results.size(); ++k) {
    if (is_written[k] || out_types[k].dtype == DType::Invalid) continue;
    outs.push_back(results[k]);
    prog->results.push_back({static_cast<int>(k), toScalarType(out_types[k].dtype), out_types[k].shape});
  }
  std::string text = b.finish(outs);
  auto t0 = std::chrono::steady_clock::now();
  try {
    prog->exe = client().compile(text);
  } catch (const std::exception& e) {
    prog->fallback = true;
    prog->fallback_reason = std::string("compile failed: ") + e.what();
    return prog;
  }
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  g_stats.compiles++;
  g_stats.compile_ns += ns;
  return prog;
}

// ---------------------------------------------------------------------------------------------------------------
// Launch.

void launch(const Program& prog, const OpInfo& info, const c10::FunctionSchema& schema, torch::jit::Stack* stack,
            size_t base, Scan& s) {
  const auto& args = schema.arguments();
  thread_local std::vector<runtime::BufferPtr> held;
  thread_local std::vector<runtime::Buffer*> raw;
  thread_local std::vector<bool> donate;
  held.clear();
  raw.clear();
  donate.clear();
  bool any_donate = false;
  for (const Param& p : prog.params) {
    switch (p.kind) {
      case Src::Storage: {
        raw.push_back(s.buffers[p.index].get());
        donate.push_back(p.donate >= 0);
        any_donate |= p.donate >= 0;
        continue;
      }
      case Src::Offset: {
        held.push_back(scalarBuffer(c10::Scalar(s.tensors[p.index].t.storage_offset()), p.dtype, s.device));
        break;
      }
      case Src::Scalar: {
        const c10::IValue& v = (*stack)[base + p.index];
        held.push_back(scalarBuffer(v.toScalar(), p.dtype, s.device));
        break;
      }
      case Src::CpuTensor: {
        const at::Tensor& t = (*stack)[base + p.index].toTensor();
        held.push_back(scalarBuffer(t.item(), p.dtype, s.device));
        break;
      }
      case Src::Rng: {
        std::optional<at::Generator> gen;
        if (info.generator_arg >= 0) {
          const c10::IValue& g = (*stack)[base + info.generator_arg];
          if (g.isGenerator()) gen = g.toGenerator();
        }
        uint64_t state[2] = {nextRngKey(gen, s.device), 0};
        held.push_back(client().fromHost(state, runtime::ElementType::U64, {2}, s.device));
        break;
      }
    }
    raw.push_back(held.back().get());
    donate.push_back(false);
  }
  std::vector<runtime::BufferPtr> outs =
      prog.exe->execute(s.device, raw, any_donate ? donate : std::vector<bool>{});
  // The plugin keeps its inputs alive until the execution finishes; drop our references now.
  held.clear();
  // Written storages take their new buffers (every alias sees the write).
  size_t o = 0;
  for (int slot : prog.written_slots) s.storages[slot]->set(std::move(outs[o++]));
  std::unordered_map<int, at::Tensor> by_flat;
  for (const auto& r : prog.results) by_flat[r.flat] = wrapBuffer(std::move(outs[o++]), r.dtype, r.sizes, s.device);
  std::vector<c10::IValue> rets;
  rets.reserve(prog.ret_flat.size());
  for (size_t k = 0; k < prog.ret_flat.size(); ++k) {
    int alias = info.return_alias[k];
    if (alias >= 0) {
      rets.push_back((*stack)[base + alias]);
    } else if (info.return_is_list[k]) {
      c10::List<at::Tensor> list;
      for (int f : prog.ret_flat[k]) list.push_back(by_flat[f]);
      rets.push_back(std::move(list));
    } else {
      int f = prog.ret_flat[k][0];
      rets.push_back(f >= 0 ? by_flat[f] : at::Tensor());
    }
  }
  if (launchBlocking()) client().synchronize(s.device);
  stack->erase(stack->begin() + base, stack->end());
  for (auto& r : rets) stack->push_back(std::move(r));
  (void)args;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------

at::Tensor hostClone(const at::Tensor& self);

void loweringKernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const OpInfo& info = infoFor(op);
  const c10::FunctionSchema& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const size_t base = stack->size() - nargs;
  if (info.name == "aten::clone" && (*stack)[base].isTensor() &&
      !supportedDType((*stack)[base].toTensor().scalar_type())) {
    at::Tensor out = hostClone((*stack)[base].toTensor());
    stack->erase(stack->begin() + base, stack->end());
    stack->push_back(std::move(out));
    return;
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    Scan s;
    scan(info, schema, *stack, base, s);
    g_stats.requests++;
    std::shared_ptr<Program> prog;
    {
      std::lock_guard<std::mutex> g(g_cache_mu);
      auto it = g_cache.find(s.key);
      if (it != g_cache.end()) prog = it->second;
    }
    if (prog) {
      g_stats.hits++;
    } else {
      c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(s.device)));
      bool needs_resize = false;
      prog = buildProgram(op, info, *stack, base, s, needs_resize);
      if (!prog) continue;  // an out= argument was resized: scan again
      if (prog->error_on_cpu) {
        // Not cached: the CPU kernel raises PyTorch's own error (or, should it accept the call, computes it).
        cpuRunForError(op, stack);
        return;
      }
      std::lock_guard<std::mutex> g(g_cache_mu);
      g_cache.emplace(s.key, prog);
    }
    if (prog->fallback) {
      noteLoweringFallback(info.name, prog->fallback_reason);
      cpuFallback(op, stack);
      return;
    }
    if (!info.returns_ok) {
      cpuFallback(op, stack);
      return;
    }
    launch(*prog, info, schema, stack, base, s);
    return;
  }
  TORCH_INTERNAL_ASSERT(false, "tpu: out= argument resize did not settle for ", info.name);
}

KernelCacheStats kernelCacheStats() {
  KernelCacheStats r;
  r.requests = g_stats.requests;
  r.hits = g_stats.hits;
  r.compiles = g_stats.compiles;
  r.compile_seconds = g_stats.compile_ns / 1e9;
  {
    std::lock_guard<std::mutex> g(g_cache_mu);
    r.entries = static_cast<int64_t>(g_cache.size());
  }
  return r;
}

void clearKernelCache() {
  std::lock_guard<std::mutex> g(g_cache_mu);
  g_cache.clear();
}

// ---------------------------------------------------------------------------------------------------------------
// Registration: every rule's op, plus its in-place and out= variants.

namespace {

bool sameArgs(const c10::FunctionSchema& functional, const c10::FunctionSchema& variant, bool skip_out) {
  std::vector<const c10::Argument*> v;
  for (const auto& a : variant.arguments())
    if (!(skip_out && a.is_out())) v.push_back(&a);
  const auto& f = functional.arguments();
  if (v.size() != f.size()) return false;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i].name() != v[i]->name()) return false;
    if (f[i].type()->str() != v[i]->type()->str()) {
      // in-place `self` is Tensor(a!) vs Tensor: same type string without alias annotations
      if (!(f[i].type()->kind() == v[i]->type()->kind())) return false;
    }
  }
  return true;
}

bool hasCompositeImplicit(const c10::OperatorHandle& op) {
  return op.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
}

// Ops the eager layer implements natively (views, copies, storage); rules for them serve torch.compile only.
const std::unordered_set<std::string>& nativeOps() {
  static const std::unordered_set<std::string> s = {
      "aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize", "aten::empty.memory_format",
      "aten::empty_strided", "aten::as_strided", "aten::view", "aten::_reshape_alias", "aten::resize_",
      "aten::set_.source_Storage", "aten::set_.source_Storage_storage_offset", "aten::set_.source_Tensor",
      "aten::set_", "aten::_local_scalar_dense", "aten::unfold", "aten::alias", "aten::_unsafe_view",
      "aten::_to_copy", "aten::native_batch_norm"};
  return s;
}

}  // namespace

std::vector<std::string> registerLoweringKernels() {
  // Each call registers the rules' ops defined since the previous call (ops of the `tpu` namespace, ops defined
  // from Python after import); one IMPL library per operator namespace.
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  static std::vector<std::string> names;
  {
    static std::unordered_map<std::string, torch::Library*> libs;
    auto libFor = [&](const std::string& op) {
      std::string ns = op.substr(0, op.find("::"));
      torch::Library*& lib = libs[ns];
      if (!lib) lib = new torch::Library(torch::Library::IMPL, ns, c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
      return lib;
    };
    auto& disp = c10::Dispatcher::singleton();
    std::unordered_map<std::string, std::vector<c10::OperatorName>> by_name;
    for (const auto& n : disp.getAllOpNames()) by_name[n.name].push_back(n);
    const auto& reg = lowering::registry();
    auto regOne = [&](const c10::OperatorName& n, const lowering::Rule* rule) {
      std::string full = fullName(n);
      if (g_op_rules.count(full)) return;
      if (nativeOps().count(full)) {
        // Implemented natively; the native kernel may still call loweringKernel with this op.
        std::lock_guard<std::mutex> g(g_info_mu);
        g_op_rules[full] = rule;
        return;
      }
      auto h = disp.findOp(n);
      if (!h || hasCompositeImplicit(*h)) return;
      for (const auto& ret : h->schema().returns()) {
        bool tensor_list = ret.type()->kind() == c10::TypeKind::ListType &&
                           ret.type()->containedType(0)->kind() == c10::TypeKind::TensorType;
        if (ret.type()->kind() != c10::TypeKind::TensorType && !tensor_list) return;
      }
      {
        std::lock_guard<std::mutex> g(g_info_mu);
        g_op_rules[full] = rule;
      }
      libFor(full)->impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&loweringKernel>());
      names.push_back(full);
    };
    for (const std::string& name : reg.names()) {
      const lowering::Rule* rule = reg.find(name);
      if (!rule->eager) continue;
      std::string base = name, overload;
      auto dot = name.find('.');
      if (dot != std::string::npos) {
        base = name.substr(0, dot);
        overload = name.substr(dot + 1);
      }
      auto fh = disp.findOp(c10::OperatorName(base, overload));
      if (!fh) continue;  // op not in this torch version
      regOne(c10::OperatorName(base, overload), rule);
      const c10::FunctionSchema& fs = fh->schema();
      bool mutable_op = fs.is_mutable();
      if (mutable_op) continue;
      // in-place: name_ with the same overload
      auto ip = disp.findOp(c10::OperatorName(base + "_", overload));
      if (ip && sameArgs(fs, ip->schema(), false)) regOne(ip->operator_name(), rule);
      // out=: same base name, non-out arguments equal
      for (const auto& cand : by_name[base]) {
        if (cand.overload_name == overload) continue;
        auto h = disp.findOp(cand);
        if (!h) continue;
        bool has_out = false;
        for (const auto& a : h->schema().arguments()) has_out |= a.is_out();
        if (has_out && sameArgs(fs, h->schema(), true)) regOne(cand, rule);
      }
    }
  }
  return names;
}

}  // namespace torch_tpu
