// The web UI: one self-contained HTML page (chat playground and live dashboard, inline CSS
// and JavaScript, no external resources) that GET / serves. Its source is
// src/serve/web/index.html, compiled into the binary at build time (cmake/embed_file.cmake).
#pragma once

#include <string_view>

namespace tokenmill {

// The page's bytes (UTF-8 HTML), valid for the life of the program.
std::string_view web_ui_html();

}  // namespace tokenmill
