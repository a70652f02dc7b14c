#pragma once
// One address per Gateway (--gateway-listener-ports; docs/gateway-api.md): the elected leader
// keeps one Service per Gateway of ours beside the --publish-service Service (same namespace,
// selector and type), whose ports are the Gateway's listener ports and lead to the data plane
// listeners the translator gave them (translate/gateway/status.h, GatewayService). The Service's
// load balancer addresses, else its ClusterIP, are the Gateway's status.addresses.
//
// The Services are ours by their labels: app.kubernetes.io/managed-by=tidegate and
// tidegate.io/gateway-controller=<hash of our controllerName>; the Gateway is named in the
// annotation tidegate.io/gateway ("namespace/name"). Services of ours that no Gateway wants are
// deleted.

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/client.h"
#include "translate/gateway/status.h"

namespace tidegate::controller::status {

// "tg-<gateway name, dots as dashes, at most 40 characters>-<8 hex digits of a hash of
// namespace/name>": a DNS-1035 label, unique per Gateway.
std::string gateway_service_name(const std::string& gateway_namespace,
                                 const std::string& gateway_name);

// The label value that marks our Services: 8 hex digits of a hash of the controllerName.
std::string gateway_controller_label(const std::string& controller_name);

// The Service for `s` in `ns`, taking `type` and `selector` from the published Service, and
// owned by it (`owner`: its ownerReference, null for none): uninstalling the chart deletes the
// published Service, and Kubernetes' garbage collector then deletes every Gateway's. (A Gateway
// cannot own it: owners must live in the same namespace, and Gateways live in the apps'.)
nlohmann::json gateway_service_json(const translate::gateway::GatewayService& s,
                                    const std::string& ns, const std::string& controller_name,
                                    const std::string& type, const nlohmann::json& selector,
                                    const nlohmann::json& owner = nullptr);

// The ownerReference naming a Service read from the API (null when it lacks a name or uid).
nlohmann::json service_owner_reference(const nlohmann::json& service);

// The addresses a Service gives clients: its load balancer's IPs and host names, else its
// ClusterIP (none when it has neither yet).
std::vector<std::string> service_addresses(const nlohmann::json& service);

class GatewayServices {
 public:
  // How long a Service we created is left to settle before its address is published: kube-proxy
  // programs a new ClusterIP within about a second, and a client that connects before that (a
  // gRPC client keeps its first connection) may reach whatever held the address before.
  static constexpr std::chrono::milliseconds kSettle{3000};

  GatewayServices(kube::ApiClient& client, std::string publish_service,
                  std::string controller_name);
  // Creates, updates and deletes our Services to match `services` (by Gateway key); returns the
  // addresses of each Gateway whose Service exists (a Gateway missing from the map has none yet).
  std::map<std::string, std::vector<std::string>> sync(
      const std::map<std::string, translate::gateway::GatewayService>& services);
  // After losing the lead: everything is checked again when we lead again.
  void forget();

 private:
  // The published Service's type, selector and ownerReference; false when it cannot be read.
  bool read_template(std::string* type, nlohmann::json* selector, nlohmann::json* owner);
  // Deletes our Services in the namespace that `keep` does not name; true when the list worked.
  bool delete_others(const std::set<std::string>& keep);

  kube::ApiClient& client_;
  std::string namespace_;
  std::string publish_service_;
  std::string controller_name_;
  struct Known {
    std::string body;  // what we last made it (the JSON we sent)
    std::vector<std::string> addresses;
    bool load_balancer = false;  // type LoadBalancer: its addresses come later; read each time
    std::chrono::steady_clock::time_point settled{};  // its address is published from then on
  };
  std::map<std::string, Known> known_;                // by Service name
  std::optional<std::set<std::string>> cleaned_for_;  // the names kept at the last clean-up
};

}  // namespace tidegate::controller::status
