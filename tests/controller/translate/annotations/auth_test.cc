// Annotation table cases of the auth family (auth-type, auth-secret, auth-secret-type,
// auth-realm): controller/translate/annotations/auth.cc. The Secret's users are read by the
// translator (translate_test.cc, BasicAuth). Shared parts: table.h.

#include "table.h"

namespace tidegate::controller::translate::annotation_table {

namespace {
model::BasicAuth basic(std::string secret, std::string realm = "Authentication Required") {
  model::BasicAuth a;
  a.secret = std::move(secret);
  a.realm = std::move(realm);
  return a;
}
}  // namespace

std::vector<Case> auth_cases() {
  return {
      {"auth-type basic with a Secret of the namespace",
       A({{"auth-type", "basic"}, {"auth-secret", "users"}}),
       [](IngressPolicy& p) { p.route.mut().basic_auth = basic("default/users"); }},
      {"auth-type is case-insensitive; realm and secret type",
       A({{"auth-type", "Basic"},
          {"auth-secret", "default/users"},
          {"auth-secret-type", "auth-map"},
          {"auth-realm", "Staff only"}}),
       [](IngressPolicy& p) { p.route.mut().basic_auth = basic("default/users", "Staff only"); }},
      {"nginx spelling",
       A({{"nginx.ingress.kubernetes.io/auth-type", "basic"},
          {"nginx.ingress.kubernetes.io/auth-secret", "users"}}),
       [](IngressPolicy& p) { p.route.mut().basic_auth = basic("default/users"); },
       {},
       plain_paths(),
       AnnotationOptions{true}},
      {"digest is not supported: fails closed",
       A({{"auth-type", "digest"}, {"auth-secret", "users"}}),
       [](IngressPolicy& p) { p.route.mut().basic_auth = model::BasicAuth{}; },
       {E("auth-type: invalid value \"digest\": digest authentication is not supported (use "
          "basic); the route refuses every request (503)")}},
      {"no auth-secret: fails closed",
       A({{"auth-type", "basic"}}),
       [](IngressPolicy& p) { p.route.mut().basic_auth = model::BasicAuth{}; },
       {E("auth-type basic needs auth-secret")}},
      {"a Secret of another namespace: fails closed",
       A({{"auth-type", "basic"}, {"auth-secret", "kube-system/users"}}),
       [](IngressPolicy& p) { p.route.mut().basic_auth = model::BasicAuth{}; },
       {E("auth-secret: invalid value \"kube-system/users\": the Secret must be in the "
          "Ingress's namespace")}},
      {"a realm with a quote keeps the default",
       A({{"auth-type", "basic"}, {"auth-secret", "users"}, {"auth-realm", "say \"hi\""}}),
       [](IngressPolicy& p) { p.route.mut().basic_auth = basic("default/users"); },
       {E("auth-realm: invalid value \"say \"hi\"\": must be printable ASCII without '\"'")}},
      {"an unknown secret type: auth-file applies",
       A({{"auth-type", "basic"}, {"auth-secret", "users"}, {"auth-secret-type", "ldap"}}),
       [](IngressPolicy& p) { p.route.mut().basic_auth = basic("default/users"); },
       {E("auth-secret-type: invalid value \"ldap\": expected auth-file or auth-map; auth-file "
          "applies")}},
      {"auth-secret without auth-type is ignored",
       A({{"auth-secret", "users"}, {"auth-realm", "x"}}),
       {},
       {W("auth-secret: has no effect without auth-type"),
        W("auth-realm: has no effect without auth-type")}},
  };
}

TEST(AnnotationsAuth, Table) {
  for (const auto& c : auth_cases()) run(c);
}

}  // namespace tidegate::controller::translate::annotation_table
