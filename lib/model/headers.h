#pragma once
// Headers of a route (docs/annotations.md, "Headers" and "Upgrades"): custom-headers,
// upstream-vhost, x-forwarded-prefix and allow-upgrade, with enable-access-log riding along as in
// the translator's headers family. The values are plain fields of RoutePolicy
// (lib/model/policy.h); their checks and JSON form are here, called by validate(RoutePolicy) and
// the route policy's JSON functions. CORS and HSTS have files of their own (cors.h, hsts.h).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tidegate::model {

struct RoutePolicy;
namespace detail {
class ObjectReader;
}

struct Header {
  std::string name;   // an RFC 9110 token
  std::string value;  // visible ASCII, spaces and tabs; no CR, LF or NUL
  bool operator==(const Header&) const = default;
};

// The Gateway API's RequestHeaderModifier / ResponseHeaderModifier: fields set (replacing every
// field of the name), added (beside those present) and removed, applied in that order: remove,
// then set, then add. Names are compared without case and appear at most once in each list;
// the proxy's framing fields (Connection, Content-Length, Transfer-Encoding, ...) are refused.
struct HeaderModifier {
  std::vector<Header> set;
  std::vector<Header> add;
  std::vector<std::string> remove;
  bool operator==(const HeaderModifier&) const = default;
};
inline constexpr size_t kMaxModifiedHeaders = 16;  // per list, the Gateway API's maxItems

// A response header the user may set: a token name the proxy does not manage (Connection,
// Content-Length, Transfer-Encoding, ...) and a value without control characters.
std::optional<std::string> check_response_header(std::string_view name, std::string_view value);
inline constexpr size_t kMaxResponseHeaders = 64;
// "host" or "host:port" (a DNS name, IPv4 address or bracketed IPv6 address).
std::optional<std::string> check_host_port(std::string_view text);
// An upgrade protocol a route may forward besides WebSocket (allow-upgrade): RFC 9110's
// protocol-name ["/" protocol-version], tokens, lower case; never "websocket" (always allowed)
// nor "h2c" (never forwarded: h2c smuggling).
std::optional<std::string> check_upgrade_protocol(std::string_view text);

// response_headers, forwarded_prefix, upstream_vhost, upgrade_protocols and the header
// modifiers of `p`: appends each
// problem to `problems`.
void validate_headers(const RoutePolicy& p, std::vector<std::string>& problems);
// Adds the fields that differ from their defaults to the route policy's object `j`.
void headers_to_json(const RoutePolicy& p, nlohmann::json& j);
// Reads the fields from the route policy's object (`r`), throwing as route_policy_from_json.
void headers_from_json(detail::ObjectReader& r, RoutePolicy& p);

}  // namespace tidegate::model
