#include "serve/generation.h"

#include <algorithm>
#include <chrono>
#include <ctime>

namespace tokenmill {

namespace {
using Clock = std::chrono::steady_clock;
constexpr std::string_view kKeepAlive = ": keep-alive\n\n";
}  // namespace

Generation::Generation(Engine& engine, const ServedModel& model, ParsedRequest request, Endpoint endpoint)
    : request_(std::move(request)),
      endpoint_(endpoint),
      context_{new_response_id(endpoint == Endpoint::Chat ? "chatcmpl" : "cmpl"),
               static_cast<int64_t>(std::time(nullptr)),
               request_.model,
               model.tokenizer,
               request_.options.logprobs,
               request_.options.include_usage} {
  try {
    for (EngineRequest& r : request_.requests) {
      std::shared_ptr<RequestStream> submitted = engine.submit(std::move(r));
      Choice& choice = choices_.emplace_back();
      choice.stream = std::move(submitted);
      choice.tool_stream = ToolCallStream(request_.options.tool_format);
    }
  } catch (...) {
    cancel();
    throw;
  }
}

Generation::~Generation() { cancel(); }

void Generation::cancel() {
  for (Choice& c : choices_)
    if (!c.finished) c.stream->cancel();
}

// Usage: each prompt once (choices p * n .. p * n + n - 1 share prompt p).
void Generation::account(const StreamEvent& event, int64_t index) {
  if (!event.finish) return;
  usage_.completion_tokens += event.completion_tokens;
  if (index % request_.n == 0) {
    usage_.prompt_tokens += event.prompt_tokens;
    usage_.cached_prompt_tokens += event.cached_prompt_tokens;
  }
}

bool Generation::pump(const EventHandler& handle, const Writer& write, std::string_view keep_alive) {
  auto last_write = Clock::now();
  const Writer timed_write = [&](std::string_view piece) {
    last_write = Clock::now();
    return write(piece);
  };
  size_t open = choices_.size();
  // One choice: wait on it; several: visit them in turn with short waits.
  const auto wait = choices_.size() == 1 ? std::chrono::milliseconds(1000) : std::chrono::milliseconds(5);
  while (open > 0) {
    for (size_t i = 0; i < choices_.size(); ++i) {
      Choice& c = choices_[i];
      StreamEvent event;
      if (c.finished || !c.stream->next(event, Clock::now() + wait)) continue;
      account(event, static_cast<int64_t>(i));
      if (event.finish) {
        c.finished = true;
        --open;
      }
      if (!handle(i, event, timed_write)) return false;
    }
    if (open > 0 && Clock::now() - last_write >= std::chrono::seconds(1) && !timed_write(keep_alive))
      return false;
  }
  return true;
}

bool Generation::respond(const Writer& write) {
  std::vector<ChoiceOutput> outputs(choices_.size());
  for (size_t i = 0; i < outputs.size(); ++i) outputs[i].index = static_cast<int64_t>(i);
  const bool complete = pump(
      [&](size_t i, StreamEvent& event, const Writer&) {
        ChoiceOutput& out = outputs[i];
        out.text += event.text;
        out.logprobs.insert(out.logprobs.end(), event.logprobs.begin(), event.logprobs.end());
        out.finish = event.finish;
        return true;
      },
      write, " ");
  if (!complete) return false;
  if (request_.options.tool_calls) {
    for (ChoiceOutput& out : outputs) {
      ToolCallSplit split = split_tool_calls(out.text, request_.options.tool_format);
      out.text = std::move(split.content);
      out.tool_calls = std::move(split.calls);
    }
  }
  const nlohmann::json body = endpoint_ == Endpoint::Chat ? chat_response(context_, outputs, usage_)
                                                          : completion_response(context_, outputs, usage_);
  return write(dump_json(body));
}

nlohmann::json Generation::chunk(const ChoiceOutput& output) const {
  return endpoint_ == Endpoint::Chat ? chat_chunk(context_, output) : completion_chunk(context_, output);
}

void Generation::cut_tool_calls(Choice& choice, ChoiceOutput& out) {
  ToolCallSplit split = choice.tool_stream.push(out.text);
  if (out.finish) split.content += choice.tool_stream.finish().content;
  const auto blank = [](const std::string& s) {
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; });
  };
  // The line breaks around and between calls are not content.
  if (choice.tool_calls + static_cast<int64_t>(split.calls.size()) > 0 && blank(split.content))
    split.content.clear();
  out.text = std::move(split.content);
  out.first_tool_call = choice.tool_calls;
  choice.tool_calls += static_cast<int64_t>(split.calls.size());
  out.tool_calls = std::move(split.calls);
  out.called_tools = choice.tool_calls > 0;
}

bool Generation::stream(const Writer& write) {
  const auto send = [&](const nlohmann::json& value) { return write(sse_data(value)); };
  if (endpoint_ == Endpoint::Chat)
    for (size_t i = 0; i < choices_.size(); ++i)
      if (!send(chat_role_chunk(context_, static_cast<int64_t>(i)))) return false;
  const bool complete = pump(
      [&](size_t i, StreamEvent& event, const Writer& timed_write) {
        Choice& c = choices_[i];
        ChoiceOutput out;
        out.index = static_cast<int64_t>(i);
        out.text = std::move(event.text);
        out.logprobs = std::move(event.logprobs);
        out.finish = event.finish;
        out.text_offset = c.text_offset;
        c.text_offset += utf8_length(out.text);
        if (request_.options.tool_calls) cut_tool_calls(c, out);
        return timed_write(sse_data(chunk(out)));
      },
      write, kKeepAlive);
  if (!complete) return false;
  if (request_.options.include_usage &&
      !send(endpoint_ == Endpoint::Chat ? chat_usage_chunk(context_, usage_)
                                        : completion_usage_chunk(context_, usage_)))
    return false;
  return write(kSseDone);
}

}  // namespace tokenmill
