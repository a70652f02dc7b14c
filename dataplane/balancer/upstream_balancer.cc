#include "balancer/upstream_balancer.h"

namespace tidegate::dataplane::balancer {

std::shared_ptr<const UpstreamBalancer> UpstreamBalancer::build(
    std::vector<EndpointSpec> endpoints, Policy policy, size_t workers,
    const std::shared_ptr<const UpstreamBalancer>& previous, std::string* error) {
  if (workers == 0) workers = 1;
  std::shared_ptr<const EndpointTable> previous_table =
      previous ? previous->table_ : std::shared_ptr<const EndpointTable>();
  auto table =
      EndpointTable::rebuild(previous_table, std::move(endpoints), std::move(policy), error);
  if (!table) return nullptr;
  if (previous && table == previous_table && previous->workers() == workers) return previous;
  auto ub = std::make_shared<UpstreamBalancer>();
  ub->table_ = table;
  ub->balancers_.reserve(workers);
  for (size_t w = 0; w < workers; ++w) {
    const Balancer* before =
        previous && w < previous->workers() ? previous->balancers_[w].get() : nullptr;
    ub->balancers_.push_back(make_balancer(table, static_cast<uint32_t>(w), before));
  }
  return ub;
}

}  // namespace tidegate::dataplane::balancer
