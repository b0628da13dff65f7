// Fuzz seed corpora replayed as ordinary tests (the libFuzzer targets only exist in the
// clang asan build): every committed seed either parses or is refused with
// tokenmill::Error naming the file; valid_* seeds must parse, invalid_* must be refused.
#pragma once

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"

namespace tokenmill::testing {

// Calls parse(bytes, label) on every file of `dir`; the callback may check more with
// EXPECT_* and must throw tokenmill::Error for a refused file.
inline void replay_corpus(const std::filesystem::path& dir,
                          const std::function<void(std::span<const std::byte>, const std::string&)>& parse) {
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  std::vector<std::filesystem::path> files;
  for (const auto& item : std::filesystem::directory_iterator(dir))
    if (item.is_regular_file()) files.push_back(item.path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 10u) << "seed corpus in " << dir << " looks empty";

  size_t valid = 0, invalid = 0;
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    const std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(contents.data()),
                                           contents.size());
    const std::string name = path.filename().string();
    try {
      parse(bytes, path.string());
      EXPECT_TRUE(name.starts_with("valid_")) << path << " parsed, but its name says it should not";
      ++valid;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
      EXPECT_TRUE(name.starts_with("invalid_")) << path << " was refused: " << e.what();
      ++invalid;
    }
  }
  EXPECT_GE(valid, 2u);
  EXPECT_GE(invalid, 10u);
}

}  // namespace tokenmill::testing
