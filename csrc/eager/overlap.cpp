#include "eager/overlap.h"

#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "eager/twins.h"

namespace torch_tpu {

namespace {

// The CPU kernel's verdict depends only on how the call's tensors lie in memory relative to each other (which
// storages they share, and where in them), their dtypes and the other arguments: a call laid out like one that
// already passed passes again, without running the kernel on host twins.
class AliasLayout {
 public:
  explicit AliasLayout(const c10::OperatorHandle& op) {
    key_ = op.operator_name().name + "." + op.operator_name().overload_name;
  }

  void add(const c10::IValue& v) {
    if (v.isTensor()) return tensor(v.toTensor());
    if (v.isTensorList()) {
      key_ += "[";
      for (const at::Tensor& t : v.toTensorList()) tensor(t);
      key_ += "]";
      return;
    }
    if (v.isList()) {
      key_ += "[";
      for (const c10::IValue& e : v.toListRef()) add(e);
      key_ += "]";
      return;
    }
    if (v.isInt()) return num('i', v.toInt());
    if (v.isBool()) return num('b', v.toBool() ? 1 : 0);
    if (v.isDouble()) {
      double d = v.toDouble();
      int64_t bits;
      std::memcpy(&bits, &d, sizeof(bits));
      return num('d', bits);
    }
    if (v.isNone()) {
      key_ += 'n';
      return;
    }
    key_ += v.tagKind();  // scalars of other kinds (and devices, generators): their kind only
    key_ += ';';
  }

  // Offsets matter only between tensors sharing a storage: they are keyed after the scan, once sharing is known.
  std::string finish() const {
    std::string k = key_;
    for (size_t i = 0; i < offsets_.size(); ++i)
      if (uses_[size_t(offsets_[i].first)] > 1)
        k += "@" + std::to_string(offsets_[i].first) + ":" + std::to_string(offsets_[i].second);
    return k;
  }

 private:
  void num(char tag, int64_t v) {
    key_ += tag;
    key_ += std::to_string(v);
    key_ += ';';
  }
  void tensor(const at::Tensor& t) {
    if (!t.defined()) {
      key_ += 'u';
      return;
    }
    const c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
    auto it = slots_.emplace(s, int64_t(slots_.size())).first;
    int64_t slot = it->second;
    if (size_t(slot) >= uses_.size()) uses_.resize(size_t(slot) + 1, 0);
    uses_[size_t(slot)]++;
    offsets_.emplace_back(slot, t.storage_offset());
    key_ += "t" + std::to_string(slot) + ":" + std::to_string(int(t.scalar_type())) + ":" +
            std::to_string(t.storage().nbytes());
    for (int64_t d : t.sizes()) key_ += "," + std::to_string(d);
    key_ += "/";
    for (int64_t d : t.strides()) key_ += "," + std::to_string(d);
    key_ += ';';
  }

  std::string key_;
  std::unordered_map<const c10::StorageImpl*, int64_t> slots_;
  std::vector<int> uses_;
  std::vector<std::pair<int64_t, int64_t>> offsets_;
};

std::mutex g_mu;
std::unordered_set<std::string> g_passed;  // layouts whose check raised nothing
constexpr size_t kMaxPassed = 4096;

}  // namespace

void checkWriteOverlap(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t base) {
  AliasLayout layout(op);
  for (size_t i = base; i < stack.size(); ++i) layout.add(stack[i]);
  std::string key = layout.finish();
  {
    std::lock_guard<std::mutex> g(g_mu);
    if (g_passed.count(key)) return;
  }
  AliasTwins twin(c10::kCPU);  // zero-filled host twins aliasing as the tpu tensors do
  torch::jit::Stack cpu;
  for (size_t i = base; i < stack.size(); ++i) cpu.push_back(twin(stack[i]));
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu);
  } catch (const c10::Error& e) {
    // Only the overlap errors: anything else the zero-filled twins provoke is not the call's error.
    if (std::strncmp(e.msg().c_str(), "unsupported operation:", 22) == 0) throw;
  }
  std::lock_guard<std::mutex> g(g_mu);
  if (g_passed.size() >= kMaxPassed) g_passed.clear();
  g_passed.insert(std::move(key));
}

}  // namespace torch_tpu
