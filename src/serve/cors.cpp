#include "serve/cors.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace tokenmill {

CorsPolicy::CorsPolicy(std::vector<std::string> origins) : origins_(std::move(origins)) {
  for (std::string& origin : origins_) {
    while (!origin.empty() && origin.back() == '/')
      origin.pop_back();  // "https://a.example/" is an origin too
    const bool well_formed =
        origin == "*" || ((origin.starts_with("http://") || origin.starts_with("https://")) &&
                          origin.find('/', origin.find("//") + 2) == std::string::npos);
    if (!well_formed)
      fail("--allowed-origins: '{}' is not an origin: write scheme://host[:port] (no path), or * for any",
           origin);
  }
}

bool CorsPolicy::allowed(const std::string& origin) const {
  if (origin.empty()) return false;
  return std::any_of(origins_.begin(), origins_.end(),
                     [&](const std::string& o) { return o == "*" || o == origin; });
}

void CorsPolicy::annotate(const httplib::Request& req, httplib::Response& res) const {
  const std::string origin = req.get_header_value("Origin");
  if (!allowed(origin)) return;
  res.set_header("Access-Control-Allow-Origin", origin);
  res.set_header("Vary", "Origin");
}

bool CorsPolicy::preflight(const httplib::Request& req, httplib::Response& res) const {
  if (!allowed(req.get_header_value("Origin"))) return false;  // annotate() has run for every request
  res.status = 204;
  res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
  const std::string asked = req.get_header_value("Access-Control-Request-Headers");
  res.set_header("Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : asked);
  res.set_header("Access-Control-Max-Age", "600");
  return true;
}

}  // namespace tokenmill
