#include "objects/objects.h"

#include <algorithm>
#include <charconv>
#include <exception>
#include <iterator>
#include <utility>

#include "objects/fields.h"

namespace tidegate::controller::objects {

std::string PortRef::to_string() const { return number ? std::to_string(*number) : name; }

const char* to_string(PathType t) {
  switch (t) {
    case PathType::kExact:
      return "Exact";
    case PathType::kPrefix:
      return "Prefix";
    case PathType::kImplementationSpecific:
      return "ImplementationSpecific";
  }
  return "?";
}

bool IngressClass::is_default() const {
  auto it = metadata.annotations.find(std::string(kDefaultClassAnnotation));
  return it != metadata.annotations.end() && it->second == "true";
}

std::string EndpointSlice::service_name() const {
  auto it = metadata.labels.find(std::string(kServiceNameLabel));
  return it == metadata.labels.end() ? std::string() : it->second;
}

const char* to_string(Kind k) {
  switch (k) {
    case Kind::kIngress:
      return "Ingress";
    case Kind::kIngressClass:
      return "IngressClass";
    case Kind::kService:
      return "Service";
    case Kind::kEndpointSlice:
      return "EndpointSlice";
    case Kind::kSecret:
      return "Secret";
    case Kind::kSubstitutionRuleSet:
      return "SubstitutionRuleSet";
    case Kind::kGatewayClass:
      return "GatewayClass";
    case Kind::kGateway:
      return "Gateway";
    case Kind::kHTTPRoute:
      return "HTTPRoute";
    case Kind::kGRPCRoute:
      return "GRPCRoute";
    case Kind::kReferenceGrant:
      return "ReferenceGrant";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kBackendTLSPolicy:
      return "BackendTLSPolicy";
    case Kind::kConfigMap:
      return "ConfigMap";
  }
  return "?";
}

static_assert(std::variant_size_v<Object> == std::size(kAllKinds));

Kind kind_of(const Object& o) {
  // The variant's alternatives are declared in the same order as Kind.
  return static_cast<Kind>(o.index());
}

const ObjectMeta& meta_of(const Object& o) {
  return std::visit([](const auto& obj) -> const ObjectMeta& { return obj.metadata; }, o);
}

bool is_namespaced(Kind k) {
  return k != Kind::kIngressClass && k != Kind::kGatewayClass && k != Kind::kNamespace;
}

std::optional<Kind> kind_from_string(std::string_view kind) {
  for (Kind k : kAllKinds) {
    if (kind == to_string(k)) return k;
  }
  return std::nullopt;
}

std::string_view api_version_of(Kind k) {
  switch (k) {
    case Kind::kIngress:
    case Kind::kIngressClass:
      return "networking.k8s.io/v1";
    case Kind::kEndpointSlice:
      return "discovery.k8s.io/v1";
    case Kind::kService:
    case Kind::kSecret:
    case Kind::kNamespace:
    case Kind::kConfigMap:
      return "v1";
    case Kind::kSubstitutionRuleSet:
      return kSubstitutionRuleSetApiVersion;
    case Kind::kGatewayClass:
    case Kind::kGateway:
    case Kind::kHTTPRoute:
    case Kind::kGRPCRoute:
    case Kind::kBackendTLSPolicy:
      return kGatewayApiVersion;
    case Kind::kReferenceGrant:
      return kReferenceGrantApiVersion;
  }
  return "";
}

bool accepts_api_version(Kind k, std::string_view api_version) {
  // ReferenceGrant is served as v1beta1 and (since v1.5) as v1, with one schema.
  return api_version == api_version_of(k) ||
         (k == Kind::kReferenceGrant && api_version == kGatewayApiVersion);
}

std::optional<std::string> decode_base64(std::string_view text) {
  auto value_of = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t quantum = 0;
  int filled = 0;   // sextets in `quantum`
  int padding = 0;  // '=' seen; only allowed at the very end
  for (char c : text) {
    if (c == '\n' || c == '\r') continue;
    if (c == '=') {
      ++padding;
      if (padding > 2) return std::nullopt;
      continue;
    }
    if (padding > 0) return std::nullopt;  // data after padding
    int v = value_of(c);
    if (v < 0) return std::nullopt;
    quantum = (quantum << 6) | static_cast<uint32_t>(v);
    if (++filled == 4) {
      out.push_back(static_cast<char>((quantum >> 16) & 0xff));
      out.push_back(static_cast<char>((quantum >> 8) & 0xff));
      out.push_back(static_cast<char>(quantum & 0xff));
      quantum = 0;
      filled = 0;
    }
  }
  // What is left must be exactly completed by the padding: "xx==" or "xxx=".
  if (filled == 0) return padding == 0 ? std::optional<std::string>(std::move(out)) : std::nullopt;
  if (filled + padding != 4 || filled < 2) return std::nullopt;
  if (filled == 2) {
    if ((quantum & 0xf) != 0) return std::nullopt;  // non-canonical trailing bits
    out.push_back(static_cast<char>((quantum >> 4) & 0xff));
  } else {
    if ((quantum & 0x3) != 0) return std::nullopt;
    out.push_back(static_cast<char>((quantum >> 10) & 0xff));
    out.push_back(static_cast<char>((quantum >> 2) & 0xff));
  }
  return out;
}

namespace {

using namespace detail;

IngressBackend parse_backend(const Node& n, const std::string& path) {
  expect_map(n, path);
  IngressBackend b;
  Node service = child(n, "service");
  Node resource = child(n, "resource");
  if (present(service) && present(resource)) {
    fail(path, "service and resource are mutually exclusive");
  }
  if (present(service)) {
    const std::string spath = field(path, "service");
    expect_map(service, spath);
    IngressServiceBackend s;
    s.name = req_string(service, "name", spath);
    Node port = child(service, "port");
    const std::string ppath = field(spath, "port");
    if (!present(port)) fail(ppath, "required field missing");
    expect_map(port, ppath);
    s.port.number = opt_port_number(port, "number", ppath);
    s.port.name = opt_string(port, "name", ppath).value_or("");
    check_port_name(s.port.name, ppath);
    if (s.port.number && !s.port.name.empty())
      fail(ppath, "number and name are mutually exclusive");
    if (!s.port.number && s.port.name.empty()) fail(ppath, "one of number or name is required");
    b.service = std::move(s);
  } else if (present(resource)) {
    const std::string rpath = field(path, "resource");
    expect_map(resource, rpath);
    b.resource_kind = req_string(resource, "kind", rpath);
  } else {
    fail(path, "one of service or resource is required");
  }
  return b;
}

PathType parse_path_type(const Node& parent, const std::string& path) {
  auto s = opt_string(parent, "pathType", path);
  // Required since networking.k8s.io/v1: the API server rejects an Ingress without it, so a
  // manifest without it would not apply either.
  if (!s) fail(field(path, "pathType"), "required field missing");
  if (*s == "Exact") return PathType::kExact;
  if (*s == "Prefix") return PathType::kPrefix;
  if (*s == "ImplementationSpecific") return PathType::kImplementationSpecific;
  fail(field(path, "pathType"), "unknown value \"" + *s + "\"");
}

Ingress convert_ingress(const Node& obj) {
  Ingress ing;
  ing.metadata = parse_meta(obj, true);
  Node spec = spec_of(obj);
  const std::string sp = "spec";
  ing.spec.ingress_class_name = opt_string(spec, "ingressClassName", sp);
  Node def = child(spec, "defaultBackend");
  if (present(def)) ing.spec.default_backend = parse_backend(def, field(sp, "defaultBackend"));
  for_each_item(spec, "rules", sp, [&](const Node& r, const std::string& rpath) {
    expect_map(r, rpath);
    IngressRule rule;
    rule.host = opt_string(r, "host", rpath).value_or("");
    Node http = child(r, "http");
    if (present(http)) {
      const std::string hpath = field(rpath, "http");
      expect_map(http, hpath);
      for_each_item(http, "paths", hpath, [&](const Node& p, const std::string& ppath) {
        expect_map(p, ppath);
        HTTPIngressPath hp;
        hp.path = opt_string(p, "path", ppath).value_or("");
        hp.path_type = parse_path_type(p, ppath);
        Node backend = child(p, "backend");
        if (!present(backend)) fail(field(ppath, "backend"), "required field missing");
        hp.backend = parse_backend(backend, field(ppath, "backend"));
        rule.paths.push_back(std::move(hp));
      });
    }
    ing.spec.rules.push_back(std::move(rule));
  });
  for_each_item(spec, "tls", sp, [&](const Node& t, const std::string& tpath) {
    expect_map(t, tpath);
    IngressTLS tls;
    tls.hosts = string_list(t, "hosts", tpath);
    tls.secret_name = opt_string(t, "secretName", tpath).value_or("");
    ing.spec.tls.push_back(std::move(tls));
  });
  return ing;
}

IngressClass convert_ingress_class(const Node& obj) {
  IngressClass ic;
  ic.metadata = parse_meta(obj, false);
  Node spec = spec_of(obj);
  ic.spec.controller = opt_string(spec, "controller", "spec").value_or("");
  return ic;
}

Service convert_service(const Node& obj) {
  Service svc;
  svc.metadata = parse_meta(obj, true);
  Node spec = spec_of(obj);
  const std::string sp = "spec";
  svc.spec.type = opt_string(spec, "type", sp).value_or("ClusterIP");
  svc.spec.cluster_ip = opt_string(spec, "clusterIP", sp).value_or("");
  for_each_item(spec, "ports", sp, [&](const Node& p, const std::string& ppath) {
    expect_map(p, ppath);
    ServicePort port;
    port.name = opt_string(p, "name", ppath).value_or("");
    check_port_name(port.name, ppath);
    auto number = opt_port_number(p, "port", ppath);
    if (!number) fail(field(ppath, "port"), "required field missing");
    port.port = *number;
    port.target_port = opt_int_or_string(p, "targetPort", ppath).value_or(PortRef{*number, {}});
    port.protocol = opt_string(p, "protocol", ppath).value_or("TCP");
    port.app_protocol = opt_string(p, "appProtocol", ppath).value_or("");
    svc.spec.ports.push_back(std::move(port));
  });
  return svc;
}

EndpointSlice convert_endpoint_slice(const Node& obj) {
  EndpointSlice slice;
  slice.metadata = parse_meta(obj, true);
  slice.address_type = req_string(obj, "addressType", "");
  for_each_item(obj, "endpoints", "", [&](const Node& e, const std::string& epath) {
    expect_map(e, epath);
    SliceEndpoint ep;
    ep.addresses = string_list(e, "addresses", epath);
    Node cond = child(e, "conditions");
    if (present(cond)) {
      const std::string cpath = field(epath, "conditions");
      expect_map(cond, cpath);
      ep.conditions.ready = opt_bool(cond, "ready", cpath);
      ep.conditions.serving = opt_bool(cond, "serving", cpath);
      ep.conditions.terminating = opt_bool(cond, "terminating", cpath);
    }
    slice.endpoints.push_back(std::move(ep));
  });
  for_each_item(obj, "ports", "", [&](const Node& p, const std::string& ppath) {
    expect_map(p, ppath);
    EndpointPort port;
    port.name = opt_string(p, "name", ppath).value_or("");
    check_port_name(port.name, ppath);
    port.port = opt_port_number(p, "port", ppath);
    port.protocol = opt_string(p, "protocol", ppath).value_or("TCP");
    slice.ports.push_back(std::move(port));
  });
  return slice;
}

Secret convert_secret(const Node& obj) {
  Secret secret;
  secret.metadata = parse_meta(obj, true);
  secret.type = opt_string(obj, "type", "").value_or("Opaque");
  for (auto& [key, encoded] : string_map(obj, "data", "")) {
    auto decoded = decode_base64(encoded);
    if (!decoded) fail("data[\"" + key + "\"]", "invalid base64");
    secret.data[key] = std::move(*decoded);
  }
  for (auto& [key, value] : string_map(obj, "stringData", "")) secret.data[key] = value;
  return secret;
}

// The value of a public parse function, or its error thrown again (for parse_object).
template <typename T>
T rethrow(ParseResult<T> result) {
  if (!result.ok()) throw FieldError{"", std::move(result.error)};
  return std::move(*result.value);
}

SubstitutionRuleSet convert_substitution_rule_set(const Node& obj) {
  SubstitutionRuleSet set;
  set.metadata = parse_meta(obj, /*namespaced=*/true);
  const Node spec = spec_of(obj);
  for_each_item(spec, "rules", "spec", [&](const Node& n, const std::string& where) {
    expect_map(n, where);
    SubstitutionRuleSetRule rule;
    rule.match = req_string(n, "match", where);
    // An empty replacement deletes what matched; only a missing one is an error.
    auto replace = opt_string(n, "replace", where);
    if (!replace) {
      if (child(n, "replace").IsDefined() && child(n, "replace").IsNull()) {
        replace = "";  // `replace:` with nothing after it, as YAML writes an empty value
      } else {
        fail(field(where, "replace"), "required field missing");
      }
    }
    rule.replace = *replace;
    rule.flags = opt_string(n, "flags", where).value_or("");
    set.rules.push_back(std::move(rule));
  });
  return set;
}

}  // namespace

ParseResult<Ingress> parse_ingress(const Node& node) {
  return guarded<Ingress>(node, convert_ingress);
}

ParseResult<IngressClass> parse_ingress_class(const Node& node) {
  return guarded<IngressClass>(node, convert_ingress_class);
}

ParseResult<Service> parse_service(const Node& node) {
  return guarded<Service>(node, convert_service);
}

ParseResult<EndpointSlice> parse_endpoint_slice(const Node& node) {
  return guarded<EndpointSlice>(node, convert_endpoint_slice);
}

ParseResult<Secret> parse_secret(const Node& node) { return guarded<Secret>(node, convert_secret); }

ParseResult<SubstitutionRuleSet> parse_substitution_rule_set(const Node& node) {
  return guarded<SubstitutionRuleSet>(node, convert_substitution_rule_set);
}

ParseResult<Object> parse_object(const Node& node) {
  return guarded<Object>(node, [](const Node& obj) -> Object {
    std::string api_version = req_string(obj, "apiVersion", "");
    std::string kind_name = req_string(obj, "kind", "");
    auto kind = kind_from_string(kind_name);
    if (!kind) fail("kind", "unsupported kind \"" + kind_name + "\"");
    if (!accepts_api_version(*kind, api_version)) {
      fail("apiVersion", "unsupported apiVersion \"" + api_version + "\" for kind " + kind_name +
                             " (want " + std::string(api_version_of(*kind)) + ")");
    }
    switch (*kind) {
      case Kind::kIngress:
        return convert_ingress(obj);
      case Kind::kIngressClass:
        return convert_ingress_class(obj);
      case Kind::kService:
        return convert_service(obj);
      case Kind::kEndpointSlice:
        return convert_endpoint_slice(obj);
      case Kind::kSecret:
        return convert_secret(obj);
      case Kind::kSubstitutionRuleSet:
        return convert_substitution_rule_set(obj);
      case Kind::kGatewayClass:
        return rethrow(parse_gateway_class(obj));
      case Kind::kGateway:
        return rethrow(parse_gateway(obj));
      case Kind::kHTTPRoute:
        return rethrow(parse_http_route(obj));
      case Kind::kGRPCRoute:
        return rethrow(parse_grpc_route(obj));
      case Kind::kReferenceGrant:
        return rethrow(parse_reference_grant(obj));
      case Kind::kNamespace:
        return rethrow(parse_namespace(obj));
      case Kind::kBackendTLSPolicy:
        return rethrow(parse_backend_tls_policy(obj));
      case Kind::kConfigMap:
        return rethrow(parse_config_map(obj));
    }
    fail("kind", "unsupported kind \"" + kind_name + "\"");
  });
}

}  // namespace tidegate::controller::objects
