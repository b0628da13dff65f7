#!/usr/bin/env bash
# The one GPU check (DESIGN.md): conformance of the CUDA backend against the float64
# reference, then its hot ops timed side by side with PyTorch, as one short table.
#
# Then a Llama-3-8B-shaped model (random bf16 weights) through the model layer, prefill and
# decode at batch 1 / 16 / 64 / 256, side by side with transformers.
#
# A GPU is lent rarely, for minutes, on a machine with nvcc and PyTorch but none of our
# Debian dependencies; so the build happens here and the binaries travel:
#   scripts/gpu-check.sh bundle   (here)   builds for sm_90 into build/gpu-bundle: the
#                                          backend test binaries, gpu_ops_bench, and the
#                                          shared libraries they need that a bare image lacks
#   scripts/gpu-check.sh run      (there)  runs it; OUT=<dir> keeps the logs and JSON
# The device call: run(command="scripts/gpu-check.sh run", carry=["build/gpu-bundle"]).
# Architectures other than sm_90: GPU_ARCH=80 scripts/gpu-check.sh bundle.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=build/gpu-bundle

build_bundle() {
  local build=build/gpu-build
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTOKENMILL_WERROR=ON -DTOKENMILL_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${GPU_ARCH:-90}" -DTOKENMILL_BUILD_BENCH=ON >/dev/null
  local tests=(backend_conformance_test backend_paged_attention_test backend_backward_linear_test
    backend_backward_layers_test backend_quant_matmul_test cuda_availability_test cuda_gemm_engine_test
    model_parity_test)
  cmake --build "$build" -j"$(nproc)" --target "${tests[@]}" gpu_ops_bench gpu_model_bench
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib"
  for t in "${tests[@]}"; do cp "$(find "$build/tests" -name "$t" -type f -executable)" "$bundle/bin/"; done
  cp "$build/bench/gpu_ops_bench" "$build/bench/gpu_model_bench" "$bundle/bin/"
  # Libraries outside glibc, libstdc++ and the CUDA toolkit (which the GPU image has).
  ldd "$bundle"/bin/* | awk '/=> \// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/usr/local/cuda' |
    while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
  git rev-parse --short HEAD >"$bundle/commit"
  pwd >"$bundle/source_dir"  # the tests read their fixtures from here
  du -sh "$bundle"
}

run_bundle() {
  [[ -x "$bundle/bin/gpu_ops_bench" ]] || { echo "no $bundle: run 'scripts/gpu-check.sh bundle' first (here, not on the GPU machine)" >&2; exit 2; }
  local out="${OUT:-/tmp/gpu-check}"
  mkdir -p "$out"
  # cuBLASLt from the CUDA toolkit or from PyTorch's wheels, whichever the image has.
  local cublas
  cublas=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /opt /usr/lib /usr/local/lib -name 'libcublasLt.so.13' 2>/dev/null | head -1 || true)
  export LD_LIBRARY_PATH="$PWD/$bundle/lib${cublas:+:$(dirname "$cublas")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # The test binaries read fixtures by the path they were built in: make it lead here.
  local built_in
  built_in=$(cat "$bundle/source_dir")
  if [[ ! -e "$built_in" ]]; then mkdir -p "$(dirname "$built_in")" && ln -s "$PWD" "$built_in"; fi
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
  echo "commit $(cat "$bundle/commit"), cuBLASLt from ${cublas:-?}"

  export TOKENMILL_REQUIRE_CUDA=1
  local summary="$out/conformance.txt" failed=0
  : >"$summary"
  for t in "$bundle"/bin/*_test; do
    local name log
    name=$(basename "$t")
    log="$out/$name.log"
    if "$t" --gtest_filter='*cuda*:CudaAvailability.*:GemmEngineOnGpu.*' >"$log" 2>&1; then
      echo "PASS $name: $(grep -o '\[  PASSED  \] [0-9]* test' "$log" | grep -o '[0-9]*') passed, $(grep -c '^\[  SKIPPED \].* ms)$' "$log" || true) skipped" >>"$summary"
    else
      failed=1
      echo "FAIL $name: $(grep -c '^\[  FAILED  \].* ms)$' "$log" || true) failed (see $log)" >>"$summary"
      grep -A12 'Failure\|error' "$log" | head -40 || true
    fi
  done

  timeout 300 "$bundle/bin/gpu_ops_bench" >"$out/ours.jsonl" 2>"$out/ours.log" || echo "gpu_ops_bench failed: $(tail -3 "$out/ours.log")"
  timeout 300 python3 bench/gpu/torch_peer.py >"$out/torch.jsonl" 2>"$out/torch.log" || echo "torch_peer failed: $(tail -3 "$out/torch.log")"
  timeout 420 "$bundle/bin/gpu_model_bench" >"$out/model_ours.jsonl" 2>"$out/model_ours.log" || echo "gpu_model_bench failed: $(tail -3 "$out/model_ours.log")"
  timeout 420 python3 bench/gpu/transformers_peer.py >"$out/model_peer.jsonl" 2>"$out/model_peer.log" || echo "transformers_peer failed: $(tail -3 "$out/model_peer.log")"
  python3 bench/gpu/compare.py "$out/ours.jsonl" "$out/torch.jsonl" | tee "$out/table.md"
  echo
  python3 bench/gpu/compare.py "$out/model_ours.jsonl" "$out/model_peer.jsonl" | tee -a "$out/table.md"
  echo
  cat "$summary"
  return "$failed"
}

case "${1:-}" in
  bundle) build_bundle ;;
  run) run_bundle ;;
  *) echo "usage: scripts/gpu-check.sh bundle|run" >&2; exit 2 ;;
esac
