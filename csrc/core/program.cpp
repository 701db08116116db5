#include "core/program.h"

#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>

#include <algorithm>

#include "core/client.h"
#include "core/config.h"
#include "core/dtype.h"
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
    runtime::BufferPtr buf = st->get();
    if (buf) {
      bdims.push_back(buf->dims());
      btype.push_back(DType(buf->type()));
    } else {  // never written: reads as zeros, no program input
      bdims.push_back({static_cast<int64_t>(st->nbytes / t.element_size())});
      btype.push_back(toDType(t.scalar_type()));
    }
    buffers.push_back(std::move(buf));
    written.push_back(0);
    donatable.push_back(0);
  }
  if (writes) written[slot] = 1;
  const auto sizes = t.sizes();
  const shlo::Shape& bd = bdims[slot];
  bool identity = toDType(t.scalar_type()) == btype[slot] &&
                  viewprog::isIdentity(bd, viewprog::Layout{sizes.vec(), t.strides().vec(), t.storage_offset()});
  put<uint8_t>(key, 't');
  put<int8_t>(key, static_cast<int8_t>(t.scalar_type()));
  put<int8_t>(key, static_cast<int8_t>(slot));
  put<uint8_t>(key, identity);
  putInts(key, sizes);
  if (!identity) {
    putInts(key, t.strides());
    putInts(key, bd);
    put<int8_t>(key, static_cast<int8_t>(btype[slot]));
  } else if (!(sizes == c10::IntArrayRef(bd))) {
    putInts(key, bd);  // the program's parameter has the buffer's shape
  }
  tensors.push_back({t, slot, identity});
  return static_cast<int>(tensors.size() - 1);
}

void Signature::seal() {
  put<uint8_t>(key, '|');
  for (size_t s = 0; s < storages.size(); ++s) {
    const runtime::BufferPtr& buf = buffers[s];
    // Donated when nobody but the storage (and this call) holds the buffer, and it is large enough that donating
    // beats copying.
    donatable[s] = written[s] && buf && buf.use_count() <= 2 && buf->byteSize() >= donateMinBytes();
    put<uint8_t>(key, !buf ? 'z' : donatable[s] ? 'D' : 'b');
  }
}

viewprog::Layout Signature::layout(int ti) const {
  const at::Tensor& t = tensors[ti].t;
  return viewprog::Layout{t.sizes().vec(), t.strides().vec(), t.storage_offset()};
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
  if (!sig.buffers[slot]) {
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

Value ProgramBuilder::read(int ti) {
  Value& v = reads_[ti];
  if (!v.valid()) {
    const Signature::Entry& e = sig.tensors[ti];
    v = viewprog::read(b, storage(e.slot), sig.layout(ti), offset(ti), toDType(e.t.scalar_type()));
  }
  return v;
}

void ProgramBuilder::write(int ti, Value v) {
  const Signature::Entry& e = sig.tensors[ti];
  const int slot = e.slot;
  TORCH_INTERNAL_ASSERT(std::find(written_.begin(), written_.end(), slot) != written_.end(),
                        "tpu: a program writes a storage it did not declare");
  v = b.convert(v, toDType(e.t.scalar_type()));
  v = b.broadcastTo(v, e.t.sizes().vec());
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

std::string ProgramBuilder::finish(const std::vector<Value>& results, std::vector<Program::Result> result_types,
                                   Program& prog) {
  std::vector<Value> outs;
  outs.reserve(written_.size() + results.size());
  for (int slot : written_) {
    TORCH_INTERNAL_ASSERT(new_bufs_[slot].valid(), "tpu: a program declares a write it never makes");
    outs.push_back(new_bufs_[slot]);
  }
  outs.insert(outs.end(), results.begin(), results.end());
  prog.params = params_;
  prog.donated = donated_;
  prog.any_donation = std::find(donated_.begin(), donated_.end(), true) != donated_.end();
  prog.written_slots = written_;
  prog.results = std::move(result_types);
  return b.finish(outs);
}

// ---------------------------------------------------------------------------------------------------------------
// Launch

std::vector<at::Tensor> Program::launch(Signature& sig, HostFn host, const std::optional<at::Generator>& gen) const {
  // Locals, not thread-locals: a Host parameter may itself launch a program (a packed weight is made on demand).
  c10::SmallVector<runtime::BufferPtr, 8> held;
  std::vector<runtime::Buffer*> raw;
  raw.reserve(params.size());
  for (const Param& p : params) {
    switch (p.kind) {
      case Param::Kind::Storage:
        raw.push_back(sig.buffers[p.index].get());
        continue;
      case Param::Kind::Offset:
        held.push_back(scalarBuffer(c10::Scalar(sig.tensors[p.index].t.storage_offset()), DType::S64, sig.device));
        break;
      case Param::Kind::Rng: {
        uint64_t state[2] = {nextRngKey(gen, sig.device), 0};
        held.push_back(client().fromHost(state, runtime::ElementType::U64, {2}, sig.device));
        break;
      }
      case Param::Kind::Host:
        held.push_back(host(p));
        break;
    }
    raw.push_back(held.back().get());
  }
  std::vector<runtime::BufferPtr> outs = exe->execute(sig.device, raw, any_donation ? donated : std::vector<bool>{});
  // The plugin keeps its inputs alive until the execution finishes; drop our references now.
  held.clear();
  sig.buffers.clear();
  size_t o = 0;
  for (int slot : written_slots) sig.storages[slot]->set(std::move(outs[o++]));
  std::vector<at::Tensor> fresh;
  fresh.reserve(results.size());
  for (const Result& r : results) fresh.push_back(wrapBuffer(std::move(outs[o++]), r.dtype, r.sizes, sig.device));
  if (launchBlocking()) client().synchronize(sig.device);
  return fresh;
}

}  // namespace torch_tpu::core
