#include "convert/quantize.h"

#include "convert/hf_to_gguf.h"
#include "core/error.h"

namespace tokenmill {

GgufWriteReport quantize_model(const std::filesystem::path& in, const std::filesystem::path& out,
                               const GgufWriteOptions& options) {
  std::error_code ec;
  if (!std::filesystem::exists(in, ec))
    fail("{}: no such file or directory (expected a .gguf file or a Hugging Face model directory)",
         in.string());
  check_distinct_output(in, out);
  if (std::filesystem::is_directory(in, ec))
    return write_model_gguf(hf_model_source(in, options.log), out, options);
  return write_model_gguf(gguf_model_source(in), out, options);
}

}  // namespace tokenmill
