// Table tests for the tidegate.io/substitution* annotation parser (controller/annotations/).
// Rule validity (regex syntax, empty matches) is the translator's, tested in translate_test.cc.

#include "annotations/substitution.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tidegate::controller::annotations {
namespace {

TEST(SubstitutionAnnotationsTest, ParseSizeTable) {
  const std::vector<std::pair<std::string, std::optional<uint64_t>>> cases = {
      {"65536", 65536},
      {"64k", 65536},
      {"64K", 65536},
      {"64Ki", 65536},
      {"1m", 1 << 20},
      {"1M", 1 << 20},
      {"16Mi", 16 << 20},
      {"0", 0},
      {"", std::nullopt},
      {"k", std::nullopt},
      {"64kb", std::nullopt},
      {"64 k", std::nullopt},
      {"-1", std::nullopt},
      {"1.5m", std::nullopt},
      {"1g", std::nullopt},
      {"64KiB", std::nullopt},
      {"9999999999999m", std::nullopt},  // too many digits
  };
  for (const auto& [text, want] : cases) EXPECT_EQ(parse_size(text), want) << text;
}

struct Case {
  std::string name;
  std::map<std::string, std::string> annotations;
  SubstitutionAnnotations want;
};

SubstitutionAnnotations defaults(bool present = true) {
  SubstitutionAnnotations a;
  a.present = present;
  a.mime_types = {"text/html"};
  a.max_buffer = 64 * 1024;
  return a;
}

SubstitutionAnnotations with(SubstitutionAnnotations a, auto change) {
  change(a);
  return a;
}

TEST(SubstitutionAnnotationsTest, Table) {
  const std::string kSubs(kSubstitutionsAnnotation), kTypes(kSubstitutionTypesAnnotation),
      kBuffer(kSubstitutionMaxBufferAnnotation), kSet(kSubstitutionRuleSetAnnotation);
  const std::vector<Case> cases = {
      {"none", {{"other", "x"}}, defaults(false)},
      {"names that only share the prefix",
       {{"tidegate.io/substitution", "x"},
        {"tidegate.io/substitution-typo", "y"},
        {"tidegate.io/substitutionsx", "z"},
        {"tidegate.io/t", "w"}},
       defaults(false)},
      {"one of the four among names that share the prefix",
       {{"tidegate.io/substitution-a", "x"},
        {kTypes, "text/plain"},
        {"tidegate.io/substitution-z", "y"}},
       with(defaults(), [](auto& a) { a.mime_types = {"text/plain"}; })},
      {"rules in flow style",
       {{kSubs, R"([{match: 'a\.b', replace: c}, {match: d, replace: '', flags: i}])"}},
       with(defaults(),
            [](auto& a) {
              a.rules = {{0, {"a\\.b", "c", ""}}, {1, {"d", "", "i"}}};
            })},
      {"the example of docs/translation.md",
       {{kSet, "common"},
        {kSubs,
         "- {match: 'shop\\.example\\.com', replace: shop.clone.test}\n"
         "- {match: 'UA-[0-9]+-[0-9]+', replace: UA-000000-1}\n"
         "- {match: '\\bcolour\\b', replace: color, flags: i}\n"},
        {kTypes, "text/html, application/xhtml+xml"},
        {kBuffer, "256k"}},
       with(defaults(),
            [](auto& a) {
              a.rule_set = "common";
              a.rules = {{0, {"shop\\.example\\.com", "shop.clone.test", ""}},
                         {1, {"UA-[0-9]+-[0-9]+", "UA-000000-1", ""}},
                         {2, {"\\bcolour\\b", "color", "i"}}};
              a.mime_types = {"application/xhtml+xml", "text/html"};
              a.max_buffer = 256 << 10;
            })},
      {"rules in block style",
       {{kSubs, "- match: a\n  replace: b\n- match: \"c\"\n  replace: \"$1\"\n"}},
       with(defaults(),
            [](auto& a) {
              a.rules = {{0, {"a", "b", ""}}, {1, {"c", "$1", ""}}};
            })},
      {"JSON works too (YAML reads it)",
       {{kSubs, R"([{"match": "a", "replace": "b", "flags": "i"}])"}},
       with(defaults(),
            [](auto& a) {
              a.rules = {{0, {"a", "b", "i"}}};
            })},
      {"null replacement is empty",
       {{kSubs, "[{match: a, replace: }]"}},
       with(defaults(),
            [](auto& a) {
              a.rules = {{0, {"a", "", ""}}};
            })},
      {"numbers are text",
       {{kSubs, "[{match: 2024, replace: 2025}]"}},
       with(defaults(),
            [](auto& a) {
              a.rules = {{0, {"2024", "2025", ""}}};
            })},
      {"empty annotation: no rules, no error", {{kSubs, "  "}}, defaults()},
      {"empty list", {{kSubs, "[]"}}, defaults()},
      {"shape errors keep the good rules and their indices",
       {{kSubs,
         "[{replace: a}, {match: '', replace: b}, {match: c, replace: d}, {match: e, "
         "replace: {x: 1}}]"}},
       with(defaults(),
            [&](auto& a) {
              a.rules = {{2, {"c", "d", ""}}};
              a.errors = {kSubs + ": rule 0: match: required field missing; rule dropped",
                          kSubs + ": rule 1: match: required field missing; rule dropped",
                          kSubs +
                              ": rule 3: replace: expected a string, got a mapping; rule "
                              "dropped"};
            })},
      {"a scalar is not a list",
       {{kSubs, "hello"}},
       with(defaults(),
            [&](auto& a) {
              a.errors = {kSubs +
                          ": expected a YAML list of {match, replace, flags}, got a scalar; no "
                          "rules from it"};
            })},
      {"types: separators, case, duplicates, order",
       {{kTypes, " Text/Plain,text/html\ttext/plain , application/json"}},
       with(defaults(),
            [](auto& a) {
              a.mime_types = {"application/json", "text/html", "text/plain"};
            })},
      {"types: parameters are not allowed",
       {{kTypes, "text/html;charset=utf-8"}},
       with(defaults(),
            [&](auto& a) {
              a.errors = {kTypes +
                              ": \"text/html;charset=utf-8\" is not a MIME type (type/subtype, "
                              "no parameters); skipped",
                          kTypes +
                              ": no valid MIME type in \"text/html;charset=utf-8\"; using "
                              "text/html"};
            })},
      {"buffer",
       {{kBuffer, " 256k "}},
       with(defaults(), [](auto& a) { a.max_buffer = 256 << 10; })},
      {"buffer at the bounds",
       {{kBuffer, "1k"}},
       with(defaults(), [](auto& a) { a.max_buffer = 1024; })},
      {"buffer below the bounds",
       {{kBuffer, "1023"}},
       with(defaults(),
            [&](auto& a) {
              a.errors = {kBuffer +
                          ": \"1023\" is not a size between 1k and 16m (such as 64k or 1m); "
                          "using 64k"};
            })},
      {"buffer not a size",
       {{kBuffer, "lots"}},
       with(defaults(),
            [&](auto& a) {
              a.errors = {kBuffer +
                          ": \"lots\" is not a size between 1k and 16m (such as 64k or 1m); "
                          "using 64k"};
            })},
      {"rule set", {{kSet, " common "}}, with(defaults(), [](auto& a) { a.rule_set = "common"; })},
      {"empty rule set name",
       {{kSet, ""}},
       with(defaults(), [&](auto& a) { a.errors = {kSet + ": empty name; ignored"}; })},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    SubstitutionAnnotations got = parse_substitution_annotations(c.annotations);
    EXPECT_EQ(got.present, c.want.present);
    EXPECT_EQ(has_substitution_annotations(c.annotations), c.want.present);
    EXPECT_EQ(got.rules, c.want.rules);
    EXPECT_EQ(got.rule_set, c.want.rule_set);
    EXPECT_EQ(got.mime_types, c.want.mime_types);
    EXPECT_EQ(got.max_buffer, c.want.max_buffer);
    EXPECT_EQ(got.errors, c.want.errors);
  }
}

TEST(SubstitutionAnnotationsTest, NeverThrowsOnOddYaml) {
  for (const char* text : {"[", "{", "- [a", "*anchor", "!!binary x", "[{match: a, replace: b}",
                           "- - - -", "? a\n: b", "[{match: {a: b}, replace: c}]", "\t\t"}) {
    EXPECT_NO_THROW(parse_substitution_annotations({{"tidegate.io/substitutions", text}})) << text;
  }
}

}  // namespace
}  // namespace tidegate::controller::annotations
