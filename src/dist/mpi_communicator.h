// The Communicator of a job of several processes, over MPI (Open MPI from Debian; any MPI-3
// library): MPI_Init_thread (funneled: only the calling thread talks to MPI) at open,
// MPI_Finalize at destruction, each collective one blocking MPI call on MPI_COMM_WORLD (the
// library's tuned algorithms: its non-blocking ones, polled, measured 2-6x slower here), timed
// by a watchdog thread: past the timeout it prints which collective and exits the process
// non-zero, and the launcher stops every other rank (dist/communicator.h "Faults").
// Buffers of more than 2^30 elements are reduced or broadcast in pieces (MPI counts are int).
#pragma once

#include <memory>

#include "dist/communicator.h"
#include "dist/launch_env.h"

namespace tokenmill {

// Throws Error if MPI is already initialised or its rank and size disagree with `env`'s.
std::unique_ptr<Communicator> open_mpi_communicator(const LaunchEnv& env, const CommunicatorOptions& options);

}  // namespace tokenmill
