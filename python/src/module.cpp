// PYBIND11_MODULE: tokenmill._native, the engine under the Python package (python/tokenmill).
#include "bindings.h"

#include "core/parallel.h"
#include "grammar/json_schema_grammar.h"

namespace tokenmill::python {
namespace {

void set_threads(int threads) {
  set_thread_count(threads);
  set_thread_count_follows_load(threads <= 0);  // as the CLI does without --threads
}

}  // namespace
}  // namespace tokenmill::python

PYBIND11_MODULE(_native, m) {
  namespace py = pybind11;
  using namespace tokenmill::python;
  m.doc() = "tokenmill's engine (the Python API is the tokenmill package)";
  m.attr("__version__") = TOKENMILL_VERSION;
  bind_errors(m);
  bind_requests(m);
  bind_tokenizer(m);
  bind_llm(m);
  bind_training(m);
  m.def("set_threads", &set_threads, py::arg("threads"),
        "CPU threads for every later call, process-wide (0: every core, fewer while other processes keep "
        "some busy).");
  m.def(
      "json_schema_to_gbnf",
      [](const std::string& schema) {
        return tokenmill::json_schema_to_gbnf(nlohmann::ordered_json::parse(schema));
      },
      py::arg("schema_json"),
      "The GBNF grammar of JSON text valid against a JSON Schema (given as JSON text).");
  m.def("json_object_gbnf", &tokenmill::json_object_gbnf, "The GBNF grammar of any JSON object.");
}
