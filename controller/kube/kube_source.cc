#include "kube/kube_source.h"

#include <optional>
#include <set>

#include "kube/json_reader.h"
#include "log/log.h"

namespace tidegate::controller::kube {

using objects::Kind;

KubeSource::KubeSource(std::unique_ptr<ApiClient> client, store::ClassOptions class_options,
                       KubeSourceOptions options, std::function<void(objects::Kind)> notify)
    : client_(std::move(client)),
      options_(std::move(options)),
      notify_(std::move(notify)),
      store_(std::move(class_options)) {
  std::vector<Kind> kinds = {Kind::kIngressClass,  Kind::kIngress, Kind::kService,
                             Kind::kEndpointSlice, Kind::kSecret,  Kind::kSubstitutionRuleSet};
  if (options_.gateway_api) {
    kinds.insert(kinds.end(), {Kind::kGatewayClass, Kind::kGateway, Kind::kHTTPRoute,
                               Kind::kGRPCRoute, Kind::kReferenceGrant, Kind::kNamespace,
                               Kind::kBackendTLSPolicy, Kind::kConfigMap});
  }
  for (Kind kind : kinds) {
    ReflectorOptions reflector = options_.reflector;
    // Our own CRD may not be installed: the controller then runs without rule sets. The Gateway
    // API's CRDs likewise; Namespaces may not be granted (a Role in one namespace).
    reflector.optional = kind != Kind::kIngressClass && kind != Kind::kIngress &&
                         kind != Kind::kService && kind != Kind::kEndpointSlice &&
                         kind != Kind::kSecret;
    reflectors_.push_back(
        std::make_unique<Reflector>(*client_, kind, options_.watch_namespace, *this, reflector));
  }
}

KubeSource::~KubeSource() { stop(); }

void KubeSource::start() {
  for (auto& r : reflectors_) r->start();
}

void KubeSource::stop() {
  for (auto& r : reflectors_) r->stop();
}

bool KubeSource::synced() const {
  for (const auto& r : reflectors_) {
    if (!r->synced()) return false;
  }
  return true;
}

bool KubeSource::synced_except(Kind kind) const {
  for (const auto& r : reflectors_) {
    if (r->kind() != kind && !r->synced()) return false;
  }
  return true;
}

uint64_t KubeSource::lists_handed_over() const {
  std::lock_guard lock(lists_mu_);
  return lists_;
}

void KubeSource::wait_for_list(uint64_t seen, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(lists_mu_);
  lists_cv_.wait_for(lock, timeout, [&] { return lists_ > seen; });
}

void KubeSource::listed(Kind) {
  {
    std::lock_guard lock(lists_mu_);
    ++lists_;
  }
  lists_cv_.notify_all();
}

namespace {

// "ns/name" (or "name") back into its parts.
std::pair<std::string, std::string> split_key(const std::string& key) {
  auto slash = key.find('/');
  if (slash == std::string::npos) return {"", key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

template <typename Map>
std::set<std::string> keys_of(const Map& map) {
  std::set<std::string> keys;
  for (const auto& [key, _] : map) keys.insert(key);
  return keys;
}

}  // namespace

bool KubeSource::secret_referenced(const std::string& namespace_, const std::string& name) const {
  return store_.secret_named(namespace_, name) || store_.secret_named_by_gateway(namespace_, name);
}

namespace {

// "ns/secret" for each Secret an Ingress names (spec.tls and the Secrets of annotations).
std::set<std::string> tls_secrets_of(const objects::Ingress* ingress) {
  if (ingress == nullptr) return {};
  return store::secrets_named(*ingress);
}

const objects::Ingress* find_ingress(const store::Store& store, const std::string& key) {
  auto it = store.ingresses().find(key);
  return it == store.ingresses().end() ? nullptr : &it->second;
}

// "ns/secret" for each Secret a Gateway's listeners name (certificateRefs).
std::set<std::string> gateway_secrets_of(const store::Store& store, const std::string& key) {
  auto it = store.gateways().find(key);
  return it == store.gateways().end() ? std::set<std::string>{} : store::secrets_named(it->second);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> KubeSource::reconcile_secrets(
    const std::set<std::string>& keys) {
  std::vector<std::pair<std::string, std::string>> wanted;
  for (const auto& key : keys) {
    auto [ns, name] = split_key(key);
    const bool named = secret_referenced(ns, name);
    const bool stored = store_.secrets().contains(key);
    if (stored && !named) store_.remove(Kind::kSecret, ns, name);
    if (named && !stored) wanted.emplace_back(ns, name);
  }
  return wanted;
}

std::vector<std::pair<std::string, std::string>> KubeSource::reconcile_all_secrets() {
  std::set<std::string> keys = keys_of(store_.secrets());
  keys.merge(store_.secrets_named_by_any());  // every Ingress's and Gateway's, from the indexes
  return reconcile_secrets(keys);
}

void KubeSource::fetch_secrets(const std::vector<std::pair<std::string, std::string>>& wanted) {
  // Outside the lock: a GET per newly named Secret. A missing one is the translator's to report.
  for (const auto& [ns, name] : wanted) {
    Response r = client_->get(resource_path(Kind::kSecret, ns, name));
    if (r.status != 200) continue;
    std::string not_json;  // not logged: the body is a Secret
    if (std::optional<objects::Node> read = read_json(r.body, &not_json)) {
      auto parsed = objects::parse_secret(*read);
      if (parsed.ok()) upsert(std::move(*parsed.value));
    }
  }
}

std::vector<std::pair<std::string, std::string>> KubeSource::reconcile_config_maps(
    const std::set<std::string>& keys) {
  std::vector<std::pair<std::string, std::string>> wanted;
  for (const auto& key : keys) {
    auto [ns, name] = split_key(key);
    const bool named = store_.config_map_named(ns, name);
    const bool stored = store_.config_maps().contains(key);
    if (stored && !named) store_.remove(Kind::kConfigMap, ns, name);
    if (named && !stored) wanted.emplace_back(ns, name);
  }
  return wanted;
}

std::vector<std::pair<std::string, std::string>> KubeSource::reconcile_all_config_maps() {
  std::set<std::string> keys = keys_of(store_.config_maps());
  for (const auto& [key, policy] : store_.backend_tls_policies()) {
    keys.merge(store::config_maps_named(policy));
  }
  return reconcile_config_maps(keys);
}

void KubeSource::fetch_config_maps(const std::vector<std::pair<std::string, std::string>>& wanted) {
  for (const auto& [ns, name] : wanted) {
    Response r = client_->get(resource_path(Kind::kConfigMap, ns, name));
    if (r.status != 200) continue;  // missing: the translator reports it
    std::string not_json;
    std::optional<objects::Node> read = read_json(r.body, &not_json);
    if (!read) {
      TG_WARN("kube", "ConfigMap " << ns << "/" << name << ": unreadable answer: " << not_json);
      continue;
    }
    auto parsed = objects::parse_config_map(*read);
    if (parsed.ok()) upsert(std::move(*parsed.value));
  }
}

namespace {

std::set<std::string> policy_config_maps_of(const store::Store& store, const std::string& key) {
  auto it = store.backend_tls_policies().find(key);
  return it == store.backend_tls_policies().end() ? std::set<std::string>{}
                                                  : store::config_maps_named(it->second);
}

}  // namespace

void KubeSource::replace(Kind kind, std::vector<objects::Object> objects) {
  bool changed = false;
  std::vector<std::pair<std::string, std::string>> wanted, wanted_maps;
  {
    std::lock_guard lock(mu_);
    std::set<std::string> before;
    switch (kind) {
      case Kind::kIngress:
        before = keys_of(store_.ingresses());
        break;
      case Kind::kIngressClass:
        before = keys_of(store_.ingress_classes());
        break;
      case Kind::kService:
        before = keys_of(store_.services());
        break;
      case Kind::kEndpointSlice:
        before = keys_of(store_.endpoint_slices());
        break;
      case Kind::kSecret:
        before = keys_of(store_.secrets());
        break;
      case Kind::kSubstitutionRuleSet:
        before = keys_of(store_.substitution_rule_sets());
        break;
      case Kind::kGatewayClass:
        before = keys_of(store_.gateway_classes());
        break;
      case Kind::kGateway:
        before = keys_of(store_.gateways());
        break;
      case Kind::kHTTPRoute:
        before = keys_of(store_.http_routes());
        break;
      case Kind::kGRPCRoute:
        before = keys_of(store_.grpc_routes());
        break;
      case Kind::kReferenceGrant:
        before = keys_of(store_.reference_grants());
        break;
      case Kind::kNamespace:
        before = keys_of(store_.namespaces());
        break;
      case Kind::kBackendTLSPolicy:
        before = keys_of(store_.backend_tls_policies());
        break;
      case Kind::kConfigMap:
        before = keys_of(store_.config_maps());
        break;
    }
    for (auto& o : objects) {
      const auto& meta = objects::meta_of(o);
      if (!before.empty()) {  // (empty on the first list)
        before.erase(
            store::object_key(objects::is_namespaced(kind) ? meta.namespace_ : "", meta.name));
      }
      if (kind == Kind::kSecret && !secret_referenced(meta.namespace_, meta.name)) continue;
      if (kind == Kind::kConfigMap && !store_.config_map_named(meta.namespace_, meta.name)) {
        continue;  // only CA bundles a BackendTLSPolicy names are kept
      }
      changed |= store_.insert(std::move(o));
    }
    for (const auto& key : before) {  // deleted while we were not watching
      auto [ns, name] = split_key(key);
      changed |= store_.remove(kind, ns, name);
    }
    // Pages of a first list that failed after them changed the store too (they were never
    // announced): this list is their end.
    changed |= pages_changed_.erase(kind) > 0;
    if (kind == Kind::kIngress || kind == Kind::kGateway) wanted = reconcile_all_secrets();
    if (kind == Kind::kBackendTLSPolicy) wanted_maps = reconcile_all_config_maps();
  }
  fetch_secrets(wanted);
  fetch_config_maps(wanted_maps);
  if (changed) notify_(kind);
}

bool KubeSource::takes_pages(Kind kind) const {
  return kind == Kind::kIngress || kind == Kind::kService || kind == Kind::kEndpointSlice;
}

void KubeSource::add_page(Kind kind, std::vector<objects::Object> objects) {
  std::lock_guard lock(mu_);
  bool changed = false;
  for (auto& o : objects) changed |= store_.insert(std::move(o));
  if (changed) pages_changed_.insert(kind);
}

// What replace() does after its inserts, once for the whole list.
void KubeSource::end_pages(Kind kind) {
  bool changed = false;
  std::vector<std::pair<std::string, std::string>> wanted;
  {
    std::lock_guard lock(mu_);
    changed = pages_changed_.erase(kind) > 0;
    if (kind == Kind::kIngress) wanted = reconcile_all_secrets();
  }
  fetch_secrets(wanted);
  if (changed) notify_(kind);
}

void KubeSource::upsert(objects::Object object) {
  const Kind kind = objects::kind_of(object);
  bool changed = false;
  std::vector<std::pair<std::string, std::string>> wanted, wanted_maps;
  {
    std::lock_guard lock(mu_);
    if (kind == Kind::kSecret) {
      const auto& meta = objects::meta_of(object);
      if (!secret_referenced(meta.namespace_, meta.name)) {
        // Not ours to hold; forget an older copy that an Ingress used to name.
        changed = store_.remove(kind, meta.namespace_, meta.name);
      } else {
        changed = store_.insert(std::move(object));
      }
    } else if (kind == Kind::kIngress) {
      // Only the Secrets this Ingress names, before or after, can change hands.
      const auto& meta = objects::meta_of(object);
      const std::string key = store::object_key(meta.namespace_, meta.name);
      std::set<std::string> secrets = tls_secrets_of(find_ingress(store_, key));
      changed = store_.insert(std::move(object));
      secrets.merge(tls_secrets_of(find_ingress(store_, key)));
      wanted = reconcile_secrets(secrets);
    } else if (kind == Kind::kGateway) {
      // Likewise the Secrets this Gateway's listeners name, before or after.
      const auto& meta = objects::meta_of(object);
      const std::string key = store::object_key(meta.namespace_, meta.name);
      std::set<std::string> secrets = gateway_secrets_of(store_, key);
      changed = store_.insert(std::move(object));
      secrets.merge(gateway_secrets_of(store_, key));
      wanted = reconcile_secrets(secrets);
    } else if (kind == Kind::kConfigMap) {
      const auto& meta = objects::meta_of(object);
      if (!store_.config_map_named(meta.namespace_, meta.name)) {
        changed = store_.remove(kind, meta.namespace_, meta.name);
      } else {
        changed = store_.insert(std::move(object));
      }
    } else if (kind == Kind::kBackendTLSPolicy) {
      // The ConfigMaps this policy names, before or after.
      const auto& meta = objects::meta_of(object);
      const std::string key = store::object_key(meta.namespace_, meta.name);
      std::set<std::string> maps = policy_config_maps_of(store_, key);
      changed = store_.insert(std::move(object));
      maps.merge(policy_config_maps_of(store_, key));
      wanted_maps = reconcile_config_maps(maps);
    } else {
      changed = store_.insert(std::move(object));
    }
  }
  fetch_secrets(wanted);
  fetch_config_maps(wanted_maps);
  TG_DEBUG("kube", objects::to_string(kind) << " changed: " << (changed ? "rebuild" : "no effect"));
  if (changed) notify_(kind);
}

void KubeSource::remove(Kind kind, const std::string& namespace_, const std::string& name) {
  bool changed;
  {
    std::lock_guard lock(mu_);
    std::set<std::string> secrets;
    if (kind == Kind::kIngress) {
      secrets = tls_secrets_of(find_ingress(store_, store::object_key(namespace_, name)));
    } else if (kind == Kind::kGateway) {
      secrets = gateway_secrets_of(store_, store::object_key(namespace_, name));
    }
    std::set<std::string> maps;
    if (kind == Kind::kBackendTLSPolicy) {
      maps = policy_config_maps_of(store_, store::object_key(namespace_, name));
    }
    changed = store_.remove(kind, namespace_, name);
    if (kind == Kind::kIngress || kind == Kind::kGateway) reconcile_secrets(secrets);
    if (kind == Kind::kBackendTLSPolicy) reconcile_config_maps(maps);
  }
  if (changed) notify_(kind);
}

}  // namespace tidegate::controller::kube
