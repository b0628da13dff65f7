// Replays the committed safetensors fuzz seed corpus through the parser in every build.
#include <gtest/gtest.h>

#include "formats/safetensors.h"
#include "support/corpus.h"

namespace tokenmill {
namespace {

TEST(safetensors_corpus, EveryFileParsesOrFailsCleanly) {
  testing::replay_corpus(TOKENMILL_FUZZ_CORPUS_DIR,
                         [](std::span<const std::byte> bytes, const std::string& label) {
                           for (const SafetensorsEntry& e : parse_safetensors(bytes, label))
                             EXPECT_LE(e.offset + e.nbytes, bytes.size());
                         });
}

}  // namespace
}  // namespace tokenmill
