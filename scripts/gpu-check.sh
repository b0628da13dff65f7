#!/usr/bin/env bash
# The one GPU check (DESIGN.md): conformance of the CUDA backend against the float64
# reference, then its hot ops timed side by side with PyTorch, as one short table.
#
# Then a Llama-3-8B-shaped model (random bf16 weights) through the model layer, prefill and
# decode at batch 1 / 16 / 64 / 256, side by side with transformers; and training of a
# GPT-2-124M-shaped model in bf16 (8 sequences of 1024 tokens a step: tokens/s and MFU) side by
# side with a PyTorch loop, eager and torch.compile.
#
# A GPU is lent rarely, for minutes, on a machine with nvcc and PyTorch but none of our
# Debian dependencies; so the build happens here and the binaries travel:
#   scripts/gpu-check.sh bundle   (here)   builds for sm_90 into build/gpu-bundle: the
#                                          backend test binaries, gpu_ops_bench, and the
#                                          shared libraries they need that a bare image lacks
#   scripts/gpu-check.sh run [tests|bench|all] [LOG_DIR]   (there)  tests: a smoke case, then the
#                                          conformance and parity suites on the GPU (< 3 min);
#                                          bench: the op and model benchmarks (< 8 min;
#                                          GPU_CHECK_LAYERS=8 for a quicker model), then
#                                          the GPT-2 training comparison, `tokenmill bench
#                                          --device cuda` on a small shape, `tokenmill doctor`,
#                                          and the quickstart's model trained 60 steps in fp32,
#                                          bf16, fp16 (most wanted first); sanitize:
#                                          compute-sanitizer (memcheck, racecheck, synccheck,
#                                          initcheck) over the conformance suite's CUDA cases;
#                                          all: the three, in that order.
#                                          Every log and figure in LOG_DIR (default
#                                          /tmp/gpu-check): figures.json holds every table's
#                                          rows; $OUT (the device tool's) receives logs.tgz,
#                                          conformance.txt, table.md, figures.json, bench.json,
#                                          doctor.json.
# Rebuild the bundle right before the device call (its `commit` file must match HEAD). A
# session has 15 device minutes, a machine's start included: one call does it all, each phase
# collected into $OUT as it ends, so what a timeout cuts off is only the least wanted part:
#   run(command="GPU_CHECK_LAYERS=16 scripts/gpu-check.sh run all", carry=["build/gpu-bundle.txz"],
#       timeout_s=600)
# (GPU_BUILD=build/lead reuses an existing sm_90 build tree; GPU_TEST_TIMEOUT caps each test binary.)
# Architectures other than sm_90: GPU_ARCH=80 scripts/gpu-check.sh bundle.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=build/gpu-bundle

build_bundle() {
  # GPU_BUILD names an existing CUDA build tree to reuse (e.g. build/lead); its settings stay.
  local build=${GPU_BUILD:-build/gpu-build}
  if [[ -z "${GPU_BUILD:-}" ]]; then
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTOKENMILL_WERROR=ON -DTOKENMILL_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES="${GPU_ARCH:-90}" -DTOKENMILL_BUILD_BENCH=ON >/dev/null
  fi
  local tests=(backend_conformance_test backend_paged_attention_test backend_backward_linear_test
    backend_backward_layers_test backend_quant_matmul_test cuda_availability_test cuda_gemm_engine_test
    model_parity_test gguf_model_test)
  cmake --build "$build" -j"$(nproc)" --target "${tests[@]}" gpu_ops_bench gpu_model_bench tokenmill
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib"
  for t in "${tests[@]}"; do cp "$(find "$build/tests" -name "$t" -type f -executable)" "$bundle/bin/"; done
  cp "$build/bench/gpu_ops_bench" "$build/bench/gpu_model_bench" "$build/tokenmill" "$bundle/bin/"
  # Libraries outside glibc, libstdc++ and the CUDA toolkit (which the GPU image has).
  ldd "$bundle"/bin/* | awk '/=> \// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/usr/local/cuda' |
    while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
  git rev-parse --short HEAD >"$bundle/commit"
  pwd >"$bundle/source_dir"  # the tests read their fixtures from here
  # The device tool carries at most 64 MiB with the tree: the bundle travels xz-packed.
  tar cJf "$bundle.txz" -C "$(dirname "$bundle")" "$(basename "$bundle")"
  du -sh "$bundle" "$bundle.txz"
}

logs=${3:-/tmp/gpu-check}  # everything; $OUT gets logs.tgz and the summaries (collect)
lib_path=""             # our binaries' libraries; never exported, so python3 keeps its own libgomp

prepare_run() {
  # The packed bundle is the one just carried: unpack it over whatever an earlier call left.
  if [[ -f "$bundle.txz" ]]; then rm -rf "$bundle" && tar xJf "$bundle.txz" -C "$(dirname "$bundle")"; fi
  [[ -x "$bundle/bin/gpu_ops_bench" ]] || { echo "no $bundle: run 'scripts/gpu-check.sh bundle' first (here, not on the GPU machine)" >&2; exit 2; }
  mkdir -p "$logs"
  # cuBLASLt and NCCL from the CUDA toolkit or from PyTorch's wheels, whichever the image has.
  local cublas nccl
  cublas=$(find -H /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /opt /usr/lib /usr/local/lib -name 'libcublasLt.so.13' 2>/dev/null | head -1 || true)
  nccl=$(find -H /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /opt /usr/lib /usr/local/lib -name 'libnccl.so.2' 2>/dev/null | head -1 || true)
  lib_path="$PWD/$bundle/lib${cublas:+:$(dirname "$cublas")}${nccl:+:$(dirname "$nccl")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # The test binaries read fixtures by the path they were built in: make it lead here.
  local built_in
  built_in=$(cat "$bundle/source_dir")
  if [[ ! -e "$built_in" ]]; then mkdir -p "$(dirname "$built_in")" && ln -s "$PWD" "$built_in"; fi
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$logs/gpu.txt" || true
  echo "bundle of commit $(cat "$bundle/commit"), cuBLASLt from ${cublas:-?}, NCCL from ${nccl:-?}"
}

# Copies what must come back into $OUT (when the device tool set it).
collect() {
  [[ -n "${OUT:-}" ]] || return 0
  tar czf "$OUT/logs.tgz" -C "$logs" . 2>/dev/null || true
  for f in conformance.txt table.md figures.json bench.json doctor.json; do [[ -f "$logs/$f" ]] && cp "$logs/$f" "$OUT/"; done
  return 0
}

run_tests() {
  export TOKENMILL_REQUIRE_CUDA=1
  # A first, tiny case: if managed memory or the driver misbehave here, stop in seconds.
  if ! timeout 60 env LD_LIBRARY_PATH="$lib_path" "$bundle/bin/backend_conformance_test" \
      --gtest_filter='*ConvertRoundsToNearestEven*/cuda' >"$logs/smoke.log" 2>&1; then
    echo "smoke test failed:"; tail -20 "$logs/smoke.log"; collect; return 1
  fi
  local summary="$logs/conformance.txt" failed=0
  : >"$summary"
  for t in "$bundle"/bin/*_test; do
    local name log
    name=$(basename "$t")
    log="$logs/$name.log"
    if timeout "${GPU_TEST_TIMEOUT:-60}" env LD_LIBRARY_PATH="$lib_path" "$t" --gtest_filter='*cuda*:CudaAvailability.*:GemmEngineOnGpu.*' >"$log" 2>&1; then
      echo "PASS $name: $(grep -o '\[  PASSED  \] [0-9]* test' "$log" | grep -o '[0-9]*') passed, $(grep -c '^\[  SKIPPED \].* ms)$' "$log" || true) skipped" >>"$summary"
    else
      failed=1
      echo "FAIL $name: $(grep -c '^\[  FAILED  \].* ms)$' "$log" || true) failed (see $name.log in logs.tgz)" >>"$summary"
      grep -B2 -A10 'Failure' "$log" | head -30 || true
    fi
    collect
  done
  cat "$summary"
  collect
  return "$failed"
}

# GPT-2-124M-shaped training, bf16 (FP32 master weights), 8 x 1024 tokens a step: `tokenmill
# bench`'s train phase (MFU against its bf16 GEMM) vs bench/torch_train_peer.py under autocast,
# eager and torch.compile.
train_vs_pytorch() {
  local name="train gpt2-124m bf16 8x1024"
  rm -f "$logs"/train_ours.jsonl "$logs"/train_torch_*.jsonl
  echo
  if timeout 150 env LD_LIBRARY_PATH="$lib_path" "$bundle/bin/tokenmill" bench --device cuda --shape gpt2-124m \
      --phases train --train-precision bf16 --prompt-tokens 1024 --train-batch 8 --json \
      >"$logs/train_bench.json" 2>"$logs/train_bench.log"; then
    python3 bench/gpu/train_rows.py "$name" "$logs/train_bench.json" >"$logs/train_ours.jsonl" ||
      echo "no train phase in $logs/train_bench.json"
  else
    echo "tokenmill bench (train) failed: $(tail -3 "$logs/train_bench.log")"
  fi
  local mode
  for mode in eager compile; do
    if timeout 180 python3 bench/torch_train_peer.py --shape gpt2-124m --device cuda --autocast bf16 --batch 8 \
        --seq-len 1024 --steps 10 $([[ $mode == compile ]] && echo --compile) \
        >"$logs/train_torch_$mode.json" 2>"$logs/train_torch_$mode.log"; then
      python3 bench/gpu/train_rows.py "$name" "$logs/train_torch_$mode.json" >"$logs/train_torch_$mode.jsonl" ||
        echo "no train phase in $logs/train_torch_$mode.json"
    else
      echo "torch_train_peer ($mode) failed: $(tail -3 "$logs/train_torch_$mode.log")"
    fi
    [[ -s "$logs/train_ours.jsonl" ]] || continue
    touch "$logs/train_torch_$mode.jsonl"
    python3 bench/gpu/compare.py "$logs/train_ours.jsonl" "$logs/train_torch_$mode.jsonl" --peer-name "PyTorch $mode" \
      --title "training vs PyTorch $mode (share of roofline: MFU)" --json "$logs/figures.json" | tee -a "$logs/table.md"
  done
}

# compute-sanitizer's four tools over the conformance suite's CUDA cases: memcheck (out-of-
# bounds and misaligned accesses), racecheck (shared-memory hazards), synccheck (barrier and
# warp-sync misuse), initcheck (reads of device memory nothing wrote). The CUDA emulation
# checks the same logic on the CPU in CI; this is the GPU's own word on it.
run_sanitizers() {
  local sanitizer tool failed=0
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  if [[ ! -x $sanitizer ]]; then
    echo "no compute-sanitizer on this machine"
    return 1
  fi
  for tool in memcheck racecheck synccheck initcheck; do
    if timeout "${GPU_SANITIZE_TIMEOUT:-150}" env LD_LIBRARY_PATH="$lib_path" "$sanitizer" --tool "$tool" \
        --error-exitcode 1 "$bundle/bin/backend_conformance_test" --gtest_filter='*/cuda:*/cuda_tiled' \
        >"$logs/sanitize_$tool.log" 2>&1; then
      echo "PASS compute-sanitizer $tool" | tee -a "$logs/conformance.txt"
    else
      failed=1
      echo "FAIL compute-sanitizer $tool (see sanitize_$tool.log)" | tee -a "$logs/conformance.txt"
      grep -m5 -E '^========= (Invalid|Race|Barrier|Uninitialized|ERROR)' "$logs/sanitize_$tool.log" || true
    fi
    collect
  done
  return "$failed"
}

run_bench() {
  local layers="${GPU_CHECK_LAYERS:-32}"
  rm -f "$logs/figures.json"
  timeout 60 env LD_LIBRARY_PATH="$lib_path" "$bundle/bin/gpu_ops_bench" >"$logs/ours.jsonl" 2>"$logs/ours.log" || echo "gpu_ops_bench failed: $(tail -3 "$logs/ours.log")"
  timeout 60 python3 bench/gpu/torch_peer.py >"$logs/torch.jsonl" 2>"$logs/torch.log" || echo "torch_peer failed: $(tail -3 "$logs/torch.log")"
  python3 bench/gpu/compare.py "$logs/ours.jsonl" "$logs/torch.jsonl" --title "ops vs PyTorch" \
    --json "$logs/figures.json" | tee "$logs/table.md"
  collect
  timeout 150 env LD_LIBRARY_PATH="$lib_path" "$bundle/bin/gpu_model_bench" "$layers" >"$logs/model_ours.jsonl" 2>"$logs/model_ours.log" || echo "gpu_model_bench failed: $(tail -3 "$logs/model_ours.log")"
  timeout 180 python3 bench/gpu/transformers_peer.py "$layers" >"$logs/model_peer.jsonl" 2>"$logs/model_peer.log" || echo "transformers_peer failed: $(tail -3 "$logs/model_peer.log")"
  echo
  python3 bench/gpu/compare.py "$logs/model_ours.jsonl" "$logs/model_peer.jsonl" \
    --title "Llama-3-8B-shaped ($layers layers), bf16, vs transformers" --json "$logs/figures.json" | tee -a "$logs/table.md"
  collect
  train_vs_pytorch
  collect
  # `tokenmill bench` on the GPU (small shape, NVML readings per phase) and `tokenmill doctor`.
  timeout 120 env LD_LIBRARY_PATH="$lib_path" "$bundle/bin/tokenmill" bench --device cuda --shape smollm2-135m \
    --dtype bf16 --prompt-tokens 256 --decode-tokens 256 --batch 1,8 --json >"$logs/bench.json" 2>"$logs/bench.log" ||
    echo "tokenmill bench failed: $(tail -3 "$logs/bench.log")"
  timeout 60 env LD_LIBRARY_PATH="$lib_path" "$bundle/bin/tokenmill" doctor --json >"$logs/doctor.json" 2>"$logs/doctor.log" ||
    echo "tokenmill doctor: exit $? (see doctor.json)"
  python3 -c 'import json, sys; b = json.load(open(sys.argv[1])); print(b["device"]["name"], "|", b["gpu_sampling"]); [print(p["phase"], p["batch"], round(p["tokens_per_s"], 1), "tok/s", p["gpu_samples"]) for p in b["phases"]]' \
    "$logs/bench.json" 2>/dev/null || true
  collect
  # Training on the GPU: the quickstart's model, 60 steps in each precision (val loss, tok/s).
  env LD_LIBRARY_PATH="$lib_path" "$bundle/bin/tokenmill" prepare -m tests/fixtures/hf/smollm_chat \
    --input data/tinyshakespeare.txt --out "$logs/train_data" >"$logs/prepare.log" 2>&1 || echo "prepare failed"
  for precision in fp32 bf16 fp16; do
    timeout 60 env LD_LIBRARY_PATH="$lib_path" "$bundle/bin/tokenmill" train --device cuda --data "$logs/train_data" \
      --out "$logs/train_$precision" --layers 4 --hidden 128 --heads 4 --batch 16 --seq-len 128 --steps 60 \
      --lr 3e-3 --warmup-steps 10 --eval-every 60 --precision "$precision" >"$logs/train_$precision.log" 2>&1 ||
      echo "train $precision failed: $(tail -3 "$logs/train_$precision.log")"
    grep -E '^(peak for MFU|val loss at end|tokens )' "$logs/train_$precision.log" | sed "s/^/train $precision: /" || true
  done
  collect
}

case "${1:-} ${2:-all}" in
  "bundle all") build_bundle ;;
  "run tests") prepare_run; run_tests ;;
  "run bench") prepare_run; run_bench ;;
  "run sanitize") prepare_run; run_sanitizers ;;
  "run all") prepare_run; status=0; run_tests || status=1; run_bench; run_sanitizers || status=1; exit "$status" ;;
  *) echo "usage: scripts/gpu-check.sh bundle | run [tests|bench|sanitize|all] [LOG_DIR]" >&2; exit 2 ;;
esac
