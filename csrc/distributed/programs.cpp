#include "distributed/programs.h"

#include <future>
#include <map>
#include <mutex>

#include "core/client.h"
#include "core/config.h"
#include "core/dtype.h"
#include "core/storage.h"
#include "stablehlo/builder.h"

namespace torch_tpu::dist {

runtime::ExecutablePtr cachedProgram(const std::string& key, const std::function<runtime::ExecutablePtr()>& build) {
  static std::mutex mu;
  static std::map<std::string, std::shared_future<runtime::ExecutablePtr>> cache;
  std::promise<runtime::ExecutablePtr> promise;
  std::shared_future<runtime::ExecutablePtr> fut;
  bool builder = false;
  {
    std::lock_guard<std::mutex> g(mu);
    auto it = cache.find(key);
    if (it == cache.end()) {
      fut = promise.get_future().share();
      cache.emplace(key, fut);
      builder = true;
    } else {
      fut = it->second;
    }
  }
  if (builder) {
    try {
      promise.set_value(build());
    } catch (...) {
      {
        std::lock_guard<std::mutex> g(mu);
        cache.erase(key);  // a later call may retry
      }
      promise.set_exception(std::current_exception());
    }
  }
  return fut.get();
}

namespace {

std::string dimsKey(const std::vector<int64_t>& dims) {
  std::string s;
  for (int64_t d : dims) s += std::to_string(d) + ",";
  return s;
}

}  // namespace

runtime::BufferPtr identity(const runtime::BufferPtr& src, bool donate, const std::vector<int64_t>* out_dims) {
  if (out_dims != nullptr && *out_dims != src->dims()) return reshapeBuffer(src, *out_dims);
  const auto type = src->type();
  const auto dims = src->dims();
  std::string key = std::string("dist.identity:") + runtime::elementTypeName(type) + ":" + dimsKey(dims) +
                    (donate ? "d" : "c");
  auto exe = cachedProgram(key, [&] {
    shlo::Builder b;
    shlo::Value x = b.parameter(shlo::TensorType{static_cast<shlo::DType>(type), dims}, donate ? 0 : -1);
    return client().compile(b.finish({x}));
  });
  return exe->execute(src->device(), {src.get()}, donate ? std::vector<bool>{true} : std::vector<bool>{})[0];
}

runtime::BufferPtr reshapeBuffer(const runtime::BufferPtr& src, const std::vector<int64_t>& dims) {
  const auto type = src->type();
  std::string key = std::string("dist.reshape:") + runtime::elementTypeName(type) + ":" + dimsKey(src->dims()) +
                    "->" + dimsKey(dims);
  auto exe = cachedProgram(key, [&] {
    shlo::Builder b;
    shlo::Value x = b.parameter(shlo::TensorType{static_cast<shlo::DType>(type), src->dims()});
    return client().compile(b.finish({b.reshape(x, dims)}));
  });
  return exe->execute(src->device(), {src.get()})[0];
}

}  // namespace torch_tpu::dist
