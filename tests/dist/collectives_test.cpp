// The communicator's collectives, and data parallelism's and ZeRO-1's uses of them, on the ranks of the job
// this program runs in: without a launcher, the world of one; under `mpirun -np N`, MPI over N processes
// (CTest runs 1, 3 and 4). Each rank contributes values that tell the ranks apart, and every rank checks the
// whole result; the exit status is a failure when any rank's test failed.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <vector>

#include "dist/communicator.h"
#include "model/model_config.h"
#include "train/data_parallel.h"
#include "train/parameters.h"
#include "train/trainer.h"
#include "train/zero.h"

namespace tokenmill {
namespace {

Communicator* g_comm = nullptr;

// Rank r's value at index i: distinct per (r, i), small integers (sums exact in float).
float value(int rank, size_t i) { return static_cast<float>(1000 * rank + static_cast<int>(i % 997)); }

float sum_over_ranks(size_t i) {
  float sum = 0.0f;
  for (int r = 0; r < g_comm->world_size(); ++r) sum += value(r, i);
  return sum;
}

TEST(Collectives, AllReduceSumsFloatsAndDoublesElementwise) {
  for (const size_t n : {size_t{1}, size_t{5}, size_t{100003}}) {
    std::vector<float> f(n);
    std::vector<double> d(n);
    for (size_t i = 0; i < n; ++i) f[i] = value(g_comm->rank(), i), d[i] = 0.5 * value(g_comm->rank(), i);
    g_comm->all_reduce_sum(std::span<float>(f), "the test's floats");
    g_comm->all_reduce_sum(std::span<double>(d), "the test's doubles");
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(f[i], sum_over_ranks(i)) << "n " << n << " index " << i;
      ASSERT_EQ(d[i], 0.5 * sum_over_ranks(i)) << "n " << n << " index " << i;
    }
  }
}

TEST(Collectives, AllGatherPlacesEachRanksBlockAtItsRank) {
  const size_t block = 7;
  std::vector<float> mine(block), all(block * static_cast<size_t>(g_comm->world_size()));
  for (size_t i = 0; i < block; ++i) mine[i] = value(g_comm->rank(), i);
  g_comm->all_gather(mine, all, "the test's blocks");
  for (int r = 0; r < g_comm->world_size(); ++r)
    for (size_t i = 0; i < block; ++i) ASSERT_EQ(all[static_cast<size_t>(r) * block + i], value(r, i));
}

TEST(Collectives, ReduceScatterLeavesEachRankItsBlockOfTheSum) {
  const size_t block = 9;
  const size_t n = block * static_cast<size_t>(g_comm->world_size());
  std::vector<float> all(n), mine(block);
  for (size_t i = 0; i < n; ++i) all[i] = value(g_comm->rank(), i);
  g_comm->reduce_scatter_sum(all, mine, "the test's sums");
  for (size_t i = 0; i < block; ++i)
    ASSERT_EQ(mine[i], sum_over_ranks(static_cast<size_t>(g_comm->rank()) * block + i));
}

TEST(Collectives, BroadcastCopiesTheRootsBytesFromAnyRoot) {
  for (const int root : {0, g_comm->world_size() - 1}) {
    std::vector<std::byte> bytes(1001, std::byte{static_cast<unsigned char>(g_comm->rank())});
    g_comm->broadcast(bytes, root, "the test's bytes");
    for (const std::byte b : bytes) ASSERT_EQ(b, std::byte{static_cast<unsigned char>(root)});
  }
  g_comm->barrier("the test's end");
}

TEST(Collectives, BlockSizesThatDoNotTileAreRefused) {
  std::vector<float> mine(3), all(3 * static_cast<size_t>(g_comm->world_size()) + 1);
  EXPECT_THROW(g_comm->all_gather(mine, all, "a bad gather"), Error);
  EXPECT_THROW(g_comm->reduce_scatter_sum(all, mine, "a bad scatter"), Error);
}

// sum_gradients over a model's gradient buffer, in buckets that do not divide it.
TEST(DataParallel, GradientsAreSummedInBucketsAndWeightsBroadcastFromRankZero) {
  ParameterSet params(parse_model_config(scratch_llama_config(64, 2, 8, 2, 1, 16, 16, 0), "a test model"));
  std::vector<float> grads(static_cast<size_t>(params.count()));
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = value(g_comm->rank(), i);
  params.upload(params.gradients(), grads);
  params.fill_values(
      [&](std::span<float> v) { std::fill(v.begin(), v.end(), static_cast<float>(g_comm->rank())); });
  sum_gradients(params, *g_comm, 4 * 1000 + 12, "the test's gradients");
  broadcast_from_root(params, params.values(), *g_comm, 4 * 333, "the test's weights");
  for (size_t i = 0; i < grads.size(); ++i) {
    ASSERT_EQ(params.gradients()[i], sum_over_ranks(i)) << i;
    ASSERT_EQ(params.values()[i], 0.0f) << i;
  }
}

TEST(DataParallel, ReplicasThatDriftApartAreCaughtOnEveryRank) {
  ParameterSet params(parse_model_config(scratch_llama_config(64, 1, 8, 2, 1, 16, 16, 0), "a test model"));
  params.fill_values([](std::span<float> v) { std::fill(v.begin(), v.end(), 0.25f); });
  EXPECT_NO_THROW(check_replicas_agree(params, *g_comm, "the test's weights"));
  if (g_comm->world_size() == 1) return;
  if (g_comm->rank() == g_comm->world_size() - 1) params.values()[17] = 0.2500001f;
  try {
    check_replicas_agree(params, *g_comm, "the test's weights");
    ADD_FAILURE() << "rank " << g_comm->rank() << ": no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the weights of 1 of the"), std::string::npos) << e.what();
  }
}

// ZeRO-1's collectives on a buffer that the ranks do not divide evenly, in pieces smaller
// than a part.
TEST(Zero, PartsOfGradientsAndWeightsAndTheWholeMomentsReachTheirRanks) {
  const ModelConfig config =
      parse_model_config(scratch_llama_config(61, 1, 8, 2, 1, 16, 16, 0), "a test model");
  ParameterSet params(config, nullptr, zero_shard(*g_comm));
  const int64_t count = params.count();
  const auto [begin, end] = ParameterBuffers::shard_range(count, zero_shard(*g_comm));
  ASSERT_EQ(params.moments_begin(), begin);
  ASSERT_EQ(params.moments_end(), end);
  std::vector<float> host(static_cast<size_t>(count));
  for (size_t i = 0; i < host.size(); ++i) host[i] = value(g_comm->rank(), i);
  params.upload(params.gradients(), host);
  reduce_scatter_gradients(params, *g_comm, 4 * 37, "the test's gradients");
  for (int64_t i = begin; i < end; ++i)
    ASSERT_EQ(params.gradients()[static_cast<size_t>(i)], sum_over_ranks(static_cast<size_t>(i))) << i;

  // Each rank writes its part of the values (its rank + the index); the gather fills the rest.
  for (int64_t i = begin; i < end; ++i)
    params.values()[static_cast<size_t>(i)] =
        static_cast<float>(g_comm->rank()) + 0.001f * static_cast<float>(i);
  all_gather_values(params, *g_comm, 4 * 37, "the test's weights");
  for (int r = 0; r < g_comm->world_size(); ++r) {
    const auto [b, e] = ParameterBuffers::shard_range(count, {r, g_comm->world_size()});
    for (int64_t i = b; i < e; ++i)
      ASSERT_EQ(params.values()[static_cast<size_t>(i)],
                static_cast<float>(r) + 0.001f * static_cast<float>(i))
          << i;
  }

  for (size_t i = 0; i < params.first_moments().size(); ++i) {
    params.first_moments()[i] = static_cast<float>(begin + static_cast<int64_t>(i));
    params.second_moments()[i] = -static_cast<float>(begin + static_cast<int64_t>(i));
  }
  for (const int which : {0, 1}) {
    std::vector<float> whole;
    const std::function<void(std::span<const float>)> write = [&](std::span<const float> piece) {
      whole.insert(whole.end(), piece.begin(), piece.end());
    };
    gather_moments(params, *g_comm, which, 4 * 29, &write);
    ASSERT_EQ(whole.size(), host.size());
    for (size_t i = 0; i < whole.size(); ++i)
      ASSERT_EQ(whole[i], (which == 0 ? 1.0f : -1.0f) * static_cast<float>(i));
  }
}

}  // namespace
}  // namespace tokenmill

int main(int argc, char** argv) {
  const std::unique_ptr<tokenmill::Communicator> comm =
      tokenmill::open_communicator({.timeout_seconds = 120.0});
  tokenmill::g_comm = comm.get();
  ::testing::InitGoogleTest(&argc, argv);
  double failed = RUN_ALL_TESTS() == 0 ? 0.0 : 1.0;
  comm->all_reduce_sum(std::span<double>(&failed, 1), "the test results");
  return failed > 0.0 ? 1 : 0;
}
