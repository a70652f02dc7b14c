#pragma once
// Timeouts, body size and retries of a route (docs/annotations.md, "Timeouts, body size and
// retries"): the proxy-*-timeout, proxy-next-upstream* and proxy-body-size annotations, as the
// translator's timeouts family reads them. The values are plain fields of RoutePolicy
// (lib/model/policy.h); their checks and JSON form are here, called by validate(RoutePolicy) and
// the route policy's JSON functions.

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tidegate::model {

struct RoutePolicy;
namespace detail {
class ObjectReader;
}

// proxy-next-upstream: which failures of an attempt move the request to another endpoint.
// Default "error timeout" (nginx's and today's: connect failures and failures before any response
// byte). All false is "off".
struct NextUpstream {
  bool error = true;    // connection refused/reset, or closed before a response header
  bool timeout = true;  // connect timeout, or read timeout before a response header
  bool http_502 = false;
  bool http_503 = false;
  bool http_504 = false;
  // Also retry non-idempotent methods (POST, PATCH, LOCK...). Off: only GET, HEAD, PUT, DELETE,
  // OPTIONS, TRACE are moved after a request byte was sent.
  bool non_idempotent = false;
  bool off() const { return !error && !timeout && !http_502 && !http_503 && !http_504; }
  std::string to_string() const;  // "error timeout http_502", or "off"
  bool operator==(const NextUpstream&) const = default;
};

// connect/read/send timeouts, max_body_bytes, next_upstream, next_upstream_tries,
// next_upstream_timeout and request_timeout of `p`: appends each problem to `problems`.
void validate_timeouts(const RoutePolicy& p, std::vector<std::string>& problems);
// Adds the fields that differ from their defaults to the route policy's object `j`.
void timeouts_to_json(const RoutePolicy& p, nlohmann::json& j);
// Reads the fields from the route policy's object (`r`), throwing as route_policy_from_json.
void timeouts_from_json(detail::ObjectReader& r, RoutePolicy& p);

}  // namespace tidegate::model
