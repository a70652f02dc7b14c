// The store's SubstitutionRuleSets (see store.h): kept in a file of their own so that the kinds
// in store.cc stay as they are.

#include "annotations/substitution.h"
#include "store/store.h"

namespace tidegate::controller::store {

bool Store::rule_set_referenced(const std::string& namespace_, const std::string& name) const {
  const std::string prefix = namespace_ + "/";
  for (auto it = ingresses_.lower_bound(prefix);
       it != ingresses_.end() && it->first.starts_with(prefix); ++it) {
    const auto& annotations = it->second.metadata.annotations;
    auto ref = annotations.find(std::string(annotations::kSubstitutionRuleSetAnnotation));
    if (ref != annotations.end() && annotations::trim(ref->second) == name &&
        ingress_matters(it->second)) {
      return true;
    }
  }
  return false;
}

bool Store::insert_rule_set(objects::SubstitutionRuleSet rule_set) {
  std::string key = object_key(rule_set.metadata.namespace_, rule_set.metadata.name);
  const bool referenced = rule_set_referenced(rule_set.metadata.namespace_, rule_set.metadata.name);
  auto [it, inserted] = substitution_rule_sets_.try_emplace(std::move(key), rule_set);
  if (!inserted) {
    if (it->second == rule_set) return false;
    it->second = std::move(rule_set);
  }
  changes_.other = true;  // not an endpoint-only change: the next build translates in full
  return referenced;
}

bool Store::remove_rule_set(std::string_view namespace_, std::string_view name) {
  auto it = substitution_rule_sets_.find(object_key(namespace_, name));
  if (it == substitution_rule_sets_.end()) return false;
  substitution_rule_sets_.erase(it);
  changes_.other = true;
  return rule_set_referenced(std::string(namespace_), std::string(name));
}

}  // namespace tidegate::controller::store
