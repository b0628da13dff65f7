#include "train/zero.h"

#include <algorithm>
#include <vector>

#include "core/arena.h"
#include "core/error.h"
#include "train/data_parallel.h"

namespace tokenmill {

namespace {

// The parts of a ZeRO-1 run: part r is [r x per_part, (r + 1) x per_part) of the flat
// buffers, cut at count(); collectives go in rounds of `piece` floats of every part.
struct Parts {
  Parts(const ParameterBuffers& params, const Communicator& comm, int64_t bucket_bytes)
      : count(params.count()),
        ranks(comm.world_size()),
        per_part((count + ranks - 1) / ranks),
        piece(std::max<int64_t>(1, bucket_bytes / static_cast<int64_t>(sizeof(float)) / ranks)) {
    if (bucket_bytes < 1) fail("--bucket-mb must be positive");
  }
  // Floats [at, at + n) of part r that exist (the last part may end early).
  std::pair<int64_t, int64_t> slice(int r, int64_t at, int64_t n) const {
    const int64_t begin = std::min(count, r * per_part + at);
    return {begin, std::min(count, begin + n) - begin};
  }
  int64_t count;
  int ranks;
  int64_t per_part, piece;
};

// A round's buffers in params' memory, for the device collectives: `all` [ranks x piece]
// floats (the parts' pieces in rank order) and `mine` [piece], zeroed once (the pieces past a
// short last part's end are summed and gathered but never copied out).
struct DeviceStaging {
  DeviceStaging(ParameterBuffers& params, const Parts& parts)
      : arena(Arena::footprint(static_cast<size_t>(parts.piece * parts.ranks) * sizeof(float)) +
                  Arena::footprint(static_cast<size_t>(parts.piece) * sizeof(float)),
              params.memory()) {
    const Tensor all_floats = arena.allocate(DType::F32, {parts.piece * parts.ranks});
    const Tensor mine_floats = arena.allocate(DType::F32, {parts.piece});
    all = {all_floats.as<float>(), static_cast<size_t>(all_floats.numel())};
    mine = {mine_floats.as<float>(), static_cast<size_t>(mine_floats.numel())};
    const std::vector<float> zeros(all.size());
    params.upload(all, zeros);
    params.upload(mine, std::span(zeros).first(mine.size()));
  }
  Arena arena;
  std::span<float> all, mine;
};

// Through the device collectives: rank r's piece of each part's slice [at, at + n) is staged
// at all[r n, ...), reduced-scattered into mine, and this rank's part gets it back.
void reduce_scatter_on_device(ParameterBuffers& params, DeviceCollectives& device, const Parts& parts,
                              int rank, std::string_view what) {
  DeviceStaging s(params, parts);
  const std::span<float> gradients = params.gradients();
  for (int64_t at = 0; at < parts.per_part; at += parts.piece) {
    const int64_t n = std::min(parts.piece, parts.per_part - at);
    for (int r = 0; r < parts.ranks; ++r) {
      const auto [begin, size] = parts.slice(r, at, n);
      params.copy(gradients.subspan(static_cast<size_t>(begin), static_cast<size_t>(size)),
                  s.all.subspan(static_cast<size_t>(r * n), static_cast<size_t>(size)));
    }
    device.reduce_scatter_sum(s.all.first(static_cast<size_t>(n * parts.ranks)),
                              s.mine.first(static_cast<size_t>(n)), what);
    const auto [begin, size] = parts.slice(rank, at, n);
    params.copy(s.mine.first(static_cast<size_t>(size)),
                gradients.subspan(static_cast<size_t>(begin), static_cast<size_t>(size)));
  }
}

// Through the device collectives: this rank's slice [at, at + n) of its part is staged in mine,
// gathered into all, and every part's slice copied out of it.
void all_gather_on_device(ParameterBuffers& params, DeviceCollectives& device, const Parts& parts, int rank,
                          std::string_view what) {
  DeviceStaging s(params, parts);
  const std::span<float> values = params.values();
  for (int64_t at = 0; at < parts.per_part; at += parts.piece) {
    const int64_t n = std::min(parts.piece, parts.per_part - at);
    const auto [begin, size] = parts.slice(rank, at, n);
    params.copy(values.subspan(static_cast<size_t>(begin), static_cast<size_t>(size)),
                s.mine.first(static_cast<size_t>(size)));
    device.all_gather(s.mine.first(static_cast<size_t>(n)), s.all.first(static_cast<size_t>(n * parts.ranks)),
                      what);
    for (int r = 0; r < parts.ranks; ++r) {
      const auto [b, size_r] = parts.slice(r, at, n);
      if (r != rank)
        params.copy(s.all.subspan(static_cast<size_t>(r * n), static_cast<size_t>(size_r)),
                    values.subspan(static_cast<size_t>(b), static_cast<size_t>(size_r)));
    }
  }
}

}  // namespace

void reduce_scatter_gradients(ParameterBuffers& params, Communicator& comm, int64_t bucket_bytes,
                              std::string_view what) {
  const Parts parts(params, comm, bucket_bytes);
  if (DeviceCollectives* device = device_collectives_for(params, comm)) {
    reduce_scatter_on_device(params, *device, parts, comm.rank(), what);
    return;
  }
  std::vector<float> all, mine;
  for (int64_t at = 0; at < parts.per_part; at += parts.piece) {
    const int64_t n = std::min(parts.piece, parts.per_part - at);
    all.assign(static_cast<size_t>(n * parts.ranks), 0.0f);
    mine.resize(static_cast<size_t>(n));
    for (int r = 0; r < parts.ranks; ++r) {
      const auto [begin, size] = parts.slice(r, at, n);
      params.download(params.gradients().subspan(static_cast<size_t>(begin), static_cast<size_t>(size)),
                      std::span(all).subspan(static_cast<size_t>(r * n), static_cast<size_t>(size)));
    }
    comm.reduce_scatter_sum(all, mine, what);
    const auto [begin, size] = parts.slice(comm.rank(), at, n);
    params.upload(params.gradients().subspan(static_cast<size_t>(begin), static_cast<size_t>(size)),
                  std::span(mine).first(static_cast<size_t>(size)));
  }
}

void all_gather_values(ParameterBuffers& params, Communicator& comm, int64_t bucket_bytes,
                       std::string_view what) {
  const Parts parts(params, comm, bucket_bytes);
  if (DeviceCollectives* device = device_collectives_for(params, comm)) {
    all_gather_on_device(params, *device, parts, comm.rank(), what);
    return;
  }
  std::vector<float> all, mine;
  for (int64_t at = 0; at < parts.per_part; at += parts.piece) {
    const int64_t n = std::min(parts.piece, parts.per_part - at);
    mine.assign(static_cast<size_t>(n), 0.0f);
    all.resize(static_cast<size_t>(n * parts.ranks));
    const auto [begin, size] = parts.slice(comm.rank(), at, n);
    params.download(params.values().subspan(static_cast<size_t>(begin), static_cast<size_t>(size)),
                    std::span(mine).first(static_cast<size_t>(size)));
    comm.all_gather(mine, all, what);
    for (int r = 0; r < parts.ranks; ++r) {
      const auto [b, s] = parts.slice(r, at, n);
      params.upload(params.values().subspan(static_cast<size_t>(b), static_cast<size_t>(s)),
                    std::span(all).subspan(static_cast<size_t>(r * n), static_cast<size_t>(s)));
    }
  }
}

void gather_moments(const ParameterBuffers& params, Communicator& comm, int which, int64_t bucket_bytes,
                    const std::function<void(std::span<const float>)>* write) {
  const std::span<const float> moments = which == 0 ? params.first_moments() : params.second_moments();
  const int64_t piece = std::max<int64_t>(1, bucket_bytes / static_cast<int64_t>(sizeof(float)));
  std::vector<float> buffer;
  for (int r = 0; r < comm.world_size(); ++r) {
    const auto [begin, end] = ParameterBuffers::shard_range(params.count(), {r, comm.world_size()});
    if (r == comm.rank() && (begin != params.moments_begin() || end != params.moments_end()))
      fail("training: this rank holds moments [{}, {}), not its ZeRO part [{}, {})", params.moments_begin(),
           params.moments_end(), begin, end);
    for (int64_t at = 0; at < end - begin; at += piece) {
      buffer.resize(static_cast<size_t>(std::min(piece, end - begin - at)));
      if (r == comm.rank()) params.download(moments.subspan(static_cast<size_t>(at), buffer.size()), buffer);
      comm.broadcast(std::as_writable_bytes(std::span(buffer)), r, "the AdamW state for a checkpoint");
      if (write != nullptr) (*write)(buffer);
    }
  }
}

}  // namespace tokenmill
