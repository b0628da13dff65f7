#!/usr/bin/env bash
# Mutation check of the CUDA emulation: plants typical GPU-code bugs in the CUDA backend one
# at a time, rebuilds the test that should catch each in the given preset (default cuda-emu;
# asan too), and fails unless every planted bug turns that test red. Each source file is
# restored afterwards, whatever happens. Takes about a minute per bug on 2 cores.
#   tests/cuda_emu/plant_bugs.sh [PRESET]
set -euo pipefail
cd "$(dirname "$0")/../.."
preset=${1:-cuda-emu}
build=build/$preset

# plant NAME FILE FROM TO TARGET TEST_BINARY GTEST_FILTER
plant() {
  local name=$1 file=$2 from=$3 to=$4 target=$5 binary=$6 filter=$7
  cp "$file" "$file.unplanted"
  # touch: the restored file must be newer than the objects built from the planted one, or
  # the build keeps the planted bug.
  trap 'mv "$file.unplanted" "$file" && touch "$file"' RETURN
  python3 - "$file" "$from" "$to" <<'PY'
import sys
path, old, new = sys.argv[1:4]
text = open(path).read()
if text.count(old) != 1:
    sys.exit(f"{path}: the text to replace occurs {text.count(old)} times, not once: {old!r}")
open(path, "w").write(text.replace(old, new))
PY
  cmake --build --preset "$preset" -j"$(nproc)" --target "$target" >/dev/null
  if timeout 900 "$build/$binary" --gtest_filter="$filter" --gtest_brief=1 >"/tmp/plant_$name.log" 2>&1; then
    echo "NOT CAUGHT: $name ($file)"
    return 1
  fi
  local failed
  failed=$(grep -c '^\[  FAILED  \] .*(' "/tmp/plant_$name.log" || true)
  if ((failed == 0)); then
    echo "caught: $name: the test binary crashed ($(grep -m1 -E 'ERROR: AddressSanitizer|Segmentation|Aborted' "/tmp/plant_$name.log" || echo "non-zero exit"))"
  else
    echo "caught: $name: $failed failing tests, e.g. $(grep -m1 '^\[  FAILED  \]' "/tmp/plant_$name.log" | sed 's/^\[  FAILED  \] //; s/, where.*//')"
  fi
}

status=0
plant off-by-one-bound src/backend/cuda/linear_kernels.cu \
  'i < count; i += stride_x()) y[i]' 'i <= count; i += stride_x()) y[i]' \
  backend_conformance_test tests/backend/backend_conformance_test '*Convert*/cuda' || status=1
plant missing-syncthreads src/backend/cuda/flash_attention.cu \
  '  if (values) load_key_tile(src, src.v, key_start, keys, s.stride, s.v);
  __syncthreads();' '  if (values) load_key_tile(src, src.v, key_start, keys, s.stride, s.v);' \
  backend_conformance_test tests/backend/backend_conformance_test '*Attention*/cuda_tiled' || status=1
plant missing-syncthreads-backward src/backend/cuda/flash_attention_backward.cu \
  '      __syncthreads();
      accumulate_key_gradients(' '      accumulate_key_gradients(' \
  backend_backward_layers_test tests/backend/backend_backward_layers_test '*BackwardAttention*/cuda_tiled' || status=1
plant wrong-shuffle-offset src/backend/cuda/block_reduce.cuh \
  'for (int offset = 16; offset > 0;' 'for (int offset = 8; offset > 0;' \
  backend_conformance_test tests/backend/backend_conformance_test '*Norm*/cuda' || status=1
plant wrong-leading-dimension src/backend/cuda/gemm_layout.cpp \
  'g.lda = q_transposed ? inner : cols;' 'g.lda = q_transposed ? cols : inner;' \
  backend_conformance_test tests/backend/backend_conformance_test '*Matmul*/cuda' || status=1
plant stream-ordering src/backend/cuda/cuda_memory.cpp \
  '  TM_CUDA_CHECK(cudaDeviceSynchronize());  // the ops that wrote `src` run on the backends'"'"' own streams' '' \
  model_parity_test tests/model/model_parity_test '*cuda*' || status=1
plant kv-block-table-index src/backend/cuda/paged_layout.cpp \
  '(seq.first_pos + seq.rows + block_size - 1) / block_size' '(seq.first_pos + seq.rows) / block_size' \
  backend_paged_attention_test tests/backend/backend_paged_attention_test '*/cuda' || status=1
plant lora-missing-syncthreads src/backend/cuda/lora_kernels.cu \
  '    for (int64_t j = threadIdx.x; j < s.rank; j += blockDim.x) t_row[j] = t_in[j];
    __syncthreads();' '    for (int64_t j = threadIdx.x; j < s.rank; j += blockDim.x) t_row[j] = t_in[j];' \
  backend_conformance_test tests/backend/backend_conformance_test '*AddLora*/cuda' || status=1
cmake --build --preset "$preset" -j"$(nproc)" >/dev/null  # back to the unplanted build
exit $status
