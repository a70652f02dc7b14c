// The request-mirroring family of the route policy (lib/model/mirror.h): validation and the
// JSON form, alone and inside a RoutePolicy; and the reference check of model::validate.
#include "model/mirror.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "model/model.h"
#include "model/policy.h"

namespace tidegate::model {
namespace {

using nlohmann::json;

TEST(MirrorModel, ValidateNamesEachProblem) {
  EXPECT_TRUE(validate(std::vector<Mirror>{}).empty());
  EXPECT_TRUE(validate(std::vector<Mirror>{{"a", 0, 1}, {"b", 7, 7}, {"c"}}).empty());
  const auto problems = validate(std::vector<Mirror>{{"", 1, 2}, {"a", 3, 2}, {"b", 0, 0}});
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_NE(problems[0].find("no upstream"), std::string::npos);
  EXPECT_NE(problems[1].find("3/2 is more than 1"), std::string::npos);
  EXPECT_NE(problems[2].find("denominator 0"), std::string::npos);
  std::vector<Mirror> many(Mirror::kMaxPerRoute + 1, Mirror{"a"});
  EXPECT_EQ(validate(many).size(), 1u);
  RoutePolicy p;
  p.mirrors = {{"a", 2, 1}};
  EXPECT_EQ(validate(p).size(), 1u);  // the route policy checks its mirrors
}

TEST(MirrorModel, JsonRoundTripAloneAndInARoutePolicy) {
  const std::vector<Mirror> mirrors = {{"default/a:80"}, {"default/b:80", 1, 3}, {"c", 0, 100}};
  EXPECT_EQ(mirrors_from_json(json::parse(to_json(mirrors).dump())), mirrors);
  // The whole share is the default: not written.
  EXPECT_EQ(to_json(std::vector<Mirror>{{"a"}}).dump(), R"([{"upstream":"a"}])");
  RoutePolicy p;
  p.mirrors = mirrors;
  const json j = to_json(p);
  EXPECT_TRUE(j.contains("mirrors"));
  EXPECT_EQ(route_policy_from_json(json::parse(j.dump())), p);
  EXPECT_FALSE(to_json(RoutePolicy{}).contains("mirrors"));
}

TEST(MirrorModel, MalformedJsonIsRefused) {
  for (const char* text : {R"({})", R"([{"upstream": 1}])", R"([{"upstream": "a", "x": 1}])",
                           R"([{"upstream": "a", "numerator": -1}])", R"(["a"])"}) {
    EXPECT_ANY_THROW(mirrors_from_json(json::parse(text))) << text;
  }
}

TEST(MirrorModel, AConfigNamesOnlyKnownMirrorUpstreams) {
  Config c;
  c.upstreams.emplace("web", Upstream{"web", {}});
  VirtualHost vh{"a.example.com", {}};
  Route r;
  r.path = "/";
  r.upstream = "web";
  r.policy.mut().mirrors = {{"web"}};
  vh.routes.push_back(r);
  c.virtual_hosts.emplace(vh.host, vh);
  EXPECT_TRUE(validate(c).empty());
  c.virtual_hosts.begin()->second.routes[0].policy.mut().mirrors = {{"shadow"}};
  const auto problems = validate(c);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("unknown mirror upstream \"shadow\""), std::string::npos);
}

}  // namespace
}  // namespace tidegate::model
