#include "lowering/foreign.h"

#include <map>
#include <mutex>

namespace torch_tpu::lowering {

namespace {

std::string typesKey(const std::vector<shlo::TensorType>& ts) {
  std::string k;
  for (const auto& t : ts) k += t.str() + ",";
  return k;
}

struct Programs {
  std::mutex mu;
  // kernel -> input types -> module
  std::map<std::string, std::map<std::string, std::shared_ptr<const shlo::ForeignModule>>> by_kernel;
};

Programs& programs() {
  static Programs* p = new Programs();  // never destroyed: rules may run during exit
  return *p;
}

}  // namespace

std::shared_ptr<const shlo::ForeignModule> registerForeignProgram(const std::string& kernel, const std::string& text,
                                                                  const std::string& entry) {
  auto m = shlo::ForeignModule::parse(text, entry);
  Programs& p = programs();
  std::lock_guard<std::mutex> g(p.mu);
  p.by_kernel[kernel][typesKey(m->inputs())] = m;
  return m;
}

bool unregisterForeignProgram(const std::string& kernel, const std::vector<shlo::TensorType>& inputs) {
  Programs& p = programs();
  std::lock_guard<std::mutex> g(p.mu);
  auto k = p.by_kernel.find(kernel);
  if (k == p.by_kernel.end() || k->second.erase(typesKey(inputs)) == 0) return false;
  if (k->second.empty()) p.by_kernel.erase(k);
  return true;
}

std::shared_ptr<const shlo::ForeignModule> findForeignProgram(const std::string& kernel,
                                                              const std::vector<shlo::TensorType>& inputs) {
  Programs& p = programs();
  std::lock_guard<std::mutex> g(p.mu);
  auto k = p.by_kernel.find(kernel);
  if (k == p.by_kernel.end()) return nullptr;
  auto s = k->second.find(typesKey(inputs));
  return s == k->second.end() ? nullptr : s->second;
}

std::vector<std::string> foreignSignatures(const std::string& kernel) {
  Programs& p = programs();
  std::lock_guard<std::mutex> g(p.mu);
  std::vector<std::string> out;
  auto k = p.by_kernel.find(kernel);
  if (k != p.by_kernel.end())
    for (const auto& kv : k->second) out.push_back(kv.second->signature());
  return out;
}

size_t foreignProgramCount() {
  Programs& p = programs();
  std::lock_guard<std::mutex> g(p.mu);
  size_t n = 0;
  for (const auto& kv : p.by_kernel) n += kv.second.size();
  return n;
}

}  // namespace torch_tpu::lowering
