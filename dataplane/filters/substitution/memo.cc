#include "filters/substitution/memo.h"

#include <cstring>

namespace tidegate::dataplane::filters {

SubstitutionMemo::SubstitutionMemo(size_t capacity, size_t max_key_bytes)
    : capacity_(capacity), max_key_bytes_(max_key_bytes) {
  index_.reserve(capacity_ < 65536 ? capacity_ : 65536);
}

bool SubstitutionMemo::make_key(uint64_t rules_version, std::string_view resource,
                                std::string_view validator) {
  if (validator.empty() || capacity_ == 0) return false;
  // version (8 bytes) + resource + '\n' + validator: a request target has no line feed, so the
  // split between resource and validator is unambiguous.
  const size_t n = sizeof rules_version + resource.size() + 1 + validator.size();
  if (n > max_key_bytes_) return false;
  scratch_.resize(n);
  char* p = scratch_.data();
  std::memcpy(p, &rules_version, sizeof rules_version);
  p += sizeof rules_version;
  std::memcpy(p, resource.data(), resource.size());
  p += resource.size();
  *p++ = '\n';
  std::memcpy(p, validator.data(), validator.size());
  return true;
}

std::optional<RuleBits> SubstitutionMemo::find(uint64_t rules_version, std::string_view resource,
                                               std::string_view validator) {
  if (index_.empty() || !make_key(rules_version, resource, validator)) return std::nullopt;
  auto it = index_.find(std::string_view(scratch_));
  if (it == index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->matched;
}

bool SubstitutionMemo::remember(uint64_t rules_version, std::string_view resource,
                                std::string_view validator, RuleBits matched) {
  if (!make_key(rules_version, resource, validator)) return false;
  auto it = index_.find(std::string_view(scratch_));
  if (it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    it->second->matched = matched;
    return true;
  }
  if (index_.size() >= capacity_) {
    index_.erase(std::string_view(lru_.back().key));
    lru_.pop_back();
    ++evictions_;
  }
  lru_.push_front(Entry{scratch_, matched});
  index_.emplace(std::string_view(lru_.front().key), lru_.begin());
  return true;
}

void SubstitutionMemo::forget(uint64_t rules_version, std::string_view resource,
                              std::string_view validator) {
  if (!make_key(rules_version, resource, validator)) return;
  auto it = index_.find(std::string_view(scratch_));
  if (it == index_.end()) return;
  auto node = it->second;
  index_.erase(it);
  lru_.erase(node);
}

}  // namespace tidegate::dataplane::filters
