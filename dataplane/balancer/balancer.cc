#include "balancer/balancer.h"

#include <algorithm>
#include <cmath>

#include "balancer/stable_hash.h"

namespace tidegate::dataplane::balancer {
namespace {

using std::chrono::duration;
using std::chrono::nanoseconds;

double to_ns(nanoseconds d) { return static_cast<double>(d.count()); }

size_t tried_count(const PickContext& ctx) { return ctx.tried == nullptr ? 0 : ctx.tried->size(); }

// Smooth weighted round robin, interleaved (IWRR): round r visits, in order, every endpoint whose
// (gcd-reduced) weight is at least r; after the heaviest weight's round it starts over. Each cycle
// gives every endpoint exactly its weight in picks, spread over the cycle, at O(1) per pick
// (a binary search at each round change). Each worker starts at a different position.
class RoundRobin final : public Balancer {
 public:
  RoundRobin(std::shared_ptr<const EndpointTable> t, uint32_t worker, const Balancer* previous)
      : Balancer(std::move(t), worker, previous) {
    round_size_ = table_->size();
    position_ = round_size_ == 0 ? 0 : worker % round_size_;
  }

  uint32_t choose(const PickContext& ctx) override {
    const size_t n = table_->size();
    if (n == 0 || tried_count(ctx) >= n) return kNone;
    for (size_t k = 0; k < n; ++k) {
      uint32_t i = advance();
      if (!ctx.was_tried(i)) return i;
    }
    // The schedule's next n slots were all tried endpoints (a heavy endpoint fills the late
    // rounds): any untried one will do for a retry.
    return first_untried_from(cursor_++ % n, ctx);
  }

 private:
  uint32_t advance() {
    while (position_ >= round_size_) {
      round_ = round_ >= table_->rr_max_weight() ? 1 : round_ + 1;
      round_size_ = table_->rr_round_size(round_);
      position_ = 0;
    }
    return table_->rr_order()[position_++];
  }

  uint32_t round_ = 1;
  size_t round_size_ = 0;
  size_t position_ = 0;
};

// Fewest attempts in flight on this worker relative to weight (in_flight / weight, compared by
// cross-multiplication). Ties take turns: a counter picks which of the tied endpoints wins, so
// idle endpoints share the load evenly wherever the busy ones sit. Two passes over the endpoints
// per pick, like nginx's least_conn (one pass plus one for ties).
class LeastConn final : public Balancer {
 public:
  LeastConn(std::shared_ptr<const EndpointTable> t, uint32_t worker, const Balancer* previous)
      : Balancer(std::move(t), worker, previous) {}

  uint32_t choose(const PickContext& ctx) override {
    const auto n = static_cast<uint32_t>(table_->size());
    if (n == 0 || tried_count(ctx) >= n) return kNone;
    uint32_t best = kNone;
    uint64_t best_load = 0, best_weight = 1;
    size_t ties = 0;
    for (uint32_t i = 0; i < n; ++i) {
      if (ctx.was_tried(i)) continue;
      const uint64_t load = loads_[i]->in_flight;
      const uint64_t weight = table_->endpoint(i).weight;
      if (best == kNone || load * best_weight < best_load * weight) {
        best = i;
        best_load = load;
        best_weight = weight;
        ties = 1;
      } else if (load * best_weight == best_load * weight) {
        ++ties;
      }
    }
    if (ties <= 1) return best;
    size_t wanted = cursor_++ % ties;
    for (uint32_t i = best; i < n; ++i) {
      if (ctx.was_tried(i)) continue;
      if (loads_[i]->in_flight * best_weight == best_load * table_->endpoint(i).weight) {
        if (wanted-- == 0) return i;
      }
    }
    return best;
  }
};

// ip_hash and upstream-hash-by: the key's owner on the table's hash ring; a retry walks on along
// the ring, whose next points belong to other endpoints in a key-dependent order. A request
// without a key (no request view, or an expression that evaluated to "") is spread by rotation.
class ConsistentHash final : public Balancer {
 public:
  ConsistentHash(std::shared_ptr<const EndpointTable> t, uint32_t worker, const Balancer* previous)
      : Balancer(std::move(t), worker, previous) {}

  uint32_t choose(const PickContext& ctx) override {
    const size_t n = table_->size();
    if (n == 0 || tried_count(ctx) >= n) return kNone;
    RequestKey computed;
    if (ctx.key == nullptr && ctx.request != nullptr) computed = request_key(*table_, *ctx.request);
    const RequestKey& k = ctx.key != nullptr ? *ctx.key : computed;
    if (!k.present) return first_untried_from(cursor_++ % n, ctx);
    const uint64_t key = k.hash;
    const size_t points = table_->ring_size();
    for (uint32_t probe = 0; probe < points; ++probe) {
      uint32_t i = table_->lookup(key, probe);
      if (!ctx.was_tried(i)) return i;
    }
    return first_untried_from(0, ctx);
  }
};

// Peak-EWMA latency × (in flight + 1) / weight, power of two choices: two distinct random
// untried endpoints, the cheaper wins. An endpoint never measured costs nothing until it has an
// attempt in flight, then a large penalty, so a new endpoint gets one probe at a time until its
// first latency is known. Latencies decay toward 0 while an endpoint is not measured, so a slow
// endpoint that is no longer picked is probed again after a while (see Policy::ewma_decay).
class Ewma final : public Balancer {
 public:
  Ewma(std::shared_ptr<const EndpointTable> t, uint32_t worker, const Balancer* previous)
      : Balancer(std::move(t), worker, previous) {}

  uint32_t choose(const PickContext& ctx) override {
    const size_t n = table_->size();
    const size_t tried = tried_count(ctx);
    if (n == 0 || tried >= n) return kNone;
    if (n - tried <= 2) {
      // Compare every untried endpoint (at most two unless `tried` holds duplicates).
      uint32_t best = kNone;
      double best_cost = 0;
      const size_t start = cursor_++ % n;
      for (size_t k = 0; k < n; ++k) {
        auto i = static_cast<uint32_t>((start + k) % n);
        if (ctx.was_tried(i)) continue;
        double c = cost(i, ctx.now);
        if (best == kNone || c < best_cost) {
          best = i;
          best_cost = c;
        }
      }
      return best;
    }
    uint32_t a = random_untried(ctx, kNone);
    uint32_t b = random_untried(ctx, a);
    if (b == kNone) return a;
    return cost(b, ctx.now) < cost(a, ctx.now) ? b : a;
  }

 private:
  static constexpr double kUnmeasuredBusyPenalty = 1e15;  // ns; beyond any real latency × load

  double cost(uint32_t i, TimePoint now) const {
    const EndpointLoad& l = *loads_[i];
    double latency = ewma_ns(i, now);
    double weight = table_->endpoint(i).weight;
    if (latency <= 0) return l.in_flight == 0 ? 0 : kUnmeasuredBusyPenalty + l.in_flight;
    return latency * (l.in_flight + 1) / weight;
  }

  uint32_t random_untried(const PickContext& ctx, uint32_t other) {
    const size_t n = table_->size();
    for (int attempt = 0; attempt < 8; ++attempt) {
      auto i = static_cast<uint32_t>(next_random() % n);
      if (i != other && !ctx.was_tried(i)) return i;
    }
    // Unlucky draws (many endpoints tried): scan from a random place.
    size_t start = next_random() % n;
    for (size_t k = 0; k < n; ++k) {
      auto i = static_cast<uint32_t>((start + k) % n);
      if (i != other && !ctx.was_tried(i)) return i;
    }
    return kNone;
  }
};

}  // namespace

Balancer::Balancer(std::shared_ptr<const EndpointTable> table, uint32_t worker,
                   const Balancer* previous)
    : table_(std::move(table)), worker_(worker), rng_(mix64(0x5eed0000ULL + worker)) {
  const size_t n = table_->size();
  loads_.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t j = previous == nullptr ? kNone : previous->table().find(table_->endpoint(i).address);
    loads_.push_back(j == kNone ? std::make_shared<EndpointLoad>() : previous->loads_[j]);
  }
  cursor_ = worker;
  for (const auto& l : loads_) any_failed_until_ = std::max(any_failed_until_, l->failed_until);
}

uint32_t Balancer::pick(const PickContext& ctx) {
  if (any_failed_until_ == TimePoint{}) return choose(ctx);
  const TimePoint now = ctx.now != TimePoint{} ? ctx.now : Clock::now();
  if (now >= any_failed_until_) {
    any_failed_until_ = {};
    return choose(ctx);
  }
  PickContext marked = ctx;
  marked.skip_failed = this;
  marked.failed_now = now;
  const uint32_t i = choose(marked);
  return i != kNone ? i : choose(ctx);
}

void Balancer::on_start(uint32_t endpoint) {
  if (endpoint < loads_.size()) ++loads_[endpoint]->in_flight;
}

void Balancer::on_finish(uint32_t endpoint, nanoseconds latency, bool failed, TimePoint now) {
  if (endpoint >= loads_.size()) return;
  EndpointLoad& l = *loads_[endpoint];
  if (l.in_flight > 0) --l.in_flight;
  if (failed) {
    l.failed_until = (now != TimePoint{} ? now : Clock::now()) + kFailTimeout;
    any_failed_until_ = std::max(any_failed_until_, l.failed_until);
  } else if (l.failed_until != TimePoint{}) {
    l.failed_until = {};  // it answered: back in the rotation at once
  }
  // Only ewma reads latencies; the others skip the two exp() calls (a switch to ewma later starts
  // from unmeasured endpoints, which it handles).
  if (method() != Method::kEwma) return;
  double sample = to_ns(std::max(latency, nanoseconds(0)));
  if (failed) sample = std::max(sample, to_ns(table_->policy().ewma_failure_latency));
  if (!l.observed) {
    l.observed = true;
    l.ewma_ns = sample;
    l.stamp = now;
    return;
  }
  // Peak EWMA: a slower sample is taken at once; faster ones pull the estimate down with a weight
  // that depends on the time since the last sample (so the estimate's memory is ewma_decay long
  // however often samples come).
  const double current = ewma_ns(endpoint, now);
  const double dt = to_ns(std::max(now - l.stamp, Clock::duration(0)));
  const double w = std::exp(-dt / to_ns(table_->policy().ewma_decay));
  l.ewma_ns = sample > current ? sample : current * w + sample * (1 - w);
  l.stamp = std::max(now, l.stamp);
}

double Balancer::ewma_ns(uint32_t endpoint, TimePoint now) const {
  const EndpointLoad& l = *loads_[endpoint];
  if (!l.observed) return 0;
  const double dt = to_ns(std::max(now - l.stamp, Clock::duration(0)));
  return l.ewma_ns * std::exp(-dt / to_ns(table_->policy().ewma_decay));
}

uint32_t Balancer::first_untried_from(size_t start, const PickContext& ctx) const {
  const size_t n = table_->size();
  for (size_t k = 0; k < n; ++k) {
    auto i = static_cast<uint32_t>((start + k) % n);
    if (!ctx.was_tried(i)) return i;
  }
  return kNone;
}

uint64_t Balancer::next_random() {
  // splitmix64: fast, good enough for choosing candidates.
  rng_ += 0x9e3779b97f4a7c15ULL;
  return mix64(rng_);
}

RequestKey request_key(const EndpointTable& table, const RequestView& request) {
  switch (table.policy().method) {
    case Method::kIpHash:
      return {request.client.hash(), true};
    case Method::kConsistentHash:
      if (table.policy().hash_by) {
        auto k = table.policy().hash_by->hash(request);
        return {k.hash, !k.empty};
      }
      break;
    case Method::kRoundRobin:
    case Method::kLeastConn:
    case Method::kEwma:
      break;
  }
  return {};
}

std::unique_ptr<Balancer> make_balancer(std::shared_ptr<const EndpointTable> table, uint32_t worker,
                                        const Balancer* previous) {
  switch (table->policy().method) {
    case Method::kLeastConn:
      return std::make_unique<LeastConn>(std::move(table), worker, previous);
    case Method::kIpHash:
    case Method::kConsistentHash:
      return std::make_unique<ConsistentHash>(std::move(table), worker, previous);
    case Method::kEwma:
      return std::make_unique<Ewma>(std::move(table), worker, previous);
    case Method::kRoundRobin:
      break;
  }
  return std::make_unique<RoundRobin>(std::move(table), worker, previous);
}

}  // namespace tidegate::dataplane::balancer
