// lib/model/headers: custom response headers, upstream-vhost, x-forwarded-prefix, the access log
// switch and allow-upgrade of a route: JSON, validate() and the syntax checks the annotation
// parser shares.

#include "model/headers.h"

#include <gtest/gtest.h>

#include "lib/model/policy_cases.h"
#include "model/policy.h"

namespace tidegate::model {
namespace {

using namespace policy_cases;

TEST(PolicyHeaders, EachFieldRoundTripsAlone) {
  const RoutePolicy full = full_route_policy();
  expect_route_fields_round_trip_alone({
      {"response_headers", [&](RoutePolicy& p) { p.response_headers = full.response_headers; }},
      {"upstream_vhost", [&](RoutePolicy& p) { p.upstream_vhost = full.upstream_vhost; }},
      {"forwarded_prefix", [&](RoutePolicy& p) { p.forwarded_prefix = "/api"; }},
      {"access_log", [&](RoutePolicy& p) { p.access_log = false; }},
      {"upgrade_protocols", [&](RoutePolicy& p) { p.upgrade_protocols = full.upgrade_protocols; }},
      {"request_header_modifier",
       [&](RoutePolicy& p) {
         p.request_header_modifier =
             HeaderModifier{{{"X-Set", "1"}}, {{"X-Add", "a, b"}}, {"X-Gone"}};
       }},
      {"response_header_modifier only removes",
       [&](RoutePolicy& p) {
         p.response_header_modifier = HeaderModifier{{}, {}, {"Server"}};
       }},
  });
}

TEST(PolicyHeaders, HeaderModifiersAreChecked) {
  expect_each_reported_alone<RoutePolicy>({
      {"set framing field",
       [](RoutePolicy& p) {
         p.request_header_modifier = HeaderModifier{{{"Content-Length", "1"}}, {}, {}};
       },
       "managed by the proxy"},
      {"add twice",
       [](RoutePolicy& p) {
         p.response_header_modifier = HeaderModifier{{}, {{"X-A", "1"}, {"x-a", "2"}}, {}};
       },
       "twice"},
      {"remove a non-token",
       [](RoutePolicy& p) {
         p.request_header_modifier = HeaderModifier{{}, {}, {"a b"}};
       },
       "not a token"},
      {"value with a newline",
       [](RoutePolicy& p) {
         p.response_header_modifier = HeaderModifier{{{"X-A", "1\r\n2"}}, {}, {}};
       },
       "control character"},
  });
  // A name may be in more than one list (removed, then set).
  RoutePolicy p;
  p.request_header_modifier = HeaderModifier{{{"X-A", "1"}}, {{"X-A", "2"}}, {"x-a"}};
  EXPECT_TRUE(validate(p).empty());
}

TEST(PolicyHeaders, MalformedInputIsRefusedWithTheFieldNamed) {
  expect_route_refused({
      {R"({"response_headers": [{"name": 1, "value": "x"}]})", "name"},
      {R"({"response_headers": {"name": "X", "value": "x"}})", "response_headers"},
      {R"({"response_headers": [{"name": "X", "value": "x", "x": 1}]})", "unknown field \"x\""},
      {R"({"access_log": "false"})", "access_log"},
      {R"({"upgrade_protocols": "foo"})", "upgrade_protocols"},
  });
}

TEST(PolicyHeaders, EachBadFieldIsReported) {
  expect_each_reported_alone<RoutePolicy>({
      {"header name",
       [](RoutePolicy& p) {
         p.response_headers = {{"X Y", "1"}};
       },
       "token"},
      {"header CRLF",
       [](RoutePolicy& p) {
         p.response_headers = {{"X-A", "1\r\nSet-Cookie: a=b"}};
       },
       "control"},
      {"header reserved",
       [](RoutePolicy& p) {
         p.response_headers = {{"Content-Length", "0"}};
       },
       "managed"},
      {"header twice",
       [](RoutePolicy& p) {
         p.response_headers = {{"X-A", "1"}, {"x-a", "2"}};
       },
       "twice"},
      {"too many headers",
       [](RoutePolicy& p) {
         for (size_t i = 0; i <= kMaxResponseHeaders; ++i) {
           p.response_headers.push_back({"X-" + std::to_string(i), "1"});
         }
       },
       "more than 64 response headers"},
      {"vhost", [](RoutePolicy& p) { p.upstream_vhost = "a b"; }, "upstream_vhost"},
      {"vhost port", [](RoutePolicy& p) { p.upstream_vhost = "a:99999"; }, "upstream_vhost"},
      {"forwarded prefix", [](RoutePolicy& p) { p.forwarded_prefix = "api"; }, "forwarded_prefix"},
      {"upgrade h2c", [](RoutePolicy& p) { p.upgrade_protocols = {"h2c"}; }, "never forwarded"},
      {"upgrade websocket", [](RoutePolicy& p) { p.upgrade_protocols = {"websocket"}; },
       "always forwarded"},
      {"upgrade case", [](RoutePolicy& p) { p.upgrade_protocols = {"Foo"}; }, "lower case"},
  });
}

TEST(PolicyHeaders, SyntaxChecks) {
  EXPECT_FALSE(check_host_port("example.com"));
  EXPECT_FALSE(check_host_port("example.com:8080"));
  EXPECT_FALSE(check_host_port("10.0.0.1:80"));
  EXPECT_FALSE(check_host_port("[::1]:80"));
  EXPECT_FALSE(check_host_port("[::1]"));
  EXPECT_TRUE(check_host_port("example.com:"));
  EXPECT_TRUE(check_host_port("example.com:0"));
  EXPECT_TRUE(check_host_port("[::1"));
  EXPECT_TRUE(check_host_port("a/b"));
  EXPECT_TRUE(check_host_port(""));
  EXPECT_FALSE(check_response_header("X-A", "v\tw"));
  EXPECT_TRUE(check_response_header("Transfer-Encoding", "chunked"));
  EXPECT_TRUE(check_response_header("X-A", std::string("a\0b", 3)));
  EXPECT_FALSE(check_upgrade_protocol("foo/2"));
  EXPECT_TRUE(check_upgrade_protocol("foo/"));
  EXPECT_TRUE(check_upgrade_protocol("h2c/1"));
}

}  // namespace
}  // namespace tidegate::model
