#include "doctor/dynamic_library.h"

#include <dlfcn.h>
#include <link.h>

#include <filesystem>
#include <utility>

#include <fmt/format.h>

namespace tokenmill::doctor {

namespace {

// The file the linker actually mapped for `handle` (resolves a bare soname to its path).
std::string loaded_path(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0')
    return map->l_name;
  return fallback;
}

}  // namespace

DynamicLibrary DynamicLibrary::open(std::span<const std::string> names,
                                    const std::optional<std::vector<std::string>>& dirs) {
  DynamicLibrary library;
  const auto try_open = [&library](const std::string& file) {
    if (void* handle = dlopen(file.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE)) {
      library.handle_ = handle;
      library.path_ = loaded_path(handle, file);
      library.error_.clear();
      return true;
    }
    const char* why = dlerror();
    library.error_ = why != nullptr ? why : file + ": cannot be loaded";
    return false;
  };
  for (const std::string& name : names) {
    if (!dirs) {
      if (try_open(name)) return library;
      continue;
    }
    for (const std::string& dir : *dirs)
      if (try_open((std::filesystem::path(dir) / name).string())) return library;
  }
  if (library.error_.empty())
    library.error_ = fmt::format("{}: not found (no directory to search)", names.front());
  return library;
}

DynamicLibrary DynamicLibrary::open(std::span<const std::string> names,
                                    const std::optional<std::vector<std::string>>& dirs, LibraryLoad& load) {
  DynamicLibrary library = open(names, dirs);
  load.path = library.path_;
  load.error = library.error_;
  return library;
}

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      path_(std::move(other.path_)),
      error_(std::move(other.error_)) {}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    path_ = std::move(other.path_);
    error_ = std::move(other.error_);
  }
  return *this;
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

void* DynamicLibrary::raw_symbol(const char* name) const {
  return handle_ != nullptr ? dlsym(handle_, name) : nullptr;
}

}  // namespace tokenmill::doctor
