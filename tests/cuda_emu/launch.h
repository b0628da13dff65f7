// Kernel launches in the CUDA emulation. rewrite_for_emulation.py turns
//   kernel<<<grid, block, shared_bytes, stream>>>(args...)
// into
//   ::cuda_emu::launch({"kernel", __FILE__, __LINE__}, ::cuda_emu::LaunchConfig(grid, block,
//                      shared_bytes, stream), kernel, args...);
// The arguments are converted to the kernel's parameter types and copied at the launch, as
// CUDA does; the grid runs when its stream reaches it (streams.h).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cuda_emu {

// Where a launch is written, for the messages about it.
struct LaunchSite {
  const char* kernel;
  const char* file;
  int line;
};

struct LaunchConfig {
  dim3 grid;
  dim3 block;
  size_t shared_bytes;
  cudaStream_t stream;

  LaunchConfig(dim3 grid_shape, dim3 block_shape, size_t dynamic_shared_bytes = 0, cudaStream_t on = nullptr)
      : grid(grid_shape), block(block_shape), shared_bytes(dynamic_shared_bytes), stream(on) {}
};

// Checks the configuration (an invalid one is cudaGetLastError's next answer, and nothing
// runs) and queues `thread_body`, which each GPU thread of the grid calls once. `kernel` is
// the kernel's address (for cudaFuncSetAttribute's opt-ins), or null where it has none.
void enqueue_kernel(const LaunchSite& site, const LaunchConfig& config, const void* kernel,
                    std::function<void()> thread_body);

template <class... P, class... A>
void launch(const LaunchSite& site, const LaunchConfig& config, void (*kernel)(P...), A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "a kernel launch passes one argument per parameter");
  enqueue_kernel(site, config, reinterpret_cast<const void*>(kernel),
                 [kernel, params = std::tuple<std::decay_t<P>...>(std::forward<A>(args)...)] {
                   std::apply(kernel, params);
                 });
}

// A launch of a kernel template whose arguments the call deduces: `call` is a generic
// lambda calling it.
template <class Call, class... A>
requires(!std::is_pointer_v<Call>) void launch(const LaunchSite& site, const LaunchConfig& config, Call call,
                                               A&&... args) {
  enqueue_kernel(site, config, nullptr,
                 [call, params = std::make_tuple(std::forward<A>(args)...)] { std::apply(call, params); });
}

}  // namespace cuda_emu

// The C++ overload cuda_runtime.h declares only for nvcc: a kernel's attribute by its address.
template <class T>
cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}
