#include "cuda_emu/streams.h"

#include <cstdio>
#include <memory>

namespace cuda_emu {

Streams::Streams() { legacy_.legacy = true; }

CUstream_st* Streams::resolve(cudaStream_t handle) {
  if (handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread) return &legacy_;
  return live_.contains(handle) ? handle : nullptr;
}

CUstream_st* Streams::create(unsigned flags) {
  created_.push_back(std::make_unique<CUstream_st>());
  created_.back()->flags = flags;
  live_.insert(created_.back().get());
  return created_.back().get();
}

void Streams::destroy(CUstream_st* stream) {
  run_until(stream);
  stream->destroyed = true;
  live_.erase(stream);
}

void Streams::enqueue(CUstream_st* stream, std::string what, std::function<std::string()> run,
                      std::vector<std::pair<CUstream_st*, uint64_t>> after) {
  if (stream->capture != nullptr) {
    stream->capture->operations.push_back(CUstream_st::Operation{std::move(what), {}, std::move(run)});
    return;
  }
  const auto blocking = [](const CUstream_st& s) { return (s.flags & cudaStreamNonBlocking) == 0; };
  if (stream->legacy) {
    for (const auto& s : created_)
      if (!s->destroyed && blocking(*s)) after.emplace_back(s.get(), s->queued);
  } else if (blocking(*stream)) {
    after.emplace_back(&legacy_, legacy_.queued);
  }
  stream->pending.push_back(CUstream_st::Operation{std::move(what), std::move(after), std::move(run)});
  ++stream->queued;
}

void Streams::run_until(CUstream_st* stream, uint64_t position) {
  while (stream->done < position && !stream->pending.empty()) {
    CUstream_st::Operation op = std::move(stream->pending.front());
    stream->pending.pop_front();
    for (const auto& [other, count] : op.after) run_until(other, count);
    if (fault_.empty()) {
      std::string fault = op.run();
      if (!fault.empty()) {
        fault_ = op.what + ": " + fault;
        std::fprintf(stderr, "cuda-emu: %s\n", fault_.c_str());
      }
    }
    ++stream->done;
  }
}

bool Streams::capturing() const {
  for (const CUstream_st* s : live_)
    if (s->capture != nullptr) return true;
  return false;
}

void Streams::invalidate_captures() {
  for (const CUstream_st* s : live_)
    if (s->capture != nullptr) s->capture->invalidated = true;
}

void Streams::run_all() {
  run_until(&legacy_);
  for (const auto& s : created_) run_until(s.get());
}

}  // namespace cuda_emu
