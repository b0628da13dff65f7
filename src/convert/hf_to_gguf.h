// Hugging Face model directory -> GGUF, writing what llama.cpp's convert_hf_to_gguf.py
// writes, so llama.cpp (and tokenmill) load the result.
//
// Architectures: LlamaForCausalLM and MistralForCausalLM (GGUF architecture "llama"),
// Qwen2ForCausalLM ("qwen2"), Qwen3ForCausalLM ("qwen3", with attn_q_norm / attn_k_norm),
// Phi3ForCausalLM ("phi3": fused attn_qkv, and gate|up fused in ffn_up), Olmo2ForCausalLM
// ("olmo2": post_attention_norm, post_ffw_norm, whole-projection attn_q_norm / attn_k_norm),
// GPT2LMHeadModel ("gpt2"), GptOssForCausalLM ("gpt-oss": attn_sinks, the fused experts
// split into ffn_{gate,up,down}_exps with their biases, MXFP4 kept; YaRN as
// rope.scaling.yarn_*). Tensor names come from the family's layout (model/arch/).
//
// Tensors get llama.cpp's names (token_embd, blk.N.attn_q, ..., output_norm, output; the
// output is omitted when the embeddings are tied). For "llama" the q and k projections
// (weights and biases) are permuted as convert_hf_to_gguf.py's `permute` does: within
// each head, row 2i takes HF row i and row 2i+1 takes HF row i + head_dim/2, so that
// llama.cpp's interleaved (GPT-J style) rope equals HF's rotate-half rope. "qwen2" uses
// llama.cpp's NEOX rope and is not permuted. GPT-2's Conv1D weights ([in, out]) are
// transposed. Llama 3 rope scaling becomes a rope_freqs.weight tensor of per-frequency
// factors, as convert_hf_to_gguf.py generates it.
//
// Metadata: general.*, {arch}.context_length, embedding_length, block_count,
// feed_forward_length, attention.head_count(_kv), attention.key/value_length, the norm
// epsilon, rope.freq_base, rope.dimension_count, rope.scaling.* (linear), vocab_size, and
// the tokenizer (see set_tokenizer_metadata). A directory without tokenizer.json gets
// tokenizer.ggml.model "none" (llama.cpp then loads the model without a vocabulary).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "convert/model_source.h"
#include "tokenizer/tokenizer_spec.h"

namespace tokenmill {

// The tensors and metadata of the model in `dir`, ready for write_model_gguf. Errors name
// the file and tensor (unknown tensor names, unsupported architectures, bad shapes).
ModelSource hf_model_source(const std::filesystem::path& dir, const LogFn& log);

// tokenizer.ggml.* for a byte-level BPE tokenizer ("gpt2": tokens, token_type, merges,
// pre, special token ids, add_bos/add_eos_token, chat_template). The vocabulary is padded
// with "[PAD<id>]" unused tokens up to `vocab_size` (the embedding rows). Error for other
// tokenizer kinds (SentencePiece-style BPE is not written yet).
void set_tokenizer_metadata(GgufWriter& writer, const TokenizerSpec& spec, int64_t vocab_size,
                            const LogFn& log);

// The llama.cpp tokenizer.ggml.pre name whose pre-tokenizer (as tokenmill's GGUF vocab
// reader builds it) equals `spec`'s: "gpt-2", "llama-bpe", "qwen2", "smollm", "falcon",
// "deepseek-llm", "deepseek-coder", "deepseek-v3"; "" when none does.
std::string llama_cpp_pre_tokenizer(const TokenizerSpec& spec);

// `tokenmill convert`: `dir` to `out` with matrices in options.type (f32/f16/bf16, or a
// quantized type as `tokenmill quantize` writes it).
GgufWriteReport convert_hf_to_gguf(const std::filesystem::path& dir, const std::filesystem::path& out,
                                   const GgufWriteOptions& options);

}  // namespace tokenmill
