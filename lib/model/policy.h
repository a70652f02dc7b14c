#pragma once
// Per-Ingress traffic policy (issue #6) as plain value types: what the controller's annotation
// parser (controller/translate/annotations.h) produces and what the routing model carries
// (Route::policy, Route::canary, Upstream::policy in model.h).
// Defaults equal today's behaviour of the data plane (dataplane/server/limits.h): a
// default-constructed policy changes nothing.
//
// The split follows what nginx users expect and what needs shared state in the data plane:
//   UpstreamPolicy — how a backend is chosen and connected to: load balancing, consistent
//     hashing, cookie affinity, backend protocol and TLS. These need per-upstream state (balancer
//     tables, hash rings, affinity cookies naming endpoints, connection pools), so they belong to
//     the model's Upstream, and two Ingresses sharing a Service port must agree on them.
//   RoutePolicy — what happens to one request on one route (nginx's `location`): timeouts,
//     retries, body size, rewrites and redirects, headers, CORS, source ranges and rate limits.
//   Canary — how a second Ingress for the same host and path becomes a weighted or conditional
//     alternative backend of the main route (docs/annotations.md, "Canary").
//
// Every struct has operator==, validate() (empty == valid; the data plane must call it on what
// it decodes, as it cannot trust the wire more than the controller) and JSON functions that the
// control protocol calls. The JSON form omits fields that have their default value, so a default
// policy is `{}`; decoding fills the defaults back in and refuses unknown fields, so an old data
// plane NACKs a policy it would otherwise half-apply.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/auth.h"
#include "model/compression.h"
#include "model/cors.h"
#include "model/external_auth.h"
#include "model/sendfile.h"

namespace tidegate::model {

// ---- Upstream (backend) policy ----

enum class LoadBalance : uint8_t { kRoundRobin, kLeastConn, kIpHash, kEwma };
const char* to_string(LoadBalance m);  // "round_robin", "least_conn", "ip_hash", "ewma"
std::optional<LoadBalance> load_balance_from_string(std::string_view s);

enum class SameSite : uint8_t { kUnset, kLax, kStrict, kNone };
const char* to_string(SameSite s);  // "", "Lax", "Strict", "None"
// "Lax", "Strict", "None", case-insensitive (ingress-nginx compares case-insensitively too).
std::optional<SameSite> same_site_from_string(std::string_view s);

// How the data plane speaks to a backend: HTTP/1.1 (kHttp, kHttps over TLS) or HTTP/2 (kH2c
// cleartext with prior knowledge, kH2 over TLS with ALPN h2). The annotation's GRPC is kH2c and
// GRPCS is kH2: gRPC is HTTP/2 with trailers, which both carry (docs/annotations.md).
enum class BackendProtocol : uint8_t { kHttp, kHttps, kH2c, kH2 };
const char* to_string(BackendProtocol p);  // "HTTP", "HTTPS", "H2C", "H2"
// Any case: HTTP, HTTPS, H2C, H2 (the annotation's GRPC and GRPCS are the translator's).
std::optional<BackendProtocol> backend_protocol_from_string(std::string_view s);
inline bool uses_tls(BackendProtocol p) {
  return p == BackendProtocol::kHttps || p == BackendProtocol::kH2;
}
inline bool uses_http2(BackendProtocol p) {
  return p == BackendProtocol::kH2c || p == BackendProtocol::kH2;
}

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

struct UpstreamPolicy {
  LoadBalance load_balance = LoadBalance::kRoundRobin;
  // upstream-hash-by: a hash-key expression (see check_hash_expression); empty: none. When set
  // it overrides load_balance (the data plane uses consistent hashing).
  std::string hash_by;
  std::optional<SessionAffinity> affinity;
  BackendProtocol protocol = BackendProtocol::kHttp;
  // proxy-ssl-secret, "namespace/name": the Secret whose ca.crt verifies the backend's
  // certificate (and whose tls.crt/tls.key, when present, are the client certificate). Only
  // meaningful with a TLS protocol (kHttps, kH2). The translator resolves it; empty: no
  // verification.
  std::string tls_secret;
  // proxy-ssl-name: the name sent as SNI and verified in the backend's certificate (a DNS name
  // or an IP address, lower case). Only with a TLS protocol; empty: the translator uses
  // "<service>.<namespace>.svc".
  std::string tls_server_name;
  // service-upstream: the Service's ClusterIP and port are the one endpoint (kube-proxy or the
  // CNI balances); the translator then ignores the EndpointSlices.
  bool service_upstream = false;
  bool operator==(const UpstreamPolicy&) const = default;
};

// ---- Route policy ----

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

struct Redirect {
  std::string url;  // absolute http(s) URL, or an absolute path ("/elsewhere")
  uint16_t code = 302;
  bool operator==(const Redirect&) const = default;
};

struct Header {
  std::string name;   // an RFC 9110 token
  std::string value;  // visible ASCII, spaces and tabs; no CR, LF or NUL
  bool operator==(const Header&) const = default;
};

// limit-*: per client address, as in docs/annotations.md.
struct RateLimits {
  static constexpr double kMaxRps = 100'000;
  static constexpr double kMaxBurstMultiplier = 10'000;
  static constexpr uint32_t kMaxConnections = 1'000'000;

  std::optional<double> rps;    // unset: no request-rate limit; else (0, kMaxRps]
  double burst_multiplier = 5;  // [1, kMaxBurstMultiplier]; the bucket refills within an hour
  // limit-rpm: requests per minute, a bucket of its own beside rps (both apply when both are
  // set, as nginx's two limit_req zones); unset: none; else (0, kMaxRps × 60]. Its burst is
  // rpm × burst_multiplier.
  std::optional<double> rpm;
  std::optional<uint32_t> connections;  // unset: no limit; else 1..kMaxConnections
  std::vector<std::string> allowlist;   // CIDR entries exempt from both limits
  uint16_t status_code = 429;           // 429 or 503 (limit-status-code)
  bool operator==(const RateLimits&) const = default;
};

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

// whitelist-source-range. Set and empty means "no client may use this route" (what an invalid
// annotation turns into: a broken allow list must not open the route).
struct SourceRanges {
  std::vector<std::string> cidrs;
  bool operator==(const SourceRanges&) const = default;
};

struct RoutePolicy {
  // Maximum accepted by the timeout parser; a day covers long-lived WebSockets.
  static constexpr std::chrono::milliseconds kMaxTimeout{24LL * 3600 * 1000};
  static constexpr uint32_t kMaxNextUpstreamTries = 20;
  static constexpr uint64_t kMaxBodyBytes = uint64_t{1} << 40;  // 1 TiB
  static constexpr size_t kMaxErrorCodes = 64;

  // The same defaults as dataplane/server/limits.h.
  std::chrono::milliseconds connect_timeout{5'000};
  std::chrono::milliseconds read_timeout{60'000};
  std::chrono::milliseconds send_timeout{60'000};
  std::optional<uint64_t> max_body_bytes;  // unset: unlimited (413 past it when set)
  NextUpstream next_upstream;
  uint32_t next_upstream_tries = 3;  // attempts in all, the first included; 1..kMax
  // proxy-next-upstream-timeout: no further attempt starts once this long has passed since the
  // first began; 0: no limit (nginx's default). At most kMaxTimeout.
  std::chrono::milliseconds next_upstream_timeout{0};

  // rewrite-target: the new request path; "$1".."$9" are the route regex's capture groups.
  std::string rewrite_target;
  // app-root: requests for "/" are redirected (302) to this path.
  std::string app_root;
  std::optional<Redirect> redirect;      // permanent-redirect / temporal-redirect
  std::vector<Header> response_headers;  // custom-headers, in the order written, unique names
  std::string upstream_vhost;            // Host header sent to the backend; empty: the client's
  // x-forwarded-prefix: the X-Forwarded-Prefix request header sent to the backend; empty: none.
  std::string forwarded_prefix;
  // enable-access-log: "false" leaves the route's requests out of the access log (metrics stay).
  bool access_log = true;
  // allow-upgrade: Upgrade protocols forwarded as upgrades besides websocket (lower case).
  std::vector<std::string> upgrade_protocols;
  std::optional<Cors> cors;
  std::optional<Hsts> hsts;
  std::optional<SourceRanges> source_ranges;
  // denylist-source-range: clients inside these ranges are refused (403), before
  // source_ranges is asked (an address in both is denied, as nginx's deny before allow).
  std::optional<SourceRanges> deny_ranges;
  RateLimits rate_limits;
  // custom-http-errors: backend answers with these statuses (400-599, sorted, unique) are
  // replaced by what the route's fallback upstream (Route::fallback_upstream) answers.
  std::vector<uint16_t> error_codes;
  std::optional<BasicAuth> basic_auth;             // auth-type: basic (lib/model/auth.h)
  std::optional<Compression> compression;          // enable-compression (lib/model/compression.h)
  std::optional<ExternalAuth> external_auth = {};  // auth-url (lib/model/external_auth.h)
  std::optional<Sendfile> sendfile = {};           // x-sendfile-directories (lib/model/sendfile.h)
  // enable-cache: the route's GET and HEAD answers are kept in the data plane's response cache
  // as RFC 9111 allows a shared cache (docs/annotations.md, "Response cache").
  bool cache = false;
  bool operator==(const RoutePolicy&) const = default;
};

// ---- Canary ----

// A canary Ingress's annotations, and (with `upstream` filled in by the translator) what the
// main route carries as its alternative backend. Precedence on a request: header, then cookie,
// then weight (see docs/annotations.md).
struct Canary {
  static constexpr uint32_t kMaxWeightTotal = 1'000'000;

  std::string upstream;         // Upstream::name of the canary backend; empty in parser output
  uint32_t weight = 0;          // 0..weight_total: share of requests sent to the canary
  uint32_t weight_total = 100;  // 1..kMaxWeightTotal
  std::string header;           // request header name (token); empty: none
  // With `header`: the canary gets requests whose header equals this value exactly. Empty: the
  // header's value "always" picks the canary, "never" the main backend, anything else falls
  // through to the cookie and the weight.
  std::string header_value;
  std::string cookie;  // cookie name (token): "always" / "never" as for the header; empty: none
  // With `header` and no header_value: the canary gets requests whose header value the RE2
  // pattern finds a match in (canary-by-header-pattern; "always" / "never" then have no special
  // meaning). At most kMaxHeaderPattern bytes; must compile.
  static constexpr size_t kMaxHeaderPattern = 1024;
  std::string header_pattern = {};
  bool operator==(const Canary&) const = default;
};

// ---- Validation ----

// Each returns every problem found; empty == valid.
std::vector<std::string> validate(const UpstreamPolicy& p);
std::vector<std::string> validate(const RoutePolicy& p);
// `require_upstream`: the model's form (the translator has named the canary's backend).
std::vector<std::string> validate(const Canary& c, bool require_upstream = true);

// The syntax checks both the annotation parser and validate() use; nullopt == valid, otherwise a
// sentence naming the problem (and its offset or entry where there is one).
//
// A hash-key expression as dataplane/balancer/hash_expression.h compiles it: literal text and
// $remote_addr, $request_uri, $http_<name>, $cookie_<name>, $arg_<name> (or ${...}).
std::optional<std::string> check_hash_expression(std::string_view text);
// One CIDR entry as dataplane/ratelimit/cidr_set.h reads it ("10.0.0.0/8", "::1", ...).
std::optional<std::string> check_cidr(std::string_view entry);
// A CIDR list separated by commas and/or whitespace; on success `out` (if given) receives the
// entries as written. Empty lists and empty entries are errors. At most kMaxCidrEntries.
inline constexpr size_t kMaxCidrEntries = 4096;
std::optional<std::string> parse_cidr_list(std::string_view text, std::vector<std::string>* out);
bool is_token(std::string_view s);  // RFC 9110 token (header names, cookie names, methods)
// rewrite-target: printable, no spaces; '$' only as "$1".."$9".
std::optional<std::string> check_rewrite_target(std::string_view text);
// The highest "$N" a rewrite target refers to (0: none).
int max_capture_reference(std::string_view rewrite_target);
// A path starting with '/', printable ASCII without spaces or ';' (app-root, cookie paths).
std::optional<std::string> check_path(std::string_view text);
// An http:// or https:// URL with a host, or a path starting with '/' (not "//"); printable,
// without spaces, quotes, backslashes or <>{}|^`.
std::optional<std::string> check_redirect_url(std::string_view text);
inline constexpr uint16_t kRedirectCodes[] = {301, 302, 303, 307, 308};
// A response header the user may set: a token name the proxy does not manage (Connection,
// Content-Length, Transfer-Encoding, ...) and a value without control characters.
std::optional<std::string> check_response_header(std::string_view name, std::string_view value);
// "host" or "host:port" (a DNS name, IPv4 address or bracketed IPv6 address).
std::optional<std::string> check_host_port(std::string_view text);
// A TLS server name for a backend (proxy-ssl-name): a lower-case DNS name without wildcard, or
// an IPv4 or IPv6 address (not bracketed), at most 253 bytes.
std::optional<std::string> check_tls_server_name(std::string_view text);
// "namespace/name" of a Kubernetes object (DNS-1123 namespace and name).
std::optional<std::string> check_object_ref(std::string_view text);
// An upgrade protocol a route may forward besides WebSocket (allow-upgrade): RFC 9110's
// protocol-name ["/" protocol-version], tokens, lower case; never "websocket" (always allowed)
// nor "h2c" (never forwarded: h2c smuggling).
std::optional<std::string> check_upgrade_protocol(std::string_view text);
// The rate limiter's table needs a full bucket to refill within an hour: with rps set,
// max(1, rps × burst_multiplier) / rps <= 3600 s.
std::optional<std::string> check_burst_window(const RateLimits& r);
// session-cookie-domain: a lower-case DNS name, optionally with a leading '.'.
std::optional<std::string> check_cookie_domain(std::string_view domain);
// canary-by-header-pattern: an RE2 pattern of at most Canary::kMaxHeaderPattern bytes.
std::optional<std::string> check_header_pattern(std::string_view pattern);
inline constexpr size_t kMaxResponseHeaders = 64;

// ---- JSON (control protocol) ----
//
// to_json omits default fields. The *_from_json functions throw std::runtime_error (or a
// nlohmann::json exception) on malformed input, like lib/protocol's decoders; they do not
// validate() — the caller does.
nlohmann::json to_json(const UpstreamPolicy& p);
nlohmann::json to_json(const RoutePolicy& p);
nlohmann::json to_json(const Canary& c);
UpstreamPolicy upstream_policy_from_json(const nlohmann::json& j);
RoutePolicy route_policy_from_json(const nlohmann::json& j);
Canary canary_from_json(const nlohmann::json& j);

}  // namespace tidegate::model
