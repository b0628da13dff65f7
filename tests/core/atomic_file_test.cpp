// AtomicFile: the old file survives until commit(); an abandoned write leaves no trace.
#include <gtest/gtest.h>

#include <string>

#include "core/atomic_file.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace tokenmill {
namespace {

using testing::expect_error;
using testing::TempDir;

TEST(AtomicFile, ReplacesTheFileOnlyOnCommit) {
  const TempDir dir;
  const auto path = dir.write("data", "old");
  {
    AtomicFile file(path);
    file.write("new contents", 12);
    EXPECT_EQ(dir.read("data"), "old");  // readers still see the old file
    EXPECT_TRUE(std::filesystem::exists(path.string() + ".tmp"));
    file.commit();
    EXPECT_EQ(file.written(), 12u);
  }
  EXPECT_EQ(dir.read("data"), "new contents");
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
}

TEST(AtomicFile, AbandonedWriteKeepsTheOldFile) {
  const TempDir dir;
  const auto path = dir.write("data", "old");
  try {
    AtomicFile file(path);
    file.write("partial", 7);
    throw std::runtime_error("interrupted");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(dir.read("data"), "old");
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
}

TEST(AtomicFile, ErrorsNameTheFile) {
  const TempDir dir;
  expect_error([&] { AtomicFile file(dir.path() / "missing_dir" / "x"); },
               {"missing_dir/x.tmp", "cannot create"});
  AtomicFile file(dir.path() / "y");
  file.commit();
  expect_error([&] { file.write("z", 1); }, {"y.tmp", "after the file was committed"});
  expect_error([&] { file.commit(); }, {"commit after"});
}

}  // namespace
}  // namespace tokenmill
