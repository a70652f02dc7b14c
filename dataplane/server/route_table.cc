#include "server/route_table.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace tidegate::dataplane::server {

namespace {

// A policy's CIDR list as one set; nullopt when it is empty or an entry does not compile (the
// controller and model::validate refuse both; each caller says what that means for it).
std::optional<ratelimit::CidrSet> compile_cidrs(const std::vector<std::string>& cidrs) {
  if (cidrs.empty()) return std::nullopt;
  std::string joined;
  for (const auto& cidr : cidrs) {
    if (!joined.empty()) joined += ',';
    joined += cidr;
  }
  std::string error;
  return ratelimit::CidrSet::parse(joined, &error);
}

}  // namespace

RouteTable::RouteTable(const std::vector<const router::Router*>& routers,
                       observability::Metrics* metrics, size_t workers) {
  if (metrics != nullptr) metric_ids_.emplace(routers, *metrics);
  for (const router::Router* router : routers) {
    router->for_each_route([&](std::string_view host, const model::Route& route) {
      CompiledRoute& c = routes_[&route];
      if (route.policy->cache) {
        std::string identity(host);
        identity += '\n' + route.path + '\n' + std::string(model::to_string(route.match)) + '\n' +
                    route.upstream + '\n' + route.ingress + '\n' + route.substitution + '\n' +
                    route.fallback_upstream + '\n' + model::to_json(*route.policy).dump();
        if (route.canary) identity += '\n' + model::to_json(*route.canary).dump();
        nlohmann::json conditions = nlohmann::json::object();
        model::conditions_to_json(route, conditions);
        if (!conditions.empty()) identity += '\n' + conditions.dump();
        c.cache_tag = std::hash<std::string>{}(identity);
      }
      if (metric_ids_) {
        c.labels = metric_ids_->find(&route);
        c.canary_labels = metric_ids_->find_canary(&route);
      }
      const model::RoutePolicy& policy = *route.policy;
      if (policy.source_ranges) {
        // An empty allow list (what an invalid one became) or one that still fails to compile
        // denies everyone rather than opening the route.
        auto set = compile_cidrs(policy.source_ranges->cidrs);
        c.source_ranges = set ? std::move(*set) : ratelimit::CidrSet{};
      }
      if (policy.deny_ranges) {
        // A deny list that fails to compile denies everyone too.
        c.deny_ranges = compile_cidrs(policy.deny_ranges->cidrs);
        c.deny_all = !c.deny_ranges;
      }
      const model::RateLimits& limits = policy.rate_limits;
      if (limits.rps) {
        ratelimit::RateLimitConfig config;
        config.rps = *limits.rps;
        config.burst_multiplier = limits.burst_multiplier;
        // Validated by model::validate; a configuration the engine still refuses is not limited
        // (and says so in the data plane's log).
        if (!config.validate()) c.rate_limiter = std::make_unique<ratelimit::RateLimiter>(config);
      }
      if (limits.rpm) {
        // rpm per minute as a per-second rate, with a bucket of rpm × multiplier requests.
        ratelimit::RateLimitConfig config;
        config.rps = *limits.rpm / 60;
        config.burst_multiplier = limits.burst_multiplier * 60;
        if (!config.validate()) c.rpm_limiter = std::make_unique<ratelimit::RateLimiter>(config);
      }
      if (limits.connections) {
        c.connection_limiter = ratelimit::ConnectionLimiter::create(*limits.connections);
      }
      c.limit_allowlist = compile_cidrs(limits.allowlist);  // failing: nobody exempt
      if (policy.cors) c.cors.emplace(*policy.cors);
      if (policy.hsts) c.hsts = model::hsts_value(*policy.hsts);
      if (policy.basic_auth) {
        c.basic_auth =
            std::make_unique<BasicAuthCheck>(*policy.basic_auth, std::max<size_t>(workers, 1));
      }
      if (policy.external_auth) {
        c.external_auth = std::make_unique<CompiledExternalAuth>(*policy.external_auth,
                                                                 std::max<size_t>(workers, 1));
      }
      if (route.canary && !route.canary->header_pattern.empty()) {
        re2::RE2::Options options;
        options.set_log_errors(false);
        auto pattern = std::make_unique<re2::RE2>(route.canary->header_pattern, options);
        if (pattern->ok()) c.canary_pattern = std::move(pattern);
      }
      if (route.canary || !route.backends.empty()) {
        c.canary_workers = std::max<size_t>(workers, 1);
        c.canary_turns = std::make_unique<CompiledRoute::Turn[]>(c.canary_workers);
      }
      if (!policy.rewrite_target.empty() && route.match == model::PathMatch::kRegex &&
          model::max_capture_reference(policy.rewrite_target) > 0) {
        re2::RE2::Options options;
        options.set_log_errors(false);
        auto regex = std::make_unique<re2::RE2>(route.path, options);
        if (regex->ok()) c.rewrite_regex = std::move(regex);
      }
    });
  }
}

std::string rewrite_path(std::string_view rewrite_target, const re2::RE2* regex,
                         std::string_view path, std::string_view query) {
  constexpr int kMaxGroups = 9;
  re2::StringPiece groups[kMaxGroups + 1];
  int ngroups = 0;
  if (regex != nullptr) {
    ngroups = std::min(kMaxGroups, regex->NumberOfCapturingGroups());
    re2::StringPiece input(path.data(), path.size());
    if (!regex->Match(input, 0, input.size(), re2::RE2::ANCHOR_START, groups, ngroups + 1)) {
      ngroups = -1;  // no match: every $N is empty
    }
  }
  std::string out;
  out.reserve(rewrite_target.size() + path.size() + query.size() + 1);
  for (size_t i = 0; i < rewrite_target.size(); ++i) {
    char c = rewrite_target[i];
    if (c == '$' && i + 1 < rewrite_target.size() && rewrite_target[i + 1] >= '1' &&
        rewrite_target[i + 1] <= '9') {
      int n = rewrite_target[i + 1] - '0';
      if (n <= ngroups) out.append(groups[n].data(), groups[n].size());
      ++i;
      continue;
    }
    out += c;
  }
  if (out.empty() || out.front() != '/') out.insert(out.begin(), '/');
  if (!query.empty()) {
    out += '?';
    out.append(query.data(), query.size());
  }
  return out;
}

}  // namespace tidegate::dataplane::server
