#include "dist/launch_env.h"

#include <charconv>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "core/error.h"

namespace tokenmill {

namespace {

using Getenv = std::function<const char*(const char*)>;

// The variable's value as an integer in [min, max], nullopt when unset; Error otherwise.
std::optional<int> read_int(const Getenv& getenv, const char* name, int min, int max) {
  const char* value = getenv(name);
  if (value == nullptr) return std::nullopt;
  const std::string_view text(value);
  int parsed = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || parsed < min || parsed > max)
    fail("the launcher's {}={} is not an integer in [{}, {}]: this process cannot tell its place in the job",
         name, text, min, max);
  return parsed;
}

// Slurm's SLURM_NTASKS_PER_NODE may read "4" or "4(x2)" (4 tasks on each of 2 nodes): the
// count before any parenthesis.
std::optional<int> slurm_tasks_per_node(const Getenv& getenv) {
  const char* value = getenv("SLURM_NTASKS_PER_NODE");
  if (value == nullptr) return std::nullopt;
  const std::string_view text(value);
  int parsed = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (ec != std::errc() || parsed < 1 || (end != text.data() + text.size() && *end != '('))
    fail("the launcher's SLURM_NTASKS_PER_NODE={} is not a task count", text);
  return parsed;
}

struct Names {
  const char *launcher, *rank, *size, *local_rank, *local_size;
};

constexpr int kMaxRanks = 1 << 20;

// The family's variables, when its rank variable is set.
std::optional<LaunchEnv> read_family(const Getenv& getenv, const Names& n) {
  const std::optional<int> size = read_int(getenv, n.size, 1, kMaxRanks);
  const std::optional<int> rank = read_int(getenv, n.rank, 0, kMaxRanks - 1);
  if (!rank) return std::nullopt;
  if (!size) fail("the launcher set {} but not {}: the world size is unknown", n.rank, n.size);
  if (*rank >= *size) fail("the launcher's {}={} is not below {}={}", n.rank, *rank, n.size, *size);
  LaunchEnv env;
  env.launcher = n.launcher;
  env.rank = *rank;
  env.world_size = *size;
  env.local_world_size =
      n.local_size == nullptr ? *size : read_int(getenv, n.local_size, 1, *size).value_or(*size);
  env.local_rank =
      read_int(getenv, n.local_rank, 0, env.local_world_size - 1).value_or(*rank % env.local_world_size);
  return env;
}

}  // namespace

LaunchEnv read_launch_env(const std::function<const char*(const char*)>& getenv_fn) {
  const Getenv getenv = getenv_fn ? getenv_fn : Getenv([](const char* name) { return std::getenv(name); });
  if (auto env = read_family(getenv, {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                      "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"}))
    return *env;
  if (getenv("SLURM_PROCID") != nullptr) {
    LaunchEnv env = *read_family(getenv, {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr});
    if (const std::optional<int> per_node = slurm_tasks_per_node(getenv)) {
      env.local_world_size = std::min(*per_node, env.world_size);
      if (env.local_rank >= env.local_world_size)
        fail("the launcher's SLURM_LOCALID={} is not below SLURM_NTASKS_PER_NODE={}", env.local_rank,
             env.local_world_size);
    }
    return env;
  }
  if (getenv("PMIX_RANK") != nullptr)
    fail(
        "PMIX_RANK is set but neither OMPI_COMM_WORLD_SIZE nor SLURM_NTASKS: start the job with mpirun or "
        "srun, which export the world size");
  if (auto env = read_family(getenv,
                             {"MPICH (Hydra)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"}))
    return *env;
  return {};
}

}  // namespace tokenmill
