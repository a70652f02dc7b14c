#include "runtime/snapshot.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <future>
#include <string_view>

#include <nlohmann/json.hpp>

#include "filters/substitution/stream.h"
#include "side_thread.h"
#include "tls/certificate_cache.h"
#include "tls/upstream_context.h"

namespace tidegate::dataplane::runtime {

namespace {

const TlsEntry* find_catch_all_in(const Routing::TlsHostMap& tls_hosts) {
  auto it = tls_hosts.find(std::string_view("*"));
  return it == tls_hosts.end() ? nullptr : &it->second;
}

const TlsEntry* find_tls_in(const Routing::TlsHostMap& tls_hosts, std::string_view name) {
  auto find_catch_all_tls = [&] { return find_catch_all_in(tls_hosts); };
  if (tls_hosts.empty()) return nullptr;
  if (auto it = tls_hosts.find(name); it != tls_hosts.end()) return &it->second;
  auto dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0) return find_catch_all_tls();
  char buf[256];
  std::string_view suffix = name.substr(dot);
  if (suffix.size() + 1 > sizeof buf) return find_catch_all_tls();
  buf[0] = '*';
  std::memcpy(buf + 1, suffix.data(), suffix.size());
  if (auto it = tls_hosts.find(std::string_view(buf, suffix.size() + 1)); it != tls_hosts.end()) {
    return &it->second;
  }
  // The Gateway API's wildcards ("**.suffix": one or more labels), the longest suffix first.
  buf[1] = '*';
  while (dot != std::string_view::npos && dot + 1 < name.size() && name[dot + 1] != '.') {
    suffix = name.substr(dot);  // ".rest"
    if (suffix.size() + 2 > sizeof buf) return find_catch_all_tls();
    std::memcpy(buf + 2, suffix.data(), suffix.size());
    if (auto it = tls_hosts.find(std::string_view(buf, suffix.size() + 2)); it != tls_hosts.end()) {
      return &it->second;
    }
    dot = name.find('.', dot + 1);
  }
  return find_catch_all_tls();
}

}  // namespace

const TlsEntry* Snapshot::find_tls(std::string_view name) const {
  return find_tls_in(tls_hosts, name);
}

const TlsEntry* Snapshot::find_catch_all_tls() const { return find_catch_all_in(tls_hosts); }

const TlsEntry* Snapshot::find_tls(std::string_view listener, std::string_view name) const {
  if (listener.empty()) return find_tls_in(tls_hosts, name);
  auto it = routing->listener_tls_hosts.find(listener);
  return it == routing->listener_tls_hosts.end() ? nullptr : find_tls_in(it->second, name);
}

static_assert(model::kDefaultSubstitutionMaxBuffer == filters::kDefaultSubstitutionMaxBuffer,
              "the model's default buffer is the stream's");

bool CompiledSubstitution::applies_to(std::string_view content_type) const {
  std::string_view type = content_type.substr(0, content_type.find(';'));
  while (!type.empty() && (type.front() == ' ' || type.front() == '\t')) type.remove_prefix(1);
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.remove_suffix(1);
  if (type.empty()) return false;
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (const auto& want : mime_types) {
    if (want.size() != type.size()) continue;
    bool same = true;
    for (size_t i = 0; same && i < want.size(); ++i) same = lower(type[i]) == want[i];
    if (same) return true;
  }
  return false;
}

std::string substitution_rules_key(const std::vector<substitution::Rule>& rules) {
  std::string key;
  for (const auto& r : rules) {
    for (const std::string* field : {&r.match, &r.replace, &r.flags}) {
      key += std::to_string(field->size());
      key += ':';
      key += *field;
    }
  }
  return key;
}

namespace {

// Compiles each substitution of routing.config, sharing one RuleSet between equal rule lists.
// Returns the reason for a NACK, or an empty string.
std::string compile_substitutions(Routing& snap, const Snapshot* previous) {
  for (const auto& [name, sub] : snap.config.substitutions) {
    std::string key = substitution_rules_key(sub.rules);
    std::shared_ptr<const filters::RuleSet> rules;
    if (auto it = snap.rule_sets.find(key); it != snap.rule_sets.end()) {
      rules = it->second;
    } else if (previous != nullptr) {
      if (auto old = previous->rule_sets.find(key); old != previous->rule_sets.end()) {
        rules = old->second;
      }
    }
    if (!rules) {
      filters::CompileResult compiled = filters::RuleSet::compile(sub.rules);
      // model::validate checked each rule with the same code, so only the rules together (too
      // large for RE2) can fail here; a partial rule set would silently change the semantics.
      if (!compiled.errors.empty() || !compiled.rules) {
        return "substitution " + name + ": " +
               (compiled.errors.empty() ? std::string("no rule compiled")
                                        : compiled.errors.front().message);
      }
      rules = std::move(compiled.rules);
    }
    snap.rule_sets.emplace(std::move(key), rules);
    snap.substitutions.emplace(
        name, CompiledSubstitution{name, std::move(rules), sub.mime_types,
                                   static_cast<size_t>(sub.max_buffer), sub.rules_version()});
  }
  return {};
}

balancer::Method balance_method(model::LoadBalance lb) {
  switch (lb) {
    case model::LoadBalance::kLeastConn:
      return balancer::Method::kLeastConn;
    case model::LoadBalance::kIpHash:
      return balancer::Method::kIpHash;
    case model::LoadBalance::kEwma:
      return balancer::Method::kEwma;
    case model::LoadBalance::kRoundRobin:
      break;
  }
  return balancer::Method::kRoundRobin;
}

balancer::SameSite same_site(model::SameSite s) {
  switch (s) {
    case model::SameSite::kLax:
      return balancer::SameSite::kLax;
    case model::SameSite::kStrict:
      return balancer::SameSite::kStrict;
    case model::SameSite::kNone:
      return balancer::SameSite::kNone;
    case model::SameSite::kUnset:
      break;
  }
  return balancer::SameSite::kUnset;
}

// The balancing policy of `up`; the compiled hash-by expression is taken from `previous` (may be
// null) when its text is the same. Null with *error when the expression does not compile.
std::optional<balancer::Policy> balance_policy(const model::Upstream& up,
                                               const balancer::UpstreamBalancer* previous,
                                               std::string* error) {
  balancer::Policy policy;
  policy.method = balance_method(up.policy->load_balance);
  if (!up.policy->hash_by.empty()) {
    // upstream-hash-by overrides load-balance (lib/model/policy.h).
    policy.method = balancer::Method::kConsistentHash;
    const auto& before = previous != nullptr ? previous->table().policy().hash_by : nullptr;
    if (before && before->text() == up.policy->hash_by) {
      policy.hash_by = before;
    } else {
      std::string why;
      policy.hash_by = balancer::HashExpression::compile(up.policy->hash_by, &why);
      if (!policy.hash_by) {
        *error = "upstream " + up.name + ": hash_by: " + why;
        return std::nullopt;
      }
    }
  }
  return policy;
}

// The state of one upstream; `reuse` (from the previous snapshot, or null) when its model is the
// same. Returns null with *error set on a problem.
// `up` is taken by value and kept as the state's model at the end: the full build moves each
// upstream of its Config in (a copy of each, and the tag's text, were 6 % of the instructions
// of a first snapshot's build).
std::shared_ptr<const UpstreamState> build_upstream(
    model::Upstream up, size_t workers, const UpstreamState* reuse,
    const std::shared_ptr<const UpstreamState>& owner, std::string* error) {
  if (reuse != nullptr && reuse->model == up) return owner;
  auto state = std::make_shared<UpstreamState>();
  state->name = up.name;
  // Most upstreams have the default policy: its text's hash is computed once, not per upstream
  // (a JSON document per upstream was a twentieth of a first snapshot's build at 10,000).
  static const size_t kDefaultPolicy =
      std::hash<std::string>{}(model::to_json(model::UpstreamPolicy{}).dump());
  const size_t policy_hash = up.policy.is_default()
                                 ? kDefaultPolicy
                                 : std::hash<std::string>{}(model::to_json(*up.policy).dump());
  // The parts hashed apart and combined (boost::hash_combine's mixing), without a string of them.
  size_t tag = policy_hash;
  for (size_t part :
       {std::hash<bool>{}(up.tls.enabled), std::hash<std::string>{}(up.tls.server_name),
        std::hash<std::string>{}(up.tls.ca_pem)}) {
    tag ^= part + 0x9e3779b97f4a7c15ULL + (tag << 6) + (tag >> 2);
  }
  state->config_tag = tag;
  std::vector<balancer::EndpointSpec> specs;
  specs.reserve(up.endpoints.size());
  for (const auto& ep : up.endpoints) {
    boost::system::error_code ec;
    auto addr = boost::asio::ip::make_address(ep.address, ec);
    if (ec) {
      *error = "upstream " + up.name + ": bad address \"" + ep.address + "\"";
      return nullptr;
    }
    state->endpoints.emplace_back(addr, ep.port);
    // The model has no weights yet: every endpoint weighs 1.
    specs.push_back({endpoint_key(state->endpoints.back()), 1});
  }
  const balancer::UpstreamBalancer* previous = reuse != nullptr ? reuse->balancer.get() : nullptr;
  auto policy = balance_policy(up, previous, error);
  if (!policy) return nullptr;
  std::string why;
  state->balancer =
      balancer::UpstreamBalancer::build(std::move(specs), std::move(*policy), workers,
                                        reuse != nullptr ? reuse->balancer : nullptr, &why);
  if (!state->balancer) {
    *error = "upstream " + up.name + ": " + why;
    return nullptr;
  }
  if (up.policy->affinity) {
    const model::SessionAffinity& a = *up.policy->affinity;
    balancer::AffinityConfig config;
    config.cookie_name = a.cookie_name;
    if (a.max_age_seconds) config.max_age = std::chrono::seconds(*a.max_age_seconds);
    config.path = a.path.empty() ? "/" : a.path;
    config.secure = a.secure;
    config.same_site = same_site(a.same_site);
    config.domain = a.domain;
    if (a.expires_seconds) config.expires = std::chrono::seconds(*a.expires_seconds);
    if (auto problem = config.validate()) {
      *error = "upstream " + up.name + ": affinity: " + *problem;
      return nullptr;
    }
    state->affinity.emplace(std::move(config));
    state->affinity_path_from_route = a.path.empty();
  }
  state->http2 = model::uses_http2(up.policy->protocol);
  if (up.tls.enabled) {
    std::string tls_error;
    state->tls_context = tls::upstream_context(up.tls.ca_pem, &tls_error);
    if (!state->tls_context) {
      *error = "upstream " + up.name + ": " + tls_error;
      return nullptr;
    }
    state->tls_server_name = up.tls.server_name;
    state->tls_verify = !up.tls.ca_pem.empty();
    uint64_t key =
        std::hash<std::string>{}(up.tls.server_name) * 31 + std::hash<std::string>{}(up.tls.ca_pem);
    state->tls_key = key == 0 ? 1 : key;
  }
  state->model = std::move(up);
  return state;
}

// RFC 6265 section 4.1.1 cookie path characters: printable ASCII other than ';'.
bool valid_cookie_path(std::string_view path) {
  if (path.empty() || path.front() != '/') return false;
  for (char c : path) {
    if (c < 0x21 || c > 0x7e || c == ';') return false;
  }
  return true;
}

std::string join(const std::vector<std::string>& problems) {
  std::string joined;
  for (const auto& p : problems) {
    if (!joined.empty()) joined += "; ";
    joined += p;
  }
  return joined;
}

// Snapshot::all_endpoints counts, for each endpoint, how many times the upstreams list it, so that
// an update adds the endpoints of the states it puts in and takes out those of the states it
// replaces or removes, and gets the set that a pass over every upstream would give without making
// that pass.
void add_endpoints(EndpointSet::Transient& all, const UpstreamState& state) {
  for (const auto& e : state.endpoints) {
    const uint32_t* n = all.get(e);
    all.insert_or_assign(e, n == nullptr ? 1 : *n + 1);
  }
}

void remove_endpoints(EndpointSet::Transient& all, const UpstreamState& state) {
  for (const auto& e : state.endpoints) {
    const uint32_t* n = all.get(e);
    if (n == nullptr) continue;  // not reached: the state's endpoints were added
    if (*n <= 1) {
      all.erase(e);
    } else {
      all.insert_or_assign(e, *n - 1);
    }
  }
}

}  // namespace

std::string endpoint_key(const Endpoint& endpoint) {
  const auto address = endpoint.address();
  std::string key;
  if (address.is_v6()) {
    key = "[" + address.to_string() + "]";
  } else {
    // Written here: Asio's to_string goes through inet_ntop and sprintf, a tenth of a first
    // snapshot's build at 10,000 upstreams.
    const auto bytes = address.to_v4().to_bytes();
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (i != 0) key += '.';
      key += std::to_string(bytes[i]);
    }
  }
  key += ':';
  key += std::to_string(endpoint.port());
  return key;
}

std::string_view affinity_cookie_path(const UpstreamState& upstream, const model::Route* route) {
  if (!upstream.affinity) return "/";
  if (!upstream.affinity_path_from_route) return upstream.affinity->config().path;
  if (route == nullptr || route->match == model::PathMatch::kRegex ||
      !valid_cookie_path(route->path)) {
    return "/";
  }
  return route->path;
}

size_t EndpointHash::operator()(const Endpoint& e) const noexcept {
  const auto* data = reinterpret_cast<const char*>(e.data());
  return std::hash<std::string_view>{}(std::string_view(data, e.size()));
}

model::Config Snapshot::config() const {
  model::Config c = routing->config;
  for (const auto& [name, state] : upstreams) c.upstreams.emplace(name, state->model);
  return c;
}

namespace {

// The routing of `routing.config` (TLS hosts, redirects, referenced upstreams, substitutions,
// routers), or the reason it cannot be built.
std::string build_routing(Routing& routing, const Snapshot* previous) {
  for (const auto& [key, th] : routing.config.tls_hosts) {
    const std::string& host = th.host;
    TlsEntry entry;
    if (!th.passthrough_upstream.empty()) {
      entry.passthrough_upstream = &th.passthrough_upstream;
      routing.passthrough = true;
      routing.referenced_upstreams.insert(th.passthrough_upstream);
    }
    if (!th.certificate.empty()) {
      const auto& cert = routing.config.certificates.at(th.certificate);  // validated above
      entry.certificate = &cert;
      entry.fingerprint = tls::fingerprint(cert);
    }
    if (th.client_auth) {
      std::string problem;
      entry.client_auth = tls::CompiledClientAuth::build(*th.client_auth, &problem);
      if (!entry.client_auth) {
        return "TLS host " + host + ": " + problem;
      }
      routing.client_auth = true;
    }
    if (th.listener.empty()) {
      routing.tls_hosts.emplace(host, std::move(entry));
    } else {
      routing.listener_tls_hosts[th.listener].emplace(host, std::move(entry));
    }
  }
  for (const auto& [key, vh] : routing.config.virtual_hosts) {
    const std::string& host = vh.host;
    if (vh.listener.empty()) {
      if (vh.ssl_redirect) routing.ssl_redirect_hosts.insert(host);
      if (!vh.redirect_to.empty()) routing.host_redirects.emplace(host, vh.redirect_to);
    }
    for (const auto& r : vh.routes) {
      routing.referenced_upstreams.insert(r.upstream);
      if (!r.fallback_upstream.empty()) routing.referenced_upstreams.insert(r.fallback_upstream);
      for (const auto& b : r.backends) {
        if (!b.upstream.empty()) routing.referenced_upstreams.insert(b.upstream);
      }
      for (const auto& m : r.policy->mirrors) routing.referenced_upstreams.insert(m.upstream);
    }
  }
  if (routing.config.default_route) {
    routing.referenced_upstreams.insert(routing.config.default_route->upstream);
    if (const auto& f = routing.config.default_route->fallback_upstream; !f.empty()) {
      routing.referenced_upstreams.insert(f);
    }
  }
  if (std::string problem = compile_substitutions(routing, previous); !problem.empty()) {
    return problem;
  }
  std::string router_error;
  // The routers point into routing.config (which lives as long as they do) rather than copy it.
  routing.router = router::Router::build_borrowing(routing.config, {}, &router_error);
  if (!routing.router) return "router: " + router_error;
  for (const auto& [name, listener] : routing.config.listeners) {
    auto router = router::Router::build_borrowing(routing.config, name, &router_error);
    if (!router) return "router of listener " + name + ": " + router_error;
    routing.listener_routers.emplace(name, std::move(router));
  }
  return "";
}

// From this many upstreams on, a full configuration's are built by two threads.
constexpr size_t kUpstreamsForAThread = 1000;

// Builds models[begin, end) into states[begin, end). False, with *error set, at the first that
// cannot be built.
bool build_range(std::vector<model::Upstream>& models,
                 std::vector<std::shared_ptr<const UpstreamState>>& states, size_t begin,
                 size_t end, size_t workers, const Snapshot* previous, std::string* error) {
  for (size_t i = begin; i < end; ++i) {
    const UpstreamState* reuse = nullptr;
    std::shared_ptr<const UpstreamState> owner;
    if (previous != nullptr) {
      if (const auto* state = previous->upstreams.get(models[i].name); state != nullptr) {
        owner = *state;
        reuse = owner.get();
      }
    }
    states[i] = build_upstream(std::move(models[i]), workers, reuse, owner, error);
    if (!states[i]) return false;
  }
  return true;
}

}  // namespace

std::shared_ptr<const Snapshot> build_snapshot(uint64_t version, model::Config config,
                                               size_t workers, std::string* error,
                                               const Snapshot* previous) {
  auto problems = model::validate(config);
  if (!problems.empty()) {
    *error = join(problems);
    return nullptr;
  }
  // The upstreams are built beside the routing: each upstream's state comes from its model
  // alone, and a full configuration's build is the last step of a start before serving
  // (docs/benchmarks.md, "Start-up at scale"). With many, a second thread builds the first two
  // thirds while this one builds the routing and then the rest.
  std::vector<model::Upstream> models;
  models.reserve(config.upstreams.size());
  for (auto& [name, up] : config.upstreams) models.push_back(std::move(up));
  config.upstreams.clear();
  std::vector<std::shared_ptr<const UpstreamState>> states(models.size());
  const size_t split = models.size() >= kUpstreamsForAThread ? models.size() * 2 / 3 : 0;
  std::string helper_error;
  // (Declared after what it uses: on an early return its destructor waits for it first.)
  std::future<bool> helper = run_beside(split > 0, [&] {
    return build_range(models, states, 0, split, workers, previous, &helper_error);
  });

  // The router may point into the model, so it is built from the Routing's own copy.
  auto routing = std::make_shared<Routing>();
  routing->config = std::move(config);
  std::string routing_error = build_routing(*routing, previous);
  // An upstream's error is reported before the routing's, as when the upstreams were built first:
  // the rest are built even when the routing failed, to find the first upstream that cannot be.
  std::string rest_error;
  const bool rest_built =
      build_range(models, states, split, models.size(), workers, previous, &rest_error);
  if (!helper.get()) {
    *error = std::move(helper_error);  // the first upstream, in name order, that failed
    return nullptr;
  }
  if (!rest_built) {
    *error = std::move(rest_error);
    return nullptr;
  }
  if (!routing_error.empty()) {
    *error = std::move(routing_error);
    return nullptr;
  }
  UpstreamMap::Transient upstreams;
  EndpointSet::Transient all_endpoints;
  for (auto& state : states) {
    add_endpoints(all_endpoints, *state);
    const std::string& name = state->name;
    upstreams.insert_or_assign(name, std::move(state));
  }
  auto snap = std::make_shared<Snapshot>(std::move(routing));
  snap->version = version;
  snap->upstreams = std::move(upstreams).persistent();
  snap->all_endpoints = std::move(all_endpoints).persistent();
  return snap;
}

std::shared_ptr<const Snapshot> update_upstreams(uint64_t version, const Snapshot& previous,
                                                 const std::vector<model::Upstream>& upsert,
                                                 const std::vector<std::string>& remove,
                                                 size_t workers, std::string* error) {
  error->clear();
  auto snap = std::make_shared<Snapshot>(previous.routing);
  snap->version = version;
  // Copies of the previous tables that copy only what is written (runtime/persistent_map.h).
  UpstreamMap::Transient upstreams(previous.upstreams);
  EndpointSet::Transient all_endpoints(previous.all_endpoints);
  for (const auto& name : remove) {
    auto removed = upstreams.erase(name);
    if (!removed) {
      *error = "remove of unknown upstream \"" + name + "\"";
      return nullptr;
    }
    remove_endpoints(all_endpoints, **removed);
  }
  for (const auto& name : remove) {
    // Unless the delta puts it back, the full build names the route that lost it.
    if (previous.routing->referenced_upstreams.contains(name) &&
        std::none_of(upsert.begin(), upsert.end(),
                     [&](const model::Upstream& u) { return u.name == name; })) {
      return nullptr;
    }
  }
  // As model::apply, the last upsert of a name wins; earlier ones are not looked at.
  std::unordered_map<std::string_view, size_t> last;
  for (size_t i = 0; i < upsert.size(); ++i) last[upsert[i].name] = i;
  for (size_t i = 0; i < upsert.size(); ++i) {
    const model::Upstream& up = upsert[i];
    if (last[up.name] != i) continue;
    // The checks model::validate makes on an upstream, on this one alone.
    model::Config alone;
    model::Upstream& checked = alone.upstreams.emplace(up.name, up).first->second;
    if (auto problems = model::validate(alone); !problems.empty()) {
      *error = join(problems);
      return nullptr;
    }
    const UpstreamState* reuse = nullptr;
    std::shared_ptr<const UpstreamState> owner;
    if (const auto* state = previous.upstreams.get(up.name); state != nullptr) {
      owner = *state;
      reuse = owner.get();
    }
    auto state = build_upstream(std::move(checked), workers, reuse, owner, error);  // one copy
    if (!state) return nullptr;
    if (const auto* now = upstreams.get(up.name); now != nullptr && *now == state) {
      continue;  // unchanged (and not removed above): the tables stay shared
    }
    add_endpoints(all_endpoints, *state);
    if (auto replaced = upstreams.insert_or_assign(up.name, std::move(state))) {
      remove_endpoints(all_endpoints, **replaced);
    }
  }
  snap->upstreams = std::move(upstreams).persistent();
  snap->all_endpoints = std::move(all_endpoints).persistent();
  return snap;
}

}  // namespace tidegate::dataplane::runtime
