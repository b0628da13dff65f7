// API errors: what the HTTP server answers when a request cannot be served, in OpenAI's
// shape: HTTP status + {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tokenmill {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type;   // see error_type()
  std::string param;  // the offending field ("messages[2].content"); "" is sent as null
  std::string code;   // machine-readable ("model_not_found"); "" is sent as null
};

// The error type for an HTTP status: 401 "authentication_error", 403 "permission_error",
// 404 "not_found_error", 429 "rate_limit_error", 5xx "server_error", any other 4xx
// "invalid_request_error".
std::string error_type(int status);

// An ApiError with the type error_type(status).
ApiError api_error(int status, std::string message, std::string param = "", std::string code = "");

// Thrown by the protocol layer; a tokenmill::Error whose what() is the message, so code that
// only knows Error still reports it.
class ApiException : public Error {
 public:
  explicit ApiException(ApiError error) : Error(error.message), error_(std::move(error)) {}
  const ApiError& error() const { return error_; }

 private:
  ApiError error_;
};

// Throws a 400 invalid_request_error naming `param`, with a fmt-formatted message.
template <class... Args>
[[noreturn]] void fail_request(std::string param, fmt::format_string<Args...> format, Args&&... args) {
  throw ApiException(api_error(400, fmt::format(format, std::forward<Args>(args)...), std::move(param)));
}

// {"error": {"message", "type", "param", "code"}}; empty param and code are null.
nlohmann::json error_body(const ApiError& error);

}  // namespace tokenmill
