// Annotation table cases of the backend family (load-balance, upstream-hash-by, affinity,
// backend-protocol, proxy-ssl-*): controller/translate/annotations/backend.cc. Shared parts:
// table.h.

#include "table.h"

namespace tidegate::controller::translate::annotation_table {

using namespace std::chrono_literals;

std::vector<Case> backend_cases() {
  return {
      // ---- load-balance, upstream-hash-by ----
      {"load-balance ewma", A({{"load-balance", "ewma"}}),
       [](IngressPolicy& p) { p.upstream.mut().load_balance = model::LoadBalance::kEwma; }},
      {"load-balance least_conn with spaces", A({{"load-balance", " least_conn "}}),
       [](IngressPolicy& p) { p.upstream.mut().load_balance = model::LoadBalance::kLeastConn; }},
      {"load-balance ip_hash", A({{"load-balance", "ip_hash"}}),
       [](IngressPolicy& p) { p.upstream.mut().load_balance = model::LoadBalance::kIpHash; }},
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
       [](IngressPolicy& p) { p.upstream.mut().hash_by = "$http_x_user_id$arg_t"; }},
      {"upstream-hash-by overrides load-balance",
       A({{"upstream-hash-by", "$remote_addr"}, {"load-balance", "ewma"}}),
       [](IngressPolicy& p) {
         p.upstream.mut().load_balance = model::LoadBalance::kEwma;
         p.upstream.mut().hash_by = "$remote_addr";
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
       [](IngressPolicy& p) { p.upstream.mut().affinity = model::SessionAffinity{}; }},
      {"affinity with every cookie setting",
       A({{"affinity", "cookie"},
          {"session-cookie-name", "route"},
          {"session-cookie-max-age", "3600"},
          {"session-cookie-path", "/app"},
          {"session-cookie-secure", "true"},
          {"session-cookie-samesite", "lax"}}),
       [](IngressPolicy& p) {
         p.upstream.mut().affinity =
             model::SessionAffinity{"route", 3600, "/app", true, model::SameSite::kLax};
       }},
      {"affinity with a cookie domain, expires and a mode",
       A({{"affinity", "cookie"},
          {"session-cookie-domain", ".Example.com"},
          {"session-cookie-expires", "172800"},
          {"affinity-mode", "persistent"}}),
       [](IngressPolicy& p) {
         model::SessionAffinity s;
         s.domain = ".example.com";
         s.expires_seconds = 172800;
         p.upstream.mut().affinity = s;
       }},
      {"affinity-mode balanced (ingress-nginx's default)",
       A({{"affinity", "cookie"}, {"affinity-mode", "balanced"}}),
       [](IngressPolicy& p) { p.upstream.mut().affinity = model::SessionAffinity{}; }},
      {"invalid cookie domain, expires and mode each ignored",
       A({{"affinity", "cookie"},
          {"session-cookie-domain", "exa mple.com"},
          {"session-cookie-expires", "-1"},
          {"affinity-mode", "sticky"}}),
       [](IngressPolicy& p) { p.upstream.mut().affinity = model::SessionAffinity{}; },
       {E("session-cookie-domain: invalid value \"exa mple.com\": a cookie domain must be a "
          "lower-case DNS name"),
        E("session-cookie-expires: invalid value \"-1\": expected a whole number"),
        E("affinity-mode: invalid value \"sticky\": expected balanced or persistent")}},
      {"session-cookie-domain ..",
       A({{"affinity", "cookie"}, {"session-cookie-domain", "a..b"}}),
       [](IngressPolicy& p) { p.upstream.mut().affinity = model::SessionAffinity{}; },
       {E("session-cookie-domain: invalid value \"a..b\": a cookie domain has an empty label")}},
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
       [](IngressPolicy& p) { p.upstream.mut().affinity = model::SessionAffinity{}; },
       {E("session-cookie-name: invalid value \"a=b\": a cookie name must be a token"),
        E("session-cookie-max-age: invalid value \"-1\": expected a whole number (0-34560000)"),
        E("session-cookie-path: invalid value \"app\": a cookie path must start with '/'"),
        E("session-cookie-secure: invalid value \"yes\": expected \"true\" or \"false\""),
        E("session-cookie-samesite: invalid value \"Sometimes\": expected Strict, Lax or None")}},
      {"session-cookie-max-age too large",
       A({{"affinity", "cookie"}, {"session-cookie-max-age", "99999999999"}}),
       [](IngressPolicy& p) { p.upstream.mut().affinity = model::SessionAffinity{}; },
       {E("out of range (0-34560000)")}},

      // ---- backend-protocol, proxy-ssl-secret ----
      {"backend-protocol HTTPS with a secret",
       A({{"backend-protocol", "HTTPS"}, {"proxy-ssl-secret", "default/backend-ca"}}),
       [](IngressPolicy& p) {
         p.upstream.mut().protocol = model::BackendProtocol::kHttps;
         p.upstream.mut().tls_secret = "default/backend-ca";
       }},
      {"proxy-ssl-secret without namespace is the Ingress's",
       A({{"backend-protocol", "https"}, {"proxy-ssl-secret", "backend-ca"}}),
       [](IngressPolicy& p) {
         p.upstream.mut().protocol = model::BackendProtocol::kHttps;
         p.upstream.mut().tls_secret = "default/backend-ca";
       }},
      {"backend-protocol HTTP", A({{"backend-protocol", "HTTP"}})},
      {"backend-protocol H2C", A({{"backend-protocol", "h2c"}}),
       [](IngressPolicy& p) { p.upstream.mut().protocol = model::BackendProtocol::kH2c; }},
      {"backend-protocol GRPC is HTTP/2 cleartext", A({{"backend-protocol", "grpc"}}),
       [](IngressPolicy& p) { p.upstream.mut().protocol = model::BackendProtocol::kH2c; }},
      {"backend-protocol GRPCS is HTTP/2 over TLS, with proxy-ssl-*",
       A({{"backend-protocol", "GRPCS"},
          {"proxy-ssl-secret", "backend-ca"},
          {"proxy-ssl-name", "grpc.example.com"}}),
       [](IngressPolicy& p) {
         p.upstream.mut().protocol = model::BackendProtocol::kH2;
         p.upstream.mut().tls_secret = "default/backend-ca";
         p.upstream.mut().tls_server_name = "grpc.example.com";
       }},
      {"backend-protocol H2 is the model's spelling, not the annotation's",
       A({{"backend-protocol", "H2"}}),
       {},
       {E("backend-protocol: invalid value \"H2\": expected HTTP, HTTPS, H2C, GRPC or GRPCS")}},
      {"backend-protocol FCGI is not supported",
       A({{"backend-protocol", "fcgi"}}),
       {},
       {E("backend-protocol: invalid value \"fcgi\": FCGI backends are not supported")}},
      {"proxy-ssl-secret has no effect on H2C",
       A({{"backend-protocol", "H2C"}, {"proxy-ssl-secret", "default/ca"}}),
       [](IngressPolicy& p) { p.upstream.mut().protocol = model::BackendProtocol::kH2c; },
       {W("proxy-ssl-secret: has no effect without backend-protocol: HTTPS or GRPCS")}},
      {"backend-protocol unknown",
       A({{"backend-protocol", "SPDY"}}),
       {},
       {E("expected HTTP, HTTPS, H2C, GRPC or GRPCS")}},
      {"proxy-ssl-secret in another namespace",
       A({{"backend-protocol", "HTTPS"}, {"proxy-ssl-secret", "kube-system/ca"}}),
       [](IngressPolicy& p) { p.upstream.mut().protocol = model::BackendProtocol::kHttps; },
       {E("proxy-ssl-secret: invalid value \"kube-system/ca\": the Secret must be in the "
          "Ingress's namespace")}},
      {"proxy-ssl-secret malformed",
       A({{"backend-protocol", "HTTPS"}, {"proxy-ssl-secret", "default/CA_bundle"}}),
       [](IngressPolicy& p) { p.upstream.mut().protocol = model::BackendProtocol::kHttps; },
       {E("proxy-ssl-secret: invalid value \"default/CA_bundle\"")}},
      {"proxy-ssl-secret without HTTPS",
       A({{"proxy-ssl-secret", "default/ca"}}),
       {},
       {W("proxy-ssl-secret: has no effect without backend-protocol: HTTPS")}},
      {"proxy-ssl-name, lower-cased",
       A({{"backend-protocol", "HTTPS"}, {"proxy-ssl-name", " Backend.Example.com "}}),
       [](IngressPolicy& p) {
         p.upstream.mut().protocol = model::BackendProtocol::kHttps;
         p.upstream.mut().tls_server_name = "backend.example.com";
       }},
      {"proxy-ssl-name may be an IP address",
       A({{"backend-protocol", "HTTPS"}, {"proxy-ssl-name", "fd00::1"}}),
       [](IngressPolicy& p) {
         p.upstream.mut().protocol = model::BackendProtocol::kHttps;
         p.upstream.mut().tls_server_name = "fd00::1";
       }},
      {"proxy-ssl-name wildcard refused",
       A({{"backend-protocol", "HTTPS"}, {"proxy-ssl-name", "*.example.com"}}),
       [](IngressPolicy& p) { p.upstream.mut().protocol = model::BackendProtocol::kHttps; },
       {E("proxy-ssl-name: invalid value \"*.example.com\": must be a lower-case DNS name")}},
      {"proxy-ssl-name without HTTPS",
       A({{"proxy-ssl-name", "a.example.com"}}),
       {},
       {W("proxy-ssl-name: has no effect without backend-protocol: HTTPS")}},
      {"service-upstream", A({{"service-upstream", "true"}}),
       [](IngressPolicy& p) { p.upstream.mut().service_upstream = true; }},
      {"service-upstream, nginx spelling",
       A({{"nginx.ingress.kubernetes.io/service-upstream", "true"}}),
       [](IngressPolicy& p) { p.upstream.mut().service_upstream = true; },
       {},
       plain_paths(),
       AnnotationOptions{true}},
      {"service-upstream not a boolean",
       A({{"service-upstream", "yes"}}),
       {},
       {E("service-upstream: invalid value \"yes\": expected \"true\" or \"false\"")}},
  };
}

TEST(AnnotationsBackend, Table) {
  for (const auto& c : backend_cases()) run(c);
}

}  // namespace tidegate::controller::translate::annotation_table
