// lib/model/timeouts: connect/read/send timeouts, the body limit and the retries of a route
// (next_upstream, next_upstream_tries, next_upstream_timeout): JSON and validate().

#include "model/timeouts.h"

#include <gtest/gtest.h>

#include "lib/model/policy_cases.h"
#include "model/policy.h"

namespace tidegate::model {
namespace {

using namespace policy_cases;
using namespace std::chrono_literals;

TEST(PolicyTimeouts, NextUpstreamToString) {
  NextUpstream n;
  EXPECT_EQ(n.to_string(), "error timeout");
  n = NextUpstream{false, false, false, false, false, false};
  EXPECT_EQ(n.to_string(), "off");
  n = NextUpstream{true, false, true, false, true, true};
  EXPECT_EQ(n.to_string(), "error http_502 http_504 non_idempotent");
}

TEST(PolicyTimeouts, EachFieldRoundTripsAlone) {
  const RoutePolicy full = full_route_policy();
  expect_route_fields_round_trip_alone({
      {"connect_timeout", [&](RoutePolicy& p) { p.connect_timeout = full.connect_timeout; }},
      {"read_timeout", [&](RoutePolicy& p) { p.read_timeout = full.read_timeout; }},
      {"send_timeout", [&](RoutePolicy& p) { p.send_timeout = full.send_timeout; }},
      {"max_body_bytes", [&](RoutePolicy& p) { p.max_body_bytes = full.max_body_bytes; }},
      {"next_upstream", [&](RoutePolicy& p) { p.next_upstream = full.next_upstream; }},
      {"next_upstream off",
       [&](RoutePolicy& p) {
         p.next_upstream = NextUpstream{false, false, false, false, false, false};
       }},
      {"next_upstream_tries", [&](RoutePolicy& p) { p.next_upstream_tries = 1; }},
      {"next_upstream_timeout",
       [&](RoutePolicy& p) { p.next_upstream_timeout = full.next_upstream_timeout; }},
      {"request_timeout", [&](RoutePolicy& p) { p.request_timeout = full.request_timeout; }},
  });
}

TEST(PolicyTimeouts, MalformedInputIsRefusedWithTheFieldNamed) {
  expect_route_refused({
      {R"({"read_timeout_ms": -1})", "read_timeout_ms"},
      {R"({"read_timeout_ms": 1.5})", "read_timeout_ms"},
      {R"({"next_upstream": ["error", "http_500"]})", "next_upstream"},
      {R"({"next_upstream": "error"})", "next_upstream"},
      {R"({"next_upstream_tries": 4294967296})", "next_upstream_tries"},
      {R"({"max_body_bytes": "1m"})", "max_body_bytes"},
  });
}

TEST(PolicyTimeouts, EachBadFieldIsReported) {
  expect_each_reported_alone<RoutePolicy>({
      {"zero timeout", [](RoutePolicy& p) { p.connect_timeout = 0ms; }, "connect_timeout"},
      {"huge timeout", [](RoutePolicy& p) { p.read_timeout = 25h; }, "read_timeout"},
      {"zero body", [](RoutePolicy& p) { p.max_body_bytes = 0; }, "max_body_bytes"},
      {"huge body", [](RoutePolicy& p) { p.max_body_bytes = (uint64_t{1} << 40) + 1; },
       "max_body_bytes"},
      {"zero tries", [](RoutePolicy& p) { p.next_upstream_tries = 0; }, "next_upstream_tries"},
      {"21 tries", [](RoutePolicy& p) { p.next_upstream_tries = 21; }, "next_upstream_tries"},
      {"negative retry timeout", [](RoutePolicy& p) { p.next_upstream_timeout = -1ms; },
       "next_upstream_timeout"},
      {"huge retry timeout", [](RoutePolicy& p) { p.next_upstream_timeout = 25h; },
       "next_upstream_timeout"},
      {"negative request timeout", [](RoutePolicy& p) { p.request_timeout = -1ms; },
       "request_timeout"},
      {"huge request timeout", [](RoutePolicy& p) { p.request_timeout = 25h; }, "request_timeout"},
  });
}

}  // namespace
}  // namespace tidegate::model
