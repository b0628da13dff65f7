// tokenmill::Error: the one exception type for user-facing failures.
//
// Contract: the message says what went wrong, where (file, tensor, flag) and, when
// there is one, what to do about it. The CLI prints "error: <message>" and exits
// non-zero; nothing below the CLI prints or exits on its own.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace tokenmill {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws Error with a fmt-formatted message.
template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tokenmill
