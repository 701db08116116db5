#include "core/program.h"

#include "core/cache_key.h"

#include "stablehlo/collectives.h"

#include <ATen/MemoryOverlap.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <limits>

#include "core/client.h"
#include "core/config.h"
#include "core/dtype.h"
#include "core/memory.h"
#include "core/rng.h"
#include "core/scalars.h"

namespace torch_tpu::core {

using shlo::DType;
using shlo::TensorType;
using shlo::Value;

void deviceMismatch(int device, const c10::Device& other) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, tpu:", device,
              " and ", other, "!");
}

// ---------------------------------------------------------------------------------------------------------------
// Signature

namespace {

// Row-major strides (size-1 dims included, as PyTorch's contiguous tensors have them).
bool stridesAreContiguous(c10::IntArrayRef sizes, c10::IntArrayRef strides) {
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (strides[d] != expected) return false;
    expected *= std::max<int64_t>(sizes[d], 1);
  }
  return true;
}
// viewprog::isIdentity without building a Layout: offset 0, the buffer's element count, row-major strides (size-1
// dimensions ignored).
bool coversBuffer(const shlo::Shape& bd, c10::IntArrayRef sizes, c10::IntArrayRef strides, int64_t offset) {
  if (offset != 0) return false;
  int64_t n = 1, m = 1;
  for (int64_t d : bd) n *= d;
  for (int64_t d : sizes) m *= d;
  if (n != m) return false;
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}
}  // namespace

void Signature::clear() {
  device = -1;
  key.clear();
  tensors.clear();
  storages.clear();
  buffers.clear();
  bdims.clear();
  btype.clear();
  written.clear();
  donatable.clear();
  pending.clear();
  recording = false;
  donate_any_size = false;
}

int Signature::add(const at::Tensor& t, bool writes) {
  const int dev = t.device().index();
  if (device < 0) device = dev;
  else if (dev != device) deviceMismatch(device, t.device());
  TpuStorage* st = storageOf(t);
  int slot = -1;
  for (size_t i = 0; i < storages.size(); ++i)
    if (storages[i] == st) {
      slot = static_cast<int>(i);
      break;
    }
  if (slot < 0) {
    slot = static_cast<int>(storages.size());
    storages.push_back(st);
    runtime::BufferPtr buf;
    bool pend = false;
    if (recording) {
      const uint8_t ps = st->pending.load(std::memory_order_acquire);
      if (ps == TpuStorage::kLost) TpuStorage::flushPending(st);  // raises: the value was lost
      buf = st->peek();
      pend = ps == TpuStorage::kPending;
    } else {
      buf = st->get();
    }
    if (pend) {  // the buffer-to-be of a recorded op (fused eager)
      bdims.push_back(st->pending_dims);
      btype.push_back(DType(st->pending_type));
      buf = nullptr;
    } else if (buf) {
      bdims.push_back(buf->dims());
      btype.push_back(DType(buf->type()));
    } else {  // never written: reads as zeros, no program input
      bdims.push_back({static_cast<int64_t>(st->nbytes / t.element_size())});
      btype.push_back(storageDType(t.scalar_type()));
    }
    buffers.push_back(std::move(buf));
    written.push_back(0);
    donatable.push_back(0);
    pending.push_back(pend);
  }
  if (writes) written[slot] = 1;
  const auto sizes = t.sizes();
  const shlo::Shape& bd = bdims[slot];
  const bool identity = storageDType(t.scalar_type()) == btype[slot] && coversBuffer(bd, sizes, t.strides(), t.storage_offset());
  KeyWriter(key).tag(KeyTag::Tensor);
  put<int8_t>(key, static_cast<int8_t>(t.scalar_type()));
  put<int8_t>(key, static_cast<int8_t>(slot));
  put<uint8_t>(key, identity);
  // The conjugate and negative bits (views made by conj(), imag() of a conjugate): programs read and write the
  // tensor's logical values.
  put<uint8_t>(key, static_cast<uint8_t>((t.is_conj() ? 1 : 0) | (t.is_neg() ? 2 : 0)));
  putInts(key, sizes);
  if (!identity) {
    putInts(key, t.strides());
    putInts(key, bd);
    put<int8_t>(key, static_cast<int8_t>(btype[slot]));
  } else if (!(sizes == c10::IntArrayRef(bd))) {
    putInts(key, bd);  // the program's parameter has the buffer's shape
  }
  if (identity && !stridesAreContiguous(sizes, t.strides())) {
    // Strides that differ only in size-1 dims (a channels_last (n, c, 1, 1) tensor) read the same buffer, but
    // PyTorch propagates them to results: part of the key.
    put<uint8_t>(key, 0xff);
    putInts(key, t.strides());
  }
  tensors.push_back({t, slot, identity, writes});
  return static_cast<int>(tensors.size() - 1);
}

void Signature::seal() {
  KeyWriter k(key);
  k.tag(deviceChecks() ? KeyTag::ChecksOn : KeyTag::ChecksOff);  // programs with or without device-side checks
  for (size_t s = 0; s < storages.size(); ++s) {
    const runtime::BufferPtr& buf = buffers[s];
    // Donated when nobody but the storage (and this call) holds the buffer, and it is large enough that donating
    // beats copying (or the caller donates every size, see donate_any_size).
    donatable[s] = !recording && written[s] && buf && buf.use_count() <= 2 &&
                   (donate_any_size || buf->byteSize() >= donateMinBytes());
    k.tag(!buf && !pending[s] ? KeyTag::StorageEmpty : donatable[s] ? KeyTag::StorageDonated : KeyTag::StorageHeld);
  }
  overlap_hazard = write_alias = false;
  for (size_t i = 0; i < tensors.size() && !overlap_hazard; ++i) {
    const Entry& w = tensors[i];
    if (!w.writes) continue;
    if (!w.t.is_non_overlapping_and_dense() && at::has_internal_overlap(w.t) == at::MemOverlap::Yes) {
      overlap_hazard = true;
      break;
    }
    for (size_t j = 0; j < tensors.size(); ++j) {
      if (j == i || tensors[j].slot != w.slot) continue;
      const at::MemOverlapStatus st = at::get_overlap_status(w.t, tensors[j].t);
      if (st == at::MemOverlapStatus::Partial) {
        overlap_hazard = true;
        break;
      }
      if (st != at::MemOverlapStatus::No) write_alias = true;
    }
  }
}

viewprog::Layout Signature::layout(int ti) const {
  const at::Tensor& t = tensors[ti].t;
  return viewprog::Layout{t.sizes().vec(), t.strides().vec(), t.storage_offset()};
}

Value toStorage(shlo::Builder& b, Value v, at::ScalarType t) {
  v = b.convert(v, toDType(t));
  if (t != at::kComplexHalf) return v;
  // Each component rounded to half (round to nearest even, as c10::Half), its 16 bits placed in the word: the real
  // part low, the imaginary part high.
  auto bits = [&](Value f32) { return b.convert(b.bitcastConvert(b.convert(f32, DType::F16), DType::U16), DType::U32); };
  Value sixteen = b.broadcastTo(b.constantInt(16, DType::U32), v.shape());
  return b.orOp(bits(b.realPart(v)), b.shiftLeft(bits(b.imagPart(v)), sixteen));
}

Value fromStorage(shlo::Builder& b, Value v, at::ScalarType t) {
  if (t != at::kComplexHalf) return v;
  auto half = [&](Value u32) { return b.convert(b.bitcastConvert(b.convert(u32, DType::U16), DType::F16), DType::F32); };
  Value sixteen = b.broadcastTo(b.constantInt(16, DType::U32), v.shape());
  return b.complex(half(v), half(b.shiftRightLogical(v, sixteen)));
}

// ---------------------------------------------------------------------------------------------------------------
// ProgramBuilder

ProgramBuilder::ProgramBuilder(const Signature& s, std::vector<int> written_slots)
    : sig(s),
      written_(std::move(written_slots)),
      storage_vals_(s.storages.size()),
      offsets_(s.tensors.size()),
      reads_(s.tensors.size()),
      new_bufs_(s.storages.size()) {}

Value ProgramBuilder::storage(int slot) {
  Value& v = storage_vals_[slot];
  if (v.valid()) return v;
  TensorType bt{sig.btype[slot], sig.bdims[slot]};
  if (!sig.buffers[slot] && !sig.pending[slot]) {
    v = b.zeros(bt);
    return v;
  }
  int donate = -1;
  auto w = std::find(written_.begin(), written_.end(), slot);
  if (w != written_.end() && sig.donatable[slot]) donate = static_cast<int>(w - written_.begin());
  v = b.parameter(bt, donate);
  params_.push_back({Param::Kind::Storage, slot, sig.btype[slot]});
  donated_.push_back(donate >= 0);
  return v;
}

Value ProgramBuilder::offset(int ti) {
  if (sig.tensors[ti].identity) return Value();
  Value& v = offsets_[ti];
  if (!v.valid()) {
    v = b.parameter(TensorType{DType::S64, {}});
    params_.push_back({Param::Kind::Offset, ti, DType::S64});
    donated_.push_back(false);
  }
  return v;
}

Value ProgramBuilder::logical(const at::Tensor& t, Value v) {
  if (t.is_conj()) v = b.conj(v);
  if (t.is_neg()) v = b.neg(v);
  return v;
}

Value ProgramBuilder::read(int ti) {
  Value& v = reads_[ti];
  if (!v.valid()) {
    const Signature::Entry& e = sig.tensors[ti];
    const at::ScalarType st = e.t.scalar_type();
    v = fromStorage(b, viewprog::read(b, storage(e.slot), sig.layout(ti), offset(ti), storageDType(st)), st);
    v = logical(e.t, v);
  }
  return v;
}

void ProgramBuilder::write(int ti, Value v) {
  const Signature::Entry& e = sig.tensors[ti];
  const int slot = e.slot;
  TORCH_INTERNAL_ASSERT(std::find(written_.begin(), written_.end(), slot) != written_.end(),
                        "tpu: a program writes a storage it did not declare");
  v = logical(e.t, b.convert(v, toDType(e.t.scalar_type())));  // conj and neg are their own inverses
  v = toStorage(b, b.broadcastTo(v, e.t.sizes().vec()), e.t.scalar_type());
  Value& cur = new_bufs_[slot];
  if (e.identity) {
    // The whole storage is overwritten; the new buffer keeps the old one's shape (so a donated buffer fits).
    cur = b.reshape(b.convert(v, sig.btype[slot]), sig.bdims[slot]);
    return;
  }
  if (!cur.valid()) cur = storage(slot);
  cur = viewprog::write(b, cur, sig.layout(ti), offset(ti), v);
}

Value ProgramBuilder::hostParam(const TensorType& t, int index) {
  Value p = b.parameter(t);
  params_.push_back({Param::Kind::Host, index, t.dtype});
  donated_.push_back(false);
  return p;
}

Value ProgramBuilder::rngState() {
  Value p = b.parameter(TensorType{DType::U64, {2}});
  params_.push_back({Param::Kind::Rng, 0, DType::U64});
  donated_.push_back(false);
  return p;
}

void ProgramBuilder::check(const std::string& op, Value ok, const std::string& message, Value value,
                           bool index_error) {
  if (!deviceChecks()) return;
  TORCH_INTERNAL_ASSERT(ok.valid() && ok.dtype() == DType::Pred, "tpu: a device-side check needs a pred value");
  std::vector<int64_t> all(ok.rank());
  for (int64_t d = 0; d < ok.rank(); ++d) all[d] = d;
  Value holds = ok.rank() == 0 ? ok : b.reduce(ok, all, shlo::ReduceKind::And);
  Value bad;
  if (value.valid()) {
    // One offending value: the largest of those where the check fails.
    Value v = b.convert(value, DType::S64);
    if (v.shape() != ok.shape()) v = b.broadcastTo(v, ok.shape());
    Value lowest = b.broadcastTo(b.constantInt(std::numeric_limits<int64_t>::min(), DType::S64), ok.shape());
    v = b.select(ok, lowest, v);
    bad = ok.rank() == 0 ? v : b.reduce(v, all, shlo::ReduceKind::Max);
  } else {
    bad = b.constantInt(0, DType::S64);
  }
  check_fail_.push_back(b.notOp(holds));
  check_value_.push_back(bad);
  check_sites_.push_back({op, message, index_error});
}

std::string ProgramBuilder::finish(const std::vector<Value>& results, std::vector<Program::Result> result_types,
                                   Program& prog, int num_replicas, shlo::Builder::MainLayout* layout) {
  std::vector<Value> outs;
  outs.reserve(written_.size() + results.size() + 1);
  for (int slot : written_) {
    TORCH_INTERNAL_ASSERT(new_bufs_[slot].valid(), "tpu: a program declares a write it never makes");
    outs.push_back(new_bufs_[slot]);
  }
  outs.insert(outs.end(), results.begin(), results.end());
  prog.checks = nullptr;
  if (!check_sites_.empty()) {
    // [site, value]: site 0 when every check holds, else 1 + the first failing check.
    Value site = b.constantInt(0, DType::S64), value = b.constantInt(0, DType::S64);
    for (size_t k = check_sites_.size(); k-- > 0;) {
      site = b.select(check_fail_[k], b.constantInt(static_cast<int64_t>(k + 1), DType::S64), site);
      value = b.select(check_fail_[k], check_value_[k], value);
    }
    outs.push_back(b.concatenate({b.reshape(site, {1}), b.reshape(value, {1})}, 0));
    prog.checks = registerCheckSites(std::move(check_sites_));
  }
  prog.params = params_;
  prog.donated = donated_;
  prog.any_donation = std::find(donated_.begin(), donated_.end(), true) != donated_.end();
  prog.written_slots = written_;
  prog.results = std::move(result_types);
  return b.finish(outs, layout, num_replicas);
}

// ---------------------------------------------------------------------------------------------------------------
// Launch

runtime::BufferPtr bindParam(const Param& p, const Signature& sig, Program::HostFn host,
                             const std::optional<at::Generator>& gen) {
  switch (p.kind) {
    case Param::Kind::Offset:
      return scalarBuffer(c10::Scalar(sig.tensors[p.index].t.storage_offset()), DType::S64, sig.device);
    case Param::Kind::Rng: {
      uint64_t state[2] = {nextRngKey(gen, sig.device), 0};
      return client().fromHost(state, runtime::ElementType::U64, {2}, sig.device);
    }
    case Param::Kind::Host:
      return host(p);
    case Param::Kind::Storage:
      break;
  }
  TORCH_INTERNAL_ASSERT(false, "tpu: bindParam of a storage parameter");
}

std::vector<at::Tensor> Program::launch(Signature& sig, HostFn host, const std::optional<at::Generator>& gen,
                                        int launch_id, const LaunchOptions& label) const {
  // Locals, not thread-locals: a Host parameter may itself launch a program (a packed weight is made on demand).
  c10::SmallVector<runtime::BufferPtr, 8> held;
  std::vector<runtime::Buffer*> raw;
  raw.reserve(params.size());
  for (const Param& p : params) {
    if (p.kind == Param::Kind::Storage) {
      raw.push_back(sig.buffers[p.index].get());
      continue;
    }
    held.push_back(bindParam(p, sig, host, gen));
    raw.push_back(held.back().get());
  }
  // A written storage that has no buffer yet turns its reservation into its buffer.
  int64_t covered = 0;
  for (int slot : written_slots)
    if (!sig.buffers[slot] && sig.storages[slot]->reserved) covered += static_cast<int64_t>(sig.storages[slot]->nbytes);
  LaunchOptions opts = label;
  opts.donate = any_donation ? &donated : nullptr;
  opts.launch_id = launch_id;
  opts.covered_bytes = covered;
  std::vector<runtime::BufferPtr> outs = launchExecutable(*exe, sig.device, raw, opts);
  // The plugin keeps its inputs alive until the execution finishes; drop our references now.
  held.clear();
  sig.buffers.clear();
  size_t o = 0;
  for (int slot : written_slots) sig.storages[slot]->set(std::move(outs[o++]));
  std::vector<at::Tensor> fresh;
  fresh.reserve(results.size());
  for (const Result& r : results) fresh.push_back(wrapResult(std::move(outs[o++]), r, sig.device));
  if (checks) addPendingCheck(sig.device, std::move(outs[o++]), checks);
  if (launchBlocking()) {
    client().synchronize(sig.device);
    raisePendingChecks(sig.device);
  }
  return fresh;
}

std::vector<int64_t> memoryOrder(c10::IntArrayRef strides) {
  std::vector<int64_t> order(strides.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = static_cast<int64_t>(d);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  return order;
}

std::vector<int64_t> Program::Result::dims() const {
  if (strides.empty()) return sizes;
  std::vector<int64_t> d;
  for (int64_t k : memoryOrder(strides)) d.push_back(sizes[k]);
  return d;
}

at::Tensor Program::wrapResult(runtime::BufferPtr buffer, const Result& r, int device) {
  at::Tensor t;
  if (buffer) {
    t = wrapBuffer(std::move(buffer), r.dtype, r.sizes, device);
  } else {
    const int64_t n = c10::multiply_integers(r.sizes);
    t = emptyTensor(static_cast<size_t>(n) * c10::elementSize(r.dtype), r.dtype, r.sizes, device);
  }
  if (!r.strides.empty()) t.unsafeGetTensorImpl()->set_sizes_and_strides(r.sizes, r.strides);
  return t;
}

}  // namespace torch_tpu::core
