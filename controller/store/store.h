#pragma once
// The controller's cache: the latest version of every object it reads, one ordered map per kind
// (ordered so that everything built from it comes out in the same order every time). Not
// thread-safe: one thread owns it (the sync loop), the translator reads it from that thread.

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "objects/objects.h"
#include "source/manifest_loader.h"

namespace tidegate::controller::store {

inline constexpr std::string_view kDefaultIngressClass = "tidegate";
inline constexpr std::string_view kDefaultControllerName = "tidegate.io/ingress-controller";
// The GatewayClass spec.controllerName that makes a class (and its Gateways) ours.
inline constexpr std::string_view kDefaultGatewayControllerName = "tidegate.io/gateway-controller";

// Which Ingresses are ours. The translator takes the same two values in its own options.
struct ClassOptions {
  std::string ingress_class{kDefaultIngressClass};
  std::string controller_name{kDefaultControllerName};
  // --default-backend-service "namespace/name": that Service (and its slices) always matter.
  std::string default_backend_service = {};
  // Gateway API: GatewayClasses with this spec.controllerName are ours (docs/gateway-api.md).
  std::string gateway_controller_name{kDefaultGatewayControllerName};
};

// Whether a Gateway's class is one of ours: a GatewayClass of that name exists with our
// controllerName. Shared by the store's relevance answers and the Gateway translator.
bool gateway_is_ours(const objects::Gateway& gateway,
                     const std::map<std::string, objects::GatewayClass>& classes,
                     const ClassOptions& options);

// "HTTPRoute ns/name" or "GRPCRoute ns/name": the key of a route in the store's route indexes.
std::string route_key(objects::Kind kind, const objects::ObjectMeta& meta);

enum class IngressSelection {
  kOurs,
  kOtherClass,  // another controller's: ignored without a word
  // Names our class, but the IngressClass of that name belongs to another controller: ignored, and
  // worth a warning because two controllers are configured to claim the same class name.
  kClassOfOtherController,
};

// The class decision for one Ingress (see docs/translation.md, "Which Ingresses"), given the
// IngressClasses keyed by name. Shared by the store's relevance answers and the translator.
IngressSelection select_ingress(const objects::Ingress& ingress,
                                const std::map<std::string, objects::IngressClass>& classes,
                                const ClassOptions& options);

// "namespace/name", or "name" for a cluster-scoped object (empty namespace).
std::string object_key(std::string_view namespace_, std::string_view name);

// What changed in a Store since the last take_changes(): enough for the endpoint fast path
// (translate/incremental.h) to know whether only EndpointSlices moved, and which Services' slices.
struct Changes {
  // Something other than an EndpointSlice changed in a way that can alter the translation.
  bool other = false;
  // "ns/name" of EndpointSlices added, changed or removed, and the "ns/service" they name
  // (before or after); only read when `other` is false, and no longer recorded once it is set.
  std::set<std::string> slices;
  std::set<std::string> services;
  bool empty() const { return !other && slices.empty(); }
  bool endpoints_only() const { return !other && !slices.empty(); }
};

class Store {
 public:
  explicit Store(ClassOptions options = {});

  // Adds or replaces an object. Returns whether the change can alter the translation, so that a
  // sync loop can skip a rebuild: false when the object is identical to the stored one, or when
  // it is an Ingress of another class, a Service, EndpointSlice, Secret or SubstitutionRuleSet
  // that none of our Ingresses refers to, or an IngressClass that is neither named after our
  // class nor ours.
  bool insert(objects::Object object);

  // Removes an object (namespace ignored for IngressClass). Returns whether the removal can alter
  // the translation; false when nothing was stored under that key.
  bool remove(objects::Kind kind, std::string_view namespace_, std::string_view name);

  const ClassOptions& options() const { return options_; }
  const std::map<std::string, objects::Ingress>& ingresses() const { return ingresses_; }
  const std::map<std::string, objects::IngressClass>& ingress_classes() const {
    return ingress_classes_;
  }
  const std::map<std::string, objects::Service>& services() const { return services_; }
  const std::map<std::string, objects::EndpointSlice>& endpoint_slices() const {
    return endpoint_slices_;
  }
  const std::map<std::string, objects::Secret>& secrets() const { return secrets_; }
  const std::map<std::string, objects::SubstitutionRuleSet>& substitution_rule_sets() const {
    return substitution_rule_sets_;
  }
  // The Gateway API (docs/gateway-api.md) and Namespaces (their labels, for allowedRoutes).
  const std::map<std::string, objects::GatewayClass>& gateway_classes() const {
    return gateway_classes_;
  }
  const std::map<std::string, objects::Gateway>& gateways() const { return gateways_; }
  const std::map<std::string, objects::HTTPRoute>& http_routes() const { return http_routes_; }
  const std::map<std::string, objects::GRPCRoute>& grpc_routes() const { return grpc_routes_; }
  const std::map<std::string, objects::ReferenceGrant>& reference_grants() const {
    return reference_grants_;
  }
  const std::map<std::string, objects::Namespace>& namespaces() const { return namespaces_; }
  const std::map<std::string, objects::BackendTLSPolicy>& backend_tls_policies() const {
    return backend_tls_policies_;
  }
  const std::map<std::string, objects::ConfigMap>& config_maps() const { return config_maps_; }
  size_t size() const;

  // The EndpointSlices labelled with `service` in `namespace_`, in key order (an index: no scan).
  std::vector<const objects::EndpointSlice*> endpoint_slices_of(const std::string& namespace_,
                                                                const std::string& service) const;
  // Whether some Ingress in `namespace_`, of any class, names `secret` (secrets_named; an index).
  bool secret_named(const std::string& namespace_, const std::string& secret) const;
  // Whether some Gateway, of any class, names `secret` in a listener's certificateRefs (an index).
  bool secret_named_by_gateway(const std::string& namespace_, const std::string& secret) const;
  // Every "ns/secret" some Ingress or Gateway in the store names, of any class: the union of
  // secrets_named() over them, read from the two indexes instead of computed per object.
  std::set<std::string> secrets_named_by_any() const;
  // Whether one of our Ingresses refers to `service` (a backend) or names `secret`, or (Gateway
  // API) a route attached to one of our Gateways names the Service in a backendRef, or one of our
  // Gateways names the Secret in a listener's certificateRefs:
  // what insert() and remove() answer for Services, EndpointSlices and Secrets.
  bool service_referenced(const std::string& namespace_, const std::string& service) const;
  bool secret_referenced(const std::string& namespace_, const std::string& secret) const;
  // Whether one of our Ingresses in `namespace_` names the SubstitutionRuleSet `name`
  // (tidegate.io/substitution-rule-set): what insert() and remove() answer for rule sets.
  bool rule_set_referenced(const std::string& namespace_, const std::string& name) const;
  // Whether some BackendTLSPolicy, wherever it points, names the ConfigMap in
  // caCertificateRefs (an index; what the kube source keeps ConfigMaps for).
  bool config_map_named(const std::string& namespace_, const std::string& name) const;
  // Whether a BackendTLSPolicy that matters names the ConfigMap: what insert() and remove()
  // answer for ConfigMaps. A policy matters when it targets a Service that a route attached to
  // one of our Gateways names in a backendRef.
  bool config_map_referenced(const std::string& namespace_, const std::string& name) const;

  // Returns what changed since the previous call, and starts recording afresh.
  Changes take_changes();

 private:
  bool ingress_matters(const objects::Ingress& ingress) const;
  bool ingress_class_matters(const objects::IngressClass& ingress_class) const;
  bool matters(const objects::Ingress& ingress) const;
  bool matters(const objects::IngressClass& ingress_class) const;
  bool matters(const objects::Service& service) const;
  bool matters(const objects::EndpointSlice& slice) const;
  bool matters(const objects::Secret& secret) const;
  bool matters(const objects::SubstitutionRuleSet& rule_set) const;
  bool matters(const objects::GatewayClass& gateway_class) const;
  bool matters(const objects::Gateway& gateway) const;
  bool matters(const objects::HTTPRoute& route) const;
  bool matters(const objects::GRPCRoute& route) const;
  bool matters(const objects::ReferenceGrant& grant) const;
  bool matters(const objects::Namespace& ns) const;
  bool matters(const objects::BackendTLSPolicy& policy) const;
  bool matters(const objects::ConfigMap& config_map) const;
  bool gateway_matters(const objects::Gateway& gateway) const;
  // A route matters when one of its parentRefs names one of our Gateways.
  bool route_matters(const std::string& namespace_,
                     const std::vector<objects::ParentReference>& parents) const;
  bool route_key_matters(const std::string& key) const;  // route_key() of a stored route
  bool any_gateway_of_ours(bool with_selector) const;

  ClassOptions options_;
  std::map<std::string, objects::Ingress> ingresses_;
  std::map<std::string, objects::IngressClass> ingress_classes_;
  std::map<std::string, objects::Service> services_;
  std::map<std::string, objects::EndpointSlice> endpoint_slices_;
  std::map<std::string, objects::Secret> secrets_;
  std::map<std::string, objects::SubstitutionRuleSet> substitution_rule_sets_;
  std::map<std::string, objects::GatewayClass> gateway_classes_;
  std::map<std::string, objects::Gateway> gateways_;
  std::map<std::string, objects::HTTPRoute> http_routes_;
  std::map<std::string, objects::GRPCRoute> grpc_routes_;
  std::map<std::string, objects::ReferenceGrant> reference_grants_;
  std::map<std::string, objects::Namespace> namespaces_;
  std::map<std::string, objects::BackendTLSPolicy> backend_tls_policies_;
  std::map<std::string, objects::ConfigMap> config_maps_;

  // Indexes, so that "does anything refer to this object" never scans a kind (with 10,000
  // Ingresses in one namespace, scanning them for every Service listed made start-up quadratic).
  // They follow every Ingress whatever its class; whether one is ours is decided when asked,
  // because an IngressClass change can change that for many Ingresses at once.
  using Index = std::map<std::string, std::set<std::string>>;  // "ns/name" -> keys
  template <typename T>
  bool upsert(std::map<std::string, T>& map, T value);
  template <typename T>
  bool erase(std::map<std::string, T>& map, const std::string& key);
  template <typename T>
  void index(const T& object, bool add);
  void index_ingress(const objects::Ingress& ingress, bool add);
  void index_slice(const objects::EndpointSlice& slice, bool add);
  void index_route(const std::string& key, const std::string& namespace_,
                   const std::vector<std::vector<objects::BackendRef>>& refs, bool add);
  void index_gateway(const objects::Gateway& gateway, bool add);
  void record(const objects::Ingress&) { changes_.other = true; }
  void record(const objects::IngressClass&) { changes_.other = true; }
  void record(const objects::Service&) { changes_.other = true; }
  void record(const objects::Secret&) { changes_.other = true; }
  void record(const objects::SubstitutionRuleSet&) { changes_.other = true; }
  void record(const objects::GatewayClass&) { changes_.other = true; }
  void record(const objects::Gateway&) { changes_.other = true; }
  void record(const objects::HTTPRoute&) { changes_.other = true; }
  void record(const objects::GRPCRoute&) { changes_.other = true; }
  void record(const objects::ReferenceGrant&) { changes_.other = true; }
  void record(const objects::Namespace&) { changes_.other = true; }
  void record(const objects::BackendTLSPolicy&) { changes_.other = true; }
  void record(const objects::ConfigMap&) { changes_.other = true; }
  void record(const objects::EndpointSlice& slice);
  Index services_by_ingress_ref_;    // "ns/service" -> Ingresses naming it in a backend
  Index secrets_by_ingress_ref_;     // "ns/secret" -> Ingresses naming it (secrets_named)
  Index rule_sets_by_ingress_ref_;   // "ns/set" -> Ingresses naming it (rule_set_named)
  Index slices_by_service_;          // "ns/service" -> its EndpointSlices
  Index services_by_route_ref_;      // "ns/service" -> route_key()s of routes naming it
  Index secrets_by_gateway_ref_;     // "ns/secret" -> Gateways naming it in certificateRefs
  Index config_maps_by_policy_ref_;  // "ns/configmap" -> BackendTLSPolicies naming it
  Changes changes_;
};

// "ns/name" of every Secret an Ingress names: its spec.tls Secrets and its proxy-ssl-secret,
// auth-secret and auth-tls-secret (tidegate.io/ or nginx.ingress.kubernetes.io/, same namespace
// only). Only these are kept.
std::set<std::string> secrets_named(const objects::Ingress& ingress);
// "ns/name" of every Secret a Gateway's listeners name in certificateRefs.
std::set<std::string> secrets_named(const objects::Gateway& gateway);
// "ns/configmap" for each ConfigMap a BackendTLSPolicy names in caCertificateRefs.
std::set<std::string> config_maps_named(const objects::BackendTLSPolicy& policy);

// "ns/name" of the SubstitutionRuleSet an Ingress names (tidegate.io/substitution-rule-set, the
// value trimmed, always in the Ingress's own namespace); empty when it names none.
std::string rule_set_named(const objects::Ingress& ingress);

// A Store holding every object the loader produced (the loader already dropped duplicates).
Store build_store(const source::LoadResult& loaded, ClassOptions options = {});

}  // namespace tidegate::controller::store
