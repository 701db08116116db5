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
#include <torch/library.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "core/args.h"
#include "core/client.h"
#include "core/dtype.h"
#include "core/executables.h"
#include "core/ops.h"
#include "core/program.h"
#include "core/scalars.h"
#include "eager/copy.h"
#include "eager/fallback.h"

namespace torch_tpu {

using core::ArgKind;
using core::put;
using core::putInts;
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
  std::vector<uint8_t> is_mutated;     // per stack argument: Tensor(a!) / Tensor(a!)[]
  std::vector<int> mutated_args;       // stack indices of mutated arguments
  std::vector<int> return_alias;       // per return: stack index of the mutated argument it aliases, or -1
  std::vector<bool> return_is_list;    // per return: Tensor[] (else Tensor)
  int generator_arg = -1;
  bool returns_ok = true;              // every return is a Tensor or Tensor[]
  bool void_returns = false;           // returns nothing: results go to mutated_args, in order
};

std::string fullName(const c10::OperatorName& n) {
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

std::mutex g_info_mu;
std::unordered_map<const c10::FunctionSchema*, std::unique_ptr<OpInfo>> g_infos;

const OpInfo& infoFor(const c10::OperatorHandle& op) {
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
  const OpInfo& out = *info;
  g_infos.emplace(&schema, std::move(info));
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Programs and the cache.

struct Program {
  bool fallback = false;          // no rule applies: run on CPU
  bool error_on_cpu = false;      // the meta kernel rejected the call: let the CPU kernel raise
  std::string fallback_reason;
  core::Program prog;
  // Results are "flat": one per returned tensor (Tensor[] returns expanded), or, for ops returning nothing, one per
  // tensor of the mutated arguments (then all written). Fresh results are the defined ones not written.
  int num_flat = 0;
  std::vector<int> fresh_flat;               // flat index of each fresh result, in program output order
  std::vector<std::vector<int>> ret_flat;    // per return: its flat results (-1: undefined)
};

struct CacheStats {
  std::atomic<int64_t> requests{0}, hits{0}, compiles{0};
  std::atomic<int64_t> compile_ns{0};
};
CacheStats g_stats;

std::mutex g_cache_mu;
std::unordered_map<std::string, std::shared_ptr<Program>> g_cache;

// ---------------------------------------------------------------------------------------------------------------
// A call's arguments: its tensors as a Signature, every argument's key bytes.

struct Call {
  core::Signature sig;
  std::vector<int> first_tensor;  // per stack argument: index of its first tensor in sig.tensors (-1: none)
};

// A Python number (or 0-d CPU tensor) given for a tensor argument: a program input, keyed by its dtype.
bool isCpuScalar(const at::Tensor& t) { return t.dim() == 0 && t.is_cpu(); }

void scanTensor(Call& c, int si, const at::Tensor& t, bool writes) {
  std::string& k = c.sig.key;
  if (!t.defined()) {
    put<uint8_t>(k, 'u');
    return;
  }
  if (!t.is_privateuseone()) {
    if (isCpuScalar(t)) {
      put<uint8_t>(k, 'c');
      put<int8_t>(k, static_cast<int8_t>(t.scalar_type()));
      put<uint8_t>(k, t.unsafeGetTensorImpl()->is_wrapped_number());
      return;
    }
    core::deviceMismatch(c.sig.device < 0 ? 0 : c.sig.device, t.device());
  }
  int ti = c.sig.add(t, writes);
  if (c.first_tensor[si] < 0) c.first_tensor[si] = ti;
}

void scanNumber(std::string& k, const c10::Scalar& v, bool is_static) {
  if (v.isBoolean()) put<uint8_t>(k, 'b');
  else if (v.isIntegral(false)) put<uint8_t>(k, 'i');
  else if (v.isFloatingPoint()) put<uint8_t>(k, 'f');
  else TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu: complex scalars are not supported");
  if (is_static) {
    if (v.isFloatingPoint()) put<double>(k, v.toDouble());
    else put<int64_t>(k, v.toLong());
  }
}

int64_t intOf(const c10::IValue& e) { return e.isInt() ? e.toInt() : e.toSymInt().guard_int(__FILE__, __LINE__); }

void scan(const OpInfo& info, const c10::FunctionSchema& schema, const torch::jit::Stack& stack, size_t base, Call& c) {
  const size_t n = info.kinds.size();
  std::string& k = c.sig.key;
  k.reserve(256);
  c.first_tensor.assign(n, -1);
  put(k, &schema, sizeof(&schema));
  for (size_t i = 0; i < n; ++i) {
    const c10::IValue& v = stack[base + i];
    const int si = static_cast<int>(i);
    if (v.isNone()) {
      put<uint8_t>(k, 'N');
      continue;
    }
    switch (info.kinds[i]) {
      case ArgKind::Tensor:
        scanTensor(c, si, v.toTensor(), info.is_mutated[i]);
        break;
      case ArgKind::TensorList:
        put<uint8_t>(k, 'L');
        for (const c10::IValue& e : v.toListRef()) {
          if (e.isTensor()) scanTensor(c, si, e.toTensor(), info.is_mutated[i]);
          else put<uint8_t>(k, 'n');
        }
        put<uint8_t>(k, 'l');
        break;
      case ArgKind::Scalar:
      case ArgKind::Float:
        scanNumber(k, v.toScalar(), info.is_static[i]);
        break;
      case ArgKind::Int:
        put<uint8_t>(k, 'I');
        put<int64_t>(k, intOf(v));
        break;
      case ArgKind::Bool:
        put<uint8_t>(k, 'B');
        put<uint8_t>(k, v.toBool());
        break;
      case ArgKind::IntList:
        put<uint8_t>(k, 'J');
        if (v.isIntList()) {
          putInts(k, v.toDimVector());
        } else {
          for (const c10::IValue& e : v.toListRef()) put<int64_t>(k, intOf(e));
        }
        break;
      case ArgKind::FloatList:
      case ArgKind::ScalarList:  // static values
        put<uint8_t>(k, 'Q');
        for (const c10::IValue& e : v.toListRef()) {
          c10::Scalar x = e.toScalar();
          put<uint8_t>(k, x.isFloatingPoint() ? 'f' : x.isBoolean() ? 'b' : 'i');
          put<double>(k, x.toDouble());
        }
        break;
      case ArgKind::BoolList:
        put<uint8_t>(k, 'K');
        for (const c10::IValue& e : v.toListRef()) put<uint8_t>(k, e.toBool());
        break;
      case ArgKind::String: {
        put<uint8_t>(k, 'S');
        const std::string& str = v.toStringRef();
        put<uint32_t>(k, static_cast<uint32_t>(str.size()));
        k.append(str);
        break;
      }
      case ArgKind::ScalarType:
        put<uint8_t>(k, 'd');
        put<int64_t>(k, v.toInt());
        break;
      case ArgKind::Device:
        put<uint8_t>(k, 'o');
        put<int8_t>(k, v.toDevice().index());
        break;
      case ArgKind::Generator:
        put<uint8_t>(k, 'g');
        break;
      case ArgKind::Other:
        put<uint8_t>(k, 'o');
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
  put<int8_t>(k, static_cast<int8_t>(c.sig.device));
  c.sig.seal();
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

std::shared_ptr<Program> buildProgram(const c10::OperatorHandle& op, const OpInfo& info,
                                      const torch::jit::Stack& stack, size_t base, const Call& c,
                                      bool& needs_resize) {
  const c10::FunctionSchema& schema = op.schema();
  const auto& args = schema.arguments();
  const core::Signature& sig = c.sig;
  auto prog = std::make_shared<Program>();
  auto fallback = [&](std::string why) {
    prog->fallback = true;
    prog->fallback_reason = std::move(why);
    return prog;
  };

  // 1. Result types (and PyTorch's own argument checks) from the meta kernels.
  torch::jit::Stack meta;
  meta.reserve(args.size());
  MetaMaker toMeta;
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
  std::vector<TensorType> out_types;  // per flat result
  std::vector<std::pair<int, int>> writes;  // (flat result, tensor index) written into an argument
  auto addType = [&](const at::Tensor& m) -> bool {
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
      needs_resize = true;
      real.resize_(out_types[w.first].shape);
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
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor() && e.toTensor().defined()) {
          TORCH_CHECK_NOT_IMPLEMENTED(e.toTensor().is_privateuseone(), "tpu: CPU tensor in a tensor list");
          a.tensors.push_back(pb.read(ti++));
        } else {
          a.tensors.push_back(Value());
        }
      }
    } else {
      bool dynamic = (kind == ArgKind::Scalar || kind == ArgKind::Float) && !info.is_static[si];
      a = core::hostArg(pb.b, name, kind, v, dynamic);
    }
    ctx.args.push_back(std::move(a));
    ctx.host_index.push_back(si);
  }
  ctx.outputs = out_types;

  const lowering::Rule& rule = *info.op.rule;
  if (rule.accepts && !rule.accepts(ctx)) return fallback("rule declines this call");
  std::vector<Value> results;
  try {
    results = lowering::lower(rule, ctx);
  } catch (const lowering::LoweringError& e) {
    return fallback(e.what());
  } catch (const shlo::BuildError& e) {
    return fallback(info.name + ": " + e.what());
  }

  // 3. Writes into argument storages, then fresh results.
  std::vector<bool> is_written(results.size(), false);
  for (const auto& w : writes) {
    is_written[w.first] = true;
    pb.write(w.second, results[w.first]);
  }
  std::vector<Value> fresh;
  std::vector<core::Program::Result> fresh_types;
  for (size_t k = 0; k < results.size(); ++k) {
    if (is_written[k] || out_types[k].dtype == DType::Invalid) continue;
    fresh.push_back(results[k]);
    fresh_types.push_back({toScalarType(out_types[k].dtype), out_types[k].shape});
    prog->fresh_flat.push_back(static_cast<int>(k));
  }
  std::string text = pb.finish(fresh, std::move(fresh_types), prog->prog);
  auto t0 = std::chrono::steady_clock::now();
  try {
    prog->prog.exe = core::executableFor(text, core::ExecutableCaches{false, false}).exe;
  } catch (const std::exception& e) {
    return fallback(std::string("compile failed: ") + e.what());
  }
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  g_stats.compiles++;
  g_stats.compile_ns += ns;
  return prog;
}

// ---------------------------------------------------------------------------------------------------------------
// Launch.

void launch(const Program& p, const OpInfo& info, torch::jit::Stack* stack, size_t base, Call& c) {
  std::optional<at::Generator> gen;
  if (info.generator_arg >= 0) {
    const c10::IValue& g = (*stack)[base + info.generator_arg];
    if (g.isGenerator()) gen = g.toGenerator();
  }
  // Host inputs: Python numbers (Scalar / float arguments) and 0-d CPU tensors, by stack index.
  auto host = [&](const core::Param& prm) -> runtime::BufferPtr {
    const c10::IValue& v = (*stack)[base + prm.index];
    c10::Scalar x = v.isTensor() ? v.toTensor().item() : v.toScalar();
    return scalarBuffer(x, prm.dtype, c.sig.device);
  };
  std::vector<at::Tensor> fresh = p.prog.launch(c.sig, host, gen);
  std::vector<at::Tensor> by_flat(p.num_flat);
  for (size_t j = 0; j < fresh.size(); ++j) by_flat[p.fresh_flat[j]] = std::move(fresh[j]);
  std::vector<c10::IValue> rets;
  rets.reserve(p.ret_flat.size());
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
    Call c;
    scan(info, schema, *stack, base, c);
    g_stats.requests++;
    std::shared_ptr<Program> prog;
    {
      std::lock_guard<std::mutex> g(g_cache_mu);
      auto it = g_cache.find(c.sig.key);
      if (it != g_cache.end()) prog = it->second;
    }
    if (prog) {
      g_stats.hits++;
    } else {
      c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(c.sig.device)));
      bool needs_resize = false;
      prog = buildProgram(op, info, *stack, base, c, needs_resize);
      if (!prog) continue;  // an out= argument was resized: scan again
      if (prog->error_on_cpu) {
        // Not cached: the CPU kernel raises PyTorch's own error (or, should it accept the call, computes it).
        cpuRunForError(op, stack);
        return;
      }
      std::lock_guard<std::mutex> g(g_cache_mu);
      g_cache.emplace(c.sig.key, prog);
    }
    if (prog->fallback || !info.returns_ok) {
      if (prog->fallback) noteLoweringFallback(info.name, prog->fallback_reason);
      cpuFallback(op, stack);
      return;
    }
    launch(*prog, info, stack, base, c);
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
// Registration: every op a rule serves (core/ops.h), except those eager mode implements natively.

namespace {

// Ops the eager layer implements natively (views, copies, storage); their rules serve torch.compile, and the native
// kernels may still call loweringKernel with them (copy_ does).
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
      if (!op.rule->eager || op.variant == core::Variant::FunctionalOf || nativeOps().count(full)) continue;
      auto dot = full.find('.');
      auto h = disp.findOp(dot == std::string::npos ? c10::OperatorName(full, "")
                                                    : c10::OperatorName(full.substr(0, dot), full.substr(dot + 1)));
      if (!h || h->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) continue;
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
