#pragma once
// Concurrent connections (or requests in progress) per client address: limit-connections.
//
// Like RateLimiter, a set-associative table of 64-bit words shared by every worker without a
// lock: each word is a 32-bit fingerprint of the key and its current count. A word whose count is
// 0 holds nothing and is free for any key, so the table never needs eviction: a key is tracked
// exactly while it has something open. When every word of a key's set is busy with other keys the
// new key is let through untracked (fail open, reported by Lease::tracked()) rather than refused;
// the table size bounds memory, never admission of unrelated clients.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ratelimit/ip_address.h"

namespace tidegate::dataplane::ratelimit {

class ConnectionLimiter : public std::enable_shared_from_this<ConnectionLimiter> {
 public:
  static constexpr size_t kWays = 8;
  static constexpr size_t kMaxCapacity = size_t{1} << 24;

  // Holds one unit of a key's count until destroyed (or release()d); move-only. Keeps the
  // limiter alive, so it may outlive the configuration snapshot that created the limiter, and
  // may be released on any thread.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept;
    ~Lease() { release(); }
    void release();
    // False when the table had no room for the key: the connection was let through uncounted.
    bool tracked() const { return limiter_ != nullptr && slot_ != kUntracked; }

   private:
    friend class ConnectionLimiter;
    static constexpr size_t kUntracked = ~size_t{0};
    Lease(std::shared_ptr<ConnectionLimiter> l, size_t slot)
        : limiter_(std::move(l)), slot_(slot) {}
    std::shared_ptr<ConnectionLimiter> limiter_;
    size_t slot_ = kUntracked;
  };

  // `limit` >= 1 concurrent units per key; `capacity` keys tracked at once.
  static std::shared_ptr<ConnectionLimiter> create(uint32_t limit, size_t capacity = 16384);
  static std::optional<std::string> validate(long limit, size_t capacity);

  // A lease when `key` has fewer than limit() units open, nullopt when it is at the limit.
  // Thread-safe, lock-free, allocation-free (the lease holds a shared_ptr copy).
  std::optional<Lease> acquire(const IpAddress& key);

  uint32_t limit() const { return limit_; }
  size_t slot_count() const { return sets_ * kWays; }
  // Units currently counted for `key` (tests and metrics).
  uint32_t count(const IpAddress& key) const;

  ConnectionLimiter(uint32_t limit, size_t capacity);  // use create()

 private:
  struct alignas(64) Set {
    std::atomic<uint64_t> words[kWays];
  };
  void release_slot(size_t slot);

  uint32_t limit_;
  size_t sets_;
  std::unique_ptr<Set[]> table_;
};

}  // namespace tidegate::dataplane::ratelimit
