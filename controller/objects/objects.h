#pragma once
// Typed views of the Kubernetes objects the controller reads, holding only the fields it uses, and
// their conversion from a document tree (objects/node.h): the same functions serve a folder of
// manifests (yaml-cpp's trees, copied) and the API server's responses (kube/json_reader).
//
// Conversion is strict about shape (a sequence where a mapping is expected, an unknown enum value,
// a missing required field is an error naming the field, e.g.
// `spec.rules[0].http.paths[1].pathType: unknown value "Foo"`) and tolerant about content: whether
// a host name, a path or a regex is acceptable is the translator's decision, because it can drop
// one rule and keep the rest of the object, where a conversion error loses the whole object.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "objects/gateway.h"
#include "objects/meta.h"
#include "objects/node.h"

namespace tidegate::controller::objects {

inline constexpr std::string_view kIngressClassAnnotation = "kubernetes.io/ingress.class";
inline constexpr std::string_view kDefaultClassAnnotation =
    "ingressclass.kubernetes.io/is-default-class";
inline constexpr std::string_view kServiceNameLabel = "kubernetes.io/service-name";

// A port given as a number or as a name (Kubernetes' IntOrString, and ServiceBackendPort's
// number/name pair). Exactly one is set.
struct PortRef {
  std::optional<int32_t> number;
  std::string name;  // meaningful when !number
  bool is_number() const { return number.has_value(); }
  std::string to_string() const;  // "8080" or "http"
  bool operator==(const PortRef&) const = default;
};

// ---- networking.k8s.io/v1 Ingress ----

enum class PathType { kExact, kPrefix, kImplementationSpecific };
const char* to_string(PathType t);

struct IngressServiceBackend {
  std::string name;
  PortRef port;
  bool operator==(const IngressServiceBackend&) const = default;
};

// Exactly one of `service` and `resource_kind` is set. Resource backends are parsed so that the
// translator can report them as unsupported rather than the whole Ingress being rejected.
struct IngressBackend {
  std::optional<IngressServiceBackend> service;
  std::optional<std::string> resource_kind;
  bool operator==(const IngressBackend&) const = default;
};

struct HTTPIngressPath {
  std::string path;  // may be empty: the translator reads it as "/"
  PathType path_type = PathType::kPrefix;
  IngressBackend backend;
  bool operator==(const HTTPIngressPath&) const = default;
};

struct IngressRule {
  std::string host;                    // empty: any host
  std::vector<HTTPIngressPath> paths;  // rule.http.paths; empty when the rule has no http
  bool operator==(const IngressRule&) const = default;
};

struct IngressTLS {
  std::vector<std::string> hosts;
  std::string secret_name;
  bool operator==(const IngressTLS&) const = default;
};

struct IngressSpec {
  std::optional<std::string> ingress_class_name;
  std::optional<IngressBackend> default_backend;
  std::vector<IngressRule> rules;
  std::vector<IngressTLS> tls;
  bool operator==(const IngressSpec&) const = default;
};

struct Ingress {
  ObjectMeta metadata;
  IngressSpec spec;
  bool operator==(const Ingress&) const = default;
};

// ---- networking.k8s.io/v1 IngressClass (cluster-scoped) ----

struct IngressClassSpec {
  std::string controller;
  bool operator==(const IngressClassSpec&) const = default;
};

struct IngressClass {
  ObjectMeta metadata;
  IngressClassSpec spec;
  // The annotation ingressclass.kubernetes.io/is-default-class is "true" (the API server's test).
  bool is_default() const;
  bool operator==(const IngressClass&) const = default;
};

// ---- v1 Service ----

struct ServicePort {
  std::string name;
  int32_t port = 0;
  PortRef target_port;  // defaults to `port` when omitted, as the API server does
  std::string protocol = "TCP";
  // The application protocol (spec.ports[].appProtocol): "kubernetes.io/h2c", "grpc", ...;
  // empty when not set. The translator reads it as Gateway API implementations do.
  std::string app_protocol;
  bool operator==(const ServicePort&) const = default;
};

struct ServiceSpec {
  std::string type = "ClusterIP";
  std::string cluster_ip;  // spec.clusterIP: an address, "None" (headless) or empty
  std::vector<ServicePort> ports;
  bool operator==(const ServiceSpec&) const = default;
};

struct Service {
  ObjectMeta metadata;
  ServiceSpec spec;
  bool operator==(const Service&) const = default;
};

// ---- discovery.k8s.io/v1 EndpointSlice ----

struct EndpointConditions {
  std::optional<bool> ready;
  std::optional<bool> serving;
  std::optional<bool> terminating;
  bool operator==(const EndpointConditions&) const = default;
};

struct SliceEndpoint {
  std::vector<std::string> addresses;
  EndpointConditions conditions;
  bool operator==(const SliceEndpoint&) const = default;
};

struct EndpointPort {
  std::string name;             // empty when omitted (Kubernetes treats both the same)
  std::optional<int32_t> port;  // absent means "all ports", which we cannot use
  std::string protocol = "TCP";
  bool operator==(const EndpointPort&) const = default;
};

struct EndpointSlice {
  ObjectMeta metadata;
  std::string address_type;  // "IPv4", "IPv6" or "FQDN"
  std::vector<SliceEndpoint> endpoints;
  std::vector<EndpointPort> ports;
  // The kubernetes.io/service-name label, empty when absent.
  std::string service_name() const;
  bool operator==(const EndpointSlice&) const = default;
};

// ---- v1 Secret ----

struct Secret {
  ObjectMeta metadata;
  std::string type = "Opaque";
  // `data` decoded from base64, with `stringData` merged over it (the API server does the same
  // merge on write, so an object read back from a cluster never has stringData).
  std::map<std::string, std::string> data;
  bool operator==(const Secret&) const = default;
};

// ---- tidegate.io/v1alpha1 SubstitutionRuleSet (crds/substitutionruleset.yaml) ----
//
// A kind like the others (Kind, Object below): the manifest loader, the API source's reflector
// and the store handle it with the built-in kinds. It is the one kind whose resource may not be
// served at all (the CRD is optional); see docs/kubernetes.md.

inline constexpr std::string_view kSubstitutionRuleSetKind = "SubstitutionRuleSet";
inline constexpr std::string_view kSubstitutionRuleSetApiVersion = "tidegate.io/v1alpha1";

struct SubstitutionRuleSetRule {
  std::string match;    // required (may not be empty)
  std::string replace;  // required (may be empty: the match is deleted)
  std::string flags;    // optional; whether it is "" or "i" is the translator's question
  bool operator==(const SubstitutionRuleSetRule&) const = default;
};

struct SubstitutionRuleSet {
  ObjectMeta metadata;
  std::vector<SubstitutionRuleSetRule> rules;  // spec.rules, in order
  bool operator==(const SubstitutionRuleSet&) const = default;
};

// ---- Dispatch ----

enum class Kind {
  kIngress,
  kIngressClass,
  kService,
  kEndpointSlice,
  kSecret,
  kSubstitutionRuleSet,
  // The Gateway API (gateway.h) and the Namespaces its allowedRoutes selectors look at.
  kGatewayClass,
  kGateway,
  kHTTPRoute,
  kGRPCRoute,
  kReferenceGrant,
  kNamespace,
  kBackendTLSPolicy,
  kConfigMap,  // only those a BackendTLSPolicy names are kept (kube_source.h)
};
const char* to_string(Kind k);  // "Ingress", ...
// Every kind, in declaration order.
inline constexpr Kind kAllKinds[] = {
    Kind::kIngress,          Kind::kIngressClass,   Kind::kService,
    Kind::kEndpointSlice,    Kind::kSecret,         Kind::kSubstitutionRuleSet,
    Kind::kGatewayClass,     Kind::kGateway,        Kind::kHTTPRoute,
    Kind::kGRPCRoute,        Kind::kReferenceGrant, Kind::kNamespace,
    Kind::kBackendTLSPolicy, Kind::kConfigMap};

// Alternatives in the same order as Kind (kind_of relies on it).
using Object = std::variant<Ingress, IngressClass, Service, EndpointSlice, Secret,
                            SubstitutionRuleSet, GatewayClass, Gateway, HTTPRoute, GRPCRoute,
                            ReferenceGrant, Namespace, BackendTLSPolicy, ConfigMap>;

Kind kind_of(const Object& o);
const ObjectMeta& meta_of(const Object& o);
bool is_namespaced(Kind k);

// The kind named by `kind` when we understand it, whatever the apiVersion (see api_version_of).
std::optional<Kind> kind_from_string(std::string_view kind);
// The apiVersion we read for a kind, e.g. "networking.k8s.io/v1" for Ingress. (ReferenceGrant is
// also read as gateway.networking.k8s.io/v1, whose schema is the same: see accepts_api_version.)
std::string_view api_version_of(Kind k);
bool accepts_api_version(Kind k, std::string_view api_version);

// Converts one object. `node` is the whole object (apiVersion and kind are not checked here;
// parse_object does that). Never throws.
ParseResult<Ingress> parse_ingress(const Node& node);
ParseResult<IngressClass> parse_ingress_class(const Node& node);
ParseResult<Service> parse_service(const Node& node);
ParseResult<EndpointSlice> parse_endpoint_slice(const Node& node);
ParseResult<Secret> parse_secret(const Node& node);
// Shape is strict (spec.rules a sequence of mappings with string match and replace); whether a
// pattern or a flag is valid is left to the translator, which drops one rule and keeps the rest.
ParseResult<SubstitutionRuleSet> parse_substitution_rule_set(const Node& node);

// Dispatches on apiVersion and kind. An unknown kind, or a known kind with an apiVersion we do not
// read (e.g. networking.k8s.io/v1beta1 Ingress), is an error here; callers that want to treat
// unknown kinds as harmless check kind_from_string first. Never throws.
ParseResult<Object> parse_object(const Node& node);

// Standard base64 (RFC 4648 section 4) with '=' padding; line breaks are skipped, as Kubernetes
// tolerates them. nullopt on any other invalid input.
std::optional<std::string> decode_base64(std::string_view text);

}  // namespace tidegate::controller::objects
