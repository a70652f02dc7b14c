// Table tests for the translator: each case is {name, objects as YAML, want config, want
// diagnostics}. Every case also checks that the result passes model::validate and that it does not
// depend on the order in which the objects were loaded.

#include "translate/translate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "objects/objects.h"
#include "source/manifest_loader.h"
#include "store/store.h"

namespace tidegate::controller::translate {
namespace {

using model::PathMatch;

// ---- Builders for input objects (YAML text) ----

// Single-quoted YAML: no escapes to worry about in regexes, only '' for a quote.
std::string maybe_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

struct PathSpec {
  std::string path;  // empty: omitted
  std::string type;
  std::string service;
  std::string port;  // digits: port.number, else port.name
};

PathSpec path(std::string p, std::string type, std::string service, std::string port) {
  return {std::move(p), std::move(type), std::move(service), std::move(port)};
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string backend_yaml(const std::string& service, const std::string& port, int indent) {
  std::string pad(indent, ' ');
  std::string out = pad + "service:\n" + pad + "  name: " + service + "\n" + pad + "  port:\n";
  out += pad + "    " + (all_digits(port) ? "number: " + port : "name: " + port) + "\n";
  return out;
}

class IngressYaml {
 public:
  explicit IngressYaml(std::string name, std::string ns = "default")
      : name_(std::move(name)), ns_(std::move(ns)) {}
  IngressYaml& class_name(std::string c) {
    class_ = std::move(c);
    return *this;
  }
  IngressYaml& no_class() {
    class_.reset();
    return *this;
  }
  IngressYaml& annotation(const std::string& k, const std::string& v) {
    annotations_[k] = v;
    return *this;
  }
  IngressYaml& created(std::string ts) {
    created_ = std::move(ts);
    return *this;
  }
  IngressYaml& default_backend(std::string service, std::string port) {
    default_backend_ = {std::move(service), std::move(port)};
    return *this;
  }
  IngressYaml& resource_default_backend() {
    resource_default_ = true;
    return *this;
  }
  IngressYaml& rule(std::string host, std::vector<PathSpec> paths) {
    rules_.push_back({std::move(host), std::move(paths)});
    return *this;
  }
  IngressYaml& tls(std::string host, std::string secret) {
    tls_.emplace_back(std::move(host), std::move(secret));
    return *this;
  }

  operator std::string() const {
    std::ostringstream o;
    o << "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: " << name_
      << "\n  namespace: " << ns_ << "\n";
    if (!created_.empty()) o << "  creationTimestamp: \"" << created_ << "\"\n";
    if (!annotations_.empty()) {
      o << "  annotations:\n";
      for (const auto& [k, v] : annotations_) {
        if (v.find('\n') == std::string::npos) {
          o << "    " << k << ": " << maybe_quote(v) << "\n";
          continue;
        }
        // A literal block keeps line breaks (a YAML list in block style, say).
        o << "    " << k << ": |\n";
        std::istringstream lines(v);
        for (std::string line; std::getline(lines, line);) o << "      " << line << "\n";
      }
    }
    o << "spec:\n";
    if (class_) o << "  ingressClassName: " << *class_ << "\n";
    if (default_backend_) {
      o << "  defaultBackend:\n"
        << backend_yaml(default_backend_->first, default_backend_->second, 4);
    }
    if (resource_default_) {
      o << "  defaultBackend:\n    resource:\n      apiGroup: k8s.example.com\n"
        << "      kind: StorageBucket\n      name: assets\n";
    }
    if (!rules_.empty()) o << "  rules:\n";
    for (const auto& r : rules_) {
      o << "  - ";
      if (!r.host.empty()) o << "host: " << maybe_quote(r.host) << "\n    ";
      o << "http:\n      paths:\n";
      for (const auto& p : r.paths) {
        o << "      - pathType: " << p.type << "\n";
        if (!p.path.empty()) o << "        path: " << maybe_quote(p.path) << "\n";
        o << "        backend:\n" << backend_yaml(p.service, p.port, 10);
      }
    }
    if (!tls_.empty()) o << "  tls:\n";
    for (const auto& [host, secret] : tls_) {
      o << "  - hosts: [" << maybe_quote(host) << "]\n    secretName: " << secret << "\n";
    }
    return o.str();
  }

 private:
  struct Rule {
    std::string host;
    std::vector<PathSpec> paths;
  };
  std::string name_;
  std::string ns_;
  std::optional<std::string> class_ = "tidegate";
  std::map<std::string, std::string> annotations_;
  std::string created_;
  std::optional<std::pair<std::string, std::string>> default_backend_;
  bool resource_default_ = false;
  std::vector<Rule> rules_;
  std::vector<std::pair<std::string, std::string>> tls_;
};

IngressYaml ingress(std::string name, std::string ns = "default") {
  return IngressYaml(std::move(name), std::move(ns));
}

std::string ingress_class(const std::string& name, const std::string& controller,
                          bool is_default = false) {
  std::string out =
      "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: " + name + "\n";
  if (is_default) {
    out += "  annotations:\n    ingressclass.kubernetes.io/is-default-class: \"true\"\n";
  }
  return out + "spec:\n  controller: " + controller + "\n";
}

struct SvcPort {
  std::string name;  // empty: omitted
  int port;
  std::string target;  // empty: omitted (defaults to port)
  std::string protocol = "";
  std::string app_protocol = "";  // empty: omitted
};

std::string service(const std::string& name, std::vector<SvcPort> ports,
                    const std::string& ns = "default", const std::string& type = "") {
  std::ostringstream o;
  o << "apiVersion: v1\nkind: Service\nmetadata:\n  name: " << name << "\n  namespace: " << ns
    << "\nspec:\n";
  if (!type.empty()) o << "  type: " << type << "\n";
  o << "  ports:\n";
  for (const auto& p : ports) {
    o << "  - port: " << p.port << "\n";
    if (!p.name.empty()) o << "    name: " << p.name << "\n";
    if (!p.target.empty()) o << "    targetPort: " << p.target << "\n";
    if (!p.protocol.empty()) o << "    protocol: " << p.protocol << "\n";
    if (!p.app_protocol.empty()) o << "    appProtocol: " << p.app_protocol << "\n";
  }
  return o.str();
}

// The common Service: port 80 named "http", target 8080.
std::string web_service(const std::string& name = "web", const std::string& ns = "default") {
  return service(name, {{"http", 80, "8080"}}, ns);
}

struct Ep {
  std::string address;
  std::optional<bool> ready = std::nullopt;
  std::optional<bool> serving = std::nullopt;
  std::optional<bool> terminating = std::nullopt;
};

Ep not_ready(std::string address) { return {std::move(address), false, false, false}; }
Ep draining(std::string address) { return {std::move(address), false, true, true}; }

struct SlicePort {
  std::string name;  // empty: omitted
  int port;
};

std::string slice(const std::string& name, const std::string& service_name, std::vector<Ep> eps,
                  std::vector<SlicePort> ports, const std::string& address_type = "IPv4",
                  const std::string& ns = "default") {
  std::ostringstream o;
  o << "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: " << name
    << "\n  namespace: " << ns << "\n  labels:\n    kubernetes.io/service-name: " << service_name
    << "\naddressType: " << address_type << "\nendpoints:\n";
  auto b = [](bool v) { return v ? "true" : "false"; };
  for (const auto& e : eps) {
    o << "- addresses: [\"" << e.address << "\"]\n";
    if (e.ready || e.serving || e.terminating) {
      o << "  conditions:\n";
      if (e.ready) o << "    ready: " << b(*e.ready) << "\n";
      if (e.serving) o << "    serving: " << b(*e.serving) << "\n";
      if (e.terminating) o << "    terminating: " << b(*e.terminating) << "\n";
    }
  }
  o << "ports:\n";
  for (const auto& p : ports) {
    o << "- port: " << p.port << "\n  protocol: TCP\n";
    if (!p.name.empty()) o << "  name: " << p.name << "\n";
  }
  return o.str();
}

// Endpoints for web_service(): one ready pod per address, on 8080.
std::string web_slice(std::vector<Ep> eps, const std::string& service_name = "web",
                      const std::string& ns = "default") {
  return slice(service_name + "-abc", service_name, std::move(eps), {{"http", 8080}}, "IPv4", ns);
}

// ---- Builders for the wanted model ----

model::Route route(std::string p, PathMatch m, std::string upstream,
                   std::string ingress = "default/web") {
  return model::Route{std::move(p), m, std::move(upstream), std::move(ingress)};
}

// Routes in precedence order as the model defines it: the translator must sort them the same way.
// Cases list them in another order where they can, so that an unsorted result fails.
model::VirtualHost vhost(std::string host, std::vector<model::Route> routes) {
  model::sort_routes(routes);
  return model::VirtualHost{std::move(host), std::move(routes)};
}

// Endpoints as "10.0.0.1:8080" or "[fd00::1]:8080".
model::Upstream upstream(std::string name, std::vector<std::string> endpoints = {}) {
  model::Upstream u{std::move(name), {}};
  for (const auto& e : endpoints) {
    size_t colon = e.rfind(':');
    std::string address = e.substr(0, colon);
    if (address.starts_with('[')) address = address.substr(1, address.size() - 2);
    u.endpoints.push_back({address, static_cast<uint16_t>(std::stoi(e.substr(colon + 1)))});
  }
  return u;
}

model::Config config(std::vector<model::VirtualHost> hosts, std::vector<model::Upstream> upstreams,
                     std::optional<model::Route> default_route = std::nullopt) {
  model::Config c;
  for (auto& h : hosts) c.virtual_hosts.emplace(h.host, std::move(h));
  for (auto& u : upstreams) c.upstreams.emplace(u.name, std::move(u));
  c.default_route = std::move(default_route);
  return c;
}

struct WantDiag {
  std::string object;
  Severity severity;
  std::string message_contains;
};

WantDiag error(std::string object, std::string contains) {
  return {std::move(object), Severity::kError, std::move(contains)};
}
WantDiag warning(std::string object, std::string contains) {
  return {std::move(object), Severity::kWarning, std::move(contains)};
}

// ---- Running and printing ----

std::string dump(const model::Config& c) {
  std::ostringstream o;
  for (const auto& [host, vh] : c.virtual_hosts) {
    o << "host " << host << "\n";
    for (const auto& r : vh.routes) {
      o << "  " << model::to_string(r.match) << " " << r.path << " -> " << r.upstream << " ("
        << r.ingress << ")";
      if (!r.substitution.empty()) o << " substitution " << r.substitution;
      if (!r.policy.is_default()) o << " policy " << model::to_json(*r.policy).dump();
      if (r.canary) o << " canary " << model::to_json(*r.canary).dump();
      o << "\n";
    }
  }
  for (const auto& [name, u] : c.upstreams) {
    o << "upstream " << name << ":";
    for (const auto& e : u.endpoints) o << " " << e.address << ":" << e.port;
    if (u.tls.enabled) o << " tls " << u.tls.server_name << (u.tls.ca_pem.empty() ? "" : " +ca");
    if (!u.policy.is_default()) o << " policy " << model::to_json(*u.policy).dump();
    o << "\n";
  }
  if (c.default_route) {
    o << "default -> " << c.default_route->upstream << " (" << c.default_route->ingress << ")";
    if (!c.default_route->substitution.empty()) {
      o << " substitution " << c.default_route->substitution;
    }
    o << "\n";
  }
  for (const auto& [name, sub] : c.substitutions) {
    o << "substitution " << name << " max_buffer " << sub.max_buffer << " types";
    for (const auto& t : sub.mime_types) o << " " << t;
    o << "\n";
    for (const auto& r : sub.rules) {
      o << "  {" << r.match << "} -> {" << r.replace << "} flags {" << r.flags << "}\n";
    }
  }
  return o.str();
}

std::string dump(const std::vector<Diagnostic>& diags) {
  std::string out;
  for (const auto& d : diags) out += "  " + to_string(d) + "\n";
  return out;
}

std::string join_documents(const std::vector<std::string>& docs) {
  std::string text;
  for (const auto& d : docs) text += "---\n" + d;
  return text;
}

store::Store load_store(const std::vector<std::string>& docs, const TranslateOptions& options) {
  auto loaded = source::load_manifest_text(join_documents(docs), "case.yaml");
  for (const auto& e : loaded.errors) ADD_FAILURE() << "fixture does not load: " << e.message;
  return store::build_store(
      loaded, {options.ingress_class, options.controller_name, options.default_backend_service});
}

struct Case {
  std::string name;
  std::vector<std::string> objects;
  model::Config want;
  std::vector<WantDiag> want_diagnostics = {};
  TranslateOptions options = {};
};

void run_case(const Case& c) {
  SCOPED_TRACE(c.name);
  TranslateResult got = translate(load_store(c.objects, c.options), c.options);
  EXPECT_EQ(got.config, c.want) << "got:\n" << dump(got.config) << "want:\n" << dump(c.want);
  EXPECT_EQ(model::validate(got.config), std::vector<std::string>{});

  bool diags_match = got.diagnostics.size() == c.want_diagnostics.size();
  for (size_t i = 0; diags_match && i < got.diagnostics.size(); ++i) {
    const auto& g = got.diagnostics[i];
    const auto& w = c.want_diagnostics[i];
    diags_match = g.object == w.object && g.severity == w.severity &&
                  g.message.find(w.message_contains) != std::string::npos;
  }
  if (!diags_match) {
    std::string want;
    for (const auto& w : c.want_diagnostics) {
      want += std::string("  ") + to_string(w.severity) + ": " + w.object + ": ..." +
              w.message_contains + "...\n";
    }
    ADD_FAILURE() << "diagnostics differ; got:\n" << dump(got.diagnostics) << "want:\n" << want;
  }

  // Determinism: loading the same objects in the reverse order changes nothing.
  std::vector<std::string> reversed(c.objects.rbegin(), c.objects.rend());
  TranslateResult again = translate(load_store(reversed, c.options), c.options);
  EXPECT_EQ(again.config, got.config);
  EXPECT_EQ(again.diagnostics, got.diagnostics);

  // Nor does building the upstreams on a second thread, beside the virtual hosts (done from
  // TranslateOptions::upstreams_beside_from upstreams on; here for every case).
  TranslateOptions beside = c.options;
  beside.upstreams_beside_from = 0;
  TranslateResult threaded = translate(load_store(c.objects, c.options), beside);
  EXPECT_EQ(threaded.config, got.config);
  EXPECT_EQ(threaded.diagnostics, got.diagnostics);
  EXPECT_EQ(threaded.fail_closed_upstreams, got.fail_closed_upstreams);
  EXPECT_EQ(threaded.service_ip_upstreams, got.service_ip_upstreams);
}

void run_cases(const std::vector<Case>& cases) {
  for (const auto& c : cases) run_case(c);
}

const std::string kWebUp = "default/web:80";

// ---- Which Ingresses ----

TEST(TranslateTest, IngressClassSelection) {
  auto web_rule = [](IngressYaml ing) {
    return std::string(ing.rule("foo.com", {path("/", "Prefix", "web", "80")}));
  };
  const model::Config served = config({vhost("foo.com", {route("/", PathMatch::kPrefix, kWebUp)})},
                                      {upstream(kWebUp, {"10.0.0.1:8080"})});
  const std::vector<std::string> backend = {web_service(), web_slice({{"10.0.0.1"}})};
  auto with_backend = [&](std::vector<std::string> objects) {
    objects.insert(objects.end(), backend.begin(), backend.end());
    return objects;
  };

  run_cases({
      {"spec.ingressClassName is ours", with_backend({web_rule(ingress("web"))}), served},
      {"spec.ingressClassName is another class: silently ignored",
       with_backend({web_rule(ingress("web").class_name("nginx"))}), config({}, {})},
      {"legacy annotation names our class",
       with_backend({web_rule(
           ingress("web").no_class().annotation("kubernetes.io/ingress.class", "tidegate"))}),
       served},
      {"legacy annotation names another class",
       with_backend({web_rule(
           ingress("web").no_class().annotation("kubernetes.io/ingress.class", "nginx"))}),
       config({}, {})},
      {"spec.ingressClassName wins over the annotation",
       with_backend({web_rule(ingress("web").class_name("nginx").annotation(
           "kubernetes.io/ingress.class", "tidegate"))}),
       config({}, {})},
      {"no class and no default IngressClass", with_backend({web_rule(ingress("web").no_class())}),
       config({}, {})},
      {"no class, our IngressClass is the default",
       with_backend({web_rule(ingress("web").no_class()),
                     ingress_class("tidegate", "tidegate.io/ingress-controller", true)}),
       served},
      {"no class, our IngressClass exists but is not the default",
       with_backend({web_rule(ingress("web").no_class()),
                     ingress_class("tidegate", "tidegate.io/ingress-controller", false)}),
       config({}, {})},
      {"no class, the default IngressClass is another controller's",
       with_backend({web_rule(ingress("web").no_class()),
                     ingress_class("nginx", "k8s.io/ingress-nginx", true)}),
       config({}, {})},
      {"our IngressClass object confirms the class",
       with_backend(
           {web_rule(ingress("web")), ingress_class("tidegate", "tidegate.io/ingress-controller")}),
       served},
      {"our class name belongs to another controller: ignored with a warning",
       with_backend({web_rule(ingress("web")), ingress_class("tidegate", "example.com/other")}),
       config({}, {}),
       {warning("Ingress default/web", "belongs to controller \"example.com/other\"")}},
      {"the same through the legacy annotation",
       with_backend({web_rule(ingress("web").no_class().annotation("kubernetes.io/ingress.class",
                                                                   "tidegate")),
                     ingress_class("tidegate", "example.com/other")}),
       config({}, {}),
       {warning("Ingress default/web", "ignored")}},
      {"options choose another class and controller",
       with_backend({web_rule(ingress("web").class_name("internal")), web_rule(ingress("other")),
                     ingress_class("internal", "example.com/tidegate-internal")}),
       config({vhost("foo.com", {route("/", PathMatch::kPrefix, kWebUp)})},
              {upstream(kWebUp, {"10.0.0.1:8080"})}),
       {},
       TranslateOptions{"internal", "example.com/tidegate-internal"}},
  });
}

// ---- Hosts ----

TEST(TranslateTest, Hosts) {
  const std::vector<std::string> backend = {web_service(), web_slice({{"10.0.0.1"}})};
  auto objects = [&](std::string ing) {
    std::vector<std::string> out = backend;
    out.push_back(std::move(ing));
    return out;
  };
  auto up = std::vector<model::Upstream>{upstream(kWebUp, {"10.0.0.1:8080"})};
  auto root = [](std::string ingress = "default/web") {
    return std::vector<model::Route>{route("/", PathMatch::kPrefix, kWebUp, std::move(ingress))};
  };

  run_cases({
      {"rule without host serves any host",
       objects(ingress("web").rule("", {path("/", "Prefix", "web", "80")})),
       config({vhost("*", root())}, up)},
      {"host is lowercased",
       objects(ingress("web").rule("Foo.Example.COM", {path("/", "Prefix", "web", "80")})),
       config({vhost("foo.example.com", root())}, up)},
      {"wildcard host kept as written",
       objects(ingress("web").rule("*.example.com", {path("/", "Prefix", "web", "80")})),
       config({vhost("*.example.com", root())}, up)},
      {"invalid host: that rule dropped, the others kept",
       objects(ingress("web")
                   .rule("bad_host.example.com", {path("/", "Prefix", "web", "80")})
                   .rule("ok.example.com", {path("/", "Prefix", "web", "80")})),
       config({vhost("ok.example.com", root())}, up),
       {error("Ingress default/web", "spec.rules[0].host: invalid host \"bad_host.example.com\"")}},
      {"wildcard in the middle is invalid",
       objects(ingress("web").rule("foo.*.com", {path("/", "Prefix", "web", "80")})),
       config({}, {}),
       {error("Ingress default/web", "invalid host \"foo.*.com\"; rule dropped")}},
      {"two rules for one host merge",
       objects(ingress("web")
                   .rule("foo.com", {path("/a", "Prefix", "web", "80")})
                   .rule("FOO.com", {path("/b", "Exact", "web", "80")})),
       config({vhost("foo.com", {route("/a", PathMatch::kPrefix, kWebUp),
                                 route("/b", PathMatch::kExact, kWebUp)})},
              up)},
      {"a TLS entry whose Secret is missing is reported; the host still routes",
       objects(ingress("web")
                   .rule("foo.com", {path("/", "Prefix", "web", "80")})
                   .tls("foo.com", "foo-cert")),
       config({vhost("foo.com", root())}, up),
       {error("Ingress default/web", "spec.tls[0]: Secret default/foo-cert not found")}},
  });
}

// ---- Host-level annotations: force-ssl-redirect, from-to-www-redirect, server-alias ----

// A self-signed certificate and its key (test data, generated with the openssl CLI).
const std::string kHostCertPem =
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
const std::string kHostKeyPem =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg+9zubm4CwlYc9FBu\n"
    "DJurdCsUUh49nD2LqivPdm11lWKhRANCAASEOK95S8NTHjLjHXsTrBTIzwp1/LlK\n"
    "3LRDO6VnnTCoe3RndG/Rp64OGvVGqemMCznKkYflefj2NPfsHUFuKSSW\n"
    "-----END PRIVATE KEY-----\n";

std::string host_tls_secret(const std::string& name) {
  std::ostringstream o;
  o << "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " << name
    << "\n  namespace: default\ntype: kubernetes.io/tls\nstringData:\n";
  for (const auto& [k, v] : {std::pair{"tls.crt", &kHostCertPem}, {"tls.key", &kHostKeyPem}}) {
    o << "  " << k << ": |\n";
    std::istringstream lines(*v);
    for (std::string line; std::getline(lines, line);) o << "    " << line << "\n";
  }
  return o.str();
}

TEST(TranslateTest, HostAnnotations) {
  const std::vector<std::string> backend = {web_service(), web_slice({{"10.0.0.1"}})};
  auto objects = [&](std::vector<std::string> more) {
    std::vector<std::string> out = backend;
    out.insert(out.end(), more.begin(), more.end());
    return out;
  };
  auto up = std::vector<model::Upstream>{upstream(kWebUp, {"10.0.0.1:8080"})};
  auto root = [](std::string p = "/", std::string ingress = "default/web") {
    return route(std::move(p), PathMatch::kPrefix, kWebUp, std::move(ingress));
  };
  auto redirecting = [](model::VirtualHost vh) {
    vh.ssl_redirect = true;
    return vh;
  };
  auto www = [](std::string from, std::string to) {
    model::VirtualHost vh{std::move(from), {}};
    vh.redirect_to = std::move(to);
    return vh;
  };
  auto with_tls = [](model::Config c, std::vector<std::string> hosts) {
    c.certificates.emplace("default/main-tls",
                           model::Certificate{"default/main-tls", kHostCertPem, kHostKeyPem});
    for (auto& h : hosts) c.tls_hosts.emplace(h, model::TlsHost{h, "default/main-tls"});
    return c;
  };
  const std::string kForce = "tidegate.io/force-ssl-redirect";
  const std::string kWww = "tidegate.io/from-to-www-redirect";
  const std::string kAlias = "tidegate.io/server-alias";
  const std::string web = "Ingress default/web";

  run_cases({
      {"force-ssl-redirect redirects a host without TLS",
       objects({ingress("web")
                    .annotation(kForce, "true")
                    .rule("foo.com", {path("/", "Prefix", "web", "80")})}),
       config({redirecting(vhost("foo.com", {root()}))}, up)},
      {"force-ssl-redirect wins over ssl-redirect false",
       objects({ingress("web")
                    .annotation(kForce, "true")
                    .annotation("tidegate.io/ssl-redirect", "false")
                    .rule("foo.com", {path("/", "Prefix", "web", "80")})
                    .tls("foo.com", "main-tls"),
                host_tls_secret("main-tls")}),
       with_tls(config({redirecting(vhost("foo.com", {root()}))}, up), {"foo.com"})},
      {"force-ssl-redirect: only the Ingress's own hosts; an invalid value is an error",
       objects({ingress("web")
                    .annotation(kForce, "yes")
                    .rule("foo.com", {path("/", "Prefix", "web", "80")}),
                ingress("other")
                    .annotation(kForce, "false")
                    .rule("bar.com", {path("/", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {root()}), vhost("bar.com", {root("/", "default/other")})}, up),
       {error(web, "tidegate.io/force-ssl-redirect: invalid value \"yes\"")}},
      {"from-to-www-redirect: the www name of a bare host, the bare name of a www host",
       objects({ingress("web")
                    .annotation(kWww, "true")
                    .rule("foo.com", {path("/", "Prefix", "web", "80")})
                    .rule("www.bar.com", {path("/", "Prefix", "web", "80")})
                    .rule("*.wild.com", {path("/", "Prefix", "web", "80")})
                    .rule("", {path("/any", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {root()}), vhost("www.bar.com", {root()}),
               vhost("*.wild.com", {root()}), vhost("*", {root("/any")}),
               www("www.foo.com", "foo.com"), www("bar.com", "www.bar.com")},
              up)},
      {"from-to-www-redirect: a name that is a host of its own is not redirected",
       objects({ingress("web")
                    .annotation(kWww, "true")
                    .rule("foo.com", {path("/", "Prefix", "web", "80")}),
                ingress("own").rule("www.foo.com", {path("/", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {root()}), vhost("www.foo.com", {root("/", "default/own")})}, up),
       {warning(web, "from-to-www-redirect: www.foo.com is a host of its own")}},
      {"from-to-www-redirect: two Ingresses claiming one name, the older wins",
       objects({ingress("web")
                    .created("2026-01-01T00:00:00Z")
                    .annotation(kWww, "true")
                    .rule("foo.com", {path("/", "Prefix", "web", "80")}),
                ingress("newer")
                    .created("2026-02-01T00:00:00Z")
                    .annotation(kWww, "true")
                    .rule("www.www.foo.com", {path("/", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {root()}), vhost("www.www.foo.com", {root("/", "default/newer")}),
               www("www.foo.com", "foo.com")},
              up),
       {error("Ingress default/newer", "www.foo.com already redirects to foo.com")}},
      {"from-to-www-redirect: an invalid value is an error",
       objects({ingress("web")
                    .annotation(kWww, "on")
                    .rule("foo.com", {path("/", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {root()})}, up),
       {error(web, "from-to-www-redirect: invalid value \"on\"")}},
      {"server-alias: every route of the host, from every Ingress, and its certificate",
       objects({ingress("web")
                    .annotation(kAlias, "Alias.com, *.alias.com")
                    .rule("main.com", {path("/", "Prefix", "web", "80")})
                    .tls("main.com", "main-tls"),
                ingress("api").rule("main.com", {path("/api", "Prefix", "web", "80")}),
                host_tls_secret("main-tls")}),
       with_tls(config({redirecting(vhost("main.com", {root(), root("/api", "default/api")})),
                        redirecting(vhost("alias.com", {root(), root("/api", "default/api")})),
                        redirecting(vhost("*.alias.com", {root(), root("/api", "default/api")}))},
                       up),
                {"main.com", "alias.com", "*.alias.com"})},
      {"server-alias: a host of its own keeps its routes; the first rule host is the one named",
       objects({ingress("web")
                    .annotation(kAlias, "taken.com,other.com")
                    .rule("main.com", {path("/", "Prefix", "web", "80")})
                    .rule("second.com", {path("/s", "Prefix", "web", "80")}),
                ingress("taken").rule("taken.com", {path("/t", "Prefix", "web", "80")})}),
       config({vhost("main.com", {root()}), vhost("second.com", {root("/s")}),
               vhost("taken.com", {root("/t", "default/taken")}), vhost("other.com", {root()})},
              up),
       {warning(web, "the aliases name the first rule host, main.com"),
        warning(web, "server-alias: taken.com is a host of its own")}},
      {"server-alias: an invalid list is an error and adds no alias",
       objects({ingress("web")
                    .annotation(kAlias, "ok.com,bad_name.com")
                    .rule("main.com", {path("/", "Prefix", "web", "80")})}),
       config({vhost("main.com", {root()})}, up),
       {error(web, "invalid host \"bad_name.com\"")}},
      {"server-alias: nothing to name without a rule host",
       objects({ingress("web")
                    .annotation(kAlias, "ok.com")
                    .rule("", {path("/", "Prefix", "web", "80")})}),
       config({vhost("*", {root()})}, up),
       {warning(web, "has no effect without a rule with a host")}},
  });
}

// ---- Default backends: the default-backend annotation and --default-backend-service ----

TEST(TranslateTest, DefaultBackends) {
  const std::vector<std::string> backends = {web_service(), web_slice({{"10.0.0.1"}}),
                                             web_service("errors"),
                                             web_slice({{"10.0.0.9"}}, "errors")};
  auto objects = [&](std::vector<std::string> more) {
    std::vector<std::string> out = backends;
    out.insert(out.end(), more.begin(), more.end());
    return out;
  };
  const model::Upstream web = upstream(kWebUp, {"10.0.0.1:8080"});
  const model::Upstream errors = upstream("default/errors:80", {"10.0.0.9:8080"});
  auto falling_back = [](model::Route r, std::string to = "default/errors:80") {
    r.fallback_upstream = std::move(to);
    return r;
  };
  TranslateOptions flag;
  flag.default_backend_service = "default/errors";
  const std::string web_obj = "Ingress default/web";

  run_cases({
      {"default-backend: the Ingress's routes fall back to that Service's first port",
       objects({ingress("web")
                    .annotation("tidegate.io/default-backend", "errors")
                    .rule("foo.com",
                          {path("/", "Prefix", "web", "80"), path("/api", "Prefix", "web", "80")}),
                ingress("other").rule("bar.com", {path("/", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {falling_back(route("/", PathMatch::kPrefix, kWebUp)),
                                 falling_back(route("/api", PathMatch::kPrefix, kWebUp))}),
               vhost("bar.com", {route("/", PathMatch::kPrefix, kWebUp, "default/other")})},
              {web, errors})},
      {"default-backend naming a missing Service is an error and ignored",
       objects({ingress("web")
                    .annotation("tidegate.io/default-backend", "nope")
                    .rule("foo.com", {path("/", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {route("/", PathMatch::kPrefix, kWebUp)})}, {web}),
       {error(web_obj,
              "tidegate.io/default-backend: invalid value \"nope\": service \"nope\" "
              "not found")}},
      {"default-backend that is not a Service name",
       objects({ingress("web")
                    .annotation("tidegate.io/default-backend", "errors:80")
                    .rule("foo.com", {path("/", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {route("/", PathMatch::kPrefix, kWebUp)})}, {web}),
       {error(web_obj, "not a Service name")}},
      {"--default-backend-service: what no route takes, and every route's fallback",
       objects({ingress("web").rule("foo.com", {path("/", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {falling_back(route("/", PathMatch::kPrefix, kWebUp))})},
              {web, errors},
              route("/", PathMatch::kPrefix, "default/errors:80", "--default-backend-service")),
       {},
       flag},
      {"an Ingress's defaultBackend wins over the flag; its default-backend over the flag's",
       objects({ingress("web")
                    .annotation("tidegate.io/default-backend", "web")
                    .default_backend("web", "80")
                    .rule("foo.com", {path("/", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {falling_back(route("/", PathMatch::kPrefix, kWebUp), kWebUp)})},
              {web}, falling_back(route("/", PathMatch::kPrefix, kWebUp), kWebUp)),
       {},
       flag},
      {"custom-http-errors with the Ingress's default-backend",
       objects({ingress("web")
                    .annotation("tidegate.io/default-backend", "errors")
                    .annotation("tidegate.io/custom-http-errors", "404,503")
                    .rule("foo.com", {path("/", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {[&] {
                       model::Route r = falling_back(route("/", PathMatch::kPrefix, kWebUp));
                       r.policy.mut().error_codes = {404, 503};
                       return r;
                     }()})},
              {web, errors})},
      {"custom-http-errors without a default backend has no effect",
       objects({ingress("web")
                    .annotation("tidegate.io/custom-http-errors", "404")
                    .rule("foo.com", {path("/", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {route("/", PathMatch::kPrefix, kWebUp)})}, {web}),
       {warning(web_obj, "tidegate.io/custom-http-errors has no effect without default-backend")}},
      {"--default-backend-service naming a missing Service: reported, nothing falls back",
       objects({ingress("web").rule("foo.com", {path("/", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {route("/", PathMatch::kPrefix, kWebUp)})}, {web}),
       {error("Service default/gone", "--default-backend-service: service \"gone\" not found")},
       [] {
         TranslateOptions o;
         o.default_backend_service = "default/gone";
         return o;
       }()},
  });
}

// auth-url: the URL's host names a Service (any namespace), its port a port of the Service.
TEST(TranslateTest, ExternalAuth) {
  const std::vector<std::string> backends = {
      web_service(),
      web_slice({{"10.0.0.1"}}),
      web_service("oauth", "auth"),
      web_slice({{"10.0.0.7"}}, "oauth", "auth"),
      service("authz", {{"https", 443, "8443"}}),
      slice("authz-abc", "authz", {{"10.0.0.8"}}, {{"https", 8443}})};
  auto objects = [&](std::string url) {
    std::vector<std::string> out = backends;
    out.push_back(ingress("web")
                      .annotation("tidegate.io/auth-url", url)
                      .rule("foo.com", {path("/", "Prefix", "web", "80")}));
    return out;
  };
  const model::Upstream web = upstream(kWebUp, {"10.0.0.1:8080"});
  auto authed = [](std::string url, std::string up) {
    model::Route r = route("/", PathMatch::kPrefix, kWebUp);
    model::ExternalAuth a;
    a.url = std::move(url);
    a.upstream = std::move(up);
    r.policy.mut().external_auth = a;
    return r;
  };
  model::Upstream authz = upstream("default/authz:443+https", {"10.0.0.8:8443"});
  authz.tls.enabled = true;
  authz.tls.server_name = "authz.default.svc";
  const std::string web_obj = "Ingress default/web";
  const std::string oauth_url = "http://oauth.auth.svc.cluster.local/oauth2/auth";
  run_cases({
      {"a Service of another namespace, by its cluster name", objects(oauth_url),
       config({vhost("foo.com", {authed(oauth_url, "auth/oauth:80")})},
              {web, upstream("auth/oauth:80", {"10.0.0.7:8080"})})},
      {"https to a Service of the Ingress's namespace: the URL's host is the TLS name",
       objects("https://authz.default.svc:443/check"),
       config({vhost("foo.com",
                     {authed("https://authz.default.svc:443/check", "default/authz:443+https")})},
              {web, authz})},
      {"a missing Service: reported, the route fails closed",
       objects("http://nope/check"),
       config({vhost("foo.com", {authed("http://nope/check", "")})}, {web}),
       {error(web_obj,
              "tidegate.io/auth-url: service \"nope\" not found in namespace "
              "\"default\"; the route refuses every request (503)")}},
      {"a port the Service does not have",
       objects("http://oauth.auth:8080/"),
       config({vhost("foo.com", {authed("http://oauth.auth:8080/", "")})}, {web}),
       {error(web_obj, "service auth/oauth has no port 8080")}},
  });
}

// ---- Paths ----

TEST(TranslateTest, Paths) {
  const std::vector<std::string> backend = {web_service(), web_slice({{"10.0.0.1"}})};
  auto objects = [&](std::string ing) {
    std::vector<std::string> out = backend;
    out.push_back(std::move(ing));
    return out;
  };
  auto up = std::vector<model::Upstream>{upstream(kWebUp, {"10.0.0.1:8080"})};
  auto regex = [](IngressYaml ing) {
    ing.annotation("tidegate.io/use-regex", "true");
    return ing;
  };

  run_cases({
      {"path types map to match kinds",
       objects(ingress("web").rule(
           "foo.com", {path("/exact", "Exact", "web", "80"), path("/prefix", "Prefix", "web", "80"),
                       path("/impl", "ImplementationSpecific", "web", "80")})),
       config({vhost("foo.com", {route("/prefix", PathMatch::kPrefix, kWebUp),
                                 route("/exact", PathMatch::kExact, kWebUp),
                                 route("/impl", PathMatch::kPrefix, kWebUp)})},
              up)},
      {"missing path is /",
       objects(ingress("web").rule("foo.com", {path("", "ImplementationSpecific", "web", "80")})),
       config({vhost("foo.com", {route("/", PathMatch::kPrefix, kWebUp)})}, up)},
      {"prefix kept as written, trailing slash included",
       objects(ingress("web").rule("foo.com", {path("/api/", "Prefix", "web", "80"),
                                               path("/exact/", "Exact", "web", "80")})),
       config({vhost("foo.com", {route("/exact/", PathMatch::kExact, kWebUp),
                                 route("/api/", PathMatch::kPrefix, kWebUp)})},
              up)},
      {"without the annotation a regex-looking path is a literal prefix",
       objects(ingress("web").rule("foo.com", {path("/api/v[0-9]+", "Prefix", "web", "80")})),
       config({vhost("foo.com", {route("/api/v[0-9]+", PathMatch::kPrefix, kWebUp)})}, up)},
      {"use-regex turns Prefix and ImplementationSpecific into regexes, not Exact",
       objects(regex(ingress("web"))
                   .rule("foo.com", {path("/api/v[0-9]+", "Prefix", "web", "80"),
                                     path("/img/.*\\.png", "ImplementationSpecific", "web", "80"),
                                     path("/exact", "Exact", "web", "80")})),
       config({vhost("foo.com", {route("/api/v[0-9]+", PathMatch::kRegex, kWebUp),
                                 route("/img/.*\\.png", PathMatch::kRegex, kWebUp),
                                 route("/exact", PathMatch::kExact, kWebUp)})},
              up)},
      {"invalid regex: that path dropped",
       objects(regex(ingress("web"))
                   .rule("foo.com", {path("/api/(v1", "Prefix", "web", "80"),
                                     path("/ok", "Prefix", "web", "80")})),
       config({vhost("foo.com", {route("/ok", PathMatch::kRegex, kWebUp)})}, up),
       {error("Ingress default/web",
              "spec.rules[0].http.paths[0]: invalid regex \"/api/(v1\": missing ): /api/(v1; path "
              "dropped")}},
      {"use-regex with another value is false, with a warning",
       objects(ingress("web")
                   .annotation("tidegate.io/use-regex", "yes")
                   .rule("foo.com", {path("/a.*", "Prefix", "web", "80")})),
       config({vhost("foo.com", {route("/a.*", PathMatch::kPrefix, kWebUp)})}, up),
       {warning("Ingress default/web", "tidegate.io/use-regex: expected \"true\" or \"false\"")}},
      {"use-regex false is the default",
       objects(ingress("web")
                   .annotation("tidegate.io/use-regex", "false")
                   .rule("foo.com", {path("/a.*", "Prefix", "web", "80")})),
       config({vhost("foo.com", {route("/a.*", PathMatch::kPrefix, kWebUp)})}, up)},
      {"relative path dropped",
       objects(ingress("web").rule("foo.com", {path("api", "ImplementationSpecific", "web", "80"),
                                               path("/ok", "Prefix", "web", "80")})),
       config({vhost("foo.com", {route("/ok", PathMatch::kPrefix, kWebUp)})}, up),
       {error("Ingress default/web",
              "spec.rules[0].http.paths[0]: path \"api\" does not start with '/'")}},
      {"routes come out in precedence order",
       objects(ingress("web").rule(
           "foo.com", {path("/", "Prefix", "web", "80"), path("/b", "Prefix", "web", "80"),
                       path("/b", "Exact", "web", "80"), path("/aa", "Prefix", "web", "80")})),
       config({vhost("foo.com", {route("/", PathMatch::kPrefix, kWebUp),
                                 route("/b", PathMatch::kPrefix, kWebUp),
                                 route("/b", PathMatch::kExact, kWebUp),
                                 route("/aa", PathMatch::kPrefix, kWebUp)})},
              up)},
  });
}

// ---- Backends and endpoints ----

TEST(TranslateTest, Backends) {
  auto rule_to = [](std::string svc, std::string port) {
    return std::string(ingress("web").rule("foo.com", {path("/", "Prefix", svc, port)}));
  };
  auto only_route = [](std::string up) {
    return std::vector<model::VirtualHost>{vhost("foo.com", {route("/", PathMatch::kPrefix, up)})};
  };

  run_cases({
      {"missing service: path dropped",
       {rule_to("nope", "80")},
       config({}, {}),
       {error("Ingress default/web",
              "spec.rules[0].http.paths[0]: service \"nope\" not found in namespace \"default\"; "
              "path dropped")}},
      {"service in another namespace does not count",
       {rule_to("web", "80"), web_service("web", "other")},
       config({}, {}),
       {error("Ingress default/web", "service \"web\" not found in namespace \"default\"")}},
      {"missing port number",
       {rule_to("web", "81"), web_service()},
       config({}, {}),
       {error("Ingress default/web", "service default/web has no port 81; path dropped")}},
      {"missing port name",
       {rule_to("web", "grpc"), web_service()},
       config({}, {}),
       {error("Ingress default/web", "service default/web has no port named \"grpc\"")}},
      {"named service port: the upstream is named after the name",
       {rule_to("web", "http"), web_service(), web_slice({{"10.0.0.1"}})},
       config(only_route("default/web:http"), {upstream("default/web:http", {"10.0.0.1:8080"})})},
      {"by number and by name: two upstreams, same endpoints",
       {std::string(ingress("web").rule(
            "foo.com", {path("/a", "Prefix", "web", "80"), path("/b", "Prefix", "web", "http")})),
        web_service(), web_slice({{"10.0.0.1"}})},
       config(
           {vhost("foo.com", {route("/a", PathMatch::kPrefix, kWebUp),
                              route("/b", PathMatch::kPrefix, "default/web:http")})},
           {upstream(kWebUp, {"10.0.0.1:8080"}), upstream("default/web:http", {"10.0.0.1:8080"})})},
      {"no endpoints: the upstream is still emitted",
       {rule_to("web", "80"), web_service()},
       config(only_route(kWebUp), {upstream(kWebUp)})},
      {"unnamed port matches an unnamed slice port",
       {rule_to("api", "8000"), service("api", {{"", 8000, "9000"}}),
        slice("api-1", "api", {{"10.0.0.7"}}, {{"", 9001}})},
       config(only_route("default/api:8000"), {upstream("default/api:8000", {"10.0.0.7:9001"})})},
      {"no matching slice port: numeric targetPort is used",
       {rule_to("api", "8000"), service("api", {{"main", 8000, "9000"}}),
        slice("api-1", "api", {{"10.0.0.7"}}, {{"other", 7000}})},
       config(only_route("default/api:8000"), {upstream("default/api:8000", {"10.0.0.7:9000"})})},
      {"targetPort defaults to the port",
       {rule_to("api", "8000"), service("api", {{"", 8000, ""}}),
        slice("api-1", "api", {{"10.0.0.7"}}, {{"other", 7000}})},
       config(only_route("default/api:8000"), {upstream("default/api:8000", {"10.0.0.7:8000"})})},
      {"no matching slice port and a named targetPort: no endpoints",
       {rule_to("api", "8000"), service("api", {{"main", 8000, "grpc"}}),
        slice("api-1", "api", {{"10.0.0.7"}}, {{"other", 7000}})},
       config(only_route("default/api:8000"), {upstream("default/api:8000")})},
      {"ready true or absent; not-ready skipped while something is ready",
       {rule_to("web", "80"), web_service(),
        web_slice({{"10.0.0.3", true}, {"10.0.0.1"}, not_ready("10.0.0.2"), draining("10.0.0.4")})},
       config(only_route(kWebUp), {upstream(kWebUp, {"10.0.0.1:8080", "10.0.0.3:8080"})})},
      {"nothing ready: serving and terminating endpoints are used",
       {rule_to("web", "80"), web_service(),
        web_slice({not_ready("10.0.0.1"),
                   draining("10.0.0.4"),
                   draining("10.0.0.2"),
                   {"10.0.0.5", false, true, false},
                   {"10.0.0.6", false, false, true}})},
       config(only_route(kWebUp), {upstream(kWebUp, {"10.0.0.2:8080", "10.0.0.4:8080"})})},
      {"readiness is judged across all slices of the service",
       {rule_to("web", "80"), web_service(),
        slice("web-a", "web", {draining("10.0.0.4")}, {{"http", 8080}}),
        slice("web-b", "web", {{"10.0.0.9"}}, {{"http", 8080}})},
       config(only_route(kWebUp), {upstream(kWebUp, {"10.0.0.9:8080"})})},
      {"endpoints from several slices sorted and deduplicated",
       {rule_to("web", "80"), web_service(),
        slice("web-b", "web", {{"10.0.0.2"}, {"10.0.0.1"}}, {{"http", 8080}}),
        slice("web-a", "web", {{"10.0.0.2"}, {"10.0.0.10"}}, {{"http", 8080}})},
       config(only_route(kWebUp),
              {upstream(kWebUp, {"10.0.0.1:8080", "10.0.0.10:8080", "10.0.0.2:8080"})})},
      {"IPv6 slices count, FQDN slices do not, other services' slices do not",
       {rule_to("web", "80"), web_service(),
        slice("web-v6", "web", {{"FD00::1"}}, {{"http", 8080}}, "IPv6"),
        slice("web-fqdn", "web", {{"pod.example.com"}}, {{"http", 8080}}, "FQDN"),
        slice("other-1", "other", {{"10.9.9.9"}}, {{"http", 8080}}),
        slice("web-x", "web", {{"10.9.9.8"}}, {{"http", 8080}}, "IPv4", "elsewhere")},
       config(only_route(kWebUp), {upstream(kWebUp, {"[fd00::1]:8080"})})},
      {"invalid address skipped with a warning (IPv4 is used as written: only its canonical form "
       "is accepted)",
       {rule_to("web", "80"), web_service(),
        web_slice({{"10.0.0.300"},
                   {"010.0.0.2"},
                   {"10.0.0.1 "},
                   {"10.0.0.1\\0x"},  // YAML's \0: a NUL
                   {"10.0.0.1"}})},
       config(only_route(kWebUp), {upstream(kWebUp, {"10.0.0.1:8080"})}),
       {warning("EndpointSlice default/web-abc", "invalid IPv4 address \"10.0.0.300\""),
        warning("EndpointSlice default/web-abc", "invalid IPv4 address \"010.0.0.2\""),
        warning("EndpointSlice default/web-abc", "invalid IPv4 address \"10.0.0.1 \""),
        warning("EndpointSlice default/web-abc",
                "invalid IPv4 address \"" + std::string("10.0.0.1\0x", 10) + "\"")}},
      {"UDP service port is refused",
       {rule_to("dns", "53"), service("dns", {{"dns", 53, "53", "UDP"}})},
       config({}, {}),
       {error("Ingress default/web", "service default/dns port 53 uses protocol UDP")}},
      {"ExternalName service: warning, upstream without endpoints",
       {rule_to("ext", "443"), service("ext", {{"https", 443, ""}}, "default", "ExternalName")},
       config(only_route("default/ext:443"), {upstream("default/ext:443")}),
       {warning("Service default/ext", "type ExternalName is not supported")}},
  });
}

// ---- Merging and conflicts ----

TEST(TranslateTest, MergeAndConflicts) {
  const std::vector<std::string> backends = {
      web_service("web"),         web_slice({{"10.0.0.1"}}, "web"),
      web_service("api"),         web_slice({{"10.0.0.2"}}, "api"),
      web_service("web", "team"), web_slice({{"10.0.1.1"}}, "web", "team"),
  };
  auto with = [&](std::vector<std::string> ingresses) {
    ingresses.insert(ingresses.end(), backends.begin(), backends.end());
    return ingresses;
  };
  const model::Upstream web = upstream("default/web:80", {"10.0.0.1:8080"});
  const model::Upstream api = upstream("default/api:80", {"10.0.0.2:8080"});
  const model::Upstream team_web = upstream("team/web:80", {"10.0.1.1:8080"});

  run_cases({
      {"two Ingresses, one host, different paths: merged",
       with({ingress("a").rule("foo.com", {path("/a", "Prefix", "web", "80")}),
             ingress("b").rule("foo.com", {path("/b", "Prefix", "api", "80")})}),
       config({vhost("foo.com", {route("/a", PathMatch::kPrefix, web.name, "default/a"),
                                 route("/b", PathMatch::kPrefix, api.name, "default/b")})},
              {web, api})},
      {"Ingresses in different namespaces reach their own services",
       with({ingress("a").rule("foo.com", {path("/a", "Prefix", "web", "80")}),
             ingress("a", "team").rule("foo.com", {path("/team", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {route("/team", PathMatch::kPrefix, team_web.name, "team/a"),
                                 route("/a", PathMatch::kPrefix, web.name, "default/a")})},
              {web, team_web})},
      {"conflict: the older Ingress wins even when its name sorts later; loser's upstream not "
       "emitted",
       with({ingress("a")
                 .created("2024-05-02T00:00:00Z")
                 .rule("foo.com", {path("/", "Prefix", "api", "80")}),
             ingress("z")
                 .created("2024-05-01T00:00:00Z")
                 .rule("foo.com", {path("/", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {route("/", PathMatch::kPrefix, web.name, "default/z")})}, {web}),
       {error("Ingress default/a",
              "spec.rules[0].http.paths[0]: host \"foo.com\" Prefix path \"/\" is already routed "
              "to default/web:80 by Ingress default/z (the older one wins); path dropped")}},
      {"conflict with equal timestamps: namespace/name decides",
       with({ingress("b").rule("foo.com", {path("/", "Prefix", "api", "80")}),
             ingress("a").rule("foo.com", {path("/", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {route("/", PathMatch::kPrefix, web.name, "default/a")})}, {web}),
       {error("Ingress default/b", "by Ingress default/a")}},
      {"conflict resolution only drops the conflicting path",
       with({ingress("a").rule("foo.com", {path("/", "Prefix", "web", "80")}),
             ingress("b").rule("foo.com", {path("/", "Prefix", "api", "80"),
                                           path("/api", "Prefix", "api", "80")})}),
       config({vhost("foo.com", {route("/api", PathMatch::kPrefix, api.name, "default/b"),
                                 route("/", PathMatch::kPrefix, web.name, "default/a")})},
              {web, api}),
       {error("Ingress default/b", "path \"/\" is already routed")}},
      {"the same backend twice is not a conflict",
       with({ingress("a").rule("foo.com", {path("/", "Prefix", "web", "80")}),
             ingress("b").rule("foo.com", {path("/", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {route("/", PathMatch::kPrefix, web.name, "default/a")})}, {web})},
      {"Prefix \"/x/\" and \"/x\" are the same prefix: a conflict",
       with({ingress("a").rule("foo.com", {path("/x", "Prefix", "web", "80")}),
             ingress("b").rule("foo.com", {path("/x/", "Prefix", "api", "80")})}),
       config({vhost("foo.com", {route("/x", PathMatch::kPrefix, web.name, "default/a")})}, {web}),
       {error(
           "Ingress default/b",
           "path \"/x/\" is already routed (as \"/x\") to default/web:80 by Ingress default/a")}},
      {"... and with the same backend, one route: the older one's spelling",
       with({ingress("a").rule("foo.com", {path("/x/", "Prefix", "web", "80")}),
             ingress("b").rule("foo.com", {path("/x", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {route("/x/", PathMatch::kPrefix, web.name, "default/a")})},
              {web})},
      {"same path, different match type: both kept",
       with({ingress("a").rule("foo.com", {path("/x", "Prefix", "web", "80")}),
             ingress("b").rule("foo.com", {path("/x", "Exact", "api", "80")})}),
       config({vhost("foo.com", {route("/x", PathMatch::kExact, api.name, "default/b"),
                                 route("/x", PathMatch::kPrefix, web.name, "default/a")})},
              {web, api})},
      {"regex and literal prefix with the same text do not conflict",
       with({ingress("a").rule("foo.com", {path("/x", "Prefix", "web", "80")}),
             ingress("b")
                 .annotation("tidegate.io/use-regex", "true")
                 .rule("foo.com", {path("/x", "Prefix", "api", "80")})}),
       config({vhost("foo.com", {route("/x", PathMatch::kPrefix, web.name, "default/a"),
                                 route("/x", PathMatch::kRegex, api.name, "default/b")})},
              {web, api})},
      {"same path on different hosts does not conflict",
       with({ingress("a").rule("a.com", {path("/", "Prefix", "web", "80")}),
             ingress("b").rule("b.com", {path("/", "Prefix", "api", "80")})}),
       config({vhost("a.com", {route("/", PathMatch::kPrefix, web.name, "default/a")}),
               vhost("b.com", {route("/", PathMatch::kPrefix, api.name, "default/b")})},
              {web, api})},
  });
}

// ---- spec.defaultBackend ----

TEST(TranslateTest, DefaultBackend) {
  const std::vector<std::string> backends = {web_service("web"), web_slice({{"10.0.0.1"}}, "web"),
                                             web_service("api"), web_slice({{"10.0.0.2"}}, "api")};
  auto with = [&](std::vector<std::string> ingresses) {
    ingresses.insert(ingresses.end(), backends.begin(), backends.end());
    return ingresses;
  };
  const model::Upstream web = upstream("default/web:80", {"10.0.0.1:8080"});
  const model::Upstream api = upstream("default/api:80", {"10.0.0.2:8080"});

  run_cases({
      {"defaultBackend becomes the default route",
       with({ingress("a").default_backend("web", "80")}),
       config({}, {web}, route("/", PathMatch::kPrefix, web.name, "default/a"))},
      {"defaultBackend by port name", with({ingress("a").default_backend("web", "http")}),
       config({}, {upstream("default/web:http", {"10.0.0.1:8080"})},
              route("/", PathMatch::kPrefix, "default/web:http", "default/a"))},
      {"two defaultBackends: the oldest wins",
       with({ingress("a").created("2024-02-01T00:00:00Z").default_backend("api", "80"),
             ingress("b").created("2024-01-01T00:00:00Z").default_backend("web", "80")}),
       config({}, {web}, route("/", PathMatch::kPrefix, web.name, "default/b")),
       {error("Ingress default/a",
              "spec.defaultBackend: the default backend is already default/web:80 from Ingress "
              "default/b (the older one wins); ignored")}},
      {"two identical defaultBackends: no conflict",
       with({ingress("a").default_backend("web", "80"), ingress("b").default_backend("web", "80")}),
       config({}, {web}, route("/", PathMatch::kPrefix, web.name, "default/a"))},
      {"an unresolvable defaultBackend does not block the next one",
       with({ingress("a").default_backend("missing", "80"),
             ingress("b").default_backend("web", "80")}),
       config({}, {web}, route("/", PathMatch::kPrefix, web.name, "default/b")),
       {error("Ingress default/a",
              "spec.defaultBackend: service \"missing\" not found in namespace \"default\"; "
              "ignored")}},
      {"resource backends are not supported",
       with({ingress("a").resource_default_backend()}),
       config({}, {}),
       {error("Ingress default/a", "resource backends (kind StorageBucket) are not supported")}},
      {"defaultBackend and rules together",
       with({ingress("a")
                 .default_backend("web", "80")
                 .rule("foo.com", {path("/api", "Prefix", "api", "80")})}),
       config({vhost("foo.com", {route("/api", PathMatch::kPrefix, api.name, "default/a")})},
              {web, api}, route("/", PathMatch::kPrefix, web.name, "default/a"))},
  });
}

// ---- Body substitutions (tidegate.io/substitution* annotations, SubstitutionRuleSet) ----

struct RuleYaml {
  std::string match;
  std::string replace;
  std::string flags;  // empty: omitted
};

// The annotation's YAML list, in flow style on one line.
std::string rules_annotation(const std::vector<RuleYaml>& rules) {
  std::string out = "[";
  for (size_t i = 0; i < rules.size(); ++i) {
    if (i > 0) out += ", ";
    out += "{match: " + maybe_quote(rules[i].match) + ", replace: " + maybe_quote(rules[i].replace);
    if (!rules[i].flags.empty()) out += ", flags: " + maybe_quote(rules[i].flags);
    out += "}";
  }
  return out + "]";
}

std::string rule_set(const std::string& name, const std::vector<RuleYaml>& rules,
                     const std::string& ns = "default") {
  std::ostringstream o;
  o << "apiVersion: tidegate.io/v1alpha1\nkind: SubstitutionRuleSet\nmetadata:\n  name: " << name
    << "\n  namespace: " << ns << "\nspec:\n  rules:\n";
  for (const auto& r : rules) {
    o << "  - match: " << maybe_quote(r.match) << "\n    replace: " << maybe_quote(r.replace)
      << "\n";
    if (!r.flags.empty()) o << "    flags: " << maybe_quote(r.flags) << "\n";
  }
  return o.str();
}

model::Substitution subst(std::string name, std::vector<substitution::Rule> rules,
                          std::vector<std::string> types = {"text/html"},
                          uint64_t max_buffer = 64 * 1024) {
  model::Substitution s;
  s.name = std::move(name);
  s.rules = std::move(rules);
  s.mime_types = std::move(types);
  s.max_buffer = max_buffer;
  return s;
}

model::Route substituted(model::Route r, std::string name) {
  r.substitution = std::move(name);
  return r;
}

model::Config with_substitutions(model::Config c, std::vector<model::Substitution> subs) {
  for (auto& s : subs) c.substitutions.emplace(s.name, std::move(s));
  return c;
}

// ---- TLS to backends (tidegate.io/backend-protocol, proxy-ssl-*) ----

// A self-signed CA certificate (test data, generated with the openssl CLI).
const std::string kTestCaPem =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBiDCCAS+gAwIBAgIUUCxCR2JtrykM9gOKOFIDT/I4uNswCgYIKoZIzj0EAwIw\n"
    "GjEYMBYGA1UEAwwPVHJhbnNsYXRlVGVzdENBMB4XDTI2MTEzMDExMDgwNloXDTM2\n"
    "MTEyNzExMDgwNlowGjEYMBYGA1UEAwwPVHJhbnNsYXRlVGVzdENBMFkwEwYHKoZI\n"
    "zj0CAQYIKoZIzj0DAQcDQgAET5hgN1FCmezwZq92cbND7mnyOieTuO4f6/wKftxE\n"
    "3Ku8HUgS8xjbDwAtzD+8gBlYdmitiPI7tRi/RcTDKN08wqNTMFEwHQYDVR0OBBYE\n"
    "FI6BG6BnBlcfKtTFOri+DoezwgdRMB8GA1UdIwQYMBaAFI6BG6BnBlcfKtTFOri+\n"
    "DoezwgdRMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDRwAwRAIgVr8PCoxm\n"
    "FS2Ra+0GO+s/lzmcNdf7WwyihVrK3u1ricoCIHAcP/3nY9v7hol7UUufBh2N8g5/\n"
    "cHjsXhBG2b8HMA2V\n"
    "-----END CERTIFICATE-----\n";

// An Opaque Secret with the given entries as stringData.
std::string opaque_secret(const std::string& name, std::map<std::string, std::string> data,
                          const std::string& ns = "default") {
  std::ostringstream o;
  o << "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " << name << "\n  namespace: " << ns
    << "\ntype: Opaque\nstringData:\n";
  for (const auto& [k, v] : data) {
    o << "  " << k << ": |\n";
    std::istringstream lines(v);
    for (std::string line; std::getline(lines, line);) o << "    " << line << "\n";
  }
  return o.str();
}

// An HTTPS upstream: its TLS settings, and the upstream policy they came from (protocol HTTPS,
// proxy-ssl-secret `secret`, proxy-ssl-name `ssl_name`).
model::Upstream tls_upstream(std::string name, std::vector<std::string> endpoints,
                             std::string server_name, std::string ca_pem = "",
                             std::string secret = "", std::string ssl_name = "") {
  model::Upstream u = upstream(std::move(name), std::move(endpoints));
  u.tls = model::UpstreamTls{true, std::move(server_name), std::move(ca_pem)};
  u.policy.mut().protocol = model::BackendProtocol::kHttps;
  u.policy.mut().tls_secret = std::move(secret);
  u.policy.mut().tls_server_name = std::move(ssl_name);
  return u;
}

TEST(TranslateTest, BackendTls) {
  const std::string svc = service("web", {{"https", 443, "8443"}});
  const std::string eps = slice("web-abc", "web", {{"10.0.0.1"}}, {{"https", 8443}});
  const std::string ca_secret = opaque_secret("backend-ca", {{"ca.crt", kTestCaPem}});
  const std::string kHttpsUp = "default/web:443+https";
  auto tls_ingress = [](std::string name, std::map<std::string, std::string> annotations,
                        std::string path_text = "/") {
    IngressYaml y = ingress(std::move(name));
    for (const auto& [k, v] : annotations) y.annotation("tidegate.io/" + k, v);
    return std::string(y.rule("foo.com", {path(std::move(path_text), "Prefix", "web", "443")}));
  };
  auto only_route = [](std::string up, std::string ing = "default/web") {
    return std::vector<model::VirtualHost>{
        vhost("foo.com", {route("/", PathMatch::kPrefix, std::move(up), std::move(ing))})};
  };
  const std::string fail_closed = "get no endpoints (503) until it is fixed";
  TranslateOptions nginx_options;
  nginx_options.nginx_annotations = true;

  run_cases({
      {"HTTPS without a CA: encrypted, not verified, SNI <service>.<namespace>.svc",
       {tls_ingress("web", {{"backend-protocol", "HTTPS"}}), svc, eps},
       config(only_route(kHttpsUp),
              {tls_upstream(kHttpsUp, {"10.0.0.1:8443"}, "web.default.svc")})},
      {"lower-case https, CA from a Secret in the same namespace, proxy-ssl-name",
       {tls_ingress("web", {{"backend-protocol", "https"},
                            {"proxy-ssl-secret", "backend-ca"},
                            {"proxy-ssl-name", "backend.internal"}}),
        svc, eps, ca_secret},
       config(only_route(kHttpsUp),
              {tls_upstream(kHttpsUp, {"10.0.0.1:8443"}, "backend.internal", kTestCaPem,
                            "default/backend-ca", "backend.internal")})},
      {"proxy-ssl-secret as namespace/name",
       {tls_ingress("web",
                    {{"backend-protocol", "HTTPS"}, {"proxy-ssl-secret", "default/backend-ca"}}),
        svc, eps, ca_secret},
       config(only_route(kHttpsUp), {tls_upstream(kHttpsUp, {"10.0.0.1:8443"}, "web.default.svc",
                                                  kTestCaPem, "default/backend-ca")})},
      {"HTTP is the default and may be written out",
       {tls_ingress("web", {{"backend-protocol", "http"}}), svc, eps},
       config(only_route("default/web:443"), {upstream("default/web:443", {"10.0.0.1:8443"})})},
      {"an unsupported protocol is reported and HTTP applies",
       {tls_ingress("web", {{"backend-protocol", "FCGI"}}), svc, eps},
       config(only_route("default/web:443"), {upstream("default/web:443", {"10.0.0.1:8443"})}),
       {error("Ingress default/web", "backend-protocol: invalid value \"FCGI\"")}},
      {"missing CA Secret: fails closed, no endpoints",
       {tls_ingress("web", {{"backend-protocol", "HTTPS"}, {"proxy-ssl-secret", "nope"}}), svc,
        eps},
       config(only_route(kHttpsUp),
              {tls_upstream(kHttpsUp, {}, "web.default.svc", "", "default/nope")}),
       {error("Ingress default/web",
              "annotation tidegate.io/proxy-ssl-secret: Secret default/nope not found; the "
              "Ingress's HTTPS backends " +
                  fail_closed)}},
      {"Secret without ca.crt: fails closed",
       {tls_ingress("web", {{"backend-protocol", "HTTPS"}, {"proxy-ssl-secret", "backend-ca"}}),
        svc, eps, opaque_secret("backend-ca", {{"tls.crt", kTestCaPem}})},
       config(only_route(kHttpsUp),
              {tls_upstream(kHttpsUp, {}, "web.default.svc", "", "default/backend-ca")}),
       {error("Ingress default/web", "Secret default/backend-ca has no ca.crt; the Ingress's")}},
      {"ca.crt that is not PEM: fails closed",
       {tls_ingress("web", {{"backend-protocol", "HTTPS"}, {"proxy-ssl-secret", "backend-ca"}}),
        svc, eps, opaque_secret("backend-ca", {{"ca.crt", "not a certificate"}})},
       config(only_route(kHttpsUp),
              {tls_upstream(kHttpsUp, {}, "web.default.svc", "", "default/backend-ca")}),
       {error("Ingress default/web", "ca.crt holds no PEM certificate; the Ingress's")}},
      {"a Secret of another namespace is refused and fails closed",
       {tls_ingress("web",
                    {{"backend-protocol", "HTTPS"}, {"proxy-ssl-secret", "other/backend-ca"}}),
        svc, eps, opaque_secret("backend-ca", {{"ca.crt", kTestCaPem}}, "other")},
       config(only_route(kHttpsUp), {tls_upstream(kHttpsUp, {}, "web.default.svc")}),
       {error("Ingress default/web", "the Secret must be in the Ingress's namespace"),
        error("Ingress default/web",
              "annotation tidegate.io/proxy-ssl-secret: no usable CA Secret; the Ingress's "
              "HTTPS backends " +
                  fail_closed)}},
      {"proxy-ssl-secret without HTTPS: warning, plain HTTP",
       {tls_ingress("web", {{"proxy-ssl-secret", "backend-ca"}}), svc, eps, ca_secret},
       config(only_route("default/web:443"), {upstream("default/web:443", {"10.0.0.1:8443"})}),
       {warning("Ingress default/web", "has no effect without backend-protocol: HTTPS")}},
      {"HTTP and HTTPS to one Service port are two upstreams",
       {std::string(ingress("plain").rule("a.com", {path("/", "Prefix", "web", "443")})),
        tls_ingress("web", {{"backend-protocol", "HTTPS"}}), svc, eps},
       config({vhost("a.com", {route("/", PathMatch::kPrefix, "default/web:443", "default/plain")}),
               only_route(kHttpsUp)[0]},
              {upstream("default/web:443", {"10.0.0.1:8443"}),
               tls_upstream(kHttpsUp, {"10.0.0.1:8443"}, "web.default.svc")})},
      {"two Ingresses with the same TLS settings share the upstream",
       {tls_ingress("a", {{"backend-protocol", "HTTPS"}}, "/a"),
        tls_ingress("b", {{"backend-protocol", "HTTPS"}}, "/b"), svc, eps},
       config({vhost("foo.com", {route("/a", PathMatch::kPrefix, kHttpsUp, "default/a"),
                                 route("/b", PathMatch::kPrefix, kHttpsUp, "default/b")})},
              {tls_upstream(kHttpsUp, {"10.0.0.1:8443"}, "web.default.svc")})},
      {"other TLS settings for the same upstream: the older Ingress wins, the path is dropped",
       {tls_ingress("a", {{"backend-protocol", "HTTPS"}}, "/a"),
        tls_ingress("b", {{"backend-protocol", "HTTPS"}, {"proxy-ssl-secret", "backend-ca"}}, "/b"),
        svc, eps, ca_secret},
       config({vhost("foo.com", {route("/a", PathMatch::kPrefix, kHttpsUp, "default/a")})},
              {tls_upstream(kHttpsUp, {"10.0.0.1:8443"}, "web.default.svc")}),
       {error("Ingress default/b",
              "spec.rules[0].http.paths[0]: upstream default/web:443+https is already used by "
              "Ingress default/a with other TLS settings")}},
      {"default backend over HTTPS",
       {std::string(ingress("web")
                        .annotation("tidegate.io/backend-protocol", "HTTPS")
                        .default_backend("web", "https")),
        svc, eps},
       config({}, {tls_upstream("default/web:https+https", {"10.0.0.1:8443"}, "web.default.svc")},
              route("/", PathMatch::kPrefix, "default/web:https+https"))},
      {"nginx spellings with --nginx-annotations",
       {std::string(ingress("web")
                        .annotation("nginx.ingress.kubernetes.io/backend-protocol", "HTTPS")
                        .annotation("nginx.ingress.kubernetes.io/proxy-ssl-secret", "backend-ca")
                        .rule("foo.com", {path("/", "Prefix", "web", "443")})),
        svc, eps, ca_secret},
       config(only_route(kHttpsUp), {tls_upstream(kHttpsUp, {"10.0.0.1:8443"}, "web.default.svc",
                                                  kTestCaPem, "default/backend-ca")}),
       {},
       nginx_options},
      {"nginx spellings are not read by default",
       {std::string(ingress("web")
                        .annotation("nginx.ingress.kubernetes.io/backend-protocol", "HTTPS")
                        .rule("foo.com", {path("/", "Prefix", "web", "443")})),
        svc, eps},
       config(only_route("default/web:443"), {upstream("default/web:443", {"10.0.0.1:8443"})})},
  });
}

// auth-type basic: the users come from the auth-secret, one htpasswd line (auth-file) or one key
// (auth-map) per user; what cannot be used is reported and left out, and an authentication
// without users (no Secret, no usable line) refuses every request in the data plane.
TEST(TranslateTest, BasicAuth) {
  const std::string apr1 = "$apr1$saltsalt$HIDXe7D36X22w1CH4M1cQ.";
  const std::string bcrypt = "$2b$04$abcdefghijklmnopqrstuu/LVz6MZlItEy42I2juLihZ66HnQx/cy";
  auto auth_ingress = [](std::map<std::string, std::string> annotations) {
    IngressYaml y = ingress("web");
    for (const auto& [k, v] : annotations) y.annotation("tidegate.io/" + k, v);
    return std::string(y.rule("foo.com", {path("/", "Prefix", "web", "80")}));
  };
  auto with_auth = [&](std::vector<model::BasicAuthUser> users, std::string realm = "") {
    model::Route r = route("/", PathMatch::kPrefix, kWebUp);
    model::BasicAuth a;
    a.secret = "default/users";
    if (!realm.empty()) a.realm = realm;
    a.users = std::move(users);
    r.policy.mut().basic_auth = std::move(a);
    return config({vhost("foo.com", {r})}, {upstream(kWebUp, {"10.0.0.1:8080"})});
  };
  const std::string svc = web_service();
  const std::string eps = web_slice({{"10.0.0.1"}});
  const std::map<std::string, std::string> basic = {{"auth-type", "basic"},
                                                    {"auth-secret", "users"}};
  const std::string object = "Ingress default/web";
  run_cases({
      {"auth-file: users in order; comments, blank lines and a comment field are fine",
       {auth_ingress(basic), svc, eps,
        opaque_secret("users", {{"auth", "# staff\nalice:" + apr1 + "\n\nbob:" + bcrypt +
                                             ":Bob the builder\n"}})},
       with_auth({{"alice", apr1}, {"bob", bcrypt}})},
      {"auth-file: a line that cannot be used is left out, the others work",
       {auth_ingress(basic), svc, eps,
        opaque_secret("users", {{"auth", "alice:" + apr1 + "\ncarol:plaintext\nalice:" + bcrypt +
                                             "\nnocolon\n"}})},
       with_auth({{"alice", apr1}}),
       {error(object, "Secret default/users line 2: the hash of \"carol\" is not a supported hash"),
        error(object, "Secret default/users line 3: \"alice\" appears again"),
        error(object, "Secret default/users line 4: the hash of \"nocolon\" is not a supported")}},
      {"auth-map: one key per user",
       {auth_ingress({{"auth-type", "basic"},
                      {"auth-secret", "users"},
                      {"auth-secret-type", "auth-map"},
                      {"auth-realm", "Staff"}}),
        svc, eps, opaque_secret("users", {{"alice", apr1}, {"bob", bcrypt}})},
       with_auth({{"alice", apr1}, {"bob", bcrypt}}, "Staff")},
      {"no such Secret: no users (the data plane refuses every request)",
       {auth_ingress(basic), svc, eps},
       with_auth({}),
       {error(object,
              "annotation tidegate.io/auth-secret: Secret default/users not found; the "
              "Ingress's routes refuse every request (503)")}},
      {"a Secret without the auth key",
       {auth_ingress(basic), svc, eps, opaque_secret("users", {{"htpasswd", "alice:" + apr1}})},
       with_auth({}),
       {error(object, "Secret default/users has no \"auth\" key")}},
      {"no usable user",
       {auth_ingress(basic), svc, eps, opaque_secret("users", {{"auth", "alice:secret\n"}})},
       with_auth({}),
       {error(object, "line 1: the hash of \"alice\""),
        error(object, "Secret default/users has no usable user")}},
  });
}

// Client certificates (auth-tls-*): the Secret's ca.crt on each rule host's TLS entry; a setup
// that cannot be used keeps the entry with an empty bundle (the data plane refuses every request).
TEST(TranslateTest, ClientAuth) {
  const std::string svc = web_service();
  const std::string eps = web_slice({{"10.0.0.1"}});
  const std::string ca = opaque_secret("client-ca", {{"ca.crt", kTestCaPem}});
  const std::string web = "Ingress default/web";
  auto mtls_ingress = [](std::string name, std::string host,
                         std::map<std::string, std::string> annotations) {
    IngressYaml y = ingress(std::move(name));
    for (const auto& [k, v] : annotations) y.annotation("tidegate.io/" + k, v);
    return y.rule(std::move(host), {path("/", "Prefix", "web", "80")});
  };
  auto client_auth = [](std::string ca_pem = kTestCaPem) {
    model::ClientAuth a;
    a.secret = "default/client-ca";
    a.ca_pem = std::move(ca_pem);
    return a;
  };
  auto redirecting = [](std::string host, std::string ingress = "default/web") {
    auto vh = vhost(std::move(host), {route("/", PathMatch::kPrefix, kWebUp, std::move(ingress))});
    vh.ssl_redirect = true;
    return vh;
  };
  const std::vector<model::Upstream> up = {upstream(kWebUp, {"10.0.0.1:8080"})};
  auto with_hosts = [](model::Config c, std::vector<model::TlsHost> hosts, bool cert = false) {
    if (cert) {
      c.certificates.emplace("default/main-tls",
                             model::Certificate{"default/main-tls", kHostCertPem, kHostKeyPem});
    }
    for (auto& h : hosts) c.tls_hosts.emplace(h.host, h);
    return c;
  };
  const std::map<std::string, std::string> secret = {{"auth-tls-secret", "client-ca"}};
  run_cases({
      {"on a host with its own certificate; plain HTTP redirected",
       {std::string(mtls_ingress("web", "foo.com", secret).tls("foo.com", "main-tls")),
        host_tls_secret("main-tls"), ca, svc, eps},
       with_hosts(config({redirecting("foo.com")}, up),
                  {model::TlsHost{"foo.com", "default/main-tls", client_auth()}}, true)},
      {"a host without a TLS section gets the default certificate and is redirected too",
       {std::string(mtls_ingress("web", "foo.com", secret)), ca, svc, eps},
       with_hosts(config({redirecting("foo.com")}, up),
                  {model::TlsHost{"foo.com", "", client_auth()}})},
      {"ssl-redirect false keeps plain HTTP (the data plane refuses it with verify on)",
       {std::string(mtls_ingress("web", "foo.com",
                                 {{"auth-tls-secret", "client-ca"}, {"ssl-redirect", "false"}})),
        ca, svc, eps},
       with_hosts(config({vhost("foo.com", {route("/", PathMatch::kPrefix, kWebUp)})}, up),
                  {model::TlsHost{"foo.com", "", client_auth()}})},
      {"a host under a wildcard certificate keeps that certificate",
       {std::string(mtls_ingress("web", "a.foo.com", secret).tls("*.foo.com", "main-tls")),
        host_tls_secret("main-tls"), ca, svc, eps},
       with_hosts(config({redirecting("a.foo.com")}, up),
                  {model::TlsHost{"*.foo.com", "default/main-tls"},
                   model::TlsHost{"a.foo.com", "default/main-tls", client_auth()}},
                  true)},
      {"an alias is checked as its host",
       {std::string(mtls_ingress("web", "foo.com",
                                 {{"auth-tls-secret", "client-ca"}, {"server-alias", "bar.com"}})),
        ca, svc, eps},
       with_hosts(config({redirecting("foo.com"), redirecting("bar.com")}, up),
                  {model::TlsHost{"foo.com", "", client_auth()},
                   model::TlsHost{"bar.com", "", client_auth()}})},
      {"the Secret is missing: closed (empty bundle), reported",
       {std::string(mtls_ingress("web", "foo.com", secret)), svc, eps},
       with_hosts(config({redirecting("foo.com")}, up),
                  {model::TlsHost{"foo.com", "", client_auth("")}}),
       {error(web,
              "annotation tidegate.io/auth-tls-secret: Secret default/client-ca not found; "
              "the Ingress's hosts refuse every request (503)")}},
      {"no ca.crt, or one that does not parse: closed",
       {std::string(mtls_ingress("web", "foo.com", secret)),
        opaque_secret("client-ca", {{"ca.crt", "not a certificate"}}), svc, eps},
       with_hosts(config({redirecting("foo.com")}, up),
                  {model::TlsHost{"foo.com", "", client_auth("")}}),
       {error(web, "Secret default/client-ca ca.crt holds no PEM certificate")}},
      {"a ca.crl that does not parse: closed",
       {std::string(mtls_ingress("web", "foo.com", secret)),
        opaque_secret("client-ca", {{"ca.crt", kTestCaPem}, {"ca.crl", "junk"}}), svc, eps},
       with_hosts(config({redirecting("foo.com")}, up),
                  {model::TlsHost{"foo.com", "", client_auth("")}}),
       {error(web, "Secret default/client-ca ca.crl holds no PEM CRL")}},
      {"two Ingresses with other settings for one host: the older wins",
       {std::string(mtls_ingress("web", "foo.com", secret).created("2026-01-01T00:00:00Z")),
        std::string(
            mtls_ingress("other", "foo.com",
                         {{"auth-tls-secret", "client-ca"}, {"auth-tls-verify-client", "optional"}})
                .created("2026-02-01T00:00:00Z")),
        ca, svc, eps},
       with_hosts(config({redirecting("foo.com")}, up),
                  {model::TlsHost{"foo.com", "", client_auth()}}),
       {error("Ingress default/other",
              "host foo.com already has other client certificate settings from the older "
              "Ingress default/web")}},
      {"a wildcard's client certificates cover a name whose TLS entry another Ingress made",
       {std::string(mtls_ingress("web", "*.foo.com", secret).tls("*.foo.com", "main-tls")),
        std::string(ingress("certs").tls("a.foo.com", "main-tls")), host_tls_secret("main-tls"), ca,
        svc, eps},
       with_hosts(config({redirecting("*.foo.com")}, up),
                  {model::TlsHost{"*.foo.com", "default/main-tls", client_auth()},
                   model::TlsHost{"a.foo.com", "default/main-tls", client_auth()}},
                  true)},
      {"a host of its own under that wildcard is not checked unless its Ingress asks",
       {std::string(mtls_ingress("web", "*.foo.com", secret).tls("*.foo.com", "main-tls")),
        std::string(ingress("other").rule("b.foo.com", {path("/", "Prefix", "web", "80")})),
        host_tls_secret("main-tls"), ca, svc, eps},
       with_hosts(config({redirecting("*.foo.com"), redirecting("b.foo.com", "default/other")}, up),
                  {model::TlsHost{"*.foo.com", "default/main-tls", client_auth()},
                   model::TlsHost{"b.foo.com", "default/main-tls"}},
                  true)},
      {"a host with client certificates is not passed through",
       {std::string(mtls_ingress("web", "foo.com",
                                 {{"auth-tls-secret", "client-ca"}, {"ssl-passthrough", "true"}})),
        ca, svc, eps},
       with_hosts(config({redirecting("foo.com")}, up),
                  {model::TlsHost{"foo.com", "", client_auth()}}),
       {error(web,
              "ssl-passthrough: host foo.com has client certificate settings (auth-tls-*); "
              "it is not passed through")}},
      {"a rule without a host is not covered, and says so",
       {std::string(
            mtls_ingress("web", "foo.com", secret).rule("", {path("/any", "Prefix", "web", "80")})),
        ca, svc, eps},
       with_hosts(
           config({redirecting("foo.com"), vhost("*", {route("/any", PathMatch::kPrefix, kWebUp)})},
                  up),
           {model::TlsHost{"foo.com", "", client_auth()}}),
       {warning(web, "rules without a host get no client certificate check")}},
  });
}

// ssl-passthrough: each exact rule host's TLS entry names the upstream of the Ingress's "/" path.
TEST(TranslateTest, Passthrough) {
  const std::string svc = web_service();
  const std::string eps = web_slice({{"10.0.0.1"}});
  const std::string web = "Ingress default/web";
  const std::string kPt = "tidegate.io/ssl-passthrough";
  const std::vector<model::Upstream> up = {upstream(kWebUp, {"10.0.0.1:8080"})};
  auto passed = [](model::Config c, std::vector<std::string> hosts) {
    for (auto& h : hosts) c.tls_hosts[h] = model::TlsHost{h, "", std::nullopt, kWebUp};
    return c;
  };
  auto root = [](std::string host, std::string ingress = "default/web") {
    return vhost(std::move(host), {route("/", PathMatch::kPrefix, kWebUp, std::move(ingress))});
  };
  run_cases({
      {"a host's TLS connections go to its \"/\" backend; plain HTTP is routed as usual",
       {std::string(ingress("web")
                        .annotation(kPt, "true")
                        .rule("pt.com", {path("/", "Prefix", "web", "80")})
                        .rule("other.com", {path("/", "Prefix", "web", "80")})),
        svc, eps},
       passed(config({root("pt.com"), root("other.com")}, up), {"pt.com", "other.com"})},
      {"its spec.tls certificate is not used, and that is said",
       {std::string(ingress("web")
                        .annotation(kPt, "true")
                        .rule("pt.com", {path("/", "Prefix", "web", "80")})
                        .tls("pt.com", "main-tls")),
        host_tls_secret("main-tls"), svc, eps},
       [&] {
         auto c = passed(config({root("pt.com")}, up), {"pt.com"});
         c.virtual_hosts["pt.com"].ssl_redirect = true;
         c.certificates.emplace("default/main-tls",
                                model::Certificate{"default/main-tls", kHostCertPem, kHostKeyPem});
         return c;
       }(),
       {warning(web,
                "ssl-passthrough: host pt.com is passed through: its TLS certificate is not "
                "used")}},
      {"no \"/\" path, a wildcard host, a rule without a host",
       {std::string(ingress("web")
                        .annotation(kPt, "true")
                        .rule("api.com", {path("/api", "Prefix", "web", "80")})
                        .rule("*.wild.com", {path("/", "Prefix", "web", "80")})
                        .rule("", {path("/any", "Prefix", "web", "80")})),
        svc, eps},
       config({vhost("api.com", {route("/api", PathMatch::kPrefix, kWebUp)}), root("*.wild.com"),
               vhost("*", {route("/any", PathMatch::kPrefix, kWebUp)})},
              up),
       {error(web, "*.wild.com is not an exact host name"),
        warning(web, "a rule without a host cannot be passed through"),
        error(web, "host api.com has no path \"/\" of this Ingress")}},
      {"an invalid value passes nothing through",
       {std::string(ingress("web").annotation(kPt, "on").rule("pt.com",
                                                              {path("/", "Prefix", "web", "80")})),
        svc, eps},
       config({root("pt.com")}, up),
       {error(web, "tidegate.io/ssl-passthrough: invalid value \"on\"")}},
      {"two Ingresses: the older passes the host through to its own backend",
       {std::string(ingress("web")
                        .created("2026-01-01T00:00:00Z")
                        .annotation(kPt, "true")
                        .rule("pt.com", {path("/", "Prefix", "web", "80")})),
        std::string(ingress("other")
                        .created("2026-02-01T00:00:00Z")
                        .annotation(kPt, "true")
                        .rule("pt.com", {path("/", "Prefix", "web", "80")})),
        svc, eps},
       passed(config({root("pt.com")}, up), {"pt.com"}),
       {error("Ingress default/other",
              "host pt.com is already passed through by the older Ingress default/web")}},
  });
}

// From 1,000 upstreams on, they are built on a second thread while the virtual hosts are
// assembled; the result, diagnostics and their order included, is the one-thread result. The
// objects give diagnostics from both sides: the hosts' (a server-alias that is a host of its own)
// and the upstreams' (ExternalName Services, a headless Service under service-upstream, an
// invalid endpoint address in a slice two upstreams share, reported once).
TEST(TranslateTest, ManyUpstreamsBuiltBesideTheHostsGiveTheOneThreadResult) {
  std::vector<std::string> docs;
  constexpr int kApps = 1100;
  for (int i = 0; i < kApps; ++i) {
    const std::string app = "app-" + std::to_string(i);
    IngressYaml ing = ingress(app);
    ing.rule(app + ".example", {path("/", "Prefix", app, "80")});
    if (i % 100 == 5) {
      ing.annotation("tidegate.io/server-alias", "app-" + std::to_string(i + 1) + ".example");
    }
    if (i % 10 == 1) ing.annotation("tidegate.io/service-upstream", "true");
    docs.push_back(ing);
    if (i % 10 == 0) {
      docs.push_back(service(app, {{"http", 80, "8080"}}, "default", "ExternalName"));
    } else if (i % 10 == 1) {
      std::string svc = web_service(app);
      docs.push_back(svc.replace(svc.find("spec:\n") + 6, 0, "  clusterIP: None\n"));
    } else {
      docs.push_back(web_service(app));
    }
    std::vector<Ep> eps = {{"10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250)}};
    if (i % 50 == 7) {
      eps.push_back({"not-an-address"});
      // A second upstream of the same Service (HTTPS to the same port) reads the same slice.
      docs.push_back(ingress(app + "-tls")
                         .annotation("tidegate.io/backend-protocol", "HTTPS")
                         .rule(app + "-tls.example", {path("/", "Prefix", app, "80")}));
    }
    docs.push_back(slice(app + "-1", app, eps, {{"http", 8080}}));
  }
  const store::Store store = load_store(docs, {});
  TranslateOptions one_thread;
  one_thread.upstreams_beside_from = std::numeric_limits<size_t>::max();
  const TranslateResult want = translate(store, one_thread);
  ASSERT_GE(want.config.upstreams.size(), TranslateOptions{}.upstreams_beside_from);
  const TranslateResult got = translate(store);  // the default: on a second thread

  EXPECT_EQ(got.config, want.config);
  EXPECT_EQ(got.diagnostics, want.diagnostics);
  EXPECT_EQ(got.fail_closed_upstreams, want.fail_closed_upstreams);
  EXPECT_EQ(got.service_ip_upstreams, want.service_ip_upstreams);
  EXPECT_EQ(model::validate(got.config), std::vector<std::string>{});

  // Both sides reported, in the one-thread order: the hosts' first, then the upstreams'.
  auto count = [&](const std::string& text) {
    return std::count_if(got.diagnostics.begin(), got.diagnostics.end(), [&](const Diagnostic& d) {
      return d.message.find(text) != d.message.npos;
    });
  };
  auto first = [&](const std::string& text) {
    return std::find_if(
               got.diagnostics.begin(), got.diagnostics.end(),
               [&](const Diagnostic& d) { return d.message.find(text) != d.message.npos; }) -
           got.diagnostics.begin();
  };
  EXPECT_EQ(count("is a host of its own"), kApps / 100);
  EXPECT_EQ(count("type ExternalName is not supported"), kApps / 10);
  EXPECT_EQ(count("has no cluster IP"), kApps / 10);
  EXPECT_EQ(count("not-an-address"), kApps / 50);  // once per slice, not per upstream
  EXPECT_LT(first("is a host of its own"), first("type ExternalName is not supported"));
}

// The routes of one Ingress share one policy object (lib/model/shared.h), as do the upstreams
// it names, and routes and upstreams with the default policy hold none: a copy costs a pointer,
// not the policy's 560 (264) bytes. The values are those of an unshared translation (the policy
// tables check them); this checks the sharing, which the memory figures in docs/benchmarks.md
// rely on.
TEST(TranslateTest, RoutesOfAnIngressShareItsPolicy) {
  std::vector<std::string> docs = {
      ingress("timed")
          .annotation("tidegate.io/proxy-read-timeout", "90")
          .rule("a.example",
                {path("/one", "Prefix", "web", "80"), path("/two", "Exact", "web", "80")})
          .rule("b.example", {path("/", "Prefix", "web", "80")}),
      ingress("plain").rule("c.example",
                            {path("/", "Prefix", "web", "80"), path("/x", "Prefix", "web", "80")}),
      ingress("other-timed")
          .annotation("tidegate.io/proxy-read-timeout", "90")
          .rule("d.example", {path("/", "Prefix", "web", "80")}),
      ingress("balanced")
          .annotation("tidegate.io/load-balance", "ewma")
          .rule("e.example",
                {path("/", "Prefix", "left", "80"), path("/r", "Prefix", "right", "80")}),
      web_service("web"),
      web_service("left"),
      web_service("right"),
      slice("web-1", "web", {{"10.0.0.1"}}, {{"http", 8080}}),
      slice("left-1", "left", {{"10.0.0.2"}}, {{"http", 8080}}),
      slice("right-1", "right", {{"10.0.0.3"}}, {{"http", 8080}}),
  };
  const TranslateResult got = translate(load_store(docs, {}));
  const auto& routes = [&](const std::string& host) -> const std::vector<model::Route>& {
    return got.config.virtual_hosts.at(host).routes;
  };
  ASSERT_EQ(routes("a.example").size(), 2u);
  const model::Route& first = routes("a.example")[0];
  EXPECT_EQ(first.policy->read_timeout, std::chrono::seconds(90));
  EXPECT_TRUE(first.policy.shares_with(routes("a.example")[1].policy));
  EXPECT_TRUE(first.policy.shares_with(routes("b.example")[0].policy));
  // Another Ingress with the same annotation has a policy of its own (equal, not shared).
  EXPECT_FALSE(first.policy.shares_with(routes("d.example")[0].policy));
  EXPECT_EQ(first.policy, routes("d.example")[0].policy);
  // No annotations: the default, without an object.
  for (const auto& r : routes("c.example")) {
    EXPECT_TRUE(r.policy.shares_with(model::Shared<model::RoutePolicy>())) << r.path;
  }
  // Upstreams: the two of the Ingress with an upstream annotation share its policy.
  const auto& left = got.config.upstreams.at("default/left:80").policy;
  EXPECT_EQ(left->load_balance, model::LoadBalance::kEwma);
  EXPECT_TRUE(left.shares_with(got.config.upstreams.at("default/right:80").policy));
  EXPECT_TRUE(got.config.upstreams.at("default/web:80")
                  .policy.shares_with(model::Shared<model::UpstreamPolicy>()));
}

// service-upstream: the Service's ClusterIP and port are the upstream's one endpoint.
TEST(TranslateTest, ServiceUpstream) {
  auto with_ip = [](std::string ip) {
    std::string svc = web_service();
    return svc.replace(svc.find("spec:\n") + 6, 0, "  clusterIP: " + ip + "\n");
  };
  const std::string eps = web_slice({{"10.0.0.1"}, {"10.0.0.2"}});
  auto web = [](std::string value = "true") {
    return std::string(ingress("web")
                           .annotation("tidegate.io/service-upstream", value)
                           .rule("foo.com", {path("/", "Prefix", "web", "80")}));
  };
  auto served_by = [](std::vector<std::string> endpoints, bool service_upstream = true) {
    auto up = upstream(kWebUp, std::move(endpoints));
    up.policy.mut().service_upstream = service_upstream;
    return config({vhost("foo.com", {route("/", PathMatch::kPrefix, kWebUp)})}, {up});
  };
  run_cases({
      {"the ClusterIP and the Service port, not the endpoints",
       {web(), with_ip("10.96.0.10"), eps},
       served_by({"10.96.0.10:80"})},
      {"an IPv6 ClusterIP", {web(), with_ip("fd00::a"), eps}, served_by({"[fd00::a]:80"})},
      {"a headless Service: its endpoints, and a warning",
       {web(), with_ip("None"), eps},
       served_by({"10.0.0.1:8080", "10.0.0.2:8080"}),
       {warning("Ingress default/web",
                "Service default/web has no cluster IP (headless or ExternalName); its "
                "endpoints are used")}},
      {"false: the endpoints",
       {web("false"), with_ip("10.96.0.10"), eps},
       served_by({"10.0.0.1:8080", "10.0.0.2:8080"}, false)},
  });
}

// HTTP/2 upstreams: backend-protocol H2C, GRPC, GRPCS, and a Service port's appProtocol. They
// are other upstreams than the HTTP/1.1 ones of the same port ("+h2"), like HTTPS ones.
TEST(TranslateTest, Http2Backends) {
  auto h2_upstream = [](std::string name, std::vector<std::string> endpoints,
                        model::BackendProtocol protocol) {
    model::Upstream u = upstream(std::move(name), std::move(endpoints));
    u.policy.mut().protocol = protocol;
    if (protocol == model::BackendProtocol::kH2) {
      u.tls = model::UpstreamTls{true, "grpc.default.svc", ""};
    }
    return u;
  };
  auto ingress_on = [](std::string name, std::string svc, std::string port,
                       std::map<std::string, std::string> annotations, std::string host) {
    IngressYaml y = ingress(std::move(name));
    for (const auto& [k, v] : annotations) y.annotation("tidegate.io/" + k, v);
    return std::string(y.rule(host, {path("/", "Prefix", svc, port)}));
  };
  auto routes = [](std::vector<std::pair<std::string, std::string>> host_upstream) {
    std::vector<model::VirtualHost> out;
    for (auto& [host, up] : host_upstream) {
      out.push_back(
          vhost(host, {route("/", PathMatch::kPrefix, up, "default/" + host.substr(0, 1))}));
    }
    return out;
  };
  const std::string grpc_svc = service("grpc", {{"grpc", 50051, "50051"}});
  const std::string grpc_eps = slice("grpc-abc", "grpc", {{"10.0.0.9"}}, {{"grpc", 50051}});
  const std::string h2c_app = service("grpc", {{"grpc", 50051, "50051", "", "kubernetes.io/h2c"}});
  const auto kH2c = model::BackendProtocol::kH2c;
  run_cases({
      {"H2C: an HTTP/2 upstream of its own",
       {ingress_on("a", "grpc", "50051", {{"backend-protocol", "H2C"}}, "a.com"), grpc_svc,
        grpc_eps},
       config(routes({{"a.com", "default/grpc:50051+h2"}}),
              {h2_upstream("default/grpc:50051+h2", {"10.0.0.9:50051"}, kH2c)})},
      {"GRPC is H2C; an HTTP Ingress on the same port keeps its HTTP/1.1 upstream",
       {ingress_on("a", "grpc", "50051", {{"backend-protocol", "GRPC"}}, "a.com"),
        ingress_on("b", "grpc", "50051", {}, "b.com"), grpc_svc, grpc_eps},
       config(routes({{"a.com", "default/grpc:50051+h2"}, {"b.com", "default/grpc:50051"}}),
              {h2_upstream("default/grpc:50051+h2", {"10.0.0.9:50051"}, kH2c),
               upstream("default/grpc:50051", {"10.0.0.9:50051"})})},
      {"GRPCS: HTTP/2 over TLS",
       {ingress_on("a", "grpc", "50051", {{"backend-protocol", "GRPCS"}}, "a.com"), grpc_svc,
        grpc_eps},
       config(routes({{"a.com", "default/grpc:50051+h2+https"}}),
              {h2_upstream("default/grpc:50051+h2+https", {"10.0.0.9:50051"},
                           model::BackendProtocol::kH2)})},
      {"appProtocol kubernetes.io/h2c makes the port HTTP/2",
       {ingress_on("a", "grpc", "50051", {}, "a.com"), h2c_app, grpc_eps},
       config(routes({{"a.com", "default/grpc:50051+h2"}}),
              {h2_upstream("default/grpc:50051+h2", {"10.0.0.9:50051"}, kH2c)})},
      {"appProtocol grpc and h2c too; other values change nothing",
       {ingress_on("a", "grpc", "50051", {}, "a.com"), ingress_on("b", "web", "80", {}, "b.com"),
        ingress_on("c", "web", "81", {}, "c.com"),
        service("grpc", {{"grpc", 50051, "50051", "", "grpc"}}),
        service("web", {{"h2", 80, "8080", "", "h2c"}, {"ws", 81, "8081", "", "kubernetes.io/ws"}}),
        grpc_eps, slice("web-abc", "web", {{"10.0.0.1"}}, {{"h2", 8080}, {"ws", 8081}})},
       config(routes({{"a.com", "default/grpc:50051+h2"},
                      {"b.com", "default/web:80+h2"},
                      {"c.com", "default/web:81"}}),
              {h2_upstream("default/grpc:50051+h2", {"10.0.0.9:50051"}, kH2c),
               h2_upstream("default/web:80+h2", {"10.0.0.1:8080"}, kH2c),
               upstream("default/web:81", {"10.0.0.1:8081"})})},
      {"backend-protocol wins over appProtocol",
       {ingress_on("a", "grpc", "50051", {{"backend-protocol", "HTTP"}}, "a.com"), h2c_app,
        grpc_eps},
       config(routes({{"a.com", "default/grpc:50051"}}),
              {upstream("default/grpc:50051", {"10.0.0.9:50051"})})},
  });
}

TEST(TranslateTest, FailClosedUpstreamsAreListed) {
  auto store = load_store({std::string(ingress("web")
                                           .annotation("tidegate.io/backend-protocol", "HTTPS")
                                           .annotation("tidegate.io/proxy-ssl-secret", "missing")
                                           .rule("foo.com", {path("/", "Prefix", "web", "443")})),
                           service("web", {{"https", 443, "8443"}}),
                           slice("web-abc", "web", {{"10.0.0.1"}}, {{"https", 8443}})},
                          {});
  TranslateResult got = translate(store);
  EXPECT_EQ(got.fail_closed_upstreams, std::set<std::string>{"default/web:443+https"});
  ASSERT_TRUE(got.config.upstreams.contains("default/web:443+https"));
  EXPECT_TRUE(got.config.upstreams.at("default/web:443+https").endpoints.empty());
}

// ---- Traffic policy (issue #6): annotations -> Route::policy, Upstream::policy, canaries ----

model::Route with_policy(model::Route r, void (*f)(model::RoutePolicy&)) {
  f(r.policy.mut());
  return r;
}

model::Upstream with_upstream_policy(model::Upstream u, void (*f)(model::UpstreamPolicy&)) {
  f(u.policy.mut());
  return u;
}

model::Route with_canary(model::Route r, model::Canary c) {
  r.canary = std::move(c);
  return r;
}

TEST(TranslateTest, Policies) {
  const std::string web = web_service();
  const std::string web_eps = web_slice({{"10.0.0.1"}});
  const std::string api = web_service("api");
  const std::string api_eps = web_slice({{"10.0.0.2"}}, "api");
  auto body_8m = [](model::RoutePolicy& p) { p.max_body_bytes = 8u << 20; };
  auto ewma = [](model::UpstreamPolicy& p) { p.load_balance = model::LoadBalance::kEwma; };
  auto least = [](model::UpstreamPolicy& p) { p.load_balance = model::LoadBalance::kLeastConn; };
  TranslateOptions nginx_options;
  nginx_options.nginx_annotations = true;

  run_cases({
      {"route and upstream annotations reach every route, the default route and the upstream",
       {std::string(ingress("web")
                        .annotation("tidegate.io/proxy-body-size", "8m")
                        .annotation("tidegate.io/load-balance", "ewma")
                        .default_backend("web", "80")
                        .rule("foo.com", {path("/a", "Prefix", "web", "80"),
                                          path("/b", "Exact", "web", "80")})),
        web, web_eps},
       config({vhost("foo.com", {with_policy(route("/a", PathMatch::kPrefix, kWebUp), body_8m),
                                 with_policy(route("/b", PathMatch::kExact, kWebUp), body_8m)})},
              {with_upstream_policy(upstream(kWebUp, {"10.0.0.1:8080"}), ewma)},
              with_policy(route("/", PathMatch::kPrefix, kWebUp), body_8m))},
      {"an invalid annotation is reported and its default applies",
       {std::string(ingress("web")
                        .annotation("tidegate.io/proxy-body-size", "huge")
                        .rule("foo.com", {path("/", "Prefix", "web", "80")})),
        web, web_eps},
       config({vhost("foo.com", {route("/", PathMatch::kPrefix, kWebUp)})},
              {upstream(kWebUp, {"10.0.0.1:8080"})}),
       {error("Ingress default/web", "annotation tidegate.io/proxy-body-size: invalid value")}},
      {"one path and backend from two Ingresses with other route annotations: the older wins",
       {std::string(ingress("a")
                        .created("2024-01-01T00:00:00Z")
                        .annotation("tidegate.io/proxy-body-size", "8m")
                        .rule("foo.com", {path("/", "Prefix", "web", "80")})),
        std::string(ingress("b")
                        .created("2024-01-02T00:00:00Z")
                        .rule("foo.com", {path("/", "Prefix", "web", "80")})),
        web, web_eps},
       config({vhost("foo.com",
                     {with_policy(route("/", PathMatch::kPrefix, kWebUp, "default/a"), body_8m)})},
              {upstream(kWebUp, {"10.0.0.1:8080"})}),
       {error("Ingress default/b",
              "is already routed to default/web:80 by Ingress default/a with other route "
              "annotations (the older one wins); path dropped")}},
      {"one upstream, other upstream annotations: the older's apply, the younger keeps its path",
       {std::string(ingress("a")
                        .created("2024-01-01T00:00:00Z")
                        .annotation("tidegate.io/load-balance", "ewma")
                        .rule("a.com", {path("/", "Prefix", "web", "80")})),
        std::string(ingress("b")
                        .created("2024-01-02T00:00:00Z")
                        .annotation("tidegate.io/load-balance", "least_conn")
                        .rule("b.com", {path("/", "Prefix", "web", "80"),
                                        path("/x", "Prefix", "web", "80")})),
        web, web_eps},
       config({vhost("a.com", {route("/", PathMatch::kPrefix, kWebUp, "default/a")}),
               vhost("b.com", {route("/", PathMatch::kPrefix, kWebUp, "default/b"),
                               route("/x", PathMatch::kPrefix, kWebUp, "default/b")})},
              {with_upstream_policy(upstream(kWebUp, {"10.0.0.1:8080"}), ewma)}),
       {error("Ingress default/b",
              "upstream default/web:80 already has the settings {\"load_balance\":\"ewma\"} from "
              "Ingress default/a (the older one wins); this Ingress's upstream annotations "
              "{\"load_balance\":\"least_conn\"} are ignored for it")}},
      {"canary by weight: the main route gets it, the canary upstream its own settings",
       {std::string(ingress("main").rule("foo.com", {path("/", "Prefix", "web", "80")})),
        std::string(ingress("canary")
                        .annotation("tidegate.io/canary", "true")
                        .annotation("tidegate.io/canary-weight", "10")
                        .annotation("tidegate.io/canary-by-header", "X-Canary")
                        .annotation("tidegate.io/load-balance", "least_conn")
                        .rule("foo.com", {path("/", "Prefix", "api", "80")})),
        web, web_eps, api, api_eps},
       config({vhost("foo.com",
                     {with_canary(route("/", PathMatch::kPrefix, kWebUp, "default/main"),
                                  model::Canary{"default/api:80", 10, 100, "X-Canary", "", ""})})},
              {upstream(kWebUp, {"10.0.0.1:8080"}),
               with_upstream_policy(upstream("default/api:80", {"10.0.0.2:8080"}), least)})},
      {"a canary is processed after every main Ingress, whatever its age; Prefix slashes ignored",
       {std::string(ingress("canary")
                        .created("2020-01-01T00:00:00Z")
                        .annotation("tidegate.io/canary", "true")
                        .annotation("tidegate.io/canary-weight", "50")
                        .rule("foo.com", {path("/app/", "Prefix", "api", "80")})),
        std::string(ingress("main")
                        .created("2024-01-01T00:00:00Z")
                        .rule("foo.com", {path("/app", "Prefix", "web", "80")})),
        web, web_eps, api, api_eps},
       config(
           {vhost("foo.com", {with_canary(route("/app", PathMatch::kPrefix, kWebUp, "default/main"),
                                          model::Canary{"default/api:80", 50})})},
           {upstream(kWebUp, {"10.0.0.1:8080"}), upstream("default/api:80", {"10.0.0.2:8080"})})},
      {"a canary without a main route is dropped",
       {std::string(ingress("canary")
                        .annotation("tidegate.io/canary", "true")
                        .rule("foo.com", {path("/", "Prefix", "api", "80")})),
        std::string(ingress("main").rule("foo.com", {path("/", "Exact", "web", "80")})), web,
        web_eps, api, api_eps},
       config({vhost("foo.com", {route("/", PathMatch::kExact, kWebUp, "default/main")})},
              {upstream(kWebUp, {"10.0.0.1:8080"})}),
       {error("Ingress default/canary",
              "spec.rules[0].http.paths[0]: canary Prefix path \"/\" on host \"foo.com\" has no "
              "main route; path dropped")}},
      {"a canary to the main route's own backend does nothing",
       {std::string(ingress("main").rule("foo.com", {path("/", "Prefix", "web", "80")})),
        std::string(ingress("canary")
                        .annotation("tidegate.io/canary", "true")
                        .rule("foo.com", {path("/", "Prefix", "web", "80")})),
        web, web_eps},
       config({vhost("foo.com", {route("/", PathMatch::kPrefix, kWebUp, "default/main")})},
              {upstream(kWebUp, {"10.0.0.1:8080"})}),
       {warning("Ingress default/canary", "already goes to default/web:80; nothing to split")}},
      {"two canaries for one route: the older wins",
       {std::string(ingress("main").rule("foo.com", {path("/", "Prefix", "web", "80")})),
        std::string(ingress("c1")
                        .created("2024-01-01T00:00:00Z")
                        .annotation("tidegate.io/canary", "true")
                        .annotation("tidegate.io/canary-weight", "5")
                        .rule("foo.com", {path("/", "Prefix", "api", "80")})),
        std::string(ingress("c2")
                        .created("2024-01-02T00:00:00Z")
                        .annotation("tidegate.io/canary", "true")
                        .annotation("tidegate.io/canary-weight", "90")
                        .rule("foo.com", {path("/", "Prefix", "api", "http")})),
        web, web_eps, api, api_eps},
       config({vhost("foo.com", {with_canary(route("/", PathMatch::kPrefix, kWebUp, "default/main"),
                                             model::Canary{"default/api:80", 5})})},
              {upstream(kWebUp, {"10.0.0.1:8080"}), upstream("default/api:80", {"10.0.0.2:8080"})}),
       {error("Ingress default/c2",
              "the main route already has a canary from Ingress default/c1 (one canary per route; "
              "the older one wins); path dropped")}},
      {"a canary's default backend, TLS and route annotations are ignored with warnings",
       {std::string(ingress("main").rule("foo.com", {path("/", "Prefix", "web", "80")})),
        std::string(ingress("canary")
                        .annotation("tidegate.io/canary", "true")
                        .annotation("tidegate.io/proxy-body-size", "1m")
                        .default_backend("api", "80")
                        .tls("foo.com", "foo-cert")
                        .rule("foo.com", {path("/", "Prefix", "api", "80")})),
        web, web_eps, api, api_eps},
       config({vhost("foo.com", {with_canary(route("/", PathMatch::kPrefix, kWebUp, "default/main"),
                                             model::Canary{"default/api:80"})})},
              {upstream(kWebUp, {"10.0.0.1:8080"}), upstream("default/api:80", {"10.0.0.2:8080"})}),
       {warning("Ingress default/canary", "tidegate.io/proxy-body-size: ignored on a canary"),
        warning("Ingress default/canary", "spec.defaultBackend: ignored on a canary Ingress"),
        warning("Ingress default/canary", "spec.tls: ignored on a canary Ingress")}},
      {"the main route's annotations stay with it when a canary attaches",
       {std::string(ingress("main")
                        .annotation("tidegate.io/proxy-body-size", "8m")
                        .rule("foo.com", {path("/", "Prefix", "web", "80")})),
        std::string(ingress("canary")
                        .annotation("tidegate.io/canary", "true")
                        .annotation("tidegate.io/canary-by-cookie", "beta")
                        .rule("foo.com", {path("/", "Prefix", "api", "80")})),
        web, web_eps, api, api_eps},
       config(
           {vhost("foo.com",
                  {with_canary(
                      with_policy(route("/", PathMatch::kPrefix, kWebUp, "default/main"), body_8m),
                      model::Canary{"default/api:80", 0, 100, "", "", "beta"})})},
           {upstream(kWebUp, {"10.0.0.1:8080"}), upstream("default/api:80", {"10.0.0.2:8080"})})},
      {"nginx spellings of use-regex, ssl-redirect and the policy with --nginx-annotations",
       {std::string(ingress("web")
                        .annotation("nginx.ingress.kubernetes.io/use-regex", "true")
                        .annotation("nginx.ingress.kubernetes.io/ssl-redirect", "maybe")
                        .annotation("nginx.ingress.kubernetes.io/load-balance", "ewma")
                        .rule("foo.com", {path("/v[0-9]+", "Prefix", "web", "80")})),
        web, web_eps},
       config({vhost("foo.com", {route("/v[0-9]+", PathMatch::kRegex, kWebUp)})},
              {with_upstream_policy(upstream(kWebUp, {"10.0.0.1:8080"}), ewma)}),
       {warning("Ingress default/web",
                "annotation nginx.ingress.kubernetes.io/ssl-redirect: expected \"true\" or "
                "\"false\", got \"maybe\"")},
       nginx_options},
      {"without --nginx-annotations those spellings are not read",
       {std::string(ingress("web")
                        .annotation("nginx.ingress.kubernetes.io/use-regex", "true")
                        .annotation("nginx.ingress.kubernetes.io/load-balance", "ewma")
                        .rule("foo.com", {path("/v1", "Prefix", "web", "80")})),
        web, web_eps},
       config({vhost("foo.com", {route("/v1", PathMatch::kPrefix, kWebUp)})},
              {upstream(kWebUp, {"10.0.0.1:8080"})})},
  });
}

TEST(TranslateTest, Substitutions) {
  const std::vector<std::string> backends = {web_service("web"), web_slice({{"10.0.0.1"}}, "web"),
                                             web_service("api"), web_slice({{"10.0.0.2"}}, "api")};
  auto with = [&](std::vector<std::string> objects) {
    objects.insert(objects.end(), backends.begin(), backends.end());
    return objects;
  };
  const model::Upstream web = upstream("default/web:80", {"10.0.0.1:8080"});
  const model::Upstream api = upstream("default/api:80", {"10.0.0.2:8080"});
  const std::string kSubs = "tidegate.io/substitutions";
  const std::string kTypes = "tidegate.io/substitution-types";
  const std::string kBuffer = "tidegate.io/substitution-max-buffer";
  const std::string kSet = "tidegate.io/substitution-rule-set";
  // One Ingress "a" routing foo.com / and /api, with the given annotations.
  auto ing = [](std::vector<std::pair<std::string, std::string>> annotations) {
    IngressYaml i = ingress("a");
    for (const auto& [k, v] : annotations) i.annotation(k, v);
    return std::string(
        i.rule("foo.com", {path("/", "Prefix", "web", "80"), path("/api", "Prefix", "api", "80")}));
  };
  // foo.com's two routes, with or without the substitution "default/a".
  auto routes = [&](std::string sub) {
    return config(
        {vhost("foo.com",
               {substituted(route("/", PathMatch::kPrefix, web.name, "default/a"), sub),
                substituted(route("/api", PathMatch::kPrefix, api.name, "default/a"), sub)})},
        {web, api});
  };
  const std::vector<substitution::Rule> two = {{"example\\.com", "clone.test", ""},
                                               {"(UA-)[0-9]+", "$1-0", "i"}};
  const std::string two_yaml =
      rules_annotation({{"example\\.com", "clone.test", ""}, {"(UA-)[0-9]+", "$1-0", "i"}});
  std::vector<RuleYaml> seventy;
  for (int i = 0; i < 70; ++i) seventy.push_back({"word" + std::to_string(i), "x", ""});

  run_cases({
      {"no annotation: no substitution", with({ing({})}), routes("")},
      {"the Ingress's rules apply to every path, in order, with the defaults",
       with({ing({{kSubs, two_yaml}})}),
       with_substitutions(routes("default/a"), {subst("default/a", two)})},
      {"an empty replacement deletes; flags may be left out",
       with({ing({{kSubs, "[{match: tracker, replace: ''}]"}})}),
       with_substitutions(routes("default/a"), {subst("default/a", {{"tracker", "", ""}})})},
      {"block-style YAML list",
       with({ing({{kSubs, "- match: a\n  replace: b\n- match: c\n  replace: d\n  flags: i\n"}})}),
       with_substitutions(routes("default/a"),
                          {subst("default/a", {{"a", "b", ""}, {"c", "d", "i"}})})},
      {"types and buffer size",
       with({ing({{kSubs, two_yaml},
                  {kTypes, "text/html, APPLICATION/XHTML+XML text/html"},
                  {kBuffer, "1m"}})}),
       with_substitutions(
           routes("default/a"),
           {subst("default/a", two, {"application/xhtml+xml", "text/html"}, 1 << 20)})},
      {"an invalid type is skipped",
       with({ing({{kSubs, two_yaml}, {kTypes, "text/plain,html"}})}),
       with_substitutions(routes("default/a"), {subst("default/a", two, {"text/plain"})}),
       {error("Ingress default/a",
              "tidegate.io/substitution-types: \"html\" is not a MIME type (type/subtype, no "
              "parameters); skipped")}},
      {"no valid type: text/html",
       with({ing({{kSubs, two_yaml}, {kTypes, "text/*"}})}),
       with_substitutions(routes("default/a"), {subst("default/a", two)}),
       {error("Ingress default/a", "\"text/*\" is not a MIME type"),
        error("Ingress default/a",
              "tidegate.io/substitution-types: no valid MIME type in \"text/*\"; using "
              "text/html")}},
      {"buffer size out of bounds: the default",
       with({ing({{kSubs, two_yaml}, {kBuffer, "32m"}})}),
       with_substitutions(routes("default/a"), {subst("default/a", two)}),
       {error("Ingress default/a",
              "tidegate.io/substitution-max-buffer: \"32m\" is not a size between 1k and 16m "
              "(such as 64k or 1m); using 64k")}},
      {"invalid rules are dropped one by one, naming each; the rest apply and routing stays",
       with({ing({{kSubs, rules_annotation({{"ok", "fine", ""},
                                            {"(a", "x", ""},
                                            {"a*", "x", ""},
                                            {"(?=x)y", "x", ""},
                                            {"(a)\\1", "x", ""},
                                            {"b", "x", "g"},
                                            {"c", "$1", ""}})}})}),
       with_substitutions(routes("default/a"), {subst("default/a", {{"ok", "fine", ""}})}),
       {error("Ingress default/a",
              "tidegate.io/substitutions: rule 1 (match \"(a\"): invalid regex: missing ): (a; "
              "rule dropped"),
        error("Ingress default/a",
              "tidegate.io/substitutions: rule 2 (match \"a*\"): match can match the empty "
              "string"),
        error("Ingress default/a",
              "tidegate.io/substitutions: rule 3 (match \"(?=x)y\"): invalid regex: invalid perl "
              "operator: (?= (lookahead and lookbehind are not supported"),
        error("Ingress default/a",
              "tidegate.io/substitutions: rule 4 (match \"(a)\\1\"): invalid regex: invalid "
              "escape sequence: \\1 (backreferences such as \\1 are not supported"),
        error("Ingress default/a",
              "tidegate.io/substitutions: rule 5 (match \"b\"): unknown flags \"g\" (the only "
              "flag is \"i\"); rule dropped"),
        error("Ingress default/a",
              "tidegate.io/substitutions: rule 6 (match \"c\"): replacement uses $1 but the "
              "pattern has 0 capture groups; rule dropped")}},
      {"no valid rule: no substitution, routing unchanged",
       with({ing({{kSubs, rules_annotation({{"a*", "x", ""}})}})}),
       routes(""),
       {error("Ingress default/a", "rule 0 (match \"a*\"): match can match the empty string")}},
      {"a rule of the wrong shape is dropped, the others kept",
       with({ing({{kSubs,
                   "[{match: a, replace: b}, {match: c}, {match: d, replace: e, flag: i}, "
                   "x, {match: [f], replace: g}, {match: h, replace: i}]"}})}),
       with_substitutions(routes("default/a"),
                          {subst("default/a", {{"a", "b", ""}, {"h", "i", ""}})}),
       {error("Ingress default/a",
              "tidegate.io/substitutions: rule 1: replace: required field missing; rule dropped"),
        error("Ingress default/a",
              "tidegate.io/substitutions: rule 2: unknown field \"flag\" (a rule has match, "
              "replace and flags); rule dropped"),
        error("Ingress default/a",
              "tidegate.io/substitutions: rule 3: expected a mapping {match, replace, flags}, got "
              "a scalar; rule dropped"),
        error("Ingress default/a",
              "tidegate.io/substitutions: rule 4: match: expected a string, got a sequence; rule "
              "dropped")}},
      {"annotation that is not YAML: no rules, routing unchanged",
       with({ing({{kSubs, "[{match: a, replace: b}"}})}),
       routes(""),
       {error("Ingress default/a", "tidegate.io/substitutions: invalid YAML at line 1")}},
      {"annotation that is not a list",
       with({ing({{kSubs, "match: a"}})}),
       routes(""),
       {error("Ingress default/a",
              "tidegate.io/substitutions: expected a YAML list of {match, replace, flags}, got a "
              "mapping; no rules from it")}},
      {"types without rules have no effect",
       with({ing({{kTypes, "text/plain"}})}),
       routes(""),
       {warning("Ingress default/a",
                "substitution annotations without tidegate.io/substitutions or "
                "tidegate.io/substitution-rule-set have no effect")}},
      {"the rule set's rules come before the Ingress's own",
       with({ing({{kSet, "common"}, {kSubs, rules_annotation({{"own", "x", ""}})}}),
             rule_set("common", {{"first", "1", ""}, {"second", "2", "i"}})}),
       with_substitutions(
           routes("default/a"),
           {subst("default/a", {{"first", "1", ""}, {"second", "2", "i"}, {"own", "x", ""}})})},
      {"a rule set alone",
       with({ing({{kSet, "common"}, {kTypes, "text/plain"}}),
             rule_set("common", {{"first", "1", ""}})}),
       with_substitutions(routes("default/a"),
                          {subst("default/a", {{"first", "1", ""}}, {"text/plain"})})},
      {"a missing rule set: the Ingress's own rules still apply",
       with({ing({{kSet, "nope"}, {kSubs, rules_annotation({{"own", "x", ""}})}})}),
       with_substitutions(routes("default/a"), {subst("default/a", {{"own", "x", ""}})}),
       {error("Ingress default/a",
              "tidegate.io/substitution-rule-set: SubstitutionRuleSet default/nope not found; "
              "only the Ingress's own rules apply")}},
      {"a rule set in another namespace is not found",
       with({ing({{kSet, "common"}}), rule_set("common", {{"first", "1", ""}}, "other")}),
       routes(""),
       {error("Ingress default/a", "SubstitutionRuleSet default/common not found")}},
      {"an invalid rule of the rule set is dropped, naming the set, the rule and the Ingress",
       with({ing({{kSet, "common"}, {kSubs, rules_annotation({{"own", "x", ""}})}}),
             rule_set("common", {{"first", "1", ""}, {"(?<!a)b", "2", ""}, {"c", "3", "I"}})}),
       with_substitutions(routes("default/a"),
                          {subst("default/a", {{"first", "1", ""}, {"own", "x", ""}})}),
       {error("Ingress default/a",
              "tidegate.io/substitution-rule-set: SubstitutionRuleSet default/common "
              "spec.rules[1] (match \"(?<!a)b\"): invalid regex"),
        error("Ingress default/a",
              "tidegate.io/substitution-rule-set: SubstitutionRuleSet default/common "
              "spec.rules[2] (match \"c\"): unknown flags \"I\"")}},
      {"more than 64 rules with the rule set's: the last ones are dropped",
       with({ing({{kSet, "big"},
                  {kSubs,
                   rules_annotation(std::vector<RuleYaml>(seventy.begin() + 60, seventy.end()))}}),
             rule_set("big", std::vector<RuleYaml>(seventy.begin(), seventy.begin() + 60))}),
       [&] {
         std::vector<substitution::Rule> kept;
         for (int i = 0; i < 64; ++i) kept.push_back({"word" + std::to_string(i), "x", ""});
         return with_substitutions(routes("default/a"), {subst("default/a", kept)});
       }(),
       {error("Ingress default/a",
              "tidegate.io/substitutions: rule 4 (match \"word64\"): more than 64 rules "
              "(counting the rule set's); rule dropped"),
        error("Ingress default/a", "rule 5 (match \"word65\")"),
        error("Ingress default/a", "rule 6 (match \"word66\")"),
        error("Ingress default/a", "rule 7 (match \"word67\")"),
        error("Ingress default/a", "rule 8 (match \"word68\")"),
        error("Ingress default/a", "rule 9 (match \"word69\")")}},
      {"the default backend gets the Ingress's substitution",
       with({ingress("a")
                 .annotation(kSubs, rules_annotation({{"x", "y", ""}}))
                 .default_backend("web", "80")}),
       with_substitutions(
           config({}, {web},
                  substituted(route("/", PathMatch::kPrefix, web.name, "default/a"), "default/a")),
           {subst("default/a", {{"x", "y", ""}})})},
      {"same path and backend with other substitutions: a conflict, the older wins",
       with({ingress("a")
                 .created("2024-01-01T00:00:00Z")
                 .annotation(kSubs, rules_annotation({{"x", "y", ""}}))
                 .rule("foo.com", {path("/", "Prefix", "web", "80")}),
             ingress("b")
                 .created("2024-02-01T00:00:00Z")
                 .annotation(kSubs, rules_annotation({{"x", "z", ""}}))
                 .rule("foo.com", {path("/", "Prefix", "web", "80")})}),
       with_substitutions(config({vhost("foo.com", {substituted(route("/", PathMatch::kPrefix,
                                                                      web.name, "default/a"),
                                                                "default/a")})},
                                 {web}),
                          {subst("default/a", {{"x", "y", ""}})}),
       {error("Ingress default/b",
              "spec.rules[0].http.paths[0]: host \"foo.com\" Prefix path \"/\" is already "
              "routed to default/web:80 by Ingress default/a with other substitutions (the older "
              "one wins); path dropped")}},
      {"same path and backend with equal substitutions: no conflict",
       with({ingress("a")
                 .created("2024-01-01T00:00:00Z")
                 .annotation(kSubs, rules_annotation({{"x", "y", ""}}))
                 .rule("foo.com", {path("/", "Prefix", "web", "80")}),
             ingress("b")
                 .created("2024-02-01T00:00:00Z")
                 .annotation(kSubs, rules_annotation({{"x", "y", ""}}))
                 .rule("foo.com", {path("/", "Prefix", "web", "80")})}),
       with_substitutions(config({vhost("foo.com", {substituted(route("/", PathMatch::kPrefix,
                                                                      web.name, "default/a"),
                                                                "default/a")})},
                                 {web}),
                          {subst("default/a", {{"x", "y", ""}})})},
      {"same path and backend, one without substitutions: a conflict",
       with({ingress("a")
                 .created("2024-01-01T00:00:00Z")
                 .rule("foo.com", {path("/", "Prefix", "web", "80")}),
             ingress("b")
                 .created("2024-02-01T00:00:00Z")
                 .annotation(kSubs, rules_annotation({{"x", "y", ""}}))
                 .rule("foo.com", {path("/", "Prefix", "web", "80")})}),
       config({vhost("foo.com", {route("/", PathMatch::kPrefix, web.name, "default/a")})}, {web}),
       {error("Ingress default/b", "with other substitutions (the older one wins); path dropped")}},
  });
}

// ---- Determinism and purity ----

TEST(TranslateTest, DeterministicWhateverTheInsertionOrder) {
  std::vector<std::string> docs = {
      ingress("a")
          .created("2024-01-02T00:00:00Z")
          .rule("foo.com", {path("/", "Prefix", "web", "80")}),
      ingress("b")
          .created("2024-01-01T00:00:00Z")
          .rule("foo.com", {path("/", "Prefix", "api", "80"), path("/b", "Exact", "api", "80")})
          .default_backend("web", "80"),
      ingress("c").rule("", {path("/c", "Prefix", "missing", "80")}),
      web_service("web"),
      web_service("api"),
      slice("web-1", "web", {{"10.0.0.2"}, {"10.0.0.1"}}, {{"http", 8080}}),
      slice("web-2", "web", {{"10.0.0.3"}, {"10.0.0.1"}}, {{"http", 8080}}),
      slice("api-1", "api", {draining("10.0.0.9")}, {{"http", 8080}}),
  };
  std::vector<size_t> order(docs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;

  std::optional<TranslateResult> first;
  int permutations = 0;
  // Rotations and reversals of the input: enough to change every map's insertion order.
  for (size_t rot = 0; rot < docs.size(); ++rot) {
    for (bool reverse : {false, true}) {
      std::vector<std::string> shuffled;
      for (size_t i = 0; i < docs.size(); ++i) shuffled.push_back(docs[(i + rot) % docs.size()]);
      if (reverse) std::reverse(shuffled.begin(), shuffled.end());
      store::Store store = load_store(shuffled, {});
      TranslateResult got = translate(store, {});
      TranslateResult again = translate(store, {});  // same store, same answer
      EXPECT_EQ(got.config, again.config);
      EXPECT_EQ(got.diagnostics, again.diagnostics);
      EXPECT_EQ(model::validate(got.config), std::vector<std::string>{});
      if (!first) {
        first = got;
      } else {
        EXPECT_EQ(got.config, first->config) << dump(got.config) << "vs\n" << dump(first->config);
        EXPECT_EQ(got.diagnostics, first->diagnostics);
      }
      ++permutations;
    }
  }
  EXPECT_EQ(permutations, 16);
  EXPECT_EQ(
      first->config,
      config({vhost("foo.com", {route("/b", PathMatch::kExact, "default/api:80", "default/b"),
                                route("/", PathMatch::kPrefix, "default/api:80", "default/b")})},
             {upstream("default/api:80", {"10.0.0.9:8080"}),
              upstream("default/web:80", {"10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"})},
             route("/", PathMatch::kPrefix, "default/web:80", "default/b")))
      << dump(first->config);
  ASSERT_EQ(first->diagnostics.size(), 2u) << dump(first->diagnostics);
  // Oldest first: c (no timestamp sorts first), b (2024-01-01), a (2024-01-02).
  EXPECT_EQ(first->diagnostics[0].object, "Ingress default/c");
  EXPECT_EQ(first->diagnostics[1].object, "Ingress default/a");
}

// ---- Store relevance (the store feeds the translator; its answers follow the same rules) ----

objects::Object parse(const std::string& yaml) {
  auto loaded = source::load_manifest_text(yaml, "t.yaml");
  EXPECT_EQ(loaded.errors.size(), 0u);
  EXPECT_EQ(loaded.objects.size(), 1u);
  return loaded.objects.at(0).object;
}

TEST(TranslateStoreTest, InsertAndRemoveSayWhetherTheObjectMatters) {
  using objects::Kind;
  store::Store s;
  std::string ours = ingress("web").rule("foo.com", {path("/", "Prefix", "web", "80")});
  std::string theirs =
      ingress("other").class_name("nginx").rule("foo.com", {path("/", "Prefix", "api", "80")});

  EXPECT_TRUE(s.insert(parse(ours)));
  EXPECT_FALSE(s.insert(parse(ours))) << "identical object";
  EXPECT_FALSE(s.insert(parse(theirs))) << "another class";
  EXPECT_TRUE(s.insert(parse(web_service("web")))) << "referenced by our Ingress";
  EXPECT_FALSE(s.insert(parse(web_service("api")))) << "referenced only by another class";
  EXPECT_FALSE(s.insert(parse(web_service("web", "elsewhere")))) << "other namespace";
  EXPECT_TRUE(s.insert(parse(web_slice({{"10.0.0.1"}}, "web"))));
  EXPECT_FALSE(s.insert(parse(web_slice({{"10.0.0.1"}}, "api"))));
  EXPECT_TRUE(s.insert(parse(ingress_class("tidegate", "tidegate.io/ingress-controller"))));
  EXPECT_FALSE(s.insert(parse(ingress_class("nginx", "k8s.io/ingress-nginx", true))));
  EXPECT_EQ(s.size(), 9u);

  // An Ingress moving from our class to another still matters (its routes must go).
  std::string moved =
      ingress("web").class_name("nginx").rule("foo.com", {path("/", "Prefix", "web", "80")});
  EXPECT_TRUE(s.insert(parse(moved)));
  EXPECT_FALSE(s.insert(parse(web_service("web", "default") + "  type: NodePort\n")))
      << "no Ingress of ours refers to it any more";

  EXPECT_FALSE(s.remove(Kind::kIngress, "default", "nothing"));
  EXPECT_FALSE(s.remove(Kind::kIngress, "default", "other"));
  EXPECT_TRUE(s.remove(Kind::kIngressClass, "ignored", "tidegate"));
  EXPECT_EQ(s.ingress_classes().count("tidegate"), 0u);
  EXPECT_TRUE(s.insert(parse(ours)));
  EXPECT_TRUE(s.remove(Kind::kEndpointSlice, "default", "web-abc"));
  EXPECT_TRUE(s.remove(Kind::kIngress, "default", "web"));
  EXPECT_FALSE(s.remove(Kind::kService, "default", "web")) << "no longer referenced";
}

TEST(TranslateStoreTest, TheServiceAnAuthUrlNamesMatters) {
  store::Store s;
  EXPECT_TRUE(s.insert(
      parse(ingress("web")
                .annotation("tidegate.io/auth-url", "http://oauth.sso.svc.cluster.local/check")
                .rule("foo.com", {path("/", "Prefix", "web", "80")}))));
  EXPECT_TRUE(s.insert(parse(web_service("oauth", "sso")))) << "named by the auth-url";
  EXPECT_TRUE(s.insert(parse(web_slice({{"10.0.0.7"}}, "oauth", "sso"))));
  EXPECT_FALSE(s.insert(parse(web_service("oauth", "default")))) << "another namespace's";
}

TEST(TranslateStoreTest, SecretsNamedByProxySslSecretMatter) {
  store::Store s;
  EXPECT_FALSE(s.insert(parse(opaque_secret("backend-ca", {{"ca.crt", kTestCaPem}}))))
      << "not named yet";
  EXPECT_TRUE(s.insert(parse(std::string(
      ingress("web")
          .annotation("tidegate.io/backend-protocol", "HTTPS")
          .annotation("tidegate.io/proxy-ssl-secret", " backend-ca ")
          .annotation("nginx.ingress.kubernetes.io/proxy-ssl-secret", "default/nginx-ca")
          .rule("foo.com", {path("/", "Prefix", "web", "443")})))));
  EXPECT_TRUE(s.secret_referenced("default", "backend-ca"));
  EXPECT_TRUE(s.secret_referenced("default", "nginx-ca")) << "either spelling keeps it";
  EXPECT_FALSE(s.secret_referenced("other", "backend-ca"));
  EXPECT_TRUE(s.insert(parse(opaque_secret("nginx-ca", {{"ca.crt", kTestCaPem}}))));

  // Another namespace's Secret is never kept for an Ingress (the translator refuses it).
  objects::Ingress other = std::get<objects::Ingress>(
      parse(std::string(ingress("x")
                            .annotation("tidegate.io/proxy-ssl-secret", "kube-system/ca")
                            .rule("a.com", {path("/", "Prefix", "web", "80")}))));
  EXPECT_EQ(store::secrets_named(other), std::set<std::string>{});
}

TEST(TranslateStoreTest, RuleSetsMatterWhenOneOfOurIngressesNamesThem) {
  using objects::Kind;
  store::Store s;
  const std::string set = rule_set("common", {{"a", "b", ""}});
  const std::string changed = rule_set("common", {{"a", "c", ""}});
  EXPECT_FALSE(s.insert(parse(set))) << "no Ingress names it";
  ASSERT_EQ(s.substitution_rule_sets().count("default/common"), 1u);
  s.take_changes();
  s.insert(parse(ingress("web")
                     .annotation("tidegate.io/substitution-rule-set", " common ")
                     .rule("foo.com", {path("/", "Prefix", "web", "80")})));
  s.insert(parse(ingress("theirs")
                     .class_name("nginx")
                     .annotation("tidegate.io/substitution-rule-set", "other")
                     .rule("foo.com", {path("/", "Prefix", "web", "80")})));
  EXPECT_TRUE(s.rule_set_referenced("default", "common"));
  EXPECT_FALSE(s.rule_set_referenced("default", "other")) << "another class's Ingress";
  s.take_changes();
  EXPECT_FALSE(s.insert(parse(set))) << "identical";
  EXPECT_TRUE(s.take_changes().empty());
  EXPECT_TRUE(s.insert(parse(changed)));
  EXPECT_TRUE(s.take_changes().other) << "a full translation, not the endpoint fast path";
  EXPECT_FALSE(s.insert(parse(rule_set("common", {{"a", "b", ""}}, "team")))) << "other namespace";
  EXPECT_FALSE(s.insert(parse(rule_set("other", {{"a", "b", ""}}))))
      << "named only by another class's Ingress";
  EXPECT_TRUE(s.take_changes().empty()) << "changes that do not matter are not recorded";
  EXPECT_TRUE(s.remove(Kind::kSubstitutionRuleSet, "default", "common"));
  EXPECT_FALSE(s.remove(Kind::kSubstitutionRuleSet, "default", "common")) << "already gone";
  EXPECT_FALSE(s.remove(Kind::kSubstitutionRuleSet, "team", "common"));
  EXPECT_EQ(s.substitution_rule_sets().size(), 1u);  // default/other

  // The Ingress stops naming the set, then names it again.
  EXPECT_TRUE(s.insert(parse(changed)));
  s.insert(parse(ingress("web").rule("foo.com", {path("/", "Prefix", "web", "80")})));
  EXPECT_FALSE(s.rule_set_referenced("default", "common"));
  EXPECT_FALSE(s.insert(parse(set)));
  s.insert(parse(ingress("web")
                     .annotation("tidegate.io/substitution-rule-set", "common")
                     .rule("foo.com", {path("/", "Prefix", "web", "80")})));
  EXPECT_TRUE(s.insert(parse(changed)));
  auto named = [](const std::string& ns, const std::string& value) {
    return store::rule_set_named(
        std::get<objects::Ingress>(parse(ingress("x", ns)
                                             .annotation("tidegate.io/substitution-rule-set", value)
                                             .rule("a.com", {path("/", "Prefix", "web", "80")}))));
  };
  EXPECT_EQ(named("team", " c "), "team/c");
  EXPECT_EQ(named("default", " "), "");
}

TEST(TranslateStoreTest, KeysAreNamespaceSlashName) {
  store::Store s;
  s.insert(parse(web_service("web", "team")));
  s.insert(parse(ingress_class("tidegate", "tidegate.io/ingress-controller")));
  ASSERT_EQ(s.services().size(), 1u);
  EXPECT_EQ(s.services().begin()->first, "team/web");
  ASSERT_EQ(s.ingress_classes().size(), 1u);
  EXPECT_EQ(s.ingress_classes().begin()->first, "tidegate");
  EXPECT_EQ(store::object_key("", "cluster-wide"), "cluster-wide");
}

}  // namespace
}  // namespace tidegate::controller::translate
