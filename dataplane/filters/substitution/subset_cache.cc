#include "filters/substitution/subset_cache.h"

#include <utility>

namespace tidegate::dataplane::filters {
namespace {

// Whether `w` and `s` share one control block: the same object, alive or not. A control block
// stays allocated while a weak_ptr refers to it, so its identity is never reused meanwhile.
bool same_owner(const std::weak_ptr<const RuleSet>& w, const std::shared_ptr<const RuleSet>& s) {
  return !w.owner_before(s) && !s.owner_before(w);
}

}  // namespace

RuleSubsetCache::RuleSubsetCache(size_t capacity) : capacity_(capacity) {
  entries_.reserve(capacity_);
}

std::shared_ptr<const RuleSet> RuleSubsetCache::get(const std::shared_ptr<const RuleSet>& set,
                                                    RuleBits rules) {
  if (!set) return nullptr;
  rules &= set->all_rules();
  if (rules == set->all_rules()) return set;
  if (rules == 0) return nullptr;
  ++clock_;
  for (Entry& e : entries_) {
    if (e.parent_ptr == set.get() && e.rules == rules && same_owner(e.parent, set)) {
      e.last_used = clock_;
      return e.subset;
    }
  }
  std::shared_ptr<const RuleSet> subset = set->subset(rules);
  ++compiles_;
  if (!subset) return set;  // not seen in practice; the full set is always right
  if (capacity_ == 0) return subset;
  Entry fresh{set.get(), set, rules, subset, clock_};
  if (entries_.size() < capacity_) {
    entries_.push_back(std::move(fresh));
    return subset;
  }
  // Full: replace an entry whose parent is gone, else the least recently used.
  Entry* victim = &entries_.front();
  for (Entry& e : entries_) {
    if (e.parent.expired()) {
      victim = &e;
      break;
    }
    if (e.last_used < victim->last_used) victim = &e;
  }
  *victim = std::move(fresh);
  ++evictions_;
  return subset;
}

}  // namespace tidegate::dataplane::filters
