// The gtest name of a test parameterized by a fixture path: "gguf/llama_q4_1.gguf" becomes
// "gguf_llama_q4_1_gguf" (gtest names allow letters, digits and underscores only).
#pragma once

#include <algorithm>
#include <cctype>
#include <string>

#include <gtest/gtest.h>

namespace tokenmill::testing {

inline std::string fixture_test_name(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  std::replace_if(
      name.begin(), name.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
  return name;
}

}  // namespace tokenmill::testing
