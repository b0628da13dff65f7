// DynamicLibrary: a shared library opened at run time with dlopen. The doctor reaches every
// GPU library this way, so the binary links none of them and runs, and reports, on machines
// that lack them. Libraries are opened RTLD_NODELETE: closing the handle never unmaps the
// code, because libcuda and NVML keep threads running after their init calls.
#pragma once

#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tokenmill::doctor {

// Where a library was found, or why not.
struct LibraryLoad {
  bool loaded = false;  // found, and it is the library the caller wants
  std::string path;     // the file loaded
  std::string error;    // dlerror() or a missing symbol, when not usable
};

class DynamicLibrary {
 public:
  // Opens the first of `names` that loads: through the dynamic linker's own search
  // (LD_LIBRARY_PATH, ld.so.cache) when `dirs` is nullopt, else each name in each of `dirs`
  // in order (dir/name; no directory: nothing loads). When none loads, loaded() is false and
  // error() says why (the last dlerror()).
  static DynamicLibrary open(std::span<const std::string> names,
                             const std::optional<std::vector<std::string>>& dirs);

  DynamicLibrary(DynamicLibrary&& other) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  ~DynamicLibrary();

  // open(), recording in `load` the file loaded or why none did; load.loaded is left to the
  // caller, which sets it once the library proves to be the one it wants.
  static DynamicLibrary open(std::span<const std::string> names,
                             const std::optional<std::vector<std::string>>& dirs, LibraryLoad& load);

  bool loaded() const { return handle_ != nullptr; }
  const std::string& path() const { return path_; }    // the file loaded (resolved by the linker)
  const std::string& error() const { return error_; }  // why nothing loaded

  // The exported function `name` as a `Fn*` (the caller states its C signature), or
  // nullptr when the library does not export it.
  template <class Fn>
  Fn* function(const char* name) const {
    void* address = raw_symbol(name);
    Fn* fn = nullptr;
    static_assert(sizeof(fn) == sizeof(address));
    std::memcpy(&fn, &address, sizeof(fn));  // object to function pointer, as POSIX dlsym allows
    return fn;
  }

 private:
  DynamicLibrary() = default;
  void* raw_symbol(const char* name) const;

  void* handle_ = nullptr;
  std::string path_;
  std::string error_;
};

}  // namespace tokenmill::doctor
