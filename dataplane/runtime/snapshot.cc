#include "runtime/snapshot.h"

#include <cstring>
#include <functional>
#include <string_view>

#include "filters/substitution/stream.h"
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

// Compiles each substitution of snap->config, sharing one RuleSet between equal rule lists.
// Returns the reason for a NACK, or an empty string.
std::string compile_substitutions(Snapshot& snap, const Snapshot* previous) {
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

}  // namespace

size_t EndpointHash::operator()(const Endpoint& e) const noexcept {
  const auto* data = reinterpret_cast<const char*>(e.data());
  return std::hash<std::string_view>{}(std::string_view(data, e.size()));
}

std::shared_ptr<const Snapshot> build_snapshot(uint64_t version, model::Config config,
                                               size_t workers, std::string* error,
                                               const Snapshot* previous) {
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
  if (std::string problem = compile_substitutions(*snap, previous); !problem.empty()) {
    *error = problem;
    return nullptr;
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
