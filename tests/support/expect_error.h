// expect_error: the call must throw tokenmill::Error whose message contains every part.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"

namespace tokenmill::testing {

inline void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "message: " << message << "\nmissing: " << part;
    return;
  }
  ADD_FAILURE() << "expected a tokenmill::Error mentioning '" << (parts.empty() ? "" : parts.front()) << "'";
}

}  // namespace tokenmill::testing
