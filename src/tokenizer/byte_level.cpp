#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace tokenmill::byte_level {
namespace {

struct Tables {
  std::array<char32_t, 256> char_of_byte{};
  std::array<std::string, 256> utf8_of_byte;
  std::array<int, 512> byte_of_char{};  // every mapped character is below U+0200

  Tables() {
    byte_of_char.fill(-1);
    char32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t cp = printable ? static_cast<char32_t>(b) : next_extra++;
      char_of_byte[b] = cp;
      utf8::append(utf8_of_byte[b], cp);
      byte_of_char[cp] = b;
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

int byte_for_char(char32_t cp) { return cp < 512 ? tables().byte_of_char[cp] : -1; }

void encode(std::string_view bytes, std::string& out) {
  const Tables& t = tables();
  out.reserve(out.size() + bytes.size() * 2);
  for (const char c : bytes) out.append(t.utf8_of_byte[static_cast<unsigned char>(c)]);
}

bool decode(std::string_view text, std::string& out) {
  const size_t original = out.size();
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp = 0;
    const size_t n = utf8::decode(text, pos, cp);
    const int b = n == 0 ? -1 : byte_for_char(cp);
    if (b < 0) {
      out.resize(original);
      return false;
    }
    out.push_back(static_cast<char>(b));
    pos += n;
  }
  return true;
}

}  // namespace tokenmill::byte_level
