// The NCCL calls the CUDA backend's collectives make (backend/cuda/nccl_collectives.cpp), on
// the emulated device, with NCCL's meanings, carried out over MPI: every rank of the job is
// one process with one emulated GPU whose memory is host memory, so a collective of NCCL is
// the same collective of MPI on MPI_COMM_WORLD. NCCL queues a collective on a stream; here
// the stream's earlier work runs first (cudaStreamSynchronize) and the collective then runs
// at once, so it is complete when the call returns (stream order holds). Buffers must be live
// device allocations of the size the call names, as on a GPU. MPI must be initialised (the
// project's MPI communicator did it), and a communicator must span all of MPI_COMM_WORLD.
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <mutex>

#include "cuda_emu/runtime.h"

struct ncclComm {
  int rank = 0, ranks = 0;
};

namespace {

ncclResult_t refuse(ncclResult_t status, const char* call, const std::string& why) {
  fmt::print(stderr, "cuda-emu: {}: {}\n", call, why);
  return status;
}

// Runs the stream's queued work, then checks that [buffer, + bytes) is device memory.
ncclResult_t prepare(const char* call, ncclComm* comm, cudaStream_t stream,
                     std::initializer_list<std::pair<const void*, size_t>> buffers) {
  if (comm == nullptr) return refuse(ncclInvalidArgument, call, "no communicator");
  if (cudaStreamSynchronize(stream) != cudaSuccess)
    return refuse(ncclUnhandledCudaError, call, "the stream failed");
  const std::lock_guard lock(cuda_emu::runtime().mutex);
  for (const auto& [address, bytes] : buffers)
    if (bytes > 0 && !cuda_emu::runtime().memory.on_device(address, bytes))
      return refuse(ncclInvalidArgument, call,
                    fmt::format("{} bytes at {} are not a live device allocation", bytes, address));
  return ncclSuccess;
}

bool mpi_type(ncclDataType_t type, MPI_Datatype& mpi, size_t& bytes) {
  switch (type) {
    case ncclFloat32: mpi = MPI_FLOAT, bytes = 4; return true;
    case ncclFloat64: mpi = MPI_DOUBLE, bytes = 8; return true;
    case ncclInt32: mpi = MPI_INT32_T, bytes = 4; return true;
    case ncclInt8: mpi = MPI_INT8_T, bytes = 1; return true;
    default: return false;
  }
}

}  // namespace

extern "C" {

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return refuse(ncclInvalidArgument, "ncclGetUniqueId", "null id");
  std::memset(id->internal, 0, sizeof id->internal);
  std::strcpy(id->internal, "tokenmill-cuda-emu-nccl");
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  int initialized = 0, world = 0, mine = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0)
    return refuse(ncclSystemError, "ncclCommInitRank", "the emulation needs MPI initialised");
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &mine);
  if (std::strcmp(id.internal, "tokenmill-cuda-emu-nccl") != 0)
    return refuse(ncclInvalidArgument, "ncclCommInitRank", "the id was not made by ncclGetUniqueId");
  if (nranks != world || rank != mine)
    return refuse(
        ncclInvalidArgument, "ncclCommInitRank",
        fmt::format("rank {} of {}, but MPI_COMM_WORLD is rank {} of {}", rank, nranks, mine, world));
  *comm = new ncclComm{rank, nranks};
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument (emulated NCCL)";
    case ncclSystemError: return "system error (emulated NCCL)";
    case ncclUnhandledCudaError: return "unhandled cuda error (emulated NCCL)";
    default: return "error (emulated NCCL)";
  }
}

ncclResult_t ncclAllReduce(const void* send, void* receive, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  MPI_Datatype mpi;
  size_t bytes = 0;
  if (!mpi_type(type, mpi, bytes) || op != ncclSum)
    return refuse(ncclInvalidArgument, "ncclAllReduce", "only sums of f32, f64, i32 and i8 are emulated");
  if (const ncclResult_t status =
          prepare("ncclAllReduce", comm, stream, {{send, count * bytes}, {receive, count * bytes}});
      status != ncclSuccess)
    return status;
  MPI_Allreduce(send == receive ? MPI_IN_PLACE : send, receive, static_cast<int>(count), mpi, MPI_SUM,
                MPI_COMM_WORLD);
  return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void* send, void* receive, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  MPI_Datatype mpi;
  size_t bytes = 0;
  if (!mpi_type(type, mpi, bytes)) return refuse(ncclInvalidArgument, "ncclBroadcast", "type not emulated");
  if (comm == nullptr || root < 0 || root >= comm->ranks)
    return refuse(ncclInvalidArgument, "ncclBroadcast", "bad root");
  if (const ncclResult_t status =
          prepare("ncclBroadcast", comm, stream,
                  {{comm->rank == root ? send : receive, count * bytes}, {receive, count * bytes}});
      status != ncclSuccess)
    return status;
  if (comm->rank == root && send != receive) std::memcpy(receive, send, count * bytes);
  MPI_Bcast(receive, static_cast<int>(count), mpi, root, MPI_COMM_WORLD);
  return ncclSuccess;
}

// receive [count] := the sum over the ranks of their send [rank * count, (rank + 1) * count).
ncclResult_t ncclReduceScatter(const void* send, void* receive, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  MPI_Datatype mpi;
  size_t bytes = 0;
  if (!mpi_type(type, mpi, bytes) || op != ncclSum)
    return refuse(ncclInvalidArgument, "ncclReduceScatter", "only sums of f32, f64, i32 and i8 are emulated");
  if (comm == nullptr) return refuse(ncclInvalidArgument, "ncclReduceScatter", "no communicator");
  if (const ncclResult_t status =
          prepare("ncclReduceScatter", comm, stream,
                  {{send, count * bytes * static_cast<size_t>(comm->ranks)}, {receive, count * bytes}});
      status != ncclSuccess)
    return status;
  MPI_Reduce_scatter_block(send, receive, static_cast<int>(count), mpi, MPI_SUM, MPI_COMM_WORLD);
  return ncclSuccess;
}

// receive [ranks * count] := every rank's send [count], in rank order.
ncclResult_t ncclAllGather(const void* send, void* receive, size_t count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream) {
  MPI_Datatype mpi;
  size_t bytes = 0;
  if (!mpi_type(type, mpi, bytes)) return refuse(ncclInvalidArgument, "ncclAllGather", "type not emulated");
  if (comm == nullptr) return refuse(ncclInvalidArgument, "ncclAllGather", "no communicator");
  if (const ncclResult_t status =
          prepare("ncclAllGather", comm, stream,
                  {{send, count * bytes}, {receive, count * bytes * static_cast<size_t>(comm->ranks)}});
      status != ncclSuccess)
    return status;
  MPI_Allgather(send, static_cast<int>(count), mpi, receive, static_cast<int>(count), mpi, MPI_COMM_WORLD);
  return ncclSuccess;
}

}  // extern "C"
