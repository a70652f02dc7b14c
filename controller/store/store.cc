#include "store/store.h"

#include <optional>
#include <type_traits>
#include <utility>

#include "annotations/substitution.h"
#include "model/external_auth.h"
#include "text/text.h"

namespace tidegate::controller::store {

IngressSelection select_ingress(const objects::Ingress& ingress,
                                const std::map<std::string, objects::IngressClass>& classes,
                                const ClassOptions& options) {
  // spec.ingressClassName first; the deprecated annotation only when the field is unset (the API
  // server refuses new Ingresses that set both to different values, old ones may still exist).
  std::string class_name = ingress.spec.ingress_class_name.value_or("");
  if (class_name.empty()) {
    auto it = ingress.metadata.annotations.find(std::string(objects::kIngressClassAnnotation));
    if (it != ingress.metadata.annotations.end()) class_name = it->second;
  }
  if (!class_name.empty()) {
    if (class_name != options.ingress_class) return IngressSelection::kOtherClass;
    // Serving our class name does not need an IngressClass object (a folder of manifests rarely
    // has one), but one that names another controller means someone else was given the class.
    auto it = classes.find(class_name);
    if (it != classes.end() && it->second.spec.controller != options.controller_name) {
      return IngressSelection::kClassOfOtherController;
    }
    return IngressSelection::kOurs;
  }
  for (const auto& [name, ingress_class] : classes) {
    if (ingress_class.spec.controller == options.controller_name && ingress_class.is_default()) {
      return IngressSelection::kOurs;
    }
  }
  return IngressSelection::kOtherClass;
}

std::string object_key(std::string_view namespace_, std::string_view name) {
  if (namespace_.empty()) return std::string(name);
  std::string key;
  key.reserve(namespace_.size() + 1 + name.size());
  key.append(namespace_).append("/").append(name);
  return key;
}

bool gateway_is_ours(const objects::Gateway& gateway,
                     const std::map<std::string, objects::GatewayClass>& classes,
                     const ClassOptions& options) {
  auto it = classes.find(gateway.gateway_class_name);
  return it != classes.end() && it->second.controller_name == options.gateway_controller_name;
}

std::string route_key(objects::Kind kind, const objects::ObjectMeta& meta) {
  return std::string(objects::to_string(kind)) + " " + object_key(meta.namespace_, meta.name);
}

Store::Store(ClassOptions options) : options_(std::move(options)) {}

size_t Store::size() const {
  return ingresses_.size() + ingress_classes_.size() + services_.size() + endpoint_slices_.size() +
         secrets_.size() + substitution_rule_sets_.size() + gateway_classes_.size() +
         gateways_.size() + http_routes_.size() + grpc_routes_.size() + reference_grants_.size() +
         namespaces_.size() + backend_tls_policies_.size() + config_maps_.size();
}

bool Store::ingress_matters(const objects::Ingress& ingress) const {
  return select_ingress(ingress, ingress_classes_, options_) != IngressSelection::kOtherClass;
}

bool Store::ingress_class_matters(const objects::IngressClass& ingress_class) const {
  // Its name can hand our class to another controller; its controller and default flag decide
  // whether Ingresses without a class are ours.
  return ingress_class.metadata.name == options_.ingress_class ||
         ingress_class.spec.controller == options_.controller_name;
}

namespace {

// Calls fn(ingress key) for each key that `index` lists under `key`, until fn returns true.
template <typename Fn>
bool any_in(const std::map<std::string, std::set<std::string>>& index, const std::string& key,
            Fn&& fn) {
  auto it = index.find(key);
  if (it == index.end()) return false;
  for (const auto& k : it->second) {
    if (fn(k)) return true;
  }
  return false;
}

void index_entry(std::map<std::string, std::set<std::string>>& index, const std::string& key,
                 const std::string& value, bool add) {
  if (add) {
    index[key].insert(value);
    return;
  }
  auto it = index.find(key);
  if (it == index.end()) return;
  it->second.erase(value);
  if (it->second.empty()) index.erase(it);
}

// The Services an Ingress's backends name, and the Secrets its spec.tls names (deduplicated).
std::set<std::string> services_named(const objects::Ingress& ingress) {
  std::set<std::string> out;
  auto add = [&](const std::optional<objects::IngressBackend>& backend) {
    if (backend && backend->service && !backend->service->name.empty()) {
      out.insert(object_key(ingress.metadata.namespace_, backend->service->name));
    }
  };
  add(ingress.spec.default_backend);
  for (const auto& rule : ingress.spec.rules) {
    for (const auto& path : rule.paths) add(path.backend);
  }
  // The default-backend annotation (either spelling: naming too many only costs a rebuild).
  for (const char* key :
       {"tidegate.io/default-backend", "nginx.ingress.kubernetes.io/default-backend"}) {
    auto it = ingress.metadata.annotations.find(key);
    if (it != ingress.metadata.annotations.end() && !it->second.empty()) {
      out.insert(object_key(ingress.metadata.namespace_, it->second));
    }
  }
  // The Service an auth-url names (any namespace).
  for (const char* key : {"tidegate.io/auth-url", "nginx.ingress.kubernetes.io/auth-url"}) {
    auto it = ingress.metadata.annotations.find(key);
    if (it == ingress.metadata.annotations.end()) continue;
    std::string error;
    if (auto url = model::parse_auth_url(text::trim_ows(it->second), &error)) {
      if (auto service = model::service_of_auth_host(url->host, ingress.metadata.namespace_)) {
        out.insert(*service);
      }
    }
  }
  return out;
}

// Equal but for metadata.resourceVersion, which the translation never reads: our own status
// writes (and anyone's to fields we do not parse) bump it, and must not cost a rebuild each.
template <typename T>
bool same_content(const T& a, const T& b) {
  if (a.metadata.resource_version == b.metadata.resource_version) return a == b;
  T copy = b;
  copy.metadata.resource_version = a.metadata.resource_version;
  return a == copy;
}

}  // namespace

std::set<std::string> secrets_named(const objects::Ingress& ingress) {
  std::set<std::string> out;
  const std::string& ns = ingress.metadata.namespace_;
  for (const auto& tls : ingress.spec.tls) {
    if (!tls.secret_name.empty()) out.insert(object_key(ns, tls.secret_name));
  }
  // proxy-ssl-secret (the backends' CA), auth-secret (basic authentication's users) and
  // auth-tls-secret (the client certificates' CA): "name" or "namespace/name" in the Ingress's
  // own namespace (the translator refuses others). Both spellings count whether or not
  // --nginx-annotations is on: keeping one Secret too many costs memory, missing one would make
  // the check it serves fail.
  static const std::string kAnnotations[] = {
      "tidegate.io/proxy-ssl-secret",
      "tidegate.io/auth-secret",
      "tidegate.io/auth-tls-secret",
      "nginx.ingress.kubernetes.io/proxy-ssl-secret",
      "nginx.ingress.kubernetes.io/auth-secret",
      "nginx.ingress.kubernetes.io/auth-tls-secret",
  };
  if (ingress.metadata.annotations.empty()) return out;
  for (const std::string& annotation : kAnnotations) {
    auto it = ingress.metadata.annotations.find(annotation);
    if (it == ingress.metadata.annotations.end()) continue;
    std::string_view ref = it->second;
    while (!ref.empty() && (ref.front() == ' ' || ref.front() == '\t')) ref.remove_prefix(1);
    while (!ref.empty() && (ref.back() == ' ' || ref.back() == '\t')) ref.remove_suffix(1);
    if (ref.empty()) continue;
    auto slash = ref.find('/');
    if (slash == std::string_view::npos) {
      out.insert(object_key(ns, ref));
    } else if (ref.substr(0, slash) == ns && slash + 1 < ref.size()) {
      out.insert(object_key(ns, ref.substr(slash + 1)));
    }
  }
  return out;
}

std::string rule_set_named(const objects::Ingress& ingress) {
  // The translator reads the same annotation with the same parser (annotations/substitution.h).
  auto it =
      ingress.metadata.annotations.find(std::string(annotations::kSubstitutionRuleSetAnnotation));
  if (it == ingress.metadata.annotations.end()) return {};
  const std::string_view name = annotations::trim(it->second);
  if (name.empty()) return {};
  return object_key(ingress.metadata.namespace_, name);
}

void Store::index_ingress(const objects::Ingress& ingress, bool add) {
  const std::string key = object_key(ingress.metadata.namespace_, ingress.metadata.name);
  for (const auto& service : services_named(ingress)) {
    index_entry(services_by_ingress_ref_, service, key, add);
  }
  for (const auto& secret : secrets_named(ingress)) {
    index_entry(secrets_by_ingress_ref_, secret, key, add);
  }
  if (std::string rule_set = rule_set_named(ingress); !rule_set.empty()) {
    index_entry(rule_sets_by_ingress_ref_, rule_set, key, add);
  }
}

// The backendRefs of a route's rules, one list per rule (HTTPRoute and GRPCRoute alike).
template <typename Route>
std::vector<std::vector<objects::BackendRef>> backend_refs_of(const Route& route) {
  std::vector<std::vector<objects::BackendRef>> out;
  for (const auto& rule : route.rules) out.push_back(rule.backend_refs);
  return out;
}

void Store::index_route(const std::string& key, const std::string& namespace_,
                        const std::vector<std::vector<objects::BackendRef>>& refs, bool add) {
  // Every Service a backendRef names, whatever its kind or grant: naming too many only costs a
  // rebuild, the translator decides what may be used.
  for (const auto& rule : refs) {
    for (const auto& ref : rule) {
      index_entry(services_by_route_ref_, object_key(ref.namespace_.value_or(namespace_), ref.name),
                  key, add);
    }
  }
}

void Store::index_gateway(const objects::Gateway& gateway, bool add) {
  const std::string key = object_key(gateway.metadata.namespace_, gateway.metadata.name);
  for (const auto& secret : secrets_named(gateway)) {
    index_entry(secrets_by_gateway_ref_, secret, key, add);
  }
}

void Store::index_slice(const objects::EndpointSlice& slice, bool add) {
  index_entry(slices_by_service_, object_key(slice.metadata.namespace_, slice.service_name()),
              object_key(slice.metadata.namespace_, slice.metadata.name), add);
}

void Store::record(const objects::EndpointSlice& slice) {
  // Something else changed too: the batch is a full translation, which reads neither set (a
  // first list would otherwise copy 10,000 keys into each).
  if (changes_.other) return;
  changes_.slices.insert(object_key(slice.metadata.namespace_, slice.metadata.name));
  changes_.services.insert(object_key(slice.metadata.namespace_, slice.service_name()));
}

Changes Store::take_changes() { return std::exchange(changes_, Changes{}); }

std::vector<const objects::EndpointSlice*> Store::endpoint_slices_of(
    const std::string& namespace_, const std::string& service) const {
  std::vector<const objects::EndpointSlice*> out;
  auto it = slices_by_service_.find(object_key(namespace_, service));
  if (it == slices_by_service_.end()) return out;
  out.reserve(it->second.size());
  for (const auto& key : it->second) out.push_back(&endpoint_slices_.at(key));
  return out;
}

bool Store::secret_named(const std::string& namespace_, const std::string& secret) const {
  return secrets_by_ingress_ref_.contains(object_key(namespace_, secret));
}

std::set<std::string> Store::secrets_named_by_any() const {
  std::set<std::string> out;
  for (const auto& [secret, _] : secrets_by_ingress_ref_) out.emplace_hint(out.end(), secret);
  for (const auto& [secret, _] : secrets_by_gateway_ref_) out.insert(secret);
  return out;
}

bool Store::secret_named_by_gateway(const std::string& namespace_,
                                    const std::string& secret) const {
  return secrets_by_gateway_ref_.contains(object_key(namespace_, secret));
}

std::set<std::string> secrets_named(const objects::Gateway& gateway) {
  std::set<std::string> out;
  for (const auto& listener : gateway.listeners) {
    for (const auto& ref : listener.certificate_refs) {
      out.insert(object_key(ref.namespace_.value_or(gateway.metadata.namespace_), ref.name));
    }
  }
  return out;
}

bool Store::service_referenced(const std::string& namespace_, const std::string& service) const {
  if (service.empty()) return false;
  const std::string service_key = object_key(namespace_, service);
  if (!options_.default_backend_service.empty() &&
      options_.default_backend_service == service_key) {
    return true;
  }
  return any_in(services_by_ingress_ref_, service_key,
                [&](const std::string& key) { return ingress_matters(ingresses_.at(key)); }) ||
         any_in(services_by_route_ref_, service_key,
                [&](const std::string& key) { return route_key_matters(key); });
}

bool Store::route_key_matters(const std::string& key) const {
  const size_t space = key.find(' ');
  const std::string kind = key.substr(0, space);
  const std::string name = key.substr(space + 1);
  if (kind == "HTTPRoute") return matters(http_routes_.at(name));
  return matters(grpc_routes_.at(name));
}

bool Store::gateway_matters(const objects::Gateway& gateway) const {
  return gateway_is_ours(gateway, gateway_classes_, options_);
}

bool Store::route_matters(const std::string& namespace_,
                          const std::vector<objects::ParentReference>& parents) const {
  for (const auto& parent : parents) {
    if (parent.group != objects::kGatewayGroup || parent.kind != "Gateway") continue;
    auto it = gateways_.find(object_key(parent.namespace_.value_or(namespace_), parent.name));
    if (it != gateways_.end() && gateway_matters(it->second)) return true;
  }
  return false;
}

// Gateways are few (one per team or environment), so these scan them.
bool Store::any_gateway_of_ours(bool with_selector) const {
  for (const auto& [key, gateway] : gateways_) {
    if (!gateway_matters(gateway)) continue;
    if (!with_selector) return true;
    for (const auto& listener : gateway.listeners) {
      if (listener.namespace_selector) return true;
    }
  }
  return false;
}

bool Store::secret_referenced(const std::string& namespace_, const std::string& secret) const {
  // Secrets named by our Ingresses' spec.tls become the model's certificates.
  return any_in(secrets_by_ingress_ref_, object_key(namespace_, secret),
                [&](const std::string& key) { return ingress_matters(ingresses_.at(key)); }) ||
         any_in(secrets_by_gateway_ref_, object_key(namespace_, secret),
                [&](const std::string& key) { return gateway_matters(gateways_.at(key)); });
}

bool Store::rule_set_referenced(const std::string& namespace_, const std::string& name) const {
  // Only our Ingresses' rule sets end up in the configuration.
  return any_in(rule_sets_by_ingress_ref_, object_key(namespace_, name),
                [&](const std::string& key) { return ingress_matters(ingresses_.at(key)); });
}

bool Store::matters(const objects::Ingress& o) const { return ingress_matters(o); }
bool Store::matters(const objects::IngressClass& o) const { return ingress_class_matters(o); }
bool Store::matters(const objects::Service& o) const {
  return service_referenced(o.metadata.namespace_, o.metadata.name);
}
bool Store::matters(const objects::EndpointSlice& o) const {
  return service_referenced(o.metadata.namespace_, o.service_name());
}
bool Store::matters(const objects::Secret& o) const {
  return secret_referenced(o.metadata.namespace_, o.metadata.name);
}
bool Store::matters(const objects::SubstitutionRuleSet& o) const {
  return rule_set_referenced(o.metadata.namespace_, o.metadata.name);
}
bool Store::matters(const objects::GatewayClass& o) const {
  return o.controller_name == options_.gateway_controller_name;
}
bool Store::matters(const objects::Gateway& o) const { return gateway_matters(o); }
bool Store::matters(const objects::HTTPRoute& o) const {
  return route_matters(o.metadata.namespace_, o.parent_refs);
}
bool Store::matters(const objects::GRPCRoute& o) const {
  return route_matters(o.metadata.namespace_, o.parent_refs);
}
// A grant can allow a reference of any of our routes or Gateways, which may be in any namespace.
bool Store::matters(const objects::ReferenceGrant&) const { return any_gateway_of_ours(false); }
// Namespace labels only matter to allowedRoutes selectors.
bool Store::matters(const objects::Namespace&) const { return any_gateway_of_ours(true); }
bool Store::matters(const objects::BackendTLSPolicy& o) const {
  for (const auto& t : o.target_refs) {
    if (!(t.group.empty() || t.group == "core") || t.kind != "Service") continue;
    if (any_in(services_by_route_ref_, object_key(o.metadata.namespace_, t.name),
               [&](const std::string& key) { return route_key_matters(key); })) {
      return true;
    }
  }
  return false;
}
bool Store::matters(const objects::ConfigMap& o) const {
  return config_map_referenced(o.metadata.namespace_, o.metadata.name);
}

std::set<std::string> config_maps_named(const objects::BackendTLSPolicy& policy) {
  std::set<std::string> out;
  for (const auto& ref : policy.ca_certificate_refs) {
    if ((ref.group.empty() || ref.group == "core") && ref.kind == "ConfigMap") {
      out.insert(object_key(policy.metadata.namespace_, ref.name));
    }
  }
  return out;
}

bool Store::config_map_named(const std::string& namespace_, const std::string& name) const {
  return config_maps_by_policy_ref_.contains(object_key(namespace_, name));
}

bool Store::config_map_referenced(const std::string& namespace_, const std::string& name) const {
  return any_in(config_maps_by_policy_ref_, object_key(namespace_, name),
                [&](const std::string& key) { return matters(backend_tls_policies_.at(key)); });
}

template <typename T>
void Store::index(const T& object, bool add) {
  if constexpr (std::is_same_v<T, objects::Ingress>) {
    index_ingress(object, add);
  } else if constexpr (std::is_same_v<T, objects::EndpointSlice>) {
    index_slice(object, add);
  } else if constexpr (std::is_same_v<T, objects::HTTPRoute>) {
    index_route(route_key(objects::Kind::kHTTPRoute, object.metadata), object.metadata.namespace_,
                backend_refs_of(object), add);
  } else if constexpr (std::is_same_v<T, objects::GRPCRoute>) {
    index_route(route_key(objects::Kind::kGRPCRoute, object.metadata), object.metadata.namespace_,
                backend_refs_of(object), add);
  } else if constexpr (std::is_same_v<T, objects::Gateway>) {
    index_gateway(object, add);
  } else if constexpr (std::is_same_v<T, objects::BackendTLSPolicy>) {
    const std::string key = object_key(object.metadata.namespace_, object.metadata.name);
    for (const auto& cm : config_maps_named(object)) {
      index_entry(config_maps_by_policy_ref_, cm, key, add);
    }
  }
}

// Relevance is judged with the indexes as they are with the object in place: an Ingress that
// refers to itself does not exist, so the order only matters for the record of changes.
template <typename T>
bool Store::upsert(std::map<std::string, T>& map, T value) {
  std::string key = object_key(value.metadata.namespace_, value.metadata.name);
  // One descent: the same position finds an existing object or hints where a new one goes.
  auto it = map.lower_bound(key);
  if (it == map.end() || it->first != key) {
    auto inserted = map.emplace_hint(it, std::move(key), std::move(value));
    index(inserted->second, true);
    bool result = matters(inserted->second);
    if (result) record(inserted->second);
    return result;
  }
  if (same_content(it->second, value)) {
    it->second.metadata.resource_version = std::move(value.metadata.resource_version);
    return false;
  }
  bool old_matters = matters(it->second);
  if (old_matters) record(it->second);
  index(it->second, false);
  it->second = std::move(value);
  index(it->second, true);
  bool new_matters = matters(it->second);
  if (new_matters) record(it->second);
  return old_matters || new_matters;
}

template <typename T>
bool Store::erase(std::map<std::string, T>& map, const std::string& key) {
  auto it = map.find(key);
  if (it == map.end()) return false;
  bool result = matters(it->second);
  if (result) record(it->second);
  index(it->second, false);
  map.erase(it);
  return result;
}

bool Store::insert(objects::Object object) {
  return std::visit(
      [&](auto& obj) -> bool {
        using T = std::decay_t<decltype(obj)>;
        if constexpr (std::is_same_v<T, objects::Ingress>) {
          return upsert(ingresses_, std::move(obj));
        } else if constexpr (std::is_same_v<T, objects::IngressClass>) {
          obj.metadata.namespace_.clear();
          return upsert(ingress_classes_, std::move(obj));
        } else if constexpr (std::is_same_v<T, objects::Service>) {
          return upsert(services_, std::move(obj));
        } else if constexpr (std::is_same_v<T, objects::EndpointSlice>) {
          return upsert(endpoint_slices_, std::move(obj));
        } else if constexpr (std::is_same_v<T, objects::Secret>) {
          return upsert(secrets_, std::move(obj));
        } else if constexpr (std::is_same_v<T, objects::SubstitutionRuleSet>) {
          return upsert(substitution_rule_sets_, std::move(obj));
        } else if constexpr (std::is_same_v<T, objects::GatewayClass>) {
          obj.metadata.namespace_.clear();
          return upsert(gateway_classes_, std::move(obj));
        } else if constexpr (std::is_same_v<T, objects::Gateway>) {
          return upsert(gateways_, std::move(obj));
        } else if constexpr (std::is_same_v<T, objects::HTTPRoute>) {
          return upsert(http_routes_, std::move(obj));
        } else if constexpr (std::is_same_v<T, objects::GRPCRoute>) {
          return upsert(grpc_routes_, std::move(obj));
        } else if constexpr (std::is_same_v<T, objects::ReferenceGrant>) {
          return upsert(reference_grants_, std::move(obj));
        } else if constexpr (std::is_same_v<T, objects::BackendTLSPolicy>) {
          return upsert(backend_tls_policies_, std::move(obj));
        } else if constexpr (std::is_same_v<T, objects::ConfigMap>) {
          return upsert(config_maps_, std::move(obj));
        } else {
          static_assert(std::is_same_v<T, objects::Namespace>);
          obj.metadata.namespace_.clear();
          return upsert(namespaces_, std::move(obj));
        }
      },
      object);
}

bool Store::remove(objects::Kind kind, std::string_view namespace_, std::string_view name) {
  switch (kind) {
    case objects::Kind::kIngress:
      return erase(ingresses_, object_key(namespace_, name));
    case objects::Kind::kIngressClass:
      return erase(ingress_classes_, object_key("", name));
    case objects::Kind::kService:
      return erase(services_, object_key(namespace_, name));
    case objects::Kind::kEndpointSlice:
      return erase(endpoint_slices_, object_key(namespace_, name));
    case objects::Kind::kSecret:
      return erase(secrets_, object_key(namespace_, name));
    case objects::Kind::kSubstitutionRuleSet:
      return erase(substitution_rule_sets_, object_key(namespace_, name));
    case objects::Kind::kGatewayClass:
      return erase(gateway_classes_, object_key("", name));
    case objects::Kind::kGateway:
      return erase(gateways_, object_key(namespace_, name));
    case objects::Kind::kHTTPRoute:
      return erase(http_routes_, object_key(namespace_, name));
    case objects::Kind::kGRPCRoute:
      return erase(grpc_routes_, object_key(namespace_, name));
    case objects::Kind::kReferenceGrant:
      return erase(reference_grants_, object_key(namespace_, name));
    case objects::Kind::kNamespace:
      return erase(namespaces_, object_key("", name));
    case objects::Kind::kBackendTLSPolicy:
      return erase(backend_tls_policies_, object_key(namespace_, name));
    case objects::Kind::kConfigMap:
      return erase(config_maps_, object_key(namespace_, name));
  }
  return false;
}

Store build_store(const source::LoadResult& loaded, ClassOptions options) {
  Store store(std::move(options));
  for (const auto& object : loaded.objects) store.insert(object.object);
  return store;
}

}  // namespace tidegate::controller::store
