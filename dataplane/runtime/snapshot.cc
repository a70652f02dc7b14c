#include "runtime/snapshot.h"

#include <cstring>
#include <functional>
#include <string_view>

#include "tls/certificate_cache.h"
#include "tls/upstream_context.h"

namespace tidegate::dataplane::runtime {

const TlsEntry* Snapshot::find_tls(std::string_view name) const {
  if (tls_hosts.empty()) return nullptr;
  if (auto it = tls_hosts.find(name); it != tls_hosts.end()) return &it->second;
  auto dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0) return nullptr;
  char buf[256];
  std::string_view suffix = name.substr(dot);
  if (suffix.size() + 1 > sizeof buf) return nullptr;
  buf[0] = '*';
  std::memcpy(buf + 1, suffix.data(), suffix.size());
  auto it = tls_hosts.find(std::string_view(buf, suffix.size() + 1));
  return it == tls_hosts.end() ? nullptr : &it->second;
}

size_t EndpointHash::operator()(const Endpoint& e) const noexcept {
  const auto* data = reinterpret_cast<const char*>(e.data());
  return std::hash<std::string_view>{}(std::string_view(data, e.size()));
}

std::shared_ptr<const Snapshot> build_snapshot(uint64_t version, model::Config config,
                                               size_t workers, std::string* error) {
  auto problems = model::validate(config);
  if (!problems.empty()) {
    std::string joined;
    for (const auto& p : problems) {
      if (!joined.empty()) joined += "; ";
      joined += p;
    }
    *error = joined;
    return nullptr;
  }
  auto snap = std::make_shared<Snapshot>();
  snap->version = version;
  for (const auto& [name, up] : config.upstreams) {
    auto state = std::make_unique<UpstreamState>();
    state->name = name;
    const size_t n = workers == 0 ? 1 : workers;
    state->round_robin = std::make_unique<PerWorkerCounter[]>(n);
    // Workers start at different endpoints, so that the first requests of each worker (and few
    // requests spread over several workers) do not all go to the first endpoint.
    for (size_t w = 0; w < n; ++w) state->round_robin[w].value = w;
    for (const auto& ep : up.endpoints) {
      boost::system::error_code ec;
      auto addr = boost::asio::ip::make_address(ep.address, ec);
      if (ec) {
        *error = "upstream " + name + ": bad address \"" + ep.address + "\"";
        return nullptr;
      }
      Endpoint e(addr, ep.port);
      state->endpoints.push_back(e);
      snap->all_endpoints.insert(e);
    }
    if (up.tls.enabled) {
      std::string tls_error;
      state->tls_context = tls::upstream_context(up.tls.ca_pem, &tls_error);
      if (!state->tls_context) {
        *error = "upstream " + name + ": " + tls_error;
        return nullptr;
      }
      state->tls_server_name = up.tls.server_name;
      state->tls_verify = !up.tls.ca_pem.empty();
      uint64_t key = std::hash<std::string>{}(up.tls.server_name) * 31 +
                     std::hash<std::string>{}(up.tls.ca_pem);
      state->tls_key = key == 0 ? 1 : key;
    }
    snap->upstreams.emplace(name, std::move(state));
  }
  // The router may point into the model, so it is built from the snapshot's own copy.
  snap->config = std::move(config);
  for (const auto& [host, th] : snap->config.tls_hosts) {
    const auto& cert = snap->config.certificates.at(th.certificate);  // validated above
    snap->tls_hosts.emplace(host, TlsEntry{&cert, tls::fingerprint(cert)});
  }
  for (const auto& [host, vh] : snap->config.virtual_hosts) {
    if (vh.ssl_redirect) snap->ssl_redirect_hosts.insert(host);
  }
  std::string router_error;
  snap->router = router::Router::build(snap->config, &router_error);
  if (!snap->router) {
    *error = "router: " + router_error;
    return nullptr;
  }
  return snap;
}

}  // namespace tidegate::dataplane::runtime
