#include "formats/safetensors_writer.h"

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/checked_math.h"
#include "core/error.h"

namespace tokenmill {

namespace {

const char* safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32: return "F32";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    default: fail("safetensors: dtype {} cannot be written (f32, bf16 or f16 only)", dtype_name(dtype));
  }
}

}  // namespace

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<int64_t> shape, Fill fill) {
  for (const Entry& e : entries_)
    if (e.name == name) fail("safetensors: tensor {} added twice", name);
  safetensors_dtype(dtype);
  uint64_t count = 1;
  for (const int64_t d : shape) {
    if (d < 0) fail("safetensors: tensor {} has a negative dimension {}", name, d);
    count = checked_mul(count, static_cast<uint64_t>(d), name);
  }
  const uint64_t nbytes = checked_mul(count, dtype_size(dtype), name);
  entries_.push_back({std::move(name), dtype, std::move(shape), nbytes, std::move(fill)});
}

uint64_t SafetensorsWriter::write(const std::filesystem::path& path) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const Entry& e : entries_) {
    const uint64_t end = checked_add(offset, e.nbytes, path.string());
    header[e.name] = {
        {"dtype", safetensors_dtype(e.dtype)}, {"shape", e.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t length = text.size();
  AtomicFile file(path);
  file.write(&length, sizeof length);
  file.write(text.data(), text.size());
  std::vector<std::byte> buffer;
  for (const Entry& e : entries_) {
    buffer.assign(static_cast<size_t>(e.nbytes), std::byte{0});
    e.fill(buffer);
    file.write(buffer.data(), buffer.size());
  }
  file.commit();
  return file.written();
}

}  // namespace tokenmill
