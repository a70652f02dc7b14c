#pragma once
// The immutable, shared half of load balancing: one upstream's endpoints with their weights and
// the tables the chosen method needs, built once per configuration snapshot (off the request
// path) and read by every worker. The mutable half (cursors, in-flight counts, latencies) is
// per worker: balancer.h.
//
// Rebuild: when a snapshot changes an upstream's endpoints or policy, the control thread calls
// EndpointTable::rebuild(previous, endpoints, policy), which returns `previous` itself when
// nothing changed (so an unrelated change costs nothing) and a new table otherwise. Nothing is
// ever rebuilt per request.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "balancer/hash_expression.h"

namespace tidegate::dataplane::balancer {

enum class Method : uint8_t {
  kRoundRobin,      // smooth weighted round robin (interleaved)
  kLeastConn,       // fewest attempts in flight on this worker, relative to weight
  kIpHash,          // consistent hash of the client address
  kEwma,            // peak-latency EWMA, power of two choices
  kConsistentHash,  // consistent hash of Policy::hash_by (upstream-hash-by)
};

// "round_robin", "least_conn", "ip_hash", "ewma"; kConsistentHash has no load-balance name (it
// is selected by upstream-hash-by) and prints as "consistent_hash".
const char* to_string(Method m);
std::optional<Method> method_from_string(std::string_view s);

struct Policy {
  Method method = Method::kRoundRobin;
  // Required for kConsistentHash, ignored otherwise.
  std::shared_ptr<const HashExpression> hash_by;
  // kEwma: how fast old latencies fade (the EWMA's time constant); also how long an endpoint that
  // is not picked takes to look attractive again (it is then probed).
  std::chrono::nanoseconds ewma_decay = std::chrono::seconds(10);
  // kEwma: the latency recorded for a failed attempt (connect error, timeout), when larger than
  // the time it took.
  std::chrono::nanoseconds ewma_failure_latency = std::chrono::seconds(1);

  std::optional<std::string> validate() const;
  bool operator==(const Policy& o) const;
};

struct EndpointSpec {
  // The endpoint's stable identity, e.g. "10.0.0.1:8080" or "[2001:db8::1]:8080": hashing and
  // affinity cookies derive from it, so the same address keeps the same place across snapshots
  // and replicas.
  std::string address;
  uint32_t weight = 1;  // 1..kMaxWeight
  bool operator==(const EndpointSpec&) const = default;
};

class EndpointTable {
 public:
  static constexpr uint32_t kMaxWeight = 10'000;
  static constexpr size_t kMaxEndpoints = 65'535;
  static constexpr uint32_t kNone = ~uint32_t{0};

  // Index i of the table is endpoints[i]: callers keep a parallel array (the resolved socket
  // addresses) in the same order. Null with *error on duplicate addresses, a weight out of range,
  // too many endpoints or an invalid policy. An empty list is valid (every pick then fails).
  static std::shared_ptr<const EndpointTable> build(std::vector<EndpointSpec> endpoints,
                                                    Policy policy, std::string* error);
  // `previous` when endpoints and policy are unchanged, else build().
  static std::shared_ptr<const EndpointTable> rebuild(
      const std::shared_ptr<const EndpointTable>& previous, std::vector<EndpointSpec> endpoints,
      Policy policy, std::string* error);

  size_t size() const { return endpoints_.size(); }
  bool empty() const { return endpoints_.empty(); }
  const EndpointSpec& endpoint(uint32_t i) const { return endpoints_[i]; }
  const std::vector<EndpointSpec>& endpoints() const { return endpoints_; }
  const Policy& policy() const { return policy_; }

  // stable_hash of the address: the same in every process, used as the affinity cookie value.
  uint64_t endpoint_hash(uint32_t i) const { return hashes_[i]; }
  // Index of the endpoint with that hash / address, or kNone. O(log n), no allocation.
  uint32_t find_by_hash(uint64_t endpoint_hash) const;
  uint32_t find(std::string_view address) const;

  // Consistent hashing (kIpHash, kConsistentHash): the endpoint owning `key_hash` on the hash
  // ring (O(log points), no allocation). `probe` > 0 walks on to the following points, for
  // retries. kNone when empty.
  uint32_t lookup(uint64_t key_hash, uint32_t probe = 0) const;
  size_t ring_size() const { return ring_points_.size(); }

  // Round robin: endpoints ordered by weight (heaviest first) with weights divided by their
  // greatest common divisor; round r of the interleaved schedule visits the endpoints whose
  // weight is at least r.
  const std::vector<uint32_t>& rr_order() const { return rr_order_; }
  uint32_t rr_weight(size_t position) const { return rr_weights_[position]; }
  uint32_t rr_max_weight() const { return rr_weights_.empty() ? 0 : rr_weights_.front(); }
  // How many endpoints take part in round r (1-based): those with weight >= r.
  size_t rr_round_size(uint32_t round) const;

 private:
  void build_ring();

  std::vector<EndpointSpec> endpoints_;
  Policy policy_;
  std::vector<uint64_t> hashes_;
  std::vector<std::pair<uint64_t, uint32_t>> by_hash_;  // sorted
  std::vector<uint32_t> by_address_;                    // indices sorted by address
  // The hash ring (ip_hash and consistent hashing only): sorted points and their owners.
  std::vector<uint32_t> ring_points_;
  std::vector<uint32_t> ring_owners_;
  std::vector<uint32_t> rr_order_;
  std::vector<uint32_t> rr_weights_;  // parallel to rr_order_, non-increasing
};

}  // namespace tidegate::dataplane::balancer
