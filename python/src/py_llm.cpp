// tokenmill._native.Engine: a model loaded with its engine (serve/engine_host.h), which every
// generation of python/tokenmill/llm.py goes through, batched with the others in flight.
// Waiting releases the GIL; Ctrl-C cancels what the call submitted and raises
// KeyboardInterrupt once the engine let go of it. Every call holds the host (a shared_ptr
// taken with the GIL) while it runs, so close() from another thread ends the engine only
// once the calls in flight are done with it.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "bindings.h"
#include "core/error.h"
#include "model/transformer.h"
#include "py_requests.h"
#include "serve/engine_host.h"
#include "serve/speculative_spec.h"

namespace tokenmill::python {

namespace {

// One streamed completion: iterating gives one Result per step, the last with finish_reason.
// One thread at a time may use a Stream.
class Stream {
 public:
  Stream(std::shared_ptr<RequestStream> stream, std::shared_ptr<EngineHost> host)
      : stream_(std::move(stream)), host_(std::move(host)) {}
  Stream(Stream&&) = default;
  Stream& operator=(Stream&&) = delete;
  ~Stream() {  // dropped unfinished: the engine stops generating for it
    if (stream_ && !done_) stream_->cancel();
  }
  Result next() {
    if (done_) throw py::stop_iteration();
    StreamEvent event;
    try {
      event = next_event(*stream_);
    } catch (py::error_already_set&) {
      cancel();
      throw;
    }
    Result step;
    step.has_logprobs = true;
    step.add(event);
    done_ = step.finished();
    return step;
  }
  // Ends the generation at the engine's next step (its remaining events are dropped).
  void cancel() {
    if (done_) return;
    stream_->cancel();
    while (!next_event_uninterrupted(*stream_).finish) {
    }
    done_ = true;
  }

 private:
  std::shared_ptr<RequestStream> stream_;
  std::shared_ptr<EngineHost> host_;  // the engine outlives its streams
  bool done_ = false;
};

class PyEngine {
 public:
  PyEngine(const std::string& model, const std::string& device,
           const std::map<std::string, std::string>& lora, const std::string& chat_template, int64_t context,
           uint64_t kv_cache_memory, double kv_cache_fraction, int64_t block_size, int64_t max_batch_tokens,
           int64_t max_prefill_with_decodes, int64_t max_running, int64_t max_waiting, bool prefix_caching,
           const std::string& speculative, int64_t speculative_rows, bool no_mmap,
           std::optional<py::function> log) {
    EngineHostConfig c;
    c.model = model;
    c.device = device;
    for (const auto& [name, dir] : lora) c.lora_adapters.push_back({name, dir});
    c.chat_template_file = chat_template;
    c.host_weights = no_mmap ? HostWeights::Copied : HostWeights::Mapped;
    c.kv_cache_fraction = kv_cache_fraction;
    EngineOptions& e = c.engine;
    e.context = context;
    e.kv_cache_bytes = kv_cache_memory;
    e.block_size = block_size;
    e.max_batch_tokens = max_batch_tokens;
    e.max_prefill_with_decodes = max_prefill_with_decodes;
    e.max_running = max_running;
    e.max_waiting = max_waiting;
    e.prefix_caching = prefix_caching;
    e.speculative_rows = speculative_rows;
    if (!speculative.empty()) {
      const SpeculativeSpec spec = parse_speculative(speculative);
      e.speculative.max_tokens = spec.max_tokens;
      c.draft_model = spec.draft_model;
    }
    const LogFn log_line = [&log](std::string_view line) {
      if (!log) return;
      py::gil_scoped_acquire acquire;
      (*log)(utf8(line));
    };
    py::gil_scoped_release release;  // loading takes a while; other Python threads go on
    host_ = std::make_shared<EngineHost>(c, nullptr, log_line);
    if (host_->model().tokenizer) grammars_ = std::make_shared<GrammarCache>(*host_->model().tokenizer);
  }

  // The host, for the length of a call (taken with the GIL held).
  std::shared_ptr<EngineHost> host() const {
    if (!host_) throw Error("this LLM was closed");
    return host_;
  }

  EngineRequest engine_request(const EngineHost& host, const Request& r) const {
    EngineRequest e;
    e.prompt = r.prompt;
    e.max_tokens = r.max_tokens;
    SamplingParams& s = e.sampling;
    s.temperature = r.temperature;
    s.top_p = r.top_p;
    s.top_k = r.top_k;
    s.min_p = r.min_p;
    s.repetition_penalty = r.repetition_penalty;
    s.frequency_penalty = r.frequency_penalty;
    s.presence_penalty = r.presence_penalty;
    s.seed = r.seed;
    s.vocab_limit = host.model().sampling_vocab_limit();
    e.stop = r.stop;
    e.stop_token_ids = r.stop_token_ids;
    e.ignore_eos = r.ignore_eos;
    e.top_logprobs = r.logprobs;
    e.skip_special_tokens = r.skip_special_tokens;
    if (!r.grammar.empty()) {
      if (!grammars_) fail("structured outputs need the model's tokenizer, and {} has none", host.name());
      e.grammar = grammars_->get(r.grammar);
    }
    if (!r.adapter.empty()) {
      const std::vector<std::string>& names = host.adapter_names();
      const auto it = std::find(names.begin(), names.end(), r.adapter);
      if (it == names.end())
        fail("lora '{}': no such adapter (this LLM has {})", r.adapter,
             names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")));
      e.adapter = static_cast<int32_t>(it - names.begin());
    }
    return e;
  }

  // Every request submitted (as many as the engine queues at once; the rest as earlier ones
  // finish) and gathered, in order.
  std::vector<Result> generate(const std::vector<Request>& requests) {
    const std::shared_ptr<EngineHost> host = this->host();
    std::vector<EngineRequest> engine_requests;
    for (const Request& r : requests) engine_requests.push_back(engine_request(*host, r));
    std::vector<std::shared_ptr<RequestStream>> streams;
    std::vector<Result> results(requests.size());
    size_t gathered = 0;
    try {
      for (size_t i = 0; i < engine_requests.size(); ++i) {
        for (;;) {
          try {
            streams.push_back(host->engine().submit(engine_requests[i]));  // a copy: kept if refused
            break;
          } catch (const EngineBusy&) {
            if (gathered < streams.size()) {  // room comes as ours finish
              gather(*streams[gathered], results[gathered]);
              ++gathered;
            } else {  // the queue holds other callers' requests alone: wait for room
              check_signals();
              py::gil_scoped_release release;
              std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
          }
        }
        results[i].has_logprobs = requests[i].logprobs >= 0;
      }
      for (; gathered < streams.size(); ++gathered) gather(*streams[gathered], results[gathered]);
    } catch (...) {  // Ctrl-C or a request refused: cancel what is left, wait until the engine let go
      for (size_t i = gathered; i < streams.size(); ++i) streams[i]->cancel();
      for (size_t i = gathered; i < streams.size(); ++i)
        while (!results[i].finished()) {
          StreamEvent event = next_event_uninterrupted(*streams[i]);
          results[i].add(event);
        }
      throw;
    }
    return results;
  }

  Stream submit(const Request& request) {
    const std::shared_ptr<EngineHost> host = this->host();
    return Stream(host->engine().submit(engine_request(*host, request)), host);
  }

  // Logits of every position, computed on the engine's thread between two steps.
  py::array_t<float> logits(const std::vector<int32_t>& ids) {
    const std::shared_ptr<EngineHost> host = this->host();
    const TextModel& model = host->model();
    const int64_t vocab = model.model->config.vocab_size;
    const auto n = static_cast<int64_t>(ids.size());
    if (n == 0) fail("the prompt is empty: give at least one token");
    if (n > model.model->config.context_length())
      fail("the prompt has {} tokens but the context holds {}", n, model.model->config.context_length());
    for (int32_t id : ids)
      if (id < 0 || id >= vocab) fail("prompt token id {} is outside the vocabulary [0, {})", id, vocab);
    auto values = std::make_unique<std::vector<float>>(static_cast<size_t>(n * vocab));
    {
      py::gil_scoped_release release;
      host->engine().run_between_steps([&] {
        Transformer transformer(*model.model, host->backend(), n);
        transformer.forward_all(ids, *values);
      });
    }
    float* data = values->data();
    py::capsule owner(values.release(), [](void* p) { delete static_cast<std::vector<float>*>(p); });
    return py::array_t<float>({n, vocab}, data, owner);
  }

  py::dict stats() {
    const EngineSnapshot s = host()->engine().snapshot();
    py::dict d;
    d["running"] = s.running;
    d["waiting"] = s.waiting;
    d["kv_blocks_total"] = s.kv_blocks_total;
    d["kv_blocks_used"] = s.kv_blocks_used;
    d["prefix_cache_queries"] = s.prefix_cache_queries;
    d["prefix_cache_hits"] = s.prefix_cache_hits;
    d["preemptions"] = s.preemptions;
    d["prompt_tokens"] = s.prompt_tokens;
    d["generated_tokens"] = s.generated_tokens;
    d["steps"] = s.steps;
    d["draft_tokens"] = s.draft_tokens;
    d["accepted_tokens"] = s.accepted_tokens;
    return d;
  }

  // Drops this LLM's hold on the host; the engine stops once no call in flight holds it.
  void close() {
    std::shared_ptr<EngineHost> last = std::move(host_);
    py::gil_scoped_release release;
    last.reset();
  }

 private:
  static void gather(RequestStream& stream, Result& result) {
    while (!result.finished()) {
      StreamEvent event = next_event(stream);
      result.add(event);
    }
  }

  std::shared_ptr<EngineHost> host_;
  std::shared_ptr<GrammarCache> grammars_;  // with a tokenizer
};

}  // namespace

void bind_llm(py::module_& m) {
  py::class_<Stream>(m, "Stream", "A streamed completion: iterate for one Result per step.")
      .def("__iter__", [](Stream& s) -> Stream& { return s; })
      .def("__next__", &Stream::next)
      .def("cancel", &Stream::cancel);
  py::class_<PyEngine>(m, "Engine", "A model loaded with the engine that serves it.")
      .def(py::init<const std::string&, const std::string&, const std::map<std::string, std::string>&,
                    const std::string&, int64_t, uint64_t, double, int64_t, int64_t, int64_t, int64_t,
                    int64_t, bool, const std::string&, int64_t, bool, std::optional<py::function>>(),
           py::arg("model"), py::kw_only(), py::arg("device") = "auto",
           py::arg("lora") = std::map<std::string, std::string>(), py::arg("chat_template") = "",
           py::arg("context") = 0, py::arg("kv_cache_memory") = 0, py::arg("kv_cache_fraction") = 0.2,
           py::arg("block_size") = 16, py::arg("max_batch_tokens") = 512,
           py::arg("max_prefill_with_decodes") = 64, py::arg("max_running") = 64,
           py::arg("max_waiting") = 1024, py::arg("prefix_caching") = true, py::arg("speculative") = "",
           py::arg("speculative_rows") = 4, py::arg("no_mmap") = false, py::arg("log") = py::none())
      .def("generate", &PyEngine::generate, py::arg("requests"))
      .def("submit", &PyEngine::submit, py::arg("request"))
      .def("logits", &PyEngine::logits, py::arg("ids"))
      .def("stats", &PyEngine::stats)
      .def("close", &PyEngine::close)
      .def_property_readonly("tokenizer", [](PyEngine& e) { return e.host()->model().tokenizer; })
      .def_property_readonly("chat_template", [](PyEngine& e) { return e.host()->chat_template_source(); })
      .def_property_readonly("backend_name", [](PyEngine& e) { return e.host()->backend().name(); })
      .def_property_readonly("context", [](PyEngine& e) { return e.host()->engine().context(); })
      .def_property_readonly("adapter_names", [](PyEngine& e) { return e.host()->adapter_names(); });
}

}  // namespace tokenmill::python
