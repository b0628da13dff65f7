// Minimum bytes read by a forward pass, worked out by hand for the f32 fixture models.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "measure/decode_sweep.h"
#include "measure/memory_budget.h"
#include "measure/traffic.h"
#include "support/expect_error.h"

namespace tokenmill {
namespace {

const std::string kFixtures = TOKENMILL_FIXTURES_DIR;

TEST(Traffic, UntiedLlamaFixture) {
  // hidden 64, 4 heads / 2 kv heads of 16, MLP 128, 2 layers, vocab 256, f32, untied.
  const auto model = Model::load(kFixtures + "/hf/llama");
  const WeightTraffic t = weight_traffic(*model, DType::F32);
  // Per layer: q 64x64 4,096 + k, v 32x64 2 x 2,048 + o 4,096 + 3 x 64x128 24,576 + 2 norms x 64
  // = 36,992 floats = 147,968 bytes; 2 layers.
  EXPECT_EQ(t.layer_bytes, 2u * 147'968);
  // Final norm 64 + lm_head 256 x 64 = 16,448 floats.
  EXPECT_EQ(t.logits_bytes, 16'448u * 4);
  EXPECT_EQ(t.embedding_row_bytes, 64u * 4);
  // K and V x 2 layers x 2 kv heads x 16 x 4 bytes; an f16 cache halves it.
  EXPECT_EQ(t.kv_bytes_per_position, 512u);
  EXPECT_EQ(weight_traffic(*model, DType::F16).kv_bytes_per_position, 256u);

  // 10 tokens from 0 in chunks of 4: chunks end at 4, 8, 10 -> layers 3 x 295,936 + cache
  // 512 x (4 + 8 + 10) + logits once 65,792 + 10 embedding rows x 256 = 967,424.
  EXPECT_DOUBLE_EQ(forward_bytes(t, 0, 10, 4), 967'424.0);
  // A decode step at position 20: every weight once and 21 cached positions.
  EXPECT_DOUBLE_EQ(forward_bytes(t, 20, 1, 4), 295'936.0 + 512 * 21 + 65'792 + 256);
  testing::expect_error([&] { forward_bytes(t, 0, 0, 4); }, {"tokens >= 1"});
}

TEST(Traffic, TiedGpt2FixtureCountsTheEmbeddingOnceAsTheLogitsMatrix) {
  // hidden 64, 4 heads, MLP 256, 2 layers, vocab 256, 128 positions, f32, tied.
  const auto model = Model::load(kFixtures + "/hf/gpt2");
  const WeightTraffic t = weight_traffic(*model, DType::F32);
  // Per layer: ln_1 128 + q, k, v 3 x 4,096 + 192 bias + o 4,096 + 64 + ln_2 128
  // + up 16,384 + 256 + down 16,384 + 64 = 49,984 floats = 199,936 bytes.
  EXPECT_EQ(t.layer_bytes, 2u * 199'936);
  // ln_f weight and bias 128 + the tied wte 256 x 64 once.
  EXPECT_EQ(t.logits_bytes, (128u + 16'384) * 4);
  // A token row and a position row.
  EXPECT_EQ(t.embedding_row_bytes, 128u * 4);
}

TEST(Traffic, MixtralFixtureCountsTheExpertsApart) {
  // hidden 64, 4 heads / 2 kv heads of 16, 2 layers, 4 experts of MLP 128, 2 per token, f32.
  const auto model = Model::load(kFixtures + "/hf/mixtral");
  const WeightTraffic t = weight_traffic(*model, DType::F32);
  // Per layer: attention 12,288 + 2 norms x 64 + router 4 x 64 = 12,672 floats; per expert
  // 3 x 64 x 128 = 24,576 floats, over 2 layers.
  EXPECT_EQ(t.layer_bytes, 2u * 12'672 * 4);
  EXPECT_EQ(t.expert_bytes, 2u * 24'576 * 4);
  EXPECT_EQ(t.experts, 4);
  EXPECT_EQ(t.experts_per_token, 2);
  // A decode step reads 2 of the 4 experts: half of their bytes.
  EXPECT_DOUBLE_EQ(step_layer_bytes(t, 1), 2.0 * 12'672 * 4 + 2.0 * 2 * 24'576 * 4);
}

// Counted from the routing: a layer's distinct experts, whatever how many tokens chose them.
TEST(Traffic, RoutedExpertsAreCountedOncePerLayer) {
  const auto model = Model::load(kFixtures + "/hf/mixtral");
  const WeightTraffic t = weight_traffic(*model, DType::F32);
  ExpertRouting layer0, layer1;
  // Three tokens, 4 experts, 2 each: layer 0 uses experts {0, 1} only, layer 1 {0, 1, 2, 3}.
  route_to_experts(std::vector<float>{3, 2, 0, 0, 2, 3, 0, 0, 3, 2, 0, 0}, 3, 4, 2, true, layer0);
  route_to_experts(std::vector<float>{3, 2, 0, 0, 0, 0, 3, 2, 2, 0, 0, 3}, 3, 4, 2, true, layer1);
  ExpertReads reads;
  reads.count(layer0);
  reads.count(layer1);
  EXPECT_EQ(reads.layer_experts, 2 + 4);
  // expert_bytes is one expert over both layers: 6 layer-experts are 3 of those.
  EXPECT_DOUBLE_EQ(routed_expert_bytes(t, reads, 2), 3.0 * static_cast<double>(t.expert_bytes));
  EXPECT_EQ(traffic_without_experts(t).expert_bytes, 0u);
  EXPECT_EQ(traffic_without_experts(t).layer_bytes, t.layer_bytes);
}

// The decode sweep counts the experts its steps' routing read: one sequence reads exactly k
// per layer (the bound); 3 sequences of the same tokens route alike, so they read the same.
TEST(Traffic, TheDecodeSweepCountsTheExpertsItsRoutingRead) {
  const auto model = Model::load(kFixtures + "/hf/mixtral");
  const auto backend = make_cpu_backend();
  const WeightTraffic t = weight_traffic(*model, model->default_kv_dtype());
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9};
  const int64_t steps = 4, batches[] = {1, 3};
  MemoryBudget budget(uint64_t{1} << 30);
  const std::vector<PhaseMeasurement> phases = decode_sweep(*model, *backend, prompt, steps, batches, budget);
  ASSERT_EQ(phases.size(), 2u);
  double one = 0, three_bound = 0, three_without_experts = 0;
  for (int64_t p = 5; p < 5 + steps; ++p) {
    one += batched_decode_bytes(t, p, 1);
    three_bound += batched_decode_bytes(t, p, 3);
    three_without_experts += batched_decode_bytes(traffic_without_experts(t), p, 3);
  }
  EXPECT_DOUBLE_EQ(phases[0].bytes, one);
  // The same experts as one sequence: 2 of 4 per layer, not the bound's 4 of 4.
  EXPECT_DOUBLE_EQ(phases[1].bytes, three_without_experts + static_cast<double>(steps) * 2 * t.expert_bytes);
  EXPECT_LT(phases[1].bytes, three_bound);
}

}  // namespace
}  // namespace tokenmill
