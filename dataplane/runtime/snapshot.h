#pragma once
// One immutable configuration snapshot of the data plane: the model it came from, the compiled
// router and the resolved upstream endpoints. Built off the request path by the control server,
// then handed to every worker as a shared_ptr<const Snapshot> (see runtime/publisher.h).

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>

#include "balancer/cookie_affinity.h"
#include "balancer/upstream_balancer.h"
#include "filters/substitution/rule_set.h"
#include "filters/substitution/stream.h"
#include "model/model.h"
#include "router/router.h"
#include "runtime/persistent_map.h"
#include "tls/client_auth.h"

namespace tidegate::dataplane::runtime {

using Endpoint = boost::asio::ip::tcp::endpoint;

struct EndpointHash {
  size_t operator()(const Endpoint& e) const noexcept;
};

// Every endpoint of every upstream of a snapshot, each with the number of upstreams that list it
// (so that an update can take one upstream's endpoints out without looking at the others).
using EndpointSet = PersistentMap<Endpoint, uint32_t, EndpointHash>;

struct UpstreamState {
  std::string name;
  // Index i is balancer->table().endpoint(i): the balancer picks an index, this is its address.
  std::vector<Endpoint> endpoints;
  // TLS to the endpoints; null for plain HTTP. Shared with other snapshots and upstreams that
  // have the same CA bundle.
  std::shared_ptr<boost::asio::ssl::context> tls_context;
  std::string tls_server_name;  // SNI (unless an IP address), and the verified name
  bool tls_verify = false;
  // Pooled connections are reused only for the same (endpoint, tls_key): 0 is plain HTTP, other
  // values identify the server name and CA bundle.
  uint64_t tls_key = 0;
  // HTTP/2 to the endpoints (backend-protocol H2C, GRPC, GRPCS; appProtocol h2c): multiplexed
  // connections (upstream/http2_client.h) instead of the HTTP/1.1 pool.
  bool http2 = false;
  // Load balancing (load-balance, upstream-hash-by): never null. The only mutable state in a
  // snapshot: one Balancer per worker, each touched by its worker's thread only. An upstream
  // whose model did not change shares its state, balancer included, with the next snapshot; a
  // changed one gets a balancer built from the previous one (UpstreamBalancer::build), which is
  // the previous one itself when endpoints and policy are unchanged (a TLS change), and
  // otherwise shares the load figures of the endpoints that stay.
  std::shared_ptr<const balancer::UpstreamBalancer> balancer;
  // affinity: cookie. Its config's path is SessionAffinity::path, or "/" when that is empty and
  // the path comes from the route (affinity_cookie_path()).
  std::optional<balancer::CookieAffinity> affinity;
  bool affinity_path_from_route = false;
  // What it was built from: compared to reuse the state, and to reassemble Snapshot::config().
  model::Upstream model;
  // The upstream as configured apart from its endpoints (policy, TLS): a hash, part of the
  // response cache's keys, so that a change of the Service's settings purges the cache while
  // endpoint changes (scaling) keep it.
  uint64_t config_tag = 0;
};

// The Path of an affinity cookie set on a response of `route` (see SessionAffinity::path): the
// explicit path, else the route's path for Exact and Prefix routes and "/" for regex routes (or
// when the route's path is not a valid cookie path).
std::string_view affinity_cookie_path(const UpstreamState& upstream, const model::Route* route);

// The balancer's identity of an endpoint: "10.0.0.1:8080", "[fd00::1]:8080" (canonical address
// text), the key of hash rings and affinity cookies.
std::string endpoint_key(const Endpoint& endpoint);

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

// Upstream name -> state. Persistent (runtime/persistent_map.h): a snapshot that changes k
// upstreams shares all but about k leaves of 4,096 with the one before it.
using UpstreamMap = PersistentMap<std::string, std::shared_ptr<const UpstreamState>, StringHash>;

struct TlsEntry {
  // Points into Routing::config; null: the default certificate (a host with client
  // certificates but no certificate of its own).
  const model::Certificate* certificate = nullptr;
  uint64_t fingerprint = 0;
  // Client certificates asked for on this name (auth-tls-*); null: none.
  std::shared_ptr<const tls::CompiledClientAuth> client_auth;
  // ssl-passthrough: the upstream its TLS connections are relayed to; null: terminated here.
  const std::string* passthrough_upstream = nullptr;  // points into Routing::config
};

// A body substitution (model::Substitution) compiled once per snapshot; see
// docs/substitutions.md. Immutable; shared by every request of the snapshot's routes that name it.
struct CompiledSubstitution {
  std::string name;  // model::Substitution::name ("namespace/ingress")
  // Never null. The same object for every substitution of the snapshot with the same rules, and
  // carried over from the previous snapshot when the rules did not change. Give it to each
  // response's filters::SubstitutionStream.
  std::shared_ptr<const filters::RuleSet> rules;
  // Lower-case "type/subtype", sorted; see applies_to().
  std::vector<std::string> mime_types;
  // SubstitutionStreamOptions::max_buffer for each response.
  size_t max_buffer = filters::kDefaultSubstitutionMaxBuffer;
  // model::Substitution::rules_version(): the key of the memo of rules that never matched.
  uint64_t rules_version = 0;

  // Whether a response whose Content-Type header has this value is processed: its type/subtype
  // (parameters such as "; charset=utf-8" left out, spaces trimmed, case ignored) is one of
  // mime_types. An empty value is never processed.
  bool applies_to(std::string_view content_type) const;
};

// Everything of a snapshot that only a change of virtual hosts, default route, certificates, TLS
// hosts or substitutions can change, compiled once and shared by every following snapshot until
// such a change: a delta that changes upstreams only (an EndpointSlice change) builds a new
// Snapshot around the same Routing, so its cost does not grow with the number of hosts.
struct Routing {
  model::Config config;  // without upstreams: they are in Snapshot::upstreams
  std::unique_ptr<const router::Router> router;  // points into `config`
  // TLS server name (exact or "*.suffix") -> certificate.
  std::unordered_map<std::string, TlsEntry, StringHash, std::equal_to<>> tls_hosts;
  // Some TLS host asks for client certificates: requests look their host's entry up.
  bool client_auth = false;
  // Some TLS host is passed through: new TLS connections read the ClientHello's SNI first.
  bool passthrough = false;
  // Hosts whose plain-HTTP requests are redirected to HTTPS.
  std::unordered_set<std::string, StringHash, std::equal_to<>> ssl_redirect_hosts;
  // Hosts whose every request is redirected to another host (VirtualHost::redirect_to).
  std::unordered_map<std::string, std::string, StringHash, std::equal_to<>> host_redirects;
  // model::Substitution::name -> its compiled form.
  std::unordered_map<std::string, CompiledSubstitution, StringHash, std::equal_to<>> substitutions;
  // The compiled rules by their text (substitution_rules_key()), for the next snapshot to reuse.
  std::unordered_map<std::string, std::shared_ptr<const filters::RuleSet>> rule_sets;
  // Upstream names that a route or the default route names: those cannot be removed alone.
  std::unordered_set<std::string> referenced_upstreams;
  // The listeners of Gateways (model::Listener, docs/gateway-api.md): each one's router and TLS
  // names, built from the virtual and TLS hosts that name it. The maps above hold only the
  // hosts of the data plane's own listeners.
  using TlsHostMap = std::unordered_map<std::string, TlsEntry, StringHash, std::equal_to<>>;
  std::unordered_map<std::string, std::unique_ptr<const router::Router>, StringHash,
                     std::equal_to<>>
      listener_routers;
  std::unordered_map<std::string, TlsHostMap, StringHash, std::equal_to<>> listener_tls_hosts;
};

struct Snapshot {
  explicit Snapshot(std::shared_ptr<const Routing> shared_routing)
      : routing(std::move(shared_routing)),
        router(routing->router),
        tls_hosts(routing->tls_hosts),
        ssl_redirect_hosts(routing->ssl_redirect_hosts),
        substitutions(routing->substitutions),
        rule_sets(routing->rule_sets) {}
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;

  uint64_t version = 0;
  const std::shared_ptr<const Routing> routing;  // never null
  // Views of *routing under the names readers use (snapshot->router->match(...)).
  const std::unique_ptr<const router::Router>& router;
  const std::unordered_map<std::string, TlsEntry, StringHash, std::equal_to<>>& tls_hosts;
  const std::unordered_set<std::string, StringHash, std::equal_to<>>& ssl_redirect_hosts;
  const std::unordered_map<std::string, CompiledSubstitution, StringHash, std::equal_to<>>&
      substitutions;
  const std::unordered_map<std::string, std::shared_ptr<const filters::RuleSet>>& rule_sets;

  // Each state is shared with the previous snapshot when that upstream did not change, and so
  // is most of the table itself (update_upstreams copies the leaves it changes).
  UpstreamMap upstreams;
  EndpointSet all_endpoints;  // every endpoint of every upstream, with the number of upstreams

  // The whole model, reassembled from `routing` and the upstreams (a copy: for tests and dumps,
  // not for the request path).
  model::Config config() const;

  // The body substitution for the route a request matched (router::Match::route), or nullptr when
  // there is none (no route, or a route without substitution). Valid as long as this snapshot.
  const CompiledSubstitution* substitution_for(const model::Route* route) const {
    if (route == nullptr || route->substitution.empty()) return nullptr;
    auto it = substitutions.find(route->substitution);
    return it == substitutions.end() ? nullptr : &it->second;
  }

  // `name` lower case, without port or trailing dot. Exact first, then a one-label wildcard
  // ("*.suffix"), then the Gateway API's "**.suffix" (one or more labels, longest suffix first),
  // then "*" (a Gateway HTTPS listener's certificate for every other name) when there is one.
  const TlsEntry* find_tls(std::string_view name) const;
  const TlsEntry* find_catch_all_tls() const;
  // The same among the TLS names of `listener` (model::Listener::name; empty: as above).
  const TlsEntry* find_tls(std::string_view listener, std::string_view name) const;

  // The router of a connection accepted on `listener` (empty: the data plane's own listeners);
  // one that matches nothing when this snapshot has no such listener.
  const router::Router& router_for(std::string_view listener) const {
    if (listener.empty()) return *router;
    auto it = routing->listener_routers.find(listener);
    return it == routing->listener_routers.end() ? router::Router::empty() : *it->second;
  }

  const UpstreamState* upstream(std::string_view name) const {
    const auto* state = upstreams.get(name);
    return state == nullptr ? nullptr : state->get();
  }
};

// Validates `config` completely and compiles it. Returns null and sets *error on any problem;
// nothing is published in that case. Compiled substitution rules whose text did not change, and
// the states of upstreams that did not change, are taken from `previous` (the snapshot being
// served, or null) rather than built again.
std::shared_ptr<const Snapshot> build_snapshot(uint64_t version, model::Config config,
                                               size_t workers, std::string* error,
                                               const Snapshot* previous = nullptr);

// The snapshot `previous` with `remove` removed and then `upsert` inserted or replaced (the order
// of model::apply), sharing previous's Routing, its unchanged upstream states and the untouched
// parts of its upstream and endpoint tables: the cost is the changed upstreams (and their
// endpoints), whatever the number of upstreams, not a compilation of the routes nor a pass over
// the tables.
// Validates what changed exactly as build_snapshot validates it. Returns null with *error set on
// a problem; returns null with an empty *error when it cannot tell without a full build (a removed
// upstream that a route names), in which case the caller builds the whole configuration.
std::shared_ptr<const Snapshot> update_upstreams(uint64_t version, const Snapshot& previous,
                                                 const std::vector<model::Upstream>& upsert,
                                                 const std::vector<std::string>& remove,
                                                 size_t workers, std::string* error);

// The text that identifies a rule list: equal lists, equal keys (fields length-prefixed).
std::string substitution_rules_key(const std::vector<substitution::Rule>& rules);

}  // namespace tidegate::dataplane::runtime
