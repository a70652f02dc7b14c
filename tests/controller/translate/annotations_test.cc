// Table tests for the annotation parser: each case is {name, annotations, want policy (as a
// change to the defaults), want diagnostics (severity + a piece of the message, in order)}.
// Every case also checks that the policy passes model::validate and that every diagnostic names
// the Ingress. A coverage test at the end requires, for every supported annotation, at least one
// case where it is valid and one where it is refused.

#include "translate/annotations.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace tidegate::controller::translate {
namespace {

using namespace std::chrono_literals;
using model::Canary;
using model::RoutePolicy;

using Annotations = std::map<std::string, std::string>;

// Keys without a '/' get our prefix.
Annotations A(std::initializer_list<std::pair<const std::string, std::string>> items) {
  Annotations out;
  for (const auto& [k, v] : items) {
    out[k.find('/') == std::string::npos ? "tidegate.io/" + k : k] = v;
  }
  return out;
}

struct Want {
  Severity severity;
  std::string text;  // a piece of the message
};
Want E(std::string t) { return {Severity::kError, std::move(t)}; }
Want W(std::string t) { return {Severity::kWarning, std::move(t)}; }

AnnotationContext plain_paths() { return {"default", "web", {{"/", false}, {"/api", false}}}; }
AnnotationContext regex_paths() {
  return {"default", "web", {{"/api(/|$)(.*)", true}, {"/v([0-9]+)/(.*)", true}}};
}

struct Case {
  std::string name;
  Annotations annotations;
  std::function<void(IngressPolicy&)> want = [](IngressPolicy&) {};
  std::vector<Want> diagnostics = {};
  AnnotationContext context = plain_paths();
  AnnotationOptions options = {};
};

std::string dump(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) out += to_string(d) + "\n";
  return out;
}

void run(const Case& c) {
  SCOPED_TRACE(c.name);
  AnnotationResult got = parse_annotations(c.annotations, c.context, c.options);
  IngressPolicy want;
  if (c.want) c.want(want);  // `{}` in a case leaves it empty: no change
  EXPECT_EQ(got.policy.upstream, want.upstream) << model::to_json(got.policy.upstream).dump();
  EXPECT_EQ(got.policy.route, want.route) << model::to_json(got.policy.route).dump();
  EXPECT_EQ(got.policy.canary, want.canary);
  ASSERT_EQ(got.diagnostics.size(), c.diagnostics.size()) << dump(got.diagnostics);
  for (size_t i = 0; i < c.diagnostics.size(); ++i) {
    const auto& d = got.diagnostics[i];
    EXPECT_EQ(d.object, "Ingress " + c.context.ingress_namespace + "/" + c.context.ingress_name);
    EXPECT_EQ(d.severity, c.diagnostics[i].severity) << d.message;
    EXPECT_NE(d.message.find(c.diagnostics[i].text), std::string::npos)
        << "want \"" << c.diagnostics[i].text << "\" in: " << d.message;
  }
  EXPECT_TRUE(model::validate(got.policy.route).empty());
  EXPECT_TRUE(model::validate(got.policy.upstream).empty());
  if (got.policy.canary) {
    EXPECT_TRUE(model::validate(*got.policy.canary, false).empty());
  }
}

std::vector<Case> cases() {
  return {
      {"no annotations: every default", {}},
      {"unrelated and other controllers' annotations are ignored",
       A({{"kubernetes.io/ingress.class", "x"},
          {"nginx.ingress.kubernetes.io/limit-rps", "5"},
          {"use-regex", "true"}})},

      // ---- load-balance, upstream-hash-by ----
      {"load-balance ewma", A({{"load-balance", "ewma"}}),
       [](IngressPolicy& p) { p.upstream.load_balance = model::LoadBalance::kEwma; }},
      {"load-balance least_conn with spaces", A({{"load-balance", " least_conn "}}),
       [](IngressPolicy& p) { p.upstream.load_balance = model::LoadBalance::kLeastConn; }},
      {"load-balance ip_hash", A({{"load-balance", "ip_hash"}}),
       [](IngressPolicy& p) { p.upstream.load_balance = model::LoadBalance::kIpHash; }},
      {"load-balance round_robin", A({{"load-balance", "round_robin"}})},
      {"load-balance unknown",
       A({{"load-balance", "random"}}),
       {},
       {E("annotation tidegate.io/load-balance: invalid value \"random\": expected one of "
          "round_robin, least_conn, ip_hash, ewma; ignored")}},
      {"load-balance wrong case",
       A({{"load-balance", "EWMA"}}),
       {},
       {E("tidegate.io/load-balance: invalid value \"EWMA\"")}},
      {"upstream-hash-by", A({{"upstream-hash-by", "$http_x_user_id$arg_t"}}),
       [](IngressPolicy& p) { p.upstream.hash_by = "$http_x_user_id$arg_t"; }},
      {"upstream-hash-by overrides load-balance",
       A({{"upstream-hash-by", "$remote_addr"}, {"load-balance", "ewma"}}),
       [](IngressPolicy& p) {
         p.upstream.load_balance = model::LoadBalance::kEwma;
         p.upstream.hash_by = "$remote_addr";
       },
       {W("tidegate.io/load-balance: overridden by tidegate.io/upstream-hash-by")}},
      {"upstream-hash-by unknown variable",
       A({{"upstream-hash-by", "$host"}}),
       {},
       {E("tidegate.io/upstream-hash-by: invalid value \"$host\": unknown variable \"$host\" at "
          "offset 0")}},
      {"upstream-hash-by unclosed",
       A({{"upstream-hash-by", "${arg_a"}}),
       {},
       {E("is not closed by '}'")}},
      {"upstream-hash-by empty", A({{"upstream-hash-by", ""}}), {}, {E("empty expression")}},

      // ---- affinity ----
      {"affinity cookie with defaults", A({{"affinity", "cookie"}}),
       [](IngressPolicy& p) { p.upstream.affinity = model::SessionAffinity{}; }},
      {"affinity with every cookie setting",
       A({{"affinity", "cookie"},
          {"session-cookie-name", "route"},
          {"session-cookie-max-age", "3600"},
          {"session-cookie-path", "/app"},
          {"session-cookie-secure", "true"},
          {"session-cookie-samesite", "lax"}}),
       [](IngressPolicy& p) {
         p.upstream.affinity =
             model::SessionAffinity{"route", 3600, "/app", true, model::SameSite::kLax};
       }},
      {"affinity other than cookie",
       A({{"affinity", "ip"}, {"session-cookie-name", "x"}}),
       {},
       {E("tidegate.io/affinity: invalid value \"ip\": the only supported affinity is "
          "\"cookie\""),
        W("tidegate.io/session-cookie-name: has no effect without affinity: cookie")}},
      {"session-cookie-* without affinity",
       A({{"session-cookie-max-age", "1"}, {"session-cookie-samesite", "Lax"}}),
       {},
       {W("session-cookie-max-age: has no effect"), W("session-cookie-samesite: has no effect")}},
      {"affinity with invalid cookie settings each ignored",
       A({{"affinity", "cookie"},
          {"session-cookie-name", "a=b"},
          {"session-cookie-max-age", "-1"},
          {"session-cookie-path", "app"},
          {"session-cookie-secure", "yes"},
          {"session-cookie-samesite", "Sometimes"}}),
       [](IngressPolicy& p) { p.upstream.affinity = model::SessionAffinity{}; },
       {E("session-cookie-name: invalid value \"a=b\": a cookie name must be a token"),
        E("session-cookie-max-age: invalid value \"-1\": expected a whole number (0-34560000)"),
        E("session-cookie-path: invalid value \"app\": a cookie path must start with '/'"),
        E("session-cookie-secure: invalid value \"yes\": expected \"true\" or \"false\""),
        E("session-cookie-samesite: invalid value \"Sometimes\": expected Strict, Lax or None")}},
      {"session-cookie-max-age too large",
       A({{"affinity", "cookie"}, {"session-cookie-max-age", "99999999999"}}),
       [](IngressPolicy& p) { p.upstream.affinity = model::SessionAffinity{}; },
       {E("out of range (0-34560000)")}},

      // ---- backend-protocol, proxy-ssl-secret ----
      {"backend-protocol HTTPS with a secret",
       A({{"backend-protocol", "HTTPS"}, {"proxy-ssl-secret", "default/backend-ca"}}),
       [](IngressPolicy& p) {
         p.upstream.protocol = model::BackendProtocol::kHttps;
         p.upstream.tls_secret = "default/backend-ca";
       }},
      {"proxy-ssl-secret without namespace is the Ingress's",
       A({{"backend-protocol", "https"}, {"proxy-ssl-secret", "backend-ca"}}),
       [](IngressPolicy& p) {
         p.upstream.protocol = model::BackendProtocol::kHttps;
         p.upstream.tls_secret = "default/backend-ca";
       }},
      {"backend-protocol HTTP", A({{"backend-protocol", "HTTP"}})},
      {"backend-protocol GRPC is not supported",
       A({{"backend-protocol", "grpc"}}),
       {},
       {E("backend-protocol: invalid value \"grpc\": GRPC backends are not supported")}},
      {"backend-protocol unknown",
       A({{"backend-protocol", "SPDY"}}),
       {},
       {E("expected HTTP or HTTPS")}},
      {"proxy-ssl-secret in another namespace",
       A({{"backend-protocol", "HTTPS"}, {"proxy-ssl-secret", "kube-system/ca"}}),
       [](IngressPolicy& p) { p.upstream.protocol = model::BackendProtocol::kHttps; },
       {E("proxy-ssl-secret: invalid value \"kube-system/ca\": the Secret must be in the "
          "Ingress's namespace")}},
      {"proxy-ssl-secret malformed",
       A({{"backend-protocol", "HTTPS"}, {"proxy-ssl-secret", "default/CA_bundle"}}),
       [](IngressPolicy& p) { p.upstream.protocol = model::BackendProtocol::kHttps; },
       {E("proxy-ssl-secret: invalid value \"default/CA_bundle\"")}},
      {"proxy-ssl-secret without HTTPS",
       A({{"proxy-ssl-secret", "default/ca"}}),
       {},
       {W("proxy-ssl-secret: has no effect without backend-protocol: HTTPS")}},
      {"proxy-ssl-name, lower-cased",
       A({{"backend-protocol", "HTTPS"}, {"proxy-ssl-name", " Backend.Example.com "}}),
       [](IngressPolicy& p) {
         p.upstream.protocol = model::BackendProtocol::kHttps;
         p.upstream.tls_server_name = "backend.example.com";
       }},
      {"proxy-ssl-name may be an IP address",
       A({{"backend-protocol", "HTTPS"}, {"proxy-ssl-name", "fd00::1"}}),
       [](IngressPolicy& p) {
         p.upstream.protocol = model::BackendProtocol::kHttps;
         p.upstream.tls_server_name = "fd00::1";
       }},
      {"proxy-ssl-name wildcard refused",
       A({{"backend-protocol", "HTTPS"}, {"proxy-ssl-name", "*.example.com"}}),
       [](IngressPolicy& p) { p.upstream.protocol = model::BackendProtocol::kHttps; },
       {E("proxy-ssl-name: invalid value \"*.example.com\": must be a lower-case DNS name")}},
      {"proxy-ssl-name without HTTPS",
       A({{"proxy-ssl-name", "a.example.com"}}),
       {},
       {W("proxy-ssl-name: has no effect without backend-protocol: HTTPS")}},

      // ---- timeouts, body size, retries ----
      {"timeouts in nginx syntax",
       A({{"proxy-connect-timeout", "500ms"},
          {"proxy-read-timeout", "1m30s"},
          {"proxy-send-timeout", "120"}}),
       [](IngressPolicy& p) {
         p.route.connect_timeout = 500ms;
         p.route.read_timeout = 90s;
         p.route.send_timeout = 120s;
       }},
      {"timeouts in hours and days",
       A({{"proxy-read-timeout", "1d"}, {"proxy-send-timeout", "2h"}}),
       [](IngressPolicy& p) {
         p.route.read_timeout = 24h;
         p.route.send_timeout = 2h;
       }},
      {"invalid timeouts",
       A({{"proxy-connect-timeout", "0"},
          {"proxy-read-timeout", "30s1m"},
          {"proxy-send-timeout", "2d"}}),
       {},
       {E("proxy-connect-timeout: invalid value \"0\": out of range (1ms-24h)"),
        E("proxy-read-timeout: invalid value \"30s1m\": expected a duration"),
        E("proxy-send-timeout: invalid value \"2d\": out of range")}},
      {"timeout with a fraction or a unit nginx lacks",
       A({{"proxy-connect-timeout", "1.5s"}, {"proxy-read-timeout", "10x"}}),
       {},
       {E("proxy-connect-timeout: invalid value \"1.5s\""),
        E("proxy-read-timeout: invalid value \"10x\"")}},
      {"proxy-body-size", A({{"proxy-body-size", "8m"}}),
       [](IngressPolicy& p) { p.route.max_body_bytes = 8u << 20; }},
      {"proxy-body-size in bytes and K", A({{"proxy-body-size", "512K"}}),
       [](IngressPolicy& p) { p.route.max_body_bytes = 512u << 10; }},
      {"proxy-body-size 0 is unlimited", A({{"proxy-body-size", "0"}})},
      {"proxy-body-size invalid",
       A({{"proxy-body-size", "8mb"}}),
       {},
       {E("proxy-body-size: invalid value \"8mb\": expected a size")}},
      {"proxy-body-size too large",
       A({{"proxy-body-size", "2000g"}}),
       {},
       {E("larger than 1 TiB")}},
      {"proxy-body-size overflowing",
       A({{"proxy-body-size", "99999999999999999g"}}),
       {},
       {E("expected a size")}},
      {"proxy-next-upstream", A({{"proxy-next-upstream", "error timeout http_502 http_503"}}),
       [](IngressPolicy& p) { p.route.next_upstream = {true, true, true, true, false, false}; }},
      {"proxy-next-upstream with non_idempotent",
       A({{"proxy-next-upstream", "http_504  non_idempotent"}}),
       [](IngressPolicy& p) { p.route.next_upstream = {false, false, false, false, true, true}; }},
      {"proxy-next-upstream off", A({{"proxy-next-upstream", "off"}}),
       [](IngressPolicy& p) {
         p.route.next_upstream = {false, false, false, false, false, false};
       }},
      {"proxy-next-upstream unsupported condition",
       A({{"proxy-next-upstream", "error http_500"}}),
       {},
       {E("proxy-next-upstream: invalid value \"error http_500\": unsupported condition "
          "\"http_500\"")}},
      {"proxy-next-upstream off with others",
       A({{"proxy-next-upstream", "off error"}}),
       {},
       {E("\"off\" must be alone")}},
      {"proxy-next-upstream only non_idempotent",
       A({{"proxy-next-upstream", "non_idempotent"}}),
       {},
       {E("non_idempotent needs at least one condition")}},
      {"proxy-next-upstream empty", A({{"proxy-next-upstream", " "}}), {}, {E("empty")}},
      {"proxy-next-upstream-tries", A({{"proxy-next-upstream-tries", "5"}}),
       [](IngressPolicy& p) { p.route.next_upstream_tries = 5; }},
      {"proxy-next-upstream-tries 0 (nginx: unlimited) is refused",
       A({{"proxy-next-upstream-tries", "0"}}),
       {},
       {E("proxy-next-upstream-tries: invalid value \"0\": out of range (1-20)")}},
      {"proxy-next-upstream-tries not a number",
       A({{"proxy-next-upstream-tries", "three"}}),
       {},
       {E("expected a whole number (1-20)")}},

      // ---- rewrite-target, app-root, redirects ----
      {"rewrite-target with groups on regex paths",
       A({{"rewrite-target", "/$2"}}),
       [](IngressPolicy& p) { p.route.rewrite_target = "/$2"; },
       {},
       regex_paths()},
      {"rewrite-target without groups on plain paths", A({{"rewrite-target", "/"}}),
       [](IngressPolicy& p) { p.route.rewrite_target = "/"; }},
      {"rewrite-target group beyond a path's captures",
       A({{"rewrite-target", "/$3"}}),
       {},
       {E("rewrite-target: invalid value \"/$3\": refers to $3 but path \"/api(/|$)(.*)\" has 2 "
          "capture groups")},
       regex_paths()},
      {"rewrite-target group without use-regex",
       A({{"rewrite-target", "/$1"}}),
       {},
       {E("refers to $1 but path \"/\" is not a regex")}},
      {"rewrite-target group with an Exact path among regexes",
       A({{"rewrite-target", "/$1"}}),
       {},
       {E("path \"/exact\" is not a regex")},
       AnnotationContext{"default", "web", {{"/(.*)", true}, {"/exact", false}}}},
      {"rewrite-target group on an Ingress without paths",
       A({{"rewrite-target", "/$1"}}),
       {},
       {E("the Ingress has no regex path")},
       AnnotationContext{"default", "web", {}}},
      {"rewrite-target skips paths RE2 rejects (the translator reports them)",
       A({{"rewrite-target", "/$1"}}),
       [](IngressPolicy& p) { p.route.rewrite_target = "/$1"; },
       {},
       AnnotationContext{"default", "web", {{"/(a", true}, {"/(b)", true}}}},
      {"rewrite-target with another variable",
       A({{"rewrite-target", "/$host"}}),
       {},
       {E("'$' at offset 1 is not followed by a group number 1-9")}},
      {"app-root", A({{"app-root", "/app1"}}),
       [](IngressPolicy& p) { p.route.app_root = "/app1"; }},
      {"app-root relative",
       A({{"app-root", "app1"}}),
       {},
       {E("app-root: invalid value \"app1\": app-root must start with '/'")}},
      {"permanent-redirect with its default code",
       A({{"permanent-redirect", "https://example.com/new"}}),
       [](IngressPolicy& p) {
         p.route.redirect = model::Redirect{"https://example.com/new", 301};
       }},
      {"permanent-redirect-code 308",
       A({{"permanent-redirect", "https://example.com"}, {"permanent-redirect-code", "308"}}),
       [](IngressPolicy& p) {
         p.route.redirect = model::Redirect{"https://example.com", 308};
       }},
      {"temporal-redirect with its code",
       A({{"temporal-redirect", "/maintenance"}, {"temporal-redirect-code", "307"}}),
       [](IngressPolicy& p) {
         p.route.redirect = model::Redirect{"/maintenance", 307};
       }},
      {"temporal-redirect wins over permanent-redirect",
       A({{"permanent-redirect", "https://a.example"}, {"temporal-redirect", "https://b.example"}}),
       [](IngressPolicy& p) {
         p.route.redirect = model::Redirect{"https://b.example", 302};
       },
       {W("tidegate.io/permanent-redirect and tidegate.io/temporal-redirect are both set; "
          "tidegate.io/temporal-redirect wins")}},
      {"invalid redirect code keeps the redirect with the default code",
       A({{"permanent-redirect", "https://a.example"}, {"permanent-redirect-code", "200"}}),
       [](IngressPolicy& p) {
         p.route.redirect = model::Redirect{"https://a.example", 301};
       },
       {E("permanent-redirect-code: invalid value \"200\": expected 301, 302, 303, 307 or 308; "
          "ignored (301 applies)")}},
      {"invalid redirect URLs",
       A({{"permanent-redirect", "javascript:alert(1)"}, {"temporal-redirect", "https://x/\"a"}}),
       {},
       {E("permanent-redirect: invalid value \"javascript:alert(1)\": must be an http:// or "
          "https:// URL"),
        E("temporal-redirect: invalid value \"https://x/\"a\": may not hold")}},
      {"invalid temporal-redirect-code",
       A({{"temporal-redirect", "/x"}, {"temporal-redirect-code", "301x"}}),
       [](IngressPolicy& p) {
         p.route.redirect = model::Redirect{"/x", 302};
       },
       {E("temporal-redirect-code: invalid value \"301x\": expected 301, 302, 303, 307 or 308; "
          "ignored (302 applies)")}},
      {"redirect codes without redirects",
       A({{"permanent-redirect-code", "308"}, {"temporal-redirect-code", "307"}}),
       {},
       {W("permanent-redirect-code: has no effect without permanent-redirect"),
        W("temporal-redirect-code: has no effect without temporal-redirect")}},
      {"app-root with a redirect",
       A({{"app-root", "/app"}, {"temporal-redirect", "/x"}}),
       [](IngressPolicy& p) {
         p.route.app_root = "/app";
         p.route.redirect = model::Redirect{"/x", 302};
       },
       {W("app-root has no effect")}},

      // ---- custom-headers, upstream-vhost ----
      {"custom-headers, one per line",
       A({{"custom-headers", "X-Frame-Options: DENY\n\n  Cache-Control: no-store, private  \n"}}),
       [](IngressPolicy& p) {
         p.route.response_headers = {{"X-Frame-Options", "DENY"},
                                     {"Cache-Control", "no-store, private"}};
       }},
      {"custom-headers with an empty value and a colon in the value",
       A({{"custom-headers", "X-Empty:\nX-Time: 12:00"}}),
       [](IngressPolicy& p) {
         p.route.response_headers = {{"X-Empty", ""}, {"X-Time", "12:00"}};
       }},
      {"custom-headers naming a ConfigMap (ingress-nginx style)",
       A({{"custom-headers", "default/custom-headers"}}),
       {},
       {E("custom-headers: invalid value \"default/custom-headers\": ConfigMap references are "
          "not supported")}},
      {"custom-headers line without a colon",
       A({{"custom-headers", "X-A: 1\nbroken line"}}),
       {},
       {E("line 2: expected \"Name: value\"")}},
      {"custom-headers bad name",
       A({{"custom-headers", "X A: 1"}}),
       {},
       {E("line 1: header name \"X A\" is not a token")}},
      {"custom-headers reserved name",
       A({{"custom-headers", "Transfer-Encoding: gzip"}}),
       {},
       {E("Transfer-Encoding is managed by the proxy")}},
      {"custom-headers twice",
       A({{"custom-headers", "X-A: 1\nx-a: 2"}}),
       {},
       {E("line 2: x-a is set twice")}},
      {"custom-headers empty", A({{"custom-headers", "\n"}}), {}, {E("no header given")}},
      {"upstream-vhost", A({{"upstream-vhost", "internal.example.com"}}),
       [](IngressPolicy& p) { p.route.upstream_vhost = "internal.example.com"; }},
      {"upstream-vhost with port", A({{"upstream-vhost", "10.0.0.1:8080"}}),
       [](IngressPolicy& p) { p.route.upstream_vhost = "10.0.0.1:8080"; }},
      {"upstream-vhost invalid",
       A({{"upstream-vhost", "a b.example"}}),
       {},
       {E("upstream-vhost: invalid value \"a b.example\": must be host or host:port")}},

      // ---- allow-upgrade ----
      {"allow-upgrade", A({{"allow-upgrade", "Foo/2, bar, foo/2"}}),
       [](IngressPolicy& p) {
         p.route.upgrade_protocols = {"foo/2", "bar"};
       }},
      {"allow-upgrade h2c",
       A({{"allow-upgrade", "foo, h2c"}}),
       {},
       {E("allow-upgrade: invalid value \"foo, h2c\": \"h2c\": h2c is never forwarded")}},
      {"allow-upgrade websocket",
       A({{"allow-upgrade", "websocket"}}),
       {},
       {E("websocket upgrades are always forwarded")}},
      {"allow-upgrade empty entry",
       A({{"allow-upgrade", "foo,,bar"}}),
       {},
       {E("allow-upgrade: invalid value \"foo,,bar\": \"\": must be a protocol name")}},

      // ---- CORS ----
      {"enable-cors with ingress-nginx's defaults", A({{"enable-cors", "true"}}),
       [](IngressPolicy& p) { p.route.cors = model::Cors{}; }},
      {"enable-cors false",
       A({{"enable-cors", "false"}, {"cors-max-age", "5"}}),
       {},
       {W("cors-max-age: has no effect without enable-cors")}},
      {"enable-cors invalid",
       A({{"enable-cors", "yes"}}),
       {},
       {E("enable-cors: invalid value \"yes\": expected \"true\" or \"false\"")}},
      {"every cors option",
       A({{"enable-cors", "true"},
          {"cors-allow-origin", "https://a.example.com, https://*.example.org:8443"},
          {"cors-allow-methods", "GET,POST"},
          {"cors-allow-headers", "X-A, Content-Type"},
          {"cors-expose-headers", "*"},
          {"cors-allow-credentials", "false"},
          {"cors-max-age", "600"}}),
       [](IngressPolicy& p) {
         model::Cors c;
         c.allow_origins = {"https://a.example.com", "https://*.example.org:8443"};
         c.allow_methods = {"GET", "POST"};
         c.allow_headers = {"X-A", "Content-Type"};
         c.expose_headers = {"*"};
         c.allow_credentials = false;
         c.max_age_seconds = 600;
         p.route.cors = c;
       }},
      {"invalid cors options each ignored",
       A({{"enable-cors", "true"},
          {"cors-allow-origin", "example.com"},
          {"cors-allow-methods", "GET POST"},
          {"cors-allow-headers", "X-A,,X-B"},
          {"cors-expose-headers", "*, X-A"},
          {"cors-allow-credentials", "1"},
          {"cors-max-age", "-5"}}),
       [](IngressPolicy& p) { p.route.cors = model::Cors{}; },
       {E("cors-allow-origin: invalid value \"example.com\": origin \"example.com\" must be"),
        E("cors-allow-methods: invalid value \"GET POST\": \"GET POST\" is not a token"),
        E("cors-allow-headers: invalid value \"X-A,,X-B\": empty entry"),
        E("cors-expose-headers: invalid value \"*, X-A\": \"*\" must be alone"),
        E("cors-allow-credentials: invalid value \"1\""), E("cors-max-age: invalid value \"-5\"")}},
      {"cors star among origins",
       A({{"enable-cors", "true"}, {"cors-allow-origin", "*, https://a.b"}}),
       [](IngressPolicy& p) { p.route.cors = model::Cors{}; },
       {E("\"*\" must be alone")}},
      {"cors options without enable-cors",
       A({{"cors-allow-origin", "*"}, {"cors-allow-credentials", "true"}}),
       {},
       {W("cors-allow-origin: has no effect"), W("cors-allow-credentials: has no effect")}},

      // ---- HSTS ----
      {"hsts with ingress-nginx's defaults", A({{"hsts", "true"}}),
       [](IngressPolicy& p) { p.route.hsts = model::Hsts{}; }},
      {"every hsts option",
       A({{"hsts", "true"},
          {"hsts-max-age", "63072000"},
          {"hsts-include-subdomains", "true"},
          {"hsts-preload", "true"}}),
       [](IngressPolicy& p) {
         p.route.hsts = model::Hsts{63072000, true, true};
       }},
      {"hsts max-age 0 (forget the host)", A({{"hsts", "true"}, {"hsts-max-age", "0"}}),
       [](IngressPolicy& p) {
         p.route.hsts = model::Hsts{0, true, false};
       }},
      {"invalid hsts options each ignored",
       A({{"hsts", "true"},
          {"hsts-max-age", "1y"},
          {"hsts-include-subdomains", "no"},
          {"hsts-preload", "2"}}),
       [](IngressPolicy& p) { p.route.hsts = model::Hsts{}; },
       {E("hsts-max-age: invalid value \"1y\": expected a whole number"),
        E("hsts-include-subdomains: invalid value \"no\""),
        E("hsts-preload: invalid value \"2\"")}},
      {"hsts max-age out of range",
       A({{"hsts", "true"}, {"hsts-max-age", "2147483648"}}),
       [](IngressPolicy& p) { p.route.hsts = model::Hsts{}; },
       {E("hsts-max-age: invalid value \"2147483648\": out of range")}},
      {"hsts invalid", A({{"hsts", "on"}}), {}, {E("hsts: invalid value \"on\"")}},
      {"hsts preload without a year",
       A({{"hsts", "true"}, {"hsts-max-age", "600"}, {"hsts-preload", "true"}}),
       [](IngressPolicy& p) {
         p.route.hsts = model::Hsts{600, true, true};
       },
       {W("hsts-preload: preload lists require")}},
      {"hsts options without hsts",
       A({{"hsts", "false"}, {"hsts-max-age", "600"}, {"hsts-preload", "true"}}),
       {},
       {W("hsts-max-age: has no effect without hsts"), W("hsts-preload: has no effect")}},

      // ---- whitelist-source-range ----
      {"whitelist-source-range", A({{"whitelist-source-range", "10.0.0.0/8, 2001:db8::/32"}}),
       [](IngressPolicy& p) {
         p.route.source_ranges = model::SourceRanges{{"10.0.0.0/8", "2001:db8::/32"}};
       }},
      {"whitelist-source-range invalid denies everyone",
       A({{"whitelist-source-range", "10.0.0.0/8, 10.0.0.0/33"}}),
       [](IngressPolicy& p) { p.route.source_ranges = model::SourceRanges{}; },
       {E("whitelist-source-range: invalid value \"10.0.0.0/8, 10.0.0.0/33\": entry 2 "
          "\"10.0.0.0/33\": prefix length 33 is out of range 0-32 for IPv4; the route denies "
          "every client")}},
      {"whitelist-source-range empty denies everyone",
       A({{"whitelist-source-range", ""}}),
       [](IngressPolicy& p) { p.route.source_ranges = model::SourceRanges{}; },
       {E("no network given; the route denies every client")}},

      // ---- rate limits ----
      {"limit-rps with the default burst", A({{"limit-rps", "10"}}),
       [](IngressPolicy& p) { p.route.rate_limits.rps = 10; }},
      {"every rate-limit option",
       A({{"limit-rps", "0.5"},
          {"limit-burst-multiplier", "2"},
          {"limit-connections", "20"},
          {"limit-allowlist", "10.0.0.0/8 192.168.1.7"},
          {"limit-status-code", "503"}}),
       [](IngressPolicy& p) {
         auto& r = p.route.rate_limits;
         r.rps = 0.5;
         r.burst_multiplier = 2;
         r.connections = 20;
         r.allowlist = {"10.0.0.0/8", "192.168.1.7"};
         r.status_code = 503;
       }},
      {"limit-connections alone with an allowlist",
       A({{"limit-connections", "3"}, {"limit-allowlist", "::1"}, {"limit-status-code", "429"}}),
       [](IngressPolicy& p) {
         p.route.rate_limits.connections = 3;
         p.route.rate_limits.allowlist = {"::1"};
       }},
      {"invalid rate limits",
       A({{"limit-rps", "0"},
          {"limit-burst-multiplier", "0.5"},
          {"limit-connections", "0"},
          {"limit-allowlist", "10.0.0.0/8"},
          {"limit-status-code", "503"}}),
       {},
       {E("limit-rps: invalid value \"0\": out of range (greater than 0, at most 100000)"),
        E("limit-burst-multiplier: invalid value \"0.5\": out of range (1-10000)"),
        E("limit-connections: invalid value \"0\": out of range (1-1000000)"),
        W("limit-allowlist: has no effect without limit-rps or limit-connections"),
        W("limit-status-code: has no effect without limit-rps or limit-connections")}},
      {"limit-rps not a number",
       A({{"limit-rps", "10/s"}, {"limit-burst-multiplier", "5"}}),
       {},
       {E("limit-rps: invalid value \"10/s\": expected a decimal number"),
        W("limit-burst-multiplier: has no effect without limit-rps")}},
      {"limit-rps too large", A({{"limit-rps", "100001"}}), {}, {E("out of range")}},
      {"limit-rps too low to refill within the engine's hour",
       A({{"limit-rps", "0.0001"}}),
       {},
       {E("limit-rps: invalid value \"0.0001\": too low")}},
      {"limit-burst-multiplier too slow to refill",
       A({{"limit-rps", "1"}, {"limit-burst-multiplier", "5000"}}),
       [](IngressPolicy& p) { p.route.rate_limits.rps = 1; },
       {E("limit-burst-multiplier: invalid value \"5000\": a burst of rps")}},
      {"limit-allowlist invalid: no client exempt",
       A({{"limit-rps", "5"}, {"limit-allowlist", "10.0.0.0/8,"}}),
       [](IngressPolicy& p) { p.route.rate_limits.rps = 5; },
       {E("limit-allowlist: invalid value \"10.0.0.0/8,\": trailing comma after entry 1; ignored "
          "(no client is exempt)")}},
      {"limit-status-code other than 429 or 503",
       A({{"limit-rps", "5"}, {"limit-status-code", "404"}}),
       [](IngressPolicy& p) { p.route.rate_limits.rps = 5; },
       {E("limit-status-code: invalid value \"404\": expected 429 or 503; ignored (429 applies)")}},

      // ---- canary ----
      {"canary by weight", A({{"canary", "true"}, {"canary-weight", "10"}}),
       [](IngressPolicy& p) { p.canary = Canary{"", 10, 100, "", "", ""}; }},
      {"canary with every option",
       A({{"canary", "true"},
          {"canary-weight", "5"},
          {"canary-weight-total", "1000"},
          {"canary-by-header", "X-Canary"},
          {"canary-by-header-value", "blue"},
          {"canary-by-cookie", "canary"}}),
       [](IngressPolicy& p) { p.canary = Canary{"", 5, 1000, "X-Canary", "blue", "canary"}; }},
      {"canary keeps upstream settings and ignores route settings",
       A({{"canary", "true"},
          {"load-balance", "ewma"},
          {"proxy-read-timeout", "5"},
          {"limit-rps", "1"}}),
       [](IngressPolicy& p) {
         p.canary = Canary{};
         p.upstream.load_balance = model::LoadBalance::kEwma;
       },
       {W("proxy-read-timeout: ignored on a canary Ingress"),
        W("limit-rps: ignored on a canary Ingress")}},
      {"canary false",
       A({{"canary", "false"}, {"canary-weight", "10"}}),
       {},
       {W("canary-weight: has no effect without canary: \"true\"")}},
      {"canary invalid",
       A({{"canary", "yes"}, {"canary-by-cookie", "c"}}),
       {},
       {E("canary: invalid value \"yes\""), W("canary-by-cookie: has no effect")}},
      {"canary invalid options",
       A({{"canary", "true"},
          {"canary-weight", "101"},
          {"canary-weight-total", "0"},
          {"canary-by-header", "X Canary"},
          {"canary-by-header-value", "blue"},
          {"canary-by-cookie", "a;b"}}),
       [](IngressPolicy& p) { p.canary = Canary{}; },
       {E("canary-weight-total: invalid value \"0\": out of range (1-1000000)"),
        E("canary-weight: invalid value \"101\": more than the weight total 100; ignored "
          "(weight 0)"),
        E("canary-by-header: invalid value \"X Canary\""),
        E("canary-by-header-value: invalid value \"blue\": needs a valid canary-by-header"),
        E("canary-by-cookie: invalid value \"a;b\"")}},
      {"canary weight not a number",
       A({{"canary", "true"}, {"canary-weight", "10%"}}),
       [](IngressPolicy& p) { p.canary = Canary{}; },
       {E("expected a whole number")}},
      {"canary header value with a control character",
       A({{"canary", "true"}, {"canary-by-header", "X-C"}, {"canary-by-header-value", "a\x01"}}),
       [](IngressPolicy& p) { p.canary = Canary{"", 0, 100, "X-C", "", ""}; },
       {E("a header value must be non-empty without control characters")}},

      // ---- nginx aliases ----
      {"aliases off: nginx spellings are not read",
       A({{"nginx.ingress.kubernetes.io/load-balance", "ewma"}})},
      {"aliases on: nginx spellings are read",
       A({{"nginx.ingress.kubernetes.io/load-balance", "ewma"},
          {"nginx.ingress.kubernetes.io/limit-rps", "5"},
          {"nginx.ingress.kubernetes.io/limit-whitelist", "10.0.0.0/8"},
          {"nginx.ingress.kubernetes.io/use-regex", "true"}}),
       [](IngressPolicy& p) {
         p.upstream.load_balance = model::LoadBalance::kEwma;
         p.route.rate_limits.rps = 5;
         p.route.rate_limits.allowlist = {"10.0.0.0/8"};
       },
       {},
       plain_paths(),
       AnnotationOptions{true}},
      {"aliases on: ours wins, a disagreement is a warning",
       A({{"load-balance", "least_conn"},
          {"nginx.ingress.kubernetes.io/load-balance", "ewma"},
          {"proxy-read-timeout", "30"},
          {"nginx.ingress.kubernetes.io/proxy-read-timeout", "30"}}),
       [](IngressPolicy& p) {
         p.upstream.load_balance = model::LoadBalance::kLeastConn;
         p.route.read_timeout = 30s;
       },
       {W("annotations tidegate.io/load-balance (\"least_conn\") and "
          "nginx.ingress.kubernetes.io/load-balance (\"ewma\") disagree; tidegate.io/load-balance "
          "wins")},
       plain_paths(),
       AnnotationOptions{true}},
      {"aliases on: diagnostics name the spelling used",
       A({{"nginx.ingress.kubernetes.io/limit-rps", "fast"}}),
       {},
       {E("annotation nginx.ingress.kubernetes.io/limit-rps: invalid value \"fast\"")},
       plain_paths(),
       AnnotationOptions{true}},
      {"aliases on: unsupported nginx annotations are reported",
       A({{"nginx.ingress.kubernetes.io/configuration-snippet", "more_set_headers x;"},
          {"nginx.ingress.kubernetes.io/ssl-redirect", "false"}}),
       {},
       {W("annotation nginx.ingress.kubernetes.io/configuration-snippet is not supported by "
          "Tidegate; ignored")},
       plain_paths(),
       AnnotationOptions{true}},
      {"aliases on: limit-status-code has no nginx spelling",
       A({{"limit-rps", "1"}, {"nginx.ingress.kubernetes.io/limit-status-code", "503"}}),
       [](IngressPolicy& p) { p.route.rate_limits.rps = 1; },
       {W("nginx.ingress.kubernetes.io/limit-status-code is not supported")},
       plain_paths(),
       AnnotationOptions{true}},
  };
}

TEST(Annotations, Table) {
  for (const auto& c : cases()) run(c);
}

TEST(Annotations, Deterministic) {
  for (const auto& c : cases()) {
    auto a = parse_annotations(c.annotations, c.context, c.options);
    auto b = parse_annotations(c.annotations, c.context, c.options);
    EXPECT_EQ(a.policy, b.policy) << c.name;
    EXPECT_EQ(a.diagnostics, b.diagnostics) << c.name;
  }
}

// Every supported annotation has a case where it is accepted without a diagnostic about it and
// one where it is refused with an error naming it.
TEST(Annotations, TableCoversEveryAnnotation) {
  std::set<std::string> valid, refused;
  for (const auto& c : cases()) {
    auto result = parse_annotations(c.annotations, c.context, c.options);
    for (const auto& [key, value] : c.annotations) {
      if (key.rfind("tidegate.io/", 0) != 0) continue;
      const std::string name = key.substr(12);
      bool mentioned = false;
      for (const auto& d : result.diagnostics) {
        if (d.message.find("annotation " + key + ":") != std::string::npos) {
          mentioned = true;
          if (d.severity == Severity::kError) refused.insert(name);
        }
      }
      if (!mentioned) valid.insert(name);
    }
  }
  for (std::string_view name : supported_annotations()) {
    EXPECT_TRUE(valid.count(std::string(name))) << name << " has no valid case";
    EXPECT_TRUE(refused.count(std::string(name))) << name << " has no refused case";
  }
}

TEST(Annotations, FindAnnotationHonoursTheAliasMode) {
  const Annotations a = A({{"nginx.ingress.kubernetes.io/use-regex", "true"}});
  EXPECT_FALSE(find_annotation(a, "use-regex", {}));
  auto found = find_annotation(a, "use-regex", AnnotationOptions{true});
  ASSERT_TRUE(found);
  EXPECT_EQ(found->key, "nginx.ingress.kubernetes.io/use-regex");
  EXPECT_EQ(found->value, "true");
  const Annotations both =
      A({{"use-regex", "false"}, {"nginx.ingress.kubernetes.io/use-regex", "true"}});
  EXPECT_EQ(find_annotation(both, "use-regex", AnnotationOptions{true})->value, "false");
}

TEST(Annotations, NginxDurationAndSizeSyntax) {
  EXPECT_EQ(parse_nginx_duration("60"), 60s);
  EXPECT_EQ(parse_nginx_duration("60s"), 60s);
  EXPECT_EQ(parse_nginx_duration("1m"), 60s);
  EXPECT_EQ(parse_nginx_duration("500ms"), 500ms);
  EXPECT_EQ(parse_nginx_duration("1h2m3s4ms"), 1h + 2min + 3s + 4ms);
  EXPECT_EQ(parse_nginx_duration("2d"), 48h);
  EXPECT_EQ(parse_nginx_duration("0"), 0s);
  for (const char* bad :
       {"", "s", "1.5s", "-1", "1s1m", "1m1m", "1 m", "1w", "1mss", "60S", "1234567890", "1msx"}) {
    EXPECT_FALSE(parse_nginx_duration(bad)) << bad;
  }
  EXPECT_EQ(parse_nginx_size("1024"), 1024u);
  EXPECT_EQ(parse_nginx_size("8k"), 8u << 10);
  EXPECT_EQ(parse_nginx_size("8M"), 8u << 20);
  EXPECT_EQ(parse_nginx_size("1g"), uint64_t{1} << 30);
  EXPECT_EQ(parse_nginx_size("0"), 0u);
  for (const char* bad : {"", "m", "8mb", "1.5m", "-1", "8 m", "1t", "99999999999999999999"}) {
    EXPECT_FALSE(parse_nginx_size(bad)) << bad;
  }
}

}  // namespace
}  // namespace tidegate::controller::translate
