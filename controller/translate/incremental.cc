#include "translate/incremental.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

#include "translate/endpoints.h"

namespace tidegate::controller::translate {

const char* to_string(UpdatePath p) {
  switch (p) {
    case UpdatePath::kNone:
      return "unchanged";
    case UpdatePath::kEndpoints:
      return "endpoints only";
    case UpdatePath::kFull:
      return "full";
  }
  return "?";
}

namespace {

// An upstream name's port part ("80" or "http", as the Ingress wrote it) as a PortRef.
objects::PortRef port_ref(const std::string& text) {
  objects::PortRef ref;
  const bool digits =
      !text.empty() && text.size() <= 5 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits) {
    ref.number = std::stoi(text);
  } else {
    ref.name = text;
  }
  return ref;
}

}  // namespace

const TranslateResult& IncrementalTranslator::update(const store::Store& store,
                                                     const store::Changes& changes) {
  last_upstreams_updated_ = 0;
  last_changed_.clear();
  if (result_ && changes.empty()) {
    last_path_ = UpdatePath::kNone;
  } else if (result_ && changes.endpoints_only()) {
    last_path_ = UpdatePath::kEndpoints;
    update_endpoints(store, changes);
  } else {
    last_path_ = UpdatePath::kFull;
    result_ = std::make_shared<TranslateResult>(translate(store, options_));
  }
  return *result_;
}

void IncrementalTranslator::update_endpoints(const store::Store& store,
                                             const store::Changes& changes) {
  TranslateResult& result = *result_;
  // Warnings about the changed slices are recomputed below (when the slice still feeds one of our
  // upstreams); those about unchanged slices stand, as their inputs did not change.
  std::erase_if(result.diagnostics, [&](const Diagnostic& d) {
    return d.object.starts_with("EndpointSlice ") &&
           changes.slices.contains(d.object.substr(sizeof("EndpointSlice ") - 1));
  });
  std::set<std::pair<std::string, std::string>> present;
  for (const auto& d : result.diagnostics) {
    if (d.severity == Severity::kWarning) present.emplace(d.object, d.message);
  }
  auto warn = [&](std::string object, std::string message) {
    if (present.emplace(object, message).second) {
      result.diagnostics.push_back(
          Diagnostic{std::move(object), std::move(message), Severity::kWarning});
    }
  };
  auto& upstreams = result.config.upstreams;
  for (const auto& service_key : changes.services) {
    // Upstreams are named "ns/service:port"; ':' cannot occur in a Service name.
    const std::string prefix = service_key + ":";
    auto service = store.services().find(service_key);
    for (auto it = upstreams.lower_bound(prefix);
         it != upstreams.end() && it->first.starts_with(prefix); ++it) {
      // Only slices changed, so the Service and its port resolve as in the full translation
      // that produced this upstream.
      if (service == store.services().end()) continue;
      // Left empty on purpose by the full translation (an unusable CA for an HTTPS upstream).
      if (result.fail_closed_upstreams.contains(it->first)) continue;
      // service-upstream: the ClusterIP, whatever the slices say.
      if (result.service_ip_upstreams.contains(it->first)) continue;
      // "ns/service:port" or, for HTTPS, "ns/service:port+https".
      std::string port_text = it->first.substr(prefix.size());
      port_text = port_text.substr(0, port_text.find('+'));
      const objects::ServicePort* port = find_service_port(service->second, port_ref(port_text));
      if (port == nullptr) continue;
      auto endpoints = endpoints_for(store, service->second, *port, warn);
      ++last_upstreams_updated_;
      if (endpoints != it->second.endpoints) {
        it->second.endpoints = std::move(endpoints);
        last_changed_.push_back(it->first);
      }
    }
  }
}

}  // namespace tidegate::controller::translate
