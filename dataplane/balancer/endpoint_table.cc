#include "balancer/endpoint_table.h"

#include <algorithm>
#include <numeric>

#include "balancer/stable_hash.h"

namespace tidegate::dataplane::balancer {
namespace {

// Seed of the endpoint hash (the affinity cookie value), kept apart from the ring's.
constexpr uint64_t kEndpointSeed = 0x7469646567617465ULL;  // "tidegate"
constexpr uint64_t kRingSeed = 0x72696e67ULL;              // "ring"

// Ring points per unit of weight: an endpoint's share of the keys varies by about
// 1/sqrt(points) around its weight's share (4.4% here; nginx's 160 gives 8%, which lets the
// busiest of ten endpoints hold 1.2/N and makes its removal move that much).
constexpr uint64_t kPointsPerWeight = 512;
// Total points at most (2 MiB of ring). Beyond it every endpoint's count is scaled down in
// proportion; an endpoint's points are a prefix of one fixed sequence, so a change of scale only
// moves the keys of the few points dropped or added at the end of each endpoint's sequence.
constexpr uint64_t kMaxRingPoints = uint64_t{1} << 18;

}  // namespace

const char* to_string(Method m) {
  switch (m) {
    case Method::kRoundRobin:
      return "round_robin";
    case Method::kLeastConn:
      return "least_conn";
    case Method::kIpHash:
      return "ip_hash";
    case Method::kEwma:
      return "ewma";
    case Method::kConsistentHash:
      return "consistent_hash";
  }
  return "?";
}

std::optional<Method> method_from_string(std::string_view s) {
  if (s == "round_robin") return Method::kRoundRobin;
  if (s == "least_conn") return Method::kLeastConn;
  if (s == "ip_hash") return Method::kIpHash;
  if (s == "ewma") return Method::kEwma;
  return std::nullopt;
}

std::optional<std::string> Policy::validate() const {
  if (method == Method::kConsistentHash && !hash_by) {
    return "consistent hashing needs a hash-by expression";
  }
  if (ewma_decay.count() <= 0) return "ewma decay must be positive";
  if (ewma_failure_latency.count() < 0) return "ewma failure latency must not be negative";
  return std::nullopt;
}

bool Policy::operator==(const Policy& o) const {
  const bool same_hash =
      (!hash_by && !o.hash_by) || (hash_by && o.hash_by && hash_by->text() == o.hash_by->text());
  return method == o.method && same_hash && ewma_decay == o.ewma_decay &&
         ewma_failure_latency == o.ewma_failure_latency;
}

std::shared_ptr<const EndpointTable> EndpointTable::build(std::vector<EndpointSpec> endpoints,
                                                          Policy policy, std::string* error) {
  if (auto why = policy.validate()) {
    *error = *why;
    return nullptr;
  }
  if (endpoints.size() > kMaxEndpoints) {
    *error = "more than " + std::to_string(kMaxEndpoints) + " endpoints";
    return nullptr;
  }
  auto t = std::make_shared<EndpointTable>();
  t->endpoints_ = std::move(endpoints);
  t->policy_ = std::move(policy);
  const auto n = static_cast<uint32_t>(t->endpoints_.size());
  for (uint32_t i = 0; i < n; ++i) {
    const auto& e = t->endpoints_[i];
    if (e.weight < 1 || e.weight > kMaxWeight) {
      *error = "endpoint " + e.address + ": weight " + std::to_string(e.weight) +
               " is out of range 1-" + std::to_string(kMaxWeight);
      return nullptr;
    }
    t->hashes_.push_back(stable_hash(e.address, kEndpointSeed));
    t->by_hash_.emplace_back(t->hashes_.back(), i);
    t->by_address_.push_back(i);
  }
  std::sort(t->by_hash_.begin(), t->by_hash_.end());
  std::sort(t->by_address_.begin(), t->by_address_.end(), [&](uint32_t a, uint32_t b) {
    return t->endpoints_[a].address < t->endpoints_[b].address;
  });
  for (size_t i = 1; i < t->by_address_.size(); ++i) {
    if (t->endpoints_[t->by_address_[i]].address == t->endpoints_[t->by_address_[i - 1]].address) {
      *error = "endpoint " + t->endpoints_[t->by_address_[i]].address + " is listed twice";
      return nullptr;
    }
  }
  // Round robin schedule: heaviest first, ties by address, weights reduced by their gcd.
  t->rr_order_ = t->by_address_;
  std::stable_sort(t->rr_order_.begin(), t->rr_order_.end(), [&](uint32_t a, uint32_t b) {
    return t->endpoints_[a].weight > t->endpoints_[b].weight;
  });
  uint32_t g = 0;
  for (const auto& e : t->endpoints_) g = std::gcd(g, e.weight);
  for (uint32_t i : t->rr_order_) t->rr_weights_.push_back(t->endpoints_[i].weight / g);
  if (t->policy_.method == Method::kIpHash || t->policy_.method == Method::kConsistentHash) {
    t->build_ring();
  }
  return t;
}

std::shared_ptr<const EndpointTable> EndpointTable::rebuild(
    const std::shared_ptr<const EndpointTable>& previous, std::vector<EndpointSpec> endpoints,
    Policy policy, std::string* error) {
  if (previous && previous->endpoints_ == endpoints && previous->policy_ == policy) {
    return previous;
  }
  return build(std::move(endpoints), std::move(policy), error);
}

void EndpointTable::build_ring() {
  // Each endpoint puts points on a 64-bit ring at positions derived from its address alone; a
  // key belongs to the first point at or after its hash. Adding or removing an endpoint adds or
  // removes only that endpoint's points, so only the keys it takes or held move: the minimal
  // 1/N. (A Maglev table balances better but moves more than 1.2/N at N = 100 with 64K slots.)
  uint64_t total_weight = 0;
  for (const auto& e : endpoints_) total_weight += e.weight;
  if (total_weight == 0) return;
  const double scale = std::min(1.0, static_cast<double>(kMaxRingPoints) /
                                         static_cast<double>(total_weight * kPointsPerWeight));
  std::vector<std::pair<uint32_t, uint32_t>> points;
  for (uint32_t i = 0; i < endpoints_.size(); ++i) {
    const auto count = std::max<uint64_t>(
        1, static_cast<uint64_t>(static_cast<double>(endpoints_[i].weight * kPointsPerWeight) *
                                 scale));
    const uint64_t base = stable_hash(endpoints_[i].address, kRingSeed);
    for (uint64_t k = 0; k < count; ++k) {
      points.emplace_back(static_cast<uint32_t>(mix64(base + k * 0x9e3779b97f4a7c15ULL) >> 32), i);
    }
  }
  // Points are 32 bits (a few collide on a full ring): ties go to the smaller address, so the
  // ring still depends only on the set of endpoints.
  std::sort(points.begin(), points.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return endpoints_[a.second].address < endpoints_[b.second].address;
  });
  ring_points_.reserve(points.size());
  ring_owners_.reserve(points.size());
  for (const auto& [point, owner] : points) {
    ring_points_.push_back(point);
    ring_owners_.push_back(owner);
  }
}

uint32_t EndpointTable::find_by_hash(uint64_t h) const {
  auto it = std::lower_bound(by_hash_.begin(), by_hash_.end(), std::make_pair(h, uint32_t{0}));
  return it != by_hash_.end() && it->first == h ? it->second : kNone;
}

uint32_t EndpointTable::find(std::string_view address) const {
  auto it = std::lower_bound(
      by_address_.begin(), by_address_.end(), address,
      [&](uint32_t i, std::string_view a) { return std::string_view(endpoints_[i].address) < a; });
  return it != by_address_.end() && endpoints_[*it].address == address ? *it : kNone;
}

uint32_t EndpointTable::lookup(uint64_t key_hash, uint32_t probe) const {
  if (ring_points_.empty()) return kNone;
  const size_t first =
      static_cast<size_t>(std::lower_bound(ring_points_.begin(), ring_points_.end(),
                                           static_cast<uint32_t>(key_hash >> 32)) -
                          ring_points_.begin());
  return ring_owners_[(first + probe) % ring_points_.size()];
}

size_t EndpointTable::rr_round_size(uint32_t round) const {
  auto it = std::partition_point(rr_weights_.begin(), rr_weights_.end(),
                                 [&](uint32_t w) { return w >= round; });
  return static_cast<size_t>(it - rr_weights_.begin());
}

}  // namespace tidegate::dataplane::balancer
