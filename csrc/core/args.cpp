#include "core/args.h"

#include <c10/util/Exception.h>

#include "core/dtype.h"

namespace torch_tpu::core {

using lowering::Arg;
using lowering::HostScalar;

namespace {
constexpr const char* kNames[kNumArgKinds] = {"Tensor",    "TensorList", "Scalar",     "Float",  "Int",
                                              "Bool",      "IntList",    "FloatList",  "BoolList", "ScalarList",
                                              "String",    "ScalarType", "Device",     "Generator", "Other"};
}  // namespace

const char* argKindName(ArgKind k) { return kNames[static_cast<int>(k)]; }

ArgKind argKindFromName(const std::string& name) {
  for (int i = 0; i < kNumArgKinds; ++i)
    if (name == kNames[i]) return static_cast<ArgKind>(i);
  TORCH_CHECK(false, "tpu: unknown argument kind '", name, "'");
}

ArgKind argKind(const c10::Argument& a) {
  c10::TypePtr t = a.real_type();
  if (t->kind() == c10::TypeKind::OptionalType) t = t->containedType(0);
  switch (t->kind()) {
    case c10::TypeKind::TensorType: return ArgKind::Tensor;
    case c10::TypeKind::NumberType: return ArgKind::Scalar;
    case c10::TypeKind::FloatType: return ArgKind::Float;
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType: return ArgKind::Int;
    case c10::TypeKind::BoolType: return ArgKind::Bool;
    case c10::TypeKind::StringType: return ArgKind::String;
    case c10::TypeKind::ScalarTypeType: return ArgKind::ScalarType;
    case c10::TypeKind::DeviceObjType: return ArgKind::Device;
    case c10::TypeKind::GeneratorType: return ArgKind::Generator;
    case c10::TypeKind::ListType: {
      c10::TypePtr e = t->containedType(0);
      if (e->kind() == c10::TypeKind::OptionalType) e = e->containedType(0);
      switch (e->kind()) {
        case c10::TypeKind::TensorType: return ArgKind::TensorList;
        case c10::TypeKind::IntType:
        case c10::TypeKind::SymIntType: return ArgKind::IntList;
        case c10::TypeKind::FloatType: return ArgKind::FloatList;
        case c10::TypeKind::BoolType: return ArgKind::BoolList;
        case c10::TypeKind::NumberType: return ArgKind::ScalarList;
        default: return ArgKind::Other;
      }
    }
    default: return ArgKind::Other;
  }
}

namespace {
// A complex number as a 0-d value of dtype t (its real part for a real t, as PyTorch's casts do).
shlo::Value complexConstant(shlo::Builder& b, const HostScalar& h, shlo::DType t) {
  if (!shlo::isComplex(t)) return b.constant(h.f, t);
  const shlo::DType c = shlo::componentType(t);
  return b.complex(b.constant(h.f, c), b.constant(h.im, c));
}
}  // namespace

HostScalar hostScalar(const c10::Scalar& v, bool with_value) {
  HostScalar h;
  if (v.isBoolean()) {
    h.kind = HostScalar::Kind::Bool;
    if (with_value) h.b = v.toBool();
  } else if (v.isIntegral(false)) {
    h.kind = HostScalar::Kind::Int;
    if (with_value) h.i = v.toLong();
  } else if (v.isComplex()) {
    // Complex numbers are built into the program (part of the cache key), never program inputs.
    h.kind = HostScalar::Kind::Complex;
    const c10::complex<double> z = v.toComplexDouble();
    h.f = z.real();
    h.im = z.imag();
    with_value = true;
  } else {
    h.kind = HostScalar::Kind::Float;
    if (with_value) h.f = v.toDouble();
  }
  h.has_value = with_value;
  return h;
}

namespace {
int64_t intOf(const c10::IValue& e) { return e.isInt() ? e.toInt() : e.toSymInt().guard_int(__FILE__, __LINE__); }
}  // namespace

Arg hostArg(shlo::Builder& b, const std::string& name, ArgKind k, const c10::IValue& v, bool dynamic) {
  Arg a;
  a.name = name;
  if (v.isNone()) {
    a.kind = Arg::Kind::None;
    return a;
  }
  switch (k) {
    case ArgKind::Tensor:
      // A Python number where the schema takes a Tensor (graphs): a wrapped number.
      TORCH_CHECK(v.isScalar(), "tpu: expected a number for tensor argument '", name, "'");
      a.kind = Arg::Kind::Tensor;
      a.wrapped_number = true;
      a.scalar = hostScalar(v.toScalar(), true);
      a.tensor = a.scalar.kind == HostScalar::Kind::Complex ? complexConstant(b, a.scalar, a.scalar.dtype())
                 : a.scalar.kind == HostScalar::Kind::Float ? b.constant(a.scalar.f, a.scalar.dtype())
                                                            : b.constantInt(a.scalar.toInt(), a.scalar.dtype());
      return a;
    case ArgKind::Scalar:
      a.kind = Arg::Kind::Scalar;
      a.scalar = hostScalar(v.toScalar(), !dynamic);
      return a;
    case ArgKind::Float:
      a.kind = Arg::Kind::Double;
      a.scalar.kind = HostScalar::Kind::Float;
      a.scalar.has_value = !dynamic;
      if (!dynamic) a.scalar.f = v.toScalar().toDouble();
      return a;
    case ArgKind::Int:
      a.kind = Arg::Kind::Int;
      a.i = intOf(v);
      return a;
    case ArgKind::Bool:
      a.kind = Arg::Kind::Bool;
      a.b = v.toBool();
      return a;
    case ArgKind::IntList:
      a.kind = Arg::Kind::IntList;
      for (const c10::IValue& e : v.toListRef()) a.ints.push_back(intOf(e));
      return a;
    case ArgKind::FloatList:
    case ArgKind::ScalarList:  // static values (part of the cache key)
      a.kind = Arg::Kind::DoubleList;
      for (const c10::IValue& e : v.toListRef()) a.doubles.push_back(e.toScalar().toDouble());
      return a;
    case ArgKind::BoolList:
      a.kind = Arg::Kind::BoolList;
      for (const c10::IValue& e : v.toListRef()) a.bools.push_back(e.toBool());
      return a;
    case ArgKind::String:
      a.kind = Arg::Kind::String;
      a.s = v.toStringRef();
      return a;
    case ArgKind::ScalarType:
      a.kind = Arg::Kind::ScalarType;
      a.dtype = toDType(static_cast<at::ScalarType>(v.toInt()));
      return a;
    case ArgKind::TensorList:  // the caller's
    case ArgKind::Device:
    case ArgKind::Generator:
    case ArgKind::Other:
      a.kind = Arg::Kind::Other;
      return a;
  }
  a.kind = Arg::Kind::Other;
  return a;
}

shlo::Value CallContext::scalar(size_t i, shlo::DType dtype) {
  const Arg& a = arg(i);
  if (a.kind == Arg::Kind::Tensor && a.tensor.valid()) {
    if (a.tensor.rank() != 0) fail("argument '" + a.name + "' is not a scalar");
    return b.convert(a.tensor, dtype);
  }
  if (a.kind == Arg::Kind::Int) return b.constantInt(a.i, dtype);
  if (a.kind == Arg::Kind::Bool) return b.constantInt(a.b, dtype);
  if (a.kind != Arg::Kind::Scalar && a.kind != Arg::Kind::Double) fail("argument '" + a.name + "' is not a number");
  if (a.scalar.known()) {
    if (a.scalar.kind == HostScalar::Kind::Int) return b.constantInt(a.scalar.i, dtype);
    if (a.scalar.kind == HostScalar::Kind::Bool) return b.constantInt(a.scalar.b, dtype);
    if (a.scalar.kind == HostScalar::Kind::Complex) return complexConstant(b, a.scalar, dtype);
    return b.constant(a.scalar.f, dtype);
  }
  TORCH_INTERNAL_ASSERT(i < host_index.size() && host_index[i] >= 0, "tpu: dynamic number without a host input");
  return pb_.hostParam(shlo::TensorType{dtype, {}}, host_index[i]);
}

}  // namespace torch_tpu::core
