// Replays the committed GGUF fuzz seed corpus through the parser in every build (the
// libFuzzer target itself only exists in the clang `asan` build): each file must either
// parse or be refused with tokenmill::Error naming the file, never crash or throw anything
// else. Files named valid_* must parse; invalid_* must be refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/gguf.h"

namespace tokenmill {
namespace {

namespace fs = std::filesystem;

TEST(gguf_corpus, EveryFileParsesOrFailsCleanly) {
  const fs::path dir = TOKENMILL_FUZZ_CORPUS_DIR;
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::vector<fs::path> files;
  for (const auto& item : fs::directory_iterator(dir)) {
    if (item.is_regular_file()) files.push_back(item.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 10u) << "seed corpus in " << dir << " looks empty";

  size_t valid = 0;
  size_t invalid = 0;
  for (const fs::path& path : files) {
    std::ifstream in(path, std::ios::binary);
    const std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(contents.data()),
                                           contents.size());
    const std::string name = path.filename().string();
    try {
      const GgufFile f = GgufFile::parse(bytes, path.string());
      for (const GgufTensorInfo& t : f.tensors()) {
        if (t.nbytes > 0) {
          EXPECT_LE(t.offset + t.nbytes, contents.size()) << path;
        }
        EXPECT_EQ(f.tensor_data(t).size(), t.nbytes) << path;
      }
      for (const std::string& key : f.keys()) EXPECT_TRUE(f.has(key)) << path << " " << key;
      EXPECT_TRUE(name.starts_with("valid_")) << path << " parsed, but its name says it should not";
      ++valid;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
      EXPECT_TRUE(name.starts_with("invalid_")) << path << " was refused: " << e.what();
      ++invalid;
    }
  }
  EXPECT_GE(valid, 3u);
  EXPECT_GE(invalid, 10u);
}

}  // namespace
}  // namespace tokenmill
