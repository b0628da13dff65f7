// The CUDA emulation's prelude: force-included (-include cuda_emu/cuda_emu.h) first into
// every CUDA source of the backend in the cuda-emu build, after rewrite_for_emulation.py
// has turned its <<<...>>> launches and __shared__ declarations into C++.
//
// The execution-space keywords mean nothing to a C++ compiler running everything on the
// host; NVIDIA's own headers (cuda_runtime.h, cuda_fp16.h, cuda_bf16.h) then compile as they
// do for any host-side C++, and supply __half, __nv_bfloat16, dim3 and the runtime's API,
// which this emulation implements (runtime_api.cpp, cublaslt.cpp).
#pragma once

#define __global__
#define __device__
#define __host__
#define __launch_bounds__(...)
// Every __shared__ declaration is rewritten; one that was not fails to compile here.
#define __shared__ cuda_emu_a_shared_declaration_was_not_rewritten

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda_emu/device_functions.h"
#include "cuda_emu/launch.h"
