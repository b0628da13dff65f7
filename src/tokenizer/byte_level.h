// GPT-2's reversible map between bytes and printable characters ("byte-level" BPE).
//
// Bytes that are printable Latin-1 ('!'..'~', '¡'..'¬', '®'..'ÿ') map to the character with
// the same code point; the other 68 bytes map, in increasing order, to U+0100, U+0101, ...
// So a space (0x20) is 'Ġ' (U+0120) and a newline is 'Ċ' (U+010A).
#pragma once

#include <string>
#include <string_view>

namespace tokenmill::byte_level {

// The byte that character `cp` stands for, or -1 if `cp` is not in the map.
int byte_for_char(char32_t cp);

// Appends the mapped form of `bytes` (each byte becomes its character) to `out`.
void encode(std::string_view bytes, std::string& out);

// Appends the bytes that `text`'s characters stand for to `out` and returns true; returns
// false (leaving `out` as it was) if `text` holds a character outside the map.
bool decode(std::string_view text, std::string& out);

}  // namespace tokenmill::byte_level
