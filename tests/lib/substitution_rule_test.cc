// lib/substitution/rule.h: rule validation shared by the controller, model::validate and the
// data plane's engine.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "filters/substitution/rule_set.h"
#include "substitution/rule.h"

namespace tidegate::substitution {
namespace {

struct Case {
  std::string name;
  Rule rule;
  std::string want;  // a substring of the reason; empty: valid
};

TEST(SubstitutionRuleTest, ValidateRuleTable) {
  const std::vector<Case> cases = {
      {"literal", {"example\\.com", "clone.test", ""}, ""},
      {"case-insensitive", {"hello", "bye", "i"}, ""},
      {"groups", {"(a)(b)", "$2$1$&$$", ""}, ""},
      {"empty replacement", {"tracker", "", ""}, ""},
      {"syntax error", {"(a", "x", ""}, "invalid regex: missing ): (a"},
      {"lookahead", {"(?=a)b", "x", ""}, "lookahead and lookbehind are not supported"},
      {"lookbehind", {"(?<!a)b", "x", ""}, "lookahead and lookbehind are not supported"},
      {"backreference", {"(a)\\1", "x", ""}, "backreferences such as \\1 are not supported"},
      {"star", {"a*", "x", ""}, "can match the empty string"},
      {"optional", {"x?", "x", ""}, "can match the empty string"},
      {"word boundary alone", {"\\b", "x", ""}, "can match the empty string"},
      {"empty alternative", {"x?|y", "x", ""}, "can match the empty string"},
      {"empty match", {"", "x", ""}, "match is empty"},
      {"group beyond pattern", {"a", "$2", ""}, "uses $2 but the pattern has 0 capture groups"},
      {"unknown flag", {"a", "b", "g"}, "unknown flags \"g\""},
      {"pattern too long", {std::string(kMaxPatternBytes + 1, 'a'), "b", ""}, "longer than 4096"},
      {"replacement too long",
       {"a", std::string(kMaxReplacementBytes + 1, 'b'), ""},
       "longer than 16384"},
      {"engine cannot embed", {"x(?i){2}", "y", ""}, "streaming engine does not support"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto reason = validate_rule(c.rule);
    if (c.want.empty()) {
      EXPECT_FALSE(reason.has_value()) << *reason;
    } else {
      ASSERT_TRUE(reason.has_value());
      EXPECT_NE(reason->find(c.want), std::string::npos) << *reason;
    }
    // The data plane's engine agrees rule by rule: valid here means compiled there.
    auto compiled = dataplane::filters::RuleSet::compile({c.rule});
    EXPECT_EQ(compiled.rules != nullptr, c.want.empty());
    EXPECT_EQ(compiled.errors.empty(), c.want.empty());
  }
}

TEST(SubstitutionRuleTest, ValidateRulesNamesEachRuleByIndexAndPattern) {
  auto errors = validate_rules({{"ok", "x", ""}, {"(a", "x", ""}, {"b", "y", ""}, {"a*", "x", ""}});
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].index, 1u);
  EXPECT_EQ(errors[0].message, "rule 1 (match \"(a\"): invalid regex: missing ): (a");
  EXPECT_EQ(errors[0].reason, "invalid regex: missing ): (a");
  EXPECT_EQ(errors[1].index, 3u);
  EXPECT_EQ(errors[1].message.rfind("rule 3 (match \"a*\"): ", 0), 0u) << errors[1].message;
}

TEST(SubstitutionRuleTest, ValidateRulesLimitsTheCount) {
  std::vector<Rule> rules(kMaxRules + 2, Rule{"abc", "x", ""});
  auto errors = validate_rules(rules);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].index, kMaxRules);
  EXPECT_EQ(errors[0].reason, "more than 64 rules");
  EXPECT_EQ(errors[1].index, kMaxRules + 1);
  EXPECT_TRUE(validate_rules(std::vector<Rule>(kMaxRules, Rule{"abc", "x", ""})).empty());
}

TEST(SubstitutionRuleTest, DescribeRuleShortensLongPatterns) {
  EXPECT_EQ(describe_rule(2, {"a|b", "", ""}), "rule 2 (match \"a|b\")");
  EXPECT_EQ(describe_rule(0, {std::string(100, 'x'), "", ""}),
            "rule 0 (match \"" + std::string(80, 'x') + "...\")");
}

}  // namespace
}  // namespace tidegate::substitution
