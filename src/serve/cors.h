// CorsPolicy: which browser origins may call the API from their pages (CORS). With no origin
// configured the server sends no CORS headers, so browsers let only same-origin pages (the
// web UI) read its answers. With origins ("https://app.example.com", or "*" for any), a
// request whose Origin is allowed gets Access-Control-Allow-Origin (and Vary: Origin) on
// every answer, errors included, and preflight requests (OPTIONS with
// Access-Control-Request-Method) are answered 204 with the methods (GET, POST) and the
// request headers the page asked for; a preflight from another origin is 403.
#pragma once

#include <httplib.h>

#include <string>
#include <vector>

namespace tokenmill {

class CorsPolicy {
 public:
  // `origins`: exact origins (scheme://host[:port]) or "*". Throws Error for a malformed one.
  explicit CorsPolicy(std::vector<std::string> origins);

  bool enabled() const { return !origins_.empty(); }
  // Adds the CORS headers to `res` when the request's Origin is allowed.
  void annotate(const httplib::Request& req, httplib::Response& res) const;
  // Answers a preflight request (OPTIONS) from an allowed origin, annotated already; false
  // for another origin (the caller answers 403).
  bool preflight(const httplib::Request& req, httplib::Response& res) const;

 private:
  bool allowed(const std::string& origin) const;

  std::vector<std::string> origins_;
};

}  // namespace tokenmill
