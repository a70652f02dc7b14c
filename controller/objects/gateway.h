#pragma once
// Typed views of the Gateway API's objects (gateway.networking.k8s.io, v1.6 standard channel)
// that the Gateway translator reads (controller/translate/gateway/), holding only the fields it
// uses: GatewayClass, Gateway, HTTPRoute, GRPCRoute and BackendTLSPolicy (v1), ReferenceGrant
// (v1beta1, and the identical v1), v1 Namespace (its labels, for allowedRoutes selectors) and v1
// ConfigMap (the CA bundles BackendTLSPolicies name).
//
// As for the other kinds (objects.h), the shape is strict — a sequence where a mapping is
// expected, a missing required field or a port out of range rejects the object with a message
// naming the field — and the content is left to the translator. In particular the API's enums
// (a listener's protocol, a path match's type, a filter's type, ...) are kept as the strings
// written: the Gateway API asks that an unknown value be reported in the object's status (reason
// UnsupportedValue), which the translator can do and the loader cannot.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "objects/meta.h"
#include "objects/node.h"

namespace tidegate::controller::objects {

inline constexpr std::string_view kGatewayGroup = "gateway.networking.k8s.io";
inline constexpr std::string_view kGatewayApiVersion = "gateway.networking.k8s.io/v1";
inline constexpr std::string_view kReferenceGrantApiVersion = "gateway.networking.k8s.io/v1beta1";

// ---- GatewayClass (cluster-scoped) ----

struct GatewayClass {
  ObjectMeta metadata;
  std::string controller_name;  // spec.controllerName (required)
  bool operator==(const GatewayClass&) const = default;
};

// ---- Namespace (cluster-scoped; v1) ----

struct Namespace {
  ObjectMeta metadata;  // only its labels are read
  bool operator==(const Namespace&) const = default;
};

// ---- Gateway ----

// metav1.LabelSelector.
struct LabelSelectorRequirement {
  std::string key;
  std::string op;  // In, NotIn, Exists, DoesNotExist (as written; the translator checks)
  std::vector<std::string> values;
  bool operator==(const LabelSelectorRequirement&) const = default;
};

struct LabelSelector {
  std::map<std::string, std::string> match_labels;
  std::vector<LabelSelectorRequirement> match_expressions;
  bool operator==(const LabelSelector&) const = default;
};

struct RouteGroupKind {
  std::string group{kGatewayGroup};  // defaulted as the API server does
  std::string kind;
  bool operator==(const RouteGroupKind&) const = default;
};

// A listener's certificateRefs entry (SecretObjectReference).
struct SecretObjectReference {
  std::string group;  // "" (core) by default
  std::string kind{"Secret"};
  std::string name;
  std::optional<std::string> namespace_;  // unset: the Gateway's
  bool operator==(const SecretObjectReference&) const = default;
};

struct Listener {
  std::string name;
  std::string hostname;  // empty: any
  int32_t port = 0;
  std::string protocol;                 // HTTP, HTTPS, TLS, TCP, UDP, or a domain-prefixed one
  std::optional<std::string> tls_mode;  // tls.mode (Terminate by default), when tls is set
  std::vector<SecretObjectReference> certificate_refs;  // tls.certificateRefs
  std::string namespaces_from{"Same"};                  // allowedRoutes.namespaces.from
  std::optional<LabelSelector> namespace_selector;      // allowedRoutes.namespaces.selector
  std::vector<RouteGroupKind> kinds;                    // allowedRoutes.kinds; empty: by protocol
  bool operator==(const Listener&) const = default;
};

struct Gateway {
  ObjectMeta metadata;
  std::string gateway_class_name;  // spec.gatewayClassName (required)
  std::vector<Listener> listeners;
  bool has_addresses = false;  // spec.addresses is set (static addresses are not supported)
  bool operator==(const Gateway&) const = default;
};

// ---- Routes ----

struct ParentReference {
  std::string group{kGatewayGroup};
  std::string kind{"Gateway"};
  std::optional<std::string> namespace_;  // unset: the route's
  std::string name;
  std::optional<std::string> section_name;
  std::optional<int32_t> port;
  bool operator==(const ParentReference&) const = default;
};

struct HTTPHeaderMatch {
  std::string type{"Exact"};  // Exact, RegularExpression
  std::string name;
  std::string value;
  bool operator==(const HTTPHeaderMatch&) const = default;
};

struct HTTPPathMatch {
  std::string type{"PathPrefix"};  // Exact, PathPrefix, RegularExpression
  std::string value{"/"};
  bool operator==(const HTTPPathMatch&) const = default;
};

struct HTTPRouteMatch {
  std::optional<HTTPPathMatch> path;  // unset: PathPrefix "/"
  std::vector<HTTPHeaderMatch> headers;
  std::vector<HTTPHeaderMatch> query_params;  // same shape: type, name, value
  std::optional<std::string> method;
  bool operator==(const HTTPRouteMatch&) const = default;
};

struct HTTPHeader {
  std::string name;
  std::string value;
  bool operator==(const HTTPHeader&) const = default;
};

struct HTTPHeaderFilter {
  std::vector<HTTPHeader> set;
  std::vector<HTTPHeader> add;
  std::vector<std::string> remove;
  bool operator==(const HTTPHeaderFilter&) const = default;
};

struct HTTPPathModifier {
  std::string type;  // ReplaceFullPath, ReplacePrefixMatch
  std::string replace_full_path;
  std::string replace_prefix_match;
  bool operator==(const HTTPPathModifier&) const = default;
};

struct HTTPRequestRedirectFilter {
  std::optional<std::string> scheme;
  std::optional<std::string> hostname;
  std::optional<HTTPPathModifier> path;
  std::optional<int32_t> port;
  std::optional<int64_t> status_code;  // unset: 302
  bool operator==(const HTTPRequestRedirectFilter&) const = default;
};

struct HTTPURLRewriteFilter {
  std::optional<std::string> hostname;
  std::optional<HTTPPathModifier> path;
  bool operator==(const HTTPURLRewriteFilter&) const = default;
};

// The CORS filter (HTTPRoute only). Values as written: the translator checks them.
struct HTTPCORSFilter {
  std::vector<std::string> allow_origins;
  std::optional<bool> allow_credentials;
  std::vector<std::string> allow_methods;
  std::vector<std::string> allow_headers;
  std::vector<std::string> expose_headers;
  std::optional<int64_t> max_age;  // seconds; unset: 5 (the API server's default)
  bool operator==(const HTTPCORSFilter&) const = default;
};

// RequestMirror: where copies go (a backendRef without weight or filters) and which share of
// the requests (percent, or fraction; neither: all).
struct HTTPRequestMirrorFilter {
  std::string group;  // "" (core) by default
  std::string kind{"Service"};
  std::string name;
  std::optional<std::string> namespace_;  // unset: the route's
  std::optional<int32_t> port;
  std::optional<int64_t> percent;  // 0-100
  std::optional<int64_t> numerator;
  std::optional<int64_t> denominator;  // with numerator; unset: 100
  bool operator==(const HTTPRequestMirrorFilter&) const = default;
};

// One filter of an HTTPRoute or GRPCRoute rule (or of a backendRef). The field of its type is
// set when the type is one the translator reads; the others (ExtensionRef, ExternalAuth,
// unknown ones) keep only their type.
struct HTTPRouteFilter {
  std::string type;
  std::optional<HTTPHeaderFilter> request_header_modifier;
  std::optional<HTTPHeaderFilter> response_header_modifier;
  std::optional<HTTPRequestRedirectFilter> request_redirect;
  std::optional<HTTPURLRewriteFilter> url_rewrite;
  std::optional<HTTPCORSFilter> cors;
  std::optional<HTTPRequestMirrorFilter> request_mirror;
  bool operator==(const HTTPRouteFilter&) const = default;
};

struct BackendRef {
  std::string group;  // "" (core) by default
  std::string kind{"Service"};
  std::string name;
  std::optional<std::string> namespace_;  // unset: the route's
  std::optional<int32_t> port;
  int64_t weight = 1;
  std::vector<HTTPRouteFilter> filters;  // per-backend filters (not supported: reported)
  bool operator==(const BackendRef&) const = default;
};

struct HTTPRouteRule {
  std::vector<HTTPRouteMatch> matches;  // empty: one PathPrefix "/" match
  std::vector<HTTPRouteFilter> filters;
  std::vector<BackendRef> backend_refs;
  std::optional<std::string> timeout_request;          // timeouts.request (a Duration)
  std::optional<std::string> timeout_backend_request;  // timeouts.backendRequest
  bool has_retry = false;                              // retry is set (experimental; not supported)
  bool has_session_persistence = false;                // sessionPersistence is set (idem)
  bool operator==(const HTTPRouteRule&) const = default;
};

struct HTTPRoute {
  ObjectMeta metadata;
  std::vector<ParentReference> parent_refs;
  std::vector<std::string> hostnames;
  std::vector<HTTPRouteRule> rules;
  bool operator==(const HTTPRoute&) const = default;
};

struct GRPCMethodMatch {
  std::string type{"Exact"};  // Exact, RegularExpression
  std::optional<std::string> service;
  std::optional<std::string> method;
  bool operator==(const GRPCMethodMatch&) const = default;
};

struct GRPCRouteMatch {
  std::optional<GRPCMethodMatch> method;  // unset: any method of any service
  std::vector<HTTPHeaderMatch> headers;
  bool operator==(const GRPCRouteMatch&) const = default;
};

struct GRPCRouteRule {
  std::vector<GRPCRouteMatch> matches;  // empty: every request
  std::vector<HTTPRouteFilter> filters;
  std::vector<BackendRef> backend_refs;
  bool has_session_persistence = false;
  bool operator==(const GRPCRouteRule&) const = default;
};

struct GRPCRoute {
  ObjectMeta metadata;
  std::vector<ParentReference> parent_refs;
  std::vector<std::string> hostnames;
  std::vector<GRPCRouteRule> rules;
  bool operator==(const GRPCRoute&) const = default;
};

// ---- ReferenceGrant ----

struct ReferenceGrantFrom {
  std::string group;
  std::string kind;
  std::string namespace_;
  bool operator==(const ReferenceGrantFrom&) const = default;
};

struct ReferenceGrantTo {
  std::string group;
  std::string kind;
  std::optional<std::string> name;  // unset: every object of the kind in the namespace
  bool operator==(const ReferenceGrantTo&) const = default;
};

struct ReferenceGrant {
  ObjectMeta metadata;
  std::vector<ReferenceGrantFrom> from;
  std::vector<ReferenceGrantTo> to;
  bool operator==(const ReferenceGrant&) const = default;
};

// ---- BackendTLSPolicy (v1) and ConfigMap (v1; its data, for caCertificateRefs) ----

struct PolicyTargetReference {
  std::string group;  // "" (core) for a Service
  std::string kind;
  std::string name;
  std::optional<std::string> section_name;  // a Service port's name
  bool operator==(const PolicyTargetReference&) const = default;
};

struct LocalObjectReference {
  std::string group;
  std::string kind;
  std::string name;
  bool operator==(const LocalObjectReference&) const = default;
};

struct SubjectAltName {
  std::string type;  // Hostname, URI
  std::string hostname;
  std::string uri;
  bool operator==(const SubjectAltName&) const = default;
};

struct BackendTLSPolicy {
  ObjectMeta metadata;
  std::vector<PolicyTargetReference> target_refs;
  std::vector<LocalObjectReference> ca_certificate_refs;  // validation.caCertificateRefs
  std::optional<std::string> well_known_ca_certificates;  // validation.wellKnownCACertificates
  std::string hostname;                                   // validation.hostname (required)
  std::vector<SubjectAltName> subject_alt_names;          // validation.subjectAltNames
  bool has_options = false;                               // spec.options is set
  bool operator==(const BackendTLSPolicy&) const = default;
};

struct ConfigMap {
  ObjectMeta metadata;
  std::map<std::string, std::string> data;  // `data` only (a CA bundle is text)
  bool operator==(const ConfigMap&) const = default;
};

// Conversions (never throw; see objects.h).
ParseResult<GatewayClass> parse_gateway_class(const Node& node);
ParseResult<Gateway> parse_gateway(const Node& node);
ParseResult<HTTPRoute> parse_http_route(const Node& node);
ParseResult<GRPCRoute> parse_grpc_route(const Node& node);
ParseResult<ReferenceGrant> parse_reference_grant(const Node& node);
ParseResult<Namespace> parse_namespace(const Node& node);
ParseResult<BackendTLSPolicy> parse_backend_tls_policy(const Node& node);
ParseResult<ConfigMap> parse_config_map(const Node& node);

}  // namespace tidegate::controller::objects
