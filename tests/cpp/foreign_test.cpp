// Tests for foreign StableHLO modules (stablehlo/foreign.h): parsing both syntaxes, renaming, errors, and programs
// that call foreign functions compiled and run on the PJRT plugin named by $TORCH_TPU_PJRT_PLUGIN.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "runtime/runtime.h"
#include "stablehlo/builder.h"
#include "stablehlo/foreign.h"
#include "harness.h"

using namespace torch_tpu;
using shlo::Builder;
using shlo::DType;
using shlo::ForeignModule;
using shlo::TensorType;
using shlo::Value;


static std::string parseError(const std::string& text, const std::string& entry = "main") {
  try {
    ForeignModule::parse(text, entry);
  } catch (const shlo::BuildError& e) {
    return e.what();
  }
  return "";
}

// Generic syntax as MLIR prints it (jax.export's module printed with print_generic_op_form): @main calls a private
// helper; argument/result attributes and module attributes that must not survive embedding.
static const char* kGeneric = R"(#alias_dir = #stablehlo<comparison_direction GT>
"builtin.module"() <{sym_name = "jit_f"}> ({
  "func.func"() <{arg_attrs = [{mhlo.layout_mode = "default"}, {}], function_type = (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>), res_attrs = [{jax.result_info = "[0]"}, {jax.result_info = "[1]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>):
    %0 = "func.call"(%arg0, %arg1) <{callee = @relu_sum}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %1 = "stablehlo.multiply"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "func.return"(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> ()
  }) : () -> ()
  "func.func"() <{arg_attrs = [{}, {}], function_type = (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>, res_attrs = [{}], sym_name = "relu_sum", sym_visibility = "private"}> ({
  ^bb0(%arg2: tensor<4xf32>, %arg3: tensor<4xf32>):
    %2 = "stablehlo.add"(%arg2, %arg3) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %3 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<4xf32>}> : () -> tensor<4xf32>
    %4 = "stablehlo.compare"(%2, %3) <{comparison_direction = #alias_dir}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
    %5 = "stablehlo.select"(%4, %2, %3) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "func.return"(%5) : (tensor<4xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
)";

// Pretty syntax with locations and location aliases, as jax's Exported.mlir_module() prints it.
static const char* kPretty = R"(#loc1 = loc("x")
module @jit_g attributes {jax.uses_shape_polymorphism = false, mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3xf32> loc("x")) -> (tensor<3xf32> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32> loc(#loc3)
    %0 = call @square(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32> loc(#loc4)
    %1 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32> loc(#loc3)
    return %1 : tensor<3xf32> loc(#loc)
  } loc(#loc)
  func.func private @square(%arg0: tensor<2x3xf32> loc("x")) -> tensor<2x3xf32> {
    %0 = stablehlo.multiply %arg0, %arg0 : tensor<2x3xf32> loc(#loc4)
    return %0 : tensor<2x3xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc3 = loc("jit(g)/reduce_sum"(#loc1))
#loc4 = loc("jit(g)/mul"(#loc1))
)";

static void textTests() {
  test("parse: generic syntax, signature and renaming", [] {
    auto m = ForeignModule::parse(kGeneric);
    CHECK(m->inputs().size() == 2 && m->outputs().size() == 2);
    CHECK(m->inputs()[0] == (TensorType{DType::F32, {4}}));
    CHECK(m->signature() == "(tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)");
    const std::string& f = m->functions();
    CHECK(count(f, "\"func.func\"()") == 2);
    CHECK(count(f, "sym_visibility = \"private\"") == 2);
    CHECK(contains(f, "sym_name = \"" + m->prefix() + "main\""));
    CHECK(contains(f, "callee = @" + m->prefix() + "relu_sum"));
    CHECK(!contains(f, "jax.result_info") && !contains(f, "mhlo.layout_mode") && !contains(f, "\"public\""));
    CHECK(!contains(f, "#alias_dir") && contains(f, "#stablehlo<comparison_direction GT>"));
    CHECK(!contains(f, "mhlo.num_partitions"));
    CHECK(m->prefix().size() == 8 + 16 + 1 && m->prefix().compare(0, 8, "foreign_") == 0);
    CHECK(ForeignModule::parse(kGeneric)->prefix() == m->prefix());  // deterministic names
    CHECK(m->customCallTargets().empty());
  });
  test("parse: pretty syntax with locations", [] {
    auto m = ForeignModule::parse(kPretty);
    CHECK(m->signature() == "(tensor<2x3xf32>) -> (tensor<3xf32>)");
    const std::string& f = m->functions();
    CHECK(!contains(f, "loc("));
    CHECK(count(f, "func.func private @" + m->prefix()) == 2);
    CHECK(contains(f, "call @" + m->prefix() + "square("));
    CHECK(!contains(f, "jax.result_info"));
    CHECK(m->prefix() != ForeignModule::parse(kGeneric)->prefix());
  });
  test("parse: bare functions, other entry, custom calls", [] {
    const char* text =
        "func.func @f(%a: tensor<i32>) -> tensor<i32> {\n"
        "  %0 = stablehlo.custom_call @my_target(%a) : (tensor<i32>) -> tensor<i32>\n"
        "  %1 = \"stablehlo.custom_call\"(%0) <{call_target_name = \"other\"}> : (tensor<i32>) -> tensor<i32>\n"
        "  return %1 : tensor<i32>\n"
        "}\n";
    auto m = ForeignModule::parse(text, "f");
    CHECK(m->inputs().size() == 1 && m->inputs()[0] == (TensorType{DType::S32, {}}));
    CHECK(m->customCallTargets() == (std::vector<std::string>{"my_target", "other"}));
    CHECK(contains(m->functions(), "@my_target("));  // not one of the module's symbols: untouched
  });
  test("parse: errors", [] {
    CHECK(contains(parseError(kGeneric, "nope"), "no function @nope"));
    CHECK(contains(parseError("module {\n  \"sdy.mesh\"() <{sym_name = \"m\"}> : () -> ()\n}\n"),
                   "top-level operation \"sdy.mesh\" cannot be embedded"));
    CHECK(contains(parseError("module {\n  func.func @main(%a: tensor<?xf32>) -> tensor<?xf32> {\n    return %a : "
                              "tensor<?xf32>\n  }\n}\n"),
                   "not statically shaped"));
    CHECK(contains(parseError("module {\n  func.func private @main(%a: tensor<4xf32>) -> tensor<4xf32>\n}\n"),
                   "has no body"));
    CHECK(contains(parseError("module {\n  func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"), "unbalanced"));
    CHECK(contains(parseError(""), "no module"));
    CHECK(contains(parseError("module {\n}\n"), "no functions"));
    CHECK(contains(parseError("module {\n  func.func @main(%a: tensor<4xf8E4M3FN>) -> tensor<4xf8E4M3FN> {\n"
                              "    return %a : tensor<4xf8E4M3FN>\n  }\n}\n"),
                   "not statically shaped tensors of a supported type"));
  });
  test("types", [] {
    CHECK(shlo::parseTensorType("tensor<2x3xbf16>") == (TensorType{DType::BF16, {2, 3}}));
    CHECK(shlo::parseTensorType(" tensor<i1> ") == (TensorType{DType::Pred, {}}));
    CHECK(shlo::parseTensorType("tensor<0x5xui8>") == (TensorType{DType::U8, {0, 5}}));
    CHECK(shlo::parseTensorType("tensor<3xcomplex<f32>>") == (TensorType{DType::C64, {3}}));
    bool threw = false;
    try {
      shlo::parseTensorType("!stablehlo.token");
    } catch (const shlo::BuildError&) {
      threw = true;
    }
    CHECK(threw);
  });
  test("callForeign: argument checks and one copy of the functions per program", [] {
    auto m = ForeignModule::parse(kGeneric);
    Builder b;
    Value x = b.parameter({DType::F32, {4}});
    Value y = b.parameter({DType::F32, {4}});
    Value z = b.parameter({DType::F32, {3}});
    bool threw = false;
    try {
      shlo::callForeign(b, *m, {x, z});
    } catch (const shlo::BuildError& e) {
      threw = contains(e.what(), "argument 1") && contains(e.what(), "tensor<3xf32>");
    }
    CHECK(threw);
    auto r1 = shlo::callForeign(b, *m, {x, y});
    auto r2 = shlo::callForeign(b, *m, {r1[0], r1[1]});
    std::string t = b.finish({r2[0], r2[1]});
    CHECK(count(t, "sym_name = \"" + m->prefix() + "main\"") == 1);
    CHECK(count(t, "\"func.call\"(") == 3);  // our two calls and the one inside the single copy of @main
    CHECK(contains(t, "%0:2 = \"func.call\"(%arg0, %arg1) {callee = @" + m->prefix() + "main}"));
  });
}

// ------------------------------------------------------------------ on the plugin

static std::vector<std::vector<float>> run(const std::vector<std::pair<TensorType, std::vector<float>>>& inputs,
                                           const std::function<std::vector<Value>(Builder&, std::vector<Value>&)>& fn) {
  Builder b;
  std::vector<Value> params;
  for (const auto& in : inputs) params.push_back(b.parameter(in.first));
  std::vector<Value> res = fn(b, params);
  std::string text = b.finish(res);
  runtime::Client& c = runtime::Client::get();
  runtime::ExecutablePtr exe;
  try {
    exe = c.compile(text);
  } catch (...) {
    std::fprintf(stderr, "---- program that failed to compile:\n%s----\n", text.c_str());
    throw;
  }
  std::vector<runtime::BufferPtr> bufs;
  std::vector<runtime::Buffer*> args;
  for (const auto& in : inputs) {
    bufs.push_back(c.fromHost(in.second.data(), runtime::ElementType::F32, in.first.shape, 0));
    args.push_back(bufs.back().get());
  }
  std::vector<std::vector<float>> out;
  for (auto& o : exe->execute(0, args)) {
    std::vector<float> h(static_cast<size_t>(o->byteSize() / 4));
    o->toHost(h.data(), h.size() * 4);
    out.push_back(std::move(h));
  }
  return out;
}

static bool near(const std::vector<float>& got, const std::vector<float>& want) {
  bool ok = got.size() == want.size();
  for (size_t i = 0; ok && i < got.size(); ++i) ok = std::fabs(got[i] - want[i]) <= 1e-5f * (1 + std::fabs(want[i]));
  if (!ok) {
    std::fprintf(stderr, "  got: ");
    for (float g : got) std::fprintf(stderr, "%g ", g);
    std::fprintf(stderr, "\n  want: ");
    for (float w : want) std::fprintf(stderr, "%g ", w);
    std::fprintf(stderr, "\n");
  }
  return ok;
}

static void pluginTests() {
  test("plugin: generic module called twice, mixed with our ops", [] {
    auto m = ForeignModule::parse(kGeneric);
    TensorType t{DType::F32, {4}};
    auto out = run({{t, {1, -2, 3, -4}}, {t, {0.5f, 1, -5, 2}}}, [&](Builder& b, std::vector<Value>& p) {
      auto r = shlo::callForeign(b, *m, {p[0], p[1]});  // relu(x + y), x * y
      auto s = shlo::callForeign(b, *m, {r[0], b.neg(r[1])});
      return std::vector<Value>{s[0], s[1]};
    });
    // r0 = relu(x+y) = [1.5, 0, 0, 0]; r1 = x*y = [0.5, -2, -15, -8]
    // s0 = relu(r0 - r1) = [1, 2, 15, 8]; s1 = r0 * -r1 = [-0.75, 0, 0, 0]
    CHECK(out.size() == 2);
    CHECK(near(out.at(0), {1, 2, 15, 8}));
    CHECK(near(out.at(1), {-0.75f, 0, 0, 0}));
  });
  test("plugin: two modules (pretty and generic) in one program", [] {
    auto g = ForeignModule::parse(kPretty);
    auto m = ForeignModule::parse(kGeneric);
    auto out = run({{TensorType{DType::F32, {2, 3}}, {1, 2, 3, 4, 5, 6}}}, [&](Builder& b, std::vector<Value>& p) {
      Value col = shlo::callForeign(b, *g, {p[0]})[0];  // column sums of squares: [17, 29, 45]
      Value four = b.concatenate({col, b.constantF(1, DType::F32, {1})}, 0);
      return shlo::callForeign(b, *m, {four, four});
    });
    CHECK(near(out.at(0), {34, 58, 90, 2}));
    CHECK(near(out.at(1), {289, 841, 2025, 1}));
  });
}

int main() {
  textTests();
  std::string plugin = runtime::Client::pluginPathFromEnv();
  if (plugin.empty()) {
    std::fprintf(stderr, "TORCH_TPU_PJRT_PLUGIN is not set; skipping plugin tests\n");
    ++g_failures;
  } else {
    runtime::Client::init(plugin);
    pluginTests();
  }
  if (g_failures) {
    std::printf("FAILED: %d check(s)\n", g_failures);
    return 1;
  }
  std::printf("ALL PASSED\n");
  return 0;
}
