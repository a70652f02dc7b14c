#include "server/route_table.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

namespace tidegate::dataplane::server {
namespace {

// The table holds the references on its routes' metric label sets: the ids a worker records
// with stay in use for as long as it holds the table (observability/metrics.h).
TEST(RouteTableTest, HoldsItsRoutesMetricLabelSetsUntilItGoes) {
  model::Config config;
  config.upstreams["shop/web:80"] = {"shop/web:80", {{"10.0.0.1", 80}}};
  config.virtual_hosts["foo.com"] = {
      "foo.com", {model::Route{"/", model::PathMatch::kPrefix, "shop/web:80", "shop/web"}}};
  std::string error;
  auto router = router::Router::build(config, &error);
  ASSERT_NE(router, nullptr) << error;
  observability::Metrics metrics(1);
  auto table = std::make_unique<RouteTable>(*router, &metrics);
  const model::Route* route = router->match("foo.com", "/").route;
  ASSERT_NE(table->find(route), nullptr);
  const observability::LabelSetId id = table->find(route)->labels;
  EXPECT_GT(id, observability::kOverflowLabels);
  EXPECT_EQ(metrics.label_sets(), 3u);
  metrics.worker(0).record_request({id, boost::beast::http::verb::get, 200, 1, 1,
                                    std::chrono::milliseconds(1), std::chrono::milliseconds(1)});
  EXPECT_NE(metrics.scrape().find(R"(ingress="web")"), std::string::npos);
  table.reset();
  EXPECT_EQ(metrics.label_sets(), 2u);
  EXPECT_EQ(metrics.scrape().find(R"(ingress="web")"), std::string::npos);
}

struct RewriteCase {
  const char* name;
  const char* target;
  const char* regex;  // null: no regex (a Prefix route)
  const char* path;
  const char* query;
  const char* want;
};

TEST(RewritePathTest, Table) {
  const RewriteCase cases[] = {
      {"fixed target replaces the whole path", "/new", nullptr, "/app/x/y", "", "/new"},
      {"query string is kept", "/new", nullptr, "/app", "a=1&b=2", "/new?a=1&b=2"},
      {"captures", "/$2", "/something(/|$)(.*)", "/something/a/b", "", "/a/b"},
      {"capture of the empty rest", "/$2", "/something(/|$)(.*)", "/something", "", "/"},
      {"several captures in order", "/v2/$2/$1", "/api/([a-z]+)/([0-9]+)", "/api/users/42", "x=1",
       "/v2/42/users?x=1"},
      {"a group that took no part is empty", "/$1-$2", "/(a)?(b)", "/b", "", "/-b"},
      {"no match: $N expand to nothing", "/x/$1", "/nomatch/(.*)", "/other", "", "/x/"},
      {"reference past the groups is empty", "/$3", "/(a)", "/a", "", "/"},
      {"without a regex $N is empty", "/p/$1", nullptr, "/q", "", "/p/"},
      {"a target without a leading slash gets one", "$1", "/(.*)", "/abc", "", "/abc"},
      {"regex anchored at the start", "/$1", "/b/(.*)", "/a/b/c", "", "/"},
  };
  for (const auto& c : cases) {
    std::unique_ptr<re2::RE2> regex;
    if (c.regex != nullptr) {
      regex = std::make_unique<re2::RE2>(c.regex);
      ASSERT_TRUE(regex->ok()) << c.name;
    }
    EXPECT_EQ(rewrite_path(c.target, regex.get(), c.path, c.query), c.want) << c.name;
  }
}

}  // namespace
}  // namespace tidegate::dataplane::server
