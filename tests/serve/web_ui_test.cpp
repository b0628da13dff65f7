// The page the server embeds is src/serve/web/index.html byte for byte (the build step that
// turns it into a C++ array loses nothing), and it loads nothing from elsewhere: src and
// href attributes only hold data: URIs, no CSS url() or @import, and "http" only in the SVG
// namespace name.
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "serve/web_ui.h"

namespace tokenmill {
namespace {

TEST(WebUi, EmbedsTheSourcePageByteForByte) {
  const std::string path = TOKENMILL_FIXTURES_DIR "/../../src/serve/web/index.html";
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path;
  const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(web_ui_html(), source);
  EXPECT_TRUE(web_ui_html().starts_with("<!DOCTYPE html>"));
}

TEST(WebUi, LoadsNothingFromElsewhere) {
  const std::string page(web_ui_html());
  for (const std::string reference : {"src=", "href="})
    for (size_t at = page.find(reference); at != std::string::npos; at = page.find(reference, at + 1))
      EXPECT_EQ(page.compare(at + reference.size(), 6, "\"data:"), 0) << page.substr(at, 60);
  for (const char* reference : {"url(", "@import"})
    EXPECT_EQ(page.find(reference), std::string::npos) << reference;
  const std::string svg_namespace = "http://www.w3.org/2000/svg";
  for (size_t at = page.find("http"); at != std::string::npos; at = page.find("http", at + 1)) {
    if (page.compare(at, 5, "http:") != 0 && page.compare(at, 6, "https:") != 0) continue;
    EXPECT_EQ(page.compare(at, svg_namespace.size(), svg_namespace), 0) << page.substr(at, 60);
  }
}

}  // namespace
}  // namespace tokenmill
