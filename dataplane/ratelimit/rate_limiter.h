#pragma once
// Requests per second per client address (limit-rps, limit-burst-multiplier): a token bucket per
// key in a table of fixed size, shared by every worker thread without a lock.
//
// Each key's bucket is one 64-bit word: a 24-bit fingerprint of the key and the bucket's state
// as a "theoretical arrival time" (the GCRA form of a token bucket: the bucket is full when that
// time is in the past; each request pushes it one emission interval 1/rps forward; a request is
// refused when it would move it more than burst/rps ahead of now). One compare-and-swap updates a
// bucket, so workers share the table and a client's limit does not depend on which worker its
// connections landed on.
//
// The table is set-associative: a key hashes to one set of kWays words (one cache line). A new
// key takes an empty word or evicts the word of its set whose bucket is fullest (earliest arrival
// time): evicting a full bucket loses nothing, and a client that is being limited keeps its
// state longest. Memory is fixed at construction (8 bytes per slot); nothing grows.
//
// Time is a parameter of check() (steady_clock time points), so tests drive it.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ratelimit/ip_address.h"

namespace tidegate::dataplane::ratelimit {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

struct RateLimitConfig {
  // Sustained requests per second per key; > 0 and at most kMaxRps.
  double rps = 0;
  // Bucket capacity = rps × burst_multiplier tokens (at least 1): what an idle client may send at
  // once. ingress-nginx's default multiplier is 5. Must be >= 1.
  double burst_multiplier = 5;
  // Keys tracked at once (rounded up to a power of two sets of kWays).
  size_t capacity = 16384;

  static constexpr double kMaxRps = 100'000;
  static constexpr size_t kMaxCapacity = size_t{1} << 24;
  // Longest time a full bucket takes to refill (capacity / rps); the table's time encoding
  // relies on it.
  static constexpr std::chrono::hours kMaxBurstWindow{1};

  // Why the configuration cannot be used, or nullopt.
  std::optional<std::string> validate() const;
  bool operator==(const RateLimitConfig&) const = default;
};

struct RateDecision {
  bool allowed = true;
  // When refused: how long until one token is available (the Retry-After to send, rounded up to
  // whole seconds by retry_after_seconds()).
  std::chrono::nanoseconds retry_after{0};
  long retry_after_seconds() const;
};

class RateLimiter {
 public:
  static constexpr size_t kWays = 8;

  // `config` must be valid (validate() returned nullopt).
  explicit RateLimiter(const RateLimitConfig& config);
  RateLimiter(const RateLimiter&) = delete;
  RateLimiter& operator=(const RateLimiter&) = delete;

  // Takes one token from `key`'s bucket. Thread-safe, lock-free, allocation-free. Under extreme
  // contention on one set (64 compare-and-swap failures in a row) the request is allowed rather
  // than delayed.
  RateDecision check(const IpAddress& key, TimePoint now);

  const RateLimitConfig& config() const { return config_; }
  // Slots in the table (>= config.capacity): the bound on keys tracked at once.
  size_t slot_count() const { return sets_ * kWays; }
  // Slots holding a key (for tests and metrics; a racy snapshot when other threads write).
  size_t occupied() const;

 private:
  struct alignas(64) Set {
    std::atomic<uint64_t> words[kWays];
  };

  RateLimitConfig config_;
  int64_t interval_;   // emission interval 1/rps, in ticks
  int64_t tolerance_;  // (capacity - 1) × interval: how far ahead of now the state may be
  size_t sets_ = 0;    // power of two
  std::unique_ptr<Set[]> table_;
};

}  // namespace tidegate::dataplane::ratelimit
