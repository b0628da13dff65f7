// The launchers' environment variables: Open MPI, Slurm, MPICH's Hydra, none; a value out of
// range or not a number is refused naming the variable.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "dist/launch_env.h"
#include "support/expect_error.h"

namespace tokenmill {
namespace {

using testing::expect_error;
using Vars = std::map<std::string, std::string>;

LaunchEnv read(const Vars& vars) {
  return read_launch_env([&vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(LaunchEnv, NoLauncherIsAWorldOfOne) {
  const LaunchEnv env = read({{"HOME", "/root"}});
  EXPECT_FALSE(env.distributed());
  EXPECT_EQ(env.rank, 0);
  EXPECT_EQ(env.world_size, 1);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.launcher, "");
}

TEST(LaunchEnv, OpenMpiGivesRankSizeAndLocalRank) {
  const LaunchEnv env = read({{"OMPI_COMM_WORLD_RANK", "5"},
                              {"OMPI_COMM_WORLD_SIZE", "8"},
                              {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                              {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                              {"PMIX_RANK", "5"},
                              {"SLURM_PROCID", "0"}});  // an mpirun inside an allocation: mpirun's
  EXPECT_TRUE(env.distributed());
  EXPECT_EQ(env.launcher, "Open MPI");
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 4);
}

TEST(LaunchEnv, SlurmSrunGivesTheTaskAndItsNodeLocalId) {
  const LaunchEnv env = read({{"SLURM_PROCID", "6"},
                              {"SLURM_NTASKS", "8"},
                              {"SLURM_LOCALID", "2"},
                              {"SLURM_NTASKS_PER_NODE", "4(x2)"}});
  EXPECT_EQ(env.launcher, "Slurm");
  EXPECT_EQ(env.rank, 6);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 2);
  EXPECT_EQ(env.local_world_size, 4);
}

TEST(LaunchEnv, SlurmWithoutALocalIdTakesTheRankOnItsNode) {
  const LaunchEnv env = read({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}});
  EXPECT_EQ(env.local_rank, 3);
  EXPECT_EQ(env.local_world_size, 4);
}

TEST(LaunchEnv, MpichHydraGivesPmiVariables) {
  const LaunchEnv env =
      read({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}});
  EXPECT_EQ(env.launcher, "MPICH (Hydra)");
  EXPECT_EQ(env.rank, 1);
  EXPECT_EQ(env.world_size, 2);
  EXPECT_EQ(env.local_rank, 1);
}

TEST(LaunchEnv, ABadValueIsRefusedNamingTheVariable) {
  expect_error(
      [] {
        read({{"OMPI_COMM_WORLD_RANK", "one"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
      },
      {"OMPI_COMM_WORLD_RANK=one", "not an integer"});
  expect_error(
      [] {
        read({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
      },
      {"OMPI_COMM_WORLD_RANK=2", "not below", "OMPI_COMM_WORLD_SIZE=2"});
  expect_error(
      [] {
        read({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "0"}});
      },
      {"OMPI_COMM_WORLD_SIZE=0"});
  expect_error(
      [] {
        read({{"OMPI_COMM_WORLD_RANK", "1"}});
      },
      {"OMPI_COMM_WORLD_SIZE", "world size is unknown"});
  expect_error(
      [] {
        read({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "-1"}});
      },
      {"SLURM_LOCALID=-1"});
  expect_error([] { read({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "99999999999"}}); }, {"SLURM_NTASKS"});
  expect_error(
      [] {
        read({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"SLURM_NTASKS_PER_NODE", "x"}});
      },
      {"SLURM_NTASKS_PER_NODE=x"});
  expect_error([] { read({{"PMIX_RANK", "0"}}); }, {"PMIX_RANK", "mpirun or srun"});
}

}  // namespace
}  // namespace tokenmill
