// Reading a tokenizer from GGUF metadata (tokenizer.ggml.*) into a TokenizerSpec that
// reproduces the original Hugging Face tokenizer:
// - model "llama": SentencePiece BPE (scores, <0xNN> byte fallback, a '▁' dummy prefix
//   unless add_space_prefix is false), as HF's Llama tokenizer.json does it;
// - model "gpt2": byte-level BPE with merges; tokenizer.ggml.pre picks the pre-tokenizer
//   of the model family: default/gpt-2/gpt2/mpt/olmo, llama3/llama-bpe (ignore_merges),
//   qwen2 (with NFC), deepseek-llm, deepseek-coder, deepseek-v3, falcon,
//   starcoder/refact/smollm.
// Token types: CONTROL and UNKNOWN tokens are special; USER_DEFINED tokens are added,
// non-special tokens (always matched in text, as llama.cpp and HF do).
#pragma once

#include "tokenizer/tokenizer_spec.h"

namespace tokenmill {

class GgufFile;

TokenizerSpec read_gguf_vocab(const GgufFile& gguf);

}  // namespace tokenmill
