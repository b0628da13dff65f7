# The CUDA backend (src/backend/cuda): built when TOKENMILL_CUDA is ON, or AUTO (the default)
# and nvcc is found. It compiles for every architecture we support, so CI (which has nvcc
# but no GPU) compiles and links every kernel on every run.
#
# EMULATE (the cuda-emu preset) builds the same backend as C++ against an emulation of the
# CUDA runtime and cuBLASLt on the CPU (tests/cuda_emu): `--device cuda` then runs every
# kernel on the CPU, so the tests execute the GPU code on machines without a GPU.
set(TOKENMILL_CUDA AUTO CACHE STRING "Build the CUDA backend: ON, OFF, AUTO (when nvcc is found) or EMULATE")
set_property(CACHE TOKENMILL_CUDA PROPERTY STRINGS ON OFF AUTO EMULATE)

set(tokenmill_with_cuda OFF)
set(tokenmill_cuda_emulated OFF)
if(TOKENMILL_CUDA STREQUAL "ON")
  set(tokenmill_with_cuda ON)
elseif(TOKENMILL_CUDA STREQUAL "EMULATE")
  set(tokenmill_with_cuda ON)
  set(tokenmill_cuda_emulated ON)
elseif(TOKENMILL_CUDA STREQUAL "AUTO")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(tokenmill_with_cuda ON)
  endif()
elseif(NOT TOKENMILL_CUDA STREQUAL "OFF")
  message(FATAL_ERROR "TOKENMILL_CUDA must be ON, OFF, AUTO or EMULATE, not '${TOKENMILL_CUDA}'")
endif()

if(tokenmill_cuda_emulated)
  find_package(CUDAToolkit REQUIRED)  # NVIDIA's headers only: no library of it is linked
  include(${PROJECT_SOURCE_DIR}/tests/cuda_emu/cuda_emu.cmake)
  message(STATUS "tokenmill: CUDA backend EMULATED on the CPU (headers of CUDA ${CUDAToolkit_VERSION})")
elseif(tokenmill_with_cuda)
  # A100 (sm_80), RTX 30xx / A10 (sm_86), RTX 40xx / L4 (sm_89), H100 / H200 (sm_90).
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 86 89 90)
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  # CMake 3.25 does not know nvcc's C++20 flag (newer CMake does); without it the C++20 that
  # CUDA sources inherit from CXX_STANDARD is refused at generation.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  # Every nvcc warning is an error; --resource-usage keeps each kernel's registers, shared
  # memory and spills in the build log.
  add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings;--resource-usage;-Xcompiler=-Wall,-Wextra>")
  message(STATUS "tokenmill: CUDA backend ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "tokenmill: CUDA backend OFF (TOKENMILL_CUDA=${TOKENMILL_CUDA})")
endif()
