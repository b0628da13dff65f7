// The serving engine on a backend whose memory the host cannot touch (tests/model's
// FencedBackend: the CPU backend behind PROT_NONE pages, opened only inside ops and copies),
// as `tokenmill serve --device cuda` runs it: the weights placed in the backend's memory, the
// paged KV pool and the step buffers allocated from it, the logits copied back for sampling
// on the host. Any host access to backend memory is a SIGSEGV, so passing proves there is
// none; the answers must be those of the plain CPU backend token for token (the fenced
// backend runs the same kernels), greedy and sampled, with several requests batched, and again
// with their prompts' blocks served from the prefix cache. Steps stay within the CPU matmul's
// decode regime (kGemvMaxTokens rows), where every row's result is independent of the batch,
// so the answers do not depend on how the engine happens to batch the requests.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda_availability.h"
#include "model/fenced_backend.h"
#include "model/weight_placement.h"
#include "runtime/text_model.h"
#include "serve/engine.h"
#include "support/fixture_test_name.h"
#include "support/gpu_devices.h"
#include "support/random_tokens.h"

namespace tokenmill {
namespace {

using namespace std::chrono_literals;
using testing::FencedBackend;

const std::filesystem::path kFixtures(TOKENMILL_FIXTURES_DIR);

struct Answer {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason finish = FinishReason::Error;
};

Answer collect(RequestStream& stream) {
  Answer a;
  StreamEvent e;
  while (stream.next(e, std::chrono::steady_clock::now() + 60s)) {
    a.tokens.insert(a.tokens.end(), e.tokens.begin(), e.tokens.end());
    a.text += e.text;
    if (e.finish) {
      a.finish = *e.finish;
      return a;
    }
  }
  ADD_FAILURE() << "no event for 60 s";
  return a;
}

// Three greedy requests (two share a 20-token prefix) and one sampled with a seed.
std::vector<EngineRequest> requests(int64_t vocab) {
  const std::vector<int32_t> prefix = testing::random_token_ids(20, vocab, 7);
  std::vector<EngineRequest> out(4);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].prompt =
        testing::random_token_ids(5 + static_cast<int64_t>(i) * 3, vocab, 11 + static_cast<uint32_t>(i));
    out[i].max_tokens = 12;
    out[i].ignore_eos = true;
  }
  out[1].prompt.insert(out[1].prompt.begin(), prefix.begin(), prefix.end());
  out[2].prompt.insert(out[2].prompt.begin(), prefix.begin(), prefix.end());
  out[3].sampling.temperature = 0.9f;
  out[3].sampling.top_k = 20;
  out[3].sampling.seed = 1234;
  return out;
}

// Submits `rs` at once (one batch) and waits for every answer.
std::vector<Answer> serve(Engine& engine, const std::vector<EngineRequest>& rs) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const EngineRequest& r : rs) streams.push_back(engine.submit(r));
  std::vector<Answer> answers;
  for (const auto& s : streams) answers.push_back(collect(*s));
  return answers;
}

class EngineOnDevice : public ::testing::TestWithParam<const char*> {
 protected:
  EngineOptions options() const {
    EngineOptions o;
    o.kv_cache_bytes = 4u << 20;
    o.max_batch_tokens = 4;  // the prompts are prefilled in chunks
    o.max_running = 4;
    return o;
  }

  // Declared first, destroyed last: the placed weights live in its memory.
  FencedBackend fenced_{make_cpu_backend()};
  std::unique_ptr<Backend> cpu_ = make_cpu_backend();
};

TEST_P(EngineOnDevice, ServesFromDeviceMemoryWithTheHostAnswers) {
  const TextModel on_host = TextModel::load(kFixtures / GetParam());
  const TextModel on_device = TextModel::load(kFixtures / GetParam());
  place_weights(on_device.model->weights, fenced_.memory());
  const int weight_allocations = fenced_.fenced_memory().allocations();
  const std::vector<EngineRequest> rs = requests(on_host.model->config.vocab_size);

  Engine host_engine(on_host, *cpu_, options());
  const std::vector<Answer> want = serve(host_engine, rs);
  Engine device_engine(on_device, fenced_, options());
  // The KV pool and the step buffers come from the backend's memory.
  EXPECT_GE(fenced_.fenced_memory().allocations(), weight_allocations + 2);
  const int ops_before = fenced_.ops();
  for (int round = 0; round < 2; ++round) {
    const std::vector<Answer> got = serve(device_engine, rs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].finish, FinishReason::Length) << round << " " << i;
      EXPECT_EQ(got[i].tokens.size(), 12u) << round << " " << i;
      EXPECT_EQ(got[i].tokens, want[i].tokens) << round << " " << i;
      EXPECT_EQ(got[i].text, want[i].text) << round << " " << i;
    }
  }
  EXPECT_GT(fenced_.ops(), ops_before);
  EXPECT_GT(fenced_.fenced_memory().bytes_out(), 0u);  // the logits came back by copy
  EXPECT_GT(device_engine.snapshot().prefix_cache_hits, 0);
}

#ifdef TOKENMILL_HAS_CUDA
// The same engine on GPU 0 (or the CUDA emulation): the greedy answers are the host's token
// for token (the fixtures' top logits are far apart next to the CUDA kernels' rounding), the
// sampled one runs to its length; twice, the second time from the prefix cache.
TEST_P(EngineOnDevice, ServesOnCudaWithTheHostsGreedyAnswers) {
  if (!testing::cuda_usable()) GTEST_SKIP() << cuda_unavailable_reason();
  const TextModel on_host = TextModel::load(kFixtures / GetParam());
  const TextModel on_gpu = TextModel::load(kFixtures / GetParam());
  const std::unique_ptr<Backend> cuda = make_cuda_backend(0);
  place_weights(on_gpu.model->weights, cuda->memory());
  const std::vector<EngineRequest> rs = requests(on_host.model->config.vocab_size);
  Engine host_engine(on_host, *cpu_, options());
  const std::vector<Answer> want = serve(host_engine, rs);
  Engine gpu_engine(on_gpu, *cuda, options());
  for (int round = 0; round < 2; ++round) {
    const std::vector<Answer> got = serve(gpu_engine, rs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].finish, FinishReason::Length) << round << " " << i;
      EXPECT_EQ(got[i].tokens.size(), 12u) << round << " " << i;
      if (rs[i].sampling.temperature == 0.0f) {
        EXPECT_EQ(got[i].tokens, want[i].tokens) << round << " " << i;
      }
    }
  }
  EXPECT_GT(gpu_engine.snapshot().prefix_cache_hits, 0);
}
#endif

// Speculative decoding with a draft model (the fixture itself, so guesses are confirmed) on a
// device: the draft's weights, KV pool and steps live there too; the answers stay those of
// the host without speculation (greedy only on CUDA, as above).
TEST_P(EngineOnDevice, SpeculatesWithADraftModelInDeviceMemory) {
  const TextModel on_host = TextModel::load(kFixtures / GetParam());
  const std::vector<EngineRequest> rs = requests(on_host.model->config.vocab_size);
  Engine host_engine(on_host, *cpu_, options());
  const std::vector<Answer> want = serve(host_engine, rs);
  std::vector<std::pair<std::string, Backend*>> devices = {{"fenced", &fenced_}};
#ifdef TOKENMILL_HAS_CUDA
  const std::unique_ptr<Backend> cuda = testing::cuda_usable() ? make_cuda_backend(0) : nullptr;
  if (cuda) devices.emplace_back("cuda", cuda.get());
#endif
  for (const auto& [name, device] : devices) {
    const TextModel target = TextModel::load(kFixtures / GetParam());
    const TextModel draft = TextModel::load(kFixtures / GetParam());
    place_weights(target.model->weights, device->memory());
    place_weights(draft.model->weights, device->memory());
    EngineOptions o = options();
    o.speculative.max_tokens = 3;
    o.draft_model = &draft;
    Engine engine(target, *device, o);
    const std::vector<Answer> got = serve(engine, rs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].tokens.size(), 12u) << name << " " << i;
      if (name == "fenced" || rs[i].sampling.temperature == 0.0f) {
        EXPECT_EQ(got[i].tokens, want[i].tokens) << name << " " << i;
      }
    }
    EXPECT_GT(engine.snapshot().accepted_tokens, 0) << name;
  }
}

TEST_P(EngineOnDevice, RefusesWeightsLeftOnTheHost) {
  const TextModel on_host = TextModel::load(kFixtures / GetParam());
  EXPECT_THROW(Engine(on_host, fenced_, options()), Error);
}

INSTANTIATE_TEST_SUITE_P(Models, EngineOnDevice, ::testing::Values("hf/smollm_chat", "gguf/llama_q4_1.gguf"),
                         testing::fixture_test_name);

}  // namespace
}  // namespace tokenmill
