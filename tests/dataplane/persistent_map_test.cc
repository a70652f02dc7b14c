// runtime::PersistentMap: the table of a snapshot's upstreams and endpoints. An edit through a
// Transient must give the map a std::unordered_map would hold after the same edits, leave every
// earlier version as it was (a worker may still be reading it), and copy only the leaves it
// touched.

#include "runtime/persistent_map.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tidegate::dataplane::runtime {
namespace {

// Keys "<hex hash>/<anything>" hash to the hex number: a test places keys in a chosen branch and
// leaf, or gives two keys the same hash.
struct PlacedHash {
  size_t operator()(std::string_view key) const {
    return std::stoull(std::string(key.substr(0, key.find('/'))), nullptr, 16);
  }
};

using Map = PersistentMap<std::string, int, PlacedHash>;

std::string key_at(uint64_t hash, const std::string& tail = "") {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%llx/", static_cast<unsigned long long>(hash));
  return buf + tail;
}

std::map<std::string, int> contents(const Map& m) {
  std::map<std::string, int> out;
  for (const auto& [k, v] : m) EXPECT_TRUE(out.emplace(k, v).second) << "visited twice: " << k;
  EXPECT_EQ(out.size(), m.size());
  return out;
}

Map with(const Map& from, const std::vector<std::pair<std::string, int>>& upserts,
         const std::vector<std::string>& removes = {}) {
  Map::Transient t(from);
  for (const auto& k : removes) t.erase(k);
  for (const auto& [k, v] : upserts) t.insert_or_assign(k, v);
  return std::move(t).persistent();
}

TEST(PersistentMapTest, EmptyMap) {
  Map m;
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.begin(), m.end());
  EXPECT_EQ(m.get(key_at(1)), nullptr);
  EXPECT_EQ(m.find(key_at(1)), m.end());
  EXPECT_THROW(m.at(key_at(1)), std::out_of_range);
  EXPECT_EQ(m, Map());
}

TEST(PersistentMapTest, UpsertReplaceAndRemove) {
  Map::Transient t;
  EXPECT_EQ(t.insert_or_assign(key_at(5, "a"), 1), std::nullopt);
  EXPECT_EQ(t.insert_or_assign(key_at(7, "b"), 2), std::nullopt);
  EXPECT_EQ(t.insert_or_assign(key_at(5, "a"), 3), 1);  // replaced: the old value comes back
  EXPECT_EQ(t.size(), 2u);
  Map m = std::move(t).persistent();
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.at(key_at(5, "a")), 3);
  EXPECT_EQ(*m.get(std::string_view(key_at(7, "b"))), 2);  // looked up by a string_view
  ASSERT_NE(m.find(key_at(7, "b")), m.end());
  EXPECT_EQ(m.find(key_at(7, "b"))->second, 2);
  EXPECT_EQ(m.find(key_at(7, "c")), m.end());  // same hash, other key

  Map::Transient u(m);
  EXPECT_EQ(u.erase(key_at(5, "a")), 3);
  EXPECT_EQ(u.erase(key_at(5, "a")), std::nullopt);  // already gone
  EXPECT_EQ(u.erase(key_at(9, "unknown")), std::nullopt);
  Map n = std::move(u).persistent();
  EXPECT_EQ(contents(n), (std::map<std::string, int>{{key_at(7, "b"), 2}}));
  EXPECT_EQ(contents(m), (std::map<std::string, int>{{key_at(5, "a"), 3}, {key_at(7, "b"), 2}}));

  // Removing the last key gives the empty map.
  Map::Transient last(n);
  last.erase(key_at(7, "b"));
  Map none = std::move(last).persistent();
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.begin(), none.end());
  EXPECT_EQ(none, Map());
}

TEST(PersistentMapTest, RemoveThenUpsertInOneTransient) {
  Map m = with(Map(), {{key_at(1, "x"), 1}, {key_at(2, "y"), 2}});
  Map::Transient t(m);
  EXPECT_EQ(t.erase(key_at(1, "x")), 1);
  EXPECT_EQ(t.get(key_at(1, "x")), nullptr);
  EXPECT_EQ(t.insert_or_assign(key_at(1, "x"), 10), std::nullopt);  // was removed just before
  Map n = std::move(t).persistent();
  EXPECT_EQ(contents(n), (std::map<std::string, int>{{key_at(1, "x"), 10}, {key_at(2, "y"), 2}}));
  EXPECT_EQ(m.at(key_at(1, "x")), 1);
}

TEST(PersistentMapTest, UnknownRemoveCopiesNothing) {
  std::vector<std::pair<std::string, int>> many;
  for (uint64_t i = 0; i < 500; ++i) many.emplace_back(key_at(i * 0x9e3779b97f4a7c15ULL), 1);
  Map m = with(Map(), many);
  Map::Transient t(m);
  EXPECT_EQ(t.erase(key_at(3, "nope")), std::nullopt);
  Map n = std::move(t).persistent();
  EXPECT_EQ(n, m);
  EXPECT_EQ(n.shared_leaves_with(m), m.shared_leaves_with(m));
}

TEST(PersistentMapTest, KeysWithTheSameHash) {
  Map m = with(Map(), {{key_at(42, "a"), 1}, {key_at(42, "b"), 2}, {key_at(42, "c"), 3}});
  EXPECT_EQ(m.size(), 3u);
  EXPECT_EQ(m.at(key_at(42, "b")), 2);
  Map n = with(m, {{key_at(42, "c"), 30}}, {key_at(42, "a")});
  EXPECT_EQ(contents(n), (std::map<std::string, int>{{key_at(42, "b"), 2}, {key_at(42, "c"), 30}}));
  EXPECT_EQ(m.at(key_at(42, "a")), 1);
  EXPECT_EQ(m.at(key_at(42, "c")), 3);
}

TEST(PersistentMapTest, BranchAndLeafBoundaries) {
  // The top 6 bits choose the branch, the next 6 the leaf; the rest orders a leaf.
  const std::vector<uint64_t> hashes = {
      0,
      1,
      (1ULL << 52) - 1,       // branch 0, leaf 0, last
      1ULL << 52,             // branch 0, leaf 1
      (1ULL << 58) - 1,       // branch 0, leaf 63
      1ULL << 58,             // branch 1, leaf 0
      0xFC00000000000000ULL,  // branch 63, leaf 0
      0xFFF0000000000000ULL,  // branch 63, leaf 63, first
      0xFFFFFFFFFFFFFFFFULL,  // branch 63, leaf 63, last
      0xFFFFFFFFFFFFFFFEULL,
  };
  std::vector<std::pair<std::string, int>> kv;
  for (size_t i = 0; i < hashes.size(); ++i)
    kv.emplace_back(key_at(hashes[i]), static_cast<int>(i));
  Map m = with(Map(), kv);
  ASSERT_EQ(m.size(), hashes.size());
  for (const auto& [k, v] : kv) EXPECT_EQ(m.at(k), v) << k;
  // Iteration visits branches and leaves in order and each leaf in hash order.
  std::vector<uint64_t> seen;
  for (const auto& [k, v] : m) seen.push_back(PlacedHash{}(k));
  std::vector<uint64_t> sorted = hashes;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(seen, sorted);
  // Emptying the first and the last leaves leaves iteration correct.
  Map n = with(m, {},
               {key_at(0), key_at(1), key_at((1ULL << 52) - 1), key_at(~0ULL), key_at(~1ULL),
                key_at(0xFFF0000000000000ULL)});
  EXPECT_EQ(n.size(), 4u);
  std::map<std::string, int> want;
  for (uint64_t h : {1ULL << 52, (1ULL << 58) - 1, 1ULL << 58, 0xFC00000000000000ULL}) {
    want[key_at(h)] = m.at(key_at(h));
  }
  EXPECT_EQ(contents(n), want);
  EXPECT_EQ(m.size(), hashes.size());
}

TEST(PersistentMapTest, AnUpdateCopiesOnlyTheLeavesItTouches) {
  std::mt19937_64 rng(1);
  std::vector<std::pair<std::string, int>> kv;
  for (int i = 0; i < 20000; ++i) kv.emplace_back(key_at(rng(), std::to_string(i)), i);
  Map m = with(Map(), kv);
  const size_t leaves = m.shared_leaves_with(m);
  EXPECT_GT(leaves, 4000u);  // 20,000 random hashes leave few of the 4,096 leaves empty
  Map n = with(m, {{kv[10].first, -1}});
  EXPECT_EQ(n.shared_leaves_with(m), leaves - 1);
  Map o =
      with(n, {{kv[11].first, -1}, {kv[12].first, -1}, {key_at(rng(), "new"), 5}}, {kv[13].first});
  EXPECT_GE(o.shared_leaves_with(n), leaves - 4);
  EXPECT_EQ(o.size(), m.size());
  // The earlier versions are what they were.
  EXPECT_EQ(m.at(kv[10].first), 10);
  EXPECT_EQ(n.at(kv[10].first), -1);
  EXPECT_EQ(n.at(kv[13].first), 13);
  EXPECT_EQ(o.get(kv[13].first), nullptr);
}

// Random edits, compared with std::unordered_map after each one; every version kept is checked
// again at the end.
TEST(PersistentMapTest, RandomEditsAgreeWithUnorderedMap) {
  std::mt19937_64 rng(2026);
  auto below = [&](uint64_t n) { return rng() % n; };
  // Few distinct hashes so that leaves hold several keys and some keys collide.
  std::vector<std::string> keys;
  for (int i = 0; i < 400; ++i) {
    const uint64_t hash = below(4) == 0 ? (below(8) << 58) | below(4) : rng();
    keys.push_back(key_at(hash, std::to_string(i)));
  }
  std::vector<std::pair<Map, std::unordered_map<std::string, int>>> versions;
  Map map;
  std::unordered_map<std::string, int> want;
  for (int step = 0; step < 1500; ++step) {
    Map::Transient t(map);
    for (uint64_t k = below(8); k > 0; --k) {
      const std::string& key = keys[below(keys.size())];
      if (below(3) == 0) {
        auto got = t.erase(key);
        auto it = want.find(key);
        ASSERT_EQ(got.has_value(), it != want.end()) << step;
        if (it != want.end()) {
          EXPECT_EQ(*got, it->second);
          want.erase(it);
        }
      } else {
        const int value = static_cast<int>(below(1000));
        auto got = t.insert_or_assign(key, value);
        auto it = want.find(key);
        ASSERT_EQ(got.has_value(), it != want.end()) << step;
        want[key] = value;
      }
      ASSERT_EQ(t.size(), want.size());
    }
    map = std::move(t).persistent();
    ASSERT_EQ(map.size(), want.size()) << step;
    auto have = contents(map);
    ASSERT_EQ(have, (std::map<std::string, int>(want.begin(), want.end()))) << step;
    for (const auto& key : keys) {
      auto it = want.find(key);
      const int* got = map.get(key);
      ASSERT_EQ(got != nullptr, it != want.end()) << step << " " << key;
      if (got != nullptr) {
        EXPECT_EQ(*got, it->second);
      }
    }
    if (step % 50 == 0) versions.emplace_back(map, want);
  }
  for (const auto& [m, w] : versions) {
    EXPECT_EQ(contents(m), (std::map<std::string, int>(w.begin(), w.end())));
  }
}

}  // namespace
}  // namespace tidegate::dataplane::runtime
