// The X-Sendfile family of the route policy (lib/model/sendfile.h): directory checks, validation
// and the JSON form, alone and inside a RoutePolicy.
#include "model/sendfile.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "model/policy.h"

namespace tidegate::model {
namespace {

using nlohmann::json;

TEST(SendfileModel, DirectoriesInNormalFormOnly) {
  struct Case {
    std::string_view path;
    bool ok;
  };
  const Case cases[] = {
      {"/srv/files", true}, {"/srv/files/", false}, {"srv/files", false},   {"/", false},
      {"", false},          {"/srv//files", false}, {"/srv/./x", false},    {"/srv/../x", false},
      {"/srv/a b", false},  {"/srv/a..b", true},    {"/srv/.hidden", true},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(!check_sendfile_directory(c.path).has_value(), c.ok) << c.path;
  }
  for (std::string_view forbidden :
       {"/proc", "/proc/1", "/sys/fs", "/dev", "/etc/ssl", "/run/secrets/x",
        "/var/run/secrets/kubernetes.io/serviceaccount"}) {
    EXPECT_TRUE(check_sendfile_directory(forbidden).has_value()) << forbidden;
  }
  EXPECT_FALSE(check_sendfile_directory("/var/run/app").has_value());
  EXPECT_FALSE(check_sendfile_directory("/procfiles").has_value());
  EXPECT_TRUE(path_within("/srv/files/a", "/srv/files"));
  EXPECT_TRUE(path_within("/srv/files", "/srv/files"));
  EXPECT_FALSE(path_within("/srv/files2/a", "/srv/files"));
  EXPECT_FALSE(path_within("/srv", "/srv/files"));
}

TEST(SendfileModel, ValidateNamesEachProblem) {
  Sendfile s;
  EXPECT_EQ(validate(s).size(), 1u);  // no directory
  s.directories = {"/srv/files"};
  s.mappings = {{"/p/", "/srv/files/sub"}};
  EXPECT_TRUE(validate(s).empty());
  s.mappings = {{"/p", "/srv/files"}, {"/q/", "/opt/other"}, {"/r/../", "/srv/files"}};
  const auto problems = validate(s);
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_NE(problems[0].find("\"/p\""), std::string::npos);
  EXPECT_NE(problems[1].find("not within"), std::string::npos);
  EXPECT_NE(problems[2].find("\"/r/../\""), std::string::npos);
}

TEST(SendfileModel, JsonRoundTripAloneAndInARoutePolicy) {
  Sendfile s;
  s.directories = {"/srv/files", "/srv/media"};
  EXPECT_EQ(sendfile_from_json(json::parse(to_json(s).dump())), s);
  s.mappings = {{"/p/", "/srv/files"}};
  EXPECT_EQ(sendfile_from_json(json::parse(to_json(s).dump())), s);
  RoutePolicy p;
  p.sendfile = s;
  ASSERT_TRUE(validate(p).empty());
  const json j = to_json(p);
  EXPECT_TRUE(j.contains("sendfile"));
  EXPECT_EQ(route_policy_from_json(json::parse(j.dump())), p);
  // Not set: not on the wire.
  EXPECT_FALSE(to_json(RoutePolicy{}).contains("sendfile"));
}

TEST(SendfileModel, MalformedJsonIsRefused) {
  for (const char* text :
       {R"({"directories": "/srv"})", R"({"directories": ["/srv"], "x": 1})",
        R"({"directories": ["/srv"], "mappings": {}})",
        R"({"directories": ["/srv"], "mappings": [{"uri_prefix": 1}]})", R"([])"}) {
    EXPECT_ANY_THROW(sendfile_from_json(json::parse(text))) << text;
  }
}

}  // namespace
}  // namespace tidegate::model
