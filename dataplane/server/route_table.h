#pragma once
// What the request path needs per route beyond the routing model, computed once per routing
// table on the control thread (never per request) and handed to every worker with the snapshot:
// the route's metric label ids and the compiled parts of its policy (source ranges, the regex
// that yields rewrite-target's capture groups). Keyed by the model::Route's address in the
// snapshot the table was built from; the builder keeps that snapshot alive (main.cc).

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <re2/re2.h>

#include "model/model.h"
#include "observability/metrics.h"
#include "ratelimit/cidr_set.h"
#include "ratelimit/connection_limiter.h"
#include "ratelimit/rate_limiter.h"
#include "router/router.h"
#include "server/basic_auth.h"
#include "server/cors.h"
#include "server/external_auth.h"

namespace tidegate::dataplane::server {

struct CompiledRoute {
  observability::LabelSetId labels = observability::kNoRouteLabels;
  // Requests the route sends to its canary backend (the canary's service label).
  observability::LabelSetId canary_labels = observability::kNoRouteLabels;
  // whitelist-source-range; an entry that did not compile leaves an empty set: nobody allowed.
  std::optional<ratelimit::CidrSet> source_ranges;
  // denylist-source-range; an entry that did not compile leaves an empty set and denies
  // everyone (deny_all).
  std::optional<ratelimit::CidrSet> deny_ranges;
  bool deny_all = false;
  // For rewrite-target with $N on a regex route: the route's pattern, anchored at the start.
  std::unique_ptr<re2::RE2> rewrite_regex;
  // limit-rps / limit-connections, keyed by client address and shared by all workers (the
  // limiters are lock-free); limit-allowlist exempts addresses from both. The limiters live as
  // long as the routing table: a change of routes starts them afresh.
  std::unique_ptr<ratelimit::RateLimiter> rate_limiter;
  std::unique_ptr<ratelimit::RateLimiter> rpm_limiter;  // limit-rpm, a bucket of its own
  std::shared_ptr<ratelimit::ConnectionLimiter> connection_limiter;
  std::optional<ratelimit::CidrSet> limit_allowlist;
  // enable-cors.
  std::optional<CompiledCors> cors;
  // auth-type: basic (its per-worker caches indexed by worker id).
  std::unique_ptr<BasicAuthCheck> basic_auth;
  // auth-url: the auth request's parts and the cache of answers (per worker).
  std::unique_ptr<CompiledExternalAuth> external_auth;
  // enable-cache: what the route is (host, path, backend, policy) as a hash, part of every
  // cache key of the route: a change of the route (its Ingress, or the Service or port it names)
  // leaves its old entries unreachable (they age out of the LRU), while a rebuilt table with the
  // same route keeps them. Endpoint changes do not change it.
  uint64_t cache_tag = 0;
  // hsts: the Strict-Transport-Security value for the route's HTTPS responses; empty: none.
  std::string hsts;
  // A route with a canary or weighted backends: each worker's count of requests the weights decided
  // (indexed by worker id, each written by its own worker only, so no atomics). Null without a
  // canary.
  struct alignas(64) Turn {
    mutable uint64_t value = 0;
  };
  std::unique_ptr<Turn[]> canary_turns;
  // canary-by-header-pattern, compiled; null without one.
  std::unique_ptr<re2::RE2> canary_pattern;
  size_t canary_workers = 0;
  // The next weight turn of worker `id` (0 when out of range, which never happens in use).
  uint64_t next_canary_turn(size_t id) const {
    return id < canary_workers ? canary_turns[id].value++ : 0;
  }
};

class RouteTable {
 public:
  // `metrics` may be null (no label ids). `workers`: the number of workers that will read it.
  RouteTable(const router::Router& router, observability::Metrics* metrics, size_t workers = 1)
      : RouteTable(std::vector<const router::Router*>{&router}, metrics, workers) {}
  // The routes of several routers: a snapshot's own and its Gateway listeners'.
  RouteTable(const std::vector<const router::Router*>& routers, observability::Metrics* metrics,
             size_t workers = 1);
  // Null for routes the table does not know (none when the table matches the snapshot).
  const CompiledRoute* find(const model::Route* route) const {
    if (route == nullptr) return nullptr;
    auto it = routes_.find(route);
    return it == routes_.end() ? nullptr : &it->second;
  }

 private:
  std::unordered_map<const model::Route*, CompiledRoute> routes_;
  // Holds the references on the label ids in routes_ for as long as a worker may record with
  // them (a worker records only with the table it holds).
  std::optional<observability::RouteMetricIds> metric_ids_;
};

// The request path after rewrite-target: the target with $1..$9 taken from `regex` matched at the
// start of `path` (a group that did not take part is empty), then the original query string.
// Without a regex, or when it does not match, "$N" expands to nothing.
std::string rewrite_path(std::string_view rewrite_target, const re2::RE2* regex,
                         std::string_view path, std::string_view query);

}  // namespace tidegate::dataplane::server
