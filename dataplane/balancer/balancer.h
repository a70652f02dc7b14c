#pragma once
// The mutable, per-worker half of load balancing: one Balancer per (upstream, worker), used only
// by that worker's thread, so it needs no lock and no atomics. It reads the shared immutable
// EndpointTable (endpoint_table.h) and keeps the worker's own cursor, random state and load
// figures.
//
// Request path, for each attempt of a request:
//   uint32_t i = balancer.pick({&request_view, &tried, now});   // kNone: nothing left to try
//   tried.add(i); balancer.on_start(i);
//   ... connect, send, read the response header ...
//   balancer.on_finish(i, time_to_response_header, failed, now);  // also on errors
//
// Snapshots: a new configuration builds new Balancers (UpstreamBalancer::build, or
// make_balancer with the worker's previous Balancer for that upstream). Load figures of
// endpoints both have are shared objects, so a request that started under the old snapshot and
// finishes later (on_finish on the old Balancer, which the request's snapshot keeps alive)
// updates the same in-flight count the new Balancer reads. Building reads only the previous
// Balancer's immutable list of those objects, so it may run on the control thread while the
// worker is using the previous one.

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "balancer/endpoint_table.h"
#include "balancer/request_view.h"

namespace tidegate::dataplane::balancer {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

// Endpoints already tried by one request (retries skip them). Fixed capacity, no allocation;
// past kCapacity further additions are ignored (a retry may then repeat an endpoint).
class Tried {
 public:
  static constexpr size_t kCapacity = 8;
  void add(uint32_t i) {
    if (n_ < kCapacity && !contains(i)) items_[n_++] = i;
  }
  bool contains(uint32_t i) const {
    for (size_t k = 0; k < n_; ++k) {
      if (items_[k] == i) return true;
    }
    return false;
  }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }

 private:
  std::array<uint32_t, kCapacity> items_{};
  size_t n_ = 0;
};

// The key ip_hash and consistent hashing place a request with, computed once per request
// (request_key) when the caller picks several times for one request and the request's fields
// change between picks (the HTTP session adds X-Forwarded-For, may rewrite the target...).
struct RequestKey {
  uint64_t hash = 0;
  bool present = false;  // false: no key (no request, or a hash-by key that evaluated to "")
};

class Balancer;

struct PickContext {
  const RequestView* request = nullptr;  // needed by ip_hash and consistent hashing
  const Tried* tried = nullptr;          // null: nothing tried yet
  TimePoint now{};                       // ewma reads latencies decayed to this time
  // When set, ip_hash and consistent hashing use it and do not read `request`.
  const RequestKey* key = nullptr;
  // Set by Balancer::pick while an endpoint is marked failed: such endpoints count as tried.
  const Balancer* skip_failed = nullptr;
  TimePoint failed_now{};

  // Tried by this request, or (while Balancer::pick skips them) marked failed.
  bool was_tried(uint32_t i) const;
};

// One worker's figures for one endpoint, shared by that worker's successive Balancers.
struct EndpointLoad {
  uint32_t in_flight = 0;  // attempts begun and not finished, on this worker
  bool observed = false;   // a latency has been recorded
  double ewma_ns = 0;      // peak EWMA of latency, as of `stamp`
  TimePoint stamp{};
  // Passive failure marking: after a failed attempt, picks avoid the endpoint until then.
  TimePoint failed_until{};
};

class Balancer {
 public:
  static constexpr uint32_t kNone = EndpointTable::kNone;

  virtual ~Balancer() = default;
  Balancer(const Balancer&) = delete;
  Balancer& operator=(const Balancer&) = delete;

  // Passive failure marking (docs/proxy.md, "Choosing an endpoint"), as nginx's defaults
  // max_fails=1 fail_timeout=10s: an attempt that failed (connect error, timeout, broken
  // response, a status proxy-next-upstream discards) marks its endpoint on this worker, and
  // picks avoid it for kFailTimeout or until an attempt on it succeeds. When every endpoint
  // left is marked, the marks are ignored (better a try than no answer). This is what stops a
  // burst of connects to a pod that exited before its EndpointSlice said so: the first refused
  // connect marks it, later requests go elsewhere at once.
  static constexpr std::chrono::seconds kFailTimeout{10};

  // The endpoint for the next attempt: an index into table().endpoints(), never one in
  // ctx.tried, and not one marked failed while an unmarked one is left; kNone when the table is
  // empty or every endpoint was tried. Allocation-free; reads the clock only while some
  // endpoint is marked (and ctx.now is unset).
  uint32_t pick(const PickContext& ctx);
  // Marked failed at `now`.
  bool failed(uint32_t endpoint, TimePoint now) const {
    return endpoint < loads_.size() && loads_[endpoint]->failed_until > now;
  }

  // Bracket every attempt on an endpoint the balancer picked (or that affinity chose).
  void on_start(uint32_t endpoint);
  // `latency`: what the attempt took (the time to the response header is a good measure);
  // `failed`: it ended in a connect error, a timeout or a broken response. Latencies are
  // recorded only by ewma.
  void on_finish(uint32_t endpoint, std::chrono::nanoseconds latency, bool failed, TimePoint now);
  // Ends an attempt whose outcome says nothing the balancer should learn from (a mirrored copy,
  // server/mirror.h): its in-flight count only; no failure mark, none cleared, no latency.
  void on_release(uint32_t endpoint) {
    if (endpoint < loads_.size() && loads_[endpoint]->in_flight > 0) --loads_[endpoint]->in_flight;
  }

  const EndpointTable& table() const { return *table_; }
  const std::shared_ptr<const EndpointTable>& shared_table() const { return table_; }
  Method method() const { return table_->policy().method; }
  uint32_t worker() const { return worker_; }
  uint32_t in_flight(uint32_t endpoint) const { return loads_[endpoint]->in_flight; }
  // The latency estimate used by ewma, decayed to `now` (0 before any observation).
  double ewma_ns(uint32_t endpoint, TimePoint now) const;

 protected:
  Balancer(std::shared_ptr<const EndpointTable> table, uint32_t worker, const Balancer* previous);

  // The method's choice under ctx (which pick() may have extended with the failure marks).
  virtual uint32_t choose(const PickContext& ctx) = 0;

  // The first untried endpoint at or after index `start` (wrapping), or kNone.
  uint32_t first_untried_from(size_t start, const PickContext& ctx) const;
  uint64_t next_random();

  std::shared_ptr<const EndpointTable> table_;
  uint32_t worker_;
  // Parallel to table_->endpoints(); the vector itself never changes after construction.
  std::vector<std::shared_ptr<EndpointLoad>> loads_;
  uint64_t rng_;
  size_t cursor_ = 0;  // rotation for tie-breaks and fallbacks
  // The latest failed_until of any endpoint as this Balancer saw it ({}: none marked): while it
  // lies in the past, picks cost nothing extra.
  TimePoint any_failed_until_{};
};

inline bool PickContext::was_tried(uint32_t i) const {
  return (tried != nullptr && tried->contains(i)) ||
         (skip_failed != nullptr && skip_failed->failed(i, failed_now));
}

// The key of `request` for `table`'s method: the client address for kIpHash, the hash-by
// expression for kConsistentHash, none for the other methods. Allocation-free.
RequestKey request_key(const EndpointTable& table, const RequestView& request);

// The Balancer for table->policy().method. `previous` (may be null) is this worker's Balancer for
// the same upstream in the previous snapshot: its load figures carry over by endpoint address.
std::unique_ptr<Balancer> make_balancer(std::shared_ptr<const EndpointTable> table, uint32_t worker,
                                        const Balancer* previous);

}  // namespace tidegate::dataplane::balancer
