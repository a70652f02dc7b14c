// crds/substitutionruleset.yaml: the CRD's shape, a structural schema, and limits that agree with
// what the controller and the data plane accept (lib/substitution/rule.h).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <re2/re2.h>
#include <yaml-cpp/yaml.h>

#include "kube/api.h"
#include "objects/objects.h"
#include "substitution/rule.h"

namespace tidegate {
namespace {

YAML::Node load_crd() {
  return YAML::LoadFile(std::string(TIDEGATE_SOURCE_DIR) + "/crds/substitutionruleset.yaml");
}

// A structural schema (Kubernetes' rule for apiextensions.k8s.io/v1): every node says its type,
// and metadata is not described beyond that.
void expect_structural(const YAML::Node& schema, const std::string& path) {
  ASSERT_TRUE(schema.IsMap()) << path;
  ASSERT_TRUE(schema["type"].IsDefined()) << path << " has no type";
  const std::string type = schema["type"].as<std::string>();
  if (schema["properties"]) {
    EXPECT_EQ(type, "object") << path;
    for (const auto& kv : schema["properties"]) {
      expect_structural(kv.second, path + "." + kv.first.as<std::string>());
    }
  }
  if (schema["items"]) {
    EXPECT_EQ(type, "array") << path;
    expect_structural(schema["items"], path + "[]");
  }
  if (type == "array") {
    EXPECT_TRUE(schema["items"].IsDefined()) << path << ": array without items";
  }
  for (const char* banned : {"x-kubernetes-preserve-unknown-fields", "additionalProperties"}) {
    EXPECT_FALSE(schema[banned].IsDefined()) << path << " uses " << banned;
  }
}

TEST(SubstitutionRuleSetCrdTest, Shape) {
  YAML::Node crd = load_crd();
  EXPECT_EQ(crd["apiVersion"].as<std::string>(), "apiextensions.k8s.io/v1");
  EXPECT_EQ(crd["kind"].as<std::string>(), "CustomResourceDefinition");
  EXPECT_EQ(crd["metadata"]["name"].as<std::string>(), "substitutionrulesets.tidegate.io");
  const YAML::Node spec = crd["spec"];
  EXPECT_EQ(spec["group"].as<std::string>(), "tidegate.io");
  EXPECT_EQ(spec["scope"].as<std::string>(), "Namespaced");
  EXPECT_EQ(spec["names"]["kind"].as<std::string>(), controller::objects::kSubstitutionRuleSetKind);
  EXPECT_EQ(spec["names"]["plural"].as<std::string>(), "substitutionrulesets");
  // The API source lists and watches the resource the CRD defines.
  EXPECT_EQ(controller::kube::group_resource(controller::objects::Kind::kSubstitutionRuleSet),
            spec["names"]["plural"].as<std::string>() + "." + spec["group"].as<std::string>());
  EXPECT_EQ(spec["names"]["listKind"].as<std::string>(), "SubstitutionRuleSetList");

  ASSERT_EQ(spec["versions"].size(), 1u);
  const YAML::Node version = spec["versions"][0];
  EXPECT_EQ(spec["group"].as<std::string>() + "/" + version["name"].as<std::string>(),
            controller::objects::kSubstitutionRuleSetApiVersion);
  EXPECT_EQ(controller::kube::resource_path(controller::objects::Kind::kSubstitutionRuleSet, ""),
            "/apis/" + spec["group"].as<std::string>() + "/" + version["name"].as<std::string>() +
                "/" + spec["names"]["plural"].as<std::string>());
  EXPECT_TRUE(version["served"].as<bool>());
  EXPECT_TRUE(version["storage"].as<bool>());

  const YAML::Node schema = version["schema"]["openAPIV3Schema"];
  expect_structural(schema, "openAPIV3Schema");
  EXPECT_EQ(schema["properties"]["metadata"].size(), 1u) << "metadata: only its type";
  const YAML::Node rules = schema["properties"]["spec"]["properties"]["rules"];
  EXPECT_EQ(rules["type"].as<std::string>(), "array");
  EXPECT_EQ(rules["maxItems"].as<size_t>(), substitution::kMaxRules);
  const YAML::Node rule = rules["items"];
  EXPECT_EQ(rule["required"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"match", "replace"}));
  const YAML::Node fields = rule["properties"];
  EXPECT_EQ(fields.size(), 3u);
  for (const char* name : {"match", "replace", "flags"}) {
    EXPECT_EQ(fields[name]["type"].as<std::string>(), "string") << name;
  }
  EXPECT_EQ(fields["match"]["minLength"].as<size_t>(), 1u);
  EXPECT_EQ(fields["match"]["maxLength"].as<size_t>(), substitution::kMaxPatternBytes);
  EXPECT_EQ(fields["replace"]["maxLength"].as<size_t>(), substitution::kMaxReplacementBytes);
  EXPECT_FALSE(fields["replace"]["minLength"].IsDefined()) << "an empty replacement deletes";

  // The API server checks flags with this pattern (ECMA-262 there; RE2 reads this one the same
  // way): it must let through exactly the flags the engine accepts.
  const std::string pattern = fields["flags"]["pattern"].as<std::string>();
  EXPECT_EQ(pattern, "^i?$");
  RE2 re(pattern);
  ASSERT_TRUE(re.ok());
  for (const char* flags : {"", "i", "g", "I", "ii", "im"}) {
    const bool schema_accepts = RE2::PartialMatch(flags, re);
    const bool engine_accepts = !substitution::validate_rule({"abc", "x", flags}).has_value();
    EXPECT_EQ(schema_accepts, engine_accepts) << "flags \"" << flags << "\"";
  }
}

}  // namespace
}  // namespace tidegate
