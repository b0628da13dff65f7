#include "dist/communicator.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"
#include "dist/mpi_communicator.h"

namespace tokenmill {

namespace {

// One rank: a sum, gather or scatter over one rank is a copy.
class SingleProcess final : public Communicator {
 public:
  SingleProcess() : Communicator(LaunchEnv{}) {}
  std::string describe() const override { return "a single process"; }
  void all_reduce_sum(std::span<float>, std::string_view) override {}
  void all_reduce_sum(std::span<double>, std::string_view) override {}
  void all_gather(std::span<const float> mine, std::span<float> all, std::string_view) override {
    check_blocks(mine.size(), all.size(), "all-gather");
    std::copy(mine.begin(), mine.end(), all.begin());
  }
  void reduce_scatter_sum(std::span<const float> all, std::span<float> mine, std::string_view) override {
    check_blocks(mine.size(), all.size(), "reduce-scatter");
    std::copy(all.begin(), all.end(), mine.begin());
  }
  void broadcast(std::span<std::byte>, int root, std::string_view) override {
    if (root != 0) fail("broadcast from rank {} in a world of one", root);
  }
  void barrier(std::string_view) override {}
  [[noreturn]] void abort(int status) override { std::exit(status); }
};

}  // namespace

void Communicator::check_blocks(size_t mine, size_t all, std::string_view collective) const {
  if (all != mine * static_cast<size_t>(world_size()))
    fail("{}: {} floats for {} ranks of {} each", collective, all, world_size(), mine);
}

std::unique_ptr<Communicator> single_process_communicator() { return std::make_unique<SingleProcess>(); }

std::unique_ptr<Communicator> open_communicator(const CommunicatorOptions& options) {
  const LaunchEnv env = read_launch_env();
  if (!env.distributed()) return single_process_communicator();
  return open_mpi_communicator(env, options);
}

}  // namespace tokenmill
