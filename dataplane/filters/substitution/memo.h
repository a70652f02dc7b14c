#pragma once
// The memo of resources that no substitution rule matched (issue #5), one per worker.
//
// Key: the rule set's version (CompiledSubstitution::rules_version), the resource (host + URL)
// and the upstream's validator (its ETag, or Last-Modified when there is no ETag). An entry says
// "the last complete scan of this exact representation with these rules replaced nothing and
// gave nothing up at the buffer limit", so the next response for the same key can pass through
// unscanned.
//
// Limitation: the issue asks for a bitmap of the rules that never matched, so that only those
// are skipped. The engine runs all rules as one combined search (RuleSet::find), and skipping
// some rules would need a RuleSet compiled for each subset; so the memo covers the case that
// pays off most — no rule matched at all (static assets, unchanged pages) — and a resource with
// any match is scanned in full every time.
//
// Worker-thread only: no lock. Bounded: at most `capacity` entries of at most `max_key_bytes`
// each (longer keys are never remembered), least recently used evicted first.

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tidegate::dataplane::filters {

inline constexpr size_t kDefaultMemoEntries = 4096;
inline constexpr size_t kMaxMemoKeyBytes = 2048;

class SubstitutionMemo {
 public:
  explicit SubstitutionMemo(size_t capacity = kDefaultMemoEntries,
                            size_t max_key_bytes = kMaxMemoKeyBytes);

  // Whether the key is remembered; a hit becomes the most recently used entry. An empty
  // validator never hits (a resource without ETag or Last-Modified can change unseen).
  bool contains(uint64_t rules_version, std::string_view resource, std::string_view validator);
  // Remembers the key (most recently used); evicts the least recently used entry when full.
  // Returns false when the key is not remembered (empty validator, key too long, capacity 0).
  bool remember(uint64_t rules_version, std::string_view resource, std::string_view validator);
  // Forgets the key (a later scan of it found a match).
  void forget(uint64_t rules_version, std::string_view resource, std::string_view validator);

  size_t size() const { return index_.size(); }
  size_t capacity() const { return capacity_; }
  uint64_t evictions() const { return evictions_; }

 private:
  // Builds the key in scratch_ (reused, so a lookup allocates nothing once it has grown);
  // false when the key cannot be remembered.
  bool make_key(uint64_t rules_version, std::string_view resource, std::string_view validator);

  size_t capacity_;
  size_t max_key_bytes_;
  std::string scratch_;
  // Most recently used first. The index's keys view the strings in the list, whose nodes never
  // move.
  std::list<std::string> lru_;
  std::unordered_map<std::string_view, std::list<std::string>::iterator> index_;
  uint64_t evictions_ = 0;
};

}  // namespace tidegate::dataplane::filters
