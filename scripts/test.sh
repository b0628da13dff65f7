#!/usr/bin/env bash
# The test suite, from a fresh Debian machine: installs dependencies, checks formatting,
# builds the release preset and runs every CTest test, then builds the asan preset
# (clang, AddressSanitizer + UBSan, libFuzzer) and runs the whole suite again under them (bad input, fuzz corpus included).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/check-format.sh

scripts/build.sh release
ctest --preset release -j"$(nproc)"

scripts/build.sh asan
ctest --preset asan -j"$(nproc)"
