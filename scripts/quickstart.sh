#!/usr/bin/env bash
# Quickstart: installs dependencies, builds tokenmill, then shows the bundled tiny model
# (tests/fixtures/hf/smollm_chat: a 2-layer Llama with a byte-level BPE tokenizer trained
# on Shakespeare and a ChatML chat template) and generates from it. Its weights are
# random, so the text is gibberish until the training issue lands; what this shows is the
# whole pipeline (tokenizer, template, forward pass, sampler, streaming) and its speed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release --target tokenmill
model=tests/fixtures/hf/smollm_chat
set -x
build/release/tokenmill info -m "$model"
build/release/tokenmill tokenize -m "$model" --text "ROMEO: But soft, what light"
build/release/tokenmill generate -m "$model" -p "ROMEO: But soft, what light" -n 48 --temperature 0.8 --seed 7
build/release/tokenmill generate -m "$model" -p "ROMEO: But soft, what light" -n 48 --temperature 0 --json
printf 'Hello, who are you?\n' | build/release/tokenmill chat -m "$model" --temperature 0 -n 32
