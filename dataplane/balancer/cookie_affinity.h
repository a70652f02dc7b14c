#pragma once
// Cookie session affinity (affinity: cookie, session-cookie-*): the first response pins the
// client to an endpoint with a cookie whose value is that endpoint's stable hash
// (EndpointTable::endpoint_hash, 16 hex digits). Later requests go to the endpoint the cookie
// names for as long as that endpoint is in the table, whatever else changes; when it leaves, the
// balancer picks a new one and the response carries a new cookie. The value names no address and
// is the same in every data-plane replica.
//
// Request path:
//   auto cookies = request.find_header("cookie");
//   uint32_t i = affinity.endpoint_for(table, cookies);           // kNone: no valid cookie
//   if (i == kNone || tried.contains(i)) i = balancer.pick(...);   // the endpoint failed: move
//   ... after the response header from endpoint i:
//   if (affinity.needs_cookie(table, cookies, i)) add Set-Cookie: affinity.set_cookie(table, i)

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "balancer/endpoint_table.h"

namespace tidegate::dataplane::balancer {

enum class SameSite : uint8_t { kUnset, kLax, kStrict, kNone };
// "Lax", "Strict", "None" (case-insensitive).
std::optional<SameSite> same_site_from_string(std::string_view s);

struct AffinityConfig {
  std::string cookie_name = "INGRESSCOOKIE";  // ingress-nginx's default name
  // Unset: a session cookie (gone when the browser closes), as in ingress-nginx.
  std::optional<std::chrono::seconds> max_age;
  std::string path = "/";
  bool secure = false;  // forced on with SameSite=None, which browsers reject without it
  SameSite same_site = SameSite::kUnset;
  std::string domain;  // Domain attribute; empty: none
  // Set: an Expires attribute this long after the response (session-cookie-expires).
  std::optional<std::chrono::seconds> expires;

  // A cookie name must be an RFC 6265 token; a path must be printable ASCII without ';'.
  std::optional<std::string> validate() const;
  bool operator==(const AffinityConfig&) const = default;
};

class CookieAffinity {
 public:
  static constexpr uint32_t kNone = EndpointTable::kNone;

  explicit CookieAffinity(AffinityConfig config) : config_(std::move(config)) {}

  // The endpoint named by this affinity's cookie in a Cookie field value, if it is in `table`.
  // Allocation-free.
  uint32_t endpoint_for(const EndpointTable& table, std::string_view cookie_header) const;
  // Whether the response must (re)set the cookie: the request's cookie does not name `picked`.
  bool needs_cookie(const EndpointTable& table, std::string_view cookie_header,
                    uint32_t picked) const;
  // The Set-Cookie field value pinning the client to endpoint `index`, e.g.
  // "INGRESSCOOKIE=1f0a...; Path=/; Max-Age=3600; Secure; HttpOnly; SameSite=Lax".
  std::string set_cookie(const EndpointTable& table, uint32_t index) const {
    return set_cookie(table, index, config_.path);
  }
  // The same with another Path (the route's, when the configuration leaves the path to it).
  std::string set_cookie(const EndpointTable& table, uint32_t index, std::string_view path) const;
  // The cookie value for an endpoint hash (16 lower-case hex digits) and back.
  static std::string cookie_value(uint64_t endpoint_hash);
  static std::optional<uint64_t> parse_cookie_value(std::string_view value);

  const AffinityConfig& config() const { return config_; }

 private:
  AffinityConfig config_;
};

}  // namespace tidegate::dataplane::balancer
