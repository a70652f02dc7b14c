#include "ratelimit/connection_limiter.h"

#include <bit>

namespace tidegate::dataplane::ratelimit {
namespace {

constexpr uint64_t kCountMask = 0xffffffffULL;
constexpr int kMaxAttempts = 8;

uint64_t fingerprint_of(uint64_t h) {
  uint64_t f = h >> 32;
  return f == 0 ? 1 : f;
}

}  // namespace

ConnectionLimiter::Lease& ConnectionLimiter::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    release();
    limiter_ = std::move(other.limiter_);
    slot_ = other.slot_;
    other.limiter_.reset();
    other.slot_ = kUntracked;
  }
  return *this;
}

void ConnectionLimiter::Lease::release() {
  if (limiter_ && slot_ != kUntracked) limiter_->release_slot(slot_);
  limiter_.reset();
  slot_ = kUntracked;
}

std::optional<std::string> ConnectionLimiter::validate(long limit, size_t capacity) {
  if (limit < 1 || limit > 0x7fffffffL) return "connection limit must be at least 1";
  if (capacity == 0 || capacity > kMaxCapacity) {
    return "capacity must be between 1 and " + std::to_string(kMaxCapacity);
  }
  return std::nullopt;
}

std::shared_ptr<ConnectionLimiter> ConnectionLimiter::create(uint32_t limit, size_t capacity) {
  return std::make_shared<ConnectionLimiter>(limit, capacity);
}

ConnectionLimiter::ConnectionLimiter(uint32_t limit, size_t capacity)
    : limit_(limit == 0 ? 1 : limit),
      sets_(std::bit_ceil((capacity + kWays - 1) / kWays)),
      table_(std::make_unique<Set[]>(sets_)) {
  for (size_t s = 0; s < sets_; ++s) {
    for (auto& w : table_[s].words) w.store(0, std::memory_order_relaxed);
  }
}

std::optional<ConnectionLimiter::Lease> ConnectionLimiter::acquire(const IpAddress& key) {
  const uint64_t h = key.hash();
  const size_t set_index = h & (sets_ - 1);
  Set& set = table_[set_index];
  const uint64_t fp = fingerprint_of(h);
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    int free_way = -1;
    uint64_t free_word = 0;
    int mine = -1;
    uint64_t mine_word = 0;
    for (int w = 0; w < static_cast<int>(kWays); ++w) {
      uint64_t word = set.words[w].load(std::memory_order_relaxed);
      if ((word & kCountMask) == 0) {
        if (free_way < 0) {
          free_way = w;
          free_word = word;
        }
      } else if ((word >> 32) == fp) {
        mine = w;
        mine_word = word;
        break;
      }
    }
    if (mine >= 0) {
      if ((mine_word & kCountMask) >= limit_) return std::nullopt;
      if (set.words[mine].compare_exchange_weak(mine_word, mine_word + 1,
                                                std::memory_order_relaxed)) {
        return Lease(shared_from_this(), set_index * kWays + static_cast<size_t>(mine));
      }
      continue;
    }
    if (free_way < 0) return Lease(shared_from_this(), Lease::kUntracked);
    // Every worker claims the first free word of the set, so two racing first connections of
    // one key meet on the same word and the loser counts into it on its next attempt.
    if (set.words[free_way].compare_exchange_weak(free_word, (fp << 32) | 1,
                                                  std::memory_order_relaxed)) {
      return Lease(shared_from_this(), set_index * kWays + static_cast<size_t>(free_way));
    }
  }
  return Lease(shared_from_this(), Lease::kUntracked);
}

void ConnectionLimiter::release_slot(size_t slot) {
  auto& word = table_[slot / kWays].words[slot % kWays];
  uint64_t w = word.load(std::memory_order_relaxed);
  // While a lease exists its word's count is at least 1 and keeps its fingerprint.
  while ((w & kCountMask) != 0 &&
         !word.compare_exchange_weak(w, w - 1, std::memory_order_relaxed)) {
  }
}

uint32_t ConnectionLimiter::count(const IpAddress& key) const {
  const uint64_t h = key.hash();
  const Set& set = table_[h & (sets_ - 1)];
  const uint64_t fp = fingerprint_of(h);
  uint32_t n = 0;
  for (const auto& w : set.words) {
    uint64_t word = w.load(std::memory_order_relaxed);
    if ((word >> 32) == fp) n += static_cast<uint32_t>(word & kCountMask);
  }
  return n;
}

}  // namespace tidegate::dataplane::ratelimit
