#pragma once
// Load balancing of an upstream (docs/annotations.md, "Load balancing" and "Session affinity"):
// load-balance, upstream-hash-by, and affinity with the session-cookie-* annotations. The values
// are fields of UpstreamPolicy (lib/model/policy.h, which keeps the backend protocol and TLS);
// the affinity cookie is a struct of its own. Checks and JSON form here, called by
// validate(UpstreamPolicy) and the upstream policy's JSON functions.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tidegate::model {

struct UpstreamPolicy;
namespace detail {
class ObjectReader;
}

enum class LoadBalance : uint8_t { kRoundRobin, kLeastConn, kIpHash, kEwma };
const char* to_string(LoadBalance m);  // "round_robin", "least_conn", "ip_hash", "ewma"
std::optional<LoadBalance> load_balance_from_string(std::string_view s);

enum class SameSite : uint8_t { kUnset, kLax, kStrict, kNone };
const char* to_string(SameSite s);  // "", "Lax", "Strict", "None"
// "Lax", "Strict", "None", case-insensitive (ingress-nginx compares case-insensitively too).
std::optional<SameSite> same_site_from_string(std::string_view s);

// affinity: cookie, session-cookie-*.
struct SessionAffinity {
  static constexpr std::string_view kDefaultCookieName = "INGRESSCOOKIE";
  static constexpr int64_t kMaxMaxAgeSeconds = 400LL * 24 * 3600;  // browsers cap at 400 days

  std::string cookie_name{kDefaultCookieName};  // an RFC 6265 token
  std::optional<int64_t> max_age_seconds;       // unset: a session cookie; else 0..kMax
  // Empty: the route's path for Exact and Prefix routes, "/" for regex routes (a regex is not a
  // cookie path). Otherwise starts with '/', printable ASCII without ';'.
  std::string path;
  bool secure = false;  // SameSite=None forces Secure on the wire
  SameSite same_site = SameSite::kUnset;
  // session-cookie-domain: the cookie's Domain attribute (a lower-case DNS name, an optional
  // leading '.'); empty: none (the cookie stays with the host that set it).
  std::string domain = {};
  // session-cookie-expires: an Expires attribute this many seconds after the response (for
  // clients older than Max-Age); unset: none. 0..kMaxMaxAgeSeconds.
  std::optional<int64_t> expires_seconds = {};
  bool operator==(const SessionAffinity&) const = default;
};

// A hash-key expression as dataplane/balancer/hash_expression.h compiles it: literal text and
// $remote_addr, $request_uri, $http_<name>, $cookie_<name>, $arg_<name> (or ${...}).
std::optional<std::string> check_hash_expression(std::string_view text);
// session-cookie-domain: a lower-case DNS name, optionally with a leading '.'.
std::optional<std::string> check_cookie_domain(std::string_view domain);

std::vector<std::string> validate(const SessionAffinity& a);
nlohmann::json to_json(const SessionAffinity& a);
SessionAffinity session_affinity_from_json(const nlohmann::json& j);

// hash_by and affinity of `p` (load_balance has no invalid value): appends each problem to
// `problems`.
void validate_balancing(const UpstreamPolicy& p, std::vector<std::string>& problems);
// Adds load_balance, hash_by and affinity where they differ from their defaults to the upstream
// policy's object `j`.
void balancing_to_json(const UpstreamPolicy& p, nlohmann::json& j);
// Reads them from the upstream policy's object (`r`), throwing as upstream_policy_from_json.
void balancing_from_json(detail::ObjectReader& r, UpstreamPolicy& p);

}  // namespace tidegate::model
