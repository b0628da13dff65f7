// `tokenmill quantize`: a GGUF file or a Hugging Face model directory (converted on the
// fly, convert/hf_to_gguf.h) written to GGUF at another weight type (convert/model_source.h).
#pragma once

#include <filesystem>

#include "convert/model_source.h"

namespace tokenmill {

// Refuses `out` naming the same file as `in`.
GgufWriteReport quantize_model(const std::filesystem::path& in, const std::filesystem::path& out,
                               const GgufWriteOptions& options);

}  // namespace tokenmill
