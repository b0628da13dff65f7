#include "model/fused_experts.h"

#include <cstring>

#include "core/error.h"
#include "model/weight_placement.h"
#include "quant/quant_formats.h"

namespace tokenmill {

namespace {

constexpr int64_t kCodesPerBlock = quant::kBlock32;
constexpr int64_t kCodeBytes = kCodesPerBlock / 2;

// Interleaved row or column 2j + part of a gate_up tensor: gate (part 0) or up (part 1) row j.
enum Part : int64_t { kGate = 0, kUp = 1 };

// out [E rows_out, cols_out] = the [in, out] matrices of `stored` [E, in, out] transposed, taking
// their out columns `first`, first + step, ... (every column with step 1; gate or up of an
// interleaved gate_up with step 2).
Tensor transpose_columns(TensorStore& store, const Tensor& stored, int64_t experts, int64_t first,
                         int64_t step) {
  const int64_t in = stored.dim(1), out = stored.dim(2) / step;
  const size_t element = dtype_size(stored.dtype);
  Tensor t = store.allocate(stored.dtype, {experts * out, in});
  const auto* src = static_cast<const std::byte*>(stored.data);
  auto* dst = static_cast<std::byte*>(t.data);
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t r = 0; r < out; ++r)
      for (int64_t c = 0; c < in; ++c)
        std::memcpy(dst + static_cast<size_t>((e * out + r) * in + c) * element,
                    src + static_cast<size_t>((e * in + c) * stored.dim(2) + first + r * step) * element,
                    element);
  return t;
}

// One Hugging Face MXFP4 block (16 bytes of codes, code 2i low in byte i) as a ggml one.
quant::BlockMXFP4 mxfp4_block(const std::byte* codes, std::byte scale) {
  const auto code = [&](int64_t k) {
    const auto byte = std::to_integer<uint8_t>(codes[k / 2]);
    return static_cast<uint8_t>(k % 2 == 0 ? byte & 0x0F : byte >> 4);
  };
  quant::BlockMXFP4 block{};
  block.e = std::to_integer<uint8_t>(scale);
  for (int64_t j = 0; j < kCodeBytes; ++j)
    block.qs[j] = static_cast<uint8_t>(code(j) | (code(j + kCodeBytes) << 4));
  return block;
}

// The MXFP4 rows `first`, first + step, ... of each expert of `name`_blocks / _scales
// ([E, rows, cols / 32, 16] and [E, rows, cols / 32]) as [E rows / step, cols] MXFP4.
Tensor mxfp4_rows(const SafetensorsArchive& archive, TensorStore& store, const std::string& name,
                  int64_t experts, int64_t rows, int64_t cols, int64_t first, int64_t step) {
  if (cols % kCodesPerBlock != 0)
    fail("tensor '{}_blocks': rows of {} weights are not whole MXFP4 blocks of {}", name, cols,
         kCodesPerBlock);
  const int64_t blocks = cols / kCodesPerBlock, kept = rows / step;
  const auto codes = archive.bytes(name + "_blocks", "U8", {experts, rows, blocks, kCodeBytes});
  const auto scales = archive.bytes(name + "_scales", "U8", {experts, rows, blocks});
  check_room_for(host_memory(), static_cast<uint64_t>(experts * kept * blocks) * sizeof(quant::BlockMXFP4),
                 "the experts' MXFP4 weights of '" + name + "', repacked at load,");
  Tensor t = store.allocate(DType::MXFP4, {experts * kept, cols});
  auto* out = static_cast<quant::BlockMXFP4*>(t.data);
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t r = 0; r < kept; ++r) {
      const int64_t row = e * rows + first + r * step;
      for (int64_t b = 0; b < blocks; ++b)
        out[(e * kept + r) * blocks + b] = mxfp4_block(codes.data() + (row * blocks + b) * kCodeBytes,
                                                       scales[static_cast<size_t>(row * blocks + b)]);
    }
  return t;
}

// Elements `first`, first + step, ... of `stored` [E, n] as f32 [E n / step].
Tensor bias_f32(TensorStore& store, const Tensor& stored, int64_t first, int64_t step) {
  const int64_t count = stored.numel() / step;
  Tensor t = store.allocate(DType::F32, {count});
  for (int64_t i = 0; i < count; ++i)
    t.as<float>()[i] = load_as_f32(stored.data, stored.dtype, static_cast<size_t>(first + i * step));
  return t;
}

}  // namespace

ExpertStacks read_fused_experts(const SafetensorsArchive& archive, TensorStore& store,
                                const std::string& module, int64_t experts, int64_t width, int64_t hidden) {
  const std::string gate_up = module + ".gate_up_proj", down = module + ".down_proj";
  ExpertStacks s;
  if (archive.contains(gate_up + "_blocks")) {
    s.gate = mxfp4_rows(archive, store, gate_up, experts, 2 * width, hidden, kGate, 2);
    s.up = mxfp4_rows(archive, store, gate_up, experts, 2 * width, hidden, kUp, 2);
    s.down = mxfp4_rows(archive, store, down, experts, hidden, width, 0, 1);
  } else {
    const Tensor stored_gate_up = archive.tensor(gate_up, {experts, hidden, 2 * width});
    const Tensor stored_down = archive.tensor(down, {experts, width, hidden});
    check_room_for(host_memory(), stored_gate_up.nbytes() + stored_down.nbytes(),
                   "the experts' weights of '" + module + "', transposed at load,");
    s.gate = transpose_columns(store, stored_gate_up, experts, kGate, 2);
    s.up = transpose_columns(store, stored_gate_up, experts, kUp, 2);
    s.down = transpose_columns(store, stored_down, experts, 0, 1);
  }
  const Tensor gate_up_bias = archive.tensor(gate_up + "_bias", {experts, 2 * width});
  s.gate_bias = bias_f32(store, gate_up_bias, kGate, 2);
  s.up_bias = bias_f32(store, gate_up_bias, kUp, 2);
  s.down_bias = bias_f32(store, archive.tensor(down + "_bias", {experts, hidden}), 0, 1);
  return s;
}

}  // namespace tokenmill
