// Replays the committed fuzz seed corpus through the parser in every build (the libFuzzer
// target itself only exists in the clang `asan` build): each file must either parse or
// be refused with tokenmill::Error, never crash or throw anything else.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/safetensors.h"

namespace tokenmill {
namespace {

namespace fs = std::filesystem;

TEST(safetensors_corpus, EveryFileParsesOrFailsCleanly) {
  const fs::path dir = TOKENMILL_FUZZ_CORPUS_DIR;
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::vector<fs::path> files;
  for (const auto& item : fs::directory_iterator(dir)) {
    if (item.is_regular_file()) files.push_back(item.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 5u) << "seed corpus in " << dir << " looks empty";

  size_t valid = 0;
  for (const fs::path& path : files) {
    std::ifstream in(path, std::ios::binary);
    const std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(contents.data()),
                                           contents.size());
    try {
      const std::vector<SafetensorsEntry> entries = parse_safetensors(bytes, path.string());
      for (const SafetensorsEntry& e : entries) EXPECT_LE(e.offset + e.nbytes, contents.size()) << path;
      ++valid;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    }
    // Files named valid_* must parse; invalid_* must not.
    const std::string name = path.filename().string();
    if (name.starts_with("valid_")) {
      EXPECT_NO_THROW(parse_safetensors(bytes, path.string())) << path;
    } else if (name.starts_with("invalid_")) {
      EXPECT_THROW(parse_safetensors(bytes, path.string()), Error) << path;
    }
  }
  EXPECT_GE(valid, 1u);
}

}  // namespace
}  // namespace tokenmill
