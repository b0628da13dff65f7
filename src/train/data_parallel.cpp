#include "train/data_parallel.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "core/error.h"
#include "core/fnv1a.h"

namespace tokenmill {

namespace {

// Calls `visit` on consecutive pieces of at most bucket_bytes of `buffer` as host spans:
// the buffer itself in host memory, else a staging copy written back after the visit.
void visit_host_pieces(ParameterBuffers& params, std::span<float> buffer, int64_t bucket_bytes,
                       const std::function<void(std::span<float>)>& visit) {
  if (bucket_bytes < static_cast<int64_t>(sizeof(float)))
    fail("--bucket-mb must be positive, got {} bytes", bucket_bytes);
  const size_t piece = std::min(buffer.size(), static_cast<size_t>(bucket_bytes) / sizeof(float));
  std::vector<float> staging(params.memory().is_host() ? 0 : piece);
  for (size_t at = 0; at < buffer.size(); at += piece) {
    const std::span<float> part = buffer.subspan(at, std::min(piece, buffer.size() - at));
    if (params.memory().is_host()) {
      visit(part);
      continue;
    }
    const std::span<float> host = std::span<float>(staging).first(part.size());
    params.download(part, host);
    visit(host);
    params.upload(part, host);
  }
}

// Calls `visit` on consecutive pieces of at most bucket_bytes of `buffer` where it lies (a
// GPU's memory), for the device collectives.
void visit_device_pieces(std::span<float> buffer, int64_t bucket_bytes,
                         const std::function<void(std::span<float>)>& visit) {
  const size_t piece = std::max<size_t>(1, static_cast<size_t>(bucket_bytes) / sizeof(float));
  for (size_t at = 0; at < buffer.size(); at += piece)
    visit(buffer.subspan(at, std::min(piece, buffer.size() - at)));
}

}  // namespace

DeviceCollectives* device_collectives_for(const ParameterBuffers& params, const Communicator& comm) {
  return params.memory().is_host() ? nullptr : comm.device();
}

void sum_gradients(ParameterBuffers& params, Communicator& comm, int64_t bucket_bytes,
                   std::string_view what) {
  if (comm.world_size() == 1) return;
  if (DeviceCollectives* device = device_collectives_for(params, comm)) {
    visit_device_pieces(params.gradients(), bucket_bytes,
                        [&](std::span<float> bucket) { device->all_reduce_sum(bucket, what); });
    return;
  }
  visit_host_pieces(params, params.gradients(), bucket_bytes,
                    [&](std::span<float> bucket) { comm.all_reduce_sum(bucket, what); });
}

void broadcast_from_root(ParameterBuffers& params, std::span<float> buffer, Communicator& comm,
                         int64_t bucket_bytes, std::string_view what) {
  if (comm.world_size() == 1) return;
  if (DeviceCollectives* device = device_collectives_for(params, comm)) {
    visit_device_pieces(buffer, bucket_bytes,
                        [&](std::span<float> piece) { device->broadcast_from_root(piece, what); });
    return;
  }
  visit_host_pieces(params, buffer, bucket_bytes,
                    [&](std::span<float> piece) { comm.broadcast(std::as_writable_bytes(piece), 0, what); });
}

void check_replicas_agree(const ParameterBuffers& params, Communicator& comm, std::string_view what) {
  if (comm.world_size() == 1) return;
  uint64_t hash = kFnv1aOffsetBasis;
  params.read_chunks(params.values(), [&](std::span<const float> chunk) {
    hash = fnv1a(chunk.data(), chunk.size_bytes(), hash);
  });
  uint64_t root_hash = hash;
  comm.broadcast(std::as_writable_bytes(std::span(&root_hash, 1)), 0, what);
  double differing = root_hash == hash ? 0.0 : 1.0;
  comm.all_reduce_sum(std::span(&differing, 1), what);
  if (differing > 0.0)
    fail(
        "{}: the weights of {} of the {} ranks differ from rank 0's (this rank's {}): the ranks' gradient "
        "sums were not the same bytes; the run stops before writing a checkpoint",
        what, differing, comm.world_size(), root_hash == hash ? "agree" : "differ");
}

}  // namespace tokenmill
