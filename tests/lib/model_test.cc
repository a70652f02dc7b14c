// Tests for the routing model: route precedence, host syntax, validation, and the diff/apply pair
// (including a seeded property test: applying diff(a, b) to a always yields b).

#include "model/model.h"

#include <gtest/gtest.h>

#include <chrono>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace tidegate::model {
namespace {

// ---- Builders ----

Route route(PathMatch match, std::string path, std::string upstream = "default/web:80") {
  return Route{std::move(path), match, std::move(upstream), "default/web"};
}
Route exact(std::string path) { return route(PathMatch::kExact, std::move(path)); }
Route prefix(std::string path) { return route(PathMatch::kPrefix, std::move(path)); }
Route regex(std::string path) { return route(PathMatch::kRegex, std::move(path)); }

Upstream upstream(std::string name, std::vector<Endpoint> endpoints = {{"10.0.0.1", 8080}}) {
  return Upstream{std::move(name), std::move(endpoints)};
}

VirtualHost vhost(std::string host, std::vector<Route> routes, bool ssl_redirect = false) {
  VirtualHost vh;
  vh.host = std::move(host);
  vh.routes = std::move(routes);
  vh.ssl_redirect = ssl_redirect;
  return vh;
}

Certificate cert(std::string name, std::string cert_pem = "CERT", std::string key_pem = "KEY") {
  return Certificate{std::move(name), std::move(cert_pem), std::move(key_pem)};
}

TlsHost tls_host(std::string host, std::string certificate) {
  return TlsHost{std::move(host), std::move(certificate)};
}

Substitution subst(std::string name, std::vector<substitution::Rule> rules = {{"a", "b", ""}}) {
  Substitution s;
  s.name = std::move(name);
  s.rules = std::move(rules);
  return s;
}

// A Delta with the fields `change` sets; named fields keep the cases readable as Delta grows.
Delta delta(auto change) {
  Delta d;
  change(d);
  return d;
}

Config config(std::vector<VirtualHost> hosts, std::vector<Upstream> upstreams,
              std::optional<Route> default_route = std::nullopt) {
  Config c;
  for (auto& h : hosts) c.virtual_hosts[h.host] = std::move(h);
  for (auto& u : upstreams) c.upstreams[u.name] = std::move(u);
  c.default_route = std::move(default_route);
  return c;
}

// A valid config to start the validation cases from.
Config valid_config() {
  Config c = config({vhost("foo.com", {exact("/login"), prefix("/")}, true),
                     vhost("*.bar.com", {regex("/api/v[0-9]+")}), vhost("*", {prefix("/")})},
                    {upstream("default/web:80")}, prefix("/"));
  c.certificates["default/foo-cert"] = cert("default/foo-cert");
  c.tls_hosts["foo.com"] = tls_host("foo.com", "default/foo-cert");
  c.tls_hosts["*.bar.com"] = tls_host("*.bar.com", "default/foo-cert");
  c.substitutions["default/web"] = subst("default/web");
  c.virtual_hosts["foo.com"].routes[1].substitution = "default/web";
  return c;
}

// "Exact /foo" for each route, in order: what the precedence tests compare.
std::vector<std::string> describe(const std::vector<Route>& routes) {
  std::vector<std::string> out;
  for (const auto& r : routes) out.push_back(std::string(to_string(r.match)) + " " + r.path);
  return out;
}

// ---- PathMatch names ----

TEST(PathMatchTest, NamesRoundTrip) {
  for (PathMatch m : {PathMatch::kExact, PathMatch::kPrefix, PathMatch::kRegex}) {
    auto back = path_match_from_string(to_string(m));
    ASSERT_TRUE(back.has_value()) << to_string(m);
    EXPECT_EQ(*back, m);
  }
  EXPECT_EQ(path_match_from_string("exact"), std::nullopt);  // case-sensitive, like Ingress v1
  EXPECT_EQ(path_match_from_string("ImplementationSpecific"), std::nullopt);
  EXPECT_EQ(path_match_from_string(""), std::nullopt);
}

// ---- sort_routes ----

struct SortCase {
  std::string name;
  std::vector<Route> input;
  std::vector<std::string> want;
};

TEST(SortRoutesTest, Table) {
  const std::vector<SortCase> cases = {
      {"longest path first",
       {prefix("/a"), prefix("/abc"), prefix("/ab")},
       {"Prefix /abc", "Prefix /ab", "Prefix /a"}},
      {"equal length: Exact, Prefix, Regex",
       {regex("/foo"), prefix("/foo"), exact("/foo")},
       {"Exact /foo", "Prefix /foo", "Regex /foo"}},
      {"Prefix /foo/ ties with Exact /foo: Exact first",
       {prefix("/foo/"), exact("/foo")},
       {"Exact /foo", "Prefix /foo/"}},
      {"Exact /foo before Prefix /foo/ whatever the input order",
       {exact("/foo"), prefix("/foo/")},
       {"Exact /foo", "Prefix /foo/"}},
      {"Prefix trailing slashes do not count for length",
       {prefix("/foo//"), prefix("/fooo")},
       {"Prefix /fooo", "Prefix /foo//"}},
      {"Prefix /foo and /foo/ are ordered by text",
       {prefix("/foo/"), prefix("/foo")},
       {"Prefix /foo", "Prefix /foo/"}},
      {"Exact trailing slash counts",
       {prefix("/foo"), exact("/foo/")},
       {"Exact /foo/", "Prefix /foo"}},
      {"Regex trailing slash counts",
       {prefix("/foo/"), regex("/foo/")},
       {"Regex /foo/", "Prefix /foo/"}},
      {"catch-all Prefix / is last, after Exact /",
       {prefix("/"), exact("/"), prefix("/a")},
       {"Prefix /a", "Exact /", "Prefix /"}},
      {"same length and kind: by path text",
       {prefix("/b"), prefix("/c"), prefix("/a")},
       {"Prefix /a", "Prefix /b", "Prefix /c"}},
      {"empty input", {}, {}},
  };
  auto with_method = [](Route r) {
    r.method = "GET";
    return r;
  };
  auto ranked = [](Route r, uint32_t precedence) {
    r.precedence_length = precedence;
    return r;
  };
  const std::vector<SortCase> more = {
      {"Prefix /foo/ and /foo are one path: a condition decides before the text",
       {prefix("/foo"), with_method(prefix("/foo/"))},
       {"Prefix /foo/", "Prefix /foo"}},
      {"precedence_length replaces the path's length (GRPCRoute: service, then method)",
       {ranked(regex("/[^/]+/LongMethodName$"), 4096 * 0 + 14 + 1),
        ranked(prefix("/svc.A/"), 4096 * 5 + 1), ranked(exact("/svc.A/M"), 4096 * 5 + 1 + 1),
        prefix("/")},
       {"Exact /svc.A/M", "Prefix /svc.A/", "Regex /[^/]+/LongMethodName$", "Prefix /"}},
  };
  for (const auto& c : more) {
    auto routes = c.input;
    sort_routes(routes);
    EXPECT_EQ(describe(routes), c.want) << c.name;
  }
  for (const auto& c : cases) {
    auto routes = c.input;
    sort_routes(routes);
    EXPECT_EQ(describe(routes), c.want) << c.name;
  }
}

TEST(SortRoutesTest, ResultDoesNotDependOnInputOrder) {
  std::vector<Route> routes = {exact("/foo"),  prefix("/foo/"), prefix("/foo"), regex("/fo+"),
                               prefix("/"),    exact("/"),      prefix("/a/b"), regex("/a.b"),
                               exact("/a/bc"), prefix("/a/b/"), regex("^/x$"),  prefix("/zz")};
  auto want = routes;
  sort_routes(want);
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::shuffle(routes.begin(), routes.end(), rng);
    auto got = routes;
    sort_routes(got);
    ASSERT_EQ(describe(got), describe(want)) << "shuffle " << i;
  }
}

// ---- is_valid_host ----

struct HostCase {
  std::string host;
  bool valid;
};

TEST(IsValidHostTest, Table) {
  const std::string label63(63, 'a');
  const std::string label64(64, 'a');
  // 4 labels of 63 + 3 dots = 255 bytes; 3 labels of 63 + one of 61 = 253 bytes.
  const std::string name253 = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'a');
  const std::string name254 = label63 + "." + label63 + "." + label63 + "." + std::string(62, 'a');
  const std::vector<HostCase> cases = {
      {"*", true},
      {"foo.com", true},
      {"foo", true},
      {"a-b.example.com", true},
      {"123.example.com", true},
      {"10.0.0.1", true},  // digits are DNS labels
      {"*.foo.com", true},
      {"*.com", true},
      {label63 + ".com", true},
      {name253, true},
      {"", false},
      {"Foo.com", false},  // lower case only
      {"foo.com.", false},
      {".foo.com", false},
      {"foo..com", false},
      {"-foo.com", false},
      {"foo-.com", false},
      {"foo_bar.com", false},
      {"foo.com:80", false},
      {"foo com", false},
      {"*.", false},
      {"*foo.com", false},
      {"foo.*.com", false},
      {"*.*.foo.com", false},
      {"**", false},
      {"[::1]", false},
      {label64 + ".com", false},
      {name254, false},
      {std::string("foo\0.com", 8), false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(is_valid_host(c.host), c.valid) << "\"" << c.host << "\"";
  }
}

// ---- validate ----

struct ValidateCase {
  std::string name;
  Config config;
  std::vector<std::string> want;  // one substring per expected error, in order
};

Config with(Config c, auto change) {
  change(c);
  return c;
}

TEST(ValidateTest, Table) {
  const std::vector<ValidateCase> cases = {
      {"valid", valid_config(), {}},
      {"empty config", Config{}, {}},
      {"virtual host key differs from host",
       with(valid_config(), [](Config& c) { c.virtual_hosts["foo.com"].host = "baz.com"; }),
       {"virtual host key \"foo.com\" != host \"baz.com\""}},
      {"Gateway listeners: hosts and TLS hosts scoped to them",
       with(valid_config(),
            [](Config& c) {
              c.listeners["ns/gw:80"] = Listener{"ns/gw:80", 20000, false};
              c.listeners["ns/gw:443"] = Listener{"ns/gw:443", 20001, true};
              VirtualHost vh = vhost("foo.com", {prefix("/")});
              vh.listener = "ns/gw:80";
              c.virtual_hosts[host_key(vh)] = vh;  // beside the unscoped foo.com
              TlsHost th = tls_host("foo.com", "ns/foo-cert");
              th.listener = "ns/gw:443";
              c.certificates["ns/foo-cert"] = cert("ns/foo-cert");
              c.tls_hosts[host_key(th)] = th;
            }),
       {}},
      {"Gateway listeners: bad names, ports, references and keys",
       with(valid_config(),
            [](Config& c) {
              c.listeners["Bad"] = Listener{"Bad", 20000, false};
              c.listeners["ns/a:80"] = Listener{"ns/a:80", 0, false};
              c.listeners["ns/b:80"] = Listener{"ns/b:80", 20000, false};
              c.listeners["ns/c:80"] = Listener{"ns/d:80", 20002, false};
              VirtualHost vh = vhost("foo.com", {prefix("/")});
              vh.listener = "ns/none:80";
              c.virtual_hosts[host_key(vh)] = vh;
              VirtualHost wrong_key = vhost("bar.com", {prefix("/")});
              wrong_key.listener = "ns/b:80";
              c.virtual_hosts["bar.com"] = wrong_key;
              TlsHost th = tls_host("foo.com", "");
              th.listener = "ns/b:80";  // not a TLS listener
              c.tls_hosts[host_key(th)] = th;
            }),
       {"invalid listener name \"Bad\"", "listener ns/a:80: port 0",
        "listener key \"ns/c:80\" != name \"ns/d:80\"",
        "listeners Bad and ns/b:80 share port 20000",
        "virtual host key \"bar.com\" != host \"ns/b:80 bar.com\"",
        "host foo.com: unknown listener \"ns/none:80\"",
        "TLS host foo.com: unknown TLS listener \"ns/b:80\""}},
      {"invalid host",
       with(valid_config(),
            [](Config& c) { c.virtual_hosts["Foo.com"] = vhost("Foo.com", {prefix("/")}); }),
       {"invalid host \"Foo.com\""}},
      {"a redirecting host",
       with(valid_config(),
            [](Config& c) {
              c.virtual_hosts["www.foo.com"] = vhost("www.foo.com", {});
              c.virtual_hosts["www.foo.com"].redirect_to = "foo.com";
            }),
       {}},
      {"a redirecting host names an exact host and has no routes",
       with(valid_config(),
            [](Config& c) {
              c.virtual_hosts["www.foo.com"] = vhost("www.foo.com", {prefix("/")});
              c.virtual_hosts["www.foo.com"].redirect_to = "*.foo.com";
            }),
       {"host www.foo.com: invalid redirect host \"*.foo.com\"",
        "host www.foo.com: a redirecting host has no routes"}},
      {"path without leading slash",
       with(valid_config(),
            [](Config& c) { c.virtual_hosts["foo.com"].routes.push_back(exact("login")); }),
       {"host foo.com: path \"login\" does not start with '/'"}},
      {"empty Prefix path",
       with(valid_config(),
            [](Config& c) { c.virtual_hosts["foo.com"].routes.push_back(prefix("")); }),
       {"host foo.com: path \"\" does not start with '/'"}},
      {"regex need not start with a slash",
       with(valid_config(),
            [](Config& c) { c.virtual_hosts["foo.com"].routes.push_back(regex(".*\\.png")); }),
       {}},
      {"regex that RE2 rejects",
       with(valid_config(),
            [](Config& c) { c.virtual_hosts["foo.com"].routes.push_back(regex("/a(b")); }),
       {"host foo.com: invalid regex \"/a(b\""}},
      {"regex with a backreference (RE2 has none)",
       with(valid_config(),
            [](Config& c) { c.virtual_hosts["foo.com"].routes.push_back(regex("/(a)\\1")); }),
       {"invalid regex \"/(a)\\1\""}},
      {"route to an unknown upstream",
       with(valid_config(),
            [](Config& c) {
              c.virtual_hosts["foo.com"].routes.push_back(route(PathMatch::kPrefix, "/x", "nope"));
            }),
       {"host foo.com: unknown upstream \"nope\""}},
      {"default route to an unknown upstream",
       with(valid_config(), [](Config& c) { c.default_route->upstream = "gone"; }),
       {"default route: unknown upstream \"gone\""}},
      {"default route with a bad path",
       with(valid_config(), [](Config& c) { c.default_route->path = "x"; }),
       {"default route: path \"x\" does not start with '/'"}},
      {"upstream key differs from name",
       with(valid_config(), [](Config& c) { c.upstreams["default/web:80"].name = "other"; }),
       {"upstream key \"default/web:80\" != name \"other\""}},
      {"endpoint with port 0",
       with(valid_config(),
            [](Config& c) {
              c.upstreams["default/web:80"].endpoints.push_back({"10.0.0.2", 0});
            }),
       {"upstream default/web:80: endpoint 10.0.0.2 has port 0"}},
      {"endpoint with empty address",
       with(valid_config(),
            [](Config& c) {
              c.upstreams["default/web:80"].endpoints.push_back({"", 80});
            }),
       {"upstream default/web:80: endpoint with empty address"}},
      {"duplicate endpoint",
       with(valid_config(),
            [](Config& c) {
              c.upstreams["default/web:80"].endpoints.push_back({"10.0.0.1", 8080});
            }),
       {"upstream default/web:80: duplicate endpoint 10.0.0.1:8080"}},
      {"TLS upstream",
       with(valid_config(),
            [](Config& c) {
              c.upstreams["default/web:80"].tls = {true, "web.default.svc", "CA"};
            }),
       {}},
      {"TLS settings on a plain upstream",
       with(valid_config(),
            [](Config& c) {
              c.upstreams["default/web:80"].tls = {false, "web.default.svc", ""};
            }),
       {"upstream default/web:80: TLS settings without TLS"}},
      {"TLS server name too long",
       with(valid_config(),
            [](Config& c) {
              c.upstreams["default/web:80"].tls = {true, std::string(254, 'a'), ""};
            }),
       {"upstream default/web:80: TLS server name longer than 253 characters"}},
      {"an endpoint three times is two duplicates",
       with(valid_config(),
            [](Config& c) {
              auto& eps = c.upstreams["default/web:80"].endpoints;
              eps.push_back({"10.0.0.9", 80});
              eps.push_back({"10.0.0.1", 8080});
              eps.push_back({"10.0.0.1", 8080});
            }),
       {"upstream default/web:80: duplicate endpoint 10.0.0.1:8080",
        "upstream default/web:80: duplicate endpoint 10.0.0.1:8080"}},
      // Beyond 16 endpoints the duplicates are found with a set instead of in place: the same
      // reports, in the endpoints' order.
      {"duplicates among many endpoints",
       with(valid_config(),
            [](Config& c) {
              auto& eps = c.upstreams["default/web:80"].endpoints;
              for (int i = 0; i < 20; ++i) eps.push_back({"10.1.0." + std::to_string(i), 80});
              eps.push_back({"10.1.0.3", 80});
              eps.push_back({"10.0.0.1", 8080});
              eps.push_back({"10.1.0.3", 80});
            }),
       {"upstream default/web:80: duplicate endpoint 10.1.0.3:80",
        "upstream default/web:80: duplicate endpoint 10.0.0.1:8080",
        "upstream default/web:80: duplicate endpoint 10.1.0.3:80"}},
      {"same address on two ports is not a duplicate",
       with(valid_config(),
            [](Config& c) {
              c.upstreams["default/web:80"].endpoints.push_back({"10.0.0.1", 8081});
            }),
       {}},
      {"certificate key differs from name",
       with(valid_config(),
            [](Config& c) { c.certificates["default/foo-cert"].name = "default/other"; }),
       {"certificate key \"default/foo-cert\" != name \"default/other\""}},
      {"certificate without its key",
       with(valid_config(), [](Config& c) { c.certificates["default/foo-cert"].key_pem = ""; }),
       {"certificate default/foo-cert: empty certificate or key"}},
      {"certificate without its chain",
       with(valid_config(), [](Config& c) { c.certificates["default/foo-cert"].cert_pem = ""; }),
       {"certificate default/foo-cert: empty certificate or key"}},
      {"TLS host key differs from host",
       with(valid_config(), [](Config& c) { c.tls_hosts["foo.com"].host = "baz.com"; }),
       {"TLS host key \"foo.com\" != host \"baz.com\""}},
      {"TLS host \"*\" without a certificate (it only names the certificate of other names)",
       with(valid_config(), [](Config& c) { c.tls_hosts["*"] = tls_host("*", ""); }),
       {"TLS host *: only a certificate (no passthrough, no client certificates)"}},
      {"invalid TLS host",
       with(valid_config(),
            [](Config& c) { c.tls_hosts["Foo.com"] = tls_host("Foo.com", "default/foo-cert"); }),
       {"invalid TLS host \"Foo.com\""}},
      {"TLS host with an unknown certificate",
       with(valid_config(), [](Config& c) { c.tls_hosts["foo.com"].certificate = "default/gone"; }),
       {"TLS host foo.com: unknown certificate \"default/gone\""}},
      {"TLS host with the default certificate (empty)",
       with(valid_config(), [](Config& c) { c.tls_hosts["foo.com"].certificate = ""; }),
       {}},
      {"TLS host with client certificates and the default certificate",
       with(valid_config(),
            [](Config& c) {
              c.tls_hosts["foo.com"].certificate = "";
              c.tls_hosts["foo.com"].client_auth = model::ClientAuth{};
              c.tls_hosts["foo.com"].client_auth->ca_pem = "pem";
            }),
       {}},
      {"client certificate settings out of range",
       with(valid_config(),
            [](Config& c) {
              model::ClientAuth a;
              a.verify_depth = 0;
              a.error_page = "//evil.com";
              a.match_cn = "(";
              c.tls_hosts["foo.com"].client_auth = a;
            }),
       {"TLS host foo.com: client_auth verify_depth out of range (1-16)",
        "TLS host foo.com: client_auth error_page is a scheme-relative URL (\"//host\")",
        "TLS host foo.com: client_auth match_cn: missing ): ("}},
      {"a passthrough host names an upstream, nothing else",
       with(valid_config(),
            [](Config& c) {
              c.tls_hosts["pt.com"] = tls_host("pt.com", "");
              c.tls_hosts["pt.com"].passthrough_upstream = c.upstreams.begin()->first;
            }),
       {}},
      {"a passthrough host with a certificate, an unknown upstream, a wildcard",
       with(valid_config(),
            [](Config& c) {
              c.tls_hosts["foo.com"].passthrough_upstream = "default/gone:80";
              c.tls_hosts["*.pt.com"] = tls_host("*.pt.com", "");
              c.tls_hosts["*.pt.com"].passthrough_upstream = c.upstreams.begin()->first;
            }),
       {"TLS host *.pt.com: a passthrough host is an exact name",
        "TLS host foo.com: a passthrough host has no certificate and no client certificates",
        "TLS host foo.com: unknown passthrough upstream \"default/gone:80\""}},
      {"TLS host without a virtual host is fine",
       with(valid_config(),
            [](Config& c) {
              c.tls_hosts["tls-only.com"] = tls_host("tls-only.com", "default/foo-cert");
            }),
       {}},
      {"route with an unknown substitution",
       with(valid_config(), [](Config& c) { c.virtual_hosts["*"].routes[0].substitution = "x/y"; }),
       {"host *: unknown substitution \"x/y\""}},
      {"default route with an unknown substitution",
       with(valid_config(), [](Config& c) { c.default_route->substitution = "x/y"; }),
       {"default route: unknown substitution \"x/y\""}},
      {"substitution key differs from name",
       with(valid_config(), [](Config& c) { c.substitutions["default/web"].name = "other"; }),
       {"substitution key \"default/web\" != name \"other\""}},
      {"substitution without rules",
       with(valid_config(), [](Config& c) { c.substitutions["default/web"].rules.clear(); }),
       {"substitution default/web: no rules"}},
      {"substitution with an invalid rule",
       with(valid_config(),
            [](Config& c) {
              c.substitutions["default/web"].rules.push_back({"(a", "x", ""});
              c.substitutions["default/web"].rules.push_back({"a*", "x", ""});
            }),
       {"substitution default/web: rule 1 (match \"(a\"): invalid regex",
        "substitution default/web: rule 2 (match \"a*\"): match can match the empty string"}},
      {"substitution with too many rules",
       with(valid_config(),
            [](Config& c) {
              c.substitutions["default/web"].rules.assign(substitution::kMaxRules + 1,
                                                          {"a", "b", ""});
            }),
       {"substitution default/web: more than 64 rules"}},
      {"substitution without MIME types",
       with(valid_config(), [](Config& c) { c.substitutions["default/web"].mime_types.clear(); }),
       {"substitution default/web: no MIME types"}},
      {"substitution with a bad MIME type",
       with(valid_config(),
            [](Config& c) { c.substitutions["default/web"].mime_types = {"Text/HTML"}; }),
       {"substitution default/web: invalid MIME type \"Text/HTML\""}},
      {"substitution with unsorted MIME types",
       with(valid_config(),
            [](Config& c) {
              c.substitutions["default/web"].mime_types = {"text/html", "application/xml"};
            }),
       {"MIME types not sorted and unique"}},
      {"substitution with duplicate MIME types",
       with(valid_config(),
            [](Config& c) {
              c.substitutions["default/web"].mime_types = {"text/html", "text/html"};
            }),
       {"MIME types not sorted and unique"}},
      {"substitution buffer too small",
       with(valid_config(), [](Config& c) { c.substitutions["default/web"].max_buffer = 1023; }),
       {"substitution default/web: max_buffer 1023 out of range [1024, 16777216]"}},
      {"substitution buffer too large",
       with(valid_config(),
            [](Config& c) { c.substitutions["default/web"].max_buffer = (16 << 20) + 1; }),
       {"max_buffer 16777217 out of range"}},
      {"substitution buffer at both bounds",
       with(valid_config(),
            [](Config& c) {
              c.substitutions["default/web"].max_buffer = kMinSubstitutionMaxBuffer;
              c.substitutions["other/x"] = subst("other/x");
              c.substitutions["other/x"].max_buffer = kMaxSubstitutionMaxBuffer;
            }),
       {}},
      {"route and upstream policies and a canary that are valid",
       with(valid_config(),
            [](Config& c) {
              c.upstreams["default/canary:80"] = upstream("default/canary:80");
              auto& r = c.virtual_hosts["foo.com"].routes[1];
              r.policy.mut().max_body_bytes = 1024;
              r.canary = Canary{"default/canary:80", 10, 100, "X-Canary", "", ""};
              c.upstreams["default/web:80"].policy.mut().load_balance = LoadBalance::kEwma;
              c.default_route->policy.mut().next_upstream_tries = 2;
            }),
       {}},
      {"invalid route policy",
       with(valid_config(),
            [](Config& c) {
              c.virtual_hosts["foo.com"].routes[1].policy.mut().next_upstream_tries = 0;
            }),
       {"host foo.com path \"/\": policy: "}},
      {"invalid default route policy",
       with(valid_config(),
            [](Config& c) {
              c.default_route->policy.mut().connect_timeout = std::chrono::hours(48);
            }),
       {"default route path \"/\": policy: connect_timeout"}},
      {"invalid upstream policy",
       with(valid_config(),
            [](Config& c) { c.upstreams["default/web:80"].policy.mut().hash_by = "$nope"; }),
       {"upstream default/web:80: policy: hash_by"}},
      {"canary naming an unknown upstream",
       with(valid_config(),
            [](Config& c) {
              c.virtual_hosts["foo.com"].routes[1].canary = Canary{"default/gone:80"};
            }),
       {"canary: unknown upstream \"default/gone:80\""}},
      {"canary without an upstream, weight over the total",
       with(valid_config(),
            [](Config& c) {
              c.virtual_hosts["foo.com"].routes[1].canary = Canary{"", 101, 100};
            }),
       {"canary has no upstream", "canary weight 101 exceeds the total 100"}},
      {"canary to the route's own upstream",
       with(valid_config(),
            [](Config& c) {
              c.virtual_hosts["foo.com"].routes[1].canary = Canary{"default/web:80"};
            }),
       {"canary upstream is the route's own"}},
      {"conditions of the default route and of a host's route",
       with(valid_config(),
            [](Config& c) {
              c.default_route = route(PathMatch::kPrefix, "/", "default/web:80");
              c.default_route->method = "get";
              c.virtual_hosts["foo.com"].routes[0].query.push_back(
                  {"a=b", "1", ValueMatch::kExact});
            }),
       {"host foo.com path \"/login\": query condition \"a=b\": the name must be",
        "default route path \"/\": method \"get\" is not an upper-case token"}},
      {"every problem is reported, not just the first",
       with(valid_config(),
            [](Config& c) {
              c.virtual_hosts["foo.com"].routes.push_back(route(PathMatch::kExact, "x", "nope"));
              c.upstreams["default/web:80"].endpoints.push_back({"10.0.0.3", 0});
            }),
       {"does not start with '/'", "unknown upstream \"nope\"", "has port 0"}},
  };
  for (const auto& c : cases) {
    auto errors = validate(c.config);
    ASSERT_EQ(errors.size(), c.want.size())
        << c.name << ": got " << ::testing::PrintToString(errors);
    for (size_t i = 0; i < errors.size(); ++i) {
      EXPECT_NE(errors[i].find(c.want[i]), std::string::npos)
          << c.name << ": error " << i << " is \"" << errors[i] << "\", want it to contain \""
          << c.want[i] << "\"";
    }
  }
}

// ---- Substitution ----

TEST(SubstitutionTest, DefaultsAreHtmlAnd64KiB) {
  Substitution s;
  EXPECT_EQ(s.mime_types, std::vector<std::string>{"text/html"});
  EXPECT_EQ(s.max_buffer, 65536u);
}

TEST(SubstitutionTest, RulesVersionFollowsTheRulesOnly) {
  Substitution a = subst("ns/a", {{"ab", "c", ""}});
  Substitution b = subst("ns/b", {{"ab", "c", ""}});
  b.mime_types = {"text/plain"};
  b.max_buffer = 4096;
  EXPECT_EQ(a.rules_version(), b.rules_version());  // same rules: the memo can be shared
  const uint64_t v = a.rules_version();
  // Fixed across processes and builds (the memo outlives nothing, but logs compare it).
  EXPECT_EQ(v, subst("x", {{"ab", "c", ""}}).rules_version());
  EXPECT_NE(v, subst("x", {{"a", "bc", ""}}).rules_version());  // fields are length-prefixed
  EXPECT_NE(v, subst("x", {{"ab", "c", "i"}}).rules_version());
  EXPECT_NE(v, subst("x", {{"ab", "c", ""}, {"ab", "c", ""}}).rules_version());
  EXPECT_NE(subst("x", {{"a", "b", ""}, {"c", "d", ""}}).rules_version(),
            subst("x", {{"c", "d", ""}, {"a", "b", ""}}).rules_version());  // order matters
}

TEST(SubstitutionTest, MimeTypeSyntax) {
  for (const char* ok : {"text/html", "application/xhtml+xml", "image/svg+xml", "text/x-c++"}) {
    EXPECT_TRUE(is_valid_mime_type(ok)) << ok;
  }
  for (const char* bad : {"", "text", "text/", "/html", "Text/html", "text/html; charset=utf-8",
                          "text/html ", "text/ht/ml", "text/*", "*/*", "text/h\"tml"}) {
    EXPECT_FALSE(is_valid_mime_type(bad)) << bad;
  }
}

TEST(DiffTest, SubstitutionChangeSendsOnlyTheSubstitution) {
  Config a = valid_config();
  Config b = with(a, [](Config& c) { c.substitutions["default/web"].rules[0].replace = "new"; });
  Delta d = diff(a, b);
  ASSERT_EQ(d.upsert_substitutions.size(), 1u);
  EXPECT_EQ(d.upsert_substitutions[0].rules[0].replace, "new");
  EXPECT_TRUE(d.upsert_virtual_hosts.empty());
  auto applied = apply(a, d);
  ASSERT_EQ(applied.error, "");
  EXPECT_EQ(applied.config, b);
  Config c = with(a, [](Config& c) {
    c.virtual_hosts["foo.com"].routes[1].substitution.clear();
    c.substitutions.clear();
  });
  d = diff(a, c);
  EXPECT_EQ(d.remove_substitutions, std::vector<std::string>{"default/web"});
  ASSERT_EQ(d.upsert_virtual_hosts.size(), 1u);  // the route no longer names it
  EXPECT_EQ(apply(a, d).config, c);
}

// ---- diff and apply ----

TEST(DiffTest, IdenticalConfigsGiveAnEmptyDelta) {
  EXPECT_TRUE(diff(valid_config(), valid_config()).empty());
  EXPECT_TRUE(diff(Config{}, Config{}).empty());
  EXPECT_TRUE(Delta{}.empty());
}

TEST(DiffTest, EachKindOfChangeIsNotEmpty) {
  const std::vector<std::pair<std::string, Delta>> cases = {
      {"upsert host", delta([](Delta& d) { d.upsert_virtual_hosts = {vhost("a.com", {})}; })},
      {"remove host", delta([](Delta& d) { d.remove_virtual_hosts = {"a.com"}; })},
      {"upsert upstream", delta([](Delta& d) { d.upsert_upstreams = {upstream("u")}; })},
      {"remove upstream", delta([](Delta& d) { d.remove_upstreams = {"u"}; })},
      {"upsert certificate", delta([](Delta& d) { d.upsert_certificates = {cert("c")}; })},
      {"remove certificate", delta([](Delta& d) { d.remove_certificates = {"c"}; })},
      {"upsert TLS host", delta([](Delta& d) { d.upsert_tls_hosts = {tls_host("a.com", "c")}; })},
      {"remove TLS host", delta([](Delta& d) { d.remove_tls_hosts = {"a.com"}; })},
      {"upsert substitution", delta([](Delta& d) { d.upsert_substitutions = {subst("ns/a")}; })},
      {"remove substitution", delta([](Delta& d) { d.remove_substitutions = {"ns/a"}; })},
      // A change to "no default route" is still a change.
      {"default route cleared", delta([](Delta& d) { d.default_route_changed = true; })},
  };
  for (const auto& [name, d] : cases) EXPECT_FALSE(d.empty()) << name;
}

TEST(DiffTest, ListsOnlyWhatChanged) {
  Config a = valid_config();
  Config b = with(a, [](Config& c) {
    c.virtual_hosts["foo.com"].routes.push_back(exact("/new"));    // changed
    c.virtual_hosts.erase("*.bar.com");                            // removed
    c.virtual_hosts["new.com"] = vhost("new.com", {prefix("/")});  // added
    c.upstreams["default/api:80"] = upstream("default/api:80");    // added
    c.default_route.reset();                                       // removed
    c.certificates["default/foo-cert"].key_pem = "NEW KEY";        // changed
    c.tls_hosts.erase("*.bar.com");                                // removed
  });
  Delta d = diff(a, b);
  std::vector<std::string> upserted;
  for (const auto& vh : d.upsert_virtual_hosts) upserted.push_back(vh.host);
  std::sort(upserted.begin(), upserted.end());
  EXPECT_EQ(upserted, (std::vector<std::string>{"foo.com", "new.com"}));
  EXPECT_EQ(d.remove_virtual_hosts, std::vector<std::string>{"*.bar.com"});
  ASSERT_EQ(d.upsert_upstreams.size(), 1u);
  EXPECT_EQ(d.upsert_upstreams[0].name, "default/api:80");
  EXPECT_TRUE(d.remove_upstreams.empty());
  EXPECT_TRUE(d.default_route_changed);
  EXPECT_EQ(d.default_route, std::nullopt);
  ASSERT_EQ(d.upsert_certificates.size(), 1u);
  EXPECT_EQ(d.upsert_certificates[0].key_pem, "NEW KEY");
  EXPECT_TRUE(d.remove_certificates.empty());
  EXPECT_TRUE(d.upsert_tls_hosts.empty());
  EXPECT_EQ(d.remove_tls_hosts, std::vector<std::string>{"*.bar.com"});
}

TEST(DiffTest, SslRedirectAloneIsAChange) {
  Config a = valid_config();
  Config b = with(a, [](Config& c) { c.virtual_hosts["foo.com"].ssl_redirect = false; });
  Delta d = diff(a, b);
  ASSERT_EQ(d.upsert_virtual_hosts.size(), 1u);
  EXPECT_FALSE(d.upsert_virtual_hosts[0].ssl_redirect);
}

struct ApplyErrorCase {
  std::string name;
  Delta delta;
  std::string want;
};

TEST(ApplyTest, RemovingUnknownKeysIsAnError) {
  const Config base = valid_config();
  const std::vector<ApplyErrorCase> cases = {
      {"unknown virtual host", delta([](Delta& d) { d.remove_virtual_hosts = {"nope.com"}; }),
       "remove of unknown virtual host \"nope.com\""},
      {"unknown upstream", delta([](Delta& d) { d.remove_upstreams = {"default/nope:80"}; }),
       "remove of unknown upstream \"default/nope:80\""},
      {"unknown certificate", delta([](Delta& d) { d.remove_certificates = {"default/nope"}; }),
       "remove of unknown certificate \"default/nope\""},
      {"unknown TLS host", delta([](Delta& d) { d.remove_tls_hosts = {"bar.com"}; }),
       "remove of unknown TLS host \"bar.com\""},
      {"unknown substitution", delta([](Delta& d) { d.remove_substitutions = {"default/nope"}; }),
       "remove of unknown substitution \"default/nope\""},
      {"a virtual host's name is not a TLS host",
       delta([](Delta& d) { d.remove_tls_hosts = {"*"}; }), "remove of unknown TLS host \"*\""},
      {"the same host removed twice", delta([](Delta& d) {
         d.remove_virtual_hosts = {"foo.com", "foo.com"};
       }),
       "remove of unknown virtual host \"foo.com\""},
      {"unknown host after a known one", delta([](Delta& d) {
         d.upsert_virtual_hosts = {vhost("x.com", {prefix("/")})};
         d.remove_virtual_hosts = {"foo.com", "gone.com"};
       }),
       "remove of unknown virtual host \"gone.com\""},
  };
  for (const auto& c : cases) {
    auto result = apply(base, c.delta);
    EXPECT_EQ(result.error, c.want) << c.name;
  }
}

TEST(ApplyTest, DoesNotTouchTheBase) {
  const Config base = valid_config();
  const Config copy = base;
  Delta d;
  d.remove_virtual_hosts = {"foo.com"};
  d.upsert_upstreams = {upstream("default/api:80")};
  auto result = apply(base, d);
  ASSERT_EQ(result.error, "");
  EXPECT_EQ(base, copy);
  EXPECT_FALSE(result.config.virtual_hosts.contains("foo.com"));
  EXPECT_TRUE(result.config.upstreams.contains("default/api:80"));
}

TEST(ApplyTest, DefaultRouteChangesOnlyWhenFlagged) {
  const Config base = valid_config();
  Delta keep;
  keep.default_route = std::nullopt;  // ignored: default_route_changed is false
  EXPECT_EQ(apply(base, keep).config.default_route, base.default_route);
  Delta clear;
  clear.default_route_changed = true;
  EXPECT_EQ(apply(base, clear).config.default_route, std::nullopt);
}

// Random configs over small pools of names, so that two of them share most keys and differ in a
// few: the interesting case for diff.
class RandomConfigs {
 public:
  explicit RandomConfigs(uint32_t seed) : rng_(seed) {}

  Config next() {
    Config c;
    for (const auto& host : kHosts) {
      if (chance(2)) continue;
      VirtualHost vh = vhost(host, {}, chance(2));
      int n = pick(4);
      for (int i = 0; i < n; ++i) vh.routes.push_back(random_route());
      c.virtual_hosts[host] = std::move(vh);
    }
    for (const auto& name : kUpstreams) {
      if (chance(2)) continue;
      Upstream u{name, {}};
      int n = pick(3);
      for (int i = 0; i < n; ++i) {
        u.endpoints.push_back({"10.0.0." + std::to_string(pick(3)), uint16_t(8080 + pick(2))});
      }
      c.upstreams[name] = std::move(u);
    }
    if (chance(2)) c.default_route = random_route();
    for (const auto& name : kCertificates) {
      if (chance(2)) continue;
      c.certificates[name] = Certificate{name, kPems[pick(2)], kPems[pick(2)]};
    }
    for (const auto& host : kTlsHosts) {
      if (chance(2)) continue;
      c.tls_hosts[host] = TlsHost{host, kCertificates[pick(2)]};
    }
    for (const auto& [name, port, tls] : kListeners) {
      if (chance(2)) continue;
      c.listeners[name] = Listener{name, static_cast<uint16_t>(port + pick(2)), tls};
    }
    for (const auto& host : kHosts) {
      if (chance(2)) continue;
      VirtualHost vh = vhost(host, {random_route()});
      vh.listener = std::get<0>(kListeners[pick(2)]);
      c.virtual_hosts[host_key(vh)] = std::move(vh);
    }
    for (const auto& host : kTlsHosts) {
      if (chance(3)) continue;
      TlsHost th{host, kCertificates[pick(2)]};
      th.listener = std::get<0>(kListeners[1]);
      c.tls_hosts[host_key(th)] = std::move(th);
    }
    for (const auto& name : kSubstitutionNames) {
      if (chance(2)) continue;
      Substitution s;
      s.name = name;
      s.rules = {{kMatches[pick(2)], "x", chance(2) ? "i" : ""}};
      if (chance(2)) s.mime_types = {"application/xhtml+xml", "text/html"};
      if (chance(3)) s.max_buffer = 4096;
      c.substitutions[name] = std::move(s);
    }
    return c;
  }

 private:
  static constexpr const char* kHosts[] = {"a.com", "b.com", "*.c.com", "*"};
  static constexpr const char* kUpstreams[] = {"ns/a:80", "ns/b:80", "ns/c:http"};
  static constexpr const char* kPaths[] = {"/", "/x", "/x/", "/y"};
  static constexpr const char* kCertificates[] = {"ns/a-cert", "ns/b-cert"};
  static constexpr const char* kPems[] = {"PEM 1", "PEM 2"};
  static constexpr const char* kTlsHosts[] = {"a.com", "*.c.com", "tls-only.com"};
  static constexpr const char* kSubstitutionNames[] = {"ns/one", "ns/two"};
  static constexpr std::tuple<const char*, int, bool> kListeners[] = {{"ns/gw:80", 20000, false},
                                                                      {"ns/gw:443", 20010, true}};
  static constexpr const char* kMatches[] = {"foo", "ba[rz]"};

  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool chance(int one_in) { return pick(one_in) == 0; }

  Route random_route() {
    return Route{kPaths[pick(4)], static_cast<PathMatch>(pick(3)), kUpstreams[pick(3)],
                 chance(2) ? "ns/one" : "ns/two", chance(2) ? "" : kSubstitutionNames[pick(2)]};
  }

  std::mt19937 rng_;
};

TEST(DiffApplyPropertyTest, ApplyingTheDiffYieldsTheTarget) {
  RandomConfigs gen(20240501);
  int nonempty = 0;
  for (int i = 0; i < 500; ++i) {
    const Config a = gen.next();
    const Config b = gen.next();
    const Delta d = diff(a, b);
    auto result = apply(a, d);
    ASSERT_EQ(result.error, "") << "iteration " << i;
    ASSERT_EQ(result.config, b) << "iteration " << i;
    // The delta is minimal: nothing unchanged is upserted, and it is empty exactly when a == b.
    for (const auto& vh : d.upsert_virtual_hosts) {
      auto it = a.virtual_hosts.find(host_key(vh));
      ASSERT_TRUE(it == a.virtual_hosts.end() || !(it->second == vh)) << "iteration " << i;
    }
    for (const auto& up : d.upsert_upstreams) {
      auto it = a.upstreams.find(up.name);
      ASSERT_TRUE(it == a.upstreams.end() || !(it->second == up)) << "iteration " << i;
    }
    for (const auto& c : d.upsert_certificates) {
      auto it = a.certificates.find(c.name);
      ASSERT_TRUE(it == a.certificates.end() || !(it->second == c)) << "iteration " << i;
    }
    for (const auto& t : d.upsert_tls_hosts) {
      auto it = a.tls_hosts.find(host_key(t));
      ASSERT_TRUE(it == a.tls_hosts.end() || !(it->second == t)) << "iteration " << i;
    }
    for (const auto& s : d.upsert_substitutions) {
      auto it = a.substitutions.find(s.name);
      ASSERT_TRUE(it == a.substitutions.end() || !(it->second == s)) << "iteration " << i;
    }
    for (const auto& l : d.upsert_listeners) {
      auto it = a.listeners.find(l.name);
      ASSERT_TRUE(it == a.listeners.end() || !(it->second == l)) << "iteration " << i;
    }
    ASSERT_EQ(d.empty(), a == b) << "iteration " << i;
    ASSERT_TRUE(diff(b, result.config).empty()) << "iteration " << i;
    if (!d.empty()) ++nonempty;
  }
  // The generator must actually produce different configs, or the property says nothing.
  EXPECT_GT(nonempty, 400);
}

TEST(DiffApplyPropertyTest, DeltasCompose) {
  RandomConfigs gen(99);
  for (int i = 0; i < 200; ++i) {
    const Config a = gen.next(), b = gen.next(), c = gen.next();
    auto ab = apply(a, diff(a, b));
    ASSERT_EQ(ab.error, "");
    auto abc = apply(ab.config, diff(b, c));
    ASSERT_EQ(abc.error, "") << "iteration " << i;
    ASSERT_EQ(abc.config, c) << "iteration " << i;
  }
}

}  // namespace
}  // namespace tidegate::model
