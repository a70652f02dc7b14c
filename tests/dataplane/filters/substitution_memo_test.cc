// The per-worker memo of which substitution rules matched a resource (keys, bitmaps, LRU order,
// bounds) and the per-worker cache of rule sets compiled for subsets of a rule set.

#include "filters/substitution/memo.h"

#include <gtest/gtest.h>

#include <string>

#include "filters/substitution/rule_set.h"
#include "filters/substitution/stream.h"
#include "filters/substitution/subset_cache.h"

namespace tidegate::dataplane::filters {
namespace {

TEST(SubstitutionMemo, KeyIsVersionResourceAndValidator) {
  SubstitutionMemo memo(8);
  EXPECT_FALSE(memo.find(1, "a.com/x", "E:\"1\""));
  EXPECT_TRUE(memo.remember(1, "a.com/x", "E:\"1\"", 0));
  EXPECT_EQ(memo.find(1, "a.com/x", "E:\"1\""), RuleBits{0});
  EXPECT_FALSE(memo.find(2, "a.com/x", "E:\"1\"")) << "another rule set version";
  EXPECT_FALSE(memo.find(1, "a.com/y", "E:\"1\"")) << "another URL";
  EXPECT_FALSE(memo.find(1, "b.com/x", "E:\"1\"")) << "another host";
  EXPECT_FALSE(memo.find(1, "a.com/x", "E:\"2\"")) << "the resource changed";
  EXPECT_FALSE(memo.find(1, "a.com/x\nE:\"1\"", "")) << "no validator, no hit";
  // The separator keeps resource and validator apart.
  EXPECT_TRUE(memo.remember(1, "a.com/p", "E:q", 0));
  EXPECT_FALSE(memo.find(1, "a.com/pE", ":q"));
  EXPECT_EQ(memo.size(), 2u);
}

TEST(SubstitutionMemo, HoldsTheBitmapOfTheRulesThatMatched) {
  SubstitutionMemo memo(8);
  const RuleBits rule0_and_63 = RuleBits{1} | RuleBits{1} << 63;
  EXPECT_TRUE(memo.remember(1, "a.com/x", "E:1", rule0_and_63));
  EXPECT_TRUE(memo.remember(1, "a.com/y", "E:1", 0b100));
  EXPECT_EQ(memo.find(1, "a.com/x", "E:1"), rule0_and_63);
  EXPECT_EQ(memo.find(1, "a.com/y", "E:1"), RuleBits{0b100});
  // A later complete scan of the same key replaces the bitmap, without a second entry.
  EXPECT_TRUE(memo.remember(1, "a.com/x", "E:1", 0b10));
  EXPECT_EQ(memo.find(1, "a.com/x", "E:1"), RuleBits{0b10});
  EXPECT_EQ(memo.size(), 2u);
  // Another validator is another key, whatever the first one held.
  EXPECT_FALSE(memo.find(1, "a.com/x", "E:2"));
}

TEST(SubstitutionMemo, NoValidatorOrLongKeyIsNeverRemembered) {
  SubstitutionMemo memo(8, 64);
  EXPECT_FALSE(memo.remember(1, "a.com/x", "", 0));
  EXPECT_FALSE(memo.remember(1, std::string(100, 'u'), "E:1", 0));
  EXPECT_EQ(memo.size(), 0u);
  SubstitutionMemo none(0);
  EXPECT_FALSE(none.remember(1, "a.com/x", "E:1", 0));
  EXPECT_FALSE(none.find(1, "a.com/x", "E:1"));
}

TEST(SubstitutionMemo, EvictsLeastRecentlyUsed) {
  SubstitutionMemo memo(3);
  memo.remember(1, "/a", "E:1", 1);
  memo.remember(1, "/b", "E:1", 2);
  memo.remember(1, "/c", "E:1", 3);
  EXPECT_TRUE(memo.find(1, "/a", "E:1"));  // /a is now the most recent; /b the least
  memo.remember(1, "/d", "E:1", 4);
  EXPECT_EQ(memo.size(), 3u);
  EXPECT_EQ(memo.evictions(), 1u);
  EXPECT_FALSE(memo.find(1, "/b", "E:1"));
  EXPECT_EQ(memo.find(1, "/a", "E:1"), RuleBits{1});
  EXPECT_EQ(memo.find(1, "/c", "E:1"), RuleBits{3});
  EXPECT_EQ(memo.find(1, "/d", "E:1"), RuleBits{4});
  // Remembering a known key refreshes it instead of adding a second entry.
  memo.remember(1, "/a", "E:1", 5);  // order now: a, d, c
  memo.remember(1, "/e", "E:1", 6);  // evicts c
  EXPECT_EQ(memo.size(), 3u);
  EXPECT_FALSE(memo.find(1, "/c", "E:1"));
  EXPECT_EQ(memo.find(1, "/a", "E:1"), RuleBits{5});
}

TEST(SubstitutionMemo, ForgetRemovesOneKey) {
  SubstitutionMemo memo(4);
  memo.remember(7, "/a", "E:1", 0);
  memo.remember(7, "/b", "E:1", 0);
  memo.forget(7, "/a", "E:1");
  memo.forget(7, "/zzz", "E:1");  // unknown: nothing happens
  EXPECT_FALSE(memo.find(7, "/a", "E:1"));
  EXPECT_TRUE(memo.find(7, "/b", "E:1"));
  EXPECT_EQ(memo.size(), 1u);
}

TEST(SubstitutionMemo, StaysBoundedUnderChurn) {
  SubstitutionMemo memo(100);
  for (int i = 0; i < 10000; ++i) {
    memo.remember(1, "/r" + std::to_string(i), "E:x", static_cast<RuleBits>(i));
  }
  EXPECT_EQ(memo.size(), 100u);
  EXPECT_EQ(memo.evictions(), 9900u);
  EXPECT_EQ(memo.find(1, "/r9999", "E:x"), RuleBits{9999});
  EXPECT_FALSE(memo.find(1, "/r9899", "E:x"));
  EXPECT_EQ(memo.find(1, "/r9900", "E:x"), RuleBits{9900});
}

// ---- RuleSet::subset and the per-worker cache ----

std::shared_ptr<const RuleSet> three_rules() {
  CompileResult r = RuleSet::compile({{"aa", "1", ""}, {"bb", "2", ""}, {"c+", "3", ""}});
  EXPECT_TRUE(r.errors.empty());
  return r.rules;
}

std::string run(const std::shared_ptr<const RuleSet>& set, std::string_view body,
                SubstitutionStreamStats* stats = nullptr) {
  std::string out;
  SubstitutionStream s(set, &out);
  s.feed(body);
  s.end();
  if (stats != nullptr) *stats = s.stats();
  return out;
}

TEST(RuleSubset, KeepsOrderReplacementsAndOriginalNumbering) {
  auto all = three_rules();
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(all->all_rules(), RuleBits{0b111});
  auto sub = all->subset(0b101);
  ASSERT_NE(sub, nullptr);
  ASSERT_EQ(sub->size(), 2u);
  EXPECT_EQ(sub->origin(0), 0u);
  EXPECT_EQ(sub->origin(1), 2u);
  EXPECT_EQ(sub->all_rules(), RuleBits{0b101});
  EXPECT_EQ(sub->rule(1).source_index, 2u) << "the index in the annotation's list is kept";
  SubstitutionStreamStats stats;
  EXPECT_EQ(run(sub, "aa bb ccc"), "1 bb 3");
  run(sub, "xx ccc", &stats);
  EXPECT_EQ(stats.rules_matched, RuleBits{0b100}) << "rule 1 of the subset is rule 2 of the set";
  // A subset of a subset still speaks the root's numbering.
  auto only_c = sub->subset(0b100);
  ASSERT_NE(only_c, nullptr);
  ASSERT_EQ(only_c->size(), 1u);
  EXPECT_EQ(only_c->origin(0), 2u);
  EXPECT_EQ(run(only_c, "aa c"), "aa 3");
  EXPECT_EQ(all->subset(0), nullptr);
  EXPECT_EQ(all->subset(RuleBits{1} << 40), nullptr) << "bits beyond the set select nothing";
}

TEST(RuleSubset, StatsNameTheRulesThatWon) {
  auto all = three_rules();
  SubstitutionStreamStats stats;
  run(all, "xx bb xx cc", &stats);
  EXPECT_EQ(stats.rules_matched, RuleBits{0b110});
  run(all, "nothing", &stats);
  EXPECT_EQ(stats.rules_matched, RuleBits{0});
}

TEST(RuleSubsetCache, CompilesEachSubsetOnce) {
  auto all = three_rules();
  RuleSubsetCache cache(4);
  EXPECT_EQ(cache.get(all, 0b111), all) << "all rules: the set itself";
  EXPECT_EQ(cache.get(all, 0), nullptr) << "no rule: nothing to run";
  EXPECT_EQ(cache.get(all, 0b1000 | 0b111), all) << "bits beyond the set are ignored";
  EXPECT_EQ(cache.compiles(), 0u);
  auto a = cache.get(all, 0b001);
  auto b = cache.get(all, 0b001);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a->size(), 1u);
  EXPECT_EQ(cache.compiles(), 1u);
  EXPECT_EQ(cache.size(), 1u);
  // The same bitmap of another rule set (even with equal rules) is another entry.
  auto other = three_rules();
  auto c = cache.get(other, 0b001);
  EXPECT_NE(c, a);
  EXPECT_EQ(cache.compiles(), 2u);
  EXPECT_EQ(run(c, "aa bb"), "1 bb");
}

TEST(RuleSubsetCache, EvictsLeastRecentlyUsedAndStaysBounded) {
  CompileResult r = RuleSet::compile({{"a", "1", ""},
                                      {"b", "2", ""},
                                      {"c", "3", ""},
                                      {"d", "4", ""},
                                      {"e", "5", ""},
                                      {"f", "6", ""}});
  ASSERT_NE(r.rules, nullptr);
  RuleSubsetCache cache(3);
  auto s1 = cache.get(r.rules, 0b000001);
  cache.get(r.rules, 0b000010);
  cache.get(r.rules, 0b000100);
  EXPECT_EQ(cache.get(r.rules, 0b000001), s1);  // the least recently used is now 0b10
  EXPECT_EQ(cache.compiles(), 3u);
  cache.get(r.rules, 0b001000);  // evicts 0b10
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_EQ(cache.get(r.rules, 0b000001), s1) << "kept";
  EXPECT_EQ(cache.compiles(), 4u);
  cache.get(r.rules, 0b000010);  // compiled again
  EXPECT_EQ(cache.compiles(), 5u);
  for (RuleBits bits = 1; bits < 63; ++bits) cache.get(r.rules, bits);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_LE(cache.evictions(), cache.compiles());
}

TEST(RuleSubsetCache, EntriesOfADeadRuleSetGoFirstAndNeverMatchItsSuccessor) {
  RuleSubsetCache cache(2);
  auto keep = three_rules();
  auto kept = cache.get(keep, 0b011);
  {
    auto gone = three_rules();
    cache.get(gone, 0b011);
  }
  // A new rule set (perhaps at the dead one's address) never gets the dead one's subset.
  auto fresh = three_rules();
  auto f = cache.get(fresh, 0b011);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(cache.compiles(), 3u);
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_EQ(cache.get(keep, 0b011), kept) << "the dead set's entry was replaced, not this one";
  EXPECT_EQ(cache.compiles(), 3u);
}

TEST(RuleSubsetCache, ZeroCapacityCompilesEveryTime) {
  auto all = three_rules();
  RuleSubsetCache cache(0);
  auto a = cache.get(all, 0b010);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(run(a, "aa bb"), "aa 2");
  cache.get(all, 0b010);
  EXPECT_EQ(cache.compiles(), 2u);
  EXPECT_EQ(cache.size(), 0u);
}

}  // namespace
}  // namespace tidegate::dataplane::filters
