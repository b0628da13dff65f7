// Generation: one /v1/completions or /v1/chat/completions request on the engine, from the
// parsed request to the response JSON or the server-sent events.
//
// Every choice is submitted up front (all or none: a refusal of a later choice cancels the
// earlier ones), so the n choices of a request run in the same batch. Usage counts each
// prompt once (its choices share it) and every choice's completion tokens.
#pragma once

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/engine.h"
#include "serve/openai_request.h"
#include "serve/openai_response.h"
#include "serve/tool_calls.h"

namespace tokenmill {

enum class Endpoint { Completions, Chat };

class Generation {
 public:
  // Submits every choice. Throws what Engine::submit throws (Error, EngineBusy, EngineStopped).
  Generation(Engine& engine, const ServedModel& model, ParsedRequest request, Endpoint endpoint);
  ~Generation();  // cancels what is still running
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Both ways of answering write through `write`, which returns false once the client is
  // gone: the choices are then cancelled and the call returns false. While no event
  // arrives, something harmless is written every second, so a vanished client is noticed
  // (and its KV blocks freed) even before its first token.
  using Writer = std::function<bool(std::string_view)>;

  // The whole response, once every choice has finished; a space (JSON allows leading
  // whitespace) keeps the connection checked while it waits.
  bool respond(const Writer& write);

  // The stream: chunks as events arrive, the usage chunk when asked for, then
  // "data: [DONE]"; an SSE comment keeps the connection checked.
  bool stream(const Writer& write);

  void cancel();

 private:
  struct Choice {
    std::shared_ptr<RequestStream> stream;
    int64_t text_offset = 0;
    bool finished = false;
    ToolCallStream tool_stream;  // chat with tools, streamed
    int64_t tool_calls = 0;      // calls sent so far
  };
  // Chat with tools: cuts the calls out of this chunk of a streamed choice's text.
  void cut_tool_calls(Choice& choice, ChoiceOutput& out);
  // Handles one event of a choice, writing through the Writer it is given; false: stop.
  using EventHandler = std::function<bool(size_t choice, StreamEvent& event, const Writer& write)>;
  // Delivers every choice's events in order to `handle` until all have finished; writes
  // `keep_alive` whenever a second passed without a write. False when a write or `handle`
  // failed.
  bool pump(const EventHandler& handle, const Writer& write, std::string_view keep_alive);
  nlohmann::json chunk(const ChoiceOutput& output) const;
  void account(const StreamEvent& event, int64_t index);

  ParsedRequest request_;
  Endpoint endpoint_;
  ResponseContext context_;
  std::vector<Choice> choices_;
  Usage usage_;
};

}  // namespace tokenmill
