#!/usr/bin/env bash
# Data-parallel scaling on one machine: `tokenmill train` from scratch (4 layers, hidden 256,
# 128-token sequences, 12 steps, tinyshakespeare with the smollm_chat fixture's tokenizer) as
# 1 process with 1 and 2 threads and as 2 ranks x 1 thread (with and without --zero 1), each
# the median tokens/s of steps 3..12 from metrics.jsonl, with the ranks' communication share.
#   bench/bench_data_parallel.sh [BUILD_DIR]   (default build/release; needs mpirun)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
T=$root/${1:-build/release}/tokenmill
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"
head -c 400000 "$root/data/tinyshakespeare.txt" >text.txt
"$T" prepare -m "$root/tests/fixtures/hf/smollm_chat" --input text.txt --out data >/dev/null
C=(train --data data --device cpu --layers 4 --hidden 256 --heads 4 --seq-len 128 --steps 12 --eval-every 0
  --sample-tokens 1 --checkpoint-minutes 0 --seed 1)
median() {
  python3 - "$1" <<'PY'
import json, statistics, sys
steps = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if '"loss"' in l][2:]
share = [s["communication_share"] for s in steps if "communication_share" in s]
print(f"{sys.argv[1]}: median tok/s {statistics.median(s['tokens_per_s'] for s in steps):.0f}, "
      f"communication share {f'{100 * statistics.median(share):.1f}%' if share else '-'}")
PY
}
"$T" -t 1 "${C[@]}" --out one_t1_b4 --batch 4 >one.log
grep -E "^trainable" one.log
median one_t1_b4
"$T" -t 2 "${C[@]}" --out one_t2_b8 --batch 8 >/dev/null
median one_t2_b8
mpirun --oversubscribe -np 2 "$T" -t 1 "${C[@]}" --out two_t1_b4 --batch 4 >/dev/null
median two_t1_b4
mpirun --oversubscribe -np 2 "$T" -t 1 "${C[@]}" --out two_t1_b4_zero --batch 4 --zero 1 >/dev/null
median two_t1_b4_zero
