#include "core/staged_directory.h"

#include <unistd.h>

#include <vector>

#include "core/error.h"

namespace tokenmill {

StagedDirectory::StagedDirectory(std::filesystem::path destination) : destination_(std::move(destination)) {
  if (destination_.filename().empty()) destination_ = destination_.parent_path();
  std::error_code ec;
  if (std::filesystem::exists(destination_, ec) && !std::filesystem::is_directory(destination_, ec))
    fail("{}: exists and is not a directory", destination_.string());
  staging_ = destination_.parent_path() /
             fmt::format(".{}.staging-{}", destination_.filename().string(), ::getpid());
  std::filesystem::remove_all(staging_, ec);
  std::filesystem::create_directories(staging_, ec);
  if (ec) fail("{}: cannot create the directory ({})", staging_.string(), ec.message());
}

StagedDirectory::~StagedDirectory() {
  if (published_) return;
  std::error_code ec;
  std::filesystem::remove_all(staging_, ec);
}

void StagedDirectory::publish() {
  std::error_code ec;
  if (!std::filesystem::exists(destination_, ec)) {
    std::filesystem::rename(staging_, destination_, ec);
    if (ec) fail("{}: cannot rename to {} ({})", staging_.string(), destination_.string(), ec.message());
    published_ = true;
    return;
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(staging_, ec)) files.push_back(entry.path());
  if (ec) fail("{}: cannot list ({})", staging_.string(), ec.message());
  for (const auto& file : files) {
    std::filesystem::rename(file, destination_ / file.filename(), ec);
    if (ec) fail("{}: cannot move into {} ({})", file.string(), destination_.string(), ec.message());
  }
  std::filesystem::remove_all(staging_, ec);
  published_ = true;
}

}  // namespace tokenmill
