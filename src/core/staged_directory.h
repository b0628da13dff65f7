// StagedDirectory: a directory of files written beside its destination and put in place only
// when every file is written, so a failure half-way never leaves a half-written directory.
//
// The files go to a hidden sibling, <parent>/.<name>.staging-<pid>. publish() renames it to
// the destination when that does not exist (one atomic rename), or, when the destination is
// an existing directory, renames each staged file into it (each replacing a file of the same
// name atomically; the destination's other files stay). Destroyed before publish() (an
// exception on the way), it removes the staging directory and the destination is untouched.
#pragma once

#include <filesystem>

namespace tokenmill {

class StagedDirectory {
 public:
  // Creates the staging directory (and the destination's parent); throws Error naming it if
  // it cannot, or if the destination exists and is not a directory.
  explicit StagedDirectory(std::filesystem::path destination);
  ~StagedDirectory();
  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;

  // Where the files are to be written.
  const std::filesystem::path& path() const { return staging_; }
  // Puts the files in place (above); throws Error naming the file on failure. Call once.
  void publish();

 private:
  std::filesystem::path destination_, staging_;
  bool published_ = false;
};

}  // namespace tokenmill
