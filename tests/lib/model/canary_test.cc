// lib/model/canary: a canary Ingress's weight, header, header pattern and cookie: JSON and
// validate().

#include "model/canary.h"

#include <gtest/gtest.h>

#include "lib/model/policy_cases.h"

namespace tidegate::model {
namespace {

using namespace policy_cases;

TEST(PolicyCanary, DefaultEncodesAsAnEmptyObject) {
  EXPECT_EQ(to_json(Canary{}).dump(), "{}");
  EXPECT_EQ(canary_from_json(json::object()), Canary{});
}

TEST(PolicyCanary, RoundTripsThroughText) {
  const Canary canary{"default/web-canary:80", 10, 1000, "X-Canary", "yes", "canary"};
  ASSERT_TRUE(validate(canary).empty()) << joined(validate(canary));
  EXPECT_EQ(canary_from_json(json::parse(to_json(canary).dump())), canary);
  Canary patterned{"default/web-canary:80", 0, 100, "X-Canary", "", ""};
  patterned.header_pattern = "^v[0-9]+$";
  ASSERT_TRUE(validate(patterned).empty()) << joined(validate(patterned));
  EXPECT_EQ(canary_from_json(json::parse(to_json(patterned).dump())), patterned);
  patterned.header_pattern = "(";
  EXPECT_FALSE(validate(patterned).empty());
}

TEST(PolicyCanary, MalformedInputIsRefusedWithTheFieldNamed) {
  expect_refused(
      {
          {R"({"weight": -5})", "weight"},
          {R"({"weight_total": 4294967296})", "weight_total"},
          {R"({"headers": "x"})", "unknown field"},
          {R"({"header_pattern": 1})", "header_pattern"},
          {R"("canary")", "canary must be an object"},
      },
      [](const json& j) { canary_from_json(j); });
}

TEST(PolicyCanary, EachBadFieldIsReported) {
  const std::vector<std::tuple<const char*, Canary, const char*>> canaries = {
      {"weight > total", canary("u", 101), "exceeds"},
      {"total 0", canary("u", 0, 0), "total"},
      {"header", canary("u", 0, 100, "X Y"), "header"},
      {"value without header", canary("u", 0, 100, "", "v"), "without a header"},
      {"cookie", canary("u", 0, 100, "", "", "a;b"), "cookie"},
      {"no upstream", canary("", 0), "no upstream"},
  };
  for (const auto& [name, c, want] : canaries) {
    auto problems = validate(c);
    ASSERT_EQ(problems.size(), 1u) << name << ":\n" << joined(problems);
    EXPECT_NE(problems[0].find(want), std::string::npos) << name << ": " << problems[0];
  }
  Canary pattern_alone = canary("u", 0);
  pattern_alone.header_pattern = "^a";
  auto problems = validate(pattern_alone);
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_EQ(problems[0], "canary header pattern without a header");
  Canary bad_pattern = canary("u", 0, 100, "X-Canary");
  bad_pattern.header_pattern = std::string(Canary::kMaxHeaderPattern + 1, 'a');
  EXPECT_EQ(joined(validate(bad_pattern)), "canary header pattern is longer than 1024 bytes\n");
  EXPECT_FALSE(check_header_pattern("^v[0-9]+$"));
  EXPECT_TRUE(check_header_pattern(""));
  EXPECT_TRUE(check_header_pattern("("));
}

}  // namespace
}  // namespace tidegate::model
