// lib/model/rewrites: rewrite-target, app-root and the redirects of a route: JSON, validate()
// and the syntax checks the annotation parser shares.

#include "model/rewrites.h"

#include <gtest/gtest.h>

#include "lib/model/policy_cases.h"
#include "model/policy.h"

namespace tidegate::model {
namespace {

using namespace policy_cases;

TEST(PolicyRewrites, EachFieldRoundTripsAlone) {
  const RoutePolicy full = full_route_policy();
  expect_route_fields_round_trip_alone({
      {"rewrite_target", [&](RoutePolicy& p) { p.rewrite_target = full.rewrite_target; }},
      {"app_root", [&](RoutePolicy& p) { p.app_root = full.app_root; }},
      {"redirect", [&](RoutePolicy& p) { p.redirect = full.redirect; }},
      {"request_redirect, all parts",
       [&](RoutePolicy& p) {
         p.request_redirect =
             RequestRedirect{"https", "b.example.com",
                             PathModifier{PathModifier::Kind::kPrefix, "/new"}, 8443, 307};
       }},
      {"request_redirect, code only",
       [&](RoutePolicy& p) { p.request_redirect = RequestRedirect{}; }},
      {"path_rewrite",
       [&](RoutePolicy& p) {
         p.path_rewrite = PathModifier{PathModifier::Kind::kFull, "/x"};
       }},
  });
}

TEST(PolicyRewrites, GatewayRedirectsAndRewritesAreChecked) {
  expect_each_reported_alone<RoutePolicy>({
      {"ftp scheme",
       [](RoutePolicy& p) {
         p.request_redirect = RequestRedirect{"ftp", "", {}, 0, 302};
       },
       "scheme"},
      {"upper-case hostname",
       [](RoutePolicy& p) {
         p.request_redirect = RequestRedirect{"", "A.com", {}, 0, 302};
       },
       "hostname"},
      {"relative path",
       [](RoutePolicy& p) {
         p.request_redirect =
             RequestRedirect{"", "", PathModifier{PathModifier::Kind::kFull, "x"}, 0, 302};
       },
       "start with '/'"},
      {"code 200",
       [](RoutePolicy& p) {
         p.request_redirect = RequestRedirect{"", "", {}, 0, 200};
       },
       "code"},
      {"both redirects",
       [](RoutePolicy& p) {
         p.request_redirect = RequestRedirect{};
         p.redirect = Redirect{"/x", 302};
       },
       "not both"},
      {"rewrite path with query",
       [](RoutePolicy& p) {
         p.path_rewrite = PathModifier{PathModifier::Kind::kFull, "/a?b"};
       },
       "path_rewrite"},
      {"both rewrites",
       [](RoutePolicy& p) {
         p.path_rewrite = PathModifier{PathModifier::Kind::kFull, "/a"};
         p.rewrite_target = "/b";
       },
       "not both"},
  });
}

TEST(PolicyRewrites, MalformedInputIsRefusedWithTheFieldNamed) {
  expect_route_refused({
      {R"({"redirect": {"url": "/x", "code": 302, "extra": 1}})", "extra"},
      {R"({"path_rewrite": {"kind": "Regex", "value": "/x"}})", "kind"},
      {R"({"request_redirect": {"code": 301, "port": 70000}})", "port"},
      {R"({"redirect": {"url": "/x", "code": 1000}})", "code"},
      {R"({"rewrite_target": 1})", "rewrite_target"},
      {R"({"app_root": ["/"]})", "app_root"},
  });
}

TEST(PolicyRewrites, EachBadFieldIsReported) {
  expect_each_reported_alone<RoutePolicy>({
      {"rewrite $0", [](RoutePolicy& p) { p.rewrite_target = "/$0"; }, "rewrite_target"},
      {"rewrite $host", [](RoutePolicy& p) { p.rewrite_target = "/$host"; }, "rewrite_target"},
      {"rewrite space", [](RoutePolicy& p) { p.rewrite_target = "/a b"; }, "rewrite_target"},
      {"app root relative", [](RoutePolicy& p) { p.app_root = "app"; }, "app_root"},
      {"redirect ftp",
       [](RoutePolicy& p) {
         p.redirect = Redirect{"ftp://x", 301};
       },
       "url"},
      {"redirect //",
       [](RoutePolicy& p) {
         p.redirect = Redirect{"//evil.com", 301};
       },
       "url"},
      {"redirect quote",
       [](RoutePolicy& p) {
         p.redirect = Redirect{"https://x/\"a", 301};
       },
       "url"},
      {"redirect 200",
       [](RoutePolicy& p) {
         p.redirect = Redirect{"/x", 200};
       },
       "code"},
  });
}

TEST(PolicyRewrites, SyntaxChecks) {
  EXPECT_EQ(max_capture_reference("/$2/x/$1"), 2);
  EXPECT_EQ(max_capture_reference("/plain"), 0);
  EXPECT_FALSE(check_rewrite_target("/$1"));
  EXPECT_FALSE(check_rewrite_target("/new?x=1"));
  EXPECT_TRUE(check_rewrite_target("/$"));
  EXPECT_TRUE(check_rewrite_target(""));
  EXPECT_FALSE(check_redirect_url("https://example.com"));
  EXPECT_FALSE(check_redirect_url("http://example.com/x?y=1"));
  EXPECT_FALSE(check_redirect_url("/elsewhere"));
  EXPECT_TRUE(check_redirect_url("https://"));
  EXPECT_TRUE(check_redirect_url("https:///path"));
  EXPECT_TRUE(check_redirect_url("javascript:alert(1)"));
  EXPECT_TRUE(check_redirect_url("https://x/a b"));
  EXPECT_TRUE(check_redirect_url("https://x/{a}"));
}

}  // namespace
}  // namespace tidegate::model
