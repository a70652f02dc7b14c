// The per-worker memo of resources that matched no substitution rule: keys, LRU order, bounds.

#include "filters/substitution/memo.h"

#include <gtest/gtest.h>

#include <string>

namespace tidegate::dataplane::filters {
namespace {

TEST(SubstitutionMemo, KeyIsVersionResourceAndValidator) {
  SubstitutionMemo memo(8);
  EXPECT_FALSE(memo.contains(1, "a.com/x", "E:\"1\""));
  EXPECT_TRUE(memo.remember(1, "a.com/x", "E:\"1\""));
  EXPECT_TRUE(memo.contains(1, "a.com/x", "E:\"1\""));
  EXPECT_FALSE(memo.contains(2, "a.com/x", "E:\"1\"")) << "another rule set version";
  EXPECT_FALSE(memo.contains(1, "a.com/y", "E:\"1\"")) << "another URL";
  EXPECT_FALSE(memo.contains(1, "b.com/x", "E:\"1\"")) << "another host";
  EXPECT_FALSE(memo.contains(1, "a.com/x", "E:\"2\"")) << "the resource changed";
  EXPECT_FALSE(memo.contains(1, "a.com/x\nE:\"1\"", "")) << "no validator, no hit";
  // The separator keeps resource and validator apart.
  EXPECT_TRUE(memo.remember(1, "a.com/p", "E:q"));
  EXPECT_FALSE(memo.contains(1, "a.com/pE", ":q"));
  EXPECT_EQ(memo.size(), 2u);
}

TEST(SubstitutionMemo, NoValidatorOrLongKeyIsNeverRemembered) {
  SubstitutionMemo memo(8, 64);
  EXPECT_FALSE(memo.remember(1, "a.com/x", ""));
  EXPECT_FALSE(memo.remember(1, std::string(100, 'u'), "E:1"));
  EXPECT_EQ(memo.size(), 0u);
  SubstitutionMemo none(0);
  EXPECT_FALSE(none.remember(1, "a.com/x", "E:1"));
  EXPECT_FALSE(none.contains(1, "a.com/x", "E:1"));
}

TEST(SubstitutionMemo, EvictsLeastRecentlyUsed) {
  SubstitutionMemo memo(3);
  memo.remember(1, "/a", "E:1");
  memo.remember(1, "/b", "E:1");
  memo.remember(1, "/c", "E:1");
  EXPECT_TRUE(memo.contains(1, "/a", "E:1"));  // /a is now the most recent; /b the least
  memo.remember(1, "/d", "E:1");
  EXPECT_EQ(memo.size(), 3u);
  EXPECT_EQ(memo.evictions(), 1u);
  EXPECT_FALSE(memo.contains(1, "/b", "E:1"));
  EXPECT_TRUE(memo.contains(1, "/a", "E:1"));
  EXPECT_TRUE(memo.contains(1, "/c", "E:1"));
  EXPECT_TRUE(memo.contains(1, "/d", "E:1"));
  // Remembering a known key refreshes it instead of adding a second entry.
  memo.remember(1, "/a", "E:1");  // order now: a, d, c
  memo.remember(1, "/e", "E:1");  // evicts c
  EXPECT_EQ(memo.size(), 3u);
  EXPECT_FALSE(memo.contains(1, "/c", "E:1"));
  EXPECT_TRUE(memo.contains(1, "/a", "E:1"));
}

TEST(SubstitutionMemo, ForgetRemovesOneKey) {
  SubstitutionMemo memo(4);
  memo.remember(7, "/a", "E:1");
  memo.remember(7, "/b", "E:1");
  memo.forget(7, "/a", "E:1");
  memo.forget(7, "/zzz", "E:1");  // unknown: nothing happens
  EXPECT_FALSE(memo.contains(7, "/a", "E:1"));
  EXPECT_TRUE(memo.contains(7, "/b", "E:1"));
  EXPECT_EQ(memo.size(), 1u);
}

TEST(SubstitutionMemo, StaysBoundedUnderChurn) {
  SubstitutionMemo memo(100);
  for (int i = 0; i < 10000; ++i) memo.remember(1, "/r" + std::to_string(i), "E:x");
  EXPECT_EQ(memo.size(), 100u);
  EXPECT_EQ(memo.evictions(), 9900u);
  EXPECT_TRUE(memo.contains(1, "/r9999", "E:x"));
  EXPECT_FALSE(memo.contains(1, "/r9899", "E:x"));
  EXPECT_TRUE(memo.contains(1, "/r9900", "E:x"));
}

}  // namespace
}  // namespace tidegate::dataplane::filters
