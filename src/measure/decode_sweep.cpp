#include "measure/decode_sweep.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "measure/flops.h"
#include "measure/traffic.h"
#include "model/paged_transformer.h"
#include "model/transformer.h"

namespace tokenmill {

namespace {

using Clock = BenchClock;

int64_t blocks_for(int64_t tokens) { return (tokens + kSweepBlockSize - 1) / kSweepBlockSize; }

// Greedy: the highest logit of each row.
void argmax_rows(const Tensor& logits, std::span<int32_t> out) {
  for (size_t row = 0; row < out.size(); ++row) {
    const float* v = logits.as<const float>() + static_cast<int64_t>(row) * logits.cols();
    out[row] = static_cast<int32_t>(std::max_element(v, v + logits.cols()) - v);
  }
}

}  // namespace

std::vector<PhaseMeasurement> decode_sweep(const Model& model, Backend& backend,
                                           std::span<const int32_t> prompt, int64_t decode_tokens,
                                           std::span<const int64_t> batch_sizes, MemoryBudget& budget,
                                           std::vector<int32_t>* greedy_ids) {
  const ModelConfig& config = model.config;
  const auto prompt_tokens = static_cast<int64_t>(prompt.size());
  if (prompt_tokens < 1 || decode_tokens < 1 || batch_sizes.empty())
    fail("decode sweep: needs a prompt, decode steps and batch sizes (got {}, {}, {})", prompt_tokens,
         decode_tokens, batch_sizes.size());
  const int64_t max_batch = *std::max_element(batch_sizes.begin(), batch_sizes.end());
  const int64_t shared = (prompt_tokens - 1) / kSweepBlockSize * kSweepBlockSize;  // prefilled once
  const int64_t tail = prompt_tokens - shared;                                     // 1..block, per sequence
  const int64_t shared_blocks = shared / kSweepBlockSize, own_blocks = blocks_for(tail + decode_tokens);
  const int64_t num_blocks = shared_blocks + max_batch * own_blocks;
  const DType kv_dtype = model.default_kv_dtype();
  const uint64_t pool_bytes =
      PagedTransformer::block_bytes(config, kSweepBlockSize, kv_dtype) * static_cast<uint64_t>(num_blocks);
  budget.reserve(pool_bytes,
                 fmt::format("the KV pool of the decode sweep ({} sequences of {} positions)", max_batch,
                             prompt_tokens + decode_tokens),
                 "use smaller --batch sizes or shorter --prompt-tokens/--decode-tokens");
  const int64_t chunk = Transformer::kDefaultChunkTokens;
  PagedTransformer runner(model, backend, num_blocks, kSweepBlockSize, std::max(chunk, max_batch * tail),
                          max_batch, kv_dtype);

  std::vector<int32_t> shared_table(static_cast<size_t>(shared_blocks));
  std::iota(shared_table.begin(), shared_table.end(), 0);
  for (int64_t begin = 0; begin < shared; begin += chunk) {
    const PagedTransformer::Slice slice{
        prompt.subspan(static_cast<size_t>(begin), static_cast<size_t>(std::min(chunk, shared - begin))),
        begin, shared_table, 0};
    runner.forward({&slice, 1});
  }

  const WeightTraffic traffic = weight_traffic(model, kv_dtype);
  ExpertReads reads;  // a mixture of experts: what the timed steps' routing read
  bool timing = false;
  if (config.mixture_of_experts())
    runner.observe_expert_routing([&](const ExpertRouting& r) {
      if (timing) reads.count(r);
    });
  std::vector<PhaseMeasurement> phases;
  for (const int64_t batch : batch_sizes) {
    std::vector<std::vector<int32_t>> tables(static_cast<size_t>(batch), shared_table);
    for (int64_t s = 0; s < batch; ++s)
      for (int64_t b = 0; b < own_blocks; ++b)
        tables[static_cast<size_t>(s)].push_back(static_cast<int32_t>(shared_blocks + s * own_blocks + b));
    std::vector<PagedTransformer::Slice> slices;
    for (const auto& table : tables)
      slices.push_back({prompt.subspan(static_cast<size_t>(shared)), shared, table, 1});
    std::vector<int32_t> next(static_cast<size_t>(batch));
    argmax_rows(runner.forward(slices), next);

    // The ids of every step, kept only when asked for (outside the timed loop's work).
    std::vector<int32_t> generated;
    if (greedy_ids != nullptr) generated.reserve(static_cast<size_t>(batch * decode_tokens));
    reads = {};
    timing = true;
    const auto start = Clock::now();
    for (int64_t step = 0; step < decode_tokens; ++step) {
      if (greedy_ids != nullptr) generated.insert(generated.end(), next.begin(), next.end());
      for (size_t s = 0; s < slices.size(); ++s)
        slices[s] = {{&next[s], 1}, prompt_tokens + step, tables[s], 1};
      argmax_rows(runner.forward(slices), next);
    }
    const auto end = Clock::now();
    timing = false;
    if (greedy_ids != nullptr) greedy_ids->insert(greedy_ids->end(), generated.begin(), generated.end());

    // Experts: those the routing read, not the most a step could reach.
    const WeightTraffic counted = config.mixture_of_experts() ? traffic_without_experts(traffic) : traffic;
    double bytes = routed_expert_bytes(traffic, reads, config.num_hidden_layers);
    for (int64_t p = prompt_tokens; p < prompt_tokens + decode_tokens; ++p)
      bytes += batched_decode_bytes(counted, p, batch);
    phases.push_back(
        {"decode", batch, batch * decode_tokens, std::chrono::duration<double>(end - start).count(),
         static_cast<double>(batch) * forward_flops(config, prompt_tokens, decode_tokens, decode_tokens),
         bytes, start, end});
  }
  budget.release(pool_bytes);
  return phases;
}

}  // namespace tokenmill
