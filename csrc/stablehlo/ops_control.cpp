// Control-flow builders: stablehlo.while and a counted loop on it. Methods of shlo::Builder (builder.h).
//
// A region's body is emitted by the ordinary op builders: while a region is open the Builder appends to the
// region's text instead of @main's, and the region's block arguments are fresh values numbered from the same
// counter (names never clash). The region's text is then spliced into the while op.
#include <algorithm>
#include <string>
#include <utility>

#include "stablehlo/builder_impl.h"

namespace torch_tpu::shlo {

using namespace detail;

namespace {

// Templates over the builder's private Impl (deduced, never named here).
// A nested region (a loop's condition or body, a function's body) numbers its values apart from the enclosing one.
template <class ImplT>
struct RegionScope {
  ImplT& I;
  int saved;
  explicit RegionScope(ImplT& i) : I(i), saved(i.region) { I.region = ++I.next_region; }
  ~RegionScope() { I.region = saved; }
};

// Fresh block arguments of `types`, appended to `text` as "%n: type, ...".
template <class ImplT>
std::vector<Value> blockArguments(ImplT& I, const std::vector<TensorType>& types, std::string& text) {
  std::vector<Value> args;
  args.reserve(types.size());
  for (size_t i = 0; i < types.size(); ++i) {
    int num = I.nextNum++;
    args.push_back(I.newValue(types[i], num, -1));
    if (i) text += ", ";
    text += '%';
    appendInt(text, num);
    text += ": ";
    appendType(text, types[i]);
  }
  return args;
}

}  // namespace

std::vector<Value> Builder::whileLoop(const std::vector<Value>& init, const LoopCond& cond, const LoopBody& body) {
  if (impl_->finished) fail("whileLoop", "the builder was already finished");
  if (init.empty()) fail("whileLoop", "needs at least one loop value");
  std::vector<TensorType> types;
  types.reserve(init.size());
  for (const Value& v : init) {
    impl_->check("whileLoop", v);
    types.push_back(v.type);
  }
  // One region "{ ^bb0(args): ... stablehlo.return(results) }": `fn` runs on fresh block arguments of `types`
  // and its results must have the types `want`.
  Impl& I = *impl_;
  const char* op = "whileLoop";
  auto region = [&](const std::vector<TensorType>& arg_types, auto&& fn, const std::vector<TensorType>& want,
                    const char* what) -> std::string {
    std::string saved;
    saved.swap(I.body);
    RegionScope scope(I);
    std::string text = "{\n      ^bb0(";
    std::vector<Value> args = blockArguments(I, arg_types, text);
    text += "):\n";
    std::vector<Value> res;
    try {
      res = fn(args);
    } catch (...) {
      I.body.swap(saved);
      throw;
    }
    std::string inner;
    inner.swap(I.body);
    I.body.swap(saved);
    if (res.size() != want.size())
      fail(op, std::string(what) + " returned " + std::to_string(res.size()) + " values, expected " +
                   std::to_string(want.size()));
    for (size_t i = 0; i < res.size(); ++i) {
      I.check(op, res[i]);
      if (res[i].type != want[i])
        fail(op, std::string(what) + " value " + std::to_string(i) + " has type " + res[i].type.str() + ", expected " +
                     want[i].str());
    }
    text += inner;
    text += "      \"stablehlo.return\"(";
    for (size_t i = 0; i < res.size(); ++i) {
      if (i) text += ", ";
      I.appendRef(text, res[i].id);
    }
    text += ") : (";
    for (size_t i = 0; i < res.size(); ++i) {
      if (i) text += ", ";
      appendType(text, res[i].type);
    }
    text += ") -> ()\n    }";
    return text;
  };
  std::string c = region(types, [&](const std::vector<Value>& a) {
    return std::vector<Value>{cond(*this, a)};
  }, {TensorType{DType::Pred, {}}}, "cond");
  std::string b = region(types, [&](const std::vector<Value>& a) { return body(*this, a); },
                         types, "body");
  std::string regions = "(" + c + ", " + b + ")";
  return impl_->emitMulti("stablehlo.while", init.data(), init.size(), regions, {}, types.data(), types.size());
}

std::vector<Value> Builder::forLoop(int64_t trip_count, const std::vector<Value>& init, const ForBody& body) {
  if (trip_count < 0) fail("forLoop", "negative trip count " + std::to_string(trip_count));
  if (trip_count == 0) return init;
  if (trip_count > 0x7fffffff) fail("forLoop", "trip count " + std::to_string(trip_count) + " exceeds int32");
  std::vector<Value> vals;
  vals.reserve(init.size() + 1);
  vals.push_back(constantInt(0, DType::S32));
  vals.insert(vals.end(), init.begin(), init.end());
  std::vector<Value> out = whileLoop(
      vals,
      [&](Builder& b, const std::vector<Value>& a) {
        return b.compare(a[0], b.constantInt(trip_count, DType::S32), Cmp::LT);
      },
      [&](Builder& b, const std::vector<Value>& a) {
        std::vector<Value> cur(a.begin() + 1, a.end());
        std::vector<Value> next = body(b, a[0], cur);
        next.insert(next.begin(), b.add(a[0], b.constantInt(1, DType::S32)));
        return next;
      });
  out.erase(out.begin());
  return out;
}

std::vector<TensorType> Builder::function(const std::string& name, const std::vector<TensorType>& arg_types,
                                         const FuncBody& body) {
  Impl& I = *impl_;
  const char* op = "function";
  if (I.finished) fail(op, "the builder was already finished");
  if (name.empty() || name == "main") fail(op, "bad function name '" + name + "'");
  const std::string key = "func @" + name;
  if (hasFunction(name)) fail(op, "function @" + name + " is defined twice");
  for (const TensorType& t : arg_types) checkShape(op, t.shape);
  std::string saved;
  saved.swap(I.body);
  RegionScope scope(I);
  const int first_id = static_cast<int>(I.slots.size());
  std::string text = "  func.func private @" + name + "(";
  std::vector<Value> args = blockArguments(I, arg_types, text);
  std::vector<Value> res;
  try {
    res = body(*this, args);
  } catch (...) {
    I.body.swap(saved);
    throw;
  }
  std::string inner;
  inner.swap(I.body);
  I.body.swap(saved);
  std::vector<TensorType> types;
  for (const Value& r : res) {
    I.check(op, r);
    if (r.id < first_id) fail(op, "@" + name + " returns a value defined outside it");
    types.push_back(r.type);
  }
  text += ") -> (";
  for (size_t i = 0; i < types.size(); ++i) {
    if (i) text += ", ";
    appendType(text, types[i]);
  }
  text += ") {\n";
  text += inner;
  text += "    return";
  for (size_t i = 0; i < res.size(); ++i) {
    text += i ? ", " : " ";
    I.appendRef(text, res[i].id);
  }
  if (!res.empty()) {
    text += " : ";
    for (size_t i = 0; i < types.size(); ++i) {
      if (i) text += ", ";
      appendType(text, types[i]);
    }
  }
  text += "\n  }\n";
  addTopLevel(key, text);
  return types;
}

bool Builder::hasFunction(const std::string& name) const {
  const auto& keys = impl_->toplevel_keys;
  return std::find(keys.begin(), keys.end(), "func @" + name) != keys.end();
}

std::vector<Value> Builder::call(const std::string& name, const std::vector<Value>& args,
                                 const std::vector<TensorType>& results) {
  if (!hasFunction(name)) fail("call", "no function @" + name);
  return genericOp("func.call", args, "callee = @" + name, results);
}

}  // namespace torch_tpu::shlo
