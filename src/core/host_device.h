// TM_HOST_DEVICE marks the per-element math that kernels call and that the CPU tests also
// run (DESIGN.md: "GPU code that is checkable without a GPU"): `__host__ __device__` under
// nvcc, nothing under a plain C++ compiler.
#pragma once

#ifdef __CUDACC__
#define TM_HOST_DEVICE __host__ __device__ inline
#else
#define TM_HOST_DEVICE inline
#endif
