// A model about to be written to GGUF (its tensors and metadata, read from a GGUF file or
// converted from a Hugging Face directory by convert/hf_to_gguf.h), and writing it at a
// chosen weight type: the shared piece of `tokenmill quantize` and `tokenmill convert`.
//
// Which type each tensor gets follows llama.cpp's llama_model_quantize (llama-quant.cpp):
// - only weight matrices are (re)quantized: >= 2 dimensions (ggml_n_dims), name ending in
//   "weight", not a norm, not position_embd / token_types / ffn_gate_inp; 1-D tensors
//   (norms, biases, rope_freqs) and mixture-of-experts routers (ffn_gate_inp, as
//   convert_hf_to_gguf.py writes them) are written as f32, other kept tensors in their own type;
// - unless `pure`, a quantized file type uses llama.cpp's default mix: output.weight (the
//   token embedding when tied) becomes q6_k (q8_0 stays q8_0), and for q4_k ("Q4_K_M")
//   attn_v and ffn_down of the layers use_more_bits() picks become q6_k;
// - mxfp4_moe (llama.cpp's MXFP4_MOE): a mixture of experts' stacked expert tensors (ne[2] > 1)
//   are MXFP4, every other quantized matrix Q8_0, the output included;
// - a matrix whose row length is not a multiple of the block falls back as llama.cpp does
//   (q4_k -> q5_0, q5_k -> q5_1, q6_k -> q8_0, then f16), with a log line;
// - a tensor already in its target type is copied byte for byte; an MXFP4 tensor (gpt-oss's
//   experts) keeps MXFP4 whatever the file type, as llama.cpp's converter writes it.
// Rows are converted dequantize_row -> quantize_row, in parallel (parallel_for_chunks).
// general.file_type gets llama.cpp's LLAMA_FTYPE number and general.quantization_version 2.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/log_fn.h"
#include "formats/gguf_writer.h"

namespace tokenmill {

// "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "f16", "bf16", "f32", and
// "mxfp4_moe" (DType::MXFP4: llama.cpp's MXFP4_MOE mix, see below).
std::optional<DType> parse_gguf_file_type(std::string_view name);
inline constexpr std::string_view kGgufFileTypeNames =
    "q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, mxfp4_moe, f16, bf16, f32";

// llama.cpp's LLAMA_FTYPE for a file whose matrices are `type`; `mixed` picks Q4_K_M (15)
// over Q4_K_S (14) for q4_k.
uint32_t llama_file_type(DType type, bool mixed);

// One tensor of a model about to be written: its GGUF name and shape, and how to read it.
struct SourceTensor {
  std::string name;
  std::vector<int64_t> shape;  // ggml order: ne[0] is the row length
  uint32_t ggml_type = 0;      // as stored in the source
  uint64_t nbytes = 0;         // bytes in the source
  // The stored bytes when they are already in GGUF layout (copied verbatim if the type
  // does not change); empty when the source needs a transformation (permutation, ...).
  std::span<const std::byte> raw;
  // Writes row `row` (ne[0] values) as f32. Called concurrently from several threads.
  // Empty when the stored type cannot be read (then only a verbatim copy is possible).
  std::function<void(int64_t row, float* out)> read_row;
};

// A whole model to write: metadata (without general.file_type) and tensors.
struct ModelSource {
  GgufWriter metadata;
  std::vector<SourceTensor> tensors;
  std::shared_ptr<const void> keep_alive;  // the mapped files that raw and read_row use
};

struct GgufWriteOptions {
  DType type = DType::F16;
  bool pure = false;  // every matrix at `type` (no llama.cpp mix)
  LogFn log = {};     // fallback and conversion notes; may be empty
};

struct GgufWriteReport {
  size_t tensors = 0;
  uint64_t bytes_in = 0;    // tensor bytes read
  uint64_t bytes_out = 0;   // tensor bytes written
  uint64_t file_bytes = 0;  // size of the written file
  uint32_t file_type = 0;   // general.file_type written
  double seconds = 0;
  std::map<std::string, size_t> tensors_by_type;  // "q4_k" -> count, ...
};

// SourceTensor::read_row for rows of `cols` values of `dtype` laid end to end from `data`.
std::function<void(int64_t row, float* out)> stored_row_reader(DType dtype, int64_t cols,
                                                               const std::byte* data);

// The tensors of a GGUF file as a ModelSource (all metadata copied). Keeps the file mapped.
ModelSource gguf_model_source(const std::filesystem::path& path);

// Writes `source` to `out` atomically (formats/gguf_writer.h).
GgufWriteReport write_model_gguf(const ModelSource& source, const std::filesystem::path& out,
                                 const GgufWriteOptions& options);

// "14 tensors (q4_k 7, q6_k 2, f32 5): 12.5 MiB -> 3.6 MiB in 0.42 s".
std::string describe(const GgufWriteReport& report);

// Error unless `in` and `out` name different files (and `out` is not a directory).
void check_distinct_output(const std::filesystem::path& in, const std::filesystem::path& out);

}  // namespace tokenmill
