#!/usr/bin/env bash
# Quickstart: installs dependencies, builds tokenmill, then shows the bundled tiny Llama
# model and generates from it. (Random weights: the tokens are meaningless until the
# training issue lands; what this shows is the pipeline and its speed.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release --target tokenmill
model=tests/fixtures/hf/llama
set -x
build/release/tokenmill info -m "$model"
build/release/tokenmill generate -m "$model" --prompt-ids 1,17,42,99 -n 32 --temperature 0.8 --seed 7
build/release/tokenmill generate -m "$model" --prompt-ids 1,17,42,99 -n 32 --json
