#include "server/canary.h"

#include <gtest/gtest.h>

namespace tidegate::dataplane::server {
namespace {

using Opt = std::optional<std::string_view>;

TEST(CanaryTest, HeaderThenCookieThenUndecided) {
  model::Canary c;
  c.header = "X-Canary";
  c.cookie = "canary";
  struct Case {
    const char* name;
    Opt header, cookie;
    CanaryChoice want;
  };
  const Case cases[] = {
      {"nothing", std::nullopt, std::nullopt, CanaryChoice::kUndecided},
      {"header always", "always", std::nullopt, CanaryChoice::kCanary},
      {"header never", "never", "always", CanaryChoice::kMain},
      {"header other falls through to the cookie", "maybe", "always", CanaryChoice::kCanary},
      {"header other, cookie other", "maybe", "x", CanaryChoice::kUndecided},
      {"cookie never", std::nullopt, "never", CanaryChoice::kMain},
      {"values are exact", "Always", std::nullopt, CanaryChoice::kUndecided},
  };
  for (const auto& k : cases) EXPECT_EQ(canary_by_request(c, k.header, k.cookie), k.want) << k.name;
}

TEST(CanaryTest, HeaderValueDecidesWithoutFallThrough) {
  model::Canary c;
  c.header = "X-Region";
  c.header_value = "blue";
  c.cookie = "canary";
  EXPECT_EQ(canary_by_request(c, Opt("blue"), std::nullopt), CanaryChoice::kCanary);
  EXPECT_EQ(canary_by_request(c, Opt("green"), Opt("always")), CanaryChoice::kMain);
  EXPECT_EQ(canary_by_request(c, Opt("always"), std::nullopt), CanaryChoice::kMain);
  EXPECT_EQ(canary_by_request(c, std::nullopt, Opt("always")), CanaryChoice::kCanary);
}

TEST(CanaryTest, HeaderPatternFindsAMatchAnywhere) {
  model::Canary c;
  c.header = "X-Region";
  c.header_pattern = "^(eu|us)-west";
  c.cookie = "canary";
  const re2::RE2 pattern(c.header_pattern);
  EXPECT_EQ(canary_by_request(c, Opt("eu-west-1"), std::nullopt, &pattern), CanaryChoice::kCanary);
  EXPECT_EQ(canary_by_request(c, Opt("ap-west-1"), Opt("always"), &pattern), CanaryChoice::kMain);
  // "always" is just a value then.
  EXPECT_EQ(canary_by_request(c, Opt("always"), std::nullopt, &pattern), CanaryChoice::kMain);
  EXPECT_EQ(canary_by_request(c, std::nullopt, Opt("always"), &pattern), CanaryChoice::kCanary);
  const re2::RE2 unanchored("beta");
  c.header_pattern = "beta";
  EXPECT_EQ(canary_by_request(c, Opt("v2-beta-3"), std::nullopt, &unanchored),
            CanaryChoice::kCanary);
  // A pattern that did not compile matches nothing.
  EXPECT_EQ(canary_by_request(c, Opt("beta"), std::nullopt, nullptr), CanaryChoice::kMain);
}

TEST(CanaryTest, UnsetHeaderAndCookieAreNotRead) {
  model::Canary c;  // weight only
  EXPECT_EQ(canary_by_request(c, Opt("always"), Opt("always")), CanaryChoice::kUndecided);
}

TEST(CanaryTest, WeightIsExactOverEveryCycleAndSpread) {
  for (uint32_t total : {1u, 3u, 100u, 1000u}) {
    for (uint32_t weight : {0u, 1u, total / 3, total / 2, total - 1, total}) {
      if (weight > total) continue;
      for (uint64_t cycle = 0; cycle < 3; ++cycle) {
        uint32_t hits = 0;
        uint32_t longest_main_run = 0, run = 0;
        for (uint64_t t = cycle * total; t < (cycle + 1) * total; ++t) {
          if (canary_by_weight(t, weight, total)) {
            ++hits;
            run = 0;
          } else {
            longest_main_run = std::max(longest_main_run, ++run);
          }
        }
        EXPECT_EQ(hits, weight) << weight << "/" << total;
        // Spread: between two canary turns at most ceil(total/weight) main turns.
        if (weight > 0) {
          EXPECT_LE(longest_main_run, (total + weight - 1) / weight) << weight;
        }
      }
    }
  }
  EXPECT_FALSE(canary_by_weight(5, 0, 100));
  EXPECT_TRUE(canary_by_weight(5, 100, 100));
}

}  // namespace
}  // namespace tidegate::dataplane::server
