// lib/model/hsts: the Strict-Transport-Security header of a route: its value, JSON and
// validate().

#include "model/hsts.h"

#include <gtest/gtest.h>

#include "lib/model/policy_cases.h"
#include "model/policy.h"

namespace tidegate::model {
namespace {

using namespace policy_cases;

TEST(PolicyHsts, HeaderValueAndRange) {
  EXPECT_EQ(hsts_value(Hsts{}), "max-age=31536000; includeSubDomains");
  EXPECT_EQ(hsts_value(Hsts{0, false, false}), "max-age=0");
  EXPECT_EQ(hsts_value(Hsts{63072000, true, true}), "max-age=63072000; includeSubDomains; preload");
  RoutePolicy p;
  p.hsts = Hsts{-1, true, false};
  EXPECT_NE(joined(validate(p)).find("hsts max_age -1 is out of range"), std::string::npos);
  p.hsts->max_age_seconds = Hsts::kMaxMaxAgeSeconds;
  EXPECT_EQ(joined(validate(p)), "");
}

TEST(PolicyHsts, EachFieldRoundTripsAlone) {
  const RoutePolicy full = full_route_policy();
  expect_route_fields_round_trip_alone({
      {"hsts (defaults)", [&](RoutePolicy& p) { p.hsts = Hsts{}; }},
      {"hsts", [&](RoutePolicy& p) { p.hsts = full.hsts; }},
      {"hsts max-age 0",
       [&](RoutePolicy& p) {
         p.hsts = Hsts{0, true, false};
       }},
  });
}

TEST(PolicyHsts, MalformedInputIsRefusedWithTheFieldNamed) {
  expect_route_refused({
      {R"({"hsts": true})", "hsts must be an object"},
      {R"({"hsts": {"max_age_seconds": -1}})", "max_age_seconds"},
      {R"({"hsts": {"preload": 1}})", "preload"},
      {R"({"hsts": {"include_subdomains": "yes"}})", "include_subdomains"},
      {R"({"hsts": {"max-age": 5}})", "unknown field \"max-age\""},
  });
}

TEST(PolicyHsts, EachBadFieldIsReported) {
  expect_each_reported_alone<RoutePolicy>({
      {"negative max-age",
       [](RoutePolicy& p) {
         p.hsts = Hsts{-1, true, false};
       },
       "hsts max_age"},
      {"huge max-age",
       [](RoutePolicy& p) {
         p.hsts = Hsts{Hsts::kMaxMaxAgeSeconds + 1, true, false};
       },
       "hsts max_age"},
  });
}

}  // namespace
}  // namespace tidegate::model
