// lib/model/cors: the CORS settings of a route: JSON, validate() and the origin syntax.

#include "model/cors.h"

#include <gtest/gtest.h>

#include "lib/model/policy_cases.h"
#include "model/policy.h"

namespace tidegate::model {
namespace {

using namespace policy_cases;

TEST(PolicyCors, EachFieldRoundTripsAlone) {
  const RoutePolicy full = full_route_policy();
  expect_route_fields_round_trip_alone({
      {"cors (defaults)", [&](RoutePolicy& p) { p.cors = Cors{}; }},
      {"cors", [&](RoutePolicy& p) { p.cors = full.cors; }},
  });
}

TEST(PolicyCors, MalformedInputIsRefusedWithTheFieldNamed) {
  expect_route_refused({
      {R"({"cors": {"allow_origins": "*"}})", "allow_origins"},
      {R"({"cors": {"allow_credentials": "no"}})", "allow_credentials"},
      {R"({"cors": {"origins": ["*"]}})", "cors: unknown field \"origins\""},
  });
}

TEST(PolicyCors, EachBadFieldIsReported) {
  expect_each_reported_alone<RoutePolicy>({
      {"cors origin", [](RoutePolicy& p) { p.cors = cors_for({"example.com"}); }, "origin"},
      {"cors star+",
       [](RoutePolicy& p) {
         p.cors = cors_for({"*", "https://a.b"});
       },
       "only"},
      {"cors method",
       [](RoutePolicy& p) {
         p.cors = Cors{};
         p.cors->allow_methods = {"GET POST"};
       },
       "allow_methods"},
      {"cors max age",
       [](RoutePolicy& p) {
         p.cors = Cors{};
         p.cors->max_age_seconds = -1;
       },
       "max_age"},
  });
}

TEST(PolicyCors, OriginSyntax) {
  EXPECT_FALSE(check_cors_origin("*"));
  EXPECT_FALSE(check_cors_origin("https://a.example.com"));
  EXPECT_FALSE(check_cors_origin("http://*.example.com:8080"));
  EXPECT_TRUE(check_cors_origin("example.com"));
  EXPECT_TRUE(check_cors_origin("https://a.example.com/"));
  EXPECT_TRUE(check_cors_origin("https://a.example.com:99999"));
}

}  // namespace
}  // namespace tidegate::model
