// Table tests of the Gateway API translator's rules: matches, filters, timeouts, weighted and
// invalid backendRefs, ReferenceGrants, GRPCRoute; and a folder of manifests end to end. Shared
// parts: table.h (gateway_test.cc holds their definitions).

#include "table.h"

#include <filesystem>
#include <fstream>

#include "source/manifest_loader.h"
#include "store/store.h"

namespace tidegate::controller::translate::gateway_table {
namespace {

const std::string kRoute = "HTTPRoute default/web";

std::vector<std::string> base(std::vector<std::string> more) {
  std::vector<std::string> out = {gateway_class(),    gateway("gw", http_listener("http")),
                                  service("web", 80), endpoints("web", 8080),
                                  service("api", 80), endpoints("api", 8080, "default", 2)};
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

// An HTTPRoute default/web on Gateway gw with the given rules (YAML list items).
std::string rules(const std::string& items, const std::string& hostnames = "") {
  return http_route("web", "parentRefs: [{name: gw}]\n" + hostnames + "rules:\n" + items);
}

const std::string kToWeb = "  backendRefs: [{name: web, port: 80}]\n";

TEST(GatewayRoutesTest, Matches) {
  const std::vector<Case> cases = {
      {"a rule without matches is PathPrefix /",
       base({rules("-" + kToWeb.substr(1))}),
       {"*: Prefix / -> default/web:80"}},
      {"path types, method, headers (lower-cased, first of a name) and query parameters",
       base({rules("- matches:\n  - path: {type: Exact, value: /a}\n  - path: {type: "
                   "RegularExpression, value: '/v[0-9]+/.*'}\n    method: POST\n  - path: "
                   "{value: /b}\n    headers:\n    - {name: X-Env, value: canary}\n    - {name: "
                   "x-env, value: ignored}\n    - {type: RegularExpression, name: X-Id, value: "
                   "'[0-9]+'}\n    queryParams:\n    - {name: Debug, value: '1'}\n" +
                   kToWeb)}),
       // A regex sorts by its length like the others (the Gateway API leaves its precedence to
       // implementations).
       {"*: Regex /v[0-9]+/.* POST -> default/web:80", "*: Exact /a -> default/web:80",
        "*: Prefix /b h:x-env=canary h:x-id~[0-9]+ q:Debug=1 -> default/web:80"}},
      {"an invalid regex drops the rule: PartiallyInvalid",
       base({rules("- matches: [{path: {type: RegularExpression, value: '/a(('}}]\n" + kToWeb +
                   "- matches: [{path: {value: /b}}]\n" + kToWeb)}),
       {"*: Prefix /b -> default/web:80"},
       {"HTTPRoute default/web parent default/gw: Accepted=True/Accepted "
        "ResolvedRefs=True/ResolvedRefs PartiallyInvalid=True/UnsupportedValue"},
       {E(kRoute, "spec.rules[0].matches[0].path: invalid regex \"/a((\"")}},
      {"every rule invalid: not accepted (UnsupportedValue)",
       base({rules("- matches: [{path: {value: 'no-slash'}}]\n" + kToWeb)}),
       {},
       {"HTTPRoute default/web parent default/gw: Accepted=False/UnsupportedValue "
        "ResolvedRefs=True/ResolvedRefs"},
       {E(kRoute, "does not start with '/'; rule dropped")}},
      {"an unknown path type: the route is not accepted (UnsupportedValue)",
       base({rules("- matches: [{path: {type: Glob, value: /a}}]\n" + kToWeb +
                   "- matches: [{path: {value: /b}}]\n" + kToWeb)}),
       {},
       {"HTTPRoute default/web parent default/gw: Accepted=False/UnsupportedValue "
        "ResolvedRefs=True/ResolvedRefs"},
       {E(kRoute, "unsupported type \"Glob\"; route not accepted")}},
      {"an unknown method: UnsupportedValue",
       base({rules("- matches: [{method: BREW}]\n" + kToWeb)}),
       {},
       {"HTTPRoute default/web parent default/gw: Accepted=False/UnsupportedValue "
        "ResolvedRefs=True/ResolvedRefs"},
       {E(kRoute, "unsupported method \"BREW\"")}},
  };
  for (const auto& c : cases) run(c);
}

TEST(GatewayRoutesTest, Filters) {
  const std::vector<Case> cases = {
      {"RequestHeaderModifier and ResponseHeaderModifier",
       base({rules("- filters:\n  - type: RequestHeaderModifier\n    requestHeaderModifier:\n    "
                   "  set: [{name: X-A, value: '1'}]\n      add: [{name: X-B, value: '2'}]\n     "
                   " remove: [X-C]\n  - type: ResponseHeaderModifier\n    "
                   "responseHeaderModifier: {set: [{name: X-D, value: '4'}]}\n" +
                   kToWeb)}),
       {"*: Prefix / -> default/web:80 policy "
        "{\"request_header_modifier\":{\"add\":[{\"name\":\"X-B\",\"value\":\"2\"}],\"remove\":["
        "\"X-C\"],\"set\":[{\"name\":\"X-A\",\"value\":\"1\"}]},\"response_header_modifier\":{"
        "\"set\":[{\"name\":\"X-D\",\"value\":\"4\"}]}}"}},
      {"a header the proxy manages cannot be set: the rule is dropped",
       base({rules("- filters:\n  - type: RequestHeaderModifier\n    requestHeaderModifier: {set: "
                   "[{name: Transfer-Encoding, value: x}]}\n" +
                   kToWeb)}),
       {},
       {},
       {E(kRoute, "Transfer-Encoding is managed by the proxy")}},
      {"RequestRedirect without backends: no upstream, the redirect answers",
       base({rules("- matches: [{path: {value: /old}}]\n  filters:\n  - type: RequestRedirect\n "
                   "   requestRedirect:\n      scheme: https\n      hostname: Example.COM\n      "
                   "port: 8443\n      statusCode: 301\n      path: {type: ReplacePrefixMatch, "
                   "replacePrefixMatch: /new}\n")}),
       {"*: Prefix /old -> 500 policy "
        "{\"request_redirect\":{\"code\":301,\"hostname\":\"example.com\",\"path\":{\"kind\":"
        "\"ReplacePrefixMatch\",\"value\":\"/new\"},\"port\":8443,\"scheme\":\"https\"}}"}},
      {"URLRewrite: hostname and full path",
       base({rules("- filters:\n  - type: URLRewrite\n    urlRewrite:\n      hostname: "
                   "internal.example.com\n      path: {type: ReplaceFullPath, replaceFullPath: "
                   "/x}\n" +
                   kToWeb)}),
       {"*: Prefix / -> default/web:80 policy "
        "{\"path_rewrite\":{\"kind\":\"ReplaceFullPath\",\"value\":\"/x\"},\"upstream_vhost\":"
        "\"internal.example.com\"}"}},
      {"ReplacePrefixMatch needs PathPrefix matches",
       base({rules("- matches: [{path: {type: Exact, value: /a}}]\n  filters:\n  - type: "
                   "URLRewrite\n    urlRewrite: {path: {type: ReplacePrefixMatch, "
                   "replacePrefixMatch: /b}}\n" +
                   kToWeb + "- matches: [{path: {value: /c}}]\n" + kToWeb)}),
       {"*: Exact /a -> 500", "*: Prefix /c -> default/web:80"},
       {"HTTPRoute default/web parent default/gw: Accepted=True/Accepted "
        "ResolvedRefs=True/ResolvedRefs PartiallyInvalid=True/UnsupportedValue"},
       {E(kRoute,
          "spec.rules[0].filters[0].urlRewrite.path: ReplacePrefixMatch needs PathPrefix "
          "matches; its requests get 500")}},
      {"RequestMirror: every request copied to the mirror's Service",
       base({rules("- matches: [{path: {value: /m}}]\n  filters:\n  - type: RequestMirror\n    "
                   "requestMirror: {backendRef: {name: api, port: 80}}\n" +
                   kToWeb + "-" + kToWeb.substr(1))}),
       {"*: Prefix /m -> default/web:80 policy {\"mirrors\":[{\"upstream\":\"default/api:80\"}]}",
        "*: Prefix / -> default/web:80"}},
      {"RequestMirror more than once (the only filter that may be), percent and fraction",
       base({rules("- filters:\n  - {type: RequestMirror, requestMirror: {backendRef: {name: api, "
                   "port: 80}, percent: 20}}\n  - {type: RequestMirror, requestMirror: "
                   "{backendRef: {name: web, port: 80}, fraction: {numerator: 1, denominator: "
                   "3}}}\n  - {type: RequestMirror, requestMirror: {backendRef: {name: web, port: "
                   "80}, fraction: {numerator: 7}}}\n" +
                   kToWeb)}),
       {"*: Prefix / -> default/web:80 policy {\"mirrors\":[{\"denominator\":100,\"numerator\":"
        "20,\"upstream\":\"default/api:80\"},{\"denominator\":3,\"numerator\":1,\"upstream\":"
        "\"default/web:80\"},{\"denominator\":100,\"numerator\":7,\"upstream\":\"default/"
        "web:80\"}]}"}},
      {"RequestMirror of 0 percent mirrors nothing",
       base({rules("- filters: [{type: RequestMirror, requestMirror: {backendRef: {name: api, "
                   "port: 80}, percent: 0}}]\n" +
                   kToWeb)}),
       {"*: Prefix / -> default/web:80"}},
      {"RequestMirror to a missing Service: ResolvedRefs false, served without the mirror",
       base({rules("- filters: [{type: RequestMirror, requestMirror: {backendRef: {name: gone, "
                   "port: 80}}}]\n" +
                   kToWeb)}),
       {"*: Prefix / -> default/web:80"},
       {"HTTPRoute default/web parent default/gw: Accepted=True/Accepted "
        "ResolvedRefs=False/BackendNotFound"},
       {E(kRoute,
          "spec.rules[0].filters[0].requestMirror.backendRef: BackendNotFound: Service "
          "default/gone not found; the mirror is left out; requests are served without it")}},
      {"RequestMirror with a share the API server refuses: the rule answers 500",
       base({rules("- filters: [{type: RequestMirror, requestMirror: {backendRef: {name: api, "
                   "port: 80}, fraction: {numerator: 5, denominator: 4}}}]\n" +
                   kToWeb)}),
       {},
       {"HTTPRoute default/web parent default/gw: Accepted=False/UnsupportedValue "
        "ResolvedRefs=True/ResolvedRefs"},
       {E(kRoute, "requestMirror.fraction: 5/4 must have 0 <= numerator <= denominator")}},
      {"per-backendRef filters: 500 for the rule's matches; every rule so: not accepted",
       base({rules("- backendRefs:\n  - name: web\n    port: 80\n    filters: [{type: "
                   "RequestHeaderModifier, requestHeaderModifier: {set: [{name: a, value: "
                   "b}]}}]\n")}),
       {},
       {"HTTPRoute default/web parent default/gw: Accepted=False/UnsupportedValue "
        "ResolvedRefs=True/ResolvedRefs"},
       {E(kRoute, "backendRef filters are not supported; its requests get 500")}},
      {"a redirect without port or scheme goes to the listener's port",
       base({rules("- filters:\n  - {type: RequestRedirect, requestRedirect: {hostname: "
                   "b.example.com}}\n- matches: [{path: {value: /s}}]\n  filters:\n  - {type: "
                   "RequestRedirect, requestRedirect: {scheme: https}}\n")}),
       {"*: Prefix /s -> 500 policy {\"request_redirect\":{\"code\":302,\"scheme\":\"https\"}}",
        "*: Prefix / -> 500 policy "
        "{\"request_redirect\":{\"code\":302,\"hostname\":\"b.example.com\",\"port\":80}}"}},
      {"CORS: origins (both spellings of a default port), methods, headers, max age",
       base({rules("- filters:\n  - type: CORS\n    cors:\n      allowOrigins: "
                   "['https://www.foo.com', 'https://*.bar.com:443', 'http://a.com:8080']\n"
                   "      allowMethods: [GET, OPTIONS]\n      allowHeaders: [x-header-1]\n"
                   "      exposeHeaders: [x-header-3]\n      allowCredentials: true\n"
                   "      maxAge: 3600\n" +
                   kToWeb)}),
       {"*: Prefix / -> default/web:80 policy "
        "{\"cors\":{\"allow_headers\":[\"x-header-1\"],\"allow_methods\":[\"GET\",\"OPTIONS\"],"
        "\"allow_origins\":[\"https://www.foo.com\",\"https://www.foo.com:443\",\"https://"
        "*.bar.com\",\"https://*.bar.com:443\",\"http://a.com:8080\"],"
        "\"expose_headers\":[\"x-header-3\"],\"gateway_api\":true,\"max_age_seconds\":3600}}"}},
      {"CORS defaults: no credentials, the safelisted methods, no headers, max age 5",
       base({rules("- filters: [{type: CORS, cors: {allowOrigins: ['*']}}]\n" + kToWeb)}),
       {"*: Prefix / -> default/web:80 policy "
        "{\"cors\":{\"allow_credentials\":false,\"allow_headers\":[],\"allow_methods\":[\"GET\","
        "\"HEAD\",\"POST\"],\"gateway_api\":true,\"max_age_seconds\":5}}"}},
      {"CORS without origins allows none: no CORS policy",
       base({rules("- filters: [{type: CORS, cors: {allowMethods: [GET]}}]\n" + kToWeb)}),
       {"*: Prefix / -> default/web:80"}},
      {"CORS: exposeHeaders * is not sent with credentials (a warning)",
       base({rules("- filters: [{type: CORS, cors: {allowOrigins: ['*'], allowCredentials: "
                   "true, allowMethods: ['*'], allowHeaders: ['*'], exposeHeaders: ['*']}}]\n" +
                   kToWeb)}),
       {"*: Prefix / -> default/web:80 policy "
        "{\"cors\":{\"allow_headers\":[\"*\"],\"allow_methods\":[\"*\"],\"gateway_api\":true,"
        "\"max_age_seconds\":5}}"},
       {},
       {W(kRoute, "spec.rules[0].filters[0].cors.exposeHeaders: \"*\" is not sent")}},
      {"CORS: an origin of any host of one scheme is not supported: 500",
       base({rules("- filters: [{type: CORS, cors: {allowOrigins: ['https://*']}}]\n" + kToWeb +
                   "- matches: [{path: {value: /b}}]\n" + kToWeb)}),
       {"*: Prefix /b -> default/web:80", "*: Prefix / -> 500"},
       {"HTTPRoute default/web parent default/gw: Accepted=True/Accepted "
        "ResolvedRefs=True/ResolvedRefs PartiallyInvalid=True/UnsupportedValue"},
       {E(kRoute,
          "spec.rules[0].filters[0].cors.allowOrigins[0]: \"https://*\": any host of "
          "one scheme is not supported")}},
      {"an unknown filter type: the route is not accepted",
       base({rules("- filters: [{type: Teleport}]\n" + kToWeb)}),
       {},
       {"HTTPRoute default/web parent default/gw: Accepted=False/UnsupportedValue "
        "ResolvedRefs=True/ResolvedRefs"},
       {E(kRoute, "unsupported filter type \"Teleport\"; route not accepted")}},
      {"timeouts: backendRequest bounds the wait, request the retries; 0s is the longest",
       base({rules("- matches: [{path: {value: /a}}]\n  timeouts: {request: 10s, backendRequest: "
                   "2s}\n" +
                   kToWeb + "- timeouts: {request: 0s}\n" + kToWeb)}),
       {"*: Prefix /a -> default/web:80 policy "
        "{\"next_upstream_timeout_ms\":10000,\"read_timeout_ms\":2000,\"request_timeout_ms\":"
        "10000}",
        "*: Prefix / -> default/web:80 policy {\"read_timeout_ms\":86400000}"}},
      {"an invalid duration drops the rule",
       base({rules("- timeouts: {request: 1.5s}\n" + kToWeb)}),
       {},
       {},
       {E(kRoute, "spec.rules[0].timeouts.request: invalid duration \"1.5s\"")}},
  };
  for (const auto& c : cases) run(c);
}

TEST(GatewayRoutesTest, Backends) {
  const std::string grant =
      "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {name: g, "
      "namespace: other}\nspec:\n  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, "
      "namespace: default}]\n  to: [{group: '', kind: Service, name: svc}]\n";
  const std::vector<Case> cases = {
      {"weights: each backend its share; weight 0 takes none",
       base({rules("- backendRefs:\n  - {name: web, port: 80, weight: 3}\n  - {name: api, port: "
                   "80}\n  - {name: api, port: 80, weight: 0}\n")}),
       {"*: Prefix / -> [default/web:80*3, default/api:80*1]"}},
      {"a missing Service: BackendNotFound, its share gets 500",
       base({rules("- backendRefs: [{name: web, port: 80}, {name: gone, port: 80}]\n")}),
       {"*: Prefix / -> [default/web:80*1, *1]"},
       {"HTTPRoute default/web parent default/gw: Accepted=True/Accepted "
        "ResolvedRefs=False/BackendNotFound"},
       {E(kRoute,
          "spec.rules[0].backendRefs[1]: BackendNotFound: Service default/gone not "
          "found; its share of the requests gets 500")}},
      {"a port the Service does not have: BackendNotFound; every backend invalid: 500",
       base({rules("- backendRefs: [{name: web, port: 81}]\n")}),
       {"*: Prefix / -> 500"},
       {"HTTPRoute default/web parent default/gw: Accepted=True/Accepted "
        "ResolvedRefs=False/BackendNotFound"},
       {E(kRoute, "Service default/web has no port 81")}},
      {"another kind: InvalidKind",
       base({rules("- backendRefs: [{group: example.com, kind: Bucket, name: b}]\n")}),
       {"*: Prefix / -> 500"},
       {"HTTPRoute default/web parent default/gw: Accepted=True/Accepted "
        "ResolvedRefs=False/InvalidKind"},
       {E(kRoute, "InvalidKind: backendRef kind example.com/Bucket is not supported")}},
      {"another namespace without a ReferenceGrant: RefNotPermitted",
       base({service("svc", 80, "other"),
             rules("- backendRefs: [{name: svc, namespace: other, port: 80}]\n")}),
       {"*: Prefix / -> 500"},
       {"HTTPRoute default/web parent default/gw: Accepted=True/Accepted "
        "ResolvedRefs=False/RefNotPermitted"},
       {E(kRoute, "RefNotPermitted: Service other/svc is in another namespace")}},
      {"another namespace with a ReferenceGrant naming the Service",
       base({service("svc", 80, "other"), endpoints("svc", 8080, "other", 7), grant,
             rules("- backendRefs: [{name: svc, namespace: other, port: 80}]\n")}),
       {"*: Prefix / -> other/svc:80"},
       {"HTTPRoute default/web parent default/gw: Accepted=True/Accepted "
        "ResolvedRefs=True/ResolvedRefs"}},
      {"a ReferenceGrant for another Service does not count",
       base({service("svc2", 80, "other"), grant,
             rules("- backendRefs: [{name: svc2, namespace: other, port: 80}]\n")}),
       {"*: Prefix / -> 500"},
       {},
       {E(kRoute, "RefNotPermitted")}},
      {"appProtocol kubernetes.io/h2c: an HTTP/2 upstream, named as the Ingress translator does",
       base({service("h2", 80, "default", 1, "kubernetes.io/h2c"),
             rules("- backendRefs: [{name: h2, port: 80}]\n")}),
       {"*: Prefix / -> default/h2:80+h2"},
       {},
       {},
       [](const TranslateResult& r) {
         EXPECT_EQ(r.config.upstreams.at("default/h2:80+h2").policy->protocol,
                   model::BackendProtocol::kH2c);
       }},
  };
  for (const auto& c : cases) run(c);
}

TEST(GatewayRoutesTest, GrpcRoutes) {
  auto grpc = [](const std::string& items) {
    return grpc_route("g",
                      "parentRefs: [{name: gw}]\nhostnames: [grpc.example.com]\nrules:\n" + items);
  };
  const std::string to_api = "  backendRefs: [{name: api, port: 80}]\n";
  const std::vector<Case> cases = {
      {"service and method matches become paths, ranked by the service's characters, then the "
       "method's (a service-only match before a method-only one); the backend speaks HTTP/2 "
       "cleartext",
       base({grpc("- matches:\n  - method: {service: pkg.Echo, method: Say}\n  - method: "
                  "{service: pkg.Other}\n  - method: {method: Ping}\n    headers: [{name: "
                  "X-Tenant, value: a}]\n  - method: {type: RegularExpression, service: "
                  "'pkg\\.[A-Z].*'}\n" +
                  to_api + "-" + to_api.substr(1))}),
       {"grpc.example.com: Regex /(?:pkg\\.[A-Z].*)/[^/]+$ -> default/api:80+h2",
        "grpc.example.com: Prefix /pkg.Other/ -> default/api:80+h2",
        "grpc.example.com: Exact /pkg.Echo/Say -> default/api:80+h2",
        "grpc.example.com: Regex /[^/]+/Ping$ h:x-tenant=a -> default/api:80+h2",
        "grpc.example.com: Prefix / -> default/api:80+h2"},
       {"GRPCRoute default/g parent default/gw: Accepted=True/Accepted "
        "ResolvedRefs=True/ResolvedRefs",
        "Gateway default/gw listener http: kinds=HTTPRoute,GRPCRoute attached=1 "
        "Accepted=True/Accepted Programmed=True/Programmed ResolvedRefs=True/ResolvedRefs "
        "Conflicted=False/NoConflicts"},
       {},
       [](const TranslateResult& r) {
         EXPECT_EQ(r.config.upstreams.at("default/api:80+h2").policy->protocol,
                   model::BackendProtocol::kH2c);
       }},
      {"a method match with neither service nor method drops the rule",
       base({grpc("- matches: [{method: {type: Exact}}]\n" + to_api)}),
       {},
       {"GRPCRoute default/g parent default/gw: Accepted=False/UnsupportedValue "
        "ResolvedRefs=True/ResolvedRefs"},
       {E("GRPCRoute default/g", "neither service nor method is set; rule dropped")}},
      {"an HTTPRoute and a GRPCRoute with intersecting hostnames on one listener: the older "
       "is accepted, the other not",
       base({http_route("a",
                        "parentRefs: [{name: gw}]\nhostnames: ['*.example.com']\n"
                        "rules:\n-" +
                            kToWeb.substr(1)),
             grpc("-" + to_api.substr(1)),
             grpc_route("other",
                        "parentRefs: [{name: gw}]\nhostnames: [other.example.net]\n"
                        "rules:\n-" +
                            to_api.substr(1))}),
       {"**.example.com: Prefix / -> default/web:80",
        "other.example.net: Prefix / -> default/api:80+h2"},
       {"HTTPRoute default/a parent default/gw: Accepted=True/Accepted "
        "ResolvedRefs=True/ResolvedRefs",
        "GRPCRoute default/g parent default/gw: Accepted=False/NotAllowedByListeners "
        "ResolvedRefs=True/ResolvedRefs",
        "GRPCRoute default/other parent default/gw: Accepted=True/Accepted "
        "ResolvedRefs=True/ResolvedRefs",
        "Gateway default/gw listener http: kinds=HTTPRoute,GRPCRoute attached=2 "
        "Accepted=True/Accepted Programmed=True/Programmed ResolvedRefs=True/ResolvedRefs "
        "Conflicted=False/NoConflicts"},
       {E("GRPCRoute default/g", "NotAllowedByListeners: HTTPRoute default/a (older)")}},
      {"a listener that only takes HTTPRoutes does not take GRPCRoutes",
       {gateway_class(),
        gateway("gw", http_listener("http", "allowedRoutes: {kinds: [{kind: HTTPRoute}]}")),
        service("api", 80), grpc("-" + to_api.substr(1))},
       {},
       {"GRPCRoute default/g parent default/gw: Accepted=False/NotAllowedByListeners "
        "ResolvedRefs=True/ResolvedRefs"},
       {E("GRPCRoute default/g", "NotAllowedByListeners")}},
  };
  for (const auto& c : cases) run(c);
}

TEST(GatewayRoutesTest, BackendTlsPolicies) {
  const std::string secure =
      "apiVersion: v1\nkind: Service\nmetadata: {name: secure, namespace: default}\nspec:\n"
      "  ports:\n  - {name: https, port: 443}\n  - {name: h2, port: 8443, appProtocol: "
      "kubernetes.io/h2c}\n";
  const std::string slice =
      "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: secure-x\n"
      "  namespace: default\n  labels: {kubernetes.io/service-name: secure}\naddressType: IPv4\n"
      "endpoints:\n- addresses: [10.0.0.9]\nports:\n- {name: https, port: 8443}\n";
  const std::string route = rules(
      "- matches: [{path: {value: /a}}]\n  backendRefs: [{name: secure, port: 443}]\n"
      "- matches: [{path: {value: /b}}]\n  backendRefs: [{name: secure, port: 8443}]\n");
  auto policy = [](const std::string& name, const std::string& target,
                   const std::string& validation, const std::string& created = "") {
    return backend_tls_policy(name, "targetRefs: [" + target + "]\nvalidation:\n" + validation,
                              created);
  };
  const std::string to_secure = "{group: '', kind: Service, name: secure}";
  const std::string valid =
      "  caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}]\n"
      "  hostname: Secure.Example.com\n";
  const std::vector<Case> cases = {
      {"a policy for the Service: TLS upstreams verified for the hostname with the ConfigMap's CA",
       base({secure, slice, ca_config_map("ca"), route, policy("tls", to_secure, valid)}),
       {"*: Prefix /a -> default/secure:443+btls", "*: Prefix /b -> default/secure:8443+h2+btls"},
       {"BackendTLSPolicy default/tls ancestor default/gw: Accepted=True/Accepted "
        "ResolvedRefs=True/ResolvedRefs"},
       {},
       [](const TranslateResult& r) {
         const auto& up = r.config.upstreams.at("default/secure:443+btls");
         EXPECT_EQ(up.policy->protocol, model::BackendProtocol::kHttps);
         EXPECT_TRUE(up.tls.enabled);
         EXPECT_EQ(up.tls.server_name, "secure.example.com");
         EXPECT_NE(up.tls.ca_pem.find("BEGIN CERTIFICATE"), std::string::npos);
         EXPECT_FALSE(up.endpoints.empty());
         EXPECT_EQ(r.config.upstreams.at("default/secure:8443+h2+btls").policy->protocol,
                   model::BackendProtocol::kH2);
       }},
      {"sectionName: only that port; an older policy on the same target wins (Conflicted)",
       base({secure, slice, ca_config_map("ca"), route,
             policy("young", "{group: '', kind: Service, name: secure, sectionName: https}", valid,
                    "2024-02-01T00:00:00Z"),
             policy("old", "{group: '', kind: Service, name: secure, sectionName: https}", valid,
                    "2024-01-01T00:00:00Z")}),
       {"*: Prefix /a -> default/secure:443+btls", "*: Prefix /b -> default/secure:8443+h2"},
       {"BackendTLSPolicy default/old ancestor default/gw: Accepted=True/Accepted "
        "ResolvedRefs=True/ResolvedRefs",
        "BackendTLSPolicy default/young ancestor default/gw: Accepted=False/Conflicted "
        "ResolvedRefs=True/ResolvedRefs"},
       {E("BackendTLSPolicy default/young", "already has BackendTLSPolicy default/old")}},
      {"a policy for a port and one for the whole Service both apply (to different ports)",
       base({secure, slice, ca_config_map("ca"), route,
             policy("port", "{group: '', kind: Service, name: secure, sectionName: https}", valid),
             policy("whole", to_secure,
                    "  caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}]\n"
                    "  hostname: other.example.com\n")}),
       {"*: Prefix /a -> default/secure:443+btls", "*: Prefix /b -> default/secure:8443+h2+btls"},
       {"BackendTLSPolicy default/port ancestor default/gw: Accepted=True/Accepted "
        "ResolvedRefs=True/ResolvedRefs",
        "BackendTLSPolicy default/whole ancestor default/gw: Accepted=True/Accepted "
        "ResolvedRefs=True/ResolvedRefs"},
       {},
       [](const TranslateResult& r) {
         EXPECT_EQ(r.config.upstreams.at("default/secure:443+btls").tls.server_name,
                   "secure.example.com");
         EXPECT_EQ(r.config.upstreams.at("default/secure:8443+h2+btls").tls.server_name,
                   "other.example.com");
       }},
      {"a missing ConfigMap: NoValidCACertificate, InvalidCACertificateRef; no endpoints (503)",
       base({secure, slice, route,
             policy("tls", to_secure,
                    "  caCertificateRefs: [{group: '', kind: ConfigMap, name: gone}]\n"
                    "  hostname: secure.example.com\n")}),
       {"*: Prefix /a -> default/secure:443+btls", "*: Prefix /b -> default/secure:8443+h2+btls"},
       {"BackendTLSPolicy default/tls ancestor default/gw: "
        "Accepted=False/NoValidCACertificate ResolvedRefs=False/InvalidCACertificateRef"},
       {E("BackendTLSPolicy default/tls",
          "InvalidCACertificateRef: "
          "spec.validation.caCertificateRefs[0]: ConfigMap "
          "default/gone not found"),
        E("BackendTLSPolicy default/tls", "no caCertificateRef can be used; not accepted")},
       [](const TranslateResult& r) {
         EXPECT_TRUE(r.config.upstreams.at("default/secure:443+btls").endpoints.empty());
         EXPECT_TRUE(r.fail_closed_upstreams.contains("default/secure:443+btls"));
       }},
      {"another kind of CA reference: InvalidKind",
       base({secure, route,
             policy("tls", to_secure,
                    "  caCertificateRefs: [{group: '', kind: Secret, name: ca}]\n"
                    "  hostname: secure.example.com\n")}),
       {"*: Prefix /a -> default/secure:443+btls", "*: Prefix /b -> default/secure:8443+h2+btls"},
       {"BackendTLSPolicy default/tls ancestor default/gw: "
        "Accepted=False/NoValidCACertificate ResolvedRefs=False/InvalidKind"},
       {E("BackendTLSPolicy default/tls", "InvalidKind"),
        E("BackendTLSPolicy default/tls", "not accepted")}},
      {"wellKnownCACertificates and subjectAltNames are not supported: Invalid, fail closed",
       base({secure, route,
             policy("tls", to_secure,
                    "  wellKnownCACertificates: System\n  hostname: secure.example.com\n")}),
       {"*: Prefix /a -> default/secure:443+btls", "*: Prefix /b -> default/secure:8443+h2+btls"},
       {"BackendTLSPolicy default/tls ancestor default/gw: Accepted=False/Invalid "
        "ResolvedRefs=True/ResolvedRefs"},
       {E("BackendTLSPolicy default/tls", "wellKnownCACertificates \"System\" is not supported")}},
  };
  for (const auto& c : cases) run(c);
}

// The manifest loader reads a folder with a Gateway, an HTTPRoute, a Service and its
// EndpointSlice into a Config the data plane would accept.
TEST(GatewayRoutesTest, ManifestFolder) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "gateway-manifests";
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
  };
  write("gateway.yaml", gateway_class() + "---\n" + gateway("gw", http_listener("http")));
  write("route.yaml", http_route("web",
                                 "parentRefs: [{name: gw}]\nhostnames: [web.example.com]\nrules:\n"
                                 "- matches: [{path: {value: /}}]\n  backendRefs: [{name: web, "
                                 "port: 80}]\n"));
  write("service.yaml", service("web", 80) + "---\n" + endpoints("web", 8080));
  auto loaded = source::load_manifest_dir(dir);
  EXPECT_TRUE(loaded.errors.empty());
  EXPECT_EQ(loaded.objects.size(), 5u);
  auto store = store::build_store(loaded);
  TranslateResult r = translate(store);
  EXPECT_EQ(model::validate(r.config), std::vector<std::string>{});
  EXPECT_TRUE(r.diagnostics.empty());
  model::Config want;
  model::VirtualHost vh{"web.example.com", {}};
  vh.falls_through = true;  // a route hostname, not the listener's
  model::Route route;
  route.path = "/";
  route.upstream = "default/web:80";
  route.ingress = "default/web";
  vh.routes.push_back(route);
  want.virtual_hosts.emplace(vh.host, vh);
  want.upstreams.emplace("default/web:80",
                         model::Upstream{"default/web:80", {{"10.0.0.1", 8080}}, {}, {}});
  EXPECT_EQ(r.config, want);
  fs::remove_all(dir);
}

// The store: a Service matters once a route of one of our Gateways names it (so the endpoint
// fast path and rebuilds follow Gateway backends), not before.
TEST(GatewayRoutesTest, StoreRelevance) {
  auto parse = [](const std::string& text) {
    auto loaded = source::load_manifest_text(text, "x.yaml");
    EXPECT_TRUE(loaded.errors.empty());
    return loaded.objects.at(0).object;
  };
  store::Store s;
  EXPECT_FALSE(s.insert(parse(service("web", 80))));
  EXPECT_FALSE(s.insert(parse(http_route("web",
                                         "parentRefs: [{name: gw}]\nrules:\n- "
                                         "backendRefs: [{name: web, port: 80}]\n"))));
  EXPECT_FALSE(s.insert(parse(gateway("gw", http_listener("http")))));  // no class yet
  EXPECT_TRUE(s.insert(parse(gateway_class())));
  EXPECT_TRUE(s.service_referenced("default", "web"));
  EXPECT_TRUE(s.insert(parse(endpoints("web", 8080))));
  EXPECT_FALSE(s.insert(parse(endpoints("other", 8080))));
  EXPECT_TRUE(s.insert(parse(tls_secret("unused"))) == false);
  EXPECT_TRUE(s.insert(
      parse(gateway("gw", http_listener("http") + "  - {name: s, protocol: HTTPS, port: 443, tls: "
                                                  "{certificateRefs: [{name: cert}]}}\n"))));
  EXPECT_TRUE(s.secret_referenced("default", "cert"));
  EXPECT_TRUE(s.insert(parse(gateway_class("tidegate", "example.com/other"))));
  EXPECT_FALSE(s.service_referenced("default", "web"));
}

// BackendTLSPolicies matter when they target a Service a route of ours names; their ConfigMaps
// when such a policy names them (config_map_named answers for any policy: what the kube source
// keeps).
TEST(GatewayRoutesTest, StoreRelevanceOfBackendTlsPolicies) {
  auto parse = [](const std::string& text) {
    auto loaded = source::load_manifest_text(text, "x.yaml");
    EXPECT_TRUE(loaded.errors.empty());
    return loaded.objects.at(0).object;
  };
  const std::string policy =
      backend_tls_policy("tls",
                         "targetRefs: [{group: '', kind: Service, name: web}]\nvalidation:\n"
                         "  caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}]\n"
                         "  hostname: web.internal\n");
  store::Store s;
  EXPECT_FALSE(s.insert(parse(policy)));  // nothing of ours uses Service web yet
  EXPECT_TRUE(s.config_map_named("default", "ca"));
  EXPECT_FALSE(s.config_map_referenced("default", "ca"));
  EXPECT_FALSE(s.insert(parse(ca_config_map("ca"))));
  EXPECT_FALSE(s.insert(parse(ca_config_map("other"))));
  EXPECT_TRUE(s.insert(parse(gateway_class())));
  EXPECT_TRUE(s.insert(parse(gateway("gw", http_listener("http")))));
  EXPECT_TRUE(s.insert(parse(http_route("web",
                                        "parentRefs: [{name: gw}]\nrules:\n- "
                                        "backendRefs: [{name: web, port: 80}]\n"))));
  EXPECT_TRUE(s.config_map_referenced("default", "ca"));
  EXPECT_FALSE(s.config_map_referenced("default", "other"));
  EXPECT_TRUE(s.remove(objects::Kind::kConfigMap, "default", "ca"));
  EXPECT_FALSE(s.remove(objects::Kind::kConfigMap, "default", "other"));
  EXPECT_TRUE(s.remove(objects::Kind::kBackendTLSPolicy, "default", "tls"));
  EXPECT_FALSE(s.config_map_named("default", "ca"));
}

}  // namespace
}  // namespace tidegate::controller::translate::gateway_table
