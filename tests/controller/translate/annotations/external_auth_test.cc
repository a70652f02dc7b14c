// Annotation table cases of the external authentication family (auth-url and its refinements):
// controller/translate/annotations/external_auth.cc. The URL's Service is resolved by the
// translator (translate_test.cc, ExternalAuth). Shared parts: table.h.

#include "table.h"

namespace tidegate::controller::translate::annotation_table {

namespace {
model::ExternalAuth auth(std::string url) {
  model::ExternalAuth a;
  a.url = std::move(url);
  return a;
}
constexpr const char* kUrl = "http://oauth2-proxy.auth.svc.cluster.local/oauth2/auth";
}  // namespace

std::vector<Case> external_auth_cases() {
  return {
      {"auth-url naming a Service in another namespace", A({{"auth-url", kUrl}}),
       [](IngressPolicy& p) { p.route.mut().external_auth = auth(kUrl); }},
      {"every refinement",
       A({{"auth-url", "https://authz:8443/check?host=$host"},
          {"auth-method", "post"},
          {"auth-signin", "https://$host/oauth2/start?x=1"},
          {"auth-signin-redirect-param", "next"},
          {"auth-response-headers", "X-User, x-email,X-User"},
          {"auth-request-redirect", "$scheme://$http_host$request_uri"},
          {"auth-cache-key", "$cookie_session$http_authorization"},
          {"auth-cache-duration", "200 202 10m, 401 30s"},
          {"auth-always-set-cookie", "true"}}),
       [](IngressPolicy& p) {
         auto a = auth("https://authz:8443/check?host=$host");
         a.method = "POST";
         a.signin = "https://$host/oauth2/start?x=1";
         a.signin_redirect_param = "next";
         a.response_headers = {"x-user", "x-email"};
         a.request_redirect = "$scheme://$http_host$request_uri";
         a.cache_key = "$cookie_session$http_authorization";
         a.cache_rules = {{{200, 202}, 600}, {{401}, 30}};
         a.always_set_cookie = true;
         p.route.mut().external_auth = a;
       }},
      {"a cache key without a duration: ingress-nginx's default",
       A({{"auth-url", kUrl}, {"auth-cache-key", "${http_authorization}"}}),
       [](IngressPolicy& p) {
         auto a = auth(kUrl);
         a.cache_key = "${http_authorization}";
         a.cache_rules = model::default_auth_cache_rules();
         p.route.mut().external_auth = a;
       }},
      {"nginx spelling",
       A({{"nginx.ingress.kubernetes.io/auth-url", kUrl},
          {"nginx.ingress.kubernetes.io/auth-signin", "https://login.example/start"}}),
       [](IngressPolicy& p) {
         auto a = auth(kUrl);
         a.signin = "https://login.example/start";
         p.route.mut().external_auth = a;
       },
       {},
       plain_paths(),
       AnnotationOptions{true}},
      {"a host outside the cluster: fails closed",
       A({{"auth-url", "https://auth.example.com/verify"}}),
       [](IngressPolicy& p) { p.route.mut().external_auth = model::ExternalAuth{}; },
       {E("auth-url: invalid value \"https://auth.example.com/verify\": the host must name a "
          "Service of the cluster")}},
      {"not a URL: fails closed",
       A({{"auth-url", "auth/verify"}}),
       [](IngressPolicy& p) { p.route.mut().external_auth = model::ExternalAuth{}; },
       {E("auth-url: invalid value \"auth/verify\": must start with http:// or https://; the "
          "route refuses every request (503)")}},
      {"an unknown variable in the URL: fails closed",
       A({{"auth-url", "http://auth/check?u=$remote_user"}}),
       [](IngressPolicy& p) { p.route.mut().external_auth = model::ExternalAuth{}; },
       {E("path uses the unknown variable $remote_user")}},
      {"bad refinements are ignored, the rest stands",
       A({{"auth-url", kUrl},
          {"auth-method", "FETCH"},
          {"auth-signin", "https://$host/start?rd=$request_body"},
          {"auth-signin-redirect-param", "a b"},
          {"auth-response-headers", "X-User, bad header"},
          {"auth-request-redirect", "${request_uri"},
          {"auth-cache-key", "$"},
          {"auth-cache-duration", "200 forever"},
          {"auth-always-set-cookie", "yes"}}),
       [](IngressPolicy& p) { p.route.mut().external_auth = auth(kUrl); },
       {E("auth-method: invalid value \"FETCH\": expected GET, HEAD, POST"),
        E("auth-signin: invalid value \"https://$host/start?rd=$request_body\": uses the unknown "
          "variable $request_body; a refused request gets 401"),
        E("auth-signin-redirect-param: invalid value \"a b\": expected a query parameter name"),
        E("auth-response-headers: invalid value \"X-User, bad header\": expected header names"),
        E("auth-request-redirect: invalid value \"${request_uri\": has an unclosed ${"),
        E("auth-cache-key: invalid value \"$\": has a '$' without a variable name"),
        E("auth-cache-duration: invalid value \"200 forever\": entry \"200 forever\" does not "
          "end with a time"),
        E("auth-always-set-cookie: invalid value \"yes\": expected \"true\" or \"false\"")}},
      {"a cache duration with codes outside 200-599",
       A({{"auth-url", kUrl},
          {"auth-cache-key", "$remote_addr"},
          {"auth-cache-duration", "100 5m"}}),
       [](IngressPolicy& p) {
         auto a = auth(kUrl);
         a.cache_key = "$remote_addr";
         a.cache_rules = model::default_auth_cache_rules();
         p.route.mut().external_auth = a;
       },
       {E("auth-cache-duration: invalid value \"100 5m\": has \"100\", not a status code 200-599 "
          "or any; the default \"200 202 401 5m\" applies")}},
      {"refinements without auth-url are ignored",
       A({{"auth-signin", "https://login/"}, {"auth-cache-key", "$host"}}),
       {},
       {W("auth-signin: has no effect without auth-url"),
        W("auth-cache-key: has no effect without auth-url")}},
      {"a duration without a cache key",
       A({{"auth-url", kUrl}, {"auth-cache-duration", "200 1m"}}),
       [](IngressPolicy& p) { p.route.mut().external_auth = auth(kUrl); },
       {W("auth-cache-duration: has no effect without auth-cache-key")}},
  };
}

TEST(AnnotationsExternalAuth, Table) {
  for (const auto& c : external_auth_cases()) run(c);
}

}  // namespace tidegate::controller::translate::annotation_table
