// libFuzzer target for the safetensors header parser.
//
// parse_safetensors must accept a well-formed file or throw tokenmill::Error; any other
// exception, a crash, or a sanitizer report (out-of-bounds read, overflow, leak) is a bug.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/error.h"
#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  try {
    const auto entries = tokenmill::parse_safetensors(file, "fuzz input");
    // Whatever is accepted must describe bytes inside the input.
    for (const tokenmill::SafetensorsEntry& e : entries) {
      if (e.offset > size || e.nbytes > size - e.offset) __builtin_trap();
    }
  } catch (const tokenmill::Error&) {
    // Refusing bad input is the expected outcome.
  }
  return 0;
}
