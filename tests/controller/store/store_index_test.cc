// The store answers "can this change alter the translation" from indexes (Services, Secrets and
// SubstitutionRuleSets by the Ingresses naming them, EndpointSlices by Service). These tests replay
// random sequences of inserts and removes of every kind and check each answer, and each index
// lookup, against a brute-force scan of the store: what the store did before it had indexes.

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "objects/objects.h"
#include "store/store.h"

namespace tidegate::controller::store {
namespace {

using objects::Kind;

const std::vector<std::string> kNamespaces = {"a", "b"};
const std::vector<std::string> kServices = {"web", "api", "db", ""};
const std::vector<std::string> kSecrets = {"tls-1", "tls-2", ""};
const std::vector<std::string> kClasses = {"tidegate", "nginx", ""};
const std::vector<std::string> kRuleSets = {"common", "shop", ""};

class Random {
 public:
  explicit Random(uint32_t seed) : rng_(seed) {}
  size_t below(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  bool chance(int percent) { return static_cast<int>(below(100)) < percent; }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

 private:
  std::mt19937 rng_;
};

objects::IngressBackend backend(const std::string& service) {
  objects::IngressBackend b;
  b.service = objects::IngressServiceBackend{service, objects::PortRef{80, ""}};
  return b;
}

objects::Ingress random_ingress(Random& r) {
  objects::Ingress in;
  in.metadata.namespace_ = r.pick(kNamespaces);
  in.metadata.name = "ing-" + std::to_string(r.below(6));
  in.metadata.resource_version = std::to_string(r.below(3));
  const std::string& cls = r.pick(kClasses);
  if (!cls.empty()) {
    if (r.chance(50)) {
      in.spec.ingress_class_name = cls;
    } else {
      in.metadata.annotations[std::string(objects::kIngressClassAnnotation)] = cls;
    }
  }
  if (r.chance(30)) in.spec.default_backend = backend(r.pick(kServices));
  for (size_t i = r.below(3); i > 0; --i) {
    objects::IngressRule rule;
    rule.host = "h" + std::to_string(r.below(3)) + ".example";
    for (size_t j = r.below(3); j > 0; --j) {
      objects::HTTPIngressPath p;
      p.path = "/";
      p.backend = backend(r.pick(kServices));
      rule.paths.push_back(p);
    }
    in.spec.rules.push_back(rule);
  }
  for (size_t i = r.below(3); i > 0; --i) {
    in.spec.tls.push_back(objects::IngressTLS{{}, r.pick(kSecrets)});
  }
  if (r.chance(50)) {
    // Padded sometimes: the value is trimmed, as the translator reads it.
    in.metadata.annotations["tidegate.io/substitution-rule-set"] =
        (r.chance(20) ? " " : "") + r.pick(kRuleSets);
  }
  return in;
}

objects::IngressClass random_class(Random& r) {
  objects::IngressClass c;
  c.metadata.name = r.pick(std::vector<std::string>{"tidegate", "nginx", "extra"});
  c.spec.controller =
      r.pick(std::vector<std::string>{std::string(kDefaultControllerName), "k8s.io/ingress-nginx"});
  if (r.chance(40)) {
    c.metadata.annotations[std::string(objects::kDefaultClassAnnotation)] = "true";
  }
  return c;
}

objects::Service random_service(Random& r) {
  objects::Service s;
  s.metadata.namespace_ = r.pick(kNamespaces);
  s.metadata.name = r.pick(kServices);
  if (s.metadata.name.empty()) s.metadata.name = "web";
  s.metadata.resource_version = std::to_string(r.below(3));
  s.spec.ports.push_back(objects::ServicePort{"", static_cast<int32_t>(80 + r.below(2)),
                                              objects::PortRef{8080, ""}, "TCP", ""});
  return s;
}

objects::EndpointSlice random_slice(Random& r) {
  objects::EndpointSlice s;
  s.metadata.namespace_ = r.pick(kNamespaces);
  s.metadata.name = "slice-" + std::to_string(r.below(6));
  s.metadata.resource_version = std::to_string(r.below(3));
  const std::string& service = r.pick(kServices);
  if (!service.empty()) s.metadata.labels[std::string(objects::kServiceNameLabel)] = service;
  s.address_type = "IPv4";
  s.endpoints.push_back(objects::SliceEndpoint{{"10.0.0." + std::to_string(r.below(3))}, {}});
  return s;
}

objects::Secret random_secret(Random& r) {
  objects::Secret s;
  s.metadata.namespace_ = r.pick(kNamespaces);
  s.metadata.name = r.pick(kSecrets);
  if (s.metadata.name.empty()) s.metadata.name = "tls-3";
  s.metadata.resource_version = std::to_string(r.below(3));
  s.data["tls.crt"] = std::to_string(r.below(2));
  return s;
}

objects::SubstitutionRuleSet random_rule_set(Random& r) {
  objects::SubstitutionRuleSet s;
  s.metadata.namespace_ = r.pick(kNamespaces);
  s.metadata.name = r.pick(kRuleSets);
  if (s.metadata.name.empty()) s.metadata.name = "unnamed";
  s.metadata.resource_version = std::to_string(r.below(3));
  s.rules.push_back({"a", std::to_string(r.below(2)), ""});
  return s;
}

// ---- The brute-force answers: scans, as the store did before its indexes ----

bool ingress_matters(const Store& s, const objects::Ingress& in) {
  return select_ingress(in, s.ingress_classes(), s.options()) != IngressSelection::kOtherClass;
}

bool scan_service_referenced(const Store& s, const std::string& ns, const std::string& service) {
  if (service.empty()) return false;
  auto names = [&](const std::optional<objects::IngressBackend>& b) {
    return b && b->service && b->service->name == service;
  };
  for (const auto& [key, in] : s.ingresses()) {
    if (in.metadata.namespace_ != ns || !ingress_matters(s, in)) continue;
    if (names(in.spec.default_backend)) return true;
    for (const auto& rule : in.spec.rules) {
      for (const auto& p : rule.paths) {
        if (names(p.backend)) return true;
      }
    }
  }
  return false;
}

bool scan_secret_named(const Store& s, const std::string& ns, const std::string& secret,
                       bool ours_only) {
  for (const auto& [key, in] : s.ingresses()) {
    if (in.metadata.namespace_ != ns || (ours_only && !ingress_matters(s, in))) continue;
    for (const auto& tls : in.spec.tls) {
      if (!tls.secret_name.empty() && tls.secret_name == secret) return true;
    }
  }
  return false;
}

bool scan_rule_set_referenced(const Store& s, const std::string& ns, const std::string& name) {
  for (const auto& [key, in] : s.ingresses()) {
    if (in.metadata.namespace_ != ns || !ingress_matters(s, in)) continue;
    auto it = in.metadata.annotations.find("tidegate.io/substitution-rule-set");
    if (it == in.metadata.annotations.end()) continue;
    std::string value = it->second;
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    if (!value.empty() && value == name) return true;
  }
  return false;
}

std::vector<const objects::EndpointSlice*> scan_slices_of(const Store& s, const std::string& ns,
                                                          const std::string& service) {
  std::vector<const objects::EndpointSlice*> out;
  for (const auto& [key, slice] : s.endpoint_slices()) {
    if (slice.metadata.namespace_ == ns && slice.service_name() == service) out.push_back(&slice);
  }
  return out;
}

template <typename T>
bool same_but_version(const T& a, const T& b) {
  T copy = b;
  copy.metadata.resource_version = a.metadata.resource_version;
  return a == copy;
}

// What insert(o) must answer, judged before the call.
template <typename T>
bool expected_insert(const Store& s, const std::map<std::string, T>& map, const T& o,
                     bool (*matters)(const Store&, const T&)) {
  auto it = map.find(object_key(o.metadata.namespace_, o.metadata.name));
  if (it == map.end()) return matters(s, o);
  if (same_but_version(it->second, o)) return false;
  return matters(s, it->second) || matters(s, o);
}

bool matters_ingress(const Store& s, const objects::Ingress& o) { return ingress_matters(s, o); }
bool matters_class(const Store& s, const objects::IngressClass& o) {
  return o.metadata.name == s.options().ingress_class ||
         o.spec.controller == s.options().controller_name;
}
bool matters_service(const Store& s, const objects::Service& o) {
  return scan_service_referenced(s, o.metadata.namespace_, o.metadata.name);
}
bool matters_slice(const Store& s, const objects::EndpointSlice& o) {
  return scan_service_referenced(s, o.metadata.namespace_, o.service_name());
}
bool matters_secret(const Store& s, const objects::Secret& o) {
  return scan_secret_named(s, o.metadata.namespace_, o.metadata.name, true);
}
bool matters_rule_set(const Store& s, const objects::SubstitutionRuleSet& o) {
  return scan_rule_set_referenced(s, o.metadata.namespace_, o.metadata.name);
}

void check_lookups(const Store& s) {
  // Every Secret any stored Ingress or Gateway names, of any class: the indexes' keys against
  // the union computed object by object (what the source's reconciliation did before).
  std::set<std::string> named;
  for (const auto& [key, in] : s.ingresses()) named.merge(secrets_named(in));
  for (const auto& [key, gw] : s.gateways()) named.merge(secrets_named(gw));
  EXPECT_EQ(s.secrets_named_by_any(), named);
  for (const auto& ns : kNamespaces) {
    for (const auto& service : kServices) {
      EXPECT_EQ(s.service_referenced(ns, service), scan_service_referenced(s, ns, service))
          << ns << "/" << service;
      EXPECT_EQ(s.endpoint_slices_of(ns, service), scan_slices_of(s, ns, service))
          << ns << "/" << service;
    }
    for (const auto& secret : kSecrets) {
      if (secret.empty()) continue;
      EXPECT_EQ(s.secret_named(ns, secret), scan_secret_named(s, ns, secret, false))
          << ns << "/" << secret;
      EXPECT_EQ(s.secret_referenced(ns, secret), scan_secret_named(s, ns, secret, true))
          << ns << "/" << secret;
    }
    for (const auto& set : kRuleSets) {
      EXPECT_EQ(s.rule_set_referenced(ns, set), scan_rule_set_referenced(s, ns, set))
          << ns << "/" << set;
    }
  }
}

TEST(StoreIndexTest, AnswersMatchABruteForceScanOverRandomChanges) {
  size_t true_answers = 0, false_answers = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Random r(seed);
    Store s;
    s.take_changes();
    Changes want_changes;
    for (int step = 0; step < 300; ++step) {
      const size_t kind = r.below(6);
      const bool remove = r.chance(25);
      bool got = false, want = false;
      std::string slice_key;
      std::set<std::string> slice_services;
      switch (kind) {
        case 0: {
          auto o = random_ingress(r);
          if (remove) {
            auto it = s.ingresses().find(object_key(o.metadata.namespace_, o.metadata.name));
            want = it != s.ingresses().end() && ingress_matters(s, it->second);
            got = s.remove(Kind::kIngress, o.metadata.namespace_, o.metadata.name);
          } else {
            want = expected_insert(s, s.ingresses(), o, matters_ingress);
            got = s.insert(o);
          }
          break;
        }
        case 1: {
          auto o = random_class(r);
          if (remove) {
            auto it = s.ingress_classes().find(o.metadata.name);
            want = it != s.ingress_classes().end() && matters_class(s, it->second);
            got = s.remove(Kind::kIngressClass, "", o.metadata.name);
          } else {
            want = expected_insert(s, s.ingress_classes(), o, matters_class);
            got = s.insert(o);
          }
          break;
        }
        case 2: {
          auto o = random_service(r);
          if (remove) {
            auto it = s.services().find(object_key(o.metadata.namespace_, o.metadata.name));
            want = it != s.services().end() && matters_service(s, it->second);
            got = s.remove(Kind::kService, o.metadata.namespace_, o.metadata.name);
          } else {
            want = expected_insert(s, s.services(), o, matters_service);
            got = s.insert(o);
          }
          break;
        }
        case 3: {
          auto o = random_slice(r);
          slice_key = object_key(o.metadata.namespace_, o.metadata.name);
          auto it = s.endpoint_slices().find(slice_key);
          if (it != s.endpoint_slices().end() && matters_slice(s, it->second)) {
            slice_services.insert(object_key(o.metadata.namespace_, it->second.service_name()));
          }
          if (remove) {
            want = it != s.endpoint_slices().end() && matters_slice(s, it->second);
            got = s.remove(Kind::kEndpointSlice, o.metadata.namespace_, o.metadata.name);
          } else {
            want = expected_insert(s, s.endpoint_slices(), o, matters_slice);
            if (want && matters_slice(s, o)) {
              slice_services.insert(object_key(o.metadata.namespace_, o.service_name()));
            }
            got = s.insert(o);
          }
          break;
        }
        case 5: {
          auto o = random_rule_set(r);
          const auto& sets = s.substitution_rule_sets();
          if (remove) {
            auto it = sets.find(object_key(o.metadata.namespace_, o.metadata.name));
            want = it != sets.end() && matters_rule_set(s, it->second);
            got = s.remove(Kind::kSubstitutionRuleSet, o.metadata.namespace_, o.metadata.name);
          } else {
            want = expected_insert(s, sets, o, matters_rule_set);
            got = s.insert(o);
          }
          break;
        }
        default: {
          auto o = random_secret(r);
          if (remove) {
            auto it = s.secrets().find(object_key(o.metadata.namespace_, o.metadata.name));
            want = it != s.secrets().end() && matters_secret(s, it->second);
            got = s.remove(Kind::kSecret, o.metadata.namespace_, o.metadata.name);
          } else {
            want = expected_insert(s, s.secrets(), o, matters_secret);
            got = s.insert(o);
          }
          break;
        }
      }
      ASSERT_EQ(got, want) << "step " << step << ", kind " << kind << (remove ? " remove" : "");
      (got ? true_answers : false_answers)++;
      if (got && kind == 3) {
        // Once something else changed, the batch is a full translation: slices are no longer
        // recorded (those before stay).
        if (!want_changes.other) {
          want_changes.slices.insert(slice_key);
          want_changes.services.merge(slice_services);
        }
      } else if (got) {
        want_changes.other = true;
      }
      check_lookups(s);
      if (r.chance(10)) {
        Changes changes = s.take_changes();
        EXPECT_EQ(changes.other, want_changes.other) << "step " << step;
        EXPECT_EQ(changes.slices, want_changes.slices) << "step " << step;
        EXPECT_EQ(changes.services, want_changes.services) << "step " << step;
        want_changes = {};
      }
    }
  }
  // Both answers were exercised plenty (the generator is not degenerate).
  EXPECT_GT(true_answers, 2000u);
  EXPECT_GT(false_answers, 2000u);
}

TEST(StoreIndexTest, ResourceVersionAloneDoesNotMatter) {
  Store s;
  objects::Ingress in;
  in.metadata.namespace_ = "default";
  in.metadata.name = "web";
  in.metadata.resource_version = "1";
  in.spec.ingress_class_name = "tidegate";
  EXPECT_TRUE(s.insert(in));
  in.metadata.resource_version = "2";  // e.g. our own status write
  EXPECT_FALSE(s.insert(in));
  EXPECT_EQ(s.ingresses().at("default/web").metadata.resource_version, "2") << "still stored";
  in.spec.ingress_class_name = "nginx";
  in.metadata.resource_version = "3";
  EXPECT_TRUE(s.insert(in)) << "it left our class";
}

// The Secrets the annotations name are kept too (the Kubernetes source drops every other
// Secret): the backends' CA, basic authentication's users, the client certificates' CA; only in
// the Ingress's own namespace, in both spellings.
TEST(SecretsNamed, SpecTlsAndTheAnnotationsThatNameSecrets) {
  objects::Ingress ing;
  ing.metadata.namespace_ = "shop";
  ing.metadata.name = "web";
  ing.spec.tls.push_back({{"a.com"}, "site-tls"});
  ing.metadata.annotations = {
      {"tidegate.io/proxy-ssl-secret", "backend-ca"},
      {"nginx.ingress.kubernetes.io/auth-secret", "shop/users"},
      {"tidegate.io/auth-tls-secret", " client-ca "},
      {"nginx.ingress.kubernetes.io/auth-tls-secret", "other/client-ca"},
      {"tidegate.io/auth-realm", "not-a-secret"},
  };
  EXPECT_EQ(secrets_named(ing), (std::set<std::string>{"shop/site-tls", "shop/backend-ca",
                                                       "shop/users", "shop/client-ca"}));
}

}  // namespace
}  // namespace tidegate::controller::store
