#include "translate/endpoints.h"

#include <arpa/inet.h>

#include <algorithm>
#include <optional>

namespace tidegate::controller::translate {

namespace {

// The address in the canonical text form inet_ntop gives (so that "2001:DB8::1" and "2001:db8::1"
// are one endpoint), or nullopt when it is not an address of the slice's family.
std::optional<std::string> canonical_address(const std::string& address, bool ipv6) {
  int family = ipv6 ? AF_INET6 : AF_INET;
  unsigned char buf[16];
  // inet_pton reads up to the first NUL: an address with one inside is not an address.
  if (address.find('\0') != std::string::npos) return std::nullopt;
  if (inet_pton(family, address.c_str(), buf) != 1) return std::nullopt;
  // inet_pton accepts IPv4 only as four decimal numbers of 0-255 without leading zeros: the text
  // is already canonical (inet_ntop's sprintf was a tenth of a first translation).
  if (!ipv6) return address;
  char text[INET6_ADDRSTRLEN];
  if (inet_ntop(family, buf, text, sizeof(text)) == nullptr) return std::nullopt;
  return std::string(text);
}

// The port the endpoints of `slice` listen on for `port`, if the slice says (or lets us infer).
std::optional<uint16_t> endpoint_port(const objects::EndpointSlice& slice,
                                      const objects::ServicePort& port) {
  for (const auto& p : slice.ports) {
    if (p.name == port.name && p.port) return static_cast<uint16_t>(*p.port);
  }
  if (port.target_port.is_number()) return static_cast<uint16_t>(*port.target_port.number);
  return std::nullopt;
}

}  // namespace

const objects::ServicePort* find_service_port(const objects::Service& service,
                                              const objects::PortRef& ref) {
  for (const auto& p : service.spec.ports) {
    if (ref.is_number() ? p.port == *ref.number : p.name == ref.name) return &p;
  }
  return nullptr;
}

std::vector<model::Endpoint> endpoints_for(const store::Store& store,
                                           const objects::Service& service,
                                           const objects::ServicePort& service_port,
                                           const EndpointWarning& warn) {
  std::vector<model::Endpoint> ready;
  std::vector<model::Endpoint> terminating;  // serving and terminating: the fallback
  // The store's index of slices by Service: scanning the namespace's slices for every upstream
  // made a translation quadratic (10,000 Ingresses with one Service and one slice each: 20 s).
  for (const auto* slice_ptr :
       store.endpoint_slices_of(service.metadata.namespace_, service.metadata.name)) {
    const objects::EndpointSlice& slice = *slice_ptr;
    const bool ipv6 = slice.address_type == "IPv6";
    if (!ipv6 && slice.address_type != "IPv4") continue;  // FQDN slices: nothing to dial
    auto port = endpoint_port(slice, service_port);
    if (!port) continue;
    for (const auto& endpoint : slice.endpoints) {
      // Addresses of one endpoint are fungible and consumers may use only the first
      // (https://issue.k8s.io/106267); kube-proxy does, and so do we: one pod, one entry.
      if (endpoint.addresses.empty()) continue;
      auto address = canonical_address(endpoint.addresses.front(), ipv6);
      if (!address) {
        warn("EndpointSlice " + store::object_key(slice.metadata.namespace_, slice.metadata.name),
             "invalid " + slice.address_type + " address \"" + endpoint.addresses.front() +
                 "\"; endpoint ignored");
        continue;
      }
      const auto& c = endpoint.conditions;
      if (c.ready.value_or(true)) {
        ready.push_back(model::Endpoint{*address, *port});
      } else if (c.serving.value_or(false) && c.terminating.value_or(false)) {
        terminating.push_back(model::Endpoint{*address, *port});
      }
    }
  }
  // Terminating-but-serving endpoints only when nothing is ready: better a draining pod than a
  // 503 while the last replica rolls (what kube-proxy does for traffic policy Local).
  std::vector<model::Endpoint>& chosen = ready.empty() ? terminating : ready;
  std::sort(chosen.begin(), chosen.end());
  chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  return std::move(chosen);
}

}  // namespace tidegate::controller::translate
