#pragma once
// The Gateway API status the translator computes (docs/gateway-api.md, "Status"): plain data, made
// in the same pure pass as the Config, for a status writer to put on the objects. Only objects
// that are ours appear: GatewayClasses with our controllerName, Gateways of those classes,
// routes with a parentRef naming one of those Gateways (one parents[] entry per such parentRef),
// and BackendTLSPolicies targeting a Service such a route uses (one ancestors[] entry per
// Gateway).
//
// Condition types and reasons are exactly the Gateway API's (v1.6): the conformance suite
// compares them. Every condition carries observedGeneration = the object's metadata.generation.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "objects/gateway.h"

namespace tidegate::controller::translate::gateway {

struct Condition {
  std::string type;    // "Accepted", "Programmed", "ResolvedRefs", "Conflicted", ...
  std::string status;  // "True", "False" or "Unknown"
  std::string reason;
  std::string message;
  int64_t observed_generation = 0;
  bool operator==(const Condition&) const = default;
};

struct GatewayClassStatus {
  std::string name;
  std::vector<Condition> conditions;  // Accepted
  bool operator==(const GatewayClassStatus&) const = default;
};

struct ListenerStatus {
  std::string name;
  std::vector<objects::RouteGroupKind> supported_kinds;
  int32_t attached_routes = 0;
  std::vector<Condition> conditions;  // Accepted, Programmed, ResolvedRefs, Conflicted
  bool operator==(const ListenerStatus&) const = default;
};

struct GatewayStatus {
  std::string namespace_;
  std::string name;
  std::vector<Condition> conditions;      // Accepted, Programmed
  std::vector<ListenerStatus> listeners;  // in spec order
  bool operator==(const GatewayStatus&) const = default;
};

struct RouteParentStatus {
  objects::ParentReference parent_ref;  // as written in the route's spec
  std::string controller_name;          // our GatewayClass controllerName
  // Accepted, ResolvedRefs, and PartiallyInvalid when some rules were dropped.
  std::vector<Condition> conditions;
  bool operator==(const RouteParentStatus&) const = default;
};

struct RouteStatus {
  std::string kind;  // "HTTPRoute" or "GRPCRoute"
  std::string namespace_;
  std::string name;
  std::vector<RouteParentStatus> parents;  // in spec.parentRefs order
  bool operator==(const RouteStatus&) const = default;
};

// One address per Gateway (TranslateOptions::gateway_listener_ports_*): the ports of the Service
// that gives a Gateway its address, each leading to the data plane listener of one Gateway port.
struct GatewayServicePort {
  std::string name;         // "http-80", "https-443"
  int32_t port = 0;         // the Gateway's listener port (the Service port)
  int32_t target_port = 0;  // the data plane's port for it (model::Listener::port)
  bool operator==(const GatewayServicePort&) const = default;
};

struct GatewayService {
  std::string namespace_;  // the Gateway's
  std::string name;
  std::vector<GatewayServicePort> ports;  // by port; only ports with a programmed listener
  bool operator==(const GatewayService&) const = default;
};

// A BackendTLSPolicy's status (PolicyStatus): one ancestors[] entry per Gateway of ours through
// which a route reaches a Service the policy targets (the Gateway API's choice of ancestor for
// this policy), each with Accepted and ResolvedRefs.
struct PolicyAncestorStatus {
  objects::ParentReference ancestor_ref;  // the Gateway
  std::string controller_name;
  std::vector<Condition> conditions;  // Accepted, ResolvedRefs
  bool operator==(const PolicyAncestorStatus&) const = default;
};

struct BackendTLSPolicyStatus {
  std::string namespace_;
  std::string name;
  std::vector<PolicyAncestorStatus> ancestors;  // by Gateway "namespace/name"
  bool operator==(const BackendTLSPolicyStatus&) const = default;
};

struct GatewayStatusReport {
  std::map<std::string, GatewayClassStatus> gateway_classes;  // by name
  std::map<std::string, GatewayStatus> gateways;              // by "namespace/name"
  // Set with one address per Gateway: every accepted Gateway of ours, by "namespace/name".
  std::map<std::string, GatewayService> services;
  std::map<std::string, RouteStatus> routes;  // by "HTTPRoute ns/name" (store::route_key)
  // By "namespace/name"; only policies with an ancestor (a Gateway of ours uses a target).
  std::map<std::string, BackendTLSPolicyStatus> backend_tls_policies;
  bool operator==(const GatewayStatusReport&) const = default;
};

// The condition of `type` in `conditions`; nullptr when there is none.
const Condition* find_condition(const std::vector<Condition>& conditions, const std::string& type);

}  // namespace tidegate::controller::translate::gateway
