// libFuzzer target for the GGUF reader.
//
// GgufFile::parse must accept a well-formed file or throw tokenmill::Error; any other
// exception, a crash, or a sanitizer report (out-of-bounds read, overflow, leak) is a bug.
// Whatever is accepted is then read back through every getter that fits each value, so
// the lazily decoded values (string arrays, integer arrays) are exercised too.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/error.h"
#include "formats/gguf.h"

namespace {

using tokenmill::GgufFile;
using tokenmill::GgufType;

void read_every_value(const GgufFile& f) {
  for (const std::string& key : f.keys()) {
    const GgufType type = f.type_of(key);
    try {
      switch (type) {
        case GgufType::STRING: (void)f.get_string(key); break;
        case GgufType::BOOL: (void)f.get_bool(key); break;
        case GgufType::F32:
        case GgufType::F64: (void)f.get_float(key); break;
        case GgufType::ARRAY: {
          const GgufType element = f.array_type(key);
          if (element == GgufType::STRING) {
            const auto strings = f.get_string_view_array(key);
            if (strings.size() != f.array_size(key)) __builtin_trap();
          } else if (element == GgufType::F32 || element == GgufType::F64) {
            (void)f.get_float_array(key);
          } else if (element != GgufType::ARRAY && element != GgufType::BOOL) {
            (void)f.get_int_array(key);  // U64 elements > INT64_MAX throw Error
          }
          break;
        }
        default: (void)f.get_int(key); break;  // U64 > INT64_MAX throws Error
      }
    } catch (const tokenmill::Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const GgufFile f = GgufFile::parse(bytes, "fuzz input");
    // Whatever is accepted must describe bytes inside the input.
    for (const tokenmill::GgufTensorInfo& t : f.tensors()) {
      if (t.nbytes > 0 && (t.offset > size || t.nbytes > size - t.offset)) __builtin_trap();
      if (f.tensor_data(t).size() != t.nbytes) __builtin_trap();
      if (f.find_tensor(t.name) != &t) __builtin_trap();
    }
    if (f.alignment() == 0 || (f.alignment() & (f.alignment() - 1)) != 0) __builtin_trap();
    read_every_value(f);
  } catch (const tokenmill::Error&) {
    // Refusing bad input is the expected outcome.
  }
  return 0;
}
