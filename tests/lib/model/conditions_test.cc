// lib/model/conditions: a route's conditions besides the path and its weighted backends
// (the Gateway API's HTTPRoute matches and backendRefs): validate(), the route order and the
// JSON form.

#include "model/conditions.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/model.h"

namespace tidegate::model {
namespace {

using nlohmann::json;

Config config_with(Route r) {
  Config c;
  c.upstreams["default/a:80"] = Upstream{"default/a:80", {}, {}, {}};
  c.upstreams["default/b:80"] = Upstream{"default/b:80", {}, {}, {}};
  c.virtual_hosts["x.com"] = VirtualHost{"x.com", {std::move(r)}};
  return c;
}

Route gateway_route() {
  Route r;
  r.path = "/";
  r.upstream = "default/a:80";
  return r;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

TEST(RouteConditions, ValidRoutesPass) {
  Route r = gateway_route();
  r.method = "PATCH";
  r.headers = {{"x-a", "1", ValueMatch::kExact}, {"x-b", "^v[0-9]+$", ValueMatch::kRegex}};
  r.query = {{"q", "a b", ValueMatch::kExact}, {"Q", "(x|y)", ValueMatch::kRegex}};
  EXPECT_EQ(joined(validate(config_with(r))), "");
  r.upstream.clear();
  r.backends = {{"default/a:80", 90}, {"default/b:80", 10}, {"", 5}, {"default/a:80", 0}};
  EXPECT_EQ(joined(validate(config_with(r))), "");
  // No backend at all: the route answers 500 (or a redirect answers).
  r.backends.clear();
  EXPECT_EQ(joined(validate(config_with(r))), "");
}

TEST(RouteConditions, EachBadConditionIsReported) {
  struct Case {
    const char* name;
    std::function<void(Route&)> set;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"lower-case method", [](Route& r) { r.method = "get"; }, "method"},
      {"method with space", [](Route& r) { r.method = "GE T"; }, "method"},
      {"upper-case header name",
       [](Route& r) {
         r.headers = {{"X-A", "1", ValueMatch::kExact}};
       },
       "lower-case token"},
      {"header twice",
       [](Route& r) {
         r.headers = {{"x-a", "1", ValueMatch::kExact}, {"x-a", "2", ValueMatch::kExact}};
       },
       "twice"},
      {"header value with newline",
       [](Route& r) {
         r.headers = {{"x-a", "1\n2", ValueMatch::kExact}};
       },
       "control character"},
      {"bad header regex",
       [](Route& r) {
         r.headers = {{"x-a", "(", ValueMatch::kRegex}};
       },
       "invalid regex"},
      {"query name with =",
       [](Route& r) {
         r.query = {{"a=b", "1", ValueMatch::kExact}};
       },
       "without & = #"},
      {"empty query name",
       [](Route& r) {
         r.query = {{"", "1", ValueMatch::kExact}};
       },
       "without & = #"},
      {"query twice",
       [](Route& r) {
         r.query = {{"a", "1", ValueMatch::kExact}, {"a", "2", ValueMatch::kExact}};
       },
       "twice"},
      {"bad query regex",
       [](Route& r) {
         r.query = {{"a", "[", ValueMatch::kRegex}};
       },
       "invalid regex"},
      {"too many headers",
       [](Route& r) {
         for (int i = 0; i < 17; ++i) {
           r.headers.push_back({"x-" + std::to_string(i), "1", ValueMatch::kExact});
         }
       },
       "more than 16 header"},
      {"weight too high",
       [](Route& r) {
         r.upstream.clear();
         r.backends = {{"default/a:80", kMaxBackendWeight + 1}};
       },
       "weight"},
      {"backends and an upstream",
       [](Route& r) {
         r.backends = {{"default/b:80", 1}};
       },
       "no single upstream"},
      {"unknown backend upstream",
       [](Route& r) {
         r.upstream.clear();
         r.backends = {{"default/zzz:80", 1}};
       },
       "unknown backend upstream"},
  };
  for (const auto& c : cases) {
    Route r = gateway_route();
    c.set(r);
    auto problems = validate(config_with(r));
    ASSERT_EQ(problems.size(), 1u) << c.name << ":\n" << joined(problems);
    EXPECT_NE(problems[0].find(c.want), std::string::npos) << c.name << ": " << problems[0];
  }
}

TEST(RouteConditions, JsonRoundTripsEachFieldAndOmitsDefaults) {
  Route plain = gateway_route();
  json j = json::object();
  conditions_to_json(plain, j);
  EXPECT_EQ(j.dump(), "{}");

  std::vector<std::function<void(Route&)>> setters = {
      [](Route& r) { r.method = "DELETE"; },
      [](Route& r) {
        r.headers = {{"x-a", "^a", ValueMatch::kRegex}};
      },
      [](Route& r) {
        r.query = {{"k", "v", ValueMatch::kExact}};
      },
      [](Route& r) {
        r.backends = {{"default/a:80", 7}, {"", 0}};
      },
  };
  for (size_t i = 0; i < setters.size(); ++i) {
    Route r = gateway_route();
    setters[i](r);
    json out = json::object();
    conditions_to_json(r, out);
    EXPECT_NE(out.dump(), "{}") << i;
    Route back = gateway_route();
    conditions_from_json(json::parse(out.dump()), back);
    EXPECT_EQ(back, r) << i << ": " << out.dump();
  }
}

TEST(RouteConditions, MalformedJsonIsRefusedWithTheFieldNamed) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {R"({"headers": {"name": "x"}})", "headers"},
      {R"({"headers": [{"name": "x", "value": "1", "match": "Prefix"}]})", "match"},
      {R"({"query": [{"name": "x", "value": "1", "extra": true}]})", "extra"},
      {R"({"backends": [{"upstream": "a", "weight": -1}]})", "weight"},
      {R"({"backends": [{"upstream": "a", "weight": 1000001}]})", "weight"},
  };
  for (const auto& [text, want] : cases) {
    Route r;
    try {
      conditions_from_json(json::parse(text), r);
      ADD_FAILURE() << text << " was accepted";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << text << ": " << e.what();
    }
  }
}

TEST(RouteConditions, SortOrderWithinOnePath) {
  // The Gateway API's order among routes of one path: a method first, then more header
  // conditions, then more query conditions; equal ones keep their input order.
  Route none = gateway_route();
  none.ingress = "none";
  Route one_header = gateway_route();
  one_header.ingress = "one header";
  one_header.headers = {{"x-a", "1", ValueMatch::kExact}};
  Route two_headers = gateway_route();
  two_headers.ingress = "two headers";
  two_headers.headers = {{"x-a", "1", ValueMatch::kExact}, {"x-b", "1", ValueMatch::kExact}};
  Route method = gateway_route();
  method.ingress = "method";
  method.method = "GET";
  Route query = gateway_route();
  query.ingress = "query";
  query.query = {{"a", "1", ValueMatch::kExact}};
  Route query_too = query;
  query_too.ingress = "query too";
  Route longer = gateway_route();
  longer.ingress = "longer path";
  longer.path = "/longer";
  std::vector<Route> routes = {none, query, one_header, query_too, two_headers, method, longer};
  sort_routes(routes);
  std::vector<std::string> order;
  for (const auto& r : routes) order.push_back(r.ingress);
  EXPECT_EQ(order, (std::vector<std::string>{"longer path", "method", "two headers", "one header",
                                             "query", "query too", "none"}));
}

}  // namespace
}  // namespace tidegate::model
