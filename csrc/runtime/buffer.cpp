// Buffer: owns one PJRT_Buffer*. Metadata (type, dims, device) is immutable after construction; PJRT buffer
// calls are thread-safe in the plugin, so every method may be called concurrently. Live-bytes accounting is
// updated on construction and on destruction/donation (atomically, at most once).
#include "runtime/pjrt_util.h"

namespace torch_tpu {
namespace runtime {

Buffer::Buffer(PJRT_Buffer* raw, ElementType type, std::vector<int64_t> dims, int device)
    : raw_(raw), type_(type), dims_(std::move(dims)), device_(device), accounted_bytes_(0) {
  accounted_bytes_ = static_cast<int64_t>(byteSize());
  if (Client::initialized()) Client::get().impl().addLive(device_, accounted_bytes_);
}

Buffer::~Buffer() {
  releaseAccounting();
  if (raw_ != nullptr && detail::g_api != nullptr) {
    try {
      detail::Args<PJRT_Buffer_Destroy_Args> a;
      a->buffer = raw_;
      PJRT_Error* err = TPU_PJRT_FN(PJRT_Buffer_Destroy)(a.get());
      detail::consumeErrorCode(err);
    } catch (...) {
    }
  }
}

void Buffer::releaseAccounting() {
  // Only called from the destructor and from the execute() that donates this buffer (never concurrently with
  // another use of the buffer), so a plain exchange is enough.
  int64_t bytes = accounted_bytes_;
  accounted_bytes_ = 0;
  if (bytes != 0 && Client::initialized()) Client::get().impl().addLive(device_, -bytes);
}

int64_t Buffer::numElements() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

size_t Buffer::byteSize() const { return static_cast<size_t>(numElements()) * elementSize(type_); }

namespace {
// PJRT_Buffer_ToHostBuffer with an explicit dense row-major host layout (minor_to_major = rank-1 .. 0), so the
// result is row-major whatever the device layout is (TPU tiles on device).
PJRT_Event* startToHost(PJRT_Buffer* raw, const std::vector<int64_t>& dims, size_t need, void* dst, size_t nbytes) {
  if (nbytes < need)
    throw Error("Buffer::toHost: destination has " + std::to_string(nbytes) + " bytes, buffer needs " +
                    std::to_string(need),
                kErrorInvalidArgument);
  int64_t m2m_small[8];
  std::vector<int64_t> m2m_big;
  int64_t* m2m = m2m_small;
  size_t rank = dims.size();
  if (rank > 8) {
    m2m_big.resize(rank);
    m2m = m2m_big.data();
  }
  for (size_t i = 0; i < rank; ++i) m2m[i] = static_cast<int64_t>(rank - 1 - i);
  detail::Args<PJRT_Buffer_MemoryLayout> layout;
  layout->type = PJRT_Buffer_MemoryLayout_Type_Tiled;
  layout->tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
  layout->tiled.minor_to_major = m2m;
  layout->tiled.minor_to_major_size = rank;
  static char dummy[16];
  detail::Args<PJRT_Buffer_ToHostBuffer_Args> a;
  a->src = raw;
  a->host_layout = layout.get();
  a->dst = dst != nullptr ? dst : dummy;
  a->dst_size = need == 0 ? sizeof(dummy) : nbytes;
  TPU_PJRT(PJRT_Buffer_ToHostBuffer, a.get());
  return a->event;
}
}  // namespace

void Buffer::toHost(void* dst, size_t nbytes) {
  PJRT_Event* ev = startToHost(raw_, dims_, byteSize(), dst, nbytes);
  Event holder(ev);  // destroyed on every path
  detail::awaitEvent(ev, "PJRT_Buffer_ToHostBuffer");
}

EventPtr Buffer::toHostAsync(void* dst, size_t nbytes) {
  return std::make_shared<Event>(startToHost(raw_, dims_, byteSize(), dst, nbytes));
}

void Buffer::awaitReady() {
  detail::Args<PJRT_Buffer_ReadyEvent_Args> a;
  a->buffer = raw_;
  TPU_PJRT(PJRT_Buffer_ReadyEvent, a.get());
  Event holder(a->event);
  detail::awaitEvent(a->event, "PJRT_Buffer_ReadyEvent");
}

bool Buffer::isReady() {
  detail::Args<PJRT_Buffer_ReadyEvent_Args> a;
  a->buffer = raw_;
  TPU_PJRT(PJRT_Buffer_ReadyEvent, a.get());
  Event holder(a->event);
  return holder.isReady();
}

int Buffer::queryDevice() const {
  detail::Args<PJRT_Buffer_Device_Args> a;
  a->buffer = raw_;
  TPU_PJRT(PJRT_Buffer_Device, a.get());
  return Client::get().impl().indexOf(a->device);
}

bool Buffer::isDeleted() const {
  detail::Args<PJRT_Buffer_IsDeleted_Args> a;
  a->buffer = raw_;
  TPU_PJRT(PJRT_Buffer_IsDeleted, a.get());
  return a->is_deleted;
}

}  // namespace runtime
}  // namespace torch_tpu
