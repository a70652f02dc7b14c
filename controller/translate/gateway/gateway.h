#pragma once
// Gateway API objects -> routing model: the second pure translator, run by translate() after the
// Ingresses (translate.h). It adds the routes, upstreams, certificates and TLS hosts of the
// Gateways whose GatewayClass is ours to the same Config, and computes their status
// (status.h). No I/O, no clock; deterministic; invalid parts are dropped and reported, both as
// Diagnostics and in the status. The rules are in docs/gateway-api.md.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/store.h"
#include "translate/translate.h"

namespace tidegate::controller::translate::gateway {

// Adds the Gateway API's part to result.config (which holds the Ingresses' part already; hosts
// they made are shared) and its diagnostics to result.diagnostics, and sets result.gateway_status.
void translate_gateway(const store::Store& store, const TranslateOptions& options,
                       TranslateResult& result);

// The hostnames a route gets on a listener (the Gateway API's intersection rules; both sides
// lower-case): a listener without hostname takes the route's; a route without hostnames takes
// the listener's; both empty: {"*"}. Otherwise the route hostnames the listener's matches (an
// exact name under a wildcard, a narrower wildcard) and the listener's hostname when a route
// wildcard covers it. Empty: no intersection (the route is not accepted on that listener).
std::vector<std::string> intersect_hostnames(const std::string& listener,
                                             const std::vector<std::string>& route);

// A Gateway API Duration (GEP-2257: 1-4 groups of 1-5 digits and h, m, s or ms, "1h30m",
// "500ms", "0s"); nullopt when invalid.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

}  // namespace tidegate::controller::translate::gateway
