#include "store/store.h"

#include <type_traits>
#include <utility>

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

Store::Store(ClassOptions options) : options_(std::move(options)) {}

size_t Store::size() const {
  return ingresses_.size() + ingress_classes_.size() + services_.size() + endpoint_slices_.size() +
         secrets_.size();
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

// Calls fn(ingress) for each stored Ingress in `namespace_` until fn returns true.
template <typename Fn>
bool any_ingress_in(const std::map<std::string, objects::Ingress>& ingresses,
                    const std::string& namespace_, Fn&& fn) {
  const std::string prefix = namespace_ + "/";
  for (auto it = ingresses.lower_bound(prefix);
       it != ingresses.end() && it->first.starts_with(prefix); ++it) {
    if (fn(it->second)) return true;
  }
  return false;
}

bool backend_names(const std::optional<objects::IngressBackend>& backend,
                   const std::string& service) {
  return backend && backend->service && backend->service->name == service;
}

}  // namespace

bool Store::service_referenced(const std::string& namespace_, const std::string& service) const {
  if (service.empty()) return false;
  return any_ingress_in(ingresses_, namespace_, [&](const objects::Ingress& ingress) {
    if (!ingress_matters(ingress)) return false;
    if (backend_names(ingress.spec.default_backend, service)) return true;
    for (const auto& rule : ingress.spec.rules) {
      for (const auto& path : rule.paths) {
        if (backend_names(path.backend, service)) return true;
      }
    }
    return false;
  });
}

bool Store::secret_referenced(const std::string& namespace_, const std::string& secret) const {
  // The routing model has no TLS yet; Secrets named by our Ingresses' spec.tls still count so
  // that the answer is right the day it does.
  return any_ingress_in(ingresses_, namespace_, [&](const objects::Ingress& ingress) {
    if (!ingress_matters(ingress)) return false;
    for (const auto& tls : ingress.spec.tls) {
      if (tls.secret_name == secret) return true;
    }
    return false;
  });
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

namespace {

template <typename T, typename Matters>
bool upsert(std::map<std::string, T>& map, T value, Matters&& matters) {
  std::string key = object_key(value.metadata.namespace_, value.metadata.name);
  auto it = map.find(key);
  if (it == map.end()) {
    auto [inserted, _] = map.emplace(std::move(key), std::move(value));
    return matters(inserted->second);
  }
  if (it->second == value) return false;
  bool old_matters = matters(it->second);
  it->second = std::move(value);
  return old_matters || matters(it->second);
}

}  // namespace

bool Store::insert(objects::Object object) {
  auto matters = [this](const auto& o) { return this->matters(o); };
  return std::visit(
      [&](auto& obj) -> bool {
        using T = std::decay_t<decltype(obj)>;
        if constexpr (std::is_same_v<T, objects::Ingress>) {
          return upsert(ingresses_, std::move(obj), matters);
        } else if constexpr (std::is_same_v<T, objects::IngressClass>) {
          obj.metadata.namespace_.clear();
          return upsert(ingress_classes_, std::move(obj), matters);
        } else if constexpr (std::is_same_v<T, objects::Service>) {
          return upsert(services_, std::move(obj), matters);
        } else if constexpr (std::is_same_v<T, objects::EndpointSlice>) {
          return upsert(endpoint_slices_, std::move(obj), matters);
        } else {
          static_assert(std::is_same_v<T, objects::Secret>);
          return upsert(secrets_, std::move(obj), matters);
        }
      },
      object);
}

namespace {

template <typename T, typename Matters>
bool erase(std::map<std::string, T>& map, const std::string& key, Matters&& matters) {
  auto it = map.find(key);
  if (it == map.end()) return false;
  bool result = matters(it->second);
  map.erase(it);
  return result;
}

}  // namespace

bool Store::remove(objects::Kind kind, std::string_view namespace_, std::string_view name) {
  auto matters = [this](const auto& o) { return this->matters(o); };
  switch (kind) {
    case objects::Kind::kIngress:
      return erase(ingresses_, object_key(namespace_, name), matters);
    case objects::Kind::kIngressClass:
      return erase(ingress_classes_, object_key("", name), matters);
    case objects::Kind::kService:
      return erase(services_, object_key(namespace_, name), matters);
    case objects::Kind::kEndpointSlice:
      return erase(endpoint_slices_, object_key(namespace_, name), matters);
    case objects::Kind::kSecret:
      return erase(secrets_, object_key(namespace_, name), matters);
  }
  return false;
}

Store build_store(const source::LoadResult& loaded, ClassOptions options) {
  Store store(std::move(options));
  for (const auto& object : loaded.objects) store.insert(object.object);
  for (const auto& loaded_set : loaded.substitution_rule_sets) {
    store.insert_rule_set(loaded_set.rule_set);
  }
  return store;
}

}  // namespace tidegate::controller::store
