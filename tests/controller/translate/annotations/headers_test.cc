// Annotation table cases of the headers family (custom-headers, upstream-vhost, allow-upgrade,
// CORS, HSTS): controller/translate/annotations/headers.cc. Shared parts: table.h.

#include "table.h"

namespace tidegate::controller::translate::annotation_table {

using namespace std::chrono_literals;

std::vector<Case> headers_cases() {
  return {
      // ---- x-forwarded-prefix, enable-access-log ----
      {"x-forwarded-prefix", A({{"x-forwarded-prefix", " /shop "}}),
       [](IngressPolicy& p) { p.route.mut().forwarded_prefix = "/shop"; }},
      {"x-forwarded-prefix must be a path",
       A({{"x-forwarded-prefix", "shop"}}),
       {},
       {E("x-forwarded-prefix: invalid value \"shop\": expected a path such as \"/app\"")}},
      {"enable-access-log false", A({{"enable-access-log", "false"}}),
       [](IngressPolicy& p) { p.route.mut().access_log = false; }},
      {"enable-access-log true is the default", A({{"enable-access-log", "true"}})},
      {"enable-access-log not a boolean",
       A({{"enable-access-log", "off"}}),
       {},
       {E("enable-access-log: invalid value \"off\": expected \"true\" or \"false\"")}},
      {"configuration snippets are never interpreted, even without --nginx-annotations",
       A({{"nginx.ingress.kubernetes.io/configuration-snippet", "more_set_headers \"X: y\";"},
          {"nginx.ingress.kubernetes.io/server-snippet", "return 200;"}}),
       {},
       {W("annotation nginx.ingress.kubernetes.io/configuration-snippet: nginx configuration "
          "text is never interpreted by Tidegate; ignored"),
        W("annotation nginx.ingress.kubernetes.io/server-snippet: nginx configuration text is "
          "never interpreted")}},

      // ---- custom-headers, upstream-vhost ----
      {"custom-headers, one per line",
       A({{"custom-headers", "X-Frame-Options: DENY\n\n  Cache-Control: no-store, private  \n"}}),
       [](IngressPolicy& p) {
         p.route.mut().response_headers = {{"X-Frame-Options", "DENY"},
                                           {"Cache-Control", "no-store, private"}};
       }},
      {"custom-headers with an empty value and a colon in the value",
       A({{"custom-headers", "X-Empty:\nX-Time: 12:00"}}),
       [](IngressPolicy& p) {
         p.route.mut().response_headers = {{"X-Empty", ""}, {"X-Time", "12:00"}};
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
       [](IngressPolicy& p) { p.route.mut().upstream_vhost = "internal.example.com"; }},
      {"upstream-vhost with port", A({{"upstream-vhost", "10.0.0.1:8080"}}),
       [](IngressPolicy& p) { p.route.mut().upstream_vhost = "10.0.0.1:8080"; }},
      {"upstream-vhost invalid",
       A({{"upstream-vhost", "a b.example"}}),
       {},
       {E("upstream-vhost: invalid value \"a b.example\": must be host or host:port")}},

      // ---- allow-upgrade ----
      {"allow-upgrade", A({{"allow-upgrade", "Foo/2, bar, foo/2"}}),
       [](IngressPolicy& p) {
         p.route.mut().upgrade_protocols = {"foo/2", "bar"};
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
       [](IngressPolicy& p) { p.route.mut().cors = model::Cors{}; }},
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
         p.route.mut().cors = c;
       }},
      {"invalid cors options each ignored",
       A({{"enable-cors", "true"},
          {"cors-allow-origin", "example.com"},
          {"cors-allow-methods", "GET POST"},
          {"cors-allow-headers", "X-A,,X-B"},
          {"cors-expose-headers", "*, X-A"},
          {"cors-allow-credentials", "1"},
          {"cors-max-age", "-5"}}),
       [](IngressPolicy& p) { p.route.mut().cors = model::Cors{}; },
       {E("cors-allow-origin: invalid value \"example.com\": origin \"example.com\" must be"),
        E("cors-allow-methods: invalid value \"GET POST\": \"GET POST\" is not a token"),
        E("cors-allow-headers: invalid value \"X-A,,X-B\": empty entry"),
        E("cors-expose-headers: invalid value \"*, X-A\": \"*\" must be alone"),
        E("cors-allow-credentials: invalid value \"1\""), E("cors-max-age: invalid value \"-5\"")}},
      {"cors star among origins",
       A({{"enable-cors", "true"}, {"cors-allow-origin", "*, https://a.b"}}),
       [](IngressPolicy& p) { p.route.mut().cors = model::Cors{}; },
       {E("\"*\" must be alone")}},
      {"cors options without enable-cors",
       A({{"cors-allow-origin", "*"}, {"cors-allow-credentials", "true"}}),
       {},
       {W("cors-allow-origin: has no effect"), W("cors-allow-credentials: has no effect")}},

      // ---- HSTS ----
      {"hsts with ingress-nginx's defaults", A({{"hsts", "true"}}),
       [](IngressPolicy& p) { p.route.mut().hsts = model::Hsts{}; }},
      {"every hsts option",
       A({{"hsts", "true"},
          {"hsts-max-age", "63072000"},
          {"hsts-include-subdomains", "true"},
          {"hsts-preload", "true"}}),
       [](IngressPolicy& p) {
         p.route.mut().hsts = model::Hsts{63072000, true, true};
       }},
      {"hsts max-age 0 (forget the host)", A({{"hsts", "true"}, {"hsts-max-age", "0"}}),
       [](IngressPolicy& p) {
         p.route.mut().hsts = model::Hsts{0, true, false};
       }},
      {"invalid hsts options each ignored",
       A({{"hsts", "true"},
          {"hsts-max-age", "1y"},
          {"hsts-include-subdomains", "no"},
          {"hsts-preload", "2"}}),
       [](IngressPolicy& p) { p.route.mut().hsts = model::Hsts{}; },
       {E("hsts-max-age: invalid value \"1y\": expected a whole number"),
        E("hsts-include-subdomains: invalid value \"no\""),
        E("hsts-preload: invalid value \"2\"")}},
      {"hsts max-age out of range",
       A({{"hsts", "true"}, {"hsts-max-age", "2147483648"}}),
       [](IngressPolicy& p) { p.route.mut().hsts = model::Hsts{}; },
       {E("hsts-max-age: invalid value \"2147483648\": out of range")}},
      {"hsts invalid", A({{"hsts", "on"}}), {}, {E("hsts: invalid value \"on\"")}},
      {"hsts preload without a year",
       A({{"hsts", "true"}, {"hsts-max-age", "600"}, {"hsts-preload", "true"}}),
       [](IngressPolicy& p) {
         p.route.mut().hsts = model::Hsts{600, true, true};
       },
       {W("hsts-preload: preload lists require")}},
      {"hsts options without hsts",
       A({{"hsts", "false"}, {"hsts-max-age", "600"}, {"hsts-preload", "true"}}),
       {},
       {W("hsts-max-age: has no effect without hsts"), W("hsts-preload: has no effect")}},
  };
}

TEST(AnnotationsHeaders, Table) {
  for (const auto& c : headers_cases()) run(c);
}

}  // namespace tidegate::controller::translate::annotation_table
