// The migration check (controller/migrate/nginx_check.h): each nginx annotation's verdict, from
// the same parser the translator uses with --nginx-annotations.
#include "migrate/nginx_check.h"

#include <gtest/gtest.h>

namespace tidegate::controller::migrate {
namespace {

objects::Ingress ingress(std::string name, std::map<std::string, std::string> annotations,
                         std::string path = "/",
                         objects::PathType type = objects::PathType::kPrefix) {
  objects::Ingress ing;
  ing.metadata.namespace_ = "shop";
  ing.metadata.name = std::move(name);
  for (auto& [k, v] : annotations) ing.metadata.annotations["nginx.ingress.kubernetes.io/" + k] = v;
  ing.metadata.annotations["tidegate.io/load-balance"] = "ewma";  // ours: not listed
  objects::IngressRule rule;
  rule.host = "shop.example.com";
  objects::HTTPIngressPath p;
  p.path = std::move(path);
  p.path_type = type;
  rule.paths.push_back(p);
  ing.spec.rules.push_back(rule);
  return ing;
}

TEST(NginxCheck, EachAnnotationGetsItsVerdict) {
  const auto checks = check_nginx_annotations({
      ingress("web", {{"ssl-redirect", "true"},
                      {"proxy-body-size", "8m"},
                      {"auth-type", "basic"},
                      {"auth-secret", "users"},
                      {"custom-headers", "shop/headers"},
                      {"limit-rps", "ten"},
                      {"server-snippet", "return 200;"},
                      {"auth-url", "http://auth/"},
                      {"auth-tls-secret", "shop/ca"},
                      {"ssl-passthrough", "true"},
                      {"mirror-target", "https://mirror/"},
                      {"x-made-up", "1"},
                      {"limit-whitelist", "10.0.0.0/8"},
                      {"limit-connections", "5"},
                      {"proxy-buffering", "on"}}),
      ingress("api", {{"use-regex", "true"}, {"rewrite-target", "/$2"}}, "/api(/|$)(.*)",
              objects::PathType::kImplementationSpecific),
      ingress("plain", {}),
  });
  ASSERT_EQ(checks.size(), 2u);  // "plain" has no nginx annotation
  EXPECT_EQ(checks[0].ingress, "shop/api");
  const std::vector<std::pair<std::string, Support>> api = {{"rewrite-target", Support::kSupported},
                                                            {"use-regex", Support::kSupported}};
  ASSERT_EQ(checks[0].annotations.size(), api.size());
  for (size_t i = 0; i < api.size(); ++i) {
    EXPECT_EQ(checks[0].annotations[i].annotation, "nginx.ingress.kubernetes.io/" + api[i].first);
    EXPECT_EQ(checks[0].annotations[i].support, api[i].second) << api[i].first;
  }
  EXPECT_EQ(checks[1].ingress, "shop/web");
  struct Want {
    std::string name;
    Support support;
    std::string detail;  // a piece of it
  };
  const std::vector<Want> web = {
      {"auth-secret", Support::kSupported, ""},
      {"auth-tls-secret", Support::kPartly, "the Secret must be in the Ingress's namespace"},
      {"auth-type", Support::kSupported, ""},
      {"auth-url", Support::kPartly, "a Service of the cluster"},
      {"custom-headers", Support::kInvalid, "ConfigMap references are not supported"},
      {"limit-connections", Support::kSupported, ""},
      {"limit-rps", Support::kInvalid, "expected a decimal number"},
      {"limit-whitelist", Support::kPartly, "read as limit-allowlist"},
      {"mirror-target", Support::kUnsupported, "RequestMirror"},
      {"proxy-body-size", Support::kSupported, ""},
      {"proxy-buffering", Support::kPartly, "responses always stream to the client"},
      {"server-snippet", Support::kNeverInterpreted, "never interpreted"},
      {"ssl-passthrough", Support::kPartly, "the backend of the Ingress's \"/\" path"},
      {"ssl-redirect", Support::kSupported, ""},
      {"x-made-up", Support::kUnsupported, "ignored"},
  };
  ASSERT_EQ(checks[1].annotations.size(), web.size());
  for (size_t i = 0; i < web.size(); ++i) {
    const auto& got = checks[1].annotations[i];
    EXPECT_EQ(got.annotation, "nginx.ingress.kubernetes.io/" + web[i].name);
    EXPECT_EQ(got.support, web[i].support) << web[i].name << ": " << got.detail;
    EXPECT_NE(got.detail.find(web[i].detail), std::string::npos)
        << web[i].name << ": " << got.detail;
  }
  const std::string report = format_report(checks);
  EXPECT_NE(report.find("Ingress shop/web\n"), std::string::npos) << report;
  EXPECT_NE(report.find("  refused     server-snippet: nginx configuration text is never "
                        "interpreted\n"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("2 Ingresses with nginx annotations: 7 supported, 5 partly, 2 invalid, 2 "
                        "unsupported, 1 refused\n"),
            std::string::npos)
      << report;
}

TEST(NginxCheck, AnnotationsTheTranslatorReadsItselfAreCheckedToo) {
  const auto checks =
      check_nginx_annotations({ingress("hosts", {{"force-ssl-redirect", "yes"},
                                                 {"from-to-www-redirect", "true"},
                                                 {"server-alias", "ok.example.com, bad_name"},
                                                 {"default-backend", "error-pages"},
                                                 {"custom-http-errors", "404,503"},
                                                 {"affinity-mode", "balanced"}})});
  ASSERT_EQ(checks.size(), 1u);
  struct Want {
    std::string name;
    Support support;
    std::string detail;
  };
  const std::vector<Want> want = {
      {"affinity-mode", Support::kPartly, "never moves sessions"},
      {"custom-http-errors", Support::kPartly, "the proxy's own"},
      {"default-backend", Support::kPartly, "first port"},
      {"force-ssl-redirect", Support::kInvalid, "expected \"true\" or \"false\""},
      {"from-to-www-redirect", Support::kSupported, ""},
      {"server-alias", Support::kInvalid, "invalid host \"bad_name\""},
  };
  ASSERT_EQ(checks[0].annotations.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& got = checks[0].annotations[i];
    EXPECT_EQ(got.annotation, "nginx.ingress.kubernetes.io/" + want[i].name);
    EXPECT_EQ(got.support, want[i].support) << want[i].name << ": " << got.detail;
    EXPECT_NE(got.detail.find(want[i].detail), std::string::npos)
        << want[i].name << ": " << got.detail;
  }
}

TEST(NginxCheck, RewriteTargetWithoutUseRegexIsReportedAsTidegateReadsIt) {
  // ingress-nginx treats a path with rewrite-target as a regex; Tidegate needs use-regex.
  const auto checks =
      check_nginx_annotations({ingress("api", {{"rewrite-target", "/$2"}}, "/api(/|$)(.*)",
                                       objects::PathType::kImplementationSpecific)});
  ASSERT_EQ(checks.size(), 1u);
  ASSERT_EQ(checks[0].annotations.size(), 1u);
  EXPECT_EQ(checks[0].annotations[0].support, Support::kInvalid);
  EXPECT_NE(checks[0].annotations[0].detail.find("use-regex"), std::string::npos);
}

}  // namespace
}  // namespace tidegate::controller::migrate
