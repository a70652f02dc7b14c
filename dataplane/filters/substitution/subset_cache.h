#pragma once
// Rule sets compiled for subsets of a rule set (RuleSet::subset), one cache per worker: the memo
// (memo.h) says which rules matched a resource last time, and the next response for it runs a
// rule set of only those. Compiling one costs an RE2 compilation of the subset's joined pattern
// (tens of microseconds per rule), so each distinct subset is compiled once and kept while it
// is used.
//
// Key: the parent rule set *object* (its identity: a weak_ptr compared by owner, so neither a
// hash collision of rules_version nor an address reused after the parent died can ever hand
// one route's rules to another) and the bitmap. Equal rule lists share one RuleSet across
// snapshots (runtime/snapshot.h), so entries survive configuration changes that keep the rules.
//
// Worker-thread only: no lock. Bounded: at most `capacity` compiled subsets, each no larger than
// the rule set it comes from (it shares that set's per-rule RE2 objects and prefix closures and
// compiles a smaller joined pattern); least recently used evicted first, entries whose parent is
// gone first of all.
// A hit allocates nothing.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "filters/substitution/rule_set.h"

namespace tidegate::dataplane::filters {

inline constexpr size_t kDefaultSubsetEntries = 64;

class RuleSubsetCache {
 public:
  explicit RuleSubsetCache(size_t capacity = kDefaultSubsetEntries);

  // The rules of `set` whose bits are in `rules` (RuleSet::origin_bit numbering): `set` itself
  // when that is all of them, null when it is none, else the cached or newly compiled subset.
  // When a subset cannot be compiled (never seen: a subset of rules that compiled together),
  // `set` is returned: it gives the same output, only slower.
  std::shared_ptr<const RuleSet> get(const std::shared_ptr<const RuleSet>& set, RuleBits rules);

  size_t size() const { return entries_.size(); }
  size_t capacity() const { return capacity_; }
  uint64_t compiles() const { return compiles_; }
  uint64_t evictions() const { return evictions_; }

 private:
  struct Entry {
    const RuleSet* parent_ptr = nullptr;  // compared first (cheap); the weak_ptr decides
    std::weak_ptr<const RuleSet> parent;
    RuleBits rules = 0;
    std::shared_ptr<const RuleSet> subset;
    uint64_t last_used = 0;
  };

  size_t capacity_;
  // A small vector searched linearly: with tens of entries that beats a hash map, and a hit
  // touches no allocator.
  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
  uint64_t compiles_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace tidegate::dataplane::filters
