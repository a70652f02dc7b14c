#pragma once
// Kubernetes objects -> routing model. A pure function: no I/O, no clock, no randomness; the same
// Store gives the same Config and the same diagnostics, in the same order, every time. Invalid
// parts of an object are dropped and reported, never thrown. The rules are in docs/translation.md.

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "model/model.h"
#include "store/store.h"
#include "translate/gateway/status.h"

namespace tidegate::controller::translate {

inline constexpr std::string_view kUseRegexAnnotation = "tidegate.io/use-regex";
inline constexpr std::string_view kSslRedirectAnnotation = "tidegate.io/ssl-redirect";

struct TranslateOptions {
  std::string ingress_class{store::kDefaultIngressClass};
  std::string controller_name{store::kDefaultControllerName};
  // Also read the nginx.ingress.kubernetes.io/ spellings of the annotations (--nginx-annotations).
  bool nginx_annotations = false;
  // Compress responses of Ingresses without enable-compression (--enable-compression).
  bool compression_default = false;
  // --default-backend-service "namespace/name": requests no route takes go to this Service's
  // first port (unless an Ingress's spec.defaultBackend takes them), and routes whose backend has
  // no endpoints fall back to it (unless their Ingress names its own default-backend).
  std::string default_backend_service = {};
  // The Gateway API (docs/gateway-api.md): GatewayClasses with this controllerName are ours, and
  // the data plane's HTTP and HTTPS ports, which every Gateway of those classes shares (a
  // listener on another port is not accepted: PortUnavailable).
  std::string gateway_controller_name{store::kDefaultGatewayControllerName};
  int32_t gateway_http_port = 80;
  int32_t gateway_https_port = 443;
  // --gateway-listener-ports FROM-TO: one address per Gateway (docs/gateway-api.md). Each port
  // of each Gateway becomes a listener of its own on the data plane, on a port of this range,
  // routed with that Gateway's routes only; any listener port is accepted, and the Gateway's
  // Service (GatewayStatusReport::services) maps its ports there. 0: off (every Gateway shares
  // the two ports above).
  uint16_t gateway_listener_ports_from = 0;
  uint16_t gateway_listener_ports_to = 0;
  bool per_gateway_listeners() const { return gateway_listener_ports_from != 0; }
  // From this many upstreams on, they are built (endpoints and all) on a second thread while
  // the virtual hosts are assembled; the result is the same either way. Tests lower it, or raise
  // it to compare with the one-thread build.
  size_t upstreams_beside_from = 1000;
};

enum class Severity {
  kWarning,  // ignored on purpose (another controller's class, an unsupported feature)
  kError,    // the user asked for something and did not get it (an invalid or conflicting part)
};
const char* to_string(Severity s);

struct Diagnostic {
  std::string object;  // "Ingress default/web"
  std::string message;
  Severity severity = Severity::kError;
  bool operator==(const Diagnostic&) const = default;
};
std::string to_string(const Diagnostic& d);  // "error: Ingress default/web: <message>"

struct TranslateResult {
  model::Config config;  // passes model::validate
  std::vector<Diagnostic> diagnostics;
  // Upstreams emitted without endpoints on purpose, whatever their EndpointSlices say: HTTPS
  // upstreams whose proxy-ssl-secret cannot be used (they fail closed: 503 rather than talking to
  // the backend without the verification that was asked for). The endpoint fast path leaves them
  // empty too.
  std::set<std::string> fail_closed_upstreams;
  // Upstreams whose one endpoint is their Service's ClusterIP (service-upstream): the endpoint
  // fast path leaves them alone too.
  std::set<std::string> service_ip_upstreams;
  // The Gateway API objects' status, computed in the same pass (translate/gateway/status.h);
  // written to the API server by a status writer, not by the translator.
  gateway::GatewayStatusReport gateway_status;
};

TranslateResult translate(const store::Store& store, const TranslateOptions& options = {});

}  // namespace tidegate::controller::translate
