#pragma once
// The memo of which substitution rules matched a resource (issue #5), one per worker.
//
// Key: the rule set's version (CompiledSubstitution::rules_version), the resource (host + URL)
// and the upstream's validator (its ETag, or Last-Modified when there is no ETag). Value: the
// rules that produced at least one replacement in the last complete scan of that exact
// representation (RuleBits, bit i = rule i of the rule set), a scan that gave nothing up at the
// buffer limit. The next response for the same key runs only those rules (RuleSet::subset(),
// cached per worker by RuleSubsetCache), or passes through unscanned when the bitmap is empty.
// Leaving out rules that never won a match is exact — it changes no winner and so no byte of
// the output (docs/substitutions.md, "The memo", has the argument; the property test in
// tests/dataplane/filters/substitution_test.cc checks it).
//
// Worker-thread only: no lock. Bounded: at most `capacity` entries of at most `max_key_bytes`
// each plus one bitmap (longer keys are never remembered), least recently used evicted first.

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "filters/substitution/rule_set.h"

namespace tidegate::dataplane::filters {

inline constexpr size_t kDefaultMemoEntries = 4096;
inline constexpr size_t kMaxMemoKeyBytes = 2048;

class SubstitutionMemo {
 public:
  explicit SubstitutionMemo(size_t capacity = kDefaultMemoEntries,
                            size_t max_key_bytes = kMaxMemoKeyBytes);

  // The rules that matched the key's last complete scan, or nullopt when the key is not
  // remembered; a hit becomes the most recently used entry. An empty validator never hits (a
  // resource without ETag or Last-Modified can change unseen).
  std::optional<RuleBits> find(uint64_t rules_version, std::string_view resource,
                               std::string_view validator);
  // Remembers `matched` for the key (most recently used), replacing what it held; evicts the
  // least recently used entry when full. Returns false when the key is not remembered (empty
  // validator, key too long, capacity 0).
  bool remember(uint64_t rules_version, std::string_view resource, std::string_view validator,
                RuleBits matched);
  // Forgets the key.
  void forget(uint64_t rules_version, std::string_view resource, std::string_view validator);

  size_t size() const { return index_.size(); }
  size_t capacity() const { return capacity_; }
  uint64_t evictions() const { return evictions_; }

 private:
  // Builds the key in scratch_ (reused, so a lookup allocates nothing once it has grown);
  // false when the key cannot be remembered.
  bool make_key(uint64_t rules_version, std::string_view resource, std::string_view validator);

  struct Entry {
    std::string key;
    RuleBits matched = 0;
  };

  size_t capacity_;
  size_t max_key_bytes_;
  std::string scratch_;
  // Most recently used first. The index's keys view the strings in the list, whose nodes never
  // move.
  std::list<Entry> lru_;
  std::unordered_map<std::string_view, std::list<Entry>::iterator> index_;
  uint64_t evictions_ = 0;
};

}  // namespace tidegate::dataplane::filters
