#include "serve/api_error.h"

namespace tokenmill {

std::string error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

ApiError api_error(int status, std::string message, std::string param, std::string code) {
  return ApiError{status, std::move(message), error_type(status), std::move(param), std::move(code)};
}

nlohmann::json error_body(const ApiError& error) {
  const auto or_null = [](const std::string& s) {
    return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
  };
  return {{"error",
           {{"message", error.message},
            {"type", error.type},
            {"param", or_null(error.param)},
            {"code", or_null(error.code)}}}};
}

}  // namespace tokenmill
