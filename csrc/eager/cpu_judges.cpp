// CPU's contracts that PyTorch's meta kernels do not state, for the eager kernel's cache misses (eager/cpu_judges.h).
#include "eager/cpu_judges.h"

#include <c10/util/strides.h>

#include <initializer_list>
#include <string>

#include "core/ops.h"
#include "eager/twins.h"

namespace torch_tpu {

namespace {

// Runs the CPU kernel on zero-filled host twins of the call's arguments (aliasing as they do) and rethrows its error
// when the message contains one of `markers`: the call's own error. Other errors the zero-filled values may provoke
// are not the call's and are ignored.
void rethrowCpuTwinError(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t base,
                         std::initializer_list<const char*> markers) {
  AliasTwins twin(c10::kCPU);
  torch::jit::Stack cpu;
  for (size_t i = 0; i < op.schema().arguments().size(); ++i) cpu.push_back(twin(stack[base + i]));
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu);
  } catch (const c10::Error& e) {
    for (const char* m : markers)
      if (e.msg().find(m) != std::string::npos) throw;
  }
}

// out= into a tensor of another dtype than every input tensor's: PyTorch's meta kernels (its Python references)
// accept any safe cast into `out`, while many CPU kernels require the result dtype exactly ("Found dtype Long but
// expected Int" for neg, round, bitwise_not; nan_to_num's "dtype of out"). The CPU kernel judges such a call on
// zero-filled host twins, once per call signature (on a miss; an error is never cached), and a dtype error it raises
// is the call's error. Other errors the zero-filled twins may provoke are not the call's and are ignored.
void judgeOutDtypeOnCpu(const c10::OperatorHandle& op, const std::string& name, bool out_variant,
                        const torch::jit::Stack& stack, size_t base) {
  if (!out_variant) return;
  const auto& args = op.schema().arguments();
  std::vector<at::ScalarType> in_types;
  bool differs = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = stack[base + i];
    if (!v.isTensor() || !v.toTensor().defined()) continue;
    if (!args[i].is_out()) in_types.push_back(v.toTensor().scalar_type());
  }
  if (in_types.empty()) return;  // factories: the dtype is the out tensor's
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = stack[base + i];
    if (args[i].is_out() && v.isTensor() && v.toTensor().defined() &&
        std::find(in_types.begin(), in_types.end(), v.toTensor().scalar_type()) == in_types.end())
      differs = true;
  }
  // Ops whose result dtype does not follow their inputs' accept only theirs, whatever the inputs: all/any bool or
  // uint8 (CPU's check_result_is_bytebool), searchsorted/bucketize int64, or int32 with out_int32.
  std::vector<at::ScalarType> fixed;
  auto starts = [&](const char* prefix) { return name.rfind(prefix, 0) == 0; };
  if (starts("aten::all.") || starts("aten::any.")) {
    fixed = {at::kBool, at::kByte};
  } else if (starts("aten::searchsorted.") || starts("aten::bucketize.")) {
    bool int32 = false;
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].name() == "out_int32" && stack[base + i].isBool()) int32 = stack[base + i].toBool();
    fixed = {int32 ? at::kInt : at::kLong};
  }
  if (!fixed.empty())
    for (size_t i = 0; i < args.size(); ++i) {
      const c10::IValue& v = stack[base + i];
      if (args[i].is_out() && v.isTensor() && v.toTensor().defined() &&
          std::find(fixed.begin(), fixed.end(), v.toTensor().scalar_type()) == fixed.end())
        differs = true;
    }
  if (!differs) return;
  rethrowCpuTwinError(op, stack, base, {"dtype", "can't be cast", "expected scalar_type", "only supports bool tensor",
                                       "Expected object of scalar type"});
}

// The defined tensors an argument holds: a tensor, or a list's (a foreach op's).
std::vector<at::Tensor> tensorsOf(const c10::IValue& v) {
  std::vector<at::Tensor> ts;
  if (v.isTensor() && v.toTensor().defined()) ts.push_back(v.toTensor());
  if (v.isTensorList())
    for (const at::Tensor& t : v.toTensorList())
      if (t.defined()) ts.push_back(t);
  return ts;
}

// The Python numbers an argument holds: a Scalar, or a foreach op's ScalarList.
std::vector<c10::IValue> numbersOf(const c10::IValue& v) {
  if (!v.isList()) return {v};
  std::vector<c10::IValue> out;
  for (const c10::IValue& e : v.toListRef()) out.push_back(e);
  return out;
}

// A complex Python number given to an op whose tensors are all real: PyTorch's meta kernels accept it (and the
// program would keep the real part), while CPU kernels such as index_fill_ and fill_ raise ("Converting complex
// Scalar to non-complex type is not supported"; float.add_(1j), _foreach_add_'s "result type ComplexFloat can't be
// cast"). The CPU kernel judges the call on zero-filled host twins, on a miss (complex numbers are part of the cache
// key, and an error is never cached); an error naming complex numbers is the call's error.
void judgeComplexScalarOnCpu(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t base) {
  const auto& args = op.schema().arguments();
  bool complex_scalar = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = stack[base + i];
    for (const c10::IValue& n : numbersOf(v))
      if (n.isComplexDouble()) complex_scalar = true;
    for (const at::Tensor& t : tensorsOf(v)) {
      if (!t.is_complex()) continue;
      // A Python number PyTorch wrapped into a 0-d tensor (t.add_(1j)) is a complex number, not a complex tensor.
      if (t.unsafeGetTensorImpl()->is_wrapped_number()) complex_scalar = true;
      else return;
    }
  }
  if (!complex_scalar) return;
  rethrowCpuTwinError(op, stack, base, {"omplex"});
}

// An in-place op (its first argument written, e.g. add_) whose other tensors' dtypes differ from self's: PyTorch's
// meta kernels do not always check that the result type casts into self ("result type ComplexFloat can't be cast
// to the desired output type Float" for float.add_(complex tensor): the program would drop the imaginary part;
// index_add_'s "self (Long) and source (Float) must have the same scalar type").
// The CPU kernel judges such a call on zero-filled host twins, on a miss; a cast error it raises is the call's error.
void judgeInPlaceDtypeOnCpu(const c10::OperatorHandle& op, const std::string& name, const torch::jit::Stack& stack,
                            size_t base) {
  const auto& args = op.schema().arguments();
  if (args.empty() || !args[0].alias_info() || !args[0].alias_info()->isWrite()) return;
  const std::string base_name = name.substr(0, name.find('.'));
  if (base_name.empty() || base_name.back() != '_') return;
  // self: a tensor, or the list of a foreach op (_foreach_mul_)
  std::vector<at::ScalarType> self_types;
  for (const at::Tensor& t : tensorsOf(stack[base])) self_types.push_back(t.scalar_type());
  if (self_types.empty()) return;
  bool differs = false;
  for (at::ScalarType t : self_types)
    if (t != self_types[0]) differs = true;
  for (size_t i = 1; i < args.size(); ++i) {
    for (const at::Tensor& t : tensorsOf(stack[base + i]))
      if (std::find(self_types.begin(), self_types.end(), t.scalar_type()) == self_types.end()) differs = true;
    // A float Python number (a foreach op's Scalar or ScalarList) into integer self; complex numbers into real self
    // are judgeComplexScalarOnCpu's.
    for (const c10::IValue& n : numbersOf(stack[base + i]))
      if (n.isDouble() && c10::isIntegralType(self_types[0], /*includeBool=*/true)) differs = true;
  }
  if (differs)
    rethrowCpuTwinError(op, stack, base,
                        {"can't be cast", "same scalar type", "same dtype", "expected scalar type", "scalar type of"});
}

// Subtraction with a bool operand (sub, rsub, subtract, _foreach_sub and their in-place and out= forms): CPU's
// kernels raise ("Subtraction, the `-` operator, with a bool tensor is not supported"), PyTorch's meta kernels
// accept it and the program would compute integers.
void judgeBoolSubtractionOnCpu(const c10::OperatorHandle& op, const std::string& name, const torch::jit::Stack& stack,
                               size_t base) {
  auto starts = [&](const char* prefix) { return name.rfind(prefix, 0) == 0; };
  if (!(starts("aten::sub") || starts("aten::rsub") || starts("aten::_foreach_sub"))) return;
  bool any_bool = false;
  for (size_t i = base; i < stack.size(); ++i) {
    if (stack[i].isBool()) any_bool = true;
    for (const at::Tensor& t : tensorsOf(stack[i]))
      if (t.scalar_type() == at::kBool) any_bool = true;
  }
  if (any_bool) rethrowCpuTwinError(op, stack, base, {"Subtraction"});
}

}  // namespace

void judgeOnCpu(const c10::OperatorHandle& op, const std::string& name, bool out_variant,
                const torch::jit::Stack& stack, size_t base) {
  judgeOutDtypeOnCpu(op, name, out_variant, stack, base);
  judgeComplexScalarOnCpu(op, stack, base);
  judgeBoolSubtractionOnCpu(op, name, stack, base);
  judgeInPlaceDtypeOnCpu(op, name, stack, base);
  // Tensors of more than 64 dims: CPU's reductions refuse them ("only tensors with up to 64 dims are supported"),
  // their meta kernels do not; the CPU kernel judges such a call on host twins.
  for (size_t i = base; i < stack.size(); ++i)
    if (stack[i].isTensor() && stack[i].toTensor().defined() && stack[i].toTensor().dim() > 64) {
      rethrowCpuTwinError(op, stack, base, {"up to 64 dims"});
      break;
    }
}

// The strides of flat result `k` of an out= op's functional form, run on the Meta key with the call's (meta) inputs;
// empty when contiguous, not dense, or not computable.
std::vector<int64_t> functionalResultStrides(const std::string& functional_op, const std::vector<c10::Argument>& args,
                                             const std::vector<c10::IValue>& meta_args, int k) {
  auto fh = c10::Dispatcher::singleton().findOp(core::parseOpName(functional_op));
  if (!fh) return {};
  torch::jit::Stack st;
  for (size_t i = 0; i < args.size(); ++i)
    if (!args[i].is_out()) st.push_back(meta_args[i]);
  try {
    fh->redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &st);
  } catch (const std::exception&) {
    return {};
  }
  int flat = 0;
  for (const c10::IValue& v : st) {
    std::vector<at::Tensor> ts;
    if (v.isTensor()) ts.push_back(v.toTensor());
    else if (v.isTensorList()) for (const at::Tensor& t : v.toTensorList()) ts.push_back(t);
    for (const at::Tensor& t : ts) {
      if (flat++ != k) continue;
      if (!t.defined() || t.dim() < 2 || !t.is_non_overlapping_and_dense() ||
          t.strides() == c10::IntArrayRef(c10::contiguous_strides(t.sizes())))
        return {};
      return t.strides().vec();
    }
  }
  return {};
}

// Convolutions (forward, and backward's grad_input and grad_weight) give channels_last results when their input or
// weight is channels_last, as CPU's and CUDA's kernels do; PyTorch's meta kernel leaves them contiguous.
c10::MemoryFormat convolutionMemoryFormat(const std::string& name, const torch::jit::Stack& stack, size_t base) {
  int in = -1;
  if (name == "aten::convolution" || name == "aten::_convolution" || name.rfind("aten::convolution.", 0) == 0 ||
      name.rfind("aten::_convolution.", 0) == 0)
    in = 0;
  else if (name == "aten::convolution_backward" || name.rfind("aten::convolution_backward.", 0) == 0)
    in = 1;
  if (in < 0) return c10::MemoryFormat::Contiguous;
  for (int k = in; k < in + 2; ++k) {
    const c10::IValue& v = stack[base + k];
    if (!v.isTensor() || !v.toTensor().defined()) continue;
    const at::Tensor& t = v.toTensor();
    const c10::MemoryFormat f = t.suggest_memory_format();
    if (f == c10::MemoryFormat::ChannelsLast || f == c10::MemoryFormat::ChannelsLast3d) return f;
  }
  return c10::MemoryFormat::Contiguous;
}

}  // namespace torch_tpu
