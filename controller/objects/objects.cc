#include "objects/objects.h"

#include <algorithm>
#include <charconv>
#include <exception>
#include <iterator>
#include <utility>

#include <yaml-cpp/yaml.h>

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

bool is_namespaced(Kind k) { return k != Kind::kIngressClass; }

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
      return "v1";
    case Kind::kSubstitutionRuleSet:
      return kSubstitutionRuleSetApiVersion;
  }
  return "";
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

// Conversion is a deep descent where any field can be wrong; an exception private to this file
// carries the first error up to the public function, which turns it into a ParseResult. Nothing
// escapes: every public entry point catches it (and yaml-cpp's exceptions).
struct FieldError {
  std::string path;
  std::string message;
};

[[noreturn]] void fail(const std::string& path, std::string message) {
  throw FieldError{path, std::move(message)};
}

std::string field(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string item(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

const char* type_name(const YAML::Node& n) {
  if (!n.IsDefined()) return "nothing";
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Undefined:
      return "nothing";
  }
  return "?";
}

// Absent and explicit null are the same thing for Kubernetes objects.
bool present(const YAML::Node& n) { return n.IsDefined() && !n.IsNull(); }

// parent[key] when parent is a mapping; otherwise (null, or an absent field, which yaml-cpp
// represents by a node whose every accessor but IsDefined throws) an absent node.
YAML::Node child(const YAML::Node& parent, const char* key) {
  if (!parent.IsDefined() || !parent.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  return parent[key];
}

void expect_map(const YAML::Node& n, const std::string& path) {
  if (!n.IsDefined() || !n.IsMap())
    fail(path, std::string("expected a mapping, got ") + type_name(n));
}

std::optional<std::string> opt_string(const YAML::Node& parent, const char* key,
                                      const std::string& path) {
  YAML::Node n = child(parent, key);
  if (!present(n)) return std::nullopt;
  if (!n.IsScalar()) fail(field(path, key), std::string("expected a string, got ") + type_name(n));
  return n.Scalar();
}

std::string req_string(const YAML::Node& parent, const char* key, const std::string& path) {
  auto s = opt_string(parent, key, path);
  if (!s || s->empty()) fail(field(path, key), "required field missing");
  return *s;
}

std::optional<int64_t> to_integer(const std::string& s) {
  std::string_view v = s;
  if (v.starts_with('+')) v.remove_prefix(1);
  int64_t out = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || ec != std::errc() || ptr != v.data() + v.size()) return std::nullopt;
  return out;
}

std::optional<int32_t> opt_port_number(const YAML::Node& parent, const char* key,
                                       const std::string& path) {
  YAML::Node n = child(parent, key);
  if (!present(n)) return std::nullopt;
  std::string where = field(path, key);
  if (!n.IsScalar()) fail(where, std::string("expected an integer, got ") + type_name(n));
  auto v = to_integer(n.Scalar());
  if (!v) fail(where, "expected an integer, got \"" + n.Scalar() + "\"");
  if (*v < 1 || *v > 65535) fail(where, std::to_string(*v) + " is out of range 1-65535");
  return static_cast<int32_t>(*v);
}

std::optional<bool> opt_bool(const YAML::Node& parent, const char* key, const std::string& path) {
  YAML::Node n = child(parent, key);
  if (!present(n)) return std::nullopt;
  std::string where = field(path, key);
  if (n.IsScalar()) {
    // The YAML 1.2 core schema's spellings; JSON's true/false are among them.
    const std::string& s = n.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    fail(where, "expected true or false, got \"" + s + "\"");
  }
  fail(where, std::string("expected true or false, got ") + type_name(n));
}

// Kubernetes' IntOrString for ports: a scalar made only of digits is a number (quoted or not;
// Kubernetes would take a quoted "8080" as a port name and then reject it), anything else a name.
std::optional<PortRef> opt_int_or_string(const YAML::Node& parent, const char* key,
                                         const std::string& path) {
  YAML::Node n = child(parent, key);
  if (!present(n)) return std::nullopt;
  std::string where = field(path, key);
  if (!n.IsScalar()) fail(where, std::string("expected a number or a name, got ") + type_name(n));
  const std::string& s = n.Scalar();
  if (s.empty()) return std::nullopt;
  if (auto v = to_integer(s)) {
    if (*v < 1 || *v > 65535) fail(where, std::to_string(*v) + " is out of range 1-65535");
    return PortRef{static_cast<int32_t>(*v), {}};
  }
  return PortRef{std::nullopt, s};
}

// Calls fn(item_node, item_path) for each element of the sequence at parent[key], if any.
template <typename Fn>
void for_each_item(const YAML::Node& parent, const char* key, const std::string& path, Fn&& fn) {
  const YAML::Node n = child(parent, key);
  if (!present(n)) return;
  std::string where = field(path, key);
  if (!n.IsSequence()) fail(where, std::string("expected a sequence, got ") + type_name(n));
  for (size_t i = 0; i < n.size(); ++i) fn(n[i], item(where, i));
}

std::vector<std::string> string_list(const YAML::Node& parent, const char* key,
                                     const std::string& path) {
  std::vector<std::string> out;
  for_each_item(parent, key, path, [&](const YAML::Node& n, const std::string& where) {
    if (!n.IsScalar()) fail(where, std::string("expected a string, got ") + type_name(n));
    out.push_back(n.Scalar());
  });
  return out;
}

// A mapping of string to string (labels, annotations, Secret data). A null value reads as "".
std::map<std::string, std::string> string_map(const YAML::Node& parent, const char* key,
                                              const std::string& path) {
  std::map<std::string, std::string> out;
  YAML::Node n = child(parent, key);
  if (!present(n)) return out;
  std::string where = field(path, key);
  expect_map(n, where);
  for (const auto& kv : n) {
    if (!kv.first.IsScalar()) fail(where, "keys must be strings");
    const std::string& k = kv.first.Scalar();
    if (present(kv.second) && !kv.second.IsScalar()) {
      fail(where + "[\"" + k + "\"]",
           std::string("expected a string, got ") + type_name(kv.second));
    }
    out[k] = present(kv.second) ? kv.second.Scalar() : std::string();
  }
  return out;
}

// Kubernetes object names are DNS-1123 subdomains and namespaces DNS-1123 labels; the API server
// enforces it, so a manifest that breaks it would never reach a real cluster.
bool is_dns_subdomain(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  for (char c : s) {
    if (!alnum(c) && c != '-' && c != '.') return false;
  }
  return true;
}

// Port names are IANA service names in Kubernetes (lower-case letters, digits and '-'); they end
// up in upstream names, logs and the control protocol.
void check_port_name(const std::string& name, const std::string& path) {
  if (name.empty()) return;
  bool ok = name.size() <= 63 && std::all_of(name.begin(), name.end(), [](char c) {
              return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
            });
  if (!ok) fail(path + ".name", "\"" + name.substr(0, 64) + "\" is not a valid port name");
}

ObjectMeta parse_meta(const YAML::Node& obj, bool namespaced) {
  ObjectMeta m;
  YAML::Node n = child(obj, "metadata");
  const std::string path = "metadata";
  if (present(n)) expect_map(n, path);
  m.name = req_string(n, "name", path);
  m.namespace_ = opt_string(n, "namespace", path).value_or("");
  // A manifest without a namespace lands in the namespace kubectl applies it to; "default" is the
  // only choice that does not depend on the reader's kubeconfig. Cluster-scoped objects have none.
  if (!namespaced) {
    m.namespace_.clear();
  } else if (m.namespace_.empty()) {
    m.namespace_ = "default";
  }
  if (!is_dns_subdomain(m.name, 253)) {
    fail(path + ".name", "\"" + m.name.substr(0, 64) +
                             "\" is not a valid name (lower-case letters, digits, '-' and '.')");
  }
  if (!m.namespace_.empty() &&
      (!is_dns_subdomain(m.namespace_, 63) || m.namespace_.find('.') != std::string::npos)) {
    fail(path + ".namespace", "\"" + m.namespace_.substr(0, 64) +
                                  "\" is not a valid namespace (lower-case letters, digits, '-')");
  }
  m.uid = opt_string(n, "uid", path).value_or("");
  m.resource_version = opt_string(n, "resourceVersion", path).value_or("");
  m.creation_timestamp = opt_string(n, "creationTimestamp", path).value_or("");
  m.labels = string_map(n, "labels", path);
  m.annotations = string_map(n, "annotations", path);
  return m;
}

YAML::Node spec_of(const YAML::Node& obj) {
  YAML::Node spec = child(obj, "spec");
  if (present(spec)) expect_map(spec, "spec");
  return spec;
}

IngressBackend parse_backend(const YAML::Node& n, const std::string& path) {
  expect_map(n, path);
  IngressBackend b;
  YAML::Node service = child(n, "service");
  YAML::Node resource = child(n, "resource");
  if (present(service) && present(resource)) {
    fail(path, "service and resource are mutually exclusive");
  }
  if (present(service)) {
    const std::string spath = field(path, "service");
    expect_map(service, spath);
    IngressServiceBackend s;
    s.name = req_string(service, "name", spath);
    YAML::Node port = child(service, "port");
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

PathType parse_path_type(const YAML::Node& parent, const std::string& path) {
  auto s = opt_string(parent, "pathType", path);
  // Required since networking.k8s.io/v1: the API server rejects an Ingress without it, so a
  // manifest without it would not apply either.
  if (!s) fail(field(path, "pathType"), "required field missing");
  if (*s == "Exact") return PathType::kExact;
  if (*s == "Prefix") return PathType::kPrefix;
  if (*s == "ImplementationSpecific") return PathType::kImplementationSpecific;
  fail(field(path, "pathType"), "unknown value \"" + *s + "\"");
}

Ingress convert_ingress(const YAML::Node& obj) {
  Ingress ing;
  ing.metadata = parse_meta(obj, true);
  YAML::Node spec = spec_of(obj);
  const std::string sp = "spec";
  ing.spec.ingress_class_name = opt_string(spec, "ingressClassName", sp);
  YAML::Node def = child(spec, "defaultBackend");
  if (present(def)) ing.spec.default_backend = parse_backend(def, field(sp, "defaultBackend"));
  for_each_item(spec, "rules", sp, [&](const YAML::Node& r, const std::string& rpath) {
    expect_map(r, rpath);
    IngressRule rule;
    rule.host = opt_string(r, "host", rpath).value_or("");
    YAML::Node http = child(r, "http");
    if (present(http)) {
      const std::string hpath = field(rpath, "http");
      expect_map(http, hpath);
      for_each_item(http, "paths", hpath, [&](const YAML::Node& p, const std::string& ppath) {
        expect_map(p, ppath);
        HTTPIngressPath hp;
        hp.path = opt_string(p, "path", ppath).value_or("");
        hp.path_type = parse_path_type(p, ppath);
        YAML::Node backend = child(p, "backend");
        if (!present(backend)) fail(field(ppath, "backend"), "required field missing");
        hp.backend = parse_backend(backend, field(ppath, "backend"));
        rule.paths.push_back(std::move(hp));
      });
    }
    ing.spec.rules.push_back(std::move(rule));
  });
  for_each_item(spec, "tls", sp, [&](const YAML::Node& t, const std::string& tpath) {
    expect_map(t, tpath);
    IngressTLS tls;
    tls.hosts = string_list(t, "hosts", tpath);
    tls.secret_name = opt_string(t, "secretName", tpath).value_or("");
    ing.spec.tls.push_back(std::move(tls));
  });
  return ing;
}

IngressClass convert_ingress_class(const YAML::Node& obj) {
  IngressClass ic;
  ic.metadata = parse_meta(obj, false);
  YAML::Node spec = spec_of(obj);
  ic.spec.controller = opt_string(spec, "controller", "spec").value_or("");
  return ic;
}

Service convert_service(const YAML::Node& obj) {
  Service svc;
  svc.metadata = parse_meta(obj, true);
  YAML::Node spec = spec_of(obj);
  const std::string sp = "spec";
  svc.spec.type = opt_string(spec, "type", sp).value_or("ClusterIP");
  svc.spec.cluster_ip = opt_string(spec, "clusterIP", sp).value_or("");
  for_each_item(spec, "ports", sp, [&](const YAML::Node& p, const std::string& ppath) {
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

EndpointSlice convert_endpoint_slice(const YAML::Node& obj) {
  EndpointSlice slice;
  slice.metadata = parse_meta(obj, true);
  slice.address_type = req_string(obj, "addressType", "");
  for_each_item(obj, "endpoints", "", [&](const YAML::Node& e, const std::string& epath) {
    expect_map(e, epath);
    SliceEndpoint ep;
    ep.addresses = string_list(e, "addresses", epath);
    YAML::Node cond = child(e, "conditions");
    if (present(cond)) {
      const std::string cpath = field(epath, "conditions");
      expect_map(cond, cpath);
      ep.conditions.ready = opt_bool(cond, "ready", cpath);
      ep.conditions.serving = opt_bool(cond, "serving", cpath);
      ep.conditions.terminating = opt_bool(cond, "terminating", cpath);
    }
    slice.endpoints.push_back(std::move(ep));
  });
  for_each_item(obj, "ports", "", [&](const YAML::Node& p, const std::string& ppath) {
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

Secret convert_secret(const YAML::Node& obj) {
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

SubstitutionRuleSet convert_substitution_rule_set(const YAML::Node& obj) {
  SubstitutionRuleSet set;
  set.metadata = parse_meta(obj, /*namespaced=*/true);
  const YAML::Node spec = spec_of(obj);
  for_each_item(spec, "rules", "spec", [&](const YAML::Node& n, const std::string& where) {
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

template <typename T, typename Convert>
ParseResult<T> guarded(const YAML::Node& node, Convert convert) {
  ParseResult<T> result;
  try {
    if (!node.IsDefined() || !node.IsMap()) {
      fail("", std::string("expected a mapping, got ") + type_name(node));
    }
    result.value = convert(node);
  } catch (const FieldError& e) {
    result.error = e.path.empty() ? e.message : e.path + ": " + e.message;
  } catch (const YAML::Exception& e) {
    result.error = std::string("invalid document: ") + e.what();
  } catch (const std::exception& e) {
    result.error = std::string("internal error: ") + e.what();
  }
  return result;
}

}  // namespace

ParseResult<Ingress> parse_ingress(const YAML::Node& node) {
  return guarded<Ingress>(node, convert_ingress);
}

ParseResult<IngressClass> parse_ingress_class(const YAML::Node& node) {
  return guarded<IngressClass>(node, convert_ingress_class);
}

ParseResult<Service> parse_service(const YAML::Node& node) {
  return guarded<Service>(node, convert_service);
}

ParseResult<EndpointSlice> parse_endpoint_slice(const YAML::Node& node) {
  return guarded<EndpointSlice>(node, convert_endpoint_slice);
}

ParseResult<Secret> parse_secret(const YAML::Node& node) {
  return guarded<Secret>(node, convert_secret);
}

ParseResult<SubstitutionRuleSet> parse_substitution_rule_set(const YAML::Node& node) {
  return guarded<SubstitutionRuleSet>(node, convert_substitution_rule_set);
}

ParseResult<Object> parse_object(const YAML::Node& node) {
  return guarded<Object>(node, [](const YAML::Node& obj) -> Object {
    std::string api_version = req_string(obj, "apiVersion", "");
    std::string kind_name = req_string(obj, "kind", "");
    auto kind = kind_from_string(kind_name);
    if (!kind) fail("kind", "unsupported kind \"" + kind_name + "\"");
    if (api_version != api_version_of(*kind)) {
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
    }
    fail("kind", "unsupported kind \"" + kind_name + "\"");
  });
}

}  // namespace tidegate::controller::objects
