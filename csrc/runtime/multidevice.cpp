// Programs and buffers for work spanning several devices: replicated/partitioned compilation with a device
// assignment, global device ids, buffers fulfilled later (PendingBuffer), uninitialized buffers and host access to
// device memory where device memory is host memory. All thread-safe (see runtime.h).
#include <algorithm>

#include "runtime/device_attributes.h"
#include "runtime/pjrt_util.h"

namespace torch_tpu {
namespace runtime {

namespace {

void putVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void putVarintField(std::string& out, int field, uint64_t v) {
  putVarint(out, (static_cast<uint64_t>(field) << 3) | 0);
  putVarint(out, v);
}
void putBytesField(std::string& out, int field, const std::string& bytes) {
  putVarint(out, (static_cast<uint64_t>(field) << 3) | 2);
  putVarint(out, bytes.size());
  out += bytes;
}

// CompileOptionsProto {
//   executable_build_options(3) {
//     num_replicas(4), num_partitions(5), use_spmd_partitioning(6),
//     device_assignment(9): DeviceAssignmentProto { replica_count(1), computation_count(2),
//                                                   computation_devices(3) { replica_device_ids(1) packed } } } }
// computation_devices has one entry per partition, each listing the device of every replica.
std::string compileOptions(int replicas, int partitions, bool spmd, const std::vector<int64_t>& ids) {
  std::string da;
  putVarintField(da, 1, static_cast<uint64_t>(replicas));
  putVarintField(da, 2, static_cast<uint64_t>(partitions));
  for (int p = 0; p < partitions; ++p) {
    std::string packed;
    for (int r = 0; r < replicas; ++r) putVarint(packed, static_cast<uint64_t>(ids[static_cast<size_t>(r * partitions + p)]));
    std::string comp;
    putBytesField(comp, 1, packed);
    putBytesField(da, 3, comp);
  }
  std::string build;
  putVarintField(build, 4, static_cast<uint64_t>(replicas));
  putVarintField(build, 5, static_cast<uint64_t>(partitions));
  if (spmd) putVarintField(build, 6, 1);
  putBytesField(build, 9, da);
  std::string opts;
  putBytesField(opts, 3, build);
  return opts;
}

PJRT_Memory* defaultMemory(PJRT_Device* d) {
  detail::Args<PJRT_Device_DefaultMemory_Args> a;
  a->device = d;
  TPU_PJRT(PJRT_Device_DefaultMemory, a.get());
  return a->memory;
}

}  // namespace

int64_t Client::globalDeviceId(int device) const {
  impl_->device(device);
  detail::Args<PJRT_DeviceDescription_Id_Args> a;
  a->device_description = impl_->descriptions[static_cast<size_t>(device)];
  TPU_PJRT(PJRT_DeviceDescription_Id, a.get());
  return a->id;
}

int Client::processIndex(int device) const {
  impl_->device(device);
  detail::Args<PJRT_DeviceDescription_ProcessIndex_Args> a;
  a->device_description = impl_->descriptions[static_cast<size_t>(device)];
  TPU_PJRT(PJRT_DeviceDescription_ProcessIndex, a.get());
  return a->process_index;
}

std::vector<std::pair<std::string, std::string>> deviceAttributes(const Client& client, int device) {
  client.impl().device(device);
  std::vector<std::pair<std::string, std::string>> out;
  if (!TPU_PJRT_HAS(PJRT_DeviceDescription_Attributes)) return out;
  detail::Args<PJRT_DeviceDescription_Attributes_Args> a;
  a->device_description = client.impl().descriptions[static_cast<size_t>(device)];
  TPU_PJRT(PJRT_DeviceDescription_Attributes, a.get());
  for (size_t i = 0; i < a->num_attributes; ++i) {
    const PJRT_NamedValue& nv = a->attributes[i];
    std::string v;
    if (nv.type == PJRT_NamedValue_kString) {
      v.assign(nv.string_value, nv.value_size);
    } else if (nv.type == PJRT_NamedValue_kInt64) {
      v = std::to_string(nv.int64_value);
    } else if (nv.type == PJRT_NamedValue_kInt64List) {
      for (size_t k = 0; k < nv.value_size; ++k) v += (k ? "." : "") + std::to_string(nv.int64_array_value[k]);
    } else if (nv.type == PJRT_NamedValue_kBool) {
      v = nv.bool_value ? "true" : "false";
    } else {
      v = std::to_string(nv.float_value);
    }
    out.emplace_back(std::string(nv.name, nv.name_size), std::move(v));
  }
  return out;
}

bool Client::deviceMemoryIsHostMemory() const {
  const std::string& p = impl_->info.platform_name;
  return p == "cpu" || p == "host";
}

ExecutablePtr Client::compile(const std::string& stablehlo_text, const DeviceAssignment& da) {
  if (da.num_replicas < 1 || da.num_partitions < 1)
    throw Error("compile: num_replicas and num_partitions must be >= 1", kErrorInvalidArgument);
  const int n = da.num_replicas * da.num_partitions;
  std::vector<int> devices = da.devices;
  if (devices.empty())
    for (int i = 0; i < n; ++i) devices.push_back(i);
  if (static_cast<int>(devices.size()) != n)
    throw Error("compile: " + std::to_string(devices.size()) + " devices for " + std::to_string(da.num_replicas) +
                    " replicas x " + std::to_string(da.num_partitions) + " partitions",
                kErrorInvalidArgument);
  std::vector<int64_t> ids;
  for (int d : devices) ids.push_back(globalDeviceId(d));
  {
    std::vector<int64_t> sorted = ids;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      throw Error("compile: a device appears twice in the device assignment", kErrorInvalidArgument);
  }
  static const char kFormat[] = "mlir";
  detail::Args<PJRT_Program> prog;
  prog->code = const_cast<char*>(stablehlo_text.data());
  prog->code_size = stablehlo_text.size();
  prog->format = kFormat;
  prog->format_size = sizeof(kFormat) - 1;
  const std::string opts = compileOptions(da.num_replicas, da.num_partitions, da.spmd, ids);
  detail::CompileScope scope("PJRT_Client_Compile");
  detail::Args<PJRT_Client_Compile_Args> a;
  a->client = impl_->client;
  a->program = prog.get();
  a->compile_options = opts.data();
  a->compile_options_size = opts.size();
  TPU_PJRT(PJRT_Client_Compile, a.get());
  return std::make_shared<Executable>(a->executable);
}

BufferPtr Client::uninitialized(ElementType type, const std::vector<int64_t>& dims, int device) {
  PJRT_Device* d = impl_->device(device);
  if (elementSize(type) == 0)
    throw Error(std::string("uninitialized: unsupported element type ") + elementTypeName(type), kErrorInvalidArgument);
  detail::Args<PJRT_Client_CreateUninitializedBuffer_Args> a;
  a->client = impl_->client;
  a->shape_dims = dims.data();
  a->shape_num_dims = dims.size();
  a->shape_element_type = static_cast<PJRT_Buffer_Type>(type);
  a->device = d;
  TPU_PJRT(PJRT_Client_CreateUninitializedBuffer, a.get());
  return std::make_shared<Buffer>(a->buffer, type, dims, device);
}

PendingBufferPtr Client::pending(ElementType type, const std::vector<int64_t>& dims, int device) {
  PJRT_Device* d = impl_->device(device);
  if (!TPU_PJRT_HAS(PJRT_Client_CreateAliasBuffer) || !TPU_PJRT_HAS(PJRT_Client_FulfillAliasBuffer)) return nullptr;
  detail::Args<PJRT_Client_CreateAliasBuffer_Args> a;
  a->client = impl_->client;
  a->memory = defaultMemory(d);
  a->shape_dims = dims.data();
  a->shape_num_dims = dims.size();
  a->shape_element_type = static_cast<PJRT_Buffer_Type>(type);
  PJRT_Error* err = TPU_PJRT_FN(PJRT_Client_CreateAliasBuffer)(a.get());
  if (err != nullptr) {
    Error e = detail::toError(err, "PJRT_Client_CreateAliasBuffer");
    if (e.code() == kErrorUnimplemented) return nullptr;
    throw e;
  }
  auto buf = std::make_shared<Buffer>(a->alias_buffer, type, dims, device);
  return std::make_shared<PendingBuffer>(std::move(buf), a->fulfill_alias_buffer_cb);
}

void PendingBuffer::fulfill(const BufferPtr& value) {
  if (callback_ == nullptr) throw Error("PendingBuffer: already fulfilled", kErrorFailedPrecondition);
  if (!value || value->type() != buffer_->type() || value->dims() != buffer_->dims() ||
      value->device() != buffer_->device())
    throw Error("PendingBuffer::fulfill: the value must have the pending buffer's type, shape and device",
                kErrorInvalidArgument);
  detail::Args<PJRT_Client_FulfillAliasBuffer_Args> a;
  a->client = Client::get().impl().client;
  a->buffer = value->raw();
  a->status_code = PJRT_Error_Code_OK;
  a->fulfill_alias_buffer_cb = static_cast<PJRT_FulfillAliasBufferCallback*>(callback_);
  callback_ = nullptr;  // the callback is consumed by the call, whatever its outcome
  TPU_PJRT(PJRT_Client_FulfillAliasBuffer, a.get());
}

PendingBuffer::~PendingBuffer() {
  if (callback_ == nullptr) return;
  try {
    // Never fulfilled (the work producing it failed): give it memory so that nothing waiting on it hangs. A buffer
    // fulfilled with an error status crashes XLA:CPU's input copies, so an error is never used here.
    fulfill(Client::get().uninitialized(buffer_->type(), buffer_->dims(), buffer_->device()));
  } catch (...) {
  }
}

void* Buffer::unsafePointer() const {
  detail::Args<PJRT_Buffer_UnsafePointer_Args> a;
  a->buffer = raw_;
  TPU_PJRT(PJRT_Buffer_UnsafePointer, a.get());
  return reinterpret_cast<void*>(a->buffer_pointer);
}

}  // namespace runtime
}  // namespace torch_tpu
