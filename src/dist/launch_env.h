// Where this process stands in a job started by a cluster launcher: its rank, the world size
// and its rank on its node (the GPU it takes), read from the variables the launchers set.
//
//   Open MPI's mpirun   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//   Slurm's srun        SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE
//   PMIx launchers      set PMIX_RANK beside Open MPI's or Slurm's variables, which give the
//                       world size (PMIx does not export it): PMIX_RANK alone is an Error
//   MPICH's Hydra       PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
//
// The first family found wins, in that order; none: a world of one (a plain command, no
// launcher). A variable that is present but not a number in range is an Error naming it:
// a job that cannot tell its rank must not guess.
#pragma once

#include <functional>
#include <string>

namespace tokenmill {

struct LaunchEnv {
  int rank = 0, world_size = 1;
  int local_rank = 0, local_world_size = 1;
  std::string launcher;  // "Open MPI", "Slurm", "PMIx", "MPICH (Hydra)", or empty: no launcher

  bool distributed() const { return world_size > 1; }
};

// `getenv` returns a variable's value or null (std::getenv by default).
LaunchEnv read_launch_env(const std::function<const char*(const char*)>& getenv = nullptr);

}  // namespace tokenmill
