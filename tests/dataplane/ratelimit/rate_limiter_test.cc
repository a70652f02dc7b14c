// The per-client token bucket table and the connection limiter, driven by an injected clock.

#include "ratelimit/rate_limiter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "ratelimit/connection_limiter.h"

namespace tidegate::dataplane::ratelimit {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

// Far from 0 so that "before the first request" is representable.
const TimePoint kStart = TimePoint() + std::chrono::hours(1000);

IpAddress client(uint32_t n) { return IpAddress::v4(0x0a000000u + n); }

RateLimitConfig config(double rps, double multiplier, size_t capacity = 1024) {
  RateLimitConfig c;
  c.rps = rps;
  c.burst_multiplier = multiplier;
  c.capacity = capacity;
  EXPECT_FALSE(c.validate().has_value()) << *c.validate();
  return c;
}

TEST(RateLimiter, ValidateTable) {
  struct Case {
    double rps, multiplier;
    size_t capacity;
    const char* error;  // nullptr: valid
  };
  const Case cases[] = {
      {10, 5, 16384, nullptr},
      {0.5, 1, 1, nullptr},
      {RateLimitConfig::kMaxRps, 1, 1, nullptr},
      {0, 5, 16384, "rps must be greater than 0"},
      {-1, 5, 16384, "rps must be greater than 0"},
      {NAN, 5, 16384, "rps must be greater than 0"},
      {RateLimitConfig::kMaxRps * 2, 5, 16384, "rps must be at most"},
      {10, 0.5, 16384, "burst multiplier must be at least 1"},
      {0.0001, 1, 16384, "refills in more than an hour"},
      {1, 4000, 16384, "refills in more than an hour"},
      {0.001, 10, 16384, nullptr},
      {10, 5, 0, "capacity must be between"},
      {10, 5, RateLimitConfig::kMaxCapacity + 1, "capacity must be between"},
  };
  for (const auto& c : cases) {
    RateLimitConfig cfg{c.rps, c.multiplier, c.capacity};
    auto err = cfg.validate();
    if (c.error == nullptr) {
      EXPECT_FALSE(err.has_value()) << c.rps << ": " << *err;
    } else {
      ASSERT_TRUE(err.has_value()) << c.rps;
      EXPECT_NE(err->find(c.error), std::string::npos) << *err;
    }
  }
}

TEST(RateLimiter, IdleClientGetsItsBurstThenOnePerInterval) {
  RateLimiter limiter(config(10, 3));  // bucket of 30 tokens, one every 100 ms
  int allowed = 0;
  for (int i = 0; i < 100; ++i) allowed += limiter.check(client(1), kStart).allowed;
  EXPECT_EQ(allowed, 30);
  auto refused = limiter.check(client(1), kStart);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_after, milliseconds(100));
  EXPECT_EQ(refused.retry_after_seconds(), 1);
  // Just before a token is back: still refused; at that moment: one request, not two.
  EXPECT_FALSE(limiter.check(client(1), kStart + milliseconds(99)).allowed);
  EXPECT_TRUE(limiter.check(client(1), kStart + milliseconds(100)).allowed);
  EXPECT_FALSE(limiter.check(client(1), kStart + milliseconds(100)).allowed);
  // Another client has its own bucket.
  EXPECT_TRUE(limiter.check(client(2), kStart).allowed);
  // After the bucket refilled (3 s), the full burst again.
  allowed = 0;
  for (int i = 0; i < 100; ++i) allowed += limiter.check(client(1), kStart + seconds(10)).allowed;
  EXPECT_EQ(allowed, 30);
}

TEST(RateLimiter, RetryAfterRoundsUpToSeconds) {
  RateLimiter limiter(config(0.5, 1));  // one token every 2 s
  EXPECT_TRUE(limiter.check(client(1), kStart).allowed);
  auto d = limiter.check(client(1), kStart + milliseconds(500));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, milliseconds(1500));
  EXPECT_EQ(d.retry_after_seconds(), 2);
}

// Sustained accuracy: a client sending faster than the limit gets rps × time + burst requests
// through, within 10%, whatever its pattern.
TEST(RateLimiter, AccuracyWithinTenPercent) {
  struct Case {
    double rps, multiplier, offered_rps;
  };
  const Case cases[] = {{100, 1, 1000}, {100, 5, 400}, {7.5, 2, 60}, {1, 1, 50}, {2000, 1, 20000}};
  for (const auto& c : cases) {
    RateLimiter limiter(config(c.rps, c.multiplier));
    std::mt19937_64 rng(42);
    std::exponential_distribution<double> gap(c.offered_rps);  // Poisson arrivals
    const double duration = 20;
    double t = 0;
    long allowed = 0;
    while (t < duration) {
      allowed += limiter.check(client(9), kStart + nanoseconds(static_cast<long>(t * 1e9))).allowed;
      t += gap(rng);
    }
    double expected = c.rps * duration + std::max(1.0, c.rps * c.multiplier);
    EXPECT_NEAR(static_cast<double>(allowed), expected, expected * 0.10)
        << "rps " << c.rps << " multiplier " << c.multiplier;
  }
}

// A client below the limit is never refused.
TEST(RateLimiter, ClientUnderTheLimitIsNeverRefused) {
  RateLimiter limiter(config(10, 1));
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(limiter.check(client(3), kStart + milliseconds(101) * i).allowed) << i;
  }
}

TEST(RateLimiter, TableIsBoundedAndKeepsLimitedClients) {
  RateLimiter limiter(config(1, 10, 64));
  EXPECT_EQ(limiter.slot_count(), 64u);
  // One client exhausts its bucket.
  const IpAddress abuser = IpAddress::v4(0xc0000201);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(limiter.check(abuser, kStart).allowed);
  ASSERT_FALSE(limiter.check(abuser, kStart).allowed);
  // 100,000 other clients pass once each: the table never holds more than its slots.
  for (uint32_t i = 0; i < 100'000; ++i) {
    ASSERT_TRUE(limiter.check(client(i), kStart + std::chrono::microseconds(i)).allowed);
    ASSERT_LE(limiter.occupied(), limiter.slot_count());
  }
  EXPECT_EQ(limiter.occupied(), limiter.slot_count());
  // The abuser's empty bucket was never the fullest of its set, so it is still limited.
  EXPECT_FALSE(limiter.check(abuser, kStart + milliseconds(100)).allowed);
}

TEST(RateLimiter, EvictionOfAFullBucketLosesNothing) {
  RateLimiter limiter(config(1, 2, 8));  // a single set of 8 words
  ASSERT_EQ(limiter.slot_count(), 8u);
  for (uint32_t i = 0; i < 8; ++i) ASSERT_TRUE(limiter.check(client(i), kStart).allowed);
  // Much later every bucket is full again; nine more clients churn through the set.
  for (uint32_t i = 100; i < 109; ++i) {
    ASSERT_TRUE(limiter.check(client(i), kStart + seconds(60)).allowed);
  }
  // An evicted client starts with a full bucket, as it would have anyway.
  EXPECT_TRUE(limiter.check(client(0), kStart + seconds(60)).allowed);
  EXPECT_TRUE(limiter.check(client(0), kStart + seconds(60)).allowed);
  EXPECT_FALSE(limiter.check(client(0), kStart + seconds(60)).allowed);
}

// A request every 10 ms for a second; returns how many were allowed.
int steady_stream(RateLimiter& limiter, TimePoint t0) {
  int allowed = 0;
  for (int ms = 0; ms < 1000; ms += 10) {
    allowed += limiter.check(client(1), t0 + milliseconds(ms)).allowed;
  }
  return allowed;
}

TEST(RateLimiter, SurvivesTheTimeEncodingWrap) {
  RateLimiter reference(config(10, 1));
  const int expected = steady_stream(reference, kStart);
  EXPECT_NEAR(expected, 10 + 10, 1);  // the burst, then one per 100 ms
  // The table keeps 40 bits of 100 ns ticks (about 30.5 hours): cross that boundary.
  RateLimiter limiter(config(10, 1));
  const TimePoint wrap = TimePoint() + nanoseconds((int64_t{1} << 40) * 100);
  EXPECT_EQ(steady_stream(limiter, wrap - milliseconds(500)), expected);
  // A bucket untouched for 20 hours (its stored time reads as 10 hours ahead modulo the wrap)
  // is recognised as stale: full, not "far in the future".
  const TimePoint later = wrap + std::chrono::hours(20);
  int allowed = 0;
  for (int i = 0; i < 20; ++i) allowed += limiter.check(client(1), later).allowed;
  EXPECT_EQ(allowed, 10);
}

TEST(RateLimiter, ConcurrentWorkersShareOneBucket) {
  RateLimiter limiter(config(100, 10));  // 1000 tokens
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) allowed += limiter.check(client(5), kStart).allowed;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(allowed.load(), 1000);
}

TEST(ConnectionLimiter, CountsAndReleases) {
  ASSERT_FALSE(ConnectionLimiter::validate(2, 100).has_value());
  EXPECT_TRUE(ConnectionLimiter::validate(0, 100).has_value());
  EXPECT_TRUE(ConnectionLimiter::validate(2, 0).has_value());
  auto limiter = ConnectionLimiter::create(2);
  auto a = limiter->acquire(client(1));
  auto b = limiter->acquire(client(1));
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(a->tracked());
  EXPECT_FALSE(limiter->acquire(client(1)).has_value());
  EXPECT_EQ(limiter->count(client(1)), 2u);
  auto other = limiter->acquire(client(2));
  EXPECT_TRUE(other.has_value());
  a->release();
  EXPECT_EQ(limiter->count(client(1)), 1u);
  auto c = limiter->acquire(client(1));
  ASSERT_TRUE(c.has_value());
  // Moving a lease moves its unit; destroying it releases once.
  ConnectionLimiter::Lease moved = std::move(*c);
  c.reset();
  EXPECT_EQ(limiter->count(client(1)), 2u);
  { ConnectionLimiter::Lease gone = std::move(moved); }
  EXPECT_EQ(limiter->count(client(1)), 1u);
  b.reset();
  EXPECT_EQ(limiter->count(client(1)), 0u);
}

TEST(ConnectionLimiter, LeaseOutlivesTheLimiterHandle) {
  auto limiter = ConnectionLimiter::create(1);
  auto lease = limiter->acquire(client(1));
  ASSERT_TRUE(lease.has_value());
  std::weak_ptr<ConnectionLimiter> weak = limiter;
  limiter.reset();  // a new snapshot dropped it; the connection still holds its lease
  EXPECT_FALSE(weak.expired());
  lease.reset();
  EXPECT_TRUE(weak.expired());
}

TEST(ConnectionLimiter, FullTableLetsNewKeysThroughUntracked) {
  auto limiter = ConnectionLimiter::create(1, 8);  // one set of 8 words
  ASSERT_EQ(limiter->slot_count(), 8u);
  std::vector<ConnectionLimiter::Lease> held;
  for (uint32_t i = 0; i < 8; ++i) {
    auto l = limiter->acquire(client(i));
    ASSERT_TRUE(l && l->tracked());
    held.push_back(std::move(*l));
  }
  auto extra = limiter->acquire(client(100));
  ASSERT_TRUE(extra.has_value());
  EXPECT_FALSE(extra->tracked());
  // Known keys are still limited.
  EXPECT_FALSE(limiter->acquire(client(3)).has_value());
  held.clear();
  auto again = limiter->acquire(client(100));
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(again->tracked());
}

TEST(ConnectionLimiter, ConcurrentAcquireNeverExceedsTheLimit) {
  auto limiter = ConnectionLimiter::create(3);
  std::atomic<int> max_seen{0};
  std::atomic<int> open{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) {
        auto l = limiter->acquire(client(7));
        if (!l) continue;
        int now = ++open;
        int prev = max_seen.load();
        while (now > prev && !max_seen.compare_exchange_weak(prev, now)) {
        }
        --open;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(max_seen.load(), 3);
  EXPECT_EQ(limiter->count(client(7)), 0u);
}

}  // namespace
}  // namespace tidegate::dataplane::ratelimit
