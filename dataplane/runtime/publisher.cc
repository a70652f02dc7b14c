#include "runtime/publisher.h"

#include "log/log.h"
#include "tls/tls_context.h"

namespace tidegate::dataplane::runtime {

std::string Publisher::publish(uint64_t version, model::Config config) {
  std::string error;
  auto snap = build_snapshot(version, std::move(config), workers_, &error, current_.get());
  if (!snap) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return error;
  }
  return publish(std::move(snap));
}

std::string Publisher::publish(std::shared_ptr<const Snapshot> snap) {
  const uint64_t version = snap->version;
  const std::shared_ptr<const Routing> previous_routing =
      current_ ? current_->routing : std::shared_ptr<const Routing>();
  current_ = snap;
  for (auto& sink : sinks_) sink(snap);
  version_.store(version, std::memory_order_release);
  ready_.store(true, std::memory_order_release);
  applied_.fetch_add(1, std::memory_order_relaxed);
  TG_INFO("runtime", "serving configuration version "
                         << version << " (" << snap->routing->config.virtual_hosts.size()
                         << " hosts, " << snap->upstreams.size() << " upstreams"
                         << (snap->routing == previous_routing ? ", routing unchanged" : "")
                         << ")");
  return {};
}

std::string Publisher::check_certificates(const std::vector<const model::Certificate*>& certs) {
  for (const auto* cert : certs) {
    auto check = tls::check_certificate(cert->cert_pem, cert->key_pem);
    if (!check.error.empty()) {
      rejected_.fetch_add(1, std::memory_order_relaxed);
      return "certificate " + cert->name + ": " + check.error;
    }
    if (check.expired || check.not_yet_valid) {
      expired_.fetch_add(1, std::memory_order_relaxed);
      TG_WARN("tls", "certificate " << cert->name << " is "
                                    << (check.expired ? "expired" : "not yet valid")
                                    << "; serving it anyway");
    }
  }
  return {};
}

std::string Publisher::apply_snapshot(const protocol::Snapshot& msg) {
  return apply_snapshot(protocol::Snapshot(msg));
}

std::string Publisher::apply_snapshot(protocol::Snapshot&& msg) {
  std::vector<const model::Certificate*> certs;
  for (const auto& [_, cert] : msg.config.certificates) certs.push_back(&cert);
  if (auto error = check_certificates(certs); !error.empty()) return error;
  return publish(msg.version, std::move(msg.config));
}

std::string Publisher::apply_delta(const protocol::DeltaMsg& msg) {
  uint64_t have = current_ ? current_->version : 0;
  if (!current_ || msg.base != have) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return "delta base " + std::to_string(msg.base) + " does not match the serving version " +
           std::to_string(have) + "; send a snapshot";
  }
  std::vector<const model::Certificate*> certs;
  for (const auto& cert : msg.delta.upsert_certificates) certs.push_back(&cert);
  if (auto error = check_certificates(certs); !error.empty()) return error;
  const model::Delta& d = msg.delta;
  const bool upstreams_only =
      d.upsert_virtual_hosts.empty() && d.remove_virtual_hosts.empty() &&
      !d.default_route_changed && d.upsert_certificates.empty() && d.remove_certificates.empty() &&
      d.upsert_tls_hosts.empty() && d.remove_tls_hosts.empty() && d.upsert_substitutions.empty() &&
      d.remove_substitutions.empty() && d.upsert_listeners.empty() && d.remove_listeners.empty();
  if (upstreams_only) {
    // The EndpointSlice path: the routes are kept as compiled, only the upstreams change.
    std::string error;
    auto snap = update_upstreams(msg.version, *current_, d.upsert_upstreams, d.remove_upstreams,
                                 workers_, &error);
    if (snap) return publish(std::move(snap));
    if (!error.empty()) {
      rejected_.fetch_add(1, std::memory_order_relaxed);
      return error;
    }
    // A removed upstream that a route names: the full build below names the route.
  }
  auto result = model::apply(current_->config(), msg.delta);
  if (!result.error.empty()) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return result.error;
  }
  return publish(msg.version, std::move(result.config));
}

}  // namespace tidegate::dataplane::runtime
