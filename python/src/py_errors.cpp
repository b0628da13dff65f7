// Engine errors as Python exceptions: tokenmill::Error (a user error, with its message) is
// TokenmillError, a RuntimeError; JSON that does not parse is a ValueError.
#include <nlohmann/json.hpp>

#include "bindings.h"
#include "core/error.h"

namespace tokenmill::python {

void bind_errors(py::module_& m) {
  py::register_exception<Error>(m, "TokenmillError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const nlohmann::json::exception& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
}

void check_signals() {
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

}  // namespace tokenmill::python
