#pragma once
// CORS of a route (docs/annotations.md, "CORS"): its own family of the route policy
// (RoutePolicy::cors), with its checks and JSON form here rather than in policy.cc.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tidegate::model {

// enable-cors and cors-*. Defaults are ingress-nginx's.
struct Cors {
  static constexpr int64_t kMaxMaxAgeSeconds = 1728000 * 10;

  // "*" alone, or origins "http(s)://host[:port]" where the host may start with "*." (one or
  // more labels). A request's Origin that matches one of them is echoed back; with "*" the answer
  // is a literal "*", and Access-Control-Allow-Credentials is then never sent (browsers refuse
  // credentials with "*").
  std::vector<std::string> allow_origins{"*"};
  std::vector<std::string> allow_methods{"GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"};
  // Tokens, or "*" alone.
  std::vector<std::string> allow_headers{
      "DNT",           "Keep-Alive",   "User-Agent", "X-Requested-With", "If-Modified-Since",
      "Cache-Control", "Content-Type", "Range",      "Authorization"};
  std::vector<std::string> expose_headers;  // tokens, or "*" alone; empty: none sent
  bool allow_credentials = true;
  int64_t max_age_seconds = 1728000;  // Access-Control-Max-Age (20 days); 0..kMax
  // The Gateway API's CORS filter (docs/gateway-api.md, "CORS") rather than enable-cors:
  //  - every preflight (OPTIONS with Origin and Access-Control-Request-Method) is answered by
  //    the proxy, 204, with the CORS fields only when the origin is allowed (enable-cors sends
  //    the preflight of an origin that is not allowed to the backend);
  //  - with allow_credentials, a "*" in allow_origins, allow_methods or allow_headers is
  //    answered with the request's own value (Origin, Access-Control-Request-Method,
  //    Access-Control-Request-Headers; left out when the request has none) and
  //    Access-Control-Allow-Credentials is sent, since browsers refuse "*" with credentials
  //    (enable-cors answers "*" literally and then never sends credentials).
  bool gateway_api = false;
  bool operator==(const Cors&) const = default;
};

// "*" or "http(s)://host[:port]", the host optionally starting with "*.".
std::optional<std::string> check_cors_origin(std::string_view text);

std::vector<std::string> validate(const Cors& c);
nlohmann::json to_json(const Cors& c);
Cors cors_from_json(const nlohmann::json& j);

}  // namespace tidegate::model
