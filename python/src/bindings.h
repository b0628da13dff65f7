// The native module tokenmill._native: each file binds one part of the engine.
#pragma once

#include <pybind11/pybind11.h>

#include <string_view>

namespace tokenmill::python {

namespace py = pybind11;

void bind_errors(py::module_& m);     // py_errors.cpp
void bind_requests(py::module_& m);   // py_requests.cpp
void bind_tokenizer(py::module_& m);  // py_tokenizer.cpp
void bind_llm(py::module_& m);        // py_llm.cpp
void bind_training(py::module_& m);   // py_training.cpp

// Raises the pending Python exception (KeyboardInterrupt after Ctrl-C) as
// py::error_already_set when a signal handler asks for it. Call with the GIL held.
void check_signals();

// Text from the engine as a Python str, bytes that are not UTF-8 as U+FFFD (as transformers
// decodes them).
inline py::str utf8(std::string_view text) {
  return py::reinterpret_steal<py::str>(
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace"));
}

}  // namespace tokenmill::python
