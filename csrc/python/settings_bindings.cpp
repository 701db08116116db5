// torch_tpu._C bindings of the settings table (csrc/settings/settings.h): Python reads the same table and the same
// parsers as C++ (torch_tpu/_settings.py).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "python/bindings.h"
#include "settings/settings.h"

namespace py = pybind11;

namespace torch_tpu {

namespace {

py::object valueToPython(const settings::Spec& s, const settings::Value& v) {
  if (!v.set) return py::none();  // unset, and the default depends on the machine
  switch (s.kind) {
    case settings::Kind::Switch: return py::bool_(v.b);
    case settings::Kind::Integer:
    case settings::Kind::Bytes: return py::int_(v.i);
    default: return py::str(v.s);
  }
}

}  // namespace

void bindSettings(py::module_& m) {
  // [{name, kind, default, default_doc, choices, min, max, reader, meaning, accepted}], in table order.
  m.def("_settings_table", [] {
    py::list out;
    for (const settings::Spec& s : settings::table()) {
      py::dict d;
      d["name"] = s.name;
      d["kind"] = settings::kindName(s.kind);
      d["default"] = s.dflt ? py::object(py::str(s.dflt)) : py::object(py::none());
      d["default_doc"] = s.default_doc ? s.default_doc : (s.dflt ? s.dflt : "");
      d["choices"] = s.choices ? py::object(py::str(s.choices)) : py::object(py::none());
      d["min"] = s.min;
      d["max"] = s.max;
      d["reader"] = s.reader;
      d["meaning"] = s.meaning;
      d["accepted"] = settings::acceptedForms(s);
      out.append(d);
    }
    return out;
  });
  // The value of setting `name` given as `raw` (None: unset): bool (switch), int (integer, byte size), str (path,
  // choice, text), or None where unset with a default that depends on the machine. RuntimeError for an invalid
  // value, naming the variable, the value and the accepted forms; ValueError for a name not in the table.
  m.def(
      "_setting_parse",
      [](const std::string& name, std::optional<std::string> raw) {
        const settings::Spec* s = nullptr;
        try {
          s = &settings::spec(name);
        } catch (const std::logic_error& e) {
          throw py::value_error(e.what());
        }
        settings::Value v = settings::parse(name, raw ? raw->c_str() : nullptr);
        return valueToPython(*s, v);
      },
      py::arg("name"), py::arg("raw"));
}

}  // namespace torch_tpu
