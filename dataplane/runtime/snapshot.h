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

  // `name` lower case, without port or trailing dot. Exact first, then a one-label wildcard.
  const TlsEntry* find_tls(std::string_view name) const;

  const UpstreamState* upstream(const std::string& name) const {
    auto it = upstreams.find(name);
    return it == upstreams.end() ? nullptr : it->second.get();
  }
};

// Validates `config` completely and compiles it. Returns null and sets *error on any problem;
// nothing is published in that case.
std::shared_ptr<const Snapshot> build_snapshot(uint64_t version, model::Config config,
                                               size_t workers, std::string* error);

}  // namespace tidegate::dataplane::runtime
