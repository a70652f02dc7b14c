// Table tests of the Gateway API translator (controller/translate/gateway/): Gateways,
// listeners, attachment, hostnames, precedence and status. Filters, backends and GRPCRoute are
// in routes_test.cc; the shared parts in table.h.

#include "table.h"

#include <algorithm>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "source/manifest_loader.h"
#include "store/store.h"
#include "translate/gateway/gateway.h"

namespace tidegate::controller::translate::gateway_table {

using gateway::Condition;

std::vector<std::string> route_lines(const model::Config& config) {
  std::vector<std::string> out;
  for (const auto& [host, vh] : config.virtual_hosts) {
    for (const auto& r : vh.routes) {
      std::ostringstream o;
      o << host << ": " << model::to_string(r.match) << " " << r.path;
      if (!r.method.empty()) o << " " << r.method;
      for (const auto& h : r.headers) {
        o << " h:" << h.name << (h.match == model::ValueMatch::kRegex ? "~" : "=") << h.value;
      }
      for (const auto& q : r.query) {
        o << " q:" << q.name << (q.match == model::ValueMatch::kRegex ? "~" : "=") << q.value;
      }
      o << " -> ";
      if (!r.upstream.empty()) {
        o << r.upstream;
      } else if (!r.backends.empty()) {
        o << "[";
        for (size_t i = 0; i < r.backends.size(); ++i) {
          o << (i ? ", " : "") << r.backends[i].upstream << "*" << r.backends[i].weight;
        }
        o << "]";
      } else {
        o << "500";
      }
      if (!r.policy.is_default()) o << " policy " << model::to_json(*r.policy).dump();
      out.push_back(o.str());
    }
  }
  return out;
}

namespace {

std::string conditions_text(const std::vector<Condition>& cs) {
  std::string out;
  for (const auto& c : cs) out += " " + c.type + "=" + c.status + "/" + c.reason;
  return out;
}

std::string dump(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += "  " + l + "\n";
  return out;
}

std::string dump(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) out += "  " + to_string(d) + "\n";
  return out;
}

std::string indent(const std::string& text, int n) {
  std::string pad(n, ' ');
  std::string out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) out += pad + line + "\n";
  return out;
}

store::Store load(const std::vector<std::string>& docs, const TranslateOptions& options) {
  std::string text;
  for (const auto& d : docs) text += "---\n" + d;
  auto loaded = source::load_manifest_text(text, "case.yaml");
  for (const auto& e : loaded.errors) ADD_FAILURE() << "fixture does not load: " << e.message;
  store::ClassOptions class_options{options.ingress_class, options.controller_name,
                                    options.default_backend_service};
  class_options.gateway_controller_name = options.gateway_controller_name;
  return store::build_store(loaded, class_options);
}

}  // namespace

std::vector<std::string> status_lines(const gateway::GatewayStatusReport& report) {
  std::vector<std::string> out;
  for (const auto& [name, s] : report.gateway_classes) {
    out.push_back("GatewayClass " + name + ":" + conditions_text(s.conditions));
  }
  for (const auto& [key, g] : report.gateways) {
    out.push_back("Gateway " + key + ":" + conditions_text(g.conditions));
    for (const auto& l : g.listeners) {
      std::string kinds;
      for (const auto& k : l.supported_kinds) kinds += (kinds.empty() ? "" : ",") + k.kind;
      out.push_back("Gateway " + key + " listener " + l.name + ": kinds=" + kinds + " attached=" +
                    std::to_string(l.attached_routes) + conditions_text(l.conditions));
    }
  }
  for (const auto& [key, r] : report.routes) {
    for (const auto& p : r.parents) {
      std::string parent = p.parent_ref.namespace_.value_or(r.namespace_) + "/" + p.parent_ref.name;
      if (p.parent_ref.section_name) parent += "/" + *p.parent_ref.section_name;
      if (p.parent_ref.port) parent += ":" + std::to_string(*p.parent_ref.port);
      out.push_back(key + " parent " + parent + ":" + conditions_text(p.conditions));
    }
  }
  for (const auto& [key, s] : report.backend_tls_policies) {
    for (const auto& a : s.ancestors) {
      out.push_back("BackendTLSPolicy " + key + " ancestor " +
                    a.ancestor_ref.namespace_.value_or("") + "/" + a.ancestor_ref.name + ":" +
                    conditions_text(a.conditions));
    }
  }
  return out;
}

void run(const Case& c) {
  SCOPED_TRACE(c.name);
  TranslateResult got = translate(load(c.objects, c.options), c.options);
  const auto routes = route_lines(got.config);
  EXPECT_EQ(routes, c.routes) << "got:\n" << dump(routes) << "want:\n" << dump(c.routes);
  EXPECT_EQ(model::validate(got.config), std::vector<std::string>{});
  const auto status = status_lines(got.gateway_status);
  for (const auto& want : c.status) {
    EXPECT_NE(std::find(status.begin(), status.end(), want), status.end())
        << "missing status line: " << want << "\ngot:\n"
        << dump(status);
  }
  bool same = got.diagnostics.size() == c.diagnostics.size();
  for (size_t i = 0; same && i < c.diagnostics.size(); ++i) {
    const auto& g = got.diagnostics[i];
    const auto& w = c.diagnostics[i];
    same = g.severity == w.severity && g.object == w.object &&
           g.message.find(w.piece) != std::string::npos;
  }
  if (!same) {
    std::string want;
    for (const auto& w : c.diagnostics) {
      want +=
          std::string("  ") + to_string(w.severity) + ": " + w.object + ": ..." + w.piece + "...\n";
    }
    ADD_FAILURE() << "diagnostics differ; got:\n" << dump(got.diagnostics) << "want:\n" << want;
  }
  if (c.check) c.check(got);

  // Determinism: the same objects in reverse order, and a second run, change nothing.
  const std::vector<std::string> reversed(c.objects.rbegin(), c.objects.rend());
  for (const std::vector<std::string>* docs : {&reversed, &c.objects}) {
    TranslateResult again = translate(load(*docs, c.options), c.options);
    EXPECT_EQ(again.config, got.config);
    EXPECT_EQ(again.diagnostics, got.diagnostics);
    EXPECT_EQ(again.gateway_status, got.gateway_status);
  }
}

// ---- Fixtures ----

std::string gateway_class(const std::string& name, const std::string& controller) {
  return "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: " +
         name + "\nspec:\n  controllerName: " + controller + "\n";
}

std::string gateway(const std::string& name, const std::string& listeners, const std::string& ns,
                    const std::string& cls) {
  return "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: " + name +
         "\n  namespace: " + ns + "\nspec:\n  gatewayClassName: " + cls + "\n  listeners:\n" +
         listeners;
}

std::string http_listener(const std::string& name, const std::string& extra, int port) {
  return "  - name: " + name + "\n    protocol: HTTP\n    port: " + std::to_string(port) + "\n" +
         indent(extra, 4);
}

std::string service(const std::string& name, int port, const std::string& ns, int n,
                    const std::string& app_protocol) {
  std::string s = "apiVersion: v1\nkind: Service\nmetadata:\n  name: " + name +
                  "\n  namespace: " + ns + "\nspec:\n  ports:\n  - port: " + std::to_string(port) +
                  "\n";
  if (!app_protocol.empty()) s += "    appProtocol: " + app_protocol + "\n";
  (void)n;  // one endpoint per Service: see endpoints()
  return s;
}

std::string endpoints(const std::string& name, int port, const std::string& ns, int n) {
  return "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: " + name +
         "-x\n  namespace: " + ns + "\n  labels: {kubernetes.io/service-name: " + name +
         "}\naddressType: IPv4\nendpoints:\n- addresses: [10.0.0." + std::to_string(n) +
         "]\nports:\n- port: " + std::to_string(port) + "\n";
}

std::string http_route(const std::string& name, const std::string& spec, const std::string& ns,
                       const std::string& created) {
  std::string s =
      "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: " + name +
      "\n  namespace: " + ns + "\n";
  if (!created.empty()) s += "  creationTimestamp: \"" + created + "\"\n";
  return s + "spec:\n" + indent(spec, 2);
}

std::string grpc_route(const std::string& name, const std::string& spec, const std::string& ns) {
  return "apiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\nmetadata:\n  name: " + name +
         "\n  namespace: " + ns + "\nspec:\n" + indent(spec, 2);
}

// A self-signed certificate and its key (the same test data as translate_test.cc's).
const std::string kCertPem =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBijCCATGgAwIBAgIUGFXZfjICik4viQYVk5vYoiXe+y8wCgYIKoZIzj0EAwIw\n"
    "GzEZMBcGA1UEAwwQbWFpbi5leGFtcGxlLmNvbTAeFw0yNjEyMDIxNjQ3NTNaFw0z\n"
    "NjExMjkxNjQ3NTNaMBsxGTAXBgNVBAMMEG1haW4uZXhhbXBsZS5jb20wWTATBgcq\n"
    "hkjOPQIBBggqhkjOPQMBBwNCAASEOK95S8NTHjLjHXsTrBTIzwp1/LlK3LRDO6Vn\n"
    "nTCoe3RndG/Rp64OGvVGqemMCznKkYflefj2NPfsHUFuKSSWo1MwUTAdBgNVHQ4E\n"
    "FgQUIDxGB7dKQsfK6hL1CuHAnBJRsNUwHwYDVR0jBBgwFoAUIDxGB7dKQsfK6hL1\n"
    "CuHAnBJRsNUwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNHADBEAiAFqmSV\n"
    "T9VQD1OrY4JYF3MWcATsXlFrBK/r+udyqhgu7QIgPl1pNm2M/eShsHf8GI+GZ8Oh\n"
    "RQJXxgyd+KLcbEz+gOM=\n"
    "-----END CERTIFICATE-----\n";
const std::string kKeyPem =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg+9zubm4CwlYc9FBu\n"
    "DJurdCsUUh49nD2LqivPdm11lWKhRANCAASEOK95S8NTHjLjHXsTrBTIzwp1/LlK\n"
    "3LRDO6VnnTCoe3RndG/Rp64OGvVGqemMCznKkYflefj2NPfsHUFuKSSW\n"
    "-----END PRIVATE KEY-----\n";

std::string tls_secret(const std::string& name, const std::string& ns) {
  return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + name + "\n  namespace: " + ns +
         "\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: |\n" + indent(kCertPem, 4) +
         "  tls.key: |\n" + indent(kKeyPem, 4);
}

std::string ca_config_map(const std::string& name, const std::string& ns) {
  return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: " + ns +
         "\ndata:\n  ca.crt: |\n" + indent(kCertPem, 4);
}

std::string backend_tls_policy(const std::string& name, const std::string& spec,
                               const std::string& created) {
  std::string s =
      "apiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\nmetadata:\n"
      "  name: " +
      name + "\n  namespace: default\n";
  if (!created.empty()) s += "  creationTimestamp: \"" + created + "\"\n";
  return s + "spec:\n" + indent(spec, 2);
}

namespace {

const std::string kGw = "Gateway default/gw";
const std::string kRoute = "HTTPRoute default/web";
const std::string kWeb = "default/web:80";

// A route of default/web to Service web:80 on Gateway gw, with `extra` spec lines.
std::string web_route(const std::string& extra = "", const std::string& name = "web",
                      const std::string& ns = "default", const std::string& created = "") {
  return http_route(name,
                    "parentRefs: [{name: gw, namespace: default}]\n" + extra +
                        "rules:\n- backendRefs: [{name: web, port: 80, namespace: default}]\n",
                    ns, created);
}

std::vector<std::string> with_base(std::vector<std::string> more,
                                   const std::string& listeners = http_listener("http")) {
  std::vector<std::string> out = {gateway_class(), gateway("gw", listeners), service("web", 80),
                                  endpoints("web", 8080)};
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

TEST(GatewayTranslateTest, GatewaysAndListeners) {
  const std::vector<Case> cases = {
      {"a route without hostnames on a listener without hostname is the catch-all host",
       with_base({web_route()}),
       {"*: Prefix / -> default/web:80"},
       {"GatewayClass tidegate: Accepted=True/Accepted",
        "Gateway default/gw: Accepted=True/Accepted Programmed=True/Programmed",
        "Gateway default/gw listener http: kinds=HTTPRoute,GRPCRoute attached=1 "
        "Accepted=True/Accepted Programmed=True/Programmed ResolvedRefs=True/ResolvedRefs "
        "Conflicted=False/NoConflicts",
        "HTTPRoute default/web parent default/gw: Accepted=True/Accepted "
        "ResolvedRefs=True/ResolvedRefs"},
       {},
       [](const TranslateResult& r) {
         ASSERT_TRUE(r.config.upstreams.contains(kWeb));
         EXPECT_EQ(r.config.upstreams.at(kWeb).endpoints,
                   (std::vector<model::Endpoint>{{"10.0.0.1", 8080}}));
       }},
      {"a Gateway of another class is ignored, and so are its routes",
       {gateway_class(), gateway_class("other", "example.com/other"),
        gateway("gw", http_listener("http"), "default", "other"), service("web", 80),
        endpoints("web", 8080), web_route()},
       {},
       {"GatewayClass tidegate: Accepted=True/Accepted"},
       {},
       [](const TranslateResult& r) {
         EXPECT_EQ(r.gateway_status.gateway_classes.size(), 1u);
         EXPECT_TRUE(r.gateway_status.gateways.empty());
         EXPECT_TRUE(r.gateway_status.routes.empty());
         EXPECT_TRUE(r.config.upstreams.empty());
       }},
      {"a Gateway whose class does not exist is not ours",
       {gateway("gw", http_listener("http"), "default", "missing"), web_route()},
       {}},
      {"the controllerName is an option",
       {gateway_class("mine", "example.com/gw"),
        gateway("gw", http_listener("http"), "default", "mine"), service("web", 80),
        endpoints("web", 8080), web_route()},
       {"*: Prefix / -> default/web:80"},
       {"GatewayClass mine: Accepted=True/Accepted"},
       {},
       {},
       [] {
         TranslateOptions o;
         o.gateway_controller_name = "example.com/gw";
         return o;
       }()},
      {"unsupported protocol and port: listeners not accepted, the Gateway accepted with "
       "ListenersNotValid",
       with_base({web_route()}, http_listener("http") +
                                    "  - {name: tcp, protocol: TCP, port: 9000}\n"
                                    "  - {name: alt, protocol: HTTP, port: 8080}\n"),
       {"*: Prefix / -> default/web:80"},
       {"Gateway default/gw: Accepted=True/ListenersNotValid Programmed=True/Programmed",
        "Gateway default/gw listener tcp: kinds= attached=0 Accepted=False/UnsupportedProtocol "
        "Programmed=False/Invalid ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts",
        // Counted though the listener is not accepted: attachment depends on allowedRoutes
        // and parentRefs alone (the route names the whole Gateway).
        "Gateway default/gw listener alt: kinds=HTTPRoute,GRPCRoute attached=1 "
        "Accepted=False/PortUnavailable Programmed=False/Invalid ResolvedRefs=True/ResolvedRefs "
        "Conflicted=False/NoConflicts",
        "Gateway default/gw listener http: kinds=HTTPRoute,GRPCRoute attached=1 "
        "Accepted=True/Accepted Programmed=True/Programmed ResolvedRefs=True/ResolvedRefs "
        "Conflicted=False/NoConflicts"},
       {E(kGw, "listener \"tcp\": protocol TCP is not supported"),
        E(kGw, "listener \"alt\": port 8080 is not the data plane's HTTP port 80")}},
      {"only invalid listeners: the Gateway is not accepted",
       with_base({web_route()}, "  - {name: tls, protocol: TLS, port: 443}\n"),
       {},
       {"Gateway default/gw: Accepted=False/ListenersNotValid Programmed=False/Invalid",
        "HTTPRoute default/web parent default/gw: Accepted=False/NotAllowedByListeners "
        "ResolvedRefs=True/ResolvedRefs"},
       {E(kGw, "listener \"tls\": protocol TLS is not supported"),
        E(kRoute, "NotAllowedByListeners")}},
      {"the data plane's ports are options",
       with_base({web_route()}, http_listener("http", "", 8080)),
       {"*: Prefix / -> default/web:80"},
       {},
       {},
       {},
       [] {
         TranslateOptions o;
         o.gateway_http_port = 8080;
         return o;
       }()},
      {"allowedRoutes.kinds: an unknown kind is InvalidRouteKinds, a known one is kept",
       with_base({web_route()}, http_listener("http",
                                              "allowedRoutes:\n  kinds:\n  - kind: HTTPRoute\n"
                                              "  - kind: TCPRoute\n")),
       {"*: Prefix / -> default/web:80"},
       {"Gateway default/gw listener http: kinds=HTTPRoute attached=1 Accepted=True/Accepted "
        "Programmed=True/Programmed ResolvedRefs=False/InvalidRouteKinds "
        "Conflicted=False/NoConflicts"},
       {E(kGw, "InvalidRouteKinds: route kind gateway.networking.k8s.io/TCPRoute")}},
      {"allowedRoutes.kinds without HTTPRoute: the route is not allowed",
       with_base({web_route()},
                 http_listener("http", "allowedRoutes:\n  kinds:\n  - kind: GRPCRoute\n")),
       {},
       {"HTTPRoute default/web parent default/gw: Accepted=False/NotAllowedByListeners "
        "ResolvedRefs=True/ResolvedRefs"},
       {E(kRoute, "NotAllowedByListeners")}},
      {"two listeners on one port with one hostname conflict and serve no routes (which still "
       "count as attached: listener status does not impact attachment)",
       with_base({web_route()}, http_listener("a", "hostname: a.com") +
                                    http_listener("b", "hostname: a.com") +
                                    http_listener("c", "hostname: c.com")),
       {"c.com: Prefix / -> default/web:80"},
       {"Gateway default/gw listener a: kinds=HTTPRoute,GRPCRoute attached=1 "
        "Accepted=False/HostnameConflict Programmed=False/HostnameConflict "
        "ResolvedRefs=True/ResolvedRefs Conflicted=True/HostnameConflict",
        "Gateway default/gw listener c: kinds=HTTPRoute,GRPCRoute attached=1 "
        "Accepted=True/Accepted Programmed=True/Programmed ResolvedRefs=True/ResolvedRefs "
        "Conflicted=False/NoConflicts"},
       {E(kGw, "listener \"a\": HostnameConflict"), E(kGw, "listener \"b\": HostnameConflict")}},
      {"HTTP and HTTPS on one port: ProtocolConflict",
       with_base({web_route()}, http_listener("a") +
                                    "  - name: b\n    protocol: HTTPS\n    port: 80\n    tls:\n"
                                    "      certificateRefs: [{name: cert}]\n"),
       {},
       {"Gateway default/gw listener a: kinds=HTTPRoute,GRPCRoute attached=0 "
        "Accepted=False/ProtocolConflict Programmed=False/ProtocolConflict "
        "ResolvedRefs=True/ResolvedRefs Conflicted=True/ProtocolConflict",
        "Gateway default/gw: Accepted=False/ListenersNotValid Programmed=False/Invalid"},
       {E(kGw, "listener \"a\": ProtocolConflict"),
        E(kGw, "listener \"b\": port 80 is not the data plane's HTTPS port 443"),
        E(kRoute, "NotAllowedByListeners")}},
      {"a listener of a protocol Tidegate does not serve conflicts with none",
       with_base({web_route()}, http_listener("a") + "  - {name: tls, protocol: TLS, port: 80}\n"),
       {"*: Prefix / -> default/web:80"},
       {"Gateway default/gw listener a: kinds=HTTPRoute,GRPCRoute attached=1 "
        "Accepted=True/Accepted Programmed=True/Programmed ResolvedRefs=True/ResolvedRefs "
        "Conflicted=False/NoConflicts",
        "Gateway default/gw listener tls: kinds= attached=0 Accepted=False/UnsupportedProtocol "
        "Programmed=False/Invalid ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts"},
       {E(kGw, "listener \"tls\": protocol TLS is not supported")}},
      {"spec.addresses is not supported",
       {gateway_class(),
        gateway("gw", http_listener("http")) + "  addresses: [{value: 10.0.0.9}]\n",
        service("web", 80), endpoints("web", 8080), web_route()},
       {},
       {"Gateway default/gw: Accepted=False/UnsupportedAddress Programmed=False/Invalid"},
       {E(kGw, "spec.addresses is not supported"), E(kRoute, "NotAllowedByListeners")}},
      {"observedGeneration is the object's metadata.generation",
       {"apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: "
        "tidegate\n  generation: 2\nspec:\n  controllerName: tidegate.io/gateway-controller\n",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: gw\n  "
        "generation: 5\nspec:\n  gatewayClassName: tidegate\n  listeners:\n" +
            http_listener("http"),
        service("web", 80), endpoints("web", 8080),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: web\n  "
        "generation: 7\nspec:\n  parentRefs: [{name: gw}]\n  rules:\n  - backendRefs: [{name: "
        "web, port: 80}]\n"},
       {"*: Prefix / -> default/web:80"},
       {},
       {},
       [](const TranslateResult& r) {
         const auto& s = r.gateway_status;
         for (const auto& c : s.gateway_classes.at("tidegate").conditions) {
           EXPECT_EQ(c.observed_generation, 2);
         }
         for (const auto& c : s.gateways.at("default/gw").conditions) {
           EXPECT_EQ(c.observed_generation, 5);
         }
         for (const auto& c : s.gateways.at("default/gw").listeners.at(0).conditions) {
           EXPECT_EQ(c.observed_generation, 5);
         }
         const auto& parent = s.routes.at("HTTPRoute default/web").parents.at(0);
         EXPECT_EQ(parent.controller_name, "tidegate.io/gateway-controller");
         for (const auto& c : parent.conditions) EXPECT_EQ(c.observed_generation, 7);
       }},
  };
  for (const auto& c : cases) run(c);
}

TEST(GatewayTranslateTest, Attachment) {
  const std::string two =
      http_listener("a", "hostname: a.com") + http_listener("b", "hostname: b.com");
  const std::string all = "allowedRoutes: {namespaces: {from: All}}";
  const std::string selector =
      "allowedRoutes:\n  namespaces:\n    from: Selector\n    selector:\n      matchLabels: "
      "{team: blue}\n      matchExpressions:\n      - {key: env, operator: NotIn, values: "
      "[prod]}\n";
  auto ns = [](const std::string& name, const std::string& labels) {
    return "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + name + "\n  labels: " + labels +
           "\n";
  };
  auto other_ns_route = [](const std::string& ns) {
    return http_route("web",
                      "parentRefs: [{name: gw, namespace: default}]\nrules:\n- backendRefs: "
                      "[{name: web, port: 80}]\n",
                      ns);
  };
  const std::vector<Case> cases = {
      {"sectionName picks one listener",
       with_base({http_route("web",
                             "parentRefs: [{name: gw, sectionName: b}]\nrules:\n- backendRefs: "
                             "[{name: web, port: 80}]\n")},
                 two),
       {"b.com: Prefix / -> default/web:80"},
       {"HTTPRoute default/web parent default/gw/b: Accepted=True/Accepted "
        "ResolvedRefs=True/ResolvedRefs",
        "Gateway default/gw listener a: kinds=HTTPRoute,GRPCRoute attached=0 "
        "Accepted=True/Accepted Programmed=True/Programmed ResolvedRefs=True/ResolvedRefs "
        "Conflicted=False/NoConflicts"}},
      {"without sectionName every listener takes the route",
       with_base({web_route()}, two),
       {"a.com: Prefix / -> default/web:80", "b.com: Prefix / -> default/web:80"}},
      {"a sectionName no listener has: NoMatchingParent",
       with_base({http_route("web",
                             "parentRefs: [{name: gw, sectionName: nope}]\nrules:\n- "
                             "backendRefs: [{name: web, port: 80}]\n")},
                 two),
       {},
       {"HTTPRoute default/web parent default/gw/nope: Accepted=False/NoMatchingParent "
        "ResolvedRefs=True/ResolvedRefs"},
       {E(kRoute, "NoMatchingParent")}},
      {"a port no listener has: NoMatchingParent; the right port attaches",
       with_base({http_route("web",
                             "parentRefs: [{name: gw, port: 8080}, {name: gw, port: 80}]\n"
                             "rules:\n- backendRefs: [{name: web, port: 80}]\n")}),
       {"*: Prefix / -> default/web:80"},
       {"HTTPRoute default/web parent default/gw:8080: Accepted=False/NoMatchingParent "
        "ResolvedRefs=True/ResolvedRefs",
        "HTTPRoute default/web parent default/gw:80: Accepted=True/Accepted "
        "ResolvedRefs=True/ResolvedRefs"},
       {E(kRoute, "NoMatchingParent")}},
      {"from Same (the default): a route of another namespace is not allowed",
       {gateway_class(), gateway("gw", http_listener("http")), service("web", 80, "team"),
        endpoints("web", 8080, "team"), other_ns_route("team")},
       {},
       {"HTTPRoute team/web parent default/gw: Accepted=False/NotAllowedByListeners "
        "ResolvedRefs=True/ResolvedRefs"},
       {E("HTTPRoute team/web", "NotAllowedByListeners")}},
      {"from All: any namespace",
       {gateway_class(), gateway("gw", http_listener("http", all)), service("web", 80, "team"),
        endpoints("web", 8080, "team"), other_ns_route("team")},
       {"*: Prefix / -> team/web:80"}},
      {"from Selector: matchLabels and matchExpressions on the Namespace's labels",
       {gateway_class(), gateway("gw", http_listener("http", selector)),
        ns("blue", "{team: blue, env: dev}"), ns("prod", "{team: blue, env: prod}"),
        service("web", 80, "blue"), endpoints("web", 8080, "blue"), service("web", 80, "prod"),
        endpoints("web", 8080, "prod"), service("web", 80, "red"), endpoints("web", 8080, "red"),
        other_ns_route("blue"), other_ns_route("prod"), other_ns_route("red")},
       {"*: Prefix / -> blue/web:80"},
       {"HTTPRoute prod/web parent default/gw: Accepted=False/NotAllowedByListeners "
        "ResolvedRefs=True/ResolvedRefs",
        "HTTPRoute red/web parent default/gw: Accepted=False/NotAllowedByListeners "
        "ResolvedRefs=True/ResolvedRefs"},
       {E("HTTPRoute prod/web", "NotAllowedByListeners"),
        E("HTTPRoute red/web", "NotAllowedByListeners")}},
      {"from Selector on the name label every namespace has, without Namespace objects",
       {gateway_class(),
        gateway("gw", http_listener("http",
                                    "allowedRoutes:\n  namespaces:\n    from: Selector\n    "
                                    "selector:\n      matchLabels: "
                                    "{kubernetes.io/metadata.name: team}\n")),
        service("web", 80, "team"), endpoints("web", 8080, "team"), other_ns_route("team")},
       {"*: Prefix / -> team/web:80"}},
      {"a parentRef to a Gateway that is not ours gets no status entry",
       {gateway_class(), gateway("gw", http_listener("http")), service("web", 80),
        endpoints("web", 8080),
        http_route("web",
                   "parentRefs: [{name: gw}, {name: elsewhere}]\nrules:\n- backendRefs: "
                   "[{name: web, port: 80}]\n")},
       {"*: Prefix / -> default/web:80"},
       {},
       {},
       [](const TranslateResult& r) {
         EXPECT_EQ(r.gateway_status.routes.at("HTTPRoute default/web").parents.size(), 1u);
       }},
  };
  for (const auto& c : cases) run(c);
}

TEST(GatewayTranslateTest, Hostnames) {
  auto route = [](const std::string& hostnames) {
    return http_route("web", "parentRefs: [{name: gw}]\nhostnames: " + hostnames +
                                 "\nrules:\n- backendRefs: [{name: web, port: 80}]\n");
  };
  const std::vector<Case> cases = {
      {"exact listener, exact route: the same name",
       with_base({route("[a.com, b.com]")}, http_listener("h", "hostname: a.com")),
       {"a.com: Prefix / -> default/web:80"}},
      {"exact listener, wildcard route covering it: the listener's name",
       with_base({route("['*.example.com']")}, http_listener("h", "hostname: www.example.com")),
       {"www.example.com: Prefix / -> default/web:80"}},
      {"wildcard listener: the route names under it, not the others",
       with_base({route("[a.example.com, x.y.example.com, example.com, a.example.net]")},
                 http_listener("h", "hostname: '*.example.com'")),
       {"a.example.com: Prefix / -> default/web:80",
        "x.y.example.com: Prefix / -> default/web:80"}},
      {"wildcard listener, route without hostnames: the wildcard",
       with_base({route("[]")}, http_listener("h", "hostname: '*.example.com'")),
       {"**.example.com: Prefix / -> default/web:80"}},
      {"no intersection: NoMatchingListenerHostname",
       with_base({route("[a.net]")}, http_listener("h", "hostname: a.com")),
       {},
       {"HTTPRoute default/web parent default/gw: Accepted=False/NoMatchingListenerHostname "
        "ResolvedRefs=True/ResolvedRefs",
        "Gateway default/gw listener h: kinds=HTTPRoute,GRPCRoute attached=0 "
        "Accepted=True/Accepted Programmed=True/Programmed ResolvedRefs=True/ResolvedRefs "
        "Conflicted=False/NoConflicts"},
       {E(kRoute, "NoMatchingListenerHostname")}},
      {"listener without hostname: the route's names, lower-cased; invalid ones reported",
       with_base({route("[A.com, '1.2.3.4:80']")}),
       {"a.com: Prefix / -> default/web:80"},
       {},
       {E(kRoute, "spec.hostnames[1]: invalid hostname \"1.2.3.4:80\"; ignored")}},
  };
  for (const auto& c : cases) run(c);
}

TEST(GatewayTranslateTest, IntersectHostnames) {
  using gateway::intersect_hostnames;
  using V = std::vector<std::string>;
  EXPECT_EQ(intersect_hostnames("", {}), V{"*"});
  EXPECT_EQ(intersect_hostnames("a.com", {}), V{"a.com"});
  EXPECT_EQ(intersect_hostnames("", V{"a.com"}), V{"a.com"});
  EXPECT_EQ(intersect_hostnames("*.a.com", V{"*.a.com", "*.b.a.com", "*.com"}),
            (V{"*.a.com", "*.b.a.com"}));
  EXPECT_EQ(intersect_hostnames("x.a.com", V{"*.com"}), V{"x.a.com"});
  EXPECT_EQ(intersect_hostnames("a.com", V{"*.a.com"}), V{});
}

TEST(GatewayTranslateTest, ParseDuration) {
  using gateway::parse_duration;
  using std::chrono::milliseconds;
  EXPECT_EQ(parse_duration("1h30m"), milliseconds(5'400'000));
  EXPECT_EQ(parse_duration("500ms"), milliseconds(500));
  EXPECT_EQ(parse_duration("0s"), milliseconds(0));
  EXPECT_EQ(parse_duration("1s1s1s1s"), milliseconds(4000));
  EXPECT_EQ(parse_duration("1s1s1s1s1s"), std::nullopt);
  EXPECT_EQ(parse_duration("100000s"), std::nullopt);
  EXPECT_EQ(parse_duration("1.5s"), std::nullopt);
  EXPECT_EQ(parse_duration("10"), std::nullopt);
  EXPECT_EQ(parse_duration(""), std::nullopt);
}

TEST(GatewayTranslateTest, Precedence) {
  auto route = [&](const std::string& name, const std::string& created,
                   const std::string& matches) {
    return http_route(name,
                      "parentRefs: [{name: gw}]\nrules:\n- matches: " + matches +
                          "\n  backendRefs: [{name: " + name + ", port: 80}]\n",
                      "default", created);
  };
  std::vector<std::string> objects = {
      gateway_class(), gateway("gw", http_listener("http")), service("old", 80), service("new", 80),
      service("b", 80), service("a", 80),
      // Same path: the oldest route first; on equal age, namespace/name order.
      route("new", "2024-01-02T00:00:00Z", "[{path: {value: /x}}]"),
      route("old", "2024-01-01T00:00:00Z", "[{path: {value: /x}}]"),
      route("b", "2024-01-03T00:00:00Z", "[{path: {value: /x}}, {path: {value: /x}, method: GET}]"),
      route("a", "2024-01-03T00:00:00Z",
            "[{path: {value: /x}, headers: [{name: X-A, value: '1'}]}, {path: {type: Exact, "
            "value: /x}}]")};
  const std::vector<Case> cases = {
      {"Exact, then method, then more headers, then age, then name, then rule order",
       objects,
       {"*: Exact /x -> default/a:80", "*: Prefix /x GET -> default/b:80",
        "*: Prefix /x h:x-a=1 -> default/a:80", "*: Prefix /x -> default/old:80",
        "*: Prefix /x -> default/new:80", "*: Prefix /x -> default/b:80"}},
      {"an Ingress's host takes the Gateway routes too; Ingress routes first on a full tie",
       {gateway_class(), gateway("gw", http_listener("http")), service("web", 80),
        endpoints("web", 8080), service("api", 80),
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: ing}\nspec:\n  "
        "ingressClassName: tidegate\n  rules:\n  - host: a.com\n    http:\n      paths:\n      "
        "- {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n",
        http_route("r",
                   "parentRefs: [{name: gw}]\nhostnames: [a.com]\nrules:\n- backendRefs: [{name: "
                   "api, port: 80}]\n- matches: [{path: {value: /api}}]\n  backendRefs: [{name: "
                   "api, port: 80}]\n")},
       {"a.com: Prefix /api -> default/api:80", "a.com: Prefix / -> default/web:80",
        "a.com: Prefix / -> default/api:80"}},
  };
  for (const auto& c : cases) run(c);
}

TEST(GatewayTranslateTest, HttpsListeners) {
  const std::string https =
      "  - name: https\n    protocol: HTTPS\n    port: 443\n    hostname: a.com\n    tls:\n"
      "      certificateRefs: [{name: cert}]\n";
  const std::string https_any =
      "  - name: https\n    protocol: HTTPS\n    port: 443\n    tls:\n"
      "      certificateRefs: [{name: cert, namespace: certs}]\n";
  const std::string grant =
      "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {name: g, "
      "namespace: certs}\nspec:\n  from: [{group: gateway.networking.k8s.io, kind: Gateway, "
      "namespace: default}]\n  to: [{group: '', kind: Secret}]\n";
  auto hosts_route = http_route("web",
                                "parentRefs: [{name: gw}]\nhostnames: [b.com, '*.c.com']\nrules:\n"
                                "- backendRefs: [{name: web, port: 80}]\n");
  const std::vector<Case> cases = {
      {"the listener's certificate for its hostname",
       with_base({tls_secret("cert"), web_route()}, https),
       {"a.com: Prefix / -> default/web:80"},
       {"Gateway default/gw listener https: kinds=HTTPRoute,GRPCRoute attached=1 "
        "Accepted=True/Accepted Programmed=True/Programmed ResolvedRefs=True/ResolvedRefs "
        "Conflicted=False/NoConflicts"},
       {},
       [](const TranslateResult& r) {
         ASSERT_TRUE(r.config.tls_hosts.contains("a.com"));
         EXPECT_EQ(r.config.tls_hosts.at("a.com").certificate, "default/cert");
         EXPECT_TRUE(r.config.certificates.contains("default/cert"));
         EXPECT_FALSE(r.config.virtual_hosts.at("a.com").ssl_redirect);
       }},
      {"a listener without hostname: the certificate for the routes' hosts, with a grant",
       with_base({tls_secret("cert", "certs"), grant, hosts_route}, https_any),
       {"**.c.com: Prefix / -> default/web:80", "b.com: Prefix / -> default/web:80"},
       {},
       {},
       [](const TranslateResult& r) {
         EXPECT_EQ(r.config.tls_hosts.size(), 3u);
         EXPECT_EQ(r.config.tls_hosts.at("**.c.com").certificate, "certs/cert");
         EXPECT_EQ(r.config.tls_hosts.at("b.com").certificate, "certs/cert");
         // And every other name: the listener answers for any.
         EXPECT_EQ(r.config.tls_hosts.at("*").certificate, "certs/cert");
       }},
      // A listener whose certificate cannot be used is not programmed, but routes still attach
      // to it (attachedRoutes counts them, as the Gateway API asks); nothing is served.
      {"a Secret of another namespace without a ReferenceGrant: RefNotPermitted",
       with_base({tls_secret("cert", "certs"), hosts_route}, https_any),
       {},
       {"Gateway default/gw listener https: kinds=HTTPRoute,GRPCRoute attached=1 "
        "Accepted=True/Accepted Programmed=False/Invalid ResolvedRefs=False/RefNotPermitted "
        "Conflicted=False/NoConflicts",
        "Gateway default/gw: Accepted=True/Accepted Programmed=False/Invalid"},
       {E(kGw, "RefNotPermitted: Secret certs/cert is in another namespace")}},
      {"a missing Secret: InvalidCertificateRef",
       with_base({web_route()}, https),
       {},
       {"Gateway default/gw listener https: kinds=HTTPRoute,GRPCRoute attached=1 "
        "Accepted=True/Accepted Programmed=False/Invalid ResolvedRefs=False/InvalidCertificateRef "
        "Conflicted=False/NoConflicts"},
       {E(kGw, "InvalidCertificateRef: Secret default/cert not found")}},
      {"an unknown route kind on an HTTPS listener leaves it its certificate (InvalidRouteKinds)",
       with_base(
           {tls_secret("cert"), web_route()},
           https + "    allowedRoutes:\n      kinds: [{kind: HTTPRoute}, {kind: TLSRoute}]\n"),
       {"a.com: Prefix / -> default/web:80"},
       {"Gateway default/gw listener https: kinds=HTTPRoute attached=1 "
        "Accepted=True/Accepted Programmed=True/Programmed ResolvedRefs=False/InvalidRouteKinds "
        "Conflicted=False/NoConflicts"},
       {E(kGw, "InvalidRouteKinds: route kind gateway.networking.k8s.io/TLSRoute")},
       [](const TranslateResult& r) {
         ASSERT_TRUE(r.config.tls_hosts.contains("a.com"));
         EXPECT_EQ(r.config.tls_hosts.at("a.com").certificate, "default/cert");
       }},
      {"an HTTP and an HTTPS listener: one host, served on both ports",
       with_base({tls_secret("cert"), web_route()},
                 http_listener("http", "hostname: a.com") + https),
       {"a.com: Prefix / -> default/web:80"},
       {"Gateway default/gw listener http: kinds=HTTPRoute,GRPCRoute attached=1 "
        "Accepted=True/Accepted Programmed=True/Programmed ResolvedRefs=True/ResolvedRefs "
        "Conflicted=False/NoConflicts"}},
  };
  for (const auto& c : cases) run(c);
}

// Determinism beyond reversal: every rotation of the input gives the same result.
TranslateOptions per_gateway(uint16_t from = 20000, uint16_t to = 20999) {
  TranslateOptions o;
  o.gateway_listener_ports_from = from;
  o.gateway_listener_ports_to = to;
  return o;
}

// One address per Gateway (--gateway-listener-ports): each Gateway port is a listener of its own.
TEST(GatewayTranslateTest, PerGatewayListeners) {
  auto route_to = [](const std::string& name, const std::string& gw, const std::string& svc,
                     const std::string& extra = "") {
    return http_route(name, "parentRefs: [{name: " + gw + "}]\n" + extra +
                                "rules:\n- backendRefs: [{name: " + svc + ", port: 80}]\n");
  };
  const std::vector<std::string> two = {gateway_class(),
                                        gateway("gw-a", http_listener("http")),
                                        gateway("gw-b", http_listener("http")),
                                        service("a", 80, "default", 1),
                                        endpoints("a", 8080, "default", 1),
                                        service("b", 80, "default", 2),
                                        endpoints("b", 8080, "default", 2),
                                        route_to("ra", "gw-a", "a"),
                                        route_to("rb", "gw-b", "b")};
  const std::string https =
      "  - name: https\n    protocol: HTTPS\n    port: 8443\n    hostname: a.com\n    tls:\n"
      "      certificateRefs: [{name: cert}]\n";
  const std::vector<Case> cases = {
      {"two Gateways on port 80 without hostnames: one catch-all host each, on its own listener",
       two,
       {"default/gw-a:80 *: Prefix / -> default/a:80",
        "default/gw-b:80 *: Prefix / -> default/b:80"},
       {"Gateway default/gw-a: Accepted=True/Accepted Programmed=True/Programmed",
        "Gateway default/gw-b: Accepted=True/Accepted Programmed=True/Programmed",
        "HTTPRoute default/ra parent default/gw-a: Accepted=True/Accepted "
        "ResolvedRefs=True/ResolvedRefs"},
       {},
       [](const TranslateResult& r) {
         ASSERT_EQ(r.config.listeners.size(), 2u);
         const auto& a = r.config.listeners.at("default/gw-a:80");
         const auto& b = r.config.listeners.at("default/gw-b:80");
         EXPECT_FALSE(a.tls);
         EXPECT_GE(a.port, 20000);
         EXPECT_LE(a.port, 20999);
         EXPECT_GE(b.port, 20000);
         EXPECT_LE(b.port, 20999);
         EXPECT_NE(a.port, b.port);
         ASSERT_EQ(r.gateway_status.services.size(), 2u);
         const auto& sa = r.gateway_status.services.at("default/gw-a");
         EXPECT_EQ(sa.namespace_, "default");
         EXPECT_EQ(sa.name, "gw-a");
         EXPECT_EQ(sa.ports, (std::vector<gateway::GatewayServicePort>{{"http-80", 80, a.port}}));
         EXPECT_TRUE(r.config.tls_hosts.empty());
       },
       per_gateway()},
      {"a listener's data plane port depends on its name only, not on the other Gateways",
       {gateway_class(), gateway("gw-a", http_listener("http")), service("a", 80, "default", 1),
        endpoints("a", 8080, "default", 1), route_to("ra", "gw-a", "a")},
       {"default/gw-a:80 *: Prefix / -> default/a:80"},
       {},
       {},
       [two](const TranslateResult& r) {
         TranslateResult both = translate(load(two, per_gateway()), per_gateway());
         EXPECT_EQ(r.config.listeners.at("default/gw-a:80"),
                   both.config.listeners.at("default/gw-a:80"));
       },
       per_gateway()},
      {"any port is accepted, and the Ingress default backend does not answer for a Gateway",
       {gateway_class(), gateway("gw-a", http_listener("alt", "", 8080)),
        service("a", 80, "default", 1), endpoints("a", 8080, "default", 1),
        route_to("ra", "gw-a", "a", "hostnames: [x.com]\n")},
       {"default/gw-a:8080 x.com: Prefix / -> default/a:80"},
       {"Gateway default/gw-a listener alt: kinds=HTTPRoute,GRPCRoute attached=1 "
        "Accepted=True/Accepted Programmed=True/Programmed ResolvedRefs=True/ResolvedRefs "
        "Conflicted=False/NoConflicts"},
       {},
       [](const TranslateResult& r) {
         EXPECT_EQ(r.gateway_status.services.at("default/gw-a").ports.at(0).port, 8080);
         EXPECT_EQ(r.gateway_status.services.at("default/gw-a").ports.at(0).name, "http-8080");
       },
       per_gateway()},
      {"an HTTPS port: a TLS listener and its certificate scoped to it",
       {gateway_class(), gateway("gw-a", https), tls_secret("cert"), service("a", 80, "default", 1),
        endpoints("a", 8080, "default", 1), route_to("ra", "gw-a", "a")},
       {"default/gw-a:8443 a.com: Prefix / -> default/a:80"},
       {},
       {},
       [](const TranslateResult& r) {
         ASSERT_TRUE(r.config.listeners.contains("default/gw-a:8443"));
         EXPECT_TRUE(r.config.listeners.at("default/gw-a:8443").tls);
         ASSERT_EQ(r.config.tls_hosts.size(), 1u);
         const auto& [key, th] = *r.config.tls_hosts.begin();
         EXPECT_EQ(key, "default/gw-a:8443 a.com");
         EXPECT_EQ(th.listener, "default/gw-a:8443");
         EXPECT_EQ(th.certificate, "default/cert");
       },
       per_gateway()},
      {"listener isolation: a name goes to the narrowest listener of the port, routes or not",
       {gateway_class(),
        gateway("gw-a", http_listener("any") +
                            http_listener("wild", "hostname: '*.example.com'\n") +
                            http_listener("foo", "hostname: '*.foo.example.com'\n") +
                            http_listener("abc", "hostname: abc.foo.example.com\n")),
        service("a", 80, "default", 1), endpoints("a", 8080, "default", 1),
        http_route("on-any",
                   "parentRefs: [{name: gw-a, sectionName: any}]\n"
                   "hostnames: [bar.com, '*.example.com', '*.foo.example.com']\n"
                   "rules:\n- matches: [{path: {type: PathPrefix, value: /any}}]\n"
                   "  backendRefs: [{name: a, port: 80}]\n"),
        http_route("on-wild",
                   "parentRefs: [{name: gw-a, sectionName: wild}]\n"
                   "hostnames: [bar.com, '*.example.com', abc.foo.example.com]\n"
                   "rules:\n- matches: [{path: {type: PathPrefix, value: /wild}}]\n"
                   "  backendRefs: [{name: a, port: 80}]\n")},
       {"default/gw-a:80 **.example.com: Prefix /wild -> default/a:80",
        "default/gw-a:80 bar.com: Prefix /any -> default/a:80"},
       {"HTTPRoute default/on-any parent default/gw-a/any: Accepted=True/Accepted "
        "ResolvedRefs=True/ResolvedRefs",
        "HTTPRoute default/on-wild parent default/gw-a/wild: Accepted=True/Accepted "
        "ResolvedRefs=True/ResolvedRefs"},
       {},
       [](const TranslateResult& r) {
         // The narrower listeners' names are hosts of their own, without these routes.
         for (const char* key :
              {"default/gw-a:80 **.foo.example.com", "default/gw-a:80 abc.foo.example.com"}) {
           ASSERT_TRUE(r.config.virtual_hosts.contains(key)) << key;
           EXPECT_TRUE(r.config.virtual_hosts.at(key).routes.empty()) << key;
         }
       },
       per_gateway()},
      {"no port left in the range: the listener is reported and not served",
       two,
       {"default/gw-a:80 *: Prefix / -> default/a:80"},
       {},
       {E("Gateway API",
          "no data plane port left in --gateway-listener-ports for listener "
          "default/gw-b:80")},
       [](const TranslateResult& r) {
         EXPECT_EQ(r.config.listeners.size(), 1u);
         EXPECT_EQ(r.config.listeners.at("default/gw-a:80").port, 20000);
         EXPECT_FALSE(r.gateway_status.services.contains("default/gw-b"));
         auto lines = status_lines(r.gateway_status);
         EXPECT_NE(std::find(lines.begin(), lines.end(),
                             "Gateway default/gw-b listener http: kinds=HTTPRoute,GRPCRoute "
                             "attached=1 Accepted=True/Accepted Programmed=False/Invalid "
                             "ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts"),
                   lines.end());
       },
       per_gateway(20000, 20000)},
  };
  for (const auto& c : cases) run(c);
}

TEST(GatewayTranslateTest, InputOrderDoesNotMatter) {
  std::vector<std::string> objects = with_base(
      {tls_secret("cert"), web_route("hostnames: [a.com]\n"),
       http_route("api",
                  "parentRefs: [{name: gw}]\nrules:\n- matches: [{path: {value: /api}}]\n  "
                  "backendRefs: [{name: web, port: 80, weight: 2}, {name: nope, port: 80}]\n")},
      http_listener("http") +
          "  - {name: https, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: "
          "cert}]}}\n");
  TranslateOptions options;
  std::optional<TranslateResult> first;
  for (size_t i = 0; i < objects.size(); ++i) {
    std::rotate(objects.begin(), objects.begin() + 1, objects.end());
    TranslateResult got = translate(load(objects, options), options);
    EXPECT_EQ(model::validate(got.config), std::vector<std::string>{});
    if (!first) {
      first = std::move(got);
      continue;
    }
    EXPECT_EQ(got.config, first->config);
    EXPECT_EQ(got.diagnostics, first->diagnostics);
    EXPECT_EQ(got.gateway_status, first->gateway_status);
  }
  EXPECT_EQ(first->config.virtual_hosts.size(), 2u);
}

TEST(GatewayTranslateTest, RouteHostsFallThroughUpToTheirListenersHostname) {
  // Listener "wide" (*.example.com) and "narrow" (foo.example.com) share port 80: a route host
  // falls through to less specific hosts (its listener's rules ordered by hostname first); a
  // listener's own hostname ends the chain, so foo.example.com never reaches "wide"'s rules.
  auto route = [](const std::string& name, const std::string& section, const std::string& hostnames,
                  const std::string& path) {
    return http_route(name, "parentRefs: [{name: gw, sectionName: " + section + "}]\nhostnames: " +
                                hostnames + "\nrules:\n- matches: [{path: {value: " + path +
                                "}}]\n  backendRefs: [{name: web, port: 80}]\n");
  };
  for (const auto& options : {TranslateOptions{}, per_gateway()}) {
    const std::string prefix = options.per_gateway_listeners() ? "default/gw:80 " : "";
    const Case c{
        "route hosts fall through, listener hostnames do not",
        with_base({route("specific", "wide", "[a.example.com]", "/b"),
                   route("general", "wide", "[]", "/"), route("own", "narrow", "[]", "/n")},
                  http_listener("wide", "hostname: '*.example.com'") +
                      http_listener("narrow", "hostname: foo.example.com")),
        {prefix + "**.example.com: Prefix / -> default/web:80",
         prefix + "a.example.com: Prefix /b -> default/web:80",
         prefix + "foo.example.com: Prefix /n -> default/web:80"},
        {},
        {},
        [prefix](const TranslateResult& r) {
          auto falls = [&](const std::string& host) {
            for (const auto& [key, vh] : r.config.virtual_hosts) {
              if (vh.host == host) return vh.falls_through;
            }
            ADD_FAILURE() << "no host " << host;
            return false;
          };
          EXPECT_TRUE(falls("a.example.com"));
          EXPECT_FALSE(falls("**.example.com"));
          EXPECT_FALSE(falls("foo.example.com"));
        },
        options};
    run(c);
  }
  // The wide listener has no route of its own: its hostname still ends the chain (a host of
  // its own, without routes: 404), so a.example.com/c never reaches the catch-all "*" of
  // another listener (in per-Gateway mode every listener hostname has its host anyway).
  for (const auto& options : {TranslateOptions{}, per_gateway()}) {
    const std::string prefix = options.per_gateway_listeners() ? "default/gw:80 " : "";
    const Case c{
        "a route host's fall-through stops at its listener's hostname",
        with_base(
            {route("specific", "wide", "[a.example.com]", "/b"), route("catch", "any", "[]", "/")},
            http_listener("wide", "hostname: '*.example.com'") + http_listener("any", "")),
        {prefix + "*: Prefix / -> default/web:80",
         prefix + "a.example.com: Prefix /b -> default/web:80"},
        {},
        {},
        [](const TranslateResult& r) {
          const model::VirtualHost* wide = nullptr;
          const model::VirtualHost* specific = nullptr;
          for (const auto& [key, vh] : r.config.virtual_hosts) {
            if (vh.host == "**.example.com") wide = &vh;
            if (vh.host == "a.example.com") specific = &vh;
          }
          ASSERT_NE(wide, nullptr);
          ASSERT_NE(specific, nullptr);
          EXPECT_TRUE(wide->routes.empty());
          EXPECT_FALSE(wide->falls_through);
          EXPECT_TRUE(specific->falls_through);
        },
        options};
    run(c);
  }
}

TEST(GatewayTranslateTest, ARedirectWithoutPortGoesToEachListenersOwnPort) {
  // One route through listeners on ports 80 and 8080: with listeners of their own, each copy of
  // the route redirects to its listener's port (the spec).
  const std::string route =
      http_route("moved",
                 "parentRefs: [{name: gw}]\nhostnames: [old.example.com]\nrules:\n"
                 "- filters:\n  - type: RequestRedirect\n    requestRedirect: {hostname: "
                 "new.example.com}\n");
  const std::string listeners = http_listener("http") + http_listener("alt", "", 8080);
  TranslateResult r = translate(load(with_base({route}, listeners), per_gateway()), per_gateway());
  std::map<std::string, int> port_by_listener;
  for (const auto& [key, vh] : r.config.virtual_hosts) {
    if (vh.host != "old.example.com") continue;
    ASSERT_EQ(vh.routes.size(), 1u) << key;
    ASSERT_TRUE(vh.routes[0].policy->request_redirect) << key;
    port_by_listener[vh.listener] = vh.routes[0].policy->request_redirect->port;
  }
  EXPECT_EQ(port_by_listener,
            (std::map<std::string, int>{{"default/gw:80", 80}, {"default/gw:8080", 8080}}));
}

}  // namespace
}  // namespace tidegate::controller::translate::gateway_table
