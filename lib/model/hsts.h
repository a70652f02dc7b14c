#pragma once
// HSTS of a route (docs/annotations.md, "HSTS"): its own family of the route policy
// (RoutePolicy::hsts), with its header value, checks and JSON form here.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tidegate::model {

// hsts: Strict-Transport-Security on the route's HTTPS responses (never on plain HTTP, RFC 6797
// section 7.2), replacing one the backend sent. Defaults as ingress-nginx's hsts-* settings.
struct Hsts {
  static constexpr int64_t kMaxMaxAgeSeconds = 2'147'483'647;
  int64_t max_age_seconds = 31'536'000;  // one year; 0 tells browsers to forget the host
  bool include_subdomains = true;
  bool preload = false;
  bool operator==(const Hsts&) const = default;
};
// The header's value: "max-age=31536000; includeSubDomains; preload".
std::string hsts_value(const Hsts& h);

std::vector<std::string> validate(const Hsts& h);
nlohmann::json to_json(const Hsts& h);
Hsts hsts_from_json(const nlohmann::json& j);

}  // namespace tidegate::model
