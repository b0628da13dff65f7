#include "backend/cuda/rope_kernels.h"

#include "backend/cuda/grid_stride.cuh"
#include "backend/cuda/rope_math.h"

namespace tokenmill::cuda {

namespace {

// Element i = (token t, pair j): the rotation is computed once, then applied to pair j of
// each of the token's heads.
struct RopeTokenPair {
  float* x;
  const int32_t* positions;
  const float* inv_freq;
  int64_t heads, head_dim, half;
  RopeMode mode;
  __device__ void operator()(int64_t i) const {
    const int64_t t = i / half, j = i % half;
    const RopeRotation rotation = rope_rotation(positions[t], inv_freq[j], mode);
    const RopePair pair = rope_pair(mode.neox, j, half);
    for (int64_t h = 0; h < heads; ++h) {
      float* head = x + (t * heads + h) * head_dim;
      rope_rotate(head[pair.first], head[pair.second], rotation);
    }
  }
};

}  // namespace

void launch_rope(float* x, const int32_t* positions, const float* inv_freq, int64_t n, int64_t heads,
                 int64_t head_dim, int64_t half, RopeMode mode, cudaStream_t stream) {
  launch_elementwise(n * half, RopeTokenPair{x, positions, inv_freq, heads, head_dim, half, mode}, stream);
}

}  // namespace tokenmill::cuda
