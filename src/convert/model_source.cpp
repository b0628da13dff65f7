#include "convert/model_source.h"

#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>

#include <fmt/format.h>

#include "core/byte_units.h"
#include "core/checked_math.h"
#include "core/error.h"
#include "core/parallel.h"
#include "formats/gguf.h"
#include "quant/quant_formats.h"
#include "quant/quant_reference.h"

namespace tokenmill {

namespace {

constexpr uint32_t kQuantizationVersion = 2;  // GGML_QNT_VERSION

void note(const LogFn& log, const std::string& line) {
  if (log) log(line);
}

// ggml_n_dims: 1 + the index of the last dimension > 1.
int ggml_dims(const std::vector<int64_t>& shape) {
  for (int i = static_cast<int>(shape.size()) - 1; i >= 1; --i)
    if (shape[static_cast<size_t>(i)] > 1) return i + 1;
  return 1;
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// llama-quant.cpp's tensor_allows_quantization, for the architectures tokenmill writes.
bool is_quantizable(const SourceTensor& t) {
  const std::string_view n = t.name;
  return ggml_dims(t.shape) >= 2 && n.ends_with("weight") && !contains(n, "_norm.weight") &&
         !contains(n, "ffn_gate_inp.weight") && n != "position_embd.weight" && n != "token_types.weight";
}

bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The type of each tensor in a file of options.type (see the header).
class TypePlanner {
 public:
  TypePlanner(const ModelSource& source, const GgufWriteOptions& options) : options_(options) {
    for (const SourceTensor& t : source.tensors) {
      has_output_ = has_output_ || t.name == "output.weight";
      n_attn_v_ += is_attn_v(t.name) ? 1 : 0;
      n_ffn_down_ += is_ffn_down(t.name) ? 1 : 0;
    }
  }

  // The ggml type `t` is written in.
  uint32_t plan(const SourceTensor& t) {
    // MXFP4 (gpt-oss's experts) stays MXFP4, as llama.cpp's converter keeps it: its codes are
    // the model's own weights, which another 4-bit type would round again.
    if (t.ggml_type == quant::ggml_type_of(DType::MXFP4)) return t.ggml_type;
    if (!is_quantizable(t)) {
      // Routers are f32, as convert_hf_to_gguf.py writes them (a bf16 one would make
      // llama.cpp round the activations it scores to bf16).
      if (ggml_dims(t.shape) == 1 || contains(t.name, "ffn_gate_inp.weight"))
        return quant::ggml_type_of(DType::F32);
      return t.ggml_type;
    }
    DType type = options_.type;
    // MXFP4_MOE: a mixture of experts' stacked expert tensors MXFP4, every other matrix Q8_0.
    if (type == DType::MXFP4) type = t.shape.size() >= 3 && t.shape[2] > 1 ? DType::MXFP4 : DType::Q8_0;
    if (is_quantized(type) && !options_.pure && options_.type != DType::MXFP4) type = mix(t, type);
    if (is_quantized(type)) type = fallback(t, type);
    return quant::ggml_type_of(type);
  }

 private:
  static bool is_attn_v(std::string_view name) {
    return contains(name, "attn_v.weight") || contains(name, "attn_qkv.weight");
  }
  static bool is_ffn_down(std::string_view name) {
    return contains(name, "ffn_down") && name.ends_with("weight");
  }

  // llama_tensor_get_type_impl, for the file types tokenmill writes.
  DType mix(const SourceTensor& t, DType type) {
    const bool is_output = t.name == "output.weight" || (!has_output_ && t.name == "token_embd.weight");
    if (is_output) {
      if (t.shape[0] % dtype_block_size(type) != 0) return DType::Q8_0;
      return type == DType::Q8_0 ? type : DType::Q6_K;
    }
    if (is_attn_v(t.name)) {
      const bool more = use_more_bits(layer_of(t.name, i_attn_v_), n_attn_v_);
      if (type == DType::Q4_K && more) return DType::Q6_K;
    } else if (is_ffn_down(t.name)) {
      const bool more = use_more_bits(layer_of(t.name, i_ffn_down_), n_ffn_down_);
      if (type == DType::Q4_K && more) return DType::Q6_K;
    }
    return type;
  }

  // The N of "blk.N.", else the running count (llama.cpp counts layers, not file order:
  // files often list blk.10 before blk.2).
  static int layer_of(std::string_view name, int& counter) {
    const int seen = counter++;
    if (!name.starts_with("blk.")) return seen;
    int layer = 0;
    size_t i = 4;
    for (; i < name.size() && i < 12 && name[i] >= '0' && name[i] <= '9'; ++i)
      layer = layer * 10 + (name[i] - '0');
    return i > 4 && i < name.size() && name[i] == '.' ? layer : seen;
  }

  // tensor_type_fallback: a type whose block divides the row length.
  DType fallback(const SourceTensor& t, DType type) const {
    const int64_t cols = t.shape[0];
    if (cols % dtype_block_size(type) == 0) return type;
    DType next = DType::F16;
    if (type == DType::Q4_K) next = DType::Q5_0;
    if (type == DType::Q5_K) next = DType::Q5_1;
    if (type == DType::Q6_K) next = DType::Q8_0;
    if (cols % dtype_block_size(next) != 0) next = DType::F16;
    note(options_.log, fmt::format("{}: row length {} is not a multiple of {}'s block of {}; using {}",
                                   t.name, cols, dtype_name(type), dtype_block_size(type), dtype_name(next)));
    return next;
  }

  const GgufWriteOptions& options_;
  bool has_output_ = false;
  int n_attn_v_ = 0, n_ffn_down_ = 0;
  int i_attn_v_ = 0, i_ffn_down_ = 0;
};

std::string ggml_type_label(uint32_t ggml_type) {
  if (const auto d = quant::dtype_from_ggml_type(ggml_type)) return std::string(dtype_name(*d));
  const auto traits = ggml_type_traits(ggml_type);
  return traits ? std::string(traits->name) : fmt::format("type {}", ggml_type);
}

// Fills `out` with tensor `t` in `type`, row by row in parallel.
void convert_rows(const SourceTensor& t, DType type, std::span<std::byte> out) {
  if (!t.read_row)
    fail("tensor {}: its type {} cannot be read by tokenmill, so it cannot be converted to {}", t.name,
         ggml_type_label(t.ggml_type), dtype_name(type));
  const int64_t cols = t.shape[0];
  if (cols == 0) return;
  const size_t row_bytes = dtype_row_bytes(type, cols);
  const auto rows = static_cast<int64_t>(out.size() / row_bytes);
  std::exception_ptr error;
  std::mutex error_mutex;
  parallel_for_chunks(rows, std::max<int64_t>(1, 16384 / cols), [&](int64_t begin, int64_t end) {
    try {
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = begin; r < end; ++r) {
        t.read_row(r, row.data());
        std::byte* dst = out.data() + static_cast<size_t>(r) * row_bytes;
        if (is_quantized(type)) {
          quant::quantize_row(type, row.data(), dst, cols);
        } else {
          for (int64_t j = 0; j < cols; ++j) store_from_f32(dst, type, static_cast<size_t>(j), row[j]);
        }
      }
    } catch (...) {
      const std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  });
  if (error) std::rethrow_exception(error);
}

// ne[0]-long rows of a tensor stored in a ggml type tokenmill reads.
std::function<void(int64_t, float*)> gguf_row_reader(const GgufTensorInfo& info,
                                                     std::span<const std::byte> data) {
  const auto dtype = quant::dtype_from_ggml_type(info.type);
  if (!dtype || info.shape.empty()) return {};
  return stored_row_reader(*dtype, info.shape[0], data.data());
}

}  // namespace

std::function<void(int64_t, float*)> stored_row_reader(DType dtype, int64_t cols, const std::byte* data) {
  const size_t row_bytes = dtype_row_bytes(dtype, cols);
  return [dtype, cols, row_bytes, data](int64_t row, float* out) {
    const std::byte* src = data + static_cast<size_t>(row) * row_bytes;
    if (is_quantized(dtype)) {
      quant::dequantize_row(dtype, src, out, cols);
    } else {
      for (int64_t j = 0; j < cols; ++j) out[j] = load_as_f32(src, dtype, static_cast<size_t>(j));
    }
  };
}

std::optional<DType> parse_gguf_file_type(std::string_view name) {
  if (name == "mxfp4_moe") return DType::MXFP4;
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K,
                  DType::Q6_K, DType::F16, DType::BF16, DType::F32})
    if (dtype_name(t) == name) return t;
  return std::nullopt;
}

uint32_t llama_file_type(DType type, bool mixed) {
  switch (type) {
    case DType::F32: return 0;                 // LLAMA_FTYPE_ALL_F32
    case DType::F16: return 1;                 // MOSTLY_F16
    case DType::Q4_0: return 2;                // MOSTLY_Q4_0
    case DType::Q4_1: return 3;                // MOSTLY_Q4_1
    case DType::Q8_0: return 7;                // MOSTLY_Q8_0
    case DType::Q5_0: return 8;                // MOSTLY_Q5_0
    case DType::Q5_1: return 9;                // MOSTLY_Q5_1
    case DType::Q4_K: return mixed ? 15 : 14;  // MOSTLY_Q4_K_M : MOSTLY_Q4_K_S
    case DType::Q5_K: return 16;               // MOSTLY_Q5_K_S
    case DType::Q6_K: return 18;               // MOSTLY_Q6_K
    case DType::BF16: return 32;               // MOSTLY_BF16
    case DType::MXFP4: return 38;              // MOSTLY_MXFP4_MOE
    default: fail("{} is not a GGUF file type", dtype_name(type));
  }
}

ModelSource gguf_model_source(const std::filesystem::path& path) {
  auto file = std::make_shared<GgufFile>(GgufFile::open(path));
  if (file->find_int("split.count").value_or(1) > 1)
    fail("{}: one part of a split GGUF model; merge the parts first (llama-gguf-split --merge)",
         path.string());
  ModelSource source;
  source.metadata.copy_metadata(*file);
  for (const GgufTensorInfo& info : file->tensors()) {
    SourceTensor t;
    t.name = info.name;
    t.shape = info.shape.empty() ? std::vector<int64_t>{1} : info.shape;
    t.ggml_type = info.type;
    t.nbytes = info.nbytes;
    t.raw = file->tensor_data(info);
    t.read_row = gguf_row_reader(info, t.raw);
    source.tensors.push_back(std::move(t));
  }
  source.keep_alive = file;
  return source;
}

GgufWriteReport write_model_gguf(const ModelSource& source, const std::filesystem::path& out,
                                 const GgufWriteOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  GgufWriter writer = source.metadata;
  TypePlanner planner(source, options);
  GgufWriteReport report;
  bool mixed = false;
  for (const SourceTensor& t : source.tensors) {
    const uint32_t type = planner.plan(t);
    const auto dtype = quant::dtype_from_ggml_type(type);
    mixed = mixed || (dtype && is_quantized(*dtype) && *dtype != options.type);
    GgufWriter::FillFn fill;
    if (type == t.ggml_type && !t.raw.empty()) {
      fill = [&t](std::span<std::byte> dst) { std::memcpy(dst.data(), t.raw.data(), dst.size()); };
    } else if (dtype) {
      fill = [&t, d = *dtype](std::span<std::byte> dst) { convert_rows(t, d, dst); };
    } else {
      fail("tensor {}: type {} can only be copied, but its bytes are not available", t.name,
           ggml_type_label(type));
    }
    report.bytes_out = checked_add(report.bytes_out, writer.add_tensor(t.name, t.shape, type, fill), "size");
    report.bytes_in = checked_add(report.bytes_in, t.nbytes, "size");
    ++report.tensors_by_type[ggml_type_label(type)];
  }
  report.tensors = source.tensors.size();
  report.file_type = llama_file_type(options.type, mixed);
  writer.set_u32("general.file_type", report.file_type);
  writer.set_u32("general.quantization_version", kQuantizationVersion);
  report.file_bytes = writer.write(out);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

void check_distinct_output(const std::filesystem::path& in, const std::filesystem::path& out) {
  std::error_code ec;
  if (std::filesystem::is_directory(out, ec))
    fail("{}: the output is a directory; give a file name such as {}", out.string(),
         (out / "model.gguf").string());
  if (const auto parent = out.parent_path(); !parent.empty() && !std::filesystem::is_directory(parent, ec))
    fail("{}: the directory {} does not exist", out.string(), parent.string());
  const bool same = std::filesystem::exists(out, ec) ? std::filesystem::equivalent(in, out, ec)
                                                     : std::filesystem::weakly_canonical(in, ec) ==
                                                           std::filesystem::weakly_canonical(out, ec);
  if (same) fail("{}: the output would overwrite the input; choose another output file", out.string());
}

std::string describe(const GgufWriteReport& report) {
  std::string types;
  for (const auto& [name, count] : report.tensors_by_type)
    types += fmt::format("{}{} {}", types.empty() ? "" : ", ", name, count);
  return fmt::format("{} tensors ({}): {} -> {} ({} file) in {:.2f} s", report.tensors, types,
                     human_bytes(report.bytes_in), human_bytes(report.bytes_out),
                     human_bytes(report.file_bytes), report.seconds);
}

}  // namespace tokenmill
