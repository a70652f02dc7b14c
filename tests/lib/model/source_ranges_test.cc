// lib/model/source_ranges: the allow and deny lists of client networks of a route: JSON,
// validate(), and the CIDR syntax cross-checked against the data plane's parser.

#include "model/source_ranges.h"

#include <gtest/gtest.h>

#include <iomanip>

#include "lib/model/policy_cases.h"
#include "model/policy.h"
#include "ratelimit/cidr_set.h"

namespace tidegate::model {
namespace {

using namespace policy_cases;

TEST(PolicySourceRanges, EachFieldRoundTripsAlone) {
  const RoutePolicy full = full_route_policy();
  expect_route_fields_round_trip_alone({
      {"source_ranges", [&](RoutePolicy& p) { p.source_ranges = full.source_ranges; }},
      {"source_ranges deny all", [&](RoutePolicy& p) { p.source_ranges = SourceRanges{}; }},
      {"deny_ranges", [&](RoutePolicy& p) { p.deny_ranges = full.deny_ranges; }},
  });
}

TEST(PolicySourceRanges, MalformedInputIsRefusedWithTheFieldNamed) {
  expect_route_refused({
      {R"({"source_ranges": "10.0.0.0/8"})", "source_ranges"},
      {R"({"source_ranges": [1]})", "source_ranges"},
      {R"({"deny_ranges": {"cidrs": []}})", "deny_ranges"},
  });
}

TEST(PolicySourceRanges, EachBadFieldIsReported) {
  expect_each_reported_alone<RoutePolicy>({
      {"source range", [](RoutePolicy& p) { p.source_ranges = SourceRanges{{"10.0.0.0/33"}}; },
       "source range entry 1"},
      {"deny range",
       [](RoutePolicy& p) {
         p.deny_ranges = SourceRanges{{"::1", "example.com"}};
       },
       "deny range entry 2"},
      {"deny ranges empty", [](RoutePolicy& p) { p.deny_ranges = SourceRanges{}; },
       "deny ranges are empty"},
      {"too many source ranges",
       [](RoutePolicy& p) {
         p.source_ranges = SourceRanges{std::vector<std::string>(kMaxCidrEntries + 1, "::1")};
       },
       "source range: more than 4096 entries"},
  });
}

TEST(PolicySourceRanges, CidrListsAgreeWithTheDataPlaneParser) {
  const std::vector<std::string> corpus = {"10.0.0.0/8",
                                           "10.1.2.3/8",
                                           "10.0.0.1",
                                           "0.0.0.0/0",
                                           "::/0",
                                           "::1",
                                           "2001:db8::/32",
                                           "::ffff:10.0.0.0/104",
                                           "::ffff:10.0.0.0/90",
                                           "10.0.0.0/8, 192.168.1.7, 2001:db8::/32",
                                           "10.0.0.0/8 192.168.0.0/16",
                                           "10.0.0.0/8,\n 172.16.0.0/12",
                                           " 10.0.0.1 ",
                                           "",
                                           " ",
                                           ",",
                                           "10.0.0.0/8,",
                                           ",10.0.0.0/8",
                                           "10.0.0.0/8,,10.1.0.0/16",
                                           "10.0.0.0/33",
                                           "::/129",
                                           "10.0.0.0/",
                                           "10.0.0.0/08",
                                           "10.0.0.0/1a",
                                           "10.0.0.0/0000",
                                           "01.2.3.4",
                                           "1.2.3",
                                           "1.2.3.4.5",
                                           "256.1.1.1",
                                           "fe80::1%eth0",
                                           "example.com",
                                           "1.2.3.4/32/1",
                                           "::ffff:1.2.3.4",
                                           "2001:db8::g",
                                           "[::1]",
                                           "1.2.3.4:80",
                                           "::ffff:01.2.3.4",
                                           "1:2:3:4:5:6:7:8:9",
                                           "10.0.0.0/8;10.1.0.0/16"};
  for (const auto& text : corpus) {
    std::string engine_error;
    const bool engine_ok = dataplane::ratelimit::CidrSet::parse(text, &engine_error).has_value();
    std::vector<std::string> entries;
    auto ours = parse_cidr_list(text, &entries);
    EXPECT_EQ(!ours.has_value(), engine_ok)
        << std::quoted(text) << ": " << ours.value_or("ok") << " vs " << engine_error;
    if (ours && !engine_ok) {
      EXPECT_EQ(*ours, engine_error) << text;
    }
    // What we keep, the engine reads again: the entries joined must parse to the same set.
    if (!ours) {
      std::string again;
      for (const auto& e : entries) again += e + ",";
      again.pop_back();
      std::string e1, e2;
      EXPECT_EQ(dataplane::ratelimit::CidrSet::parse(again, &e1)->entries(),
                dataplane::ratelimit::CidrSet::parse(text, &e2)->entries())
          << text;
    }
  }
  std::string big;
  for (size_t i = 0; i <= kMaxCidrEntries; ++i) big += "10.0.0.1,";
  big.pop_back();
  std::string engine_error;
  EXPECT_FALSE(dataplane::ratelimit::CidrSet::parse(big, &engine_error));
  EXPECT_EQ(parse_cidr_list(big, nullptr), engine_error);
}

}  // namespace
}  // namespace tidegate::model
