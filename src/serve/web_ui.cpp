#include "serve/web_ui.h"

#include <cstddef>

namespace tokenmill {
namespace embedded {

// Defined in the build directory's web_ui_html.cpp, generated from src/serve/web/index.html.
extern const unsigned char web_ui_html[];
extern const std::size_t web_ui_html_size;

}  // namespace embedded

std::string_view web_ui_html() {
  return {reinterpret_cast<const char*>(embedded::web_ui_html), embedded::web_ui_html_size};
}

}  // namespace tokenmill
