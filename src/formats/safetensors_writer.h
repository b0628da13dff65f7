// SafetensorsWriter: writes one safetensors file (the layout safetensors.h reads).
//
// Tensors are added with a name, a dtype (f32, bf16, f16), a shape and a function that
// fills their bytes; write() lays them out in the order added (offsets contiguous from 0),
// pads the JSON header with spaces to a multiple of 8 bytes, and writes the file
// atomically (core/atomic_file.h), one tensor in memory at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace tokenmill {

class SafetensorsWriter {
 public:
  using Fill = std::function<void(std::span<std::byte> out)>;

  // Throws Error for a duplicate name, a dtype other than f32/bf16/f16 or a negative dim.
  void add(std::string name, DType dtype, std::vector<int64_t> shape, Fill fill);
  void set_metadata(std::map<std::string, std::string> metadata) { metadata_ = std::move(metadata); }
  // Returns the bytes written.
  uint64_t write(const std::filesystem::path& path) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t nbytes;
    Fill fill;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace tokenmill
