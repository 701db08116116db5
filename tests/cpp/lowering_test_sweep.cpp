// The lowering test's compile sweep (see lowering_test.cpp): rules lowered, compiled and run for each dtype.
#include "lowering_test_util.h"

void compileSweep() {
  // complex64 and complex128 through the rules marked complex()
  const DType kComplex[] = {DType::C64, DType::C128};
  for (const char* op : {"aten::neg", "aten::abs", "aten::sgn", "aten::exp", "aten::expm1", "aten::log", "aten::log2",
                         "aten::log10", "aten::log1p", "aten::sqrt", "aten::rsqrt", "aten::reciprocal", "aten::sin",
                         "aten::cos", "aten::tan", "aten::tanh", "aten::sigmoid", "aten::isnan", "aten::angle",
                         "aten::conj_physical", "aten::clone", "aten::view_as_real", "aten::sum", "aten::mean"})
    sweep(std::string(op), kComplex, unaryArgs);
  for (const char* op : {"aten::add.Tensor", "aten::sub.Tensor", "aten::mul.Tensor", "aten::div.Tensor",
                         "aten::pow.Tensor_Tensor", "aten::eq.Tensor", "aten::ne.Tensor"}) {
    sweep(std::string(op), kComplex, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(DType::F32, {3})}; });
    sweep(std::string(op), kComplex, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {2, 3})}; });
  }
  sweep("aten::mm", kComplex, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3, 4})}; });
  sweep("aten::cat", kComplex, [](DType t) { return std::vector<In>{TL({T(t, {2, 3}), T(t, {1, 3})}), I(0)}; });
  sweep("aten::where.self", kComplex,
        [](DType t) { return std::vector<In>{T(DType::Pred, {2, 3}), T(t, {2, 3}), T(t, {3})}; });
  sweep("aten::_to_copy", kComplex, [](DType t) { return std::vector<In>{T(t, {2, 3}), Dt(DType::F32)}; });
  sweep("aten::index_select", kComplex,
        [](DType t) { return std::vector<In>{T(t, {4, 3}), I(0), T(DType::S64, {2}, {3, 1})}; });
  for (const char* op : {"aten::neg", "aten::abs", "aten::sign", "aten::sgn", "aten::floor", "aten::ceil", "aten::round",
                         "aten::trunc", "aten::frac", "aten::relu", "aten::exp", "aten::exp2", "aten::expm1", "aten::log",
                         "aten::log2", "aten::log10", "aten::log1p", "aten::sqrt", "aten::rsqrt", "aten::reciprocal",
                         "aten::sin", "aten::cos", "aten::tan", "aten::tanh", "aten::sigmoid", "aten::erf", "aten::erfc",
                         "aten::erfinv", "aten::lgamma", "aten::digamma", "aten::asin", "aten::acos", "aten::atan",
                         "aten::sinh", "aten::cosh", "aten::asinh", "aten::acosh", "aten::atanh", "aten::isnan",
                         "aten::isinf", "aten::isposinf", "aten::isneginf", "aten::logical_not", "aten::bitwise_not",
                         "aten::silu", "aten::mish", "aten::hardsigmoid", "aten::hardswish", "aten::deg2rad",
                         "aten::rad2deg", "aten::sinc"}) {
    std::string o = op;
    bool float_only = o == "aten::silu" || o == "aten::mish" || o == "aten::hardsigmoid" || o == "aten::hardswish";
    if (float_only) sweep(o, kFloats, unaryArgs);
    else sweep(o, kAll, unaryArgs);
  }
  sweep("aten::gelu", kFloats, [](DType t) { return std::vector<In>{T(t, {4}), Str("none")}; });
  sweep("aten::gelu", kFloats, [](DType t) { return std::vector<In>{T(t, {4}), Str("tanh")}; });
  sweep("aten::round.decimals", kFloats, [](DType t) { return std::vector<In>{T(t, {4}), I(2)}; });
  sweep("aten::nan_to_num", kAll, [](DType t) { return std::vector<In>{T(t, {4}), N(), D(1e30), N()}; });
  sweep("aten::logit", kFloats, [](DType t) { return std::vector<In>{T(t, {4}), D(1e-6)}; });
  for (const char* op : {"aten::add.Tensor", "aten::sub.Tensor", "aten::rsub.Tensor"}) {
    std::string o = op;
    sweep(o, kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3}), S(2, K::Int)}; });
    sweep(o, kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), W(2.5), S(1, K::Int)}; });
    sweep(o, kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(DType::F64, {}), N()}; });
  }
  for (const char* op : {"aten::add.Scalar", "aten::sub.Scalar", "aten::rsub.Scalar"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), S(3, K::Int), S(1, K::Int)}; });
  for (const char* op : {"aten::mul.Tensor", "aten::div.Tensor", "aten::maximum", "aten::minimum", "aten::fmax",
                         "aten::fmin", "aten::remainder.Tensor", "aten::fmod.Tensor", "aten::floor_divide",
                         "aten::pow.Tensor_Tensor", "aten::atan2", "aten::hypot", "aten::copysign.Tensor",
                         "aten::xlogy.Tensor", "aten::logaddexp", "aten::bitwise_and.Tensor", "aten::bitwise_or.Tensor",
                         "aten::bitwise_xor.Tensor", "aten::logical_and", "aten::logical_or", "aten::logical_xor",
                         "aten::eq.Tensor", "aten::ne.Tensor", "aten::lt.Tensor", "aten::le.Tensor", "aten::gt.Tensor",
                         "aten::ge.Tensor", "aten::clamp_min.Tensor", "aten::clamp_max.Tensor"}) {
    std::string o = op;
    bool float_only = o == "aten::hypot" || o == "aten::logaddexp" || o == "aten::xlogy.Tensor" ||
                      o == "aten::copysign.Tensor" || o == "aten::atan2";
    std::vector<DType> ds(std::begin(kAll), std::end(kAll));
    if (float_only) ds.assign(std::begin(kFloats), std::end(kFloats));
    sweep(o, ds, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {2, 1})}; });
    sweep(o, ds, [](DType t) { return std::vector<In>{T(t, {3}), W(2, K::Int)}; });
  }
  for (const char* op : {"aten::mul.Scalar", "aten::div.Scalar", "aten::remainder.Scalar", "aten::fmod.Scalar",
                         "aten::floor_divide.Scalar", "aten::pow.Tensor_Scalar", "aten::bitwise_and.Scalar",
                         "aten::bitwise_or.Scalar", "aten::bitwise_xor.Scalar", "aten::eq.Scalar", "aten::ne.Scalar",
                         "aten::lt.Scalar", "aten::le.Scalar", "aten::gt.Scalar", "aten::ge.Scalar", "aten::clamp_min",
                         "aten::clamp_max"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), S(2, K::Int)}; });
  sweep("aten::pow.Tensor_Scalar", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), S(0.5)}; });
  sweep("aten::pow.Scalar", kAll, [](DType t) { return std::vector<In>{S(2.0), T(t, {2, 3})}; });
  sweep("aten::remainder.Scalar_Tensor", kAll, [](DType t) { return std::vector<In>{S(7, K::Int), T(t, {2, 3})}; });
  for (const char* mode : {"trunc", "floor"}) {
    std::string m = mode;
    sweep("aten::div.Tensor_mode", kAll, [m](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3}), Str(m)}; });
    sweep("aten::div.Scalar_mode", kAll, [m](DType t) { return std::vector<In>{T(t, {2, 3}), S(3, K::Int), Str(m)}; });
  }
  sweep("aten::div.Tensor_mode", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3}), N()}; });
  sweep("aten::where.self", kAll,
        [](DType t) { return std::vector<In>{T(DType::Pred, {2, 3}), T(t, {2, 3}), T(t, {3})}; });
  sweep("aten::where.self", kAll, [](DType t) { return std::vector<In>{T(DType::Pred, {2, 3}), T(t, {2, 3}), W(0)}; });
  sweep("aten::clamp", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), S(-1, K::Int), S(2, K::Int)}; });
  sweep("aten::clamp", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), N(), S(2.5)}; });
  sweep("aten::clamp.Tensor", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3}), N()}; });
  sweep("aten::masked_fill.Scalar", kAll,
        [](DType t) { return std::vector<In>{T(t, {2, 3}), T(DType::Pred, {3}), S(1, K::Int)}; });
  sweep("aten::masked_fill.Tensor", kAll,
        [](DType t) { return std::vector<In>{T(t, {2, 3}), T(DType::Pred, {2, 3}), T(t, {})}; });
  sweep("aten::leaky_relu", kFloats, [](DType t) { return std::vector<In>{T(t, {4}), S(0.01)}; });
  sweep("aten::hardtanh", kAll, [](DType t) { return std::vector<In>{T(t, {4}), S(-1, K::Int), S(1, K::Int)}; });
  sweep("aten::threshold", kAll, [](DType t) { return std::vector<In>{T(t, {4}), S(0, K::Int), S(7, K::Int)}; });
  sweep("aten::elu", kFloats, [](DType t) { return std::vector<In>{T(t, {4}), S(1, K::Int), S(1, K::Int), S(1, K::Int)}; });
  sweep("aten::softplus", kFloats, [](DType t) { return std::vector<In>{T(t, {4}), S(1, K::Int), S(20, K::Int)}; });
  sweep("aten::threshold_backward", kAll, [](DType t) { return std::vector<In>{T(t, {4}), T(t, {4}), S(0, K::Int)}; });
  for (const char* op : {"aten::silu_backward", "aten::mish_backward", "aten::tanh_backward", "aten::sigmoid_backward",
                         "aten::hardsigmoid_backward", "aten::hardswish_backward"})
    sweep(std::string(op), kFloats, [](DType t) { return std::vector<In>{T(t, {4}), T(t, {4})}; });
  for (const char* a : {"none", "tanh"}) {
    std::string s = a;
    sweep("aten::gelu_backward", kFloats, [s](DType t) { return std::vector<In>{T(t, {4}), T(t, {4}), Str(s)}; });
  }
  sweep("aten::leaky_relu_backward", kFloats,
        [](DType t) { return std::vector<In>{T(t, {4}), T(t, {4}), S(0.2), B(false)}; });
  sweep("aten::hardtanh_backward", kFloats,
        [](DType t) { return std::vector<In>{T(t, {4}), T(t, {4}), S(-1, K::Int), S(1, K::Int)}; });
  sweep("aten::softplus_backward", kFloats,
        [](DType t) { return std::vector<In>{T(t, {4}), T(t, {4}), S(1, K::Int), S(20, K::Int)}; });
  for (bool is_result : {false, true})
    sweep("aten::elu_backward", kFloats, [is_result](DType t) {
      return std::vector<In>{T(t, {4}), S(1, K::Int), S(1, K::Int), S(1, K::Int), B(is_result), T(t, {4})};
    });
  for (const char* op : {"aten::addcmul", "aten::addcdiv"})
    sweep(std::string(op), kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3}), T(t, {2, 1}), S(0.5)}; });
  sweep("aten::addcmul", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3}), T(t, {2, 1}), S(2, K::Int)}; });
  sweep("aten::lerp.Scalar", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3}), S(0.3)}; });
  sweep("aten::lerp.Tensor", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3}), T(t, {2, 3})}; });

  // ---- reductions ----
  sweep("aten::sum.dim_IntList", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3, 4}), L({-1, 0}), B(true), N()}; });
  sweep("aten::sum.dim_IntList", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), N(), B(false), N()}; });
  sweep("aten::sum.dim_IntList", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({1}), B(false), Dt(DType::F32)}; });
  sweep("aten::sum", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), N()}; });
  sweep("aten::sum", kAll, [](DType t) { return std::vector<In>{T(t, {}), N()}; });
  sweep("aten::mean.dim", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3, 4}), L({1}), B(true), N()}; });
  sweep("aten::mean", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), N()}; });
  sweep("aten::prod", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), N()}; });
  sweep("aten::prod.dim_int", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(-1), B(true), N()}; });
  for (const char* op : {"aten::amax", "aten::amin"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3, 4}), L({0, 2}), B(false)}; });
  for (const char* op : {"aten::max", "aten::min"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3})}; });
  for (const char* op : {"aten::argmax", "aten::argmin"}) {
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(1), B(true)}; });
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), N(), B(false)}; });
  }
  for (const char* op : {"aten::max.dim", "aten::min.dim"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(0), B(false)}; });
  for (const char* op : {"aten::any", "aten::all"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3})}; });
  for (const char* op : {"aten::any.dim", "aten::all.dim"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(1), B(true)}; });
  for (const char* op : {"aten::any.dims", "aten::all.dims"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), N(), B(false)}; });
  sweep("aten::count_nonzero.dim_IntList", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({0})}; });
  for (const char* op : {"aten::var.correction", "aten::std.correction", "aten::var_mean.correction",
                         "aten::std_mean.correction"}) {
    sweep(std::string(op), kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({1}), N(), B(true)}; });
    sweep(std::string(op), kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), N(), S(0, K::Int), B(false)}; });
  }
  for (double ord : std::vector<double>{2.0, 1.0, 0.0, 3.0, kInf, -kInf})
    sweep("aten::linalg_vector_norm", kFloats,
          [ord](DType t) { return std::vector<In>{T(t, {2, 3}), SS(ord), L({1}), B(false), N()}; });
  sweep("aten::norm.ScalarOpt_dim", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), SS(2), L({1}), B(true)}; });
  sweep("aten::logsumexp", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({1}), B(false)}; });
  for (const char* op : {"aten::cumsum", "aten::cumprod"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(1), N()}; });
  sweep("aten::trace", kAll, [](DType t) { return std::vector<In>{T(t, {3, 3})}; });

  // ---- linalg ----
  std::vector<DType> mmTypes = {DType::F32, DType::BF16, DType::F16, DType::F64, DType::S64, DType::S32};
  sweep("aten::mm", mmTypes, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3, 4})}; });
  sweep("aten::bmm", mmTypes, [](DType t) { return std::vector<In>{T(t, {5, 2, 3}), T(t, {5, 3, 4})}; });
  sweep("aten::mv", mmTypes, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {3})}; });
  sweep("aten::dot", mmTypes, [](DType t) { return std::vector<In>{T(t, {3}), T(t, {3})}; });
  sweep("aten::vdot", mmTypes, [](DType t) { return std::vector<In>{T(t, {3}), T(t, {3})}; });
  sweep("aten::addmm", mmTypes,
        [](DType t) { return std::vector<In>{T(t, {4}), T(t, {2, 3}), T(t, {3, 4}), S(1, K::Int), S(1, K::Int)}; });
  sweep("aten::baddbmm", mmTypes, [](DType t) {
    return std::vector<In>{T(t, {5, 2, 4}), T(t, {5, 2, 3}), T(t, {5, 3, 4}), S(0.5), S(2.0)};
  });
  sweep("aten::addbmm", mmTypes, [](DType t) {
    return std::vector<In>{T(t, {2, 4}), T(t, {5, 2, 3}), T(t, {5, 3, 4}), S(1, K::Int), S(1, K::Int)};
  });
  sweep("aten::addmv", mmTypes,
        [](DType t) { return std::vector<In>{T(t, {2}), T(t, {2, 3}), T(t, {3}), S(1, K::Int), S(1, K::Int)}; });
  for (bool g : {false, true})
    sweep("aten::_addmm_activation", kFloats, [g](DType t) {
      return std::vector<In>{T(t, {4}), T(t, {2, 3}), T(t, {3, 4}), S(1, K::Int), S(1, K::Int), B(g)};
    });

  // ---- factory ----
  sweep("aten::fill.Scalar", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), S(1.5)}; });
  sweep("aten::fill.Tensor", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(DType::F32, {})}; });
  sweep("aten::zero", kAll, unaryArgs);
  sweep("aten::clone", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), N()}; });
  for (DType to : kAll)
    sweep("aten::_to_copy", kAll, [to](DType t) { return std::vector<In>{T(t, {2, 3}), Dt(to)}; });
  sweep("aten::full", kAll, [](DType) { return std::vector<In>{L({2, 3}), S(2.5), N()}; },
        [](DType t) { return std::vector<TensorType>{{t, {2, 3}}}; });
  sweep("aten::zeros_like", kAll, unaryArgs, [](DType t) { return std::vector<TensorType>{{t, {2, 3}}}; });
  sweep("aten::ones_like", kAll, unaryArgs, [](DType t) { return std::vector<TensorType>{{t, {2, 3}}}; });
  sweep("aten::arange.start_out", kAll, [](DType t) {
    return std::vector<In>{named(S(0, K::Int), "start"), named(S(5, K::Int), "end"), named(S(1, K::Int), "step"),
                           named(T(t, {5}), "out")};
  }, [](DType t) { return std::vector<TensorType>{{t, {5}}}; });
  sweep("aten::full_like", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), S(3, K::Int), N()}; },
        [](DType t) { return std::vector<TensorType>{{t, {2, 3}}}; });
  sweep("aten::new_full", kAll, [](DType t) { return std::vector<In>{T(t, {1}), L({2, 3}), S(3, K::Int), N()}; },
        [](DType t) { return std::vector<TensorType>{{t, {2, 3}}}; });
  for (const char* op : {"aten::new_zeros", "aten::new_ones"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {1}), L({2, 3}), N()}; },
          [](DType t) { return std::vector<TensorType>{{t, {2, 3}}}; });
  for (const char* op : {"aten::zeros", "aten::ones", "aten::_efficientzerotensor"})
    sweep(std::string(op), kAll, [](DType) { return std::vector<In>{L({2, 3}), N()}; },
          [](DType t) { return std::vector<TensorType>{{t, {2, 3}}}; });
  sweep("aten::scalar_tensor", kAll, [](DType) { return std::vector<In>{S(2.5), N()}; },
        [](DType t) { return std::vector<TensorType>{{t, {}}}; });
  sweep("aten::arange", kAll, [](DType) { return std::vector<In>{named(S(4, K::Int), "end"), N()}; },
        [](DType t) { return std::vector<TensorType>{{t, {4}}}; });
  sweep("aten::arange.start", kAll,
        [](DType) { return std::vector<In>{named(S(1, K::Int), "start"), named(S(4, K::Int), "end"), N()}; },
        [](DType t) { return std::vector<TensorType>{{t, {3}}}; });
  sweep("aten::arange.start_step", kAll, [](DType) {
    return std::vector<In>{named(S(1, K::Int), "start"), named(S(4, K::Int), "end"), named(S(1, K::Int), "step"), N()};
  }, [](DType t) { return std::vector<TensorType>{{t, {3}}}; });
  sweep("aten::bernoulli", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), N()}; });
  sweep("aten::bernoulli_.Tensor", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(DType::F32, {3}), N()}; });
  sweep("aten::uniform_", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), DS(-1), DS(1), N()}; });
  sweep("aten::normal_", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), D(0), DS(1), N()}; });
  sweep("aten::normal.Tensor_float", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), DS(2), N()}; },
        [](DType t) { return std::vector<TensorType>{{t, {2, 3}}}; });
  sweep("aten::cauchy_", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), D(0), DS(1), N()}; });
  sweep("aten::log_normal_", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), D(1), DS(2), N()}; });
  sweep("aten::geometric_", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), DS(0.3), N()}; });
  sweep("aten::bernoulli_.float", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), D(0.3), N()}; });
  sweep("aten::exponential_", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), DS(1.5), N()}; });
  sweep("aten::random_.from", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(0), I(2), N()}; });
  sweep("aten::random_.from", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(0), N(), N()}; });
  sweep("aten::random_.to", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(2), N()}; });
  sweep("aten::random_", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), N()}; });

  // ---- nn ----
  for (const char* op : {"aten::_softmax", "aten::_log_softmax"})
    sweep(std::string(op), kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(-1), B(false)}; });
  for (const char* op : {"aten::_softmax_backward_data", "aten::_log_softmax_backward_data"})
    sweep(std::string(op), kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {2, 3}), I(1), Dt(t)}; });
  sweep("aten::native_layer_norm", kFloats,
        [](DType t) { return std::vector<In>{T(t, {2, 3, 4}), L({4}), T(t, {4}), T(t, {4}), D(1e-5)}; });
  sweep("aten::native_layer_norm", kFloats,
        [](DType t) { return std::vector<In>{T(t, {2, 3, 4}), L({3, 4}), N(), N(), D(1e-5)}; });
  sweep("aten::native_layer_norm_backward", kFloats, [](DType t) {
    return std::vector<In>{T(t, {2, 3, 4}), T(t, {2, 3, 4}), L({4}), T(t, {2, 3, 1}), T(t, {2, 3, 1}, std::vector<double>(6, 1.0)),
                           T(t, {4}), T(t, {4}), BL({true, true, true})};
  });
  sweep("aten::embedding", kFloats, [](DType t) {
    return std::vector<In>{T(t, {5, 3}), T(DType::S64, {2, 2}, {0, 4, 2, 2}), I(-1), B(false), B(false)};
  });
  for (bool scale : {false, true})
    sweep("aten::embedding_dense_backward", kFloats, [scale](DType t) {
      return std::vector<In>{T(t, {2, 2, 3}), T(DType::S64, {2, 2}, {0, 4, 2, 2}), I(5), I(4), B(scale)};
    });
  sweep("aten::index_select", kAll,
        [](DType t) { return std::vector<In>{T(t, {4, 3}), I(1), T(DType::S64, {2}, {2, 0})}; });
  for (int64_t red : {0, 1, 2}) {
    sweep("aten::nll_loss_forward", kFloats, [red](DType t) {
      return std::vector<In>{T(t, {3, 4}), T(DType::S64, {3}, {1, -100, 3}), T(t, {4}), I(red), I(-100)};
    });
    sweep("aten::nll_loss_backward", kFloats, [red](DType t) {
      return std::vector<In>{red == 0 ? T(t, {3}) : T(t, {}), T(t, {3, 4}), T(DType::S64, {3}, {1, -100, 3}), N(), I(red),
                             I(-100), T(t, {}, {2})};
    });
    sweep("aten::mse_loss", kFloats, [red](DType t) { return std::vector<In>{T(t, {2, 3}), T(t, {2, 3}), I(red)}; });
    sweep("aten::mse_loss_backward", kFloats, [red](DType t) {
      return std::vector<In>{red == 0 ? T(t, {2, 3}) : T(t, {}), T(t, {2, 3}), T(t, {2, 3}), I(red)};
    });
  }
  sweep("aten::nll_loss2d_forward", kFloats, [](DType t) {
    return std::vector<In>{T(t, {2, 3, 2, 2}), T(DType::S64, {2, 2, 2}, {0, 1, 2, 0, 1, 2, 0, 1}), N(), I(1), I(-100)};
  });
  sweep("aten::nll_loss2d_backward", kFloats, [](DType t) {
    return std::vector<In>{T(t, {}), T(t, {2, 3, 2, 2}), T(DType::S64, {2, 2, 2}, {0, 1, 2, 0, 1, 2, 0, 1}), N(), I(1),
                           I(-100), T(t, {}, {8})};
  });
  sweep("aten::native_dropout", kFloats, [](DType t) { return std::vector<In>{T(t, {2, 3}), D(0.5), B(true)}; });
  sweep("aten::native_dropout_backward", kFloats,
        [](DType t) { return std::vector<In>{T(t, {2, 3}), T(DType::Pred, {2, 3}), D(2.0)}; });
  // recurrent cells (rules/rnn.cpp): B = 2, H = 2; optional biases and gradients present and absent
  for (bool bias : {true, false}) {
    sweep("aten::_thnn_fused_lstm_cell", kFloats, [bias](DType t) {
      return std::vector<In>{T(t, {2, 8}), T(t, {2, 8}), T(t, {2, 2}), bias ? T(t, {8}) : N(), bias ? T(t, {8}) : N()};
    });
    sweep("aten::_thnn_fused_lstm_cell_backward_impl", kFloats, [bias](DType t) {
      return std::vector<In>{T(t, {2, 2}), bias ? T(t, {2, 2}) : N(), T(t, {2, 2}), T(t, {2, 2}), T(t, {2, 8}), B(bias)};
    });
    sweep("aten::_thnn_fused_gru_cell", kFloats, [bias](DType t) {
      return std::vector<In>{T(t, {2, 6}), T(t, {2, 6}), T(t, {2, 2}), bias ? T(t, {6}) : N(), bias ? T(t, {6}) : N()};
    });
    sweep("aten::_thnn_fused_gru_cell_backward", kFloats,
          [bias](DType t) { return std::vector<In>{T(t, {2, 2}), T(t, {2, 10}), B(bias)}; });
  }

  // ---- shape ----
  sweep("aten::cat", kAll, [](DType t) { return std::vector<In>{TL({T(t, {2, 3}), T(t, {0}), T(t, {1, 3})}), I(-2)}; });
  sweep("aten::stack", kAll, [](DType t) { return std::vector<In>{TL({T(t, {2, 3}), T(t, {2, 3})}), I(-1)}; });
  sweep("aten::constant_pad_nd", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({1, 2, -1, 0}), S(0, K::Int)}; });
  sweep("aten::gather", kAll,
        [](DType t) { return std::vector<In>{T(t, {3, 4}), I(1), T(DType::S64, {2, 2}, {0, 3, 1, 1}), B(false)}; });
  sweep("aten::scatter.src", kAll, [](DType t) {
    return std::vector<In>{T(t, {3, 4}), I(1), T(DType::S64, {2, 2}, {0, 3, 1, 1}), T(t, {3, 3})};
  });
  sweep("aten::scatter.value", kAll,
        [](DType t) { return std::vector<In>{T(t, {3, 4}), I(0), T(DType::S64, {2, 2}, {0, 2, 1, 1}), S(1, K::Int)}; });
  sweep("aten::scatter_add", kAll, [](DType t) {
    return std::vector<In>{T(t, {3, 4}), I(1), T(DType::S64, {2, 2}, {0, 3, 1, 1}), T(t, {2, 2})};
  });
  for (const char* red : {"sum", "prod", "mean", "amax", "amin"}) {
    std::string rd = red;
    for (bool inc : {true, false})
      sweep("aten::scatter_reduce.two", kAll, [rd, inc](DType t) {
        return std::vector<In>{T(t, {3, 4}), I(1), T(DType::S64, {2, 2}, {0, 3, 1, 1}), T(t, {2, 2}), Str(rd), B(inc)};
      });
  }
  sweep("aten::index_add", kAll, [](DType t) {
    return std::vector<In>{T(t, {4, 3}), I(0), T(DType::S64, {2}, {3, 1}), T(t, {2, 3}), S(1, K::Int)};
  });
  sweep("aten::index_copy", kAll,
        [](DType t) { return std::vector<In>{T(t, {4, 3}), I(1), T(DType::S64, {2}, {2, 0}), T(t, {4, 2})}; });
  sweep("aten::index_fill.int_Scalar", kAll,
        [](DType t) { return std::vector<In>{T(t, {4, 3}), I(1), T(DType::S64, {2}, {2, 0}), S(1, K::Int)}; });
  sweep("aten::index.Tensor", kAll, [](DType t) {
    return std::vector<In>{T(t, {4, 3, 2}), TL({N(), T(DType::S64, {2, 2}, {0, 2, -1, 1}), T(DType::S64, {2}, {1, 0})})};
  });
  sweep("aten::index.Tensor", kAll, [](DType t) {
    return std::vector<In>{T(t, {4, 3, 2}), TL({T(DType::S64, {2}, {3, 1}), N(), T(DType::S32, {2}, {1, 0})})};
  });
  for (bool acc : {false, true}) {
    sweep("aten::index_put", kAll, [acc](DType t) {
      return std::vector<In>{T(t, {4, 3}), TL({T(DType::S64, {2}, {3, 1})}), T(t, {3}), B(acc)};
    });
    sweep("aten::index_put", kAll, [acc](DType t) {
      return std::vector<In>{T(t, {4, 3}), TL({T(DType::Pred, {4, 3})}), T(t, {}), B(acc)};
    });
  }
  sweep("aten::flip", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({-1, 0})}; });
  sweep("aten::roll", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({1, -1}), L({0, 1})}; });
  sweep("aten::roll", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({2}), L({})}; });
  for (const char* op : {"aten::tril", "aten::triu"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3, 3}), I(-1)}; });
  sweep("aten::repeat", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({2, 1, 2})}; });
  sweep("aten::sort", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(-1), B(true)}; });
  sweep("aten::sort.stable", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), N(), I(0), B(false)}; });
  sweep("aten::topk", kAll, [](DType t) { return std::vector<In>{T(t, {2, 5}), I(2), I(-1), B(true), B(true)}; });
  sweep("aten::slice_backward", kAll,
        [](DType t) { return std::vector<In>{T(t, {2, 2}), L({2, 5}), I(1), I(1), I(4), I(2)}; });
  sweep("aten::select_backward", kAll, [](DType t) { return std::vector<In>{T(t, {2}), L({2, 5}), I(1), I(-2)}; });
  sweep("aten::slice_scatter", kAll,
        [](DType t) { return std::vector<In>{T(t, {2, 5}), T(t, {2, 2}), I(1), I(1), I(4), I(2)}; });
  sweep("aten::select_scatter", kAll, [](DType t) { return std::vector<In>{T(t, {2, 5}), T(t, {2}), I(1), I(3)}; });
  sweep("aten::_index_put_impl", kAll, [](DType t) {
    return std::vector<In>{T(t, {4, 3}), TL({T(DType::S64, {2}, {3, 1})}), T(t, {3}), B(true), B(false)};
  });
  sweep("aten::_unsafe_index_put", kAll, [](DType t) {
    return std::vector<In>{T(t, {4, 3}), TL({T(DType::S64, {2}, {3, 1})}), T(t, {3}), B(false)};
  });
  sweep("aten::_unsafe_index.Tensor", kAll,
        [](DType t) { return std::vector<In>{T(t, {4, 3}), TL({T(DType::S64, {2}, {3, 1})})}; });
  sweep("aten::index_fill.int_Tensor", kAll,
        [](DType t) { return std::vector<In>{T(t, {4, 3}), I(0), T(DType::S64, {1}, {2}), T(t, {})}; });
  sweep("aten::scatter.reduce", kAll, [](DType t) {
    return std::vector<In>{T(t, {3, 4}), I(1), T(DType::S64, {2, 2}, {0, 3, 1, 1}), T(t, {2, 2}), Str("multiply")};
  });
  auto outAs = [](Shape s) { return [s](DType t) { return std::vector<TensorType>{{t, s}}; }; };
  for (const char* op : {"aten::view_copy", "aten::_reshape_copy", "aten::_unsafe_view"})
    sweep(std::string(op), kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), L({3, 2})}; }, outAs({3, 2}));
  sweep("aten::unsqueeze_copy", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), I(1)}; }, outAs({2, 1, 3}));
  sweep("aten::squeeze_copy", kAll, [](DType t) { return std::vector<In>{T(t, {2, 1, 3})}; }, outAs({2, 3}));
  sweep("aten::squeeze_copy.dim", kAll, [](DType t) { return std::vector<In>{T(t, {2, 1, 3}), I(1)}; }, outAs({2, 3}));
  sweep("aten::squeeze_copy.dims", kAll, [](DType t) { return std::vector<In>{T(t, {2, 1, 3}), L({1})}; }, outAs({2, 3}));
  sweep("aten::expand_copy", kAll, [](DType t) { return std::vector<In>{T(t, {1, 3}), L({2, -1}), B(false)}; },
        outAs({2, 3}));
  sweep("aten::t_copy", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3})}; });
  sweep("aten::transpose_copy.int", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3, 4}), I(0), I(-1)}; });
  sweep("aten::alias", kAll, unaryArgs);
  sweep("aten::copy", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3}), T(DType::F32, {3}), B(false)}; },
        outAs({2, 3}));
  sweep("aten::permute_copy", kAll, [](DType t) { return std::vector<In>{T(t, {2, 3, 4}), L({2, 0, 1})}; });
  sweep("aten::slice_copy.Tensor", kAll, [](DType t) { return std::vector<In>{T(t, {2, 5}), I(1), I(1), I(100), I(2)}; });
  sweep("aten::select_copy.int", kAll, [](DType t) { return std::vector<In>{T(t, {2, 5}), I(1), I(-1)}; });
}
