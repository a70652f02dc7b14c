// lib/model/rate_limits: the limit-* annotations of a route (request rates, bursts,
// connections, the allowlist, the refusal's status): JSON and validate().

#include "model/rate_limits.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lib/model/policy_cases.h"
#include "model/policy.h"

namespace tidegate::model {
namespace {

using namespace policy_cases;

TEST(PolicyRateLimits, EachFieldRoundTripsAlone) {
  expect_route_fields_round_trip_alone({
      {"rps", [&](RoutePolicy& p) { p.rate_limits.rps = 0.25; }},
      {"burst", [&](RoutePolicy& p) { p.rate_limits.burst_multiplier = 1.5; }},
      {"connections", [&](RoutePolicy& p) { p.rate_limits.connections = 7; }},
      {"allowlist", [&](RoutePolicy& p) { p.rate_limits.allowlist = {"::1"}; }},
      {"status_code", [&](RoutePolicy& p) { p.rate_limits.status_code = 503; }},
      {"rpm", [&](RoutePolicy& p) { p.rate_limits.rpm = 30; }},
  });
}

TEST(PolicyRateLimits, MalformedInputIsRefusedWithTheFieldNamed) {
  expect_route_refused({
      {R"({"rate_limits": {"rps": "10"}})", "rps"},
      {R"({"rate_limits": {"rpm": true}})", "rpm"},
      {R"({"rate_limits": {"connections": -1}})", "connections"},
      {R"({"rate_limits": {"status_code": 1000}})", "status_code"},
      {R"({"rate_limits": {"burst": 2}})", "unknown field \"burst\""},
  });
}

TEST(PolicyRateLimits, EachBadFieldIsReported) {
  expect_each_reported_alone<RoutePolicy>({
      {"rps 0", [](RoutePolicy& p) { p.rate_limits.rps = 0; }, "rps"},
      {"rps nan", [](RoutePolicy& p) { p.rate_limits.rps = std::nan(""); }, "rps"},
      {"rps big", [](RoutePolicy& p) { p.rate_limits.rps = 100001; }, "rps"},
      {"burst 0.5", [](RoutePolicy& p) { p.rate_limits.burst_multiplier = 0.5; }, "burst"},
      {"slow refill", [](RoutePolicy& p) { p.rate_limits.rps = 0.0001; }, "hour"},
      {"connections 0", [](RoutePolicy& p) { p.rate_limits.connections = 0; }, "connections"},
      {"allowlist", [](RoutePolicy& p) { p.rate_limits.allowlist = {"host.example"}; },
       "allowlist"},
      {"status 404", [](RoutePolicy& p) { p.rate_limits.status_code = 404; }, "status code"},
      {"rpm 0", [](RoutePolicy& p) { p.rate_limits.rpm = 0; }, "rpm"},
      {"rpm slow refill",
       [](RoutePolicy& p) {
         p.rate_limits.rpm = 60;
         p.rate_limits.burst_multiplier = 61;
       },
       "rpm × multiplier"},
  });
}

}  // namespace
}  // namespace tidegate::model
