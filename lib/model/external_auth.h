#pragma once
// External authentication of a route (docs/annotations.md, "External authentication"): before a
// request goes to its backend, the data plane asks an authentication Service (auth-url) with a
// request of its own carrying the original's headers; 2xx lets the request through, 401 and 403
// refuse it, anything else (or no answer) is an error (500) and never lets it through. Its own
// family of the route policy (RoutePolicy::external_auth), with its checks and JSON form here.
//
// Some values are templates with nginx's variable syntax ($host, $request_uri, $http_x_user,
// ${cookie_session}, ...): parse_template() knows a fixed list of variables and refuses the rest;
// the data plane substitutes them from the request. Nothing in a template is ever executed.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tidegate::model {

// ---- Templates ----

enum class TemplateVariable {
  kLiteral,            // not a variable: TemplatePart::text as written
  kScheme,             // $scheme, $pass_access_scheme: "http" or "https" as the client used
  kHost,               // $host: the Host without its port, lower case
  kHttpHost,           // $http_host, $best_http_host: the Host header as sent
  kRequestUri,         // $request_uri: the target as sent (path and query)
  kEscapedRequestUri,  // $escaped_request_uri: the same, percent-encoded for a query value
  kUri,                // $uri: the path
  kArgs,               // $args, $query_string: the query without '?'
  kRequestMethod,      // $request_method
  kRemoteAddr,         // $remote_addr: the client address
  kHeader,             // $http_<name>: a request header ('_' stands for '-')
  kCookie,             // $cookie_<name>
  kArg,                // $arg_<name>: a query parameter
};

struct TemplatePart {
  TemplateVariable variable = TemplateVariable::kLiteral;
  std::string text;  // the literal, or the header, cookie or argument name
  bool operator==(const TemplatePart&) const = default;
};

// Splits `text` into literals and variables; an unknown variable or a lone '$' is an error
// (returned), as nginx refuses them.
std::optional<std::string> parse_template(std::string_view text, std::vector<TemplatePart>* out);

// ---- auth-url ----

// An auth-url as the data plane calls it: http or https, a host that names a Service, an
// optional port, and a path (and query) that may hold variables. No user info, no fragment.
struct AuthUrl {
  bool https = false;
  std::string host;               // lower case, no port
  uint16_t port = 0;              // the URL's, else 80 or 443
  std::string target;             // "/path?query", a template; "/" when the URL has no path
  std::string authority() const;  // host[:port] as the Host header says it (port only if given)
  bool explicit_port = false;
};
std::optional<AuthUrl> parse_auth_url(std::string_view url, std::string* error);

// The Service an auth-url host names: "name" (the Ingress's namespace), "name.namespace",
// "name.namespace.svc" or "name.namespace.svc.<cluster domain>". Returns "namespace/name";
// nullopt for any other host (an IP address, a name outside the cluster).
std::optional<std::string> service_of_auth_host(std::string_view host,
                                                std::string_view ingress_namespace);

// ---- The policy ----

// auth-cache-duration: responses with one of these statuses (empty: any cacheable one) are
// kept this long.
struct AuthCacheRule {
  std::vector<uint16_t> statuses;
  uint32_t seconds = 0;
  bool operator==(const AuthCacheRule&) const = default;
};

struct ExternalAuth {
  static constexpr size_t kMaxResponseHeaders = 32;
  static constexpr uint32_t kMaxCacheSeconds = 30 * 24 * 3600;
  // auth-url as written. The data plane calls its path on `upstream` with its authority as Host.
  std::string url;
  // Upstream::name of the Service the URL names (set by the translator); empty: the URL cannot
  // be used, and the data plane refuses every request of the route (503), never lets one by.
  std::string upstream = {};
  std::string method = {};  // auth-method: GET unless set (upper case)
  std::string signin = {};  // auth-signin: where a 401 redirects (302), a template; empty: 401
  std::string signin_redirect_param = {};  // auth-signin-redirect-param; empty: "rd"
  // auth-response-headers: copied from a 2xx answer into the request to the backend (a client's
  // own header of that name is removed either way). Lower case, unique.
  std::vector<std::string> response_headers = {};
  std::string request_redirect = {};  // auth-request-redirect (X-Auth-Request-Redirect); a
                                      // template; empty: $request_uri
  std::string cache_key = {};         // auth-cache-key, a template; empty: no cache
  std::vector<AuthCacheRule> cache_rules = {};  // auth-cache-duration
  bool always_set_cookie = false;               // auth-always-set-cookie
  bool operator==(const ExternalAuth&) const = default;
};

// ingress-nginx's default auth-cache-duration: "200 202 401 5m".
std::vector<AuthCacheRule> default_auth_cache_rules();
// "200 202 10m, 401 30s": codes (or "any") then an nginx time (s, m, h, d; bare = seconds).
std::optional<std::vector<AuthCacheRule>> parse_auth_cache_duration(std::string_view text,
                                                                    std::string* error);

std::vector<std::string> validate(const ExternalAuth& a);
nlohmann::json to_json(const ExternalAuth& a);
ExternalAuth external_auth_from_json(const nlohmann::json& j);

}  // namespace tidegate::model
