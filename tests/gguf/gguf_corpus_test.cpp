// Replays the committed GGUF fuzz seed corpus through the parser in every build.
#include <gtest/gtest.h>

#include "formats/gguf.h"
#include "support/corpus.h"

namespace tokenmill {
namespace {

TEST(gguf_corpus, EveryFileParsesOrFailsCleanly) {
  testing::replay_corpus(TOKENMILL_FUZZ_CORPUS_DIR,
                         [](std::span<const std::byte> bytes, const std::string& label) {
                           const GgufFile f = GgufFile::parse(bytes, label);
                           for (const GgufTensorInfo& t : f.tensors()) {
                             if (t.nbytes > 0) {
                               EXPECT_LE(t.offset + t.nbytes, bytes.size()) << label;
                             }
                             EXPECT_EQ(f.tensor_data(t).size(), t.nbytes) << label;
                           }
                           for (const std::string& key : f.keys())
                             EXPECT_TRUE(f.has(key)) << label << " " << key;
                         });
}

}  // namespace
}  // namespace tokenmill
