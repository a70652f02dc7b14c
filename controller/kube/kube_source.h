#pragma once
// The Kubernetes API as the controller's source: one reflector per kind feeding a Store that the
// sync loop's build function reads. The reflectors' threads write the store under a mutex; the
// build function reads it under the same mutex (translation is fast compared with the batching
// hold-off, and this keeps the store itself single-threaded code).
//
// Secrets: only those an Ingress names (spec.tls, proxy-ssl-secret, auth-secret,
// auth-tls-secret) are kept; the rest are dropped
// on arrival, and one that becomes referenced later is fetched by name. ConfigMaps likewise:
// only those a BackendTLSPolicy names in caCertificateRefs (its CA bundle) are kept.
//
// SubstitutionRuleSets: all are kept (they are small, and an Ingress may start naming one at any
// time). Their CRD is optional: while the API server does not serve the resource, the kind is
// empty and synced, and the reflector lists again every ReflectorOptions::absent_recheck.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kube/client.h"
#include "kube/reflector.h"
#include "store/store.h"

namespace tidegate::controller::kube {

struct KubeSourceOptions {
  std::string watch_namespace;  // empty: all namespaces
  ReflectorOptions reflector;
  // Watch the Gateway API's kinds (and Namespaces, for allowedRoutes selectors); each is
  // optional: a CRD not installed (or not granted) is nothing to watch, rechecked.
  bool gateway_api = true;
};

class KubeSource : public ReflectorSink {
 public:
  // `notify` is called (from a reflector thread) after each change that can alter the routes,
  // with the kind that changed.
  KubeSource(std::unique_ptr<ApiClient> client, store::ClassOptions class_options,
             KubeSourceOptions options, std::function<void(objects::Kind)> notify);
  ~KubeSource() override;

  void start();
  void stop();
  // Every kind has completed its first list.
  bool synced() const;
  // Every kind but `kind` has completed its first list.
  bool synced_except(objects::Kind kind) const;
  // How many lists the reflectors have handed over so far; wait_for_list() returns once there
  // are more than `seen`, or after `timeout`.
  uint64_t lists_handed_over() const;
  void wait_for_list(uint64_t seen, std::chrono::milliseconds timeout) const;

  // Runs fn(const store::Store&) with the store locked; returns what fn returns.
  template <typename Fn>
  auto with_store(Fn&& fn) const {
    std::lock_guard lock(mu_);
    return fn(static_cast<const store::Store&>(store_));
  }

  // Runs fn(const store::Store&, const store::Changes&) with the store locked, where the changes
  // are those since the previous call (the endpoint fast path needs both under one lock).
  template <typename Fn>
  auto with_store_and_changes(Fn&& fn) {
    std::lock_guard lock(mu_);
    store::Changes changes = store_.take_changes();
    return fn(static_cast<const store::Store&>(store_), changes);
  }

  ApiClient& client() { return *client_; }

  // ReflectorSink
  void replace(objects::Kind kind, std::vector<objects::Object> objects) override;
  void upsert(objects::Object object) override;
  void remove(objects::Kind kind, const std::string& namespace_, const std::string& name) override;
  void listed(objects::Kind kind) override;
  // The first lists of Ingresses, Services and EndpointSlices (the large kinds, which only their
  // reflectors write) are stored page by page.
  bool takes_pages(objects::Kind kind) const override;
  void add_page(objects::Kind kind, std::vector<objects::Object> objects) override;
  void end_pages(objects::Kind kind) override;

 private:
  bool secret_referenced(const std::string& namespace_, const std::string& name) const;  // locked
  // After an Ingress change (locked): of the Secrets `keys` ("ns/name"), drops those no Ingress
  // names any more and returns those named but not stored. The second form looks at every
  // Secret stored or named (after a relist).
  std::vector<std::pair<std::string, std::string>> reconcile_secrets(
      const std::set<std::string>& keys);
  std::vector<std::pair<std::string, std::string>> reconcile_all_secrets();
  void fetch_secrets(const std::vector<std::pair<std::string, std::string>>& wanted);
  // ConfigMaps likewise, for the BackendTLSPolicies that name them (caCertificateRefs).
  std::vector<std::pair<std::string, std::string>> reconcile_config_maps(
      const std::set<std::string>& keys);
  std::vector<std::pair<std::string, std::string>> reconcile_all_config_maps();
  void fetch_config_maps(const std::vector<std::pair<std::string, std::string>>& wanted);

  std::unique_ptr<ApiClient> client_;
  KubeSourceOptions options_;
  std::function<void(objects::Kind)> notify_;
  mutable std::mutex mu_;
  store::Store store_;
  std::vector<std::unique_ptr<Reflector>> reflectors_;
  std::set<objects::Kind> pages_changed_;  // (locked) kinds whose pages changed the store
  mutable std::mutex lists_mu_;
  mutable std::condition_variable lists_cv_;
  uint64_t lists_ = 0;  // under lists_mu_
};

}  // namespace tidegate::controller::kube
