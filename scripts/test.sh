#!/usr/bin/env bash
# The test suite, from a fresh Debian machine: installs dependencies, checks formatting,
# builds the release preset and runs every CTest test; then the asan preset (clang,
# AddressSanitizer + UBSan, libFuzzer, and the CUDA backend run on the CPU by the CUDA
# emulation, so every GPU case runs too) and the whole suite again under it (bad input, fuzz
# corpus included); then the tsan preset (ThreadSanitizer over the emulated kernels: races
# between a kernel's GPU threads) on the kernel tests, forward and backward.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/check-format.sh

scripts/build.sh release
ctest --preset release -j"$(nproc)"

scripts/build.sh asan
ctest --preset asan -j"$(nproc)"

scripts/build.sh tsan --target cuda_emu_kernel_test --target backend_conformance_test \
  --target backend_backward_layers_test
# (the matmul cases are left out: their GPU side is the emulated cuBLASLt, host code)
ctest --preset tsan -j"$(nproc)" -R '^KernelExecution[.]|/cuda( |$)|Attention.*/cuda_tiled( |$)' \
  -E '_NOT_BUILT$|AMissingBarrierReads|[.]Matmul'
