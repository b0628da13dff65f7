// The Communicator of a job of several processes, over MPI (Open MPI from Debian; any MPI-3
// library): MPI_Init_thread (funneled: only the calling thread talks to MPI) at open,
// MPI_Finalize at destruction, each collective one non-blocking MPI call (Iallreduce,
// Iallgather, Ireduce_scatter_block, Ibcast, Ibarrier) on MPI_COMM_WORLD, waited for with
// MPI_Test against the timeout (dist/communicator.h "Faults": MPI_Abort ends the job).
// While waiting, the rank polls for a few microseconds and then sleeps between polls, so a
// rank sharing its core with others (mpirun --oversubscribe) does not steal their time.
// Buffers of more than 2^30 elements are reduced or broadcast in pieces (MPI counts are int).
#pragma once

#include <memory>

#include "dist/communicator.h"
#include "dist/launch_env.h"

namespace tokenmill {

// Throws Error if MPI is already initialised or its rank and size disagree with `env`'s.
std::unique_ptr<Communicator> open_mpi_communicator(const LaunchEnv& env, const CommunicatorOptions& options);

}  // namespace tokenmill
