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
//
// Each family has a file pair of its own in lib/model (included below): its types, checks,
// validate() and JSON form. This file holds the two aggregates, whose validate() and JSON
// functions call the families', and what has no family of its own: the backend protocol and TLS
// of an upstream, a route's error codes.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

// Each family's type, checks and JSON form (syntax.h: the checks several of them share).
#include "model/auth.h"
#include "model/balancing.h"
#include "model/boxed.h"
#include "model/canary.h"
#include "model/compression.h"
#include "model/cors.h"
#include "model/external_auth.h"
#include "model/headers.h"
#include "model/hsts.h"
#include "model/mirror.h"
#include "model/rate_limits.h"
#include "model/rewrites.h"
#include "model/sendfile.h"
#include "model/source_ranges.h"
#include "model/syntax.h"
#include "model/timeouts.h"

namespace tidegate::model {

// ---- Upstream (backend) policy ----

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

struct UpstreamPolicy {
  LoadBalance load_balance = LoadBalance::kRoundRobin;  // lib/model/balancing.h
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

struct RoutePolicy {
  // Maximum accepted by the timeout parser; a day covers long-lived WebSockets.
  static constexpr std::chrono::milliseconds kMaxTimeout{24LL * 3600 * 1000};
  static constexpr uint32_t kMaxNextUpstreamTries = 20;
  static constexpr uint64_t kMaxBodyBytes = uint64_t{1} << 40;  // 1 TiB
  static constexpr size_t kMaxErrorCodes = 64;

  // Timeouts, body size and retries (lib/model/timeouts.h).
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

  // Rewrites and redirects (lib/model/rewrites.h).
  // rewrite-target: the new request path; "$1".."$9" are the route regex's capture groups.
  std::string rewrite_target;
  // app-root: requests for "/" are redirected (302) to this path.
  std::string app_root;
  Boxed<Redirect> redirect;  // permanent-redirect / temporal-redirect
  // The Gateway API's RequestRedirect filter (built from the request; not with `redirect`).
  Boxed<RequestRedirect> request_redirect = {};
  // The Gateway API's URLRewrite path (not with rewrite_target); its hostname is upstream_vhost.
  Boxed<PathModifier> path_rewrite = {};

  // Headers (lib/model/headers.h).
  std::vector<Header> response_headers;  // custom-headers, in the order written, unique names
  std::string upstream_vhost;            // Host header sent to the backend; empty: the client's
  // The Gateway API's RequestHeaderModifier and ResponseHeaderModifier filters (headers.h).
  Boxed<HeaderModifier> request_header_modifier = {};
  Boxed<HeaderModifier> response_header_modifier = {};
  // x-forwarded-prefix: the X-Forwarded-Prefix request header sent to the backend; empty: none.
  std::string forwarded_prefix;
  // enable-access-log: "false" leaves the route's requests out of the access log (metrics stay).
  bool access_log = true;
  // allow-upgrade: Upgrade protocols forwarded as upgrades besides websocket (lower case).
  std::vector<std::string> upgrade_protocols;

  Boxed<Cors> cors;                           // lib/model/cors.h
  std::optional<Hsts> hsts;                   // lib/model/hsts.h
  std::optional<SourceRanges> source_ranges;  // lib/model/source_ranges.h
  // denylist-source-range: clients inside these ranges are refused (403), before
  // source_ranges is asked (an address in both is denied, as nginx's deny before allow).
  std::optional<SourceRanges> deny_ranges;
  RateLimits rate_limits;  // lib/model/rate_limits.h
  // custom-http-errors: backend answers with these statuses (400-599, sorted, unique) are
  // replaced by what the route's fallback upstream (Route::fallback_upstream) answers.
  std::vector<uint16_t> error_codes;
  Boxed<BasicAuth> basic_auth;             // auth-type: basic (lib/model/auth.h)
  Boxed<Compression> compression;          // enable-compression (lib/model/compression.h)
  Boxed<ExternalAuth> external_auth = {};  // auth-url (lib/model/external_auth.h)
  Boxed<Sendfile> sendfile = {};           // x-sendfile-directories (lib/model/sendfile.h)
  // enable-cache: the route's GET and HEAD answers are kept in the data plane's response cache
  // as RFC 9111 allows a shared cache (docs/annotations.md, "Response cache").
  bool cache = false;
  // The Gateway API's RequestMirror filters (lib/model/mirror.h): copies of each request (or of
  // a share of them) sent to these upstreams, their answers dropped.
  std::vector<Mirror> mirrors = {};
  // The Gateway API's timeouts.request (lib/model/timeouts.h): the whole exchange, from the
  // request's head to the response's last byte, ends within this; 0: no limit. Past it before
  // the response head the client gets 504; after, the response is cut short.
  std::chrono::milliseconds request_timeout{0};
  bool operator==(const RoutePolicy&) const = default;
};

// ---- Validation ----

// Each returns every problem found; empty == valid. validate(const Canary&, bool) is canary.h's.
std::vector<std::string> validate(const UpstreamPolicy& p);
std::vector<std::string> validate(const RoutePolicy& p);

// The syntax checks both the annotation parser and validate() use are with their families
// (and syntax.h); nullopt == valid, otherwise a sentence naming the problem (and its offset or
// entry where there is one). The upstream's own:
//
// A TLS server name for a backend (proxy-ssl-name): a lower-case DNS name without wildcard, or
// an IPv4 or IPv6 address (not bracketed), at most 253 bytes.
std::optional<std::string> check_tls_server_name(std::string_view text);

// ---- JSON (control protocol) ----
//
// to_json omits default fields. The *_from_json functions throw std::runtime_error (or a
// nlohmann::json exception) on malformed input, like lib/protocol's decoders; they do not
// validate() — the caller does. Canary's are canary.h's.
nlohmann::json to_json(const UpstreamPolicy& p);
nlohmann::json to_json(const RoutePolicy& p);
UpstreamPolicy upstream_policy_from_json(const nlohmann::json& j);
RoutePolicy route_policy_from_json(const nlohmann::json& j);

}  // namespace tidegate::model
