// lib/model/policy: the two aggregates, RoutePolicy and UpstreamPolicy: defaults equal to the data
// plane's current behaviour, the JSON round trip of fully set policies, what has no family of its
// own (the backend protocol and TLS, error codes), and the checks several families share
// (syntax.h). Each family's JSON, validate() and tables are in tests/lib/model/<family>_test.cc.

#include "model/policy.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/model/policy_cases.h"
#include "server/limits.h"

namespace tidegate::model {
namespace {

using namespace policy_cases;

TEST(PolicyDefaults, EqualTheDataPlaneLimitsInForceToday) {
  const dataplane::server::Limits limits;
  const RoutePolicy route;
  EXPECT_EQ(route.connect_timeout, limits.upstream_connect_timeout);
  EXPECT_EQ(route.read_timeout, limits.upstream_read_timeout);
  EXPECT_EQ(route.send_timeout, limits.upstream_send_timeout);
  EXPECT_EQ(route.next_upstream_tries, limits.max_upstream_attempts);
  EXPECT_FALSE(route.max_body_bytes);  // bodies stream without a limit today
  EXPECT_TRUE(route.next_upstream.error);
  EXPECT_TRUE(route.next_upstream.timeout);
  EXPECT_FALSE(route.next_upstream.http_502 || route.next_upstream.http_503 ||
               route.next_upstream.http_504 || route.next_upstream.non_idempotent);
  EXPECT_FALSE(route.cors || route.redirect || route.source_ranges || route.hsts);
  EXPECT_FALSE(route.rate_limits.rps || route.rate_limits.connections);
  EXPECT_EQ(route.rate_limits.status_code, 429);

  const UpstreamPolicy upstream;
  EXPECT_EQ(upstream.load_balance, LoadBalance::kRoundRobin);
  EXPECT_TRUE(upstream.hash_by.empty());
  EXPECT_FALSE(upstream.affinity);
  EXPECT_EQ(upstream.protocol, BackendProtocol::kHttp);

  EXPECT_TRUE(validate(route).empty()) << joined(validate(route));
  EXPECT_TRUE(validate(upstream).empty()) << joined(validate(upstream));
  EXPECT_TRUE(validate(Canary{}, false).empty());
  EXPECT_FALSE(validate(Canary{}, true).empty());  // the model's canary names its upstream
}

TEST(PolicyEnums, RoundTripAndRefuseUnknown) {
  // LoadBalance and SameSite: tests/lib/model/balancing_test.cc; NextUpstream: timeouts_test.cc.
  EXPECT_EQ(backend_protocol_from_string("https"), BackendProtocol::kHttps);
  for (auto p : {BackendProtocol::kHttp, BackendProtocol::kHttps, BackendProtocol::kH2c,
                 BackendProtocol::kH2}) {
    EXPECT_EQ(backend_protocol_from_string(to_string(p)), p);
  }
  EXPECT_TRUE(uses_tls(BackendProtocol::kH2) && uses_http2(BackendProtocol::kH2));
  EXPECT_TRUE(!uses_tls(BackendProtocol::kH2c) && uses_http2(BackendProtocol::kH2c));
  EXPECT_TRUE(uses_tls(BackendProtocol::kHttps) && !uses_http2(BackendProtocol::kHttps));
  // The annotation's GRPC and GRPCS are the translator's spellings, not the model's.
  EXPECT_FALSE(backend_protocol_from_string("GRPC"));
}

// ---- JSON ----

TEST(PolicyJson, DefaultsEncodeAsAnEmptyObject) {
  EXPECT_EQ(to_json(RoutePolicy{}).dump(), "{}");
  EXPECT_EQ(to_json(UpstreamPolicy{}).dump(), "{}");
  EXPECT_EQ(route_policy_from_json(json::object()), RoutePolicy{});
  EXPECT_EQ(upstream_policy_from_json(json::object()), UpstreamPolicy{});
}

TEST(PolicyJson, FullPoliciesRoundTripThroughText) {
  const RoutePolicy route = full_route_policy();
  const UpstreamPolicy upstream = full_upstream_policy();
  ASSERT_TRUE(validate(route).empty()) << joined(validate(route));
  ASSERT_TRUE(validate(upstream).empty()) << joined(validate(upstream));
  EXPECT_EQ(route_policy_from_json(json::parse(to_json(route).dump())), route);
  EXPECT_EQ(upstream_policy_from_json(json::parse(to_json(upstream).dump())), upstream);
}

// The fields without a family file; each family's own are in its test.
TEST(PolicyJson, EachRouteFieldRoundTripsAlone) {
  const RoutePolicy full = full_route_policy();
  expect_route_fields_round_trip_alone({
      {"error_codes", [&](RoutePolicy& p) { p.error_codes = full.error_codes; }},
  });
}

TEST(PolicyJson, EachUpstreamFieldRoundTripsAlone) {
  const UpstreamPolicy full = full_upstream_policy();
  expect_upstream_fields_round_trip_alone({
      {"protocol", [&](UpstreamPolicy& p) { p.protocol = BackendProtocol::kHttps; }},
      {"tls_secret", [&](UpstreamPolicy& p) { p.tls_secret = full.tls_secret; }},
      {"tls_server_name", [&](UpstreamPolicy& p) { p.tls_server_name = "backend.internal"; }},
      {"service_upstream", [&](UpstreamPolicy& p) { p.service_upstream = true; }},
  });
}

TEST(PolicyJson, MalformedInputIsRefusedWithTheFieldNamed) {
  expect_route_refused({
      {R"({"rewrite": "/"})", "unknown field \"rewrite\""},
      {R"([])", "must be an object"},
      {R"({"error_codes": [404, 1000]})", "error_codes"},
  });
  expect_upstream_refused({
      {R"({"protocol": "GRPC"})", "protocol"},
      {R"({"hash": "$remote_addr"})", "unknown field \"hash\""},
      {R"({"service_upstream": 1})", "service_upstream"},
  });
}

// ---- validate() ----

TEST(PolicyValidate, EachBadRouteFieldIsReported) {
  expect_each_reported_alone<RoutePolicy>({
      {"error code 200", [](RoutePolicy& p) { p.error_codes = {200}; }, "is not 400-599"},
      {"error codes unsorted",
       [](RoutePolicy& p) {
         p.error_codes = {503, 404};
       },
       "not sorted and unique"},
      {"error codes twice",
       [](RoutePolicy& p) {
         p.error_codes = {404, 404};
       },
       "not sorted and unique"},
  });
}

TEST(PolicyValidate, EachBadUpstreamFieldIsReported) {
  expect_each_reported_alone<UpstreamPolicy>({
      {"secret without https", [](UpstreamPolicy& p) { p.tls_secret = "default/ca"; }, "no TLS"},
      {"secret ref",
       [](UpstreamPolicy& p) {
         p.protocol = BackendProtocol::kHttps;
         p.tls_secret = "Default/CA";
       },
       "tls_secret"},
      {"server name without https",
       [](UpstreamPolicy& p) { p.tls_server_name = "backend.internal"; }, "no TLS"},
      {"server name wildcard",
       [](UpstreamPolicy& p) {
         p.protocol = BackendProtocol::kH2;
         p.tls_server_name = "*.internal";
       },
       "tls_server_name"},
  });
  EXPECT_FALSE(check_tls_server_name("10.0.0.1"));
  EXPECT_FALSE(check_tls_server_name("fd00::1"));
  EXPECT_TRUE(check_tls_server_name("Backend.internal"));
}

// ---- The checks several families share (syntax.h) ----

TEST(PolicySyntax, SmallChecks) {
  EXPECT_TRUE(is_token("X-Request-Id"));
  EXPECT_FALSE(is_token(""));
  EXPECT_FALSE(is_token("a b"));
  EXPECT_FALSE(is_token("a:b"));
  EXPECT_FALSE(check_path("/"));
  EXPECT_TRUE(check_path("/a;b"));
  EXPECT_FALSE(check_object_ref("default/ca-secret"));
  EXPECT_TRUE(check_object_ref("ca-secret"));
  EXPECT_TRUE(check_object_ref("default/Ca"));
  EXPECT_TRUE(check_object_ref("/ca"));
}

}  // namespace
}  // namespace tidegate::model
