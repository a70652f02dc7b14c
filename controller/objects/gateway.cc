#include "objects/gateway.h"

#include <utility>

#include "objects/fields.h"

namespace tidegate::controller::objects {

namespace {

using namespace detail;

// Gateway API names (sectionName, listener name) and hostnames are validated by the API server;
// here they are only required to be strings. A required field may not be empty.
std::string opt_text(const Node& parent, const char* key, const std::string& path,
                     std::string fallback = {}) {
  return opt_string(parent, key, path).value_or(std::move(fallback));
}

LabelSelector parse_selector(const Node& n, const std::string& path) {
  expect_map(n, path);
  LabelSelector s;
  s.match_labels = string_map(n, "matchLabels", path);
  for_each_item(n, "matchExpressions", path, [&](const Node& e, const std::string& epath) {
    expect_map(e, epath);
    LabelSelectorRequirement r;
    r.key = req_string(e, "key", epath);
    r.op = req_string(e, "operator", epath);
    r.values = string_list(e, "values", epath);
    s.match_expressions.push_back(std::move(r));
  });
  return s;
}

std::vector<ParentReference> parse_parent_refs(const Node& spec, const std::string& sp) {
  std::vector<ParentReference> out;
  for_each_item(spec, "parentRefs", sp, [&](const Node& n, const std::string& path) {
    expect_map(n, path);
    ParentReference p;
    p.group = opt_text(n, "group", path, std::string(kGatewayGroup));
    p.kind = opt_text(n, "kind", path, "Gateway");
    p.namespace_ = opt_string(n, "namespace", path);
    p.name = req_string(n, "name", path);
    p.section_name = opt_string(n, "sectionName", path);
    p.port = opt_port_number(n, "port", path);
    out.push_back(std::move(p));
  });
  return out;
}

std::vector<HTTPHeaderMatch> parse_header_matches(const Node& parent, const char* key,
                                                  const std::string& path) {
  std::vector<HTTPHeaderMatch> out;
  for_each_item(parent, key, path, [&](const Node& n, const std::string& hpath) {
    expect_map(n, hpath);
    HTTPHeaderMatch h;
    h.type = opt_text(n, "type", hpath, "Exact");
    h.name = req_string(n, "name", hpath);
    // An empty value is a value (a header that is present and empty).
    h.value = opt_text(n, "value", hpath);
    out.push_back(std::move(h));
  });
  return out;
}

HTTPHeaderFilter parse_header_filter(const Node& n, const std::string& path) {
  expect_map(n, path);
  HTTPHeaderFilter f;
  auto headers = [&](const char* key, std::vector<HTTPHeader>& into) {
    for_each_item(n, key, path, [&](const Node& h, const std::string& hpath) {
      expect_map(h, hpath);
      into.push_back(HTTPHeader{req_string(h, "name", hpath), opt_text(h, "value", hpath)});
    });
  };
  headers("set", f.set);
  headers("add", f.add);
  f.remove = string_list(n, "remove", path);
  return f;
}

std::optional<HTTPPathModifier> parse_path_modifier(const Node& parent, const std::string& path) {
  Node n = child(parent, "path");
  if (!present(n)) return std::nullopt;
  const std::string ppath = field(path, "path");
  expect_map(n, ppath);
  HTTPPathModifier m;
  m.type = req_string(n, "type", ppath);
  m.replace_full_path = opt_text(n, "replaceFullPath", ppath);
  m.replace_prefix_match = opt_text(n, "replacePrefixMatch", ppath);
  return m;
}

std::vector<HTTPRouteFilter> parse_filters(const Node& parent, const std::string& path) {
  std::vector<HTTPRouteFilter> out;
  for_each_item(parent, "filters", path, [&](const Node& n, const std::string& fpath) {
    expect_map(n, fpath);
    HTTPRouteFilter f;
    f.type = req_string(n, "type", fpath);
    // The field named after the type must be there for the types we read (the API server's
    // validation says so too); the fields of other types are not read.
    auto required = [&](const char* key) {
      Node v = child(n, key);
      if (!present(v)) fail(field(fpath, key), "required field missing for type " + f.type);
      return v;
    };
    if (f.type == "RequestHeaderModifier") {
      f.request_header_modifier = parse_header_filter(required("requestHeaderModifier"),
                                                      field(fpath, "requestHeaderModifier"));
    } else if (f.type == "ResponseHeaderModifier") {
      f.response_header_modifier = parse_header_filter(required("responseHeaderModifier"),
                                                       field(fpath, "responseHeaderModifier"));
    } else if (f.type == "RequestRedirect") {
      const std::string rpath = field(fpath, "requestRedirect");
      Node r = required("requestRedirect");
      expect_map(r, rpath);
      HTTPRequestRedirectFilter redirect;
      redirect.scheme = opt_string(r, "scheme", rpath);
      redirect.hostname = opt_string(r, "hostname", rpath);
      redirect.path = parse_path_modifier(r, rpath);
      redirect.port = opt_port_number(r, "port", rpath);
      redirect.status_code = opt_integer(r, "statusCode", rpath);
      f.request_redirect = std::move(redirect);
    } else if (f.type == "URLRewrite") {
      const std::string upath = field(fpath, "urlRewrite");
      Node u = required("urlRewrite");
      expect_map(u, upath);
      HTTPURLRewriteFilter rewrite;
      rewrite.hostname = opt_string(u, "hostname", upath);
      rewrite.path = parse_path_modifier(u, upath);
      f.url_rewrite = std::move(rewrite);
    } else if (f.type == "CORS") {
      const std::string cpath = field(fpath, "cors");
      Node c = required("cors");
      expect_map(c, cpath);
      HTTPCORSFilter cors;
      cors.allow_origins = string_list(c, "allowOrigins", cpath);
      cors.allow_credentials = opt_bool(c, "allowCredentials", cpath);
      cors.allow_methods = string_list(c, "allowMethods", cpath);
      cors.allow_headers = string_list(c, "allowHeaders", cpath);
      cors.expose_headers = string_list(c, "exposeHeaders", cpath);
      cors.max_age = opt_integer(c, "maxAge", cpath);
      f.cors = std::move(cors);
    } else if (f.type == "RequestMirror") {
      const std::string mpath = field(fpath, "requestMirror");
      Node m = required("requestMirror");
      expect_map(m, mpath);
      HTTPRequestMirrorFilter mirror;
      const std::string bpath = field(mpath, "backendRef");
      Node b = child(m, "backendRef");
      if (!present(b)) fail(bpath, "required field missing");
      expect_map(b, bpath);
      mirror.group = opt_text(b, "group", bpath);
      mirror.kind = opt_text(b, "kind", bpath, "Service");
      mirror.name = req_string(b, "name", bpath);
      mirror.namespace_ = opt_string(b, "namespace", bpath);
      mirror.port = opt_port_number(b, "port", bpath);
      mirror.percent = opt_integer(m, "percent", mpath);
      if (Node fr = child(m, "fraction"); present(fr)) {
        const std::string frpath = field(mpath, "fraction");
        expect_map(fr, frpath);
        mirror.numerator = opt_integer(fr, "numerator", frpath);
        if (!mirror.numerator) fail(field(frpath, "numerator"), "required field missing");
        mirror.denominator = opt_integer(fr, "denominator", frpath);
      }
      f.request_mirror = std::move(mirror);
    }
    out.push_back(std::move(f));
  });
  return out;
}

std::vector<BackendRef> parse_backend_refs(const Node& rule, const std::string& rpath) {
  std::vector<BackendRef> out;
  for_each_item(rule, "backendRefs", rpath, [&](const Node& n, const std::string& bpath) {
    expect_map(n, bpath);
    BackendRef b;
    b.group = opt_text(n, "group", bpath);
    b.kind = opt_text(n, "kind", bpath, "Service");
    b.name = req_string(n, "name", bpath);
    b.namespace_ = opt_string(n, "namespace", bpath);
    b.port = opt_port_number(n, "port", bpath);
    if (auto w = opt_integer(n, "weight", bpath)) {
      if (*w < 0 || *w > 1'000'000) {
        fail(field(bpath, "weight"), std::to_string(*w) + " is out of range 0-1000000");
      }
      b.weight = *w;
    }
    b.filters = parse_filters(n, bpath);
    out.push_back(std::move(b));
  });
  return out;
}

std::vector<std::string> parse_hostnames(const Node& spec, const std::string& sp) {
  return string_list(spec, "hostnames", sp);
}

GatewayClass convert_gateway_class(const Node& obj) {
  GatewayClass gc;
  gc.metadata = parse_meta(obj, /*namespaced=*/false);
  gc.controller_name = req_string(spec_of(obj), "controllerName", "spec");
  return gc;
}

Namespace convert_namespace(const Node& obj) {
  Namespace ns;
  ns.metadata = parse_meta(obj, /*namespaced=*/false);
  return ns;
}

Gateway convert_gateway(const Node& obj) {
  Gateway gw;
  gw.metadata = parse_meta(obj, true);
  const Node spec = spec_of(obj);
  const std::string sp = "spec";
  gw.gateway_class_name = req_string(spec, "gatewayClassName", sp);
  gw.has_addresses = present(child(spec, "addresses")) && child(spec, "addresses").size() > 0;
  for_each_item(spec, "listeners", sp, [&](const Node& n, const std::string& lpath) {
    expect_map(n, lpath);
    Listener l;
    l.name = req_string(n, "name", lpath);
    l.hostname = opt_text(n, "hostname", lpath);
    auto port = opt_port_number(n, "port", lpath);
    if (!port) fail(field(lpath, "port"), "required field missing");
    l.port = *port;
    l.protocol = req_string(n, "protocol", lpath);
    Node tls = child(n, "tls");
    if (present(tls)) {
      const std::string tpath = field(lpath, "tls");
      expect_map(tls, tpath);
      l.tls_mode = opt_text(tls, "mode", tpath, "Terminate");
      for_each_item(tls, "certificateRefs", tpath, [&](const Node& c, const std::string& cpath) {
        expect_map(c, cpath);
        SecretObjectReference ref;
        ref.group = opt_text(c, "group", cpath);
        ref.kind = opt_text(c, "kind", cpath, "Secret");
        ref.name = req_string(c, "name", cpath);
        ref.namespace_ = opt_string(c, "namespace", cpath);
        l.certificate_refs.push_back(std::move(ref));
      });
    }
    Node allowed = child(n, "allowedRoutes");
    if (present(allowed)) {
      const std::string apath = field(lpath, "allowedRoutes");
      expect_map(allowed, apath);
      Node namespaces = child(allowed, "namespaces");
      if (present(namespaces)) {
        const std::string npath = field(apath, "namespaces");
        expect_map(namespaces, npath);
        l.namespaces_from = opt_text(namespaces, "from", npath, "Same");
        Node selector = child(namespaces, "selector");
        if (present(selector)) {
          l.namespace_selector = parse_selector(selector, field(npath, "selector"));
        }
      }
      for_each_item(allowed, "kinds", apath, [&](const Node& k, const std::string& kpath) {
        expect_map(k, kpath);
        RouteGroupKind rgk;
        rgk.group = opt_text(k, "group", kpath, std::string(kGatewayGroup));
        rgk.kind = req_string(k, "kind", kpath);
        l.kinds.push_back(std::move(rgk));
      });
    }
    gw.listeners.push_back(std::move(l));
  });
  return gw;
}

std::vector<HTTPRouteMatch> parse_http_matches(const Node& rule, const std::string& rpath) {
  std::vector<HTTPRouteMatch> out;
  for_each_item(rule, "matches", rpath, [&](const Node& n, const std::string& mpath) {
    expect_map(n, mpath);
    HTTPRouteMatch m;
    Node path = child(n, "path");
    if (present(path)) {
      const std::string ppath = field(mpath, "path");
      expect_map(path, ppath);
      HTTPPathMatch p;
      p.type = opt_text(path, "type", ppath, "PathPrefix");
      p.value = opt_text(path, "value", ppath, "/");
      m.path = std::move(p);
    }
    m.headers = parse_header_matches(n, "headers", mpath);
    m.query_params = parse_header_matches(n, "queryParams", mpath);
    m.method = opt_string(n, "method", mpath);
    out.push_back(std::move(m));
  });
  return out;
}

HTTPRoute convert_http_route(const Node& obj) {
  HTTPRoute route;
  route.metadata = parse_meta(obj, true);
  const Node spec = spec_of(obj);
  const std::string sp = "spec";
  route.parent_refs = parse_parent_refs(spec, sp);
  route.hostnames = parse_hostnames(spec, sp);
  for_each_item(spec, "rules", sp, [&](const Node& r, const std::string& rpath) {
    expect_map(r, rpath);
    HTTPRouteRule rule;
    rule.matches = parse_http_matches(r, rpath);
    rule.filters = parse_filters(r, rpath);
    rule.backend_refs = parse_backend_refs(r, rpath);
    Node timeouts = child(r, "timeouts");
    if (present(timeouts)) {
      const std::string tpath = field(rpath, "timeouts");
      expect_map(timeouts, tpath);
      rule.timeout_request = opt_string(timeouts, "request", tpath);
      rule.timeout_backend_request = opt_string(timeouts, "backendRequest", tpath);
    }
    rule.has_retry = present(child(r, "retry"));
    rule.has_session_persistence = present(child(r, "sessionPersistence"));
    route.rules.push_back(std::move(rule));
  });
  return route;
}

GRPCRoute convert_grpc_route(const Node& obj) {
  GRPCRoute route;
  route.metadata = parse_meta(obj, true);
  const Node spec = spec_of(obj);
  const std::string sp = "spec";
  route.parent_refs = parse_parent_refs(spec, sp);
  route.hostnames = parse_hostnames(spec, sp);
  for_each_item(spec, "rules", sp, [&](const Node& r, const std::string& rpath) {
    expect_map(r, rpath);
    GRPCRouteRule rule;
    for_each_item(r, "matches", rpath, [&](const Node& n, const std::string& mpath) {
      expect_map(n, mpath);
      GRPCRouteMatch m;
      Node method = child(n, "method");
      if (present(method)) {
        const std::string ppath = field(mpath, "method");
        expect_map(method, ppath);
        GRPCMethodMatch gm;
        gm.type = opt_text(method, "type", ppath, "Exact");
        gm.service = opt_string(method, "service", ppath);
        gm.method = opt_string(method, "method", ppath);
        m.method = std::move(gm);
      }
      m.headers = parse_header_matches(n, "headers", mpath);
      rule.matches.push_back(std::move(m));
    });
    rule.filters = parse_filters(r, rpath);
    rule.backend_refs = parse_backend_refs(r, rpath);
    rule.has_session_persistence = present(child(r, "sessionPersistence"));
    route.rules.push_back(std::move(rule));
  });
  return route;
}

ReferenceGrant convert_reference_grant(const Node& obj) {
  ReferenceGrant grant;
  grant.metadata = parse_meta(obj, true);
  const Node spec = spec_of(obj);
  const std::string sp = "spec";
  for_each_item(spec, "from", sp, [&](const Node& n, const std::string& path) {
    expect_map(n, path);
    // group is required but "" (core) is a valid value, so only its presence as a string counts.
    grant.from.push_back(ReferenceGrantFrom{opt_text(n, "group", path), req_string(n, "kind", path),
                                            req_string(n, "namespace", path)});
  });
  for_each_item(spec, "to", sp, [&](const Node& n, const std::string& path) {
    expect_map(n, path);
    grant.to.push_back(ReferenceGrantTo{opt_text(n, "group", path), req_string(n, "kind", path),
                                        opt_string(n, "name", path)});
  });
  return grant;
}

BackendTLSPolicy convert_backend_tls_policy(const Node& obj) {
  BackendTLSPolicy p;
  p.metadata = parse_meta(obj, true);
  const Node spec = spec_of(obj);
  const std::string sp = "spec";
  for_each_item(spec, "targetRefs", sp, [&](const Node& n, const std::string& path) {
    expect_map(n, path);
    p.target_refs.push_back(
        PolicyTargetReference{opt_text(n, "group", path), req_string(n, "kind", path),
                              req_string(n, "name", path), opt_string(n, "sectionName", path)});
  });
  const std::string vpath = field(sp, "validation");
  const Node v = child(spec, "validation");
  if (!present(v)) fail(vpath, "required field missing");
  expect_map(v, vpath);
  for_each_item(v, "caCertificateRefs", vpath, [&](const Node& n, const std::string& path) {
    expect_map(n, path);
    p.ca_certificate_refs.push_back(LocalObjectReference{
        opt_text(n, "group", path), req_string(n, "kind", path), req_string(n, "name", path)});
  });
  p.well_known_ca_certificates = opt_string(v, "wellKnownCACertificates", vpath);
  if (p.well_known_ca_certificates && p.well_known_ca_certificates->empty()) {
    p.well_known_ca_certificates.reset();
  }
  p.hostname = req_string(v, "hostname", vpath);
  for_each_item(v, "subjectAltNames", vpath, [&](const Node& n, const std::string& path) {
    expect_map(n, path);
    p.subject_alt_names.push_back(SubjectAltName{
        req_string(n, "type", path), opt_text(n, "hostname", path), opt_text(n, "uri", path)});
  });
  p.has_options = present(child(spec, "options"));
  return p;
}

ConfigMap convert_config_map(const Node& obj) {
  ConfigMap c;
  c.metadata = parse_meta(obj, true);
  c.data = string_map(obj, "data", "");
  return c;
}

}  // namespace

ParseResult<BackendTLSPolicy> parse_backend_tls_policy(const Node& node) {
  return guarded<BackendTLSPolicy>(node, convert_backend_tls_policy);
}

ParseResult<ConfigMap> parse_config_map(const Node& node) {
  return guarded<ConfigMap>(node, convert_config_map);
}

ParseResult<GatewayClass> parse_gateway_class(const Node& node) {
  return guarded<GatewayClass>(node, convert_gateway_class);
}

ParseResult<Gateway> parse_gateway(const Node& node) {
  return guarded<Gateway>(node, convert_gateway);
}

ParseResult<HTTPRoute> parse_http_route(const Node& node) {
  return guarded<HTTPRoute>(node, convert_http_route);
}

ParseResult<GRPCRoute> parse_grpc_route(const Node& node) {
  return guarded<GRPCRoute>(node, convert_grpc_route);
}

ParseResult<ReferenceGrant> parse_reference_grant(const Node& node) {
  return guarded<ReferenceGrant>(node, convert_reference_grant);
}

ParseResult<Namespace> parse_namespace(const Node& node) {
  return guarded<Namespace>(node, convert_namespace);
}

}  // namespace tidegate::controller::objects
