#pragma once
// What one upstream needs in a configuration snapshot: the shared EndpointTable and one Balancer
// per worker. Lives in runtime::UpstreamState::balancer, built by build_snapshot() and
// update_upstreams() from the previous snapshot's UpstreamBalancer of the same name; the HTTP
// session picks with it (docs/proxy.md, "Choosing an endpoint").
//
//   // control thread, per upstream, per snapshot:
//   auto ub = UpstreamBalancer::build(specs, policy, workers, previous_or_null, &error);
//   // worker `w`, per attempt:
//   Balancer& b = ub->worker(w);
//   uint32_t i = b.pick({&view, &tried, now});
//
// When endpoints, policy and worker count are all unchanged, build() returns `previous` itself:
// the new snapshot shares it, and every worker keeps its cursor and figures untouched. Otherwise
// a new table is built and each worker's new Balancer shares the load figures of the endpoints
// that stay (balancer.h explains why that is safe while workers run).

#include <memory>
#include <string>
#include <vector>

#include "balancer/balancer.h"
#include "balancer/endpoint_table.h"

namespace tidegate::dataplane::balancer {

class UpstreamBalancer {
 public:
  static std::shared_ptr<const UpstreamBalancer> build(
      std::vector<EndpointSpec> endpoints, Policy policy, size_t workers,
      const std::shared_ptr<const UpstreamBalancer>& previous, std::string* error);

  const EndpointTable& table() const { return *table_; }
  size_t workers() const { return balancers_.size(); }
  // Worker `id`'s own Balancer: call only from that worker's thread. Mutable through a const
  // snapshot on purpose (like the per-worker counters it replaces); nothing else in the
  // snapshot changes.
  Balancer& worker(size_t id) const { return *balancers_[id]; }

 private:
  std::shared_ptr<const EndpointTable> table_;
  // One heap object per worker, so workers never write to the same cache line.
  std::vector<std::unique_ptr<Balancer>> balancers_;
};

}  // namespace tidegate::dataplane::balancer
