#include "py_requests.h"

#include <pybind11/stl.h>

#include <chrono>
#include <iterator>

#include "bindings.h"

namespace tokenmill::python {

void Result::add(StreamEvent& event) {
  token_ids.insert(token_ids.end(), event.tokens.begin(), event.tokens.end());
  text += event.text;
  logprobs.insert(logprobs.end(), std::make_move_iterator(event.logprobs.begin()),
                  std::make_move_iterator(event.logprobs.end()));
  if (event.finish) {
    finish_reason = finish_reason_name(*event.finish);
    prompt_tokens = event.prompt_tokens;
    completion_tokens = event.completion_tokens;
    cached_tokens = event.cached_prompt_tokens;
  }
}

StreamEvent next_event(RequestStream& stream) {
  StreamEvent event;
  for (;;) {
    // Before waiting, so that an event taken from the stream is always returned (the
    // caller's cancellation then waits for the last one); a long generation has an event
    // every step, so this runs every step too.
    check_signals();
    py::gil_scoped_release release;
    if (stream.next(event, std::chrono::steady_clock::now() + std::chrono::milliseconds(50))) return event;
  }
}

StreamEvent next_event_uninterrupted(RequestStream& stream) {
  StreamEvent event;
  py::gil_scoped_release release;
  while (!stream.next(event, std::chrono::steady_clock::now() + std::chrono::seconds(1))) {
  }
  return event;
}

py::list logprobs_list(const std::vector<TokenLogprob>& logprobs) {
  py::list out;
  for (const TokenLogprob& step : logprobs) {
    py::list top;
    for (const TopLogprob& t : step.top) top.append(py::make_tuple(t.token, t.logprob));
    out.append(py::make_tuple(step.token, step.logprob, top));
  }
  return out;
}

void bind_requests(py::module_& m) {
  py::class_<Request>(m, "Request", "One completion the engine is asked for (made by SamplingParams).")
      .def(py::init<>())
      .def("copy", [](const Request& r) { return Request(r); })
      .def_readwrite("prompt", &Request::prompt)
      .def_readwrite("max_tokens", &Request::max_tokens)
      .def_readwrite("temperature", &Request::temperature)
      .def_readwrite("top_p", &Request::top_p)
      .def_readwrite("top_k", &Request::top_k)
      .def_readwrite("min_p", &Request::min_p)
      .def_readwrite("repetition_penalty", &Request::repetition_penalty)
      .def_readwrite("frequency_penalty", &Request::frequency_penalty)
      .def_readwrite("presence_penalty", &Request::presence_penalty)
      .def_readwrite("seed", &Request::seed)
      .def_readwrite("stop", &Request::stop)
      .def_readwrite("stop_token_ids", &Request::stop_token_ids)
      .def_readwrite("ignore_eos", &Request::ignore_eos)
      .def_readwrite("logprobs", &Request::logprobs)
      .def_readwrite("skip_special_tokens", &Request::skip_special_tokens)
      .def_readwrite("grammar", &Request::grammar)
      .def_readwrite("adapter", &Request::adapter);
  py::class_<Result>(m, "Result", "A completion, or what one step of a streamed completion added.")
      .def_readonly("token_ids", &Result::token_ids)
      .def_property_readonly("text", [](const Result& r) { return utf8(r.text); })
      .def_readonly("finish_reason", &Result::finish_reason)
      .def_readonly("has_logprobs", &Result::has_logprobs)
      .def_property_readonly("logprobs", [](const Result& r) { return logprobs_list(r.logprobs); })
      .def_readonly("prompt_tokens", &Result::prompt_tokens)
      .def_readonly("completion_tokens", &Result::completion_tokens)
      .def_readonly("cached_tokens", &Result::cached_tokens);
}

}  // namespace tokenmill::python
