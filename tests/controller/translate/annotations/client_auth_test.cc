// Annotation table cases of the client certificate family (auth-tls-secret and its
// refinements): controller/translate/annotations/client_auth.cc. The Secret's ca.crt is read by
// the translator (translate_test.cc, ClientAuth). Shared parts: table.h.

#include "table.h"

namespace tidegate::controller::translate::annotation_table {

namespace {
model::ClientAuth auth(std::string secret, model::ClientVerify verify = model::ClientVerify::kOn) {
  model::ClientAuth a;
  a.secret = std::move(secret);
  a.verify = verify;
  return a;
}
}  // namespace

std::vector<Case> client_auth_cases() {
  return {
      {"auth-tls-secret of the namespace: verify on, depth 1",
       A({{"auth-tls-secret", "client-ca"}}),
       [](IngressPolicy& p) { p.client_auth = auth("default/client-ca"); }},
      {"every refinement",
       A({{"auth-tls-secret", "default/client-ca"},
          {"auth-tls-verify-client", "optional_no_ca"},
          {"auth-tls-verify-depth", "3"},
          {"auth-tls-pass-certificate-to-upstream", "true"},
          {"auth-tls-error-page", "https://login.example.com/cert?x=1"},
          {"auth-tls-match-cn", "CN=(alice|bob)"}}),
       [](IngressPolicy& p) {
         auto a = auth("default/client-ca", model::ClientVerify::kOptionalNoCa);
         a.verify_depth = 3;
         a.pass_certificate = true;
         a.error_page = "https://login.example.com/cert?x=1";
         a.match_cn = "CN=(alice|bob)";
         p.client_auth = a;
       }},
      {"optional, and an error page that is a path",
       A({{"auth-tls-secret", "client-ca"},
          {"auth-tls-verify-client", "Optional"},
          {"auth-tls-error-page", "/cert-help"}}),
       [](IngressPolicy& p) {
         auto a = auth("default/client-ca", model::ClientVerify::kOptional);
         a.error_page = "/cert-help";
         p.client_auth = a;
       }},
      {"nginx spelling",
       A({{"nginx.ingress.kubernetes.io/auth-tls-secret", "default/client-ca"},
          {"nginx.ingress.kubernetes.io/auth-tls-verify-client", "on"}}),
       [](IngressPolicy& p) { p.client_auth = auth("default/client-ca"); },
       {},
       plain_paths(),
       AnnotationOptions{true}},
      {"verify-client off: nothing is asked for",
       A({{"auth-tls-secret", "client-ca"}, {"auth-tls-verify-client", "off"}}),
       {},
       {W("auth-tls-verify-client: \"off\": no client certificates are asked for")}},
      {"an unknown mode: on applies",
       A({{"auth-tls-secret", "client-ca"}, {"auth-tls-verify-client", "sometimes"}}),
       [](IngressPolicy& p) { p.client_auth = auth("default/client-ca"); },
       {E("auth-tls-verify-client: invalid value \"sometimes\": expected on, off, optional or "
          "optional_no_ca; \"on\" applies")}},
      {"depth out of range, pass-certificate not a boolean, a bad error page",
       A({{"auth-tls-secret", "client-ca"},
          {"auth-tls-verify-depth", "0"},
          {"auth-tls-pass-certificate-to-upstream", "yes"},
          {"auth-tls-error-page", "javascript:alert(1)"}}),
       [](IngressPolicy& p) { p.client_auth = auth("default/client-ca"); },
       {E("auth-tls-verify-depth: invalid value \"0\": out of range (1-16)"),
        E("auth-tls-pass-certificate-to-upstream: invalid value \"yes\""),
        E("auth-tls-error-page: invalid value \"javascript:alert(1)\": the URL must be an "
          "http:// or https:// URL or a path starting with /; failures are answered 400")}},
      {"a match-cn that is not a pattern: closed",
       A({{"auth-tls-secret", "client-ca"}, {"auth-tls-match-cn", "CN=(alice"}}),
       [](IngressPolicy& p) { p.client_auth = model::ClientAuth{}; },
       {E("auth-tls-match-cn: invalid value \"CN=(alice\": not an RE2 pattern")}},
      {"a Secret of another namespace: closed",
       A({{"auth-tls-secret", "kube-system/client-ca"}}),
       [](IngressPolicy& p) { p.client_auth = model::ClientAuth{}; },
       {E("auth-tls-secret: invalid value \"kube-system/client-ca\": the Secret must be in the "
          "Ingress's namespace \"default\"")}},
      {"not a Secret name: closed",
       A({{"auth-tls-secret", "default/Client_CA"}}),
       [](IngressPolicy& p) { p.client_auth = model::ClientAuth{}; },
       {E("auth-tls-secret: invalid value \"default/Client_CA\": expected \"namespace/name\"")}},
      {"refinements without auth-tls-secret have no effect",
       A({{"auth-tls-verify-client", "on"}, {"auth-tls-match-cn", "CN=a"}}),
       {},
       {W("auth-tls-verify-client: has no effect without auth-tls-secret"),
        W("auth-tls-match-cn: has no effect without auth-tls-secret")}},
  };
}

TEST(AnnotationsClientAuth, Table) {
  for (const auto& c : client_auth_cases()) run(c);
}

}  // namespace tidegate::controller::translate::annotation_table
