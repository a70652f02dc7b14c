// Tests for the manifest loader and the object conversions it uses. The table covers what gets
// loaded and what gets reported; the tests after it check field values and the folder loader.

#include "source/manifest_loader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include "objects/objects.h"

namespace tidegate::controller::source {
namespace {

namespace fs = std::filesystem;
using objects::Kind;

// ---- Builders ----

std::string service_yaml(const std::string& name, const std::string& ns = "default") {
  return "apiVersion: v1\nkind: Service\nmetadata:\n  name: " + name + "\n  namespace: " + ns +
         "\nspec:\n  ports:\n  - name: http\n    port: 80\n    targetPort: 8080\n";
}

std::string ingress_yaml(const std::string& name, const std::string& path_type = "Prefix") {
  return "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: " + name +
         "\nspec:\n  ingressClassName: tidegate\n  rules:\n  - host: foo.com\n    http:\n"
         "      paths:\n"
         "      - path: /\n        pathType: Prefix\n"
         "        backend: {service: {name: web, port: {number: 80}}}\n"
         "      - path: /api\n        pathType: " +
         path_type + "\n        backend: {service: {name: web, port: {name: http}}}\n";
}

// A kind the loader does not read (ConfigMaps are read since BackendTLSPolicy).
std::string pod_yaml(const std::string& name) {
  return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\nspec:\n  containers: []\n";
}

struct WantObject {
  Kind kind;
  std::string key;  // "namespace/name", or "name" for IngressClass
  int document;
  int item = -1;
};

struct WantError {
  Severity severity;
  std::string message;  // the whole line
};

WantError error(std::string m) { return {Severity::kError, std::move(m)}; }
WantError warning(std::string m) { return {Severity::kWarning, std::move(m)}; }

struct Case {
  std::string name;
  std::string text;
  std::vector<WantObject> want_objects;
  std::vector<WantError> want_errors = {};
};

std::string key_of(const objects::Object& o) {
  const auto& m = objects::meta_of(o);
  return m.namespace_.empty() ? m.name : m.namespace_ + "/" + m.name;
}

void check(const Case& c, const LoadResult& got) {
  SCOPED_TRACE(c.name);
  ASSERT_EQ(got.objects.size(), c.want_objects.size()) << [&] {
    std::string s;
    for (const auto& e : got.errors) s += "  " + e.message + "\n";
    return s;
  }();
  for (size_t i = 0; i < got.objects.size(); ++i) {
    const auto& g = got.objects[i];
    const auto& w = c.want_objects[i];
    EXPECT_EQ(objects::kind_of(g.object), w.kind) << "object " << i;
    EXPECT_EQ(key_of(g.object), w.key) << "object " << i;
    EXPECT_EQ(g.document, w.document) << "object " << i;
    EXPECT_EQ(g.item, w.item) << "object " << i;
    EXPECT_EQ(g.file, "case.yaml");
  }
  std::vector<std::string> got_errors, want_errors;
  for (const auto& e : got.errors) {
    got_errors.push_back(std::string(to_string(e.severity)) + ": " + e.message);
    EXPECT_EQ(e.file, "case.yaml");
    EXPECT_EQ(e.message.find('\n'), std::string::npos) << "one line per error";
  }
  for (const auto& e : c.want_errors) {
    want_errors.push_back(std::string(to_string(e.severity)) + ": " + e.message);
  }
  EXPECT_EQ(got_errors, want_errors);
}

TEST(ManifestLoaderTest, Table) {
  const std::vector<Case> cases = {
      {"multi-document stream; leading marker, comment-only and empty documents skipped",
       "---\n" + service_yaml("web") + "---\n# just a comment\n---\n" + ingress_yaml("web") +
           "---\n---\n" + service_yaml("api", "team") + "---\n",
       {{Kind::kService, "default/web", 1},
        {Kind::kIngress, "default/web", 2},
        {Kind::kService, "team/api", 3}}},
      {"broken YAML: that document reported, the others kept",
       service_yaml("a") + "---\nkind: Service\nmetadata: {name: [\n---\n" + service_yaml("c"),
       {{Kind::kService, "default/a", 1}, {Kind::kService, "default/c", 3}},
       {error("case.yaml: document 2: invalid YAML at line 14, column 1: end of sequence flow "
              "not found")}},
      {"bad indentation in the middle document",
       service_yaml("a") + "---\napiVersion: v1\nkind: Service\n  metadata: x\n---\n" +
           service_yaml("c"),
       {{Kind::kService, "default/a", 1}, {Kind::kService, "default/c", 3}},
       {error("case.yaml: document 2: invalid YAML at line 14, column 11: illegal map value")}},
      {"unsupported kind is a warning",
       pod_yaml("cfg") + "---\n" + service_yaml("web"),
       {{Kind::kService, "default/web", 2}},
       {warning("case.yaml: document 1 (Pod cfg): ignored: unsupported kind")}},
      {"kind: List is expanded",
       "apiVersion: v1\nkind: List\nitems:\n- " +
           std::string("apiVersion: v1\n  kind: Service\n  metadata: {name: a}\n") +
           "- apiVersion: v1\n  kind: Pod\n  metadata: {name: cfg}\n" +
           "- apiVersion: networking.k8s.io/v1\n  kind: IngressClass\n  metadata: {name: tg}\n" +
           "  spec: {controller: tidegate.io/ingress-controller}\n",
       {{Kind::kService, "default/a", 1, 0}, {Kind::kIngressClass, "tg", 1, 2}},
       {warning("case.yaml: document 1, item 1 (Pod cfg): ignored: unsupported kind")}},
      {"typed list: items inherit kind and apiVersion",
       "apiVersion: v1\nkind: ServiceList\nitems:\n"
       "- metadata: {name: a, namespace: x}\n  spec: {ports: [{port: 80}]}\n"
       "- metadata: {name: b, namespace: x}\n",
       {{Kind::kService, "x/a", 1, 0}, {Kind::kService, "x/b", 1, 1}}},
      {"empty list", "apiVersion: v1\nkind: List\nitems: []\n", {}},
      {"nested lists are refused",
       "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items: []\n",
       {},
       {error("case.yaml: document 1, item 0 (List): nested lists are not supported")}},
      {"missing name: that document skipped",
       service_yaml("a") + "---\napiVersion: v1\nkind: Service\nmetadata: {namespace: x}\n",
       {{Kind::kService, "default/a", 1}},
       {error("case.yaml: document 2 (Service): metadata.name: required field missing")}},
      {"missing kind and apiVersion",
       "apiVersion: v1\nmetadata: {name: a}\n---\nkind: Service\nmetadata: {name: b}\n",
       {},
       {error("case.yaml: document 1 (a): missing kind"),
        error("case.yaml: document 2 (Service default/b): missing apiVersion")}},
      {"a document that is not an object",
       "- a\n- b\n---\njust text\n",
       {},
       {error("case.yaml: document 1: expected a Kubernetes object (a mapping), got a sequence"),
        error("case.yaml: document 2: expected a Kubernetes object (a mapping), got a scalar")}},
      {"unknown pathType names the field",
       ingress_yaml("web", "Foo"),
       {},
       {error("case.yaml: document 1 (Ingress default/web): "
              "spec.rules[0].http.paths[1].pathType: unknown value \"Foo\"")}},
      {"missing pathType",
       ingress_yaml("web", "~"),
       {},
       {error("case.yaml: document 1 (Ingress default/web): "
              "spec.rules[0].http.paths[1].pathType: required field missing")}},
      {"wrong shape names the field",
       "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: w}\n"
       "spec:\n  rules: {host: foo}\n",
       {},
       {error("case.yaml: document 1 (Ingress default/w): spec.rules: expected a sequence, got a "
              "mapping")}},
      {"backend port needs a number or a name",
       "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: w}\n"
       "spec:\n  defaultBackend: {service: {name: web, port: {}}}\n",
       {},
       {error("case.yaml: document 1 (Ingress default/w): spec.defaultBackend.service.port: one "
              "of number or name is required")}},
      {"port out of range",
       "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 70000}]}\n",
       {},
       {error("case.yaml: document 1 (Service default/s): spec.ports[0].port: 70000 is out of "
              "range 1-65535")}},
      {"a not-a-boolean condition",
       "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: e}\n"
       "addressType: IPv4\nendpoints:\n- addresses: [10.0.0.1]\n  conditions: {ready: maybe}\n",
       {},
       {error("case.yaml: document 1 (EndpointSlice default/e): endpoints[0].conditions.ready: "
              "expected true or false, got \"maybe\"")}},
      {"an apiVersion we do not read",
       "apiVersion: networking.k8s.io/v1beta1\nkind: Ingress\nmetadata: {name: old}\n",
       {},
       {error("case.yaml: document 1 (Ingress default/old): apiVersion: unsupported apiVersion "
              "\"networking.k8s.io/v1beta1\" for kind Ingress (want networking.k8s.io/v1)")}},
      {"duplicate in one file: the first wins",
       service_yaml("web") + "---\n" + service_yaml("web") + "---\n" + service_yaml("web", "b"),
       {{Kind::kService, "default/web", 1}, {Kind::kService, "b/web", 3}},
       {error("case.yaml: document 2 (Service default/web): duplicate of the object in "
              "case.yaml: document 1; ignored")}},
      {"same name, different kinds: not duplicates",
       service_yaml("web") + "---\n" + ingress_yaml("web"),
       {{Kind::kService, "default/web", 1}, {Kind::kIngress, "default/web", 2}}},
      {"explicit namespace default equals an omitted one",
       service_yaml("web") + "---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\n",
       {{Kind::kService, "default/web", 1}},
       {error("case.yaml: document 2 (Service default/web): duplicate of the object in "
              "case.yaml: document 1; ignored")}},
      {"JSON",
       R"({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": "web", "namespace": "j"},
                   "spec": {"ports": [{"name": "http", "port": 80, "targetPort": "http"}]}})",
       {{Kind::kService, "j/web", 1}}},
      {"document end marker",
       service_yaml("a") + "...\n" + service_yaml("b") + "...\n",
       {{Kind::kService, "default/a", 1}, {Kind::kService, "default/b", 2}}},
      {"content on the marker line",
       "--- {apiVersion: v1, kind: Service, metadata: {name: a}}\n"
       "--- {apiVersion: v1, kind: Service, metadata: {name: b}}\n",
       {{Kind::kService, "default/a", 1}, {Kind::kService, "default/b", 2}}},
      {"directive before the first document",
       "%YAML 1.2\n---\napiVersion: v1\nkind: Service\nmetadata: {name: a}\n",
       {{Kind::kService, "default/a", 1}}},
      {"invalid base64 in a Secret",
       "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata:\n  tls.key: 'not base64!'\n",
       {},
       {error("case.yaml: document 1 (Secret default/s): data[\"tls.key\"]: invalid base64")}},
      {"empty input", "", {}},
  };
  for (const auto& c : cases) check(c, load_manifest_text(c.text, "case.yaml"));
}

TEST(ManifestLoaderTest, WarningsAreNotErrors) {
  LoadResult r = load_manifest_text(pod_yaml("cfg"), "x.yaml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_FALSE(r.has_errors());
  r = load_manifest_text("kind: Service\n", "x.yaml");
  EXPECT_TRUE(r.has_errors());
}

TEST(ManifestLoaderTest, NeverThrowsOnGarbage) {
  for (std::string text : {"\t\t:::", "{{{{", "- [", "'unterminated", "!!binary ??", "\xff\xfe\x00",
                           "a: &x [*x]", "---\n...\n---\n...", "apiVersion: v1\nkind: List\n"}) {
    LoadResult r;
    EXPECT_NO_THROW(r = load_manifest_text(text, "g.yaml")) << text;
    EXPECT_TRUE(r.objects.empty()) << text;
  }
}

// ---- Field values ----

template <typename T>
const T& only(const LoadResult& r) {
  EXPECT_TRUE(r.errors.empty()) << (r.errors.empty() ? "" : r.errors[0].message);
  EXPECT_EQ(r.objects.size(), 1u);
  return std::get<T>(r.objects.at(0).object);
}

TEST(ManifestLoaderTest, IngressFields) {
  LoadResult r = load_manifest_text(R"(apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  namespace: shop
  uid: 1234
  resourceVersion: "99"
  creationTimestamp: "2024-03-01T10:00:00Z"
  labels: {app: web}
  annotations:
    kubernetes.io/ingress.class: tidegate
    tidegate.io/use-regex: "true"
spec:
  ingressClassName: tidegate
  defaultBackend:
    service: {name: fallback, port: {name: http}}
  rules:
  - host: Foo.COM
    http:
      paths:
      - path: /a
        pathType: Exact
        backend: {service: {name: a, port: {number: 8080}}}
      - pathType: ImplementationSpecific
        backend: {resource: {apiGroup: x.io, kind: Bucket, name: b}}
  - host: bar.com
  tls:
  - hosts: [foo.com, bar.com]
    secretName: cert
)",
                                    "i.yaml");
  const auto& ing = only<objects::Ingress>(r);
  EXPECT_EQ(ing.metadata.namespace_, "shop");
  EXPECT_EQ(ing.metadata.uid, "1234");
  EXPECT_EQ(ing.metadata.resource_version, "99");
  EXPECT_EQ(ing.metadata.creation_timestamp, "2024-03-01T10:00:00Z");
  EXPECT_EQ(ing.metadata.labels.at("app"), "web");
  EXPECT_EQ(ing.metadata.annotations.at("tidegate.io/use-regex"), "true");
  EXPECT_EQ(ing.spec.ingress_class_name, "tidegate");
  ASSERT_TRUE(ing.spec.default_backend && ing.spec.default_backend->service);
  EXPECT_EQ(ing.spec.default_backend->service->name, "fallback");
  EXPECT_EQ(ing.spec.default_backend->service->port, (objects::PortRef{std::nullopt, "http"}));
  ASSERT_EQ(ing.spec.rules.size(), 2u);
  EXPECT_EQ(ing.spec.rules[0].host, "Foo.COM");  // lowercasing is the translator's business
  ASSERT_EQ(ing.spec.rules[0].paths.size(), 2u);
  EXPECT_EQ(ing.spec.rules[0].paths[0].path, "/a");
  EXPECT_EQ(ing.spec.rules[0].paths[0].path_type, objects::PathType::kExact);
  EXPECT_EQ(ing.spec.rules[0].paths[0].backend.service->port.number, 8080);
  EXPECT_EQ(ing.spec.rules[0].paths[1].path, "");
  EXPECT_EQ(ing.spec.rules[0].paths[1].path_type, objects::PathType::kImplementationSpecific);
  EXPECT_EQ(ing.spec.rules[0].paths[1].backend.resource_kind, "Bucket");
  EXPECT_TRUE(ing.spec.rules[1].paths.empty());
  ASSERT_EQ(ing.spec.tls.size(), 1u);
  EXPECT_EQ(ing.spec.tls[0].hosts, (std::vector<std::string>{"foo.com", "bar.com"}));
  EXPECT_EQ(ing.spec.tls[0].secret_name, "cert");
}

TEST(ManifestLoaderTest, ServiceAndIngressClassFields) {
  LoadResult r = load_manifest_text(R"(apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: NodePort
  ports:
  - {name: http, port: 80, targetPort: 8080}
  - {name: grpc, port: 9000, targetPort: grpc-port, protocol: TCP}
  - {port: 53, protocol: UDP}
  - {port: 81, targetPort: "8081"}
)",
                                    "s.yaml");
  const auto& svc = only<objects::Service>(r);
  EXPECT_EQ(svc.metadata.namespace_, "default");
  EXPECT_EQ(svc.spec.type, "NodePort");
  ASSERT_EQ(svc.spec.ports.size(), 4u);
  EXPECT_EQ(svc.spec.ports[0].target_port, (objects::PortRef{8080, ""}));
  EXPECT_EQ(svc.spec.ports[1].target_port, (objects::PortRef{std::nullopt, "grpc-port"}));
  EXPECT_EQ(svc.spec.ports[2].target_port, (objects::PortRef{53, ""})) << "defaults to port";
  EXPECT_EQ(svc.spec.ports[2].protocol, "UDP");
  EXPECT_EQ(svc.spec.ports[2].name, "");
  EXPECT_EQ(svc.spec.ports[3].target_port, (objects::PortRef{8081, ""})) << "digits are a number";

  r = load_manifest_text(R"(apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: tidegate
  namespace: ignored
  annotations: {ingressclass.kubernetes.io/is-default-class: "true"}
spec: {controller: tidegate.io/ingress-controller}
)",
                         "c.yaml");
  const auto& ic = only<objects::IngressClass>(r);
  EXPECT_EQ(ic.metadata.namespace_, "") << "cluster-scoped";
  EXPECT_EQ(ic.spec.controller, "tidegate.io/ingress-controller");
  EXPECT_TRUE(ic.is_default());
}

TEST(ManifestLoaderTest, EndpointSliceFields) {
  LoadResult r = load_manifest_text(R"(apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-x1
  labels: {kubernetes.io/service-name: web}
addressType: IPv6
endpoints:
- addresses: ["fd00::1", "fd00::2"]
  conditions: {ready: true}
- addresses: ["fd00::3"]
  conditions: {ready: false, serving: true, terminating: true}
- addresses: ["fd00::4"]
ports:
- {name: http, port: 8080, protocol: TCP}
- {name: null, port: 9090}
- {name: all}
)",
                                    "e.yaml");
  const auto& s = only<objects::EndpointSlice>(r);
  EXPECT_EQ(s.service_name(), "web");
  EXPECT_EQ(s.address_type, "IPv6");
  ASSERT_EQ(s.endpoints.size(), 3u);
  EXPECT_EQ(s.endpoints[0].addresses, (std::vector<std::string>{"fd00::1", "fd00::2"}));
  EXPECT_EQ(s.endpoints[0].conditions,
            (objects::EndpointConditions{true, std::nullopt, std::nullopt}));
  EXPECT_EQ(s.endpoints[1].conditions, (objects::EndpointConditions{false, true, true}));
  EXPECT_EQ(s.endpoints[2].conditions, objects::EndpointConditions{});
  ASSERT_EQ(s.ports.size(), 3u);
  EXPECT_EQ(s.ports[0].port, 8080);
  EXPECT_EQ(s.ports[1].name, "");
  EXPECT_EQ(s.ports[1].port, 9090);
  EXPECT_EQ(s.ports[2].port, std::nullopt);
}

TEST(ManifestLoaderTest, SecretBase64AndStringData) {
  LoadResult r = load_manifest_text(R"(apiVersion: v1
kind: Secret
metadata: {name: cert, namespace: shop}
type: kubernetes.io/tls
data:
  tls.crt: aGVsbG8gd29ybGQ=
  tls.key: |
    c2VjcmV0
    LWtleQ==
  both: b2xk
  empty: ""
stringData:
  both: new
  plain: text
)",
                                    "sec.yaml");
  const auto& s = only<objects::Secret>(r);
  EXPECT_EQ(s.type, "kubernetes.io/tls");
  EXPECT_EQ(s.data, (std::map<std::string, std::string>{{"tls.crt", "hello world"},
                                                        {"tls.key", "secret-key"},
                                                        {"both", "new"},
                                                        {"empty", ""},
                                                        {"plain", "text"}}));
}

TEST(ManifestLoaderTest, SubstitutionRuleSets) {
  LoadResult r = load_manifest_text(R"(apiVersion: tidegate.io/v1alpha1
kind: SubstitutionRuleSet
metadata: {name: common, namespace: shop}
spec:
  rules:
  - {match: 'example\.com', replace: clone.test}
  - match: tracker
    replace: ""
    flags: i
---
apiVersion: tidegate.io/v1alpha1
kind: SubstitutionRuleSet
metadata: {name: empty}
---
apiVersion: tidegate.io/v1
kind: SubstitutionRuleSet
metadata: {name: future}
---
apiVersion: tidegate.io/v1alpha1
kind: SubstitutionRuleSet
metadata: {name: no-replace}
spec:
  rules:
  - match: a
---
apiVersion: tidegate.io/v1alpha1
kind: SubstitutionRuleSetList
items:
- metadata: {name: listed}
  spec: {rules: [{match: x, replace: y}]}
- metadata: {name: common, namespace: shop}
  spec: {rules: "not a list"}
---
apiVersion: tidegate.io/v1alpha1
kind: SubstitutionRuleSet
metadata: {name: common, namespace: shop}
)",
                                    "sets.yaml");
  ASSERT_EQ(r.objects.size(), 3u);
  for (const auto& o : r.objects) {
    EXPECT_EQ(objects::kind_of(o.object), objects::Kind::kSubstitutionRuleSet);
  }
  const auto& common = std::get<objects::SubstitutionRuleSet>(r.objects[0].object);
  EXPECT_EQ(common.metadata.namespace_, "shop");
  EXPECT_EQ(common.metadata.name, "common");
  EXPECT_EQ(r.objects[0].document, 1);
  EXPECT_EQ(common.rules, (std::vector<objects::SubstitutionRuleSetRule>{
                              {"example\\.com", "clone.test", ""}, {"tracker", "", "i"}}));
  const auto& empty = std::get<objects::SubstitutionRuleSet>(r.objects[1].object);
  EXPECT_EQ(empty.metadata.namespace_, "default");
  EXPECT_TRUE(empty.rules.empty());
  EXPECT_EQ(std::get<objects::SubstitutionRuleSet>(r.objects[2].object).metadata.name, "listed");
  EXPECT_EQ(r.objects[2].item, 0);
  std::vector<std::string> errors;
  for (const auto& e : r.errors) errors.push_back(e.message);
  EXPECT_EQ(errors,
            (std::vector<std::string>{
                "sets.yaml: document 3 (SubstitutionRuleSet default/future): apiVersion: "
                "unsupported apiVersion \"tidegate.io/v1\" for kind SubstitutionRuleSet (want "
                "tidegate.io/v1alpha1)",
                "sets.yaml: document 4 (SubstitutionRuleSet default/no-replace): "
                "spec.rules[0].replace: required field missing",
                "sets.yaml: document 5, item 1 (SubstitutionRuleSet shop/common): spec.rules: "
                "expected a sequence, got a scalar",
                "sets.yaml: document 6 (SubstitutionRuleSet shop/common): duplicate of the object "
                "in sets.yaml: document 1; ignored"}));
}

TEST(ManifestLoaderTest, DecodeBase64) {
  struct {
    std::string in;
    std::optional<std::string> want;
  } cases[] = {
      {"", ""},
      {"Zg==", "f"},
      {"Zm8=", "fo"},
      {"Zm9v", "foo"},
      {"Zm9vYg==", "foob"},
      {"Zm9vYmE=", "fooba"},
      {"Zm9vYmFy", "foobar"},
      {"Zm9v\nYmFy\r\n", "foobar"},
      {"AP8=", std::string("\x00\xff", 2)},
      {"+/+/", "\xfb\xff\xbf"},
      {"Zg", std::nullopt},  // padding required, as Go's StdEncoding
      {"Zg=", std::nullopt},
      {"Zg===", std::nullopt},
      {"Zh==", std::nullopt},  // non-zero trailing bits
      {"Zm9v!", std::nullopt},
      {"Zg==Zg==", std::nullopt},  // data after padding
      {"Z===", std::nullopt},
      {"Zm9-", std::nullopt},  // URL alphabet
  };
  for (const auto& c : cases) {
    EXPECT_EQ(objects::decode_base64(c.in), c.want) << "input: " << c.in;
  }
}

TEST(ManifestLoaderTest, ParseFunctionsDoNotThrowOnAnyNode) {
  for (const char* text : {"[1, 2]", "scalar", "~", "{metadata: []}", "{metadata: {name: {}}}",
                           "{spec: [], metadata: {name: a}}"}) {
    YAML::Node node = YAML::Load(text);
    EXPECT_FALSE(objects::parse_ingress(node).ok()) << text;
    EXPECT_FALSE(objects::parse_service(node).ok()) << text;
    EXPECT_FALSE(objects::parse_substitution_rule_set(node).ok()) << text;
    EXPECT_FALSE(objects::parse_object(node).ok()) << text;
    EXPECT_FALSE(objects::parse_ingress(node).error.empty()) << text;
  }
  EXPECT_EQ(
      objects::parse_object(YAML::Load("{apiVersion: v1, kind: Pod, metadata: {name: p}}")).error,
      "kind: unsupported kind \"Pod\"");
}

// ---- Folders ----

class ManifestDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           (std::string("tidegate-manifests-") + info->name() + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }

  fs::path dir_;
};

TEST_F(ManifestDirTest, ManifestDirLoadsSortedFilesAndSkipsTheRest) {
  write("b.yaml", service_yaml("b"));
  write("a.yml", service_yaml("a") + "---\n" + service_yaml("a2"));
  write("c.json", R"({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "c"}})");
  write("README.md", "not a manifest");
  write("d.yaml.bak", service_yaml("d"));
  write(".hidden.yaml", service_yaml("hidden"));
  fs::create_directories(dir_ / "sub.yaml");
  write("sub.yaml/e.yaml", service_yaml("e"));
  fs::create_symlink(dir_ / "b.yaml", dir_ / "link.yaml");  // a symlink to a file counts

  LoadResult r = load_manifest_dir(dir_);
  std::vector<std::string> got;
  for (const auto& o : r.objects) {
    got.push_back(fs::path(o.file).filename().string() + ":" + std::to_string(o.document) + ":" +
                  objects::meta_of(o.object).name);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"a.yml:1:a", "a.yml:2:a2", "b.yaml:1:b", "c.json:1:c"}));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].message, (dir_ / "link.yaml").string() +
                                     ": document 1 (Service default/b): duplicate of the object "
                                     "in " +
                                     (dir_ / "b.yaml").string() + ": document 1; ignored");
  EXPECT_EQ(r.errors[0].file, (dir_ / "link.yaml").string());
}

TEST_F(ManifestDirTest, ManifestDirDuplicatesAcrossFilesFirstFileWins) {
  write("20-web.yaml", service_yaml("web") + "  type: NodePort\n");
  write("10-web.yaml", service_yaml("web"));
  LoadResult r = load_manifest_dir(dir_);
  ASSERT_EQ(r.objects.size(), 1u);
  EXPECT_EQ(fs::path(r.objects[0].file).filename(), "10-web.yaml");
  EXPECT_EQ(std::get<objects::Service>(r.objects[0].object).spec.type, "ClusterIP");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("20-web.yaml: document 1 (Service default/web): duplicate"),
            std::string::npos)
      << r.errors[0].message;
}

TEST_F(ManifestDirTest, ManifestDirBrokenFileKeepsTheOthers) {
  write("a.yaml", "kind: [\n");
  write("b.yaml", service_yaml("b"));
  write("empty.yaml", "");
  LoadResult r = load_manifest_dir(dir_);
  ASSERT_EQ(r.objects.size(), 1u);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("a.yaml: document 1: invalid YAML at line"), std::string::npos)
      << r.errors[0].message;
}

TEST_F(ManifestDirTest, ManifestDirMissingIsOneError) {
  LoadResult r = load_manifest_dir(dir_ / "nope");
  EXPECT_TRUE(r.objects.empty());
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].severity, Severity::kError);
  EXPECT_NE(r.errors[0].message.find("not a directory"), std::string::npos);
}

}  // namespace
}  // namespace tidegate::controller::source
