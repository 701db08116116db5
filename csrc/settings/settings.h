// Every TORCH_TPU_* environment variable, in one table, read by one parser per kind.
//
// Torch-free and dependency-free: every layer may include it (runtime, stablehlo, lowering, core, eager, compile,
// distributed, python). Python reads the same table through torch_tpu._C (csrc/python/settings_bindings.cpp and
// torch_tpu/_settings.py); docs/settings.md is generated from it (python -m torch_tpu --settings-doc).
//
// Syntax, one per kind (surrounding spaces are ignored everywhere but in paths and text):
//   switch   1/0, true/false, on/off, yes/no (any case); empty: the default. A switch whose default depends on the
//            machine (its table default is "auto") also takes "auto".
//   integer  a decimal integer in the setting's range.
//   bytes    a whole or decimal number of bytes with an optional unit: B, K/KiB, M/MiB, G/GiB, T/TiB (any case;
//            powers of 1024). "1.5G" is exactly 1610612736; a fraction of a byte is rounded down. KB/MB/GB are
//            refused (ambiguous between powers of 1000 and 1024).
//   path     any text, taken as given; empty means what the setting's description says (e.g. "off").
//   choice   one of the listed words (any case); empty: the default.
//   text     a format of its own, parsed by its reader (the description gives it).
// An invalid value throws SettingError naming the variable, the value and the accepted forms; nothing is silently
// reinterpreted.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace torch_tpu::settings {

enum class Kind { Switch, Integer, Bytes, Path, Choice, Text };

struct Spec {
  const char* name;
  Kind kind;
  // The value used when the variable is unset (or empty, but for paths and text), in the kind's syntax; nullptr
  // when it depends on the machine or the run: then `default_doc` says what it is, and the typed readers return
  // std::nullopt. "auto" for a switch means the same as nullptr and also lets the variable be set to "auto".
  const char* dflt;
  const char* default_doc;  // the default as the docs show it (nullptr: dflt)
  const char* choices;      // Choice: the words, separated by '|'
  int64_t min;              // Integer: the accepted range
  int64_t max;
  const char* reader;       // where it is read: "C++ (core)", "Python", ...
  const char* meaning;
};

// An invalid value (std::runtime_error: RuntimeError when it reaches Python from C++).
struct SettingError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const std::vector<Spec>& table();
// The entry of `name`; std::logic_error for a name not in the table (a programming error).
const Spec& spec(const std::string& name);
const char* kindName(Kind k);
// The accepted forms of a setting, as error messages and the docs state them.
std::string acceptedForms(const Spec& s);

// A parsed value: `set` is false when the variable is unset (or empty) and the setting has no fixed default (else
// the default is parsed and returned).
struct Value {
  bool set = false;
  bool b = false;     // Switch
  int64_t i = 0;      // Integer, Bytes
  std::string s;      // Path, Choice (lower case), Text
};

// Parses `raw` (nullptr: unset) as setting `name`; SettingError when invalid.
Value parse(const std::string& name, const char* raw);
// getenv(name) parsed.
Value read(const std::string& name);

// Typed readers of the environment (each call reads it: callers keep values they read once in a static).
// The std::optional forms return nullopt where the setting is unset and its default depends on the machine.
std::optional<bool> switchValue(const char* name);
bool switchOn(const char* name);  // a setting with a fixed default
std::optional<int64_t> integerValue(const char* name);
int64_t integer(const char* name);
std::optional<int64_t> bytesValue(const char* name);
int64_t bytes(const char* name);
std::optional<std::string> pathValue(const char* name);  // nullopt: unset (empty is returned as "")
std::string choice(const char* name);                     // lower case

// The bare parsers (no table): what a Bytes value "1.5G" is, etc. They return false on invalid text.
bool parseSwitchText(const std::string& text, bool* out);
bool parseBytesText(const std::string& text, int64_t* out);
bool parseIntegerText(const std::string& text, int64_t* out);

}  // namespace torch_tpu::settings
