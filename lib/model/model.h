#pragma once
// The routing model shared by the controller and the data plane: plain value types, no I/O.
// The controller's translator produces a Config; the control protocol carries a Config (full
// snapshot) or a Delta between two Configs; the data plane validates and compiles it.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/client_auth.h"
#include "model/conditions.h"
#include "model/policy.h"
#include "model/shared.h"
#include "substitution/rule.h"

namespace tidegate::model {

struct Endpoint {
  std::string address;  // IPv4 or IPv6 literal
  uint16_t port = 0;
  auto operator<=>(const Endpoint&) const = default;
  bool operator==(const Endpoint&) const = default;
};

// One backend service port: "namespace/service:port" (port is the Service port's number or name).
// How the data plane talks to an upstream's endpoints: plain HTTP/1.1, or HTTP/1.1 over TLS
// (tidegate.io/backend-protocol: HTTPS). See docs/tls.md, "TLS to backends".
struct UpstreamTls {
  bool enabled = false;
  // Sent as SNI (unless it is an IP address) and, when verifying, the name the backend's
  // certificate must carry.
  std::string server_name;
  // PEM CA certificates (from tidegate.io/proxy-ssl-secret): when set, the backend's chain must
  // verify against them and its certificate must match server_name; when empty, any certificate
  // is accepted (encryption without authentication, as nginx's proxy_ssl_verify off).
  std::string ca_pem;
  bool operator==(const UpstreamTls&) const = default;
};

struct Upstream {
  std::string name;
  std::vector<Endpoint> endpoints;  // sorted, unique
  UpstreamTls tls = {};
  // How a backend is chosen and connected to (issue #6, lib/model/policy.h): the annotations of
  // the oldest Ingress using this upstream. Applied by the data plane: load balancing, hashing
  // and affinity (runtime::UpstreamState), the protocol through `tls` (docs/annotations.md).
  // Shared by the upstream's copies (lib/model/shared.h).
  Shared<UpstreamPolicy> policy = {};
  bool operator==(const Upstream&) const = default;
};

enum class PathMatch { kExact, kPrefix, kRegex };

const char* to_string(PathMatch m);
std::optional<PathMatch> path_match_from_string(const std::string& s);

struct Route {
  std::string path;  // "/" for a catch-all prefix; an RE2 pattern when match == kRegex
  PathMatch match = PathMatch::kPrefix;
  // Upstream::name. Empty: the route has no backend of its own (a Gateway API rule whose
  // backendRefs are all unusable, or that only redirects): its requests are answered 500 unless
  // the policy answers them (a redirect), or split between `backends`.
  std::string upstream;
  std::string ingress;  // "namespace/name" of the Ingress that produced it (for logs and reports)
  // Substitution::name of the body substitution for this route's responses; empty: none.
  std::string substitution{};
  // What happens to a request on this route (issue #6): the Ingress's route-level annotations.
  // The data plane applies timeouts, retries, body size, redirects, app-root, rewrite-target,
  // upstream-vhost, custom headers and source ranges (docs/annotations.md, status). Shared by
  // the copies of the route and by the routes of one Ingress (lib/model/shared.h).
  Shared<RoutePolicy> policy = {};
  // An alternative backend from a canary Ingress for the same host and path (docs/annotations.md,
  // "Canary"): canary->upstream names an Upstream. Applied by the data plane (server/canary.h).
  Boxed<Canary> canary = {};
  // Serves the route's requests while `upstream` has no endpoints (the default-backend
  // annotation, or the controller's --default-backend-service); empty: none (503).
  std::string fallback_upstream = {};
  // Gateway API conditions besides the path (lib/model/conditions.h): all must hold for the
  // route to take a request. Empty: none (Ingress routes).
  std::string method = {};                    // upper-case token; empty: any method
  std::vector<HeaderCondition> headers = {};  // every one must hold
  std::vector<QueryCondition> query = {};     // every one must hold
  // Gateway API weighted backendRefs: when not empty (and `upstream` is), each request goes to
  // one of these in proportion to its weight; an entry without an upstream takes its share of
  // the requests and answers them 500.
  std::vector<WeightedBackend> backends = {};
  // What sort_routes compares instead of the path's length when not 0: a GRPCRoute rule's
  // precedence (the Gateway API ranks its matches by the service's characters, then the
  // method's, not by the length of the path they are written as; the translator sets
  // 4096 * service + method + 1).
  uint32_t precedence_length = 0;
  bool operator==(const Route&) const = default;
};

// A host: exact ("foo.example.com"), wildcard ("*.example.com", matching exactly one extra
// label), a Gateway API wildcard ("**.example.com", one or more extra labels, tried after the
// one-label ones, longest suffix first) or "*" (an Ingress rule without a host: any host that no
// exact or wildcard host takes). Routes are kept in precedence order (see sort_routes).
struct VirtualHost {
  std::string host;
  std::vector<Route> routes;
  // Listener::name of the only listener whose connections see this host; empty: the data
  // plane's own HTTP and HTTPS listeners (every Ingress host). Keyed by host_key().
  std::string listener = {};
  // Plain-HTTP requests get a 308 to https:// (tidegate.io/ssl-redirect, force-ssl-redirect).
  bool ssl_redirect = false;
  // Set: every request to this host gets a 308 to the same scheme on host `redirect_to` (an
  // exact host), keeping the port the client named and the request target
  // (tidegate.io/from-to-www-redirect). Such a host has no routes.
  std::string redirect_to = {};
  // A Gateway API host: when none of its routes takes a request, the next less specific host
  // that covers the request's name is tried (wildcards longest first, then "*"), as the Gateway
  // API orders rules by hostname before path. Ingress hosts own their requests (false).
  bool falls_through = false;
  bool operator==(const VirtualHost&) const = default;
};

// A certificate chain and its private key, PEM, from a kubernetes.io/tls Secret
// ("namespace/secret"). The data plane parses it lazily (see dataplane/tls).
struct Certificate {
  std::string name;
  std::string cert_pem;
  std::string key_pem;
  bool operator==(const Certificate&) const = default;
};

// Which certificate a TLS server name gets: `host` is exact or "*.suffix" (one label), as in
// Ingress spec.tls[].hosts, or "**.suffix" (one or more labels) or "*" (every other name, a
// certificate only) for Gateway API listeners. Names without an entry get the default
// certificate.
struct TlsHost {
  std::string host;
  std::string certificate;  // Certificate::name; empty: the default certificate
  // Client certificates asked for and checked on connections to this name (auth-tls-*).
  std::optional<ClientAuth> client_auth = {};
  // ssl-passthrough: TLS connections naming this host (SNI) are not terminated but relayed as
  // they are to an endpoint of this Upstream (its name). Set: no certificate, no client_auth.
  std::string passthrough_upstream = {};
  // Listener::name of the only (TLS) listener whose handshakes see this name; empty: the data
  // plane's own HTTPS listener. Keyed by host_key().
  std::string listener = {};
  bool operator==(const TlsHost&) const = default;
};

// A listener the data plane opens besides its own HTTP and HTTPS ones, on the same address: a
// Gateway API Gateway's port (docs/gateway-api.md, "One address per Gateway"). Its connections
// are routed with the virtual hosts and TLS hosts that name it, and only those; it opens when a
// snapshot first names it and closes when one no longer does (connections it accepted stay).
inline constexpr size_t kMaxListeners = 1024;
struct Listener {
  // [a-z0-9] then [a-z0-9./:_-], at most 253 characters ("namespace/gateway:80").
  std::string name;
  uint16_t port = 0;  // the data plane's port, unique among listeners
  bool tls = false;   // HTTPS (certificates from the TLS hosts naming it) or plain HTTP
  bool operator==(const Listener&) const = default;
};
bool is_valid_listener_name(std::string_view name);

// The key of a VirtualHost or TlsHost in Config: the host, or "<listener> <host>" for one
// scoped to a listener.
std::string host_key(std::string_view listener, std::string_view host);
inline std::string host_key(const VirtualHost& v) { return host_key(v.listener, v.host); }
inline std::string host_key(const TlsHost& t) { return host_key(t.listener, t.host); }

// Body substitution (issue #5, docs/substitutions.md) for the routes of one Ingress: its
// tidegate.io/substitution* annotations, with the rules of the SubstitutionRuleSet it names.
inline constexpr uint64_t kDefaultSubstitutionMaxBuffer = 64 * 1024;
inline constexpr uint64_t kMinSubstitutionMaxBuffer = 1024;
inline constexpr uint64_t kMaxSubstitutionMaxBuffer = 16 * 1024 * 1024;
inline constexpr std::string_view kDefaultSubstitutionType = "text/html";

struct Substitution {
  std::string name;  // "namespace/name" of the Ingress it comes from
  // Applied together in one pass; on ties the earlier rule wins, so the rule set's come first.
  // At least one, at most substitution::kMaxRules, each passing substitution::validate_rule.
  std::vector<substitution::Rule> rules;
  // Responses whose Content-Type (parameters left out, compared case-insensitively) is one of
  // these are processed; others pass untouched. Lower-case "type/subtype", sorted, unique.
  std::vector<std::string> mime_types{std::string(kDefaultSubstitutionType)};
  // Most bytes held back per response waiting to learn whether they start a match.
  uint64_t max_buffer = kDefaultSubstitutionMaxBuffer;

  // A hash of `rules` (64-bit FNV-1a over their length-prefixed fields, so the same in every
  // process and after restarts): the version of the rule list, the key of the data plane's memo
  // of rules that never matched a resource. Derived rather than carried, so that it cannot
  // disagree with the rules it names.
  uint64_t rules_version() const;
  bool operator==(const Substitution&) const = default;
};

// "type/subtype" in lower case, each an RFC 9110 token without '*' (no wildcards):
// "text/html", "application/xhtml+xml".
bool is_valid_mime_type(std::string_view type);

struct Config {
  std::map<std::string, VirtualHost> virtual_hosts;  // key == host_key(VirtualHost)
  std::map<std::string, Upstream> upstreams;         // key == Upstream::name
  std::optional<Route> default_route;  // Ingress defaultBackend: used when nothing else matches
  std::map<std::string, Certificate> certificates;    // key == Certificate::name
  std::map<std::string, TlsHost> tls_hosts;           // key == host_key(TlsHost)
  std::map<std::string, Substitution> substitutions;  // key == Substitution::name
  std::map<std::string, Listener> listeners = {};     // key == Listener::name
  bool operator==(const Config&) const = default;
};

// Sorts routes into match precedence: longest path first; on equal length Exact, then Prefix,
// then Regex; then by path text; then (the Gateway API's order among routes of one path) a
// route with a method before one without, more header conditions first, more query conditions
// first. Routes equal in all of these keep their order (the translator's: the Gateway API's
// oldest route first, then by name, then rule order).
void sort_routes(std::vector<Route>& routes);
// The order sort_routes sorts by: whether `a` is tried before `b`.
bool route_precedes(const Route& a, const Route& b);

// Returns every problem found (empty == valid): dangling upstream references, bad hosts, paths
// that do not start with '/', regexes that RE2 rejects, duplicate endpoints, keys that do not match
// names, substitutions with invalid rules, MIME types or buffer sizes, invalid route and upstream
// policies, canaries that are invalid or name an unknown upstream.
std::vector<std::string> validate(const Config& config);

// "*", or an exact, "*.suffix" or "**.suffix" lower-case DNS name.
bool is_valid_host(const std::string& host);

// The difference between two Configs. Applying diff(a, b) to a yields b.
struct Delta {
  std::vector<VirtualHost> upsert_virtual_hosts;
  std::vector<std::string> remove_virtual_hosts;
  std::vector<Upstream> upsert_upstreams;
  std::vector<std::string> remove_upstreams;
  bool default_route_changed = false;
  std::optional<Route> default_route;  // the new value when default_route_changed
  std::vector<Certificate> upsert_certificates;
  std::vector<std::string> remove_certificates;
  std::vector<TlsHost> upsert_tls_hosts;
  std::vector<std::string> remove_tls_hosts;
  std::vector<Substitution> upsert_substitutions;
  std::vector<std::string> remove_substitutions;
  std::vector<Listener> upsert_listeners = {};
  std::vector<std::string> remove_listeners = {};
  bool empty() const;
  bool operator==(const Delta&) const = default;
};

Delta diff(const Config& from, const Config& to);
// The same with `from`'s upstreams taken from `from_upstreams` (its own upstreams are not read).
Delta diff(const Config& from, const std::map<std::string, Upstream>& from_upstreams,
           const Config& to);

// Applies a delta to a copy of `base`. Removing something that does not exist is an error (it
// means the two sides disagree about the base); the result is not validated here.
struct ApplyResult {
  Config config;
  std::string error;  // empty on success
};
ApplyResult apply(const Config& base, const Delta& delta);

}  // namespace tidegate::model
