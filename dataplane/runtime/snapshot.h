#pragma once
// One immutable configuration snapshot of the data plane: the model it came from, the compiled
// router and the resolved upstream endpoints. Built off the request path by the control server,
// then handed to every worker as a shared_ptr<const Snapshot> (see runtime/publisher.h).

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>

#include "filters/substitution/rule_set.h"
#include "filters/substitution/stream.h"
#include "model/model.h"
#include "router/router.h"

namespace tidegate::dataplane::runtime {

using Endpoint = boost::asio::ip::tcp::endpoint;

struct EndpointHash {
  size_t operator()(const Endpoint& e) const noexcept;
};

// Round-robin position, one per worker so workers never share a cache line on the request path.
struct alignas(64) PerWorkerCounter {
  mutable uint64_t value = 0;
};

struct UpstreamState {
  std::string name;
  std::vector<Endpoint> endpoints;
  // TLS to the endpoints; null for plain HTTP. Shared with other snapshots and upstreams that
  // have the same CA bundle.
  std::shared_ptr<boost::asio::ssl::context> tls_context;
  std::string tls_server_name;  // SNI (unless an IP address), and the verified name
  bool tls_verify = false;
  // Pooled connections are reused only for the same (endpoint, tls_key): 0 is plain HTTP, other
  // values identify the server name and CA bundle.
  uint64_t tls_key = 0;
  // The only mutable state in a snapshot: indexed by worker id, each touched by one thread only.
  std::unique_ptr<PerWorkerCounter[]> round_robin;
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

struct TlsEntry {
  const model::Certificate* certificate = nullptr;  // points into Snapshot::config
  uint64_t fingerprint = 0;
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

struct Snapshot {
  uint64_t version = 0;
  model::Config config;
  std::unique_ptr<const router::Router> router;
  std::unordered_map<std::string, std::unique_ptr<UpstreamState>> upstreams;
  std::unordered_set<Endpoint, EndpointHash> all_endpoints;  // every endpoint of every upstream
  // TLS server name (exact or "*.suffix") -> certificate.
  std::unordered_map<std::string, TlsEntry, StringHash, std::equal_to<>> tls_hosts;
  // Hosts whose plain-HTTP requests are redirected to HTTPS.
  std::unordered_set<std::string, StringHash, std::equal_to<>> ssl_redirect_hosts;
  // model::Substitution::name -> its compiled form. Use substitution_for().
  std::unordered_map<std::string, CompiledSubstitution, StringHash, std::equal_to<>> substitutions;
  // The compiled rules by their text (substitution_rules_key()), for the next snapshot to reuse.
  std::unordered_map<std::string, std::shared_ptr<const filters::RuleSet>> rule_sets;

  // The body substitution for the route a request matched (router::Match::route), or nullptr when
  // there is none (no route, or a route without substitution). Valid as long as this snapshot.
  const CompiledSubstitution* substitution_for(const model::Route* route) const {
    if (route == nullptr || route->substitution.empty()) return nullptr;
    auto it = substitutions.find(route->substitution);
    return it == substitutions.end() ? nullptr : &it->second;
  }

  // `name` lower case, without port or trailing dot. Exact first, then a one-label wildcard.
  const TlsEntry* find_tls(std::string_view name) const;

  const UpstreamState* upstream(const std::string& name) const {
    auto it = upstreams.find(name);
    return it == upstreams.end() ? nullptr : it->second.get();
  }
};

// Validates `config` completely and compiles it. Returns null and sets *error on any problem;
// nothing is published in that case. Compiled substitution rules whose text did not change are
// taken from `previous` (the snapshot being served, or null) rather than compiled again.
std::shared_ptr<const Snapshot> build_snapshot(uint64_t version, model::Config config,
                                               size_t workers, std::string* error,
                                               const Snapshot* previous = nullptr);

// The text that identifies a rule list: equal lists, equal keys (fields length-prefixed).
std::string substitution_rules_key(const std::vector<substitution::Rule>& rules);

}  // namespace tidegate::dataplane::runtime
