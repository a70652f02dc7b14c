#include "translate/gateway/gateway.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include <re2/re2.h>

#include "text/http_syntax.h"
#include "text/text.h"
#include "translate/certificates.h"
#include "translate/endpoints.h"

namespace tidegate::controller::translate::gateway {

const Condition* find_condition(const std::vector<Condition>& conditions, const std::string& type) {
  for (const auto& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

namespace {

using objects::kGatewayGroup;

std::string quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

bool is_wildcard(const std::string& host) { return host.size() > 2 && host.starts_with("*."); }

// Whether the wildcard `w` ("*.example.com") covers `h`: an exact name with at least one more
// label, or a wildcard at least as narrow. (The Gateway API's wildcards are suffix matches:
// "*.example.com" covers "a.b.example.com".)
bool covers(const std::string& w, const std::string& h) {
  const std::string suffix = w.substr(1);  // ".example.com"
  if (is_wildcard(h)) return h.substr(1) == suffix || h.substr(1).ends_with(suffix);
  return h.size() > suffix.size() && h.ends_with(suffix);
}

}  // namespace

std::vector<std::string> intersect_hostnames(const std::string& listener,
                                             const std::vector<std::string>& route) {
  if (route.empty()) return {listener.empty() ? std::string("*") : listener};
  if (listener.empty()) return route;
  std::vector<std::string> out;
  auto add = [&](const std::string& h) {
    if (std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
  };
  for (const auto& r : route) {
    if (r == listener) {
      add(r);
    } else if (is_wildcard(listener) && covers(listener, r)) {
      add(r);
    } else if (is_wildcard(r) && covers(r, listener)) {
      add(listener);
    }
  }
  return out;
}

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  if (text.empty()) return std::nullopt;
  int64_t total = 0;
  int groups = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t digits = 0;
    int64_t value = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      value = value * 10 + (text[i] - '0');
      ++i;
      ++digits;
    }
    if (digits == 0 || digits > 5 || i == text.size()) return std::nullopt;
    int64_t unit = 0;
    if (text.substr(i, 2) == "ms") {
      unit = 1;
      i += 2;
    } else if (text[i] == 'h') {
      unit = 3'600'000;
      ++i;
    } else if (text[i] == 'm') {
      unit = 60'000;
      ++i;
    } else if (text[i] == 's') {
      unit = 1'000;
      ++i;
    } else {
      return std::nullopt;
    }
    total += value * unit;
    if (++groups > 4) return std::nullopt;
  }
  return std::chrono::milliseconds(total);
}

namespace {

constexpr const char* kTrue = "True";
constexpr const char* kFalse = "False";
const std::string kHTTPRoute = "HTTPRoute";
const std::string kGRPCRoute = "GRPCRoute";
// The end of a dropped rule's message when its matches still answer 500 (a filter that cannot
// be applied must not be skipped).
const std::string kAnswers500 = "; its requests get 500";

// The methods the Gateway API's HTTPMethod enum lists; another is an unsupported value.
bool is_gateway_method(const std::string& m) {
  static const std::set<std::string> kMethods = {"GET",     "HEAD",    "POST",  "PUT",  "DELETE",
                                                 "CONNECT", "OPTIONS", "TRACE", "PATCH"};
  return kMethods.contains(m);
}

std::string regex_error(const std::string& pattern) {
  RE2::Options options;
  options.set_log_errors(false);
  RE2 re(pattern, options);
  return re.ok() ? std::string() : re.error();
}

Condition condition(std::string type, bool status, std::string reason, std::string message,
                    int64_t generation) {
  return Condition{std::move(type), status ? kTrue : kFalse, std::move(reason), std::move(message),
                   generation};
}

// One listener of one of our Gateways, as routes see it.
struct ListenerInfo {
  const objects::Listener* spec = nullptr;
  std::string hostname;  // lower-case; empty: any
  // Routes attach to it (and count in attachedRoutes): accepted, not conflicted. A listener
  // whose certificate cannot be used still takes routes, as the Gateway API asks; they are
  // served only through programmed listeners.
  bool attachable = false;
  bool programmed = false;            // serves: attachable and its certificate (HTTPS) usable
  std::set<std::string> kinds;        // route kinds it takes ("HTTPRoute", "GRPCRoute")
  std::string certificate;            // HTTPS: model::Certificate name; empty: none usable
  std::set<std::string> route_hosts;  // hosts of the routes attached (TLS hosts when no hostname)
  // One address per Gateway: the model::Listener of its port ("namespace/name:port"); empty:
  // the data plane's shared listeners.
  std::string model_listener;
  // The hosts each accepted route got on it, by kind: an HTTPRoute and a GRPCRoute may not share
  // one (the older is accepted).
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> kind_hosts;
  ListenerStatus status;
};

struct GatewayInfo {
  const objects::Gateway* gateway = nullptr;
  std::string key;     // "namespace/name"
  std::string object;  // "Gateway namespace/name"
  bool accepted = false;
  std::vector<ListenerInfo> listeners;
};

// A BackendTLSPolicy as the translator resolved it.
struct PolicyInfo {
  const objects::BackendTLSPolicy* policy = nullptr;
  std::string key;     // "namespace/name"
  std::string object;  // "BackendTLSPolicy namespace/name"
  std::string ca_pem;  // the valid CA bundles, concatenated
  // Verification was asked for and cannot be done as written: its upstreams get no endpoints
  // (503) rather than an unverified connection.
  bool fail_closed = false;
  bool conflicted = false;            // a policy that takes precedence holds its target
  std::vector<Condition> conditions;  // Accepted, ResolvedRefs
};

// A route (HTTPRoute or GRPCRoute) in the form both share.
struct RouteView {
  const std::string* kind = nullptr;
  const objects::ObjectMeta* meta = nullptr;
  const std::vector<objects::ParentReference>* parents = nullptr;
  const std::vector<std::string>* hostnames = nullptr;
  const objects::HTTPRoute* http = nullptr;
  const objects::GRPCRoute* grpc = nullptr;
  std::string key;     // "HTTPRoute ns/name"
  std::string object;  // same, for diagnostics
};

// The model routes of one route object (without their host), and what its status says of them.
struct BuiltRoute {
  std::vector<model::Route> routes;  // in rule order, then match order
  std::vector<std::string> dropped;  // "spec.rules[1]: <why>"
  size_t rules = 0;
  std::vector<std::string> warnings;  // reported, the rule still served
  std::string unsupported;  // set: the message of an unknown enum value (route not accepted)
  // ResolvedRefs: the first failing backendRef's reason and message; empty reason: all resolved.
  std::string refs_reason;
  std::string refs_message;
};

class GatewayTranslator {
 public:
  GatewayTranslator(const store::Store& store, const TranslateOptions& options,
                    TranslateResult& result)
      : store_(store), options_(options), result_(result) {
    class_options_.gateway_controller_name = options.gateway_controller_name;
  }

  void run() {
    add_classes();
    for (const auto& [key, gw] : store_.gateways()) {
      if (store::gateway_is_ours(gw, store_.gateway_classes(), class_options_)) add_gateway(gw);
    }
    add_policies();
    for (const auto& view : select_routes()) add_route(view);
    assign_listener_ports();
    finish_gateways();
    finish_policies();
    assemble();
  }

 private:
  void report(std::string object, Severity severity, std::string message) {
    result_.diagnostics.push_back(Diagnostic{std::move(object), std::move(message), severity});
  }

  void add_classes() {
    for (const auto& [name, gc] : store_.gateway_classes()) {
      if (gc.controller_name != options_.gateway_controller_name) continue;
      GatewayClassStatus status{name, {}};
      status.conditions.push_back(condition("Accepted", true, "Accepted",
                                            "handled by " + options_.gateway_controller_name,
                                            gc.metadata.generation));
      result_.gateway_status.gateway_classes.emplace(name, std::move(status));
    }
  }

  // ---- Gateways and listeners ----

  void add_gateway(const objects::Gateway& gw) {
    GatewayInfo info;
    info.gateway = &gw;
    info.key = store::object_key(gw.metadata.namespace_, gw.metadata.name);
    info.object = "Gateway " + info.key;
    const int64_t gen = gw.metadata.generation;
    const auto& listeners = gw.listeners;
    for (size_t i = 0; i < listeners.size(); ++i) {
      const objects::Listener& l = listeners[i];
      ListenerInfo li;
      li.spec = &l;
      li.hostname = text::ascii_lower(l.hostname);
      li.status.name = l.name;
      const std::string where = "listener " + quote(l.name);
      const bool http = l.protocol == "HTTP";
      const bool https = l.protocol == "HTTPS";

      // Conflicts with the Gateway's other listeners on the same port. Only the protocols
      // Tidegate serves count: a listener of another protocol is not accepted anyway
      // (UnsupportedProtocol), and must not take a valid listener down with it.
      std::string conflict;
      auto served = [](const objects::Listener& x) {
        return x.protocol == "HTTP" || x.protocol == "HTTPS";
      };
      for (size_t j = 0; j < listeners.size() && served(l); ++j) {
        if (j == i || listeners[j].port != l.port || !served(listeners[j])) continue;
        if (listeners[j].protocol != l.protocol) {
          conflict = "ProtocolConflict";
          break;
        }
        if (text::ascii_lower(listeners[j].hostname) == li.hostname) conflict = "HostnameConflict";
      }

      // The route kinds it takes.
      std::string refs_reason, refs_message;
      if (http || https) {
        if (l.kinds.empty()) {
          li.status.supported_kinds = {{std::string(kGatewayGroup), kHTTPRoute},
                                       {std::string(kGatewayGroup), kGRPCRoute}};
        }
        for (const auto& k : l.kinds) {
          if (k.group == kGatewayGroup && (k.kind == kHTTPRoute || k.kind == kGRPCRoute)) {
            li.status.supported_kinds.push_back(k);
          } else if (refs_reason.empty()) {
            refs_reason = "InvalidRouteKinds";
            refs_message = "route kind " + k.group + "/" + k.kind + " is not supported";
          }
        }
        for (const auto& k : li.status.supported_kinds) li.kinds.insert(k.kind);
      } else if (!l.kinds.empty()) {
        refs_reason = "InvalidRouteKinds";
        refs_message = "protocol " + l.protocol + " takes no route kind Tidegate supports";
      }

      // Accepted.
      std::string accept_reason = "Accepted", accept_message = "listener accepted";
      if (!http && !https) {
        accept_reason = "UnsupportedProtocol";
        accept_message = "protocol " + l.protocol + " is not supported (HTTP and HTTPS are)";
      } else if (l.port < 1 || l.port > 65535) {
        accept_reason = "PortUnavailable";
        accept_message = "port " + std::to_string(l.port) + " is not a TCP port";
      } else if (!options_.per_gateway_listeners() &&
                 l.port != (http ? options_.gateway_http_port : options_.gateway_https_port)) {
        accept_reason = "PortUnavailable";
        accept_message =
            "port " + std::to_string(l.port) + " is not the data plane's " + l.protocol + " port " +
            std::to_string(http ? options_.gateway_http_port : options_.gateway_https_port) +
            " (all Gateways share the data plane's ports)";
      } else if (https && l.tls_mode.value_or("Terminate") != "Terminate") {
        accept_reason = "UnsupportedValue";
        accept_message = "tls.mode " + *l.tls_mode + " is not supported on HTTPS (Terminate is)";
      } else if (!li.hostname.empty() &&
                 (li.hostname == "*" || !model::is_valid_host(li.hostname))) {
        accept_reason = "UnsupportedValue";
        accept_message = "hostname " + quote(l.hostname) + " is not a DNS name or wildcard";
      } else if (auto why = check_allowed_namespaces(l)) {
        accept_reason = "UnsupportedValue";
        accept_message = *why;
      } else if (!conflict.empty()) {
        // A conflicted listener is not accepted (the spec: all indistinct listeners are left
        // out, none is picked as the winner); the reason is the conflict's.
        accept_reason = conflict;
        accept_message = conflict + " with another listener on port " + std::to_string(l.port);
      }
      const bool accepted = accept_reason == "Accepted";

      // Certificates (HTTPS).
      if (https && (accepted || accept_reason == conflict)) {
        resolve_certificate(gw, l, li, refs_reason, refs_message);
      }
      const bool cert_ok = !https || !li.certificate.empty();

      li.attachable = accepted && conflict.empty();
      li.programmed = li.attachable && cert_ok;
      if (options_.per_gateway_listeners() && li.attachable) {
        li.model_listener = info.key + ":" + std::to_string(l.port);
      }
      auto& c = li.status.conditions;
      c.push_back(condition("Accepted", accepted, accept_reason, accept_message, gen));
      c.push_back(condition("Programmed", li.programmed,
                            li.programmed      ? "Programmed"
                            : conflict.empty() ? "Invalid"
                                               : conflict,
                            li.programmed ? "listener programmed" : "listener not programmed",
                            gen));
      c.push_back(condition("ResolvedRefs", refs_reason.empty(),
                            refs_reason.empty() ? "ResolvedRefs" : refs_reason,
                            refs_reason.empty() ? "references resolved" : refs_message, gen));
      c.push_back(condition(
          "Conflicted", !conflict.empty(), conflict.empty() ? "NoConflicts" : conflict,
          conflict.empty() ? "no conflicts"
                           : "another listener uses port " + std::to_string(l.port) +
                                 (conflict == "ProtocolConflict" ? " with another protocol"
                                                                 : " with the same hostname"),
          gen));
      if (!accepted) {
        report(info.object, Severity::kError, where + ": " + accept_message + "; not accepted");
      }
      if (!refs_reason.empty()) {
        report(info.object, Severity::kError, where + ": " + refs_reason + ": " + refs_message);
      }
      info.listeners.push_back(std::move(li));
    }
    GatewayStatus status{gw.metadata.namespace_, gw.metadata.name, {}, {}};
    size_t valid = 0, programmed = 0;
    for (const auto& li : info.listeners) {
      const Condition* a = find_condition(li.status.conditions, "Accepted");
      const Condition* k = find_condition(li.status.conditions, "Conflicted");
      if (a->status == kTrue && k->status == kFalse) ++valid;
      if (li.programmed) ++programmed;
    }
    if (gw.has_addresses) {
      info.accepted = false;
      status.conditions.push_back(condition(
          "Accepted", false, "UnsupportedAddress",
          "spec.addresses is not supported: the address comes from the data plane's Service", gen));
      status.conditions.push_back(
          condition("Programmed", false, "Invalid", "the Gateway is not accepted", gen));
      report(info.object, Severity::kError,
             "spec.addresses is not supported (the address comes from the data plane's Service); "
             "Gateway not accepted");
      for (auto& li : info.listeners) li.attachable = li.programmed = false;
    } else {
      info.accepted = valid > 0 || info.listeners.empty();
      const bool all = valid == info.listeners.size();
      status.conditions.push_back(
          condition("Accepted", info.accepted, all ? "Accepted" : "ListenersNotValid",
                    all ? "Gateway accepted"
                        : std::to_string(info.listeners.size() - valid) + " of " +
                              std::to_string(info.listeners.size()) + " listeners are not valid",
                    gen));
      status.conditions.push_back(
          condition("Programmed", programmed > 0, programmed > 0 ? "Programmed" : "Invalid",
                    programmed == 0                    ? "no listener can be programmed"
                    : options_.per_gateway_listeners() ? "programmed on listeners of its own"
                                                       : "programmed in the shared data plane",
                    gen));
    }
    result_.gateway_status.gateways.emplace(info.key, std::move(status));
    gateways_.emplace(info.key, std::move(info));
  }

  // How narrow a listener hostname is: none 0, a wildcard by its labels, an exact name most.
  static size_t specificity(const std::string& hostname) {
    if (hostname.empty()) return 0;
    if (!is_wildcard(hostname)) return 1000;
    return 1 + static_cast<size_t>(std::count(hostname.begin(), hostname.end(), '.'));
  }

  // Whether every request for `host` (a name or wildcard a route got on listener i) goes to
  // another listener of the same Gateway and port with a narrower hostname: requests are matched
  // to the most specific listener first, and only its routes are considered (the Gateway API's
  // listener isolation).
  static bool taken_by_narrower_listener(const GatewayInfo& info, size_t i,
                                         const std::string& host) {
    const ListenerInfo& li = info.listeners[i];
    for (size_t j = 0; j < info.listeners.size(); ++j) {
      const ListenerInfo& lj = info.listeners[j];
      if (j == i || !lj.attachable || lj.spec->port != li.spec->port) continue;
      if (specificity(lj.hostname) <= specificity(li.hostname)) continue;
      if (lj.hostname == host || (is_wildcard(lj.hostname) && covers(lj.hostname, host))) {
        return true;
      }
    }
    return false;
  }

  // nullopt when allowedRoutes.namespaces is usable; otherwise why not.
  static std::optional<std::string> check_allowed_namespaces(const objects::Listener& l) {
    const std::string& from = l.namespaces_from;
    if (from != "Same" && from != "All" && from != "Selector") {
      return "allowedRoutes.namespaces.from " + quote(from) + " is not Same, All or Selector";
    }
    if (from == "Selector") {
      if (!l.namespace_selector) return "allowedRoutes.namespaces.from Selector without a selector";
      for (const auto& e : l.namespace_selector->match_expressions) {
        if (e.op != "In" && e.op != "NotIn" && e.op != "Exists" && e.op != "DoesNotExist") {
          return "allowedRoutes.namespaces.selector: unknown operator " + quote(e.op);
        }
      }
    }
    return std::nullopt;
  }

  // Whether a ReferenceGrant in `to_namespace` lets (from_group, from_kind) objects of
  // `from_namespace` refer to the (to_group, to_kind) object `to_name`.
  bool granted(const std::string& from_kind, const std::string& from_namespace,
               const std::string& to_kind, const std::string& to_name,
               const std::string& to_namespace) const {
    const auto& grants = store_.reference_grants();
    const std::string prefix = to_namespace + "/";
    for (auto it = grants.lower_bound(prefix); it != grants.end() && it->first.starts_with(prefix);
         ++it) {
      const auto& g = it->second;
      const bool from = std::any_of(g.from.begin(), g.from.end(), [&](const auto& f) {
        return f.group == kGatewayGroup && f.kind == from_kind && f.namespace_ == from_namespace;
      });
      const bool to = std::any_of(g.to.begin(), g.to.end(), [&](const auto& t) {
        return (t.group.empty() || t.group == "core") && t.kind == to_kind &&
               (!t.name || *t.name == to_name);
      });
      if (from && to) return true;
    }
    return false;
  }

  // An HTTPS listener's certificate: its first certificateRef (the model has one certificate per
  // host name). Every ref must resolve for ResolvedRefs to be True.
  void resolve_certificate(const objects::Gateway& gw, const objects::Listener& l, ListenerInfo& li,
                           std::string& reason, std::string& message) {
    // Only a problem of the certificates takes the certificate away (`reason` may already hold
    // another, InvalidRouteKinds, which leaves the listener its valid kinds and certificate).
    bool failed = false;
    auto fail = [&](std::string r, std::string m) {
      failed = true;
      if (reason.empty()) {
        reason = std::move(r);
        message = std::move(m);
      }
    };
    if (l.certificate_refs.empty()) {
      fail("InvalidCertificateRef", "an HTTPS listener needs tls.certificateRefs");
      return;
    }
    for (size_t i = 0; i < l.certificate_refs.size(); ++i) {
      const auto& ref = l.certificate_refs[i];
      const std::string ns = ref.namespace_.value_or(gw.metadata.namespace_);
      const std::string key = store::object_key(ns, ref.name);
      if (!(ref.group.empty() || ref.group == "core") || ref.kind != "Secret") {
        fail("InvalidCertificateRef",
             "certificateRef " + ref.group + "/" + ref.kind + " " + ref.name + " is not a Secret");
        continue;
      }
      if (ns != gw.metadata.namespace_ &&
          !granted("Gateway", gw.metadata.namespace_, "Secret", ref.name, ns)) {
        fail("RefNotPermitted",
             "Secret " + key + " is in another namespace and no ReferenceGrant allows it");
        continue;
      }
      auto secret = store_.secrets().find(key);
      if (secret == store_.secrets().end()) {
        fail("InvalidCertificateRef", "Secret " + key + " not found");
        continue;
      }
      const auto& data = secret->second.data;
      auto crt = data.find("tls.crt");
      auto pem_key = data.find("tls.key");
      std::string problem = crt == data.end() || pem_key == data.end()
                                ? std::string("has no tls.crt and tls.key")
                                : check_certificate_pair(crt->second, pem_key->second);
      if (!problem.empty()) {
        fail("InvalidCertificateRef", "Secret " + key + " " + problem);
        continue;
      }
      if (i == 0) {
        li.certificate = key;
        certificates_.emplace(key, model::Certificate{key, crt->second, pem_key->second});
      } else {
        report("Gateway " + store::object_key(gw.metadata.namespace_, gw.metadata.name),
               Severity::kWarning,
               "listener " + quote(l.name) + ": certificateRefs[" + std::to_string(i) +
                   "] (Secret " + key + ") is not used: one certificate per listener");
      }
    }
    if (failed) li.certificate.clear();
  }

  // The labels of a namespace: its Namespace object's, with the name label the API server
  // always sets (so that selectors on it work without Namespace objects, as in manifests).
  std::map<std::string, std::string> namespace_labels(const std::string& ns) const {
    std::map<std::string, std::string> labels;
    if (auto it = store_.namespaces().find(ns); it != store_.namespaces().end()) {
      labels = it->second.metadata.labels;
    }
    labels["kubernetes.io/metadata.name"] = ns;
    return labels;
  }

  bool namespace_allowed(const objects::Listener& l, const std::string& gateway_ns,
                         const std::string& route_ns) const {
    if (l.namespaces_from == "All") return true;
    if (l.namespaces_from == "Same") return route_ns == gateway_ns;
    const auto labels = namespace_labels(route_ns);
    const auto& sel = *l.namespace_selector;
    for (const auto& [k, v] : sel.match_labels) {
      auto it = labels.find(k);
      if (it == labels.end() || it->second != v) return false;
    }
    for (const auto& e : sel.match_expressions) {
      auto it = labels.find(e.key);
      const bool in = it != labels.end() &&
                      std::find(e.values.begin(), e.values.end(), it->second) != e.values.end();
      if (e.op == "In" && !in) return false;
      if (e.op == "NotIn" && in) return false;
      if (e.op == "Exists" && it == labels.end()) return false;
      if (e.op == "DoesNotExist" && it != labels.end()) return false;
    }
    return true;
  }

  // ---- BackendTLSPolicies ----

  // Resolves every policy and gives each target (Service, port name or "") to the one that
  // takes precedence: the oldest, then by namespace/name; the others are Conflicted there.
  void add_policies() {
    std::vector<const objects::BackendTLSPolicy*> order;
    for (const auto& [key, p] : store_.backend_tls_policies()) order.push_back(&p);
    std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
      return std::forward_as_tuple(a->metadata.creation_timestamp, a->metadata.namespace_,
                                   a->metadata.name) <
             std::forward_as_tuple(b->metadata.creation_timestamp, b->metadata.namespace_,
                                   b->metadata.name);
    });
    for (const auto* p : order) {
      PolicyInfo info;
      info.policy = p;
      info.key = store::object_key(p->metadata.namespace_, p->metadata.name);
      info.object = "BackendTLSPolicy " + info.key;
      size_t targets = 0, held = 0;
      for (const auto& t : p->target_refs) {
        if (!(t.group.empty() || t.group == "core") || t.kind != "Service") {
          report(info.object, Severity::kWarning,
                 "targetRef " + t.group + "/" + t.kind + " " + t.name +
                     " is not a Service; ignored (Services are supported)");
          continue;
        }
        ++targets;
        auto target = std::make_pair(store::object_key(p->metadata.namespace_, t.name),
                                     t.section_name.value_or(""));
        policies_of_target_[target].push_back(info.key);
        auto [it, inserted] = policy_for_.emplace(target, info.key);
        if (!inserted) {
          ++held;
          report(info.object, Severity::kError,
                 "Service " + t.name + (t.section_name ? " port " + *t.section_name : "") +
                     " already has BackendTLSPolicy " + it->second +
                     " (older, or first by name); Conflicted");
        }
      }
      info.conflicted = targets > 0 && held == targets;
      resolve_policy(info);
      policies_.emplace(info.key, std::move(info));
    }
  }

  void resolve_policy(PolicyInfo& info) {
    const auto& p = *info.policy;
    const int64_t gen = p.metadata.generation;
    std::string refs_reason, refs_message;
    size_t valid = 0;
    for (size_t i = 0; i < p.ca_certificate_refs.size(); ++i) {
      const auto& ref = p.ca_certificate_refs[i];
      const std::string where = text::index_path("spec.validation.caCertificateRefs", i);
      std::string reason, message;
      const std::string key = store::object_key(p.metadata.namespace_, ref.name);
      if (!(ref.group.empty() || ref.group == "core") || ref.kind != "ConfigMap") {
        reason = "InvalidKind";
        message = where + ": " + (ref.group.empty() ? "" : ref.group + "/") + ref.kind +
                  " is not supported (ConfigMap is)";
      } else if (auto cm = store_.config_maps().find(key); cm == store_.config_maps().end()) {
        reason = "InvalidCACertificateRef";
        message = where + ": ConfigMap " + key + " not found";
      } else if (auto ca = cm->second.data.find("ca.crt"); ca == cm->second.data.end()) {
        reason = "InvalidCACertificateRef";
        message = where + ": ConfigMap " + key + " has no ca.crt";
      } else if (std::string why = check_ca_bundle(ca->second); !why.empty()) {
        reason = "InvalidCACertificateRef";
        message = where + ": ConfigMap " + key + " ca.crt " + why;
      } else {
        ++valid;
        if (!info.ca_pem.empty() && !info.ca_pem.ends_with('\n')) info.ca_pem += '\n';
        info.ca_pem += ca->second;
        continue;
      }
      report(info.object, Severity::kError, reason + ": " + message);
      if (refs_reason.empty()) {
        refs_reason = reason;
        refs_message = message;
      }
    }
    std::string accept_reason = "Accepted", accept_message = "policy accepted";
    const std::string hostname = text::ascii_lower(p.hostname);
    if (info.conflicted) {
      accept_reason = "Conflicted";
      accept_message = "an older BackendTLSPolicy targets the same Service and port";
    } else if (p.well_known_ca_certificates) {
      accept_reason = "Invalid";
      accept_message = "wellKnownCACertificates " + quote(*p.well_known_ca_certificates) +
                       " is not supported (caCertificateRefs to ConfigMaps are)";
    } else if (!p.subject_alt_names.empty()) {
      accept_reason = "Invalid";
      accept_message =
          "subjectAltNames are not supported (the backend's certificate is verified for the "
          "hostname)";
    } else if (auto why = model::check_tls_server_name(hostname);
               why || hostname.find('*') != std::string::npos) {
      accept_reason = "Invalid";
      accept_message = "hostname " + quote(p.hostname) + " " + why.value_or("is not a DNS name");
    } else if (valid == 0) {
      accept_reason = "NoValidCACertificate";
      accept_message = "no caCertificateRef can be used";
    }
    if (accept_reason != "Accepted" && accept_reason != "Conflicted") {
      report(info.object, Severity::kError,
             accept_message +
                 "; not accepted, and its Services' backends get no endpoints (503) "
                 "rather than an unverified connection");
    }
    if (p.has_options) {
      report(info.object, Severity::kWarning, "spec.options are not supported; ignored");
    }
    // A policy that cannot verify as asked fails closed; a conflicted one does not apply.
    info.fail_closed = accept_reason != "Accepted" && accept_reason != "Conflicted";
    info.conditions.push_back(
        condition("Accepted", accept_reason == "Accepted", accept_reason, accept_message, gen));
    info.conditions.push_back(condition(
        "ResolvedRefs", refs_reason.empty(), refs_reason.empty() ? "ResolvedRefs" : refs_reason,
        refs_reason.empty() ? "references resolved" : refs_message, gen));
  }

  // The policy that applies to a Service port: the one naming the port (sectionName), else the
  // one for the whole Service; nullptr when none.
  const PolicyInfo* policy_of(const std::string& service_key, const objects::ServicePort& port) {
    auto it = port.name.empty() ? policy_for_.end() : policy_for_.find({service_key, port.name});
    if (it == policy_for_.end()) it = policy_for_.find({service_key, std::string()});
    return it == policy_for_.end() ? nullptr : &policies_.at(it->second);
  }

  void finish_policies() {
    for (const auto& [key, routes] : policy_routes_) {
      const PolicyInfo& info = policies_.at(key);
      std::set<std::string> gateways;
      for (const auto& route : routes) {
        if (auto it = route_gateways_.find(route); it != route_gateways_.end()) {
          gateways.insert(it->second.begin(), it->second.end());
        }
      }
      if (gateways.empty()) continue;
      BackendTLSPolicyStatus status{
          info.policy->metadata.namespace_, info.policy->metadata.name, {}};
      for (const auto& gw : gateways) {
        const auto* g = gateways_.at(gw).gateway;
        PolicyAncestorStatus a;
        a.ancestor_ref.namespace_ = g->metadata.namespace_;
        a.ancestor_ref.name = g->metadata.name;
        a.controller_name = options_.gateway_controller_name;
        a.conditions = info.conditions;
        status.ancestors.push_back(std::move(a));
      }
      result_.gateway_status.backend_tls_policies.emplace(key, std::move(status));
    }
  }

  // ---- Routes ----

  // Our routes (a parentRef names one of our Gateways), in the Gateway API's precedence order
  // among routes: oldest first, then "namespace/name"; an HTTPRoute before a GRPCRoute of the
  // same name.
  std::vector<RouteView> select_routes() const {
    std::vector<RouteView> out;
    auto ours = [&](const objects::ObjectMeta& meta,
                    const std::vector<objects::ParentReference>& parents) {
      return std::any_of(parents.begin(), parents.end(), [&](const auto& p) {
        return p.group == kGatewayGroup && p.kind == "Gateway" &&
               gateways_.contains(
                   store::object_key(p.namespace_.value_or(meta.namespace_), p.name));
      });
    };
    for (const auto& [key, r] : store_.http_routes()) {
      if (!ours(r.metadata, r.parent_refs)) continue;
      RouteView v{&kHTTPRoute, &r.metadata, &r.parent_refs, &r.hostnames, &r, nullptr, {}, {}};
      v.key = store::route_key(objects::Kind::kHTTPRoute, r.metadata);
      v.object = v.key;
      out.push_back(std::move(v));
    }
    for (const auto& [key, r] : store_.grpc_routes()) {
      if (!ours(r.metadata, r.parent_refs)) continue;
      RouteView v{&kGRPCRoute, &r.metadata, &r.parent_refs, &r.hostnames, nullptr, &r, {}, {}};
      v.key = store::route_key(objects::Kind::kGRPCRoute, r.metadata);
      v.object = v.key;
      out.push_back(std::move(v));
    }
    std::stable_sort(out.begin(), out.end(), [](const RouteView& a, const RouteView& b) {
      return std::forward_as_tuple(a.meta->creation_timestamp, a.meta->namespace_, a.meta->name,
                                   *a.kind) < std::forward_as_tuple(b.meta->creation_timestamp,
                                                                    b.meta->namespace_,
                                                                    b.meta->name, *b.kind);
    });
    return out;
  }

  void add_route(const RouteView& view) {
    const int64_t gen = view.meta->generation;
    const std::string& ns = view.meta->namespace_;
    // Hostnames: lower-case, invalid ones left out (reported).
    std::vector<std::string> hostnames;
    for (size_t i = 0; i < view.hostnames->size(); ++i) {
      const std::string h = text::ascii_lower((*view.hostnames)[i]);
      if (h == "*" || !model::is_valid_host(h)) {
        report(view.object, Severity::kError,
               text::index_path("spec.hostnames", i) + ": invalid hostname " +
                   quote((*view.hostnames)[i]) + "; ignored");
        continue;
      }
      if (std::find(hostnames.begin(), hostnames.end(), h) == hostnames.end()) {
        hostnames.push_back(h);
      }
    }
    const bool all_hostnames_invalid = !view.hostnames->empty() && hostnames.empty();

    BuiltRoute built = view.http ? build_http(*view.http, view) : build_grpc(*view.grpc, view);
    const bool usable =
        built.unsupported.empty() && (built.rules == 0 || built.dropped.size() < built.rules);
    for (const auto& d : built.dropped) {
      report(view.object, Severity::kError, d.ends_with(kAnswers500) ? d : d + "; rule dropped");
    }
    for (const auto& w : built.warnings) report(view.object, Severity::kWarning, w);
    if (!built.unsupported.empty()) {
      report(view.object, Severity::kError, built.unsupported + "; route not accepted");
    }

    RouteStatus status{*view.kind, ns, view.meta->name, {}};
    std::set<std::pair<std::string, std::string>> hosts;  // (model listener, host)
    std::set<std::pair<std::string, size_t>> attached;    // (gateway key, listener index)
    std::set<int32_t> ports;                              // of the listeners it is served through
    std::map<std::string, int32_t> listener_ports;        // model listener -> its Gateway port
    std::set<std::string> seen_parents;
    for (size_t p = 0; p < view.parents->size(); ++p) {
      const auto& parent = (*view.parents)[p];
      if (parent.group != kGatewayGroup || parent.kind != "Gateway") continue;
      const std::string gw_key = store::object_key(parent.namespace_.value_or(ns), parent.name);
      auto gw = gateways_.find(gw_key);
      if (gw == gateways_.end()) continue;  // not ours (or absent): not ours to report on
      GatewayInfo& info = gw->second;
      RouteParentStatus ps;
      ps.parent_ref = parent;
      ps.controller_name = options_.gateway_controller_name;
      const std::string where = text::index_path("spec.parentRefs", p) + " (Gateway " + gw_key +
                                (parent.section_name ? " section " + *parent.section_name : "") +
                                ")";

      std::string reason = "Accepted", message = "route accepted";
      std::vector<std::pair<size_t, std::vector<std::string>>> matched;  // listener, hosts
      bool any_candidate = false, any_allowed = false;
      for (size_t i = 0; i < info.listeners.size(); ++i) {
        ListenerInfo& li = info.listeners[i];
        if (parent.section_name && *parent.section_name != li.spec->name) continue;
        if (parent.port && *parent.port != li.spec->port) continue;
        any_candidate = true;
        if (!info.accepted || !li.kinds.contains(*view.kind) ||
            !namespace_allowed(*li.spec, info.gateway->metadata.namespace_, ns)) {
          continue;
        }
        auto h = intersect_hostnames(li.hostname, hostnames);
        if (all_hostnames_invalid) h.clear();
        if (!li.attachable) {
          // A conflicted (or otherwise not accepted) listener serves nothing, but the routes
          // that select it still count in its attachedRoutes: the spec says listener status
          // does not impact attachment.
          if (!h.empty()) attached.emplace(gw_key, i);
          continue;
        }
        any_allowed = true;
        if (!h.empty()) matched.emplace_back(i, std::move(h));
      }
      if (!any_candidate) {
        reason = "NoMatchingParent";
        message = "no listener of Gateway " + gw_key + " matches the sectionName and port";
      } else if (!any_allowed) {
        reason = "NotAllowedByListeners";
        message = "no listener of Gateway " + gw_key + " allows this route";
      } else if (matched.empty()) {
        reason = "NoMatchingListenerHostname";
        message = "no listener hostname of Gateway " + gw_key + " intersects the route's";
      } else if (!usable) {
        reason = "UnsupportedValue";
        message = built.unsupported.empty() ? "every rule is invalid" : built.unsupported;
      } else {
        // An HTTPRoute and a GRPCRoute whose hostnames intersect on one listener: only the one
        // accepted first there (the older, then by namespace/name: the order routes come in)
        // is; the other is not accepted on that listener.
        std::string holder;
        std::erase_if(matched, [&](const auto& m) {
          std::string other = kind_conflict(info.listeners[m.first], *view.kind, m.second);
          if (!other.empty() && holder.empty()) holder = other;
          return !other.empty();
        });
        if (matched.empty()) {
          reason = "NotAllowedByListeners";
          message = holder +
                    " (older) serves intersecting hostnames on the listener; an "
                    "HTTPRoute and a GRPCRoute may not share a hostname";
        }
      }
      const bool accepted = reason == "Accepted";
      if (!accepted && usable) {
        report(view.object, Severity::kError, where + ": " + reason + ": " + message);
      }
      if (accepted) {
        for (auto& [i, h] : matched) {
          attached.emplace(gw_key, i);
          for (const auto& host : h)
            info.listeners[i].kind_hosts[*view.kind].emplace_back(host, view.key);
          if (!info.listeners[i].programmed) continue;  // attached, not served through it
          ports.insert(info.listeners[i].spec->port);
          for (const auto& host : h) {
            // Listener isolation: requests for a name a narrower listener of the port takes
            // never reach this listener's routes.
            if (taken_by_narrower_listener(info, i, host)) continue;
            hosts.emplace(info.listeners[i].model_listener, host);
            info.listeners[i].route_hosts.insert(host);
            if (!info.listeners[i].model_listener.empty()) {
              listener_ports[info.listeners[i].model_listener] = info.listeners[i].spec->port;
            }
          }
        }
      }
      ps.conditions.push_back(condition("Accepted", accepted, reason, message, gen));
      ps.conditions.push_back(
          condition("ResolvedRefs", built.refs_reason.empty(),
                    built.refs_reason.empty() ? "ResolvedRefs" : built.refs_reason,
                    built.refs_reason.empty() ? "references resolved" : built.refs_message, gen));
      if (accepted && !built.dropped.empty()) {
        std::string dropped = "Dropped Rule(s): ";
        for (size_t i = 0; i < built.dropped.size(); ++i) {
          dropped += (i ? "; " : "") + built.dropped[i];
        }
        ps.conditions.push_back(
            condition("PartiallyInvalid", true, "UnsupportedValue", dropped, gen));
      }
      // One entry per distinct parentRef (the API server refuses duplicates; be safe).
      const std::string id = gw_key + "/" + parent.section_name.value_or("") + "/" +
                             (parent.port ? std::to_string(*parent.port) : "");
      if (seen_parents.insert(id).second) status.parents.push_back(std::move(ps));
    }
    for (const auto& [gw_key, i] : attached) {
      ++gateways_.at(gw_key).listeners[i].status.attached_routes;
      route_gateways_[view.key].insert(gw_key);
    }
    if (!status.parents.empty()) result_.gateway_status.routes.emplace(view.key, std::move(status));
    // A redirect without port or scheme goes to the listener's port (the spec). With listeners
    // of their own (one model listener per Gateway port) each copy of the route knows its port;
    // on the shared ports, a route served through listeners of several ports leaves it to the
    // data plane, which uses the port the client named in Host.
    auto redirect_to_port = [](model::Route& r, int32_t port) {
      const auto& redirect = r.policy->request_redirect;
      if (redirect && redirect->port == 0 && redirect->scheme.empty()) {
        r.policy.mut().request_redirect->port = static_cast<uint16_t>(port);
      }
    };
    if (ports.size() == 1) {
      for (auto& r : built.routes) redirect_to_port(r, *ports.begin());
    }
    for (const auto& host : hosts) {
      auto& routes = pending_[host];  // (model listener, host)
      const size_t first = routes.size();
      routes.insert(routes.end(), built.routes.begin(), built.routes.end());
      auto it = listener_ports.find(host.first);
      if (ports.size() > 1 && it != listener_ports.end()) {
        for (size_t k = first; k < routes.size(); ++k) redirect_to_port(routes[k], it->second);
      }
    }
    for (const auto& r : built.routes) {
      if (!hosts.empty()) {
        if (!r.upstream.empty()) used_upstreams_.insert(r.upstream);
        for (const auto& b : r.backends) {
          if (!b.upstream.empty()) used_upstreams_.insert(b.upstream);
        }
        for (const auto& m : r.policy->mirrors) used_upstreams_.insert(m.upstream);
      }
    }
  }

  // The route of the other kind (HTTPRoute against GRPCRoute) already accepted on `li` with a
  // hostname intersecting one of `hosts`; empty when there is none.
  static std::string kind_conflict(const ListenerInfo& li, const std::string& kind,
                                   const std::vector<std::string>& hosts) {
    for (const auto& [other_kind, entries] : li.kind_hosts) {
      if (other_kind == kind) continue;
      for (const auto& [host, key] : entries) {
        for (const auto& h : hosts) {
          if (hosts_intersect(h, host)) return key;
        }
      }
    }
    return {};
  }

  // Whether two route hosts on one listener can take the same request ("*": every name).
  static bool hosts_intersect(const std::string& a, const std::string& b) {
    return a == b || a == "*" || b == "*" || (is_wildcard(a) && covers(a, b)) ||
           (is_wildcard(b) && covers(b, a));
  }

  // ---- Rules ----

  // A backendRef's upstream (created on first use); empty with built.refs_* set when it cannot
  // be resolved (its share of the requests is answered 500).
  std::string resolve_backend(const objects::BackendRef& ref, const RouteView& view,
                              const std::string& where, bool grpc, BuiltRoute& built,
                              std::string_view consequence = "its share of the requests gets 500") {
    const std::string& route_ns = view.meta->namespace_;
    const std::string ns = ref.namespace_.value_or(route_ns);
    const std::string key = store::object_key(ns, ref.name);
    std::string reason, message;
    const objects::Service* service = nullptr;
    const objects::ServicePort* port = nullptr;
    if (!(ref.group.empty() || ref.group == "core") || ref.kind != "Service") {
      reason = "InvalidKind";
      message = "backendRef kind " + (ref.group.empty() ? "" : ref.group + "/") + ref.kind +
                " is not supported (Service is)";
    } else if (ns != route_ns && !granted(*view.kind, route_ns, "Service", ref.name, ns)) {
      reason = "RefNotPermitted";
      message = "Service " + key + " is in another namespace and no ReferenceGrant allows it";
    } else if (auto svc = store_.services().find(key); svc == store_.services().end()) {
      reason = "BackendNotFound";
      message = "Service " + key + " not found";
    } else if (!ref.port) {
      reason = "BackendNotFound";
      message = "backendRef to Service " + key + " has no port (required for a Service)";
    } else {
      service = &svc->second;
      objects::PortRef pr;
      pr.number = *ref.port;
      port = find_service_port(*service, pr);
      if (port == nullptr) {
        reason = "BackendNotFound";
        message = "Service " + key + " has no port " + std::to_string(*ref.port);
      } else if (port->protocol != "TCP") {
        reason = "UnsupportedProtocol";
        message = "Service " + key + " port " + std::to_string(*ref.port) + " uses protocol " +
                  port->protocol + "; only TCP can be proxied";
      }
    }
    if (!reason.empty()) {
      report(view.object, Severity::kError,
             where + ": " + reason + ": " + message + "; " + std::string(consequence));
      if (built.refs_reason.empty()) {
        built.refs_reason = reason;
        built.refs_message = message;
      }
      return {};
    }
    // Named as the Ingress translator names a Service port's upstream ("ns/svc:80", "+h2" for
    // HTTP/2 cleartext), so the two share upstreams and the endpoint fast path finds them.
    const bool h2c = grpc || port->app_protocol == "kubernetes.io/h2c" ||
                     port->app_protocol == "h2c" || port->app_protocol == "grpc";
    std::string name = key + ":" + std::to_string(*ref.port) + (h2c ? "+h2" : "");
    // A BackendTLSPolicy makes it TLS ("+btls": not shared with an Ingress's "+https" upstream,
    // whose CA and name are the Ingress's).
    if (const PolicyInfo* policy = policy_of(key, *port)) {
      name += "+btls";
      upstream_policy_.emplace(name, policy->key);
    }
    // Every policy targeting the port (the one applied, and those it conflicts with) has the
    // route's Gateways as ancestors: a Conflicted policy reports so there.
    std::vector<std::string> sections = {std::string()};
    if (!port->name.empty()) sections.push_back(port->name);
    for (const auto& section : sections) {
      auto all = policies_of_target_.find({key, section});
      if (all == policies_of_target_.end()) continue;
      for (const auto& p : all->second) policy_routes_[p].insert(view.key);
    }
    sources_.emplace(name, std::make_pair(service, port));
    return name;
  }

  // Filters of a rule (HTTPRoute or GRPCRoute) into the policy; false when the rule is dropped.
  bool apply_filters(const std::vector<objects::HTTPRouteFilter>& filters, const RouteView& view,
                     bool grpc, bool all_prefix, const std::string& where,
                     model::RoutePolicy& policy, BuiltRoute& built) {
    std::set<std::string> seen;
    for (size_t i = 0; i < filters.size(); ++i) {
      const auto& f = filters[i];
      const std::string fwhere = text::index_path(where + ".filters", i);
      if (f.type == "RequestMirror" && f.request_mirror) {
        // The only filter that may appear more than once (one per mirror backend).
        if (!add_mirror(*f.request_mirror, view, grpc, fwhere + ".requestMirror", policy, built)) {
          return false;
        }
        continue;
      }
      if (!seen.insert(f.type).second) {
        built.dropped.push_back(fwhere + ": filter " + f.type + " appears twice");
        return false;
      }
      if (f.type == "RequestHeaderModifier" || f.type == "ResponseHeaderModifier") {
        const auto& in =
            f.request_header_modifier ? *f.request_header_modifier : *f.response_header_modifier;
        model::HeaderModifier m;
        for (const auto& h : in.set) m.set.push_back({h.name, h.value});
        for (const auto& h : in.add) m.add.push_back({h.name, h.value});
        m.remove = in.remove;
        (f.request_header_modifier ? policy.request_header_modifier
                                   : policy.response_header_modifier) = std::move(m);
      } else if (!grpc && f.type == "RequestRedirect") {
        const auto& in = *f.request_redirect;
        model::RequestRedirect r;
        r.scheme = in.scheme.value_or("");
        r.hostname = text::ascii_lower(in.hostname.value_or(""));
        r.port = static_cast<uint16_t>(in.port.value_or(0));
        r.code = static_cast<uint16_t>(in.status_code.value_or(302));
        if (in.status_code && (*in.status_code < 300 || *in.status_code > 399)) r.code = 0;
        if (in.path) {
          auto m = path_modifier(*in.path, all_prefix, fwhere + ".requestRedirect.path", built);
          if (!m) return false;
          r.path = std::move(*m);
        }
        policy.request_redirect = std::move(r);
      } else if (!grpc && f.type == "URLRewrite") {
        const auto& in = *f.url_rewrite;
        if (in.hostname) policy.upstream_vhost = text::ascii_lower(*in.hostname);
        if (in.path) {
          auto m = path_modifier(*in.path, all_prefix, fwhere + ".urlRewrite.path", built);
          if (!m) return false;
          policy.path_rewrite = std::move(*m);
        }
      } else if (!grpc && f.type == "CORS") {
        if (!cors_policy(*f.cors, fwhere + ".cors", policy, built)) return false;
      } else if (f.type == "CORS" || f.type == "ExtensionRef" || f.type == "ExternalAuth") {
        built.dropped.push_back(fwhere + ": filter " + f.type + " is not supported");
        return false;
      } else {
        built.unsupported = fwhere + ": unsupported filter type " + quote(f.type);
        return false;
      }
    }
    if (seen.contains("RequestRedirect") && seen.contains("URLRewrite")) {
      built.dropped.push_back(where + ": RequestRedirect and URLRewrite cannot be combined");
      return false;
    }
    return true;
  }

  // A RequestMirror filter into policy.mirrors (docs/gateway-api.md, "Request mirroring"). A
  // backendRef that cannot be resolved makes the route's ResolvedRefs false and the mirror is
  // left out (the spec: not configured); the rule's requests are served as usual. False (the
  // rule answers 500) only for a share the API server should have refused.
  bool add_mirror(const objects::HTTPRequestMirrorFilter& in, const RouteView& view, bool grpc,
                  const std::string& where, model::RoutePolicy& policy, BuiltRoute& built) {
    model::Mirror m;
    if (in.percent) {
      if (*in.percent < 0 || *in.percent > 100) {
        built.dropped.push_back(where + ".percent: " + std::to_string(*in.percent) +
                                " is not 0-100");
        return false;
      }
      m.numerator = static_cast<uint32_t>(*in.percent);
      m.denominator = 100;
    } else if (in.numerator) {
      const int64_t d = in.denominator.value_or(100);
      if (*in.numerator < 0 || d < 1 || d > model::Mirror::kMaxDenominator || *in.numerator > d) {
        built.dropped.push_back(where + ".fraction: " + std::to_string(*in.numerator) + "/" +
                                std::to_string(d) +
                                " must have 0 <= numerator <= denominator, denominator 1-1000000");
        return false;
      }
      m.numerator = static_cast<uint32_t>(*in.numerator);
      m.denominator = static_cast<uint32_t>(d);
    }
    objects::BackendRef ref;
    ref.group = in.group;
    ref.kind = in.kind;
    ref.name = in.name;
    ref.namespace_ = in.namespace_;
    ref.port = in.port;
    m.upstream = resolve_backend(ref, view, where + ".backendRef", grpc, built,
                                 "the mirror is left out; requests are served without it");
    if (m.upstream.empty()) return true;
    if (m.numerator == 0) return true;  // mirrors nothing
    if (policy.mirrors.size() >= model::Mirror::kMaxPerRoute) {
      built.dropped.push_back(where + ": more than 16 mirrors on one rule");
      return false;
    }
    policy.mirrors.push_back(std::move(m));
    return true;
  }

  // The CORS filter as the route's model::Cors (docs/gateway-api.md, "CORS"); false when the
  // rule cannot be served as written.
  bool cors_policy(const objects::HTTPCORSFilter& in, const std::string& where,
                   model::RoutePolicy& policy, BuiltRoute& built) {
    model::Cors c;
    c.allow_origins.clear();
    auto add_origin = [&](std::string o) {
      if (std::find(c.allow_origins.begin(), c.allow_origins.end(), o) == c.allow_origins.end()) {
        c.allow_origins.push_back(std::move(o));
      }
    };
    for (size_t i = 0; i < in.allow_origins.size(); ++i) {
      const std::string& o = in.allow_origins[i];
      const std::string owhere = text::index_path(where + ".allowOrigins", i);
      if (o == "*") {
        add_origin(o);
        continue;
      }
      const size_t sep = o.find("://");
      const std::string scheme = text::ascii_lower(o.substr(0, sep == std::string::npos ? 0 : sep));
      std::string authority = sep == std::string::npos ? std::string() : o.substr(sep + 3);
      if (authority == "*" || authority.starts_with("*:")) {
        built.dropped.push_back(owhere + ": " + quote(o) +
                                ": any host of one scheme is not supported (\"*\" alone is)");
        return false;
      }
      if (auto why = model::check_cors_origin(o); why || (scheme != "http" && scheme != "https")) {
        built.dropped.push_back(owhere + ": " + quote(o) + " " +
                                why.value_or("must be http(s)://host[:port]"));
        return false;
      }
      // Without a port an origin means the scheme's default one, which browsers leave out of
      // Origin; both spellings match.
      const std::string default_port = scheme == "https" ? ":443" : ":80";
      const std::string base = scheme + "://" + authority;
      if (base.ends_with(default_port)) {
        add_origin(base.substr(0, base.size() - default_port.size()));
        add_origin(base);
      } else if (authority.find(':') == std::string::npos) {
        add_origin(base);
        add_origin(base + default_port);
      } else {
        add_origin(base);
      }
    }
    if (c.allow_origins.empty()) {
      // No origin may read the responses: the same as no CORS at all.
      policy.cors.reset();
      return true;
    }
    if (std::find(c.allow_origins.begin(), c.allow_origins.end(), "*") != c.allow_origins.end()) {
      c.allow_origins = {"*"};
    }
    c.allow_credentials = in.allow_credentials.value_or(false);
    // The Gateway API's semantics: every preflight answered by the proxy; with credentials a
    // "*" answered with the request's own values; without, a literal "*" (the API allows it).
    c.gateway_api = true;
    // Unset: the CORS-safelisted methods, which browsers allow anyway.
    c.allow_methods = in.allow_methods.empty() ? std::vector<std::string>{"GET", "HEAD", "POST"}
                                               : in.allow_methods;
    c.allow_headers = in.allow_headers;
    c.expose_headers = in.expose_headers;
    if (c.allow_credentials && c.expose_headers == std::vector<std::string>{"*"}) {
      // A browser reads "*" literally on a request with credentials; the API says not to send it.
      c.expose_headers.clear();
      built.warnings.push_back(where +
                               ".exposeHeaders: \"*\" is not sent with allowCredentials "
                               "(browsers read it as a header named \"*\")");
    }
    c.max_age_seconds = in.max_age.value_or(5);
    for (const auto& problem : model::validate(c)) {
      built.dropped.push_back(where + ": " + problem);
      return false;
    }
    policy.cors = std::move(c);
    return true;
  }

  std::optional<model::PathModifier> path_modifier(const objects::HTTPPathModifier& in,
                                                   bool all_prefix, const std::string& where,
                                                   BuiltRoute& built) {
    model::PathModifier m;
    if (in.type == "ReplaceFullPath") {
      m.kind = model::PathModifier::Kind::kFull;
      m.value = in.replace_full_path;
    } else if (in.type == "ReplacePrefixMatch") {
      if (!all_prefix) {
        built.dropped.push_back(where + ": ReplacePrefixMatch needs PathPrefix matches");
        return std::nullopt;
      }
      m.kind = model::PathModifier::Kind::kPrefix;
      m.value = in.replace_prefix_match.empty() ? "/" : in.replace_prefix_match;
    } else {
      built.unsupported = where + ": unsupported path modifier type " + quote(in.type);
      return std::nullopt;
    }
    if (auto why = model::check_path_modifier(m)) {
      built.dropped.push_back(where + ": " + quote(m.value) + " " + *why);
      return std::nullopt;
    }
    return m;
  }

  // HTTPRoute timeouts: the model has no deadline for a whole exchange, so backendRequest (or
  // request) bounds the wait for the backend (read_timeout) and request bounds retries
  // (next_upstream_timeout). 0s: no timeout (the longest the model allows).
  bool apply_timeouts(const objects::HTTPRouteRule& rule, const std::string& where,
                      model::RoutePolicy& policy, BuiltRoute& built) {
    std::optional<std::chrono::milliseconds> request, backend;
    if (rule.timeout_request) {
      request = parse_duration(*rule.timeout_request);
      if (!request) {
        built.dropped.push_back(where + ".timeouts.request: invalid duration " +
                                quote(*rule.timeout_request));
        return false;
      }
    }
    if (rule.timeout_backend_request) {
      backend = parse_duration(*rule.timeout_backend_request);
      if (!backend) {
        built.dropped.push_back(where + ".timeouts.backendRequest: invalid duration " +
                                quote(*rule.timeout_backend_request));
        return false;
      }
    }
    auto bounded = [](std::chrono::milliseconds t) {
      return t.count() == 0 ? model::RoutePolicy::kMaxTimeout
                            : std::min(t, model::RoutePolicy::kMaxTimeout);
    };
    if (request) {
      // The whole exchange's deadline (the data plane answers 504, or cuts a response that
      // started); also no retry starts after it.
      policy.request_timeout = std::min(*request, model::RoutePolicy::kMaxTimeout);
      policy.next_upstream_timeout = policy.request_timeout;
    }
    std::optional<std::chrono::milliseconds> wait = backend ? backend : request;
    if (wait) {
      policy.read_timeout = bounded(*wait);
      if (request && request->count() > 0)
        policy.read_timeout = std::min(policy.read_timeout, *request);
    }
    return true;
  }

  // Header (or query parameter) matches: the first entry of a name counts, later ones are
  // ignored (the Gateway API says so); nullopt when the rule is dropped or the route unsupported.
  template <typename Condition>
  std::optional<std::vector<Condition>> conditions(const std::vector<objects::HTTPHeaderMatch>& in,
                                                   bool header, const std::string& where,
                                                   BuiltRoute& built) {
    std::vector<Condition> out;
    std::set<std::string> names;
    for (size_t i = 0; i < in.size(); ++i) {
      const auto& m = in[i];
      const std::string w = text::index_path(where, i);
      Condition c;
      c.name = header ? text::ascii_lower(m.name) : m.name;
      c.value = m.value;
      if (m.type == "Exact") {
        c.match = model::ValueMatch::kExact;
      } else if (m.type == "RegularExpression") {
        c.match = model::ValueMatch::kRegex;
        if (auto error = regex_error(m.value); !error.empty()) {
          built.dropped.push_back(w + ": invalid regex " + quote(m.value) + ": " + error);
          return std::nullopt;
        }
      } else {
        built.unsupported = w + ": unsupported match type " + quote(m.type);
        return std::nullopt;
      }
      if (header && !text::is_token(m.name)) {
        built.dropped.push_back(w + ": header name " + quote(m.name) + " is not a token");
        return std::nullopt;
      }
      if (!names.insert(header ? c.name : m.name).second) continue;
      out.push_back(std::move(c));
    }
    return out;
  }

  // The backends of a rule into the route: one valid backend is `upstream`, several (or invalid
  // ones) are `backends`; none, or none with weight: no upstream (500, unless a redirect).
  void set_backends(const std::vector<objects::BackendRef>& refs, const RouteView& view,
                    const std::string& where, bool grpc, model::Route& route, BuiltRoute& built) {
    std::vector<model::WeightedBackend> backends;
    for (size_t i = 0; i < refs.size(); ++i) {
      const std::string bwhere = text::index_path(where + ".backendRefs", i);
      std::string upstream = resolve_backend(refs[i], view, bwhere, grpc, built);
      if (refs[i].weight == 0) continue;  // takes no requests
      backends.push_back(model::WeightedBackend{upstream, static_cast<uint32_t>(refs[i].weight)});
    }
    const bool all_invalid = std::all_of(backends.begin(), backends.end(),
                                         [](const auto& b) { return b.upstream.empty(); });
    if (all_invalid) return;  // 500 for all
    if (backends.size() == 1) {
      route.upstream = backends.front().upstream;
      return;
    }
    route.backends = std::move(backends);
  }

  // Checks the route with the model's own rules, so the Config always validates.
  bool valid_in_model(const model::Route& r, const std::string& where, BuiltRoute& built) {
    std::vector<std::string> problems = model::validate(*r.policy);
    model::validate_conditions(r, "route", problems);
    if (problems.empty()) return true;
    built.dropped.push_back(where + ": " + problems.front());
    return false;
  }

  BuiltRoute build_http(const objects::HTTPRoute& http, const RouteView& view) {
    BuiltRoute built;
    std::vector<objects::HTTPRouteRule> rules = http.rules;
    // The API server defaults an empty rule list to one rule matching every path.
    if (rules.empty()) rules.push_back({});
    built.rules = rules.size();
    const std::string name = store::object_key(view.meta->namespace_, view.meta->name);
    for (size_t r = 0; r < rules.size() && built.unsupported.empty(); ++r) {
      const auto& rule = rules[r];
      const std::string where = text::index_path("spec.rules", r);
      std::vector<objects::HTTPRouteMatch> matches = rule.matches;
      if (matches.empty()) matches.push_back({});
      const bool all_prefix = std::all_of(matches.begin(), matches.end(), [](const auto& m) {
        return !m.path || m.path->type == "PathPrefix";
      });
      if (rule.has_retry || rule.has_session_persistence) {
        report(view.object, Severity::kWarning,
               where + ": " + (rule.has_retry ? "retry" : "sessionPersistence") +
                   " (experimental) is not supported; ignored");
      }
      model::RoutePolicy policy;
      const size_t dropped_before = built.dropped.size();
      // A filter that cannot be applied leaves the rule's matches answering 500 (the spec: such
      // a filter must not be skipped; its requests get an error), without backends or policy.
      const bool filters_ok =
          apply_filters(rule.filters, view, false, all_prefix, where, policy, built) &&
          backend_filters_ok(rule.backend_refs, where, built);
      if (!built.unsupported.empty()) break;
      if (!filters_ok) mark_answers_500(built, dropped_before);
      if (filters_ok && !apply_timeouts(rule, where, policy, built)) continue;
      model::Route base;
      base.ingress = name;
      if (filters_ok) {
        if (!(policy == model::RoutePolicy{})) base.policy = std::move(policy);
        set_backends(rule.backend_refs, view, where, false, base, built);
      }
      const size_t filter_drops = built.dropped.size() - dropped_before;
      std::vector<model::Route> routes;
      for (size_t m = 0; m < matches.size(); ++m) {
        const auto& match = matches[m];
        const std::string mwhere = text::index_path(where + ".matches", m);
        model::Route route = base;
        const objects::HTTPPathMatch path = match.path.value_or(objects::HTTPPathMatch{});
        route.path = path.value;
        if (path.type == "Exact") {
          route.match = model::PathMatch::kExact;
        } else if (path.type == "PathPrefix") {
          route.match = model::PathMatch::kPrefix;
        } else if (path.type == "RegularExpression") {
          route.match = model::PathMatch::kRegex;
        } else {
          built.unsupported = mwhere + ".path: unsupported type " + quote(path.type);
          break;
        }
        if (route.match == model::PathMatch::kRegex) {
          if (auto error = regex_error(path.value); !error.empty()) {
            built.dropped.push_back(mwhere + ".path: invalid regex " + quote(path.value) + ": " +
                                    error);
            break;
          }
        } else if (path.value.empty() || path.value.front() != '/') {
          built.dropped.push_back(mwhere + ".path: " + quote(path.value) +
                                  " does not start with '/'");
          break;
        }
        if (!std::all_of(path.value.begin(), path.value.end(),
                         [](char c) { return c > 0x20 && c < 0x7f; })) {
          built.dropped.push_back(mwhere + ".path: spaces, control or non-ASCII characters");
          break;
        }
        if (match.method) {
          if (!is_gateway_method(*match.method)) {
            built.unsupported = mwhere + ".method: unsupported method " + quote(*match.method);
            break;
          }
          route.method = *match.method;
        }
        auto headers =
            conditions<model::HeaderCondition>(match.headers, true, mwhere + ".headers", built);
        if (!headers) break;
        route.headers = std::move(*headers);
        auto query = conditions<model::QueryCondition>(match.query_params, false,
                                                       mwhere + ".queryParams", built);
        if (!query) break;
        route.query = std::move(*query);
        if (!valid_in_model(route, mwhere, built)) break;
        routes.push_back(std::move(route));
      }
      if (built.dropped.size() != dropped_before + filter_drops || !built.unsupported.empty()) {
        continue;
      }
      for (auto& route : routes) built.routes.push_back(std::move(route));
    }
    return built;
  }

  // The rule's drops from `from` on: its matches answer 500 instead.
  static void mark_answers_500(BuiltRoute& built, size_t from) {
    for (size_t i = from; i < built.dropped.size(); ++i) built.dropped[i] += kAnswers500;
  }

  // Per-backendRef filters are not supported: the rule answers 500 (as for a rule filter).
  static bool backend_filters_ok(const std::vector<objects::BackendRef>& refs,
                                 const std::string& where, BuiltRoute& built) {
    if (std::none_of(refs.begin(), refs.end(), [](const auto& b) { return !b.filters.empty(); })) {
      return true;
    }
    built.dropped.push_back(where + ": backendRef filters are not supported");
    return false;
  }

  // A gRPC service or method name in an Exact match: the characters a protobuf name may hold.
  static bool is_grpc_name(const std::string& s, bool service) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [&](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_' || (service && c == '.');
    });
  }

  // A GRPCRoute method match as a path: gRPC requests are POST /<package.Service>/<Method>.
  bool grpc_path(const objects::GRPCRouteMatch& match, const std::string& where,
                 model::Route& route, BuiltRoute& built) {
    if (!match.method) {
      route.path = "/";
      route.match = model::PathMatch::kPrefix;
      return true;
    }
    const auto& m = *match.method;
    const std::string service = m.service.value_or("");
    const std::string method = m.method.value_or("");
    // The Gateway API ranks GRPCRoute matches by the service's characters, then the method's
    // (a regex counts its pattern's); both at most 1024 in the API.
    route.precedence_length = static_cast<uint32_t>(4096 * std::min<size_t>(service.size(), 4095) +
                                                    std::min<size_t>(method.size(), 4095) + 1);
    if (service.empty() && method.empty()) {
      built.dropped.push_back(where + ".method: neither service nor method is set");
      return false;
    }
    if (m.type == "Exact") {
      if ((!service.empty() && !is_grpc_name(service, true)) ||
          (!method.empty() && !is_grpc_name(method, false))) {
        built.dropped.push_back(where + ".method: invalid service or method name");
        return false;
      }
      if (!service.empty() && !method.empty()) {
        route.path = "/" + service + "/" + method;
        route.match = model::PathMatch::kExact;
      } else if (!service.empty()) {
        route.path = "/" + service + "/";
        route.match = model::PathMatch::kPrefix;
      } else {
        route.path = "/[^/]+/" + method + "$";
        route.match = model::PathMatch::kRegex;
      }
      return true;
    }
    if (m.type == "RegularExpression") {
      for (const auto& part : {service, method}) {
        if (auto error = regex_error(part); !part.empty() && !error.empty()) {
          built.dropped.push_back(where + ".method: invalid regex " + quote(part) + ": " + error);
          return false;
        }
      }
      route.path = "/" + (service.empty() ? std::string("[^/]+") : "(?:" + service + ")") + "/" +
                   (method.empty() ? std::string("[^/]+") : "(?:" + method + ")") + "$";
      route.match = model::PathMatch::kRegex;
      return true;
    }
    built.unsupported = where + ".method: unsupported type " + quote(m.type);
    return false;
  }

  BuiltRoute build_grpc(const objects::GRPCRoute& grpc, const RouteView& view) {
    BuiltRoute built;
    std::vector<objects::GRPCRouteRule> rules = grpc.rules;
    if (rules.empty()) rules.push_back({});
    built.rules = rules.size();
    const std::string name = store::object_key(view.meta->namespace_, view.meta->name);
    for (size_t r = 0; r < rules.size() && built.unsupported.empty(); ++r) {
      const auto& rule = rules[r];
      const std::string where = text::index_path("spec.rules", r);
      std::vector<objects::GRPCRouteMatch> matches = rule.matches;
      if (matches.empty()) matches.push_back({});
      if (rule.has_session_persistence) {
        report(view.object, Severity::kWarning,
               where + ": sessionPersistence (experimental) is not supported; ignored");
      }
      model::RoutePolicy policy;
      const size_t dropped_before = built.dropped.size();
      const bool filters_ok =
          apply_filters(rule.filters, view, true, false, where, policy, built) &&
          backend_filters_ok(rule.backend_refs, where, built);
      if (!built.unsupported.empty()) break;
      if (!filters_ok) mark_answers_500(built, dropped_before);
      model::Route base;
      base.ingress = name;
      if (filters_ok) {
        if (!(policy == model::RoutePolicy{})) base.policy = std::move(policy);
        set_backends(rule.backend_refs, view, where, true, base, built);
      }
      const size_t filter_drops = built.dropped.size() - dropped_before;
      std::vector<model::Route> routes;
      for (size_t m = 0; m < matches.size(); ++m) {
        const std::string mwhere = text::index_path(where + ".matches", m);
        model::Route route = base;
        if (!grpc_path(matches[m], mwhere, route, built)) break;
        auto headers = conditions<model::HeaderCondition>(matches[m].headers, true,
                                                          mwhere + ".headers", built);
        if (!headers) break;
        route.headers = std::move(*headers);
        if (!valid_in_model(route, mwhere, built)) break;
        routes.push_back(std::move(route));
      }
      if (built.dropped.size() != dropped_before + filter_drops || !built.unsupported.empty()) {
        continue;
      }
      for (auto& route : routes) built.routes.push_back(std::move(route));
    }
    return built;
  }

  // ---- Output ----

  void finish_gateways() {
    for (auto& [key, info] : gateways_) {
      auto& status = result_.gateway_status.gateways.at(key);
      for (auto& li : info.listeners) status.listeners.push_back(li.status);
    }
  }

  void warn_once(std::string object, std::string message) {
    for (const auto& d : result_.diagnostics) {
      if (d.severity == Severity::kWarning && d.object == object && d.message == message) return;
    }
    report(std::move(object), Severity::kWarning, std::move(message));
  }

  // One address per Gateway: a data plane port for each Gateway port with a programmed
  // listener, and the Gateway's Service. A port is chosen by a hash of the listener's name in
  // the range, the next free one on a collision, names in order: the same in every replica and
  // after restarts, and moved only by a collision with a newer name.
  void assign_listener_ports() {
    if (!options_.per_gateway_listeners()) return;
    model::Config& config = result_.config;
    const uint32_t from = options_.gateway_listener_ports_from;
    const uint32_t size = uint32_t{options_.gateway_listener_ports_to} - from + 1;
    std::map<std::string, bool> wanted;  // model listener -> TLS
    for (const auto& [key, info] : gateways_) {
      for (const auto& li : info.listeners) {
        if (li.programmed && !li.model_listener.empty()) {
          wanted.emplace(li.model_listener, li.spec->protocol == "HTTPS");
        }
      }
    }
    std::set<uint32_t> taken;
    for (const auto& [name, tls] : wanted) {
      uint64_t h = 1469598103934665603ULL;
      for (unsigned char c : name) h = (h ^ c) * 1099511628211ULL;
      uint32_t slot = static_cast<uint32_t>(h % size);
      uint32_t tries = 0;
      while (tries < size && taken.contains(slot)) {
        slot = (slot + 1) % size;
        ++tries;
      }
      if (tries == size) {
        report("Gateway API", Severity::kError,
               "no data plane port left in --gateway-listener-ports for listener " + name +
                   "; it is not served");
        for (auto& [key, info] : gateways_) {
          for (auto& li : info.listeners) {
            if (li.model_listener != name) continue;
            li.programmed = false;
            for (auto& c : li.status.conditions) {
              if (c.type != "Programmed") continue;
              c.status = kFalse;
              c.reason = "Invalid";
              c.message = "no data plane port left for it";
            }
          }
        }
        continue;
      }
      taken.insert(slot);
      config.listeners.emplace(name,
                               model::Listener{name, static_cast<uint16_t>(from + slot), tls});
    }
    for (const auto& [key, info] : gateways_) {
      if (!info.accepted) continue;
      GatewayService service{info.gateway->metadata.namespace_, info.gateway->metadata.name, {}};
      std::set<int32_t> ports;
      for (const auto& li : info.listeners) {
        auto l = config.listeners.find(li.model_listener);
        if (l == config.listeners.end() || !ports.insert(li.spec->port).second) continue;
        service.ports.push_back(
            GatewayServicePort{(l->second.tls ? "https-" : "http-") + std::to_string(li.spec->port),
                               li.spec->port, l->second.port});
      }
      std::sort(service.ports.begin(), service.ports.end(),
                [](const auto& a, const auto& b) { return a.port < b.port; });
      if (!service.ports.empty()) result_.gateway_status.services.emplace(key, std::move(service));
    }
  }

  void assemble() {
    model::Config& config = result_.config;
    // One address per Gateway: each served listener hostname has a host of its own on its port
    // (routes or not), so that its names never fall to a wider listener's routes.
    // Listener hostnames, by model listener: their hosts own their names (no fall-through to a
    // wider host, which holds another listener's routes).
    std::set<std::pair<std::string, std::string>> listener_names;
    std::set<std::string> shared_wildcards;  // wildcard hostnames of shared-port listeners
    for (const auto& [key, info] : gateways_) {
      for (const auto& li : info.listeners) {
        if (!li.programmed || li.hostname.empty()) continue;
        listener_names.emplace(li.model_listener, li.hostname);
        if (li.model_listener.empty()) {
          if (is_wildcard(li.hostname)) shared_wildcards.insert(li.hostname);
          continue;
        }
        pending_.try_emplace({li.model_listener, li.hostname});
      }
    }
    // On the shared ports, a listener hostname gets a host of its own only when a route host
    // under it could fall through: the fall-through then stops there (404) instead of reaching
    // "*", which holds other listeners' and Ingresses' routes.
    for (const std::string& wildcard : shared_wildcards) {
      const std::string_view suffix = std::string_view(wildcard).substr(1);  // ".example.com"
      const bool covers = std::any_of(pending_.begin(), pending_.end(), [&](const auto& entry) {
        const auto& [listener, host] = entry.first;
        return listener.empty() && host != wildcard && host.ends_with(suffix);
      });
      if (covers) pending_.try_emplace({std::string(), wildcard});
    }
    for (auto& [where, routes] : pending_) {
      const auto& [listener, host] = where;
      if (!listener.empty() && !config.listeners.contains(listener)) continue;  // no port left
      // A Gateway API wildcard stands for one or more labels: the model's "**.suffix" (an
      // Ingress's "*.suffix" stands for exactly one). When an Ingress made "*.suffix" too, that
      // host takes the routes as well, so that one-label names reach them there (Gateways with
      // listeners of their own share nothing with Ingresses).
      std::vector<std::string> targets;
      if (is_wildcard(host)) {
        targets.push_back("*" + host);
        if (listener.empty() && config.virtual_hosts.contains(host)) targets.push_back(host);
      } else {
        targets.push_back(host);
      }
      for (const std::string& target : targets) {
        model::VirtualHost fresh{target, {}};
        fresh.listener = listener;
        auto [it, inserted] = config.virtual_hosts.emplace(model::host_key(fresh), fresh);
        model::VirtualHost& vh = it->second;
        if (!vh.redirect_to.empty()) {
          warn_once("Gateway API", "host " + target + " redirects to " + vh.redirect_to +
                                       " (an Ingress's from-to-www-redirect); its Gateway API "
                                       "routes are not used");
          continue;
        }
        // The Gateway API orders rules by hostname first: a request that none of a route
        // hostname's rules takes goes on to the less specific hosts (docs/gateway-api.md,
        // "Precedence"). A listener's own hostname ends the chain (listener isolation), and a
        // host an Ingress made keeps the Ingress rule (it owns its requests).
        if (inserted) vh.falls_through = !listener_names.contains({listener, host});
        // Ingress routes first: on a full tie in precedence they were there first.
        vh.routes.insert(vh.routes.end(), routes.begin(), routes.end());
        model::sort_routes(vh.routes);
      }
    }
    for (const auto& name : used_upstreams_) {
      if (config.upstreams.contains(name)) continue;  // an Ingress's, shared
      const auto& [service, port] = sources_.at(name);
      model::Upstream upstream;
      upstream.name = name;
      const bool h2 = name.ends_with("+h2") || name.ends_with("+h2+btls");
      if (h2) upstream.policy.mut().protocol = model::BackendProtocol::kH2c;
      const PolicyInfo* tls = nullptr;
      if (auto it = upstream_policy_.find(name); it != upstream_policy_.end()) {
        tls = &policies_.at(it->second);
        upstream.policy.mut().protocol =
            h2 ? model::BackendProtocol::kH2 : model::BackendProtocol::kHttps;
        upstream.tls.enabled = true;
        upstream.tls.server_name = text::ascii_lower(tls->policy->hostname);
        upstream.tls.ca_pem = tls->ca_pem;
      }
      if (service->spec.type == "ExternalName") {
        warn_once(
            "Service " + store::object_key(service->metadata.namespace_, service->metadata.name),
            "type ExternalName is not supported; its upstreams have no endpoints");
      }
      if (tls != nullptr && (tls->fail_closed || tls->ca_pem.empty())) {
        // Verification was asked for and cannot be done: no endpoints (503), and the endpoint
        // fast path leaves them so.
        upstream.tls.ca_pem.clear();
        result_.fail_closed_upstreams.insert(name);
      } else {
        upstream.endpoints =
            endpoints_for(store_, *service, *port, [this](std::string object, std::string message) {
              warn_once(std::move(object), std::move(message));
            });
      }
      config.upstreams.emplace(name, std::move(upstream));
    }
    // HTTPS listeners: their certificate for their hostname, or for the hosts of the routes
    // attached when they have none (a request without SNI, or for "*", gets the default one).
    for (const auto& [key, info] : gateways_) {
      for (const auto& li : info.listeners) {
        if (!li.programmed || li.certificate.empty()) continue;
        if (!li.model_listener.empty() && !config.listeners.contains(li.model_listener)) continue;
        std::set<std::string> hosts;
        if (!li.hostname.empty()) {
          hosts.insert(li.hostname);
        } else {
          // Every name: the routes' hosts, and "*" for the names no entry covers (the
          // listener answers for any name, as the Gateway API means a listener without one).
          hosts = li.route_hosts;
          hosts.insert("*");
        }
        bool used = false;
        for (const auto& name : hosts) {
          // A wildcard of the Gateway API covers any depth: the model's "**.suffix".
          const std::string host = is_wildcard(name) ? "*" + name : name;  // "*" stays "*"
          model::TlsHost entry{host, li.certificate};
          entry.listener = li.model_listener;
          auto [it, inserted] = config.tls_hosts.emplace(model::host_key(entry), entry);
          if (!inserted && it->second.certificate != li.certificate) {
            report(info.object, Severity::kWarning,
                   "listener " + quote(li.spec->name) + ": host " + host +
                       " already has certificate " +
                       (it->second.certificate.empty() ? std::string("(default or passthrough)")
                                                       : it->second.certificate) +
                       " (an Ingress, or an older listener); " + li.certificate +
                       " is not used for it");
            continue;
          }
          used = true;
        }
        if (used) config.certificates.emplace(li.certificate, certificates_.at(li.certificate));
      }
    }
  }

  const store::Store& store_;
  const TranslateOptions& options_;
  TranslateResult& result_;
  store::ClassOptions class_options_;
  std::map<std::string, GatewayInfo> gateways_;  // ours, by "namespace/name"
  // (model listener, host) -> routes, in route order.
  std::map<std::pair<std::string, std::string>, std::vector<model::Route>> pending_;
  std::set<std::string> used_upstreams_;
  std::map<std::string, std::pair<const objects::Service*, const objects::ServicePort*>> sources_;
  std::map<std::string, model::Certificate> certificates_;
  std::map<std::string, PolicyInfo> policies_;  // by "namespace/name"
  // (Service "ns/name", port name or "" for the whole Service) -> the policy that holds it.
  std::map<std::pair<std::string, std::string>, std::string> policy_for_;
  // The same targets -> every policy naming them, in precedence order.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> policies_of_target_;
  std::map<std::string, std::string> upstream_policy_;           // upstream -> policy
  std::map<std::string, std::set<std::string>> policy_routes_;   // policy -> route keys
  std::map<std::string, std::set<std::string>> route_gateways_;  // route key -> Gateways
};

}  // namespace

void translate_gateway(const store::Store& store, const TranslateOptions& options,
                       TranslateResult& result) {
  GatewayTranslator(store, options, result).run();
}

}  // namespace tidegate::controller::translate::gateway
