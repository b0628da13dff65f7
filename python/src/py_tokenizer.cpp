// tokenmill._native.Tokenizer and ChatTemplate: the engine's tokenizer and Jinja chat
// templates (python/tokenmill/tokenizer.py gives them transformers' names).
#include <pybind11/stl.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "bindings.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill::python {

namespace {

Tokenizer load_tokenizer(const std::string& path) {
  return std::filesystem::is_directory(path) ? Tokenizer::from_model_dir(path) : Tokenizer::from_file(path);
}

// Renders messages and template variables given as JSON text, keeping their keys' order.
std::string render(const ChatTemplate& chat_template, const std::string& messages, const std::string& extra,
                   bool add_generation_prompt, const std::string& bos_token, const std::string& eos_token) {
  ChatTemplateOptions options;
  options.add_generation_prompt = add_generation_prompt;
  options.bos_token = bos_token;
  options.eos_token = eos_token;
  return chat_template.render_ordered(nlohmann::ordered_json::parse(messages),
                                      nlohmann::ordered_json::parse(extra), options);
}

}  // namespace

void bind_tokenizer(py::module_& m) {
  py::class_<Tokenizer>(m, "Tokenizer", "A tokenizer.json, a GGUF file's vocabulary, or a model directory's.")
      .def(py::init(&load_tokenizer), py::arg("path"))
      .def(
          "encode",
          [](const Tokenizer& t, const std::string& text, bool add_special_tokens) {
            return t.encode(text, {.add_special_tokens = add_special_tokens, .parse_special = true});
          },
          py::arg("text"), py::arg("add_special_tokens") = true)
      .def(
          "decode",
          [](const Tokenizer& t, const std::vector<int32_t>& ids, bool skip_special) {
            for (int32_t id : ids)
              if (id < 0 || id >= t.vocab_size())
                throw py::value_error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                      std::to_string(t.vocab_size()) + ")");
            return utf8(t.decode(ids, skip_special));
          },
          py::arg("ids"), py::arg("skip_special_tokens") = false)
      .def(
          "piece",
          [](const Tokenizer& t, int32_t id) {
            if (id < 0 || id >= t.vocab_size()) throw py::value_error("token id out of range");
            return utf8(t.piece(id));
          },
          py::arg("id"))
      .def("token_to_id", &Tokenizer::token_to_id, py::arg("piece"))
      .def_property_readonly("vocab_size", &Tokenizer::vocab_size)
      .def_property_readonly("bos_id", &Tokenizer::bos_id)
      .def_property_readonly("eos_id", &Tokenizer::eos_id)
      .def_property_readonly("bos_token", &Tokenizer::bos_token)
      .def_property_readonly("eos_token", &Tokenizer::eos_token)
      .def_property_readonly("chat_template", &Tokenizer::chat_template);
  py::class_<ChatTemplate>(m, "ChatTemplate", "A Jinja chat template, rendered as transformers renders it.")
      .def(py::init<std::string>(), py::arg("source"))
      .def("render", &render, py::arg("messages_json"), py::arg("extra_json"),
           py::arg("add_generation_prompt"), py::arg("bos_token"), py::arg("eos_token"));
}

}  // namespace tokenmill::python
