#include "ratelimit/rate_limiter.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace tidegate::dataplane::ratelimit {
namespace {

// Word layout: fingerprint (24 bits, never 0 for a used word) | arrival time (40 bits of 100 ns
// ticks, wrapping every ~30 hours; differences are taken modulo 2^40 and are always far smaller
// than half that range thanks to kMaxBurstWindow).
constexpr int kTimeBits = 40;
constexpr uint64_t kTimeMask = (uint64_t{1} << kTimeBits) - 1;
constexpr int64_t kTickNs = 100;
// Each failed compare-and-swap means another thread made progress on the same set.
constexpr int kMaxAttempts = 64;

int64_t ticks(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count() /
         kTickNs;
}

// (a - b) for 40-bit wrapping times, as a signed number.
int64_t time_diff(uint64_t a, uint64_t b) {
  uint64_t d = (a - b) & kTimeMask;
  if (d & (uint64_t{1} << (kTimeBits - 1)))
    return static_cast<int64_t>(d) - (int64_t{1} << kTimeBits);
  return static_cast<int64_t>(d);
}

uint64_t make_word(uint64_t fingerprint, uint64_t time) {
  return (fingerprint << kTimeBits) | (time & kTimeMask);
}

}  // namespace

std::optional<std::string> RateLimitConfig::validate() const {
  if (!(rps > 0) || !std::isfinite(rps)) return "rps must be greater than 0";
  if (rps > kMaxRps) return "rps must be at most " + std::to_string(static_cast<long>(kMaxRps));
  if (!(burst_multiplier >= 1) || !std::isfinite(burst_multiplier)) {
    return "burst multiplier must be at least 1";
  }
  double window = std::max(1.0, rps * burst_multiplier) / rps;
  if (window > std::chrono::duration<double>(kMaxBurstWindow).count()) {
    return "burst (rps × multiplier) refills in more than an hour";
  }
  if (capacity == 0 || capacity > kMaxCapacity) {
    return "capacity must be between 1 and " + std::to_string(kMaxCapacity);
  }
  return std::nullopt;
}

long RateDecision::retry_after_seconds() const {
  auto s = std::chrono::ceil<std::chrono::seconds>(retry_after).count();
  return std::max<long>(1, static_cast<long>(s));
}

RateLimiter::RateLimiter(const RateLimitConfig& config) : config_(config) {
  const double ticks_per_second = 1e9 / kTickNs;
  interval_ = std::max<int64_t>(1, std::llround(ticks_per_second / config.rps));
  const double burst = std::max(1.0, config.rps * config.burst_multiplier);
  tolerance_ = std::llround((burst - 1.0) * ticks_per_second / config.rps);
  sets_ = std::bit_ceil((config.capacity + kWays - 1) / kWays);
  table_ = std::make_unique<Set[]>(sets_);
  for (size_t s = 0; s < sets_; ++s) {
    for (auto& w : table_[s].words) w.store(0, std::memory_order_relaxed);
  }
}

RateDecision RateLimiter::check(const IpAddress& key, TimePoint when) {
  const uint64_t h = key.hash();
  Set& set = table_[h & (sets_ - 1)];
  uint64_t fingerprint = h >> kTimeBits;  // the top 24 bits, independent of the set index
  if (fingerprint == 0) fingerprint = 1;
  const uint64_t now = static_cast<uint64_t>(ticks(when)) & kTimeMask;
  // A stored time further ahead than any real bucket can be is an old word seen across the
  // 40-bit wrap: that bucket has long been full.
  const int64_t max_ahead = tolerance_ + interval_;

  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    int victim = -1;
    int64_t victim_ahead = std::numeric_limits<int64_t>::max();
    uint64_t victim_word = 0;
    bool found = false;
    for (int w = 0; w < static_cast<int>(kWays); ++w) {
      uint64_t word = set.words[w].load(std::memory_order_relaxed);
      if (word == 0) {
        if (victim_ahead != std::numeric_limits<int64_t>::min()) {
          victim = w;
          victim_ahead = std::numeric_limits<int64_t>::min();
          victim_word = 0;
        }
        continue;
      }
      int64_t ahead = time_diff(word & kTimeMask, now);
      if (ahead > max_ahead) ahead = std::numeric_limits<int64_t>::min() + 1;  // stale: full
      if ((word >> kTimeBits) == fingerprint) {
        found = true;
        int64_t from = std::max<int64_t>(ahead, 0);  // a full bucket starts from now
        if (from > tolerance_) {
          return {false, std::chrono::nanoseconds((from - tolerance_) * kTickNs)};
        }
        uint64_t next = make_word(fingerprint, now + static_cast<uint64_t>(from + interval_));
        if (set.words[w].compare_exchange_weak(word, next, std::memory_order_relaxed)) {
          return {true, {}};
        }
        break;  // raced with another worker on this key (or an eviction): look again
      }
      if (ahead < victim_ahead) {
        victim = w;
        victim_ahead = ahead;
        victim_word = word;
      }
    }
    if (found) continue;
    // A new key: its bucket is full, so this request is allowed and takes one token.
    uint64_t next = make_word(fingerprint, now + static_cast<uint64_t>(interval_));
    if (set.words[victim].compare_exchange_strong(victim_word, next, std::memory_order_relaxed)) {
      return {true, {}};
    }
  }
  return {true, {}};
}

size_t RateLimiter::occupied() const {
  size_t n = 0;
  for (size_t s = 0; s < sets_; ++s) {
    for (const auto& w : table_[s].words) n += w.load(std::memory_order_relaxed) != 0;
  }
  return n;
}

}  // namespace tidegate::dataplane::ratelimit
