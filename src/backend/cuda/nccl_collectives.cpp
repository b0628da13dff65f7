#include "backend/cuda/nccl_collectives.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace tokenmill::cuda {

namespace {

using Clock = std::chrono::steady_clock;

void check_nccl(ncclResult_t status, const char* call) {
  if (status != ncclSuccess) fail("{} failed: {}", call, ncclGetErrorString(status));
}

class NcclCollectives final : public DeviceCollectives {
 public:
  NcclCollectives(CudaBackend& backend, Communicator& comm, double timeout_seconds)
      : backend_(backend), comm_(comm), timeout_(timeout_seconds) {
    ncclUniqueId id{};
    if (comm.is_root()) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    comm.broadcast(std::as_writable_bytes(std::span(&id, 1)), 0, "the NCCL id");
    backend.make_current();
    check_nccl(ncclCommInitRank(&nccl_, comm.world_size(), id, comm.rank()), "ncclCommInitRank");
  }
  ~NcclCollectives() override { ncclCommDestroy(nccl_); }

  std::string describe() const override {
    return fmt::format("NCCL {}.{}.{} on GPU {}", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, backend_.device());
  }

  void all_reduce_sum(std::span<float> data, std::string_view what) override {
    backend_.make_current();
    check_nccl(
        ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, nccl_, backend_.stream()),
        "ncclAllReduce");
    wait("all-reduce", what);
  }

  void broadcast_from_root(std::span<float> data, std::string_view what) override {
    backend_.make_current();
    check_nccl(ncclBroadcast(data.data(), data.data(), data.size(), ncclFloat32, 0, nccl_, backend_.stream()),
               "ncclBroadcast");
    wait("broadcast", what);
  }

  void reduce_scatter_sum(std::span<const float> all, std::span<float> mine, std::string_view what) override {
    check_pieces(all, mine, "reduce-scatter", what);
    backend_.make_current();
    check_nccl(ncclReduceScatter(all.data(), mine.data(), mine.size(), ncclFloat32, ncclSum, nccl_,
                                 backend_.stream()),
               "ncclReduceScatter");
    wait("reduce-scatter", what);
  }

  void all_gather(std::span<const float> mine, std::span<float> all, std::string_view what) override {
    check_pieces(all, mine, "all-gather", what);
    backend_.make_current();
    check_nccl(ncclAllGather(mine.data(), all.data(), mine.size(), ncclFloat32, nccl_, backend_.stream()),
               "ncclAllGather");
    wait("all-gather", what);
  }

 private:
  // `all` must hold world-size pieces of mine.size() floats.
  void check_pieces(std::span<const float> all, std::span<const float> mine, std::string_view collective,
                    std::string_view what) const {
    if (all.size() != mine.size() * static_cast<size_t>(comm_.world_size()))
      fail("the NCCL {} of {}: {} floats for {} ranks' pieces of {}", collective, what, all.size(),
           comm_.world_size(), mine.size());
  }

  // Polls the stream until the collective (and what was queued before it) is done; past the
  // timeout, aborts the NCCL communicator and ends the job (dist/communicator.h "Faults").
  void wait(std::string_view collective, std::string_view what) {
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
    for (;;) {
      const cudaError_t status = cudaStreamQuery(backend_.stream());
      if (status == cudaSuccess) return;
      if (status != cudaErrorNotReady) TM_CUDA_CHECK(status);
      if (Clock::now() >= deadline) {
        fmt::print(
            stderr,
            "error: rank {}: the NCCL {} of {} did not complete within {} s (--collective-timeout): another "
            "rank died, stalled or left the job; stopping every rank\n",
            comm_.rank(), collective, what, timeout_);
        std::fflush(stderr);
        ncclCommAbort(nccl_);
        comm_.abort(3);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  CudaBackend& backend_;
  Communicator& comm_;
  double timeout_;
  ncclComm_t nccl_ = nullptr;
};

}  // namespace

std::unique_ptr<DeviceCollectives> make_nccl_collectives(Backend& backend, Communicator& comm,
                                                         double timeout_seconds) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  if (cuda == nullptr) fail("NCCL collectives need the CUDA backend, not {}", backend.name());
  return std::make_unique<NcclCollectives>(*cuda, comm, timeout_seconds);
}

}  // namespace tokenmill::cuda
