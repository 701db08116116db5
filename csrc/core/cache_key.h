// The typed writer of cache-key bytes. An eager call's key (core::Signature::key) is the bytes that decide its program
// and result types: per argument a tag naming what follows, then that argument's value bytes. Tags are the
// enumerators below, written by name, never as bare letters; each is one byte.
#pragma once

#include <cstdint>
#include <string>

#include "core/program.h"

namespace torch_tpu::core {

enum class KeyTag : uint8_t {
  None = 1,         // an absent optional argument
  Tensor,           // a device tensor: dtype, storage slot, identity, conj/neg bits, sizes (+ strides, offset)
  UndefinedTensor,  // an undefined tensor in a list or an optional
  CpuScalar,        // a 0-d CPU tensor (a program input): its dtype and whether it is a wrapped number
  ListBegin,        // a tensor list's elements follow, until ListEnd
  ListHole,         // a list element that is not a tensor
  ListEnd,
  DefaultBuiltIn,   // the schema's default value of a number argument, built into the program
  Bool,             // a number's kind (its value follows only when built into the program)
  Integer,
  Floating,
  Complex,          // complex numbers: always built in, real and imaginary parts follow
  Int,              // an int argument: its value
  BoolArg,          // a bool argument: its value
  IntList,          // an int list: its values
  NumberList,       // a float/Scalar list (static): kind and value per element
  BoolList,         // a bool list: its values
  String,           // a string argument: its length and bytes
  ScalarType,       // a dtype argument: its value
  Device,           // a device argument: its index
  Generator,        // a generator (its state is a program input)
  Other,            // an argument the key does not need (layouts, memory formats: PyTorch's meta kernels judge them)
  // After the arguments (Signature::seal): whether the program has device-side checks, and per storage:
  ChecksOn,
  ChecksOff,
  StorageEmpty,     // no buffer yet (a fresh reservation)
  StorageDonated,   // its buffer is donated to the written result
  StorageHeld,      // its buffer is read, or written without donation
  // A fused-eager trace's key (eager/fused_record.cpp), per op input:
  TraceExternal,    // a buffer captured from outside the trace
  TraceValue,       // a value of the trace: its index follows
};

// Appends to a key string.
class KeyWriter {
 public:
  explicit KeyWriter(std::string& key) : k_(key) {}
  void tag(KeyTag t) { put<uint8_t>(k_, static_cast<uint8_t>(t)); }
  template <class T>
  void value(T v) { put<T>(k_, v); }
  void ints(c10::IntArrayRef v) { putInts(k_, v); }
  void bytes(const void* p, size_t n) { put(k_, p, n); }
  void string(const std::string& s) {
    put<uint32_t>(k_, static_cast<uint32_t>(s.size()));
    k_.append(s);
  }

 private:
  std::string& k_;
};

}  // namespace torch_tpu::core
