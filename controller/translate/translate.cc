#include "translate/translate.h"
#include "annotations/substitution.h"
#include "translate/annotations.h"
#include "translate/certificates.h"
#include "translate/endpoints.h"
#include "translate/gateway/gateway.h"

#include <arpa/inet.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include <re2/re2.h>
#include <nlohmann/json.hpp>
#include "side_thread.h"
#include "text/text.h"

namespace tidegate::controller::translate {

const char* to_string(Severity s) { return s == Severity::kWarning ? "warning" : "error"; }

std::string to_string(const Diagnostic& d) {
  return std::string(to_string(d.severity)) + ": " + d.object + ": " + d.message;
}

namespace {

using objects::Ingress;

std::string quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

using text::index_path;

// One route claimed by an Ingress, before the Config is assembled.
struct Claim {
  std::string upstream;
  std::string ingress;                            // "namespace/name"
  std::string path;                               // as written by the winner
  std::string substitution;                       // model::Substitution::name, empty for none
  model::Shared<model::RoutePolicy> policy = {};  // shared by the Ingress's claims
  std::optional<model::Canary> canary = {};       // canary->upstream set
  std::string canary_ingress = {};                // the canary Ingress that set it
  std::string fallback_upstream = {};             // default-backend (Route::fallback_upstream)
};

// Two paths that match the same requests are one route. Ingress v1 ignores a Prefix path's
// trailing slash ("/foo/" and "/foo" both match "/foo" and "/foo/bar"), so they share a key;
// without this, two Ingresses could claim the same prefix and one would silently never match.
std::string conflict_key(const std::string& path, model::PathMatch match) {
  if (match != model::PathMatch::kPrefix) return path;
  size_t n = path.size();
  while (n > 1 && path[n - 1] == '/') --n;
  return path.substr(0, n);
}

// What an upstream name stands for, kept to compute its endpoints once the routes are settled.
struct UpstreamSource {
  const objects::Service* service = nullptr;
  const objects::ServicePort* port = nullptr;
};

// How one Ingress's upstreams are reached (tidegate.io/backend-protocol and proxy-ssl-*).
struct BackendTls {
  bool https = false;
  std::string server_name;  // proxy-ssl-name; empty: "<service>.<namespace>.svc"
  std::string ca_pem;       // the proxy-ssl-secret's ca.crt; empty: not verified
  // Verification was asked for but cannot be done (Secret missing, no usable ca.crt, invalid
  // reference): the upstreams get no endpoints rather than an unverified connection.
  bool fail_closed = false;
};

// An upstream as the oldest Ingress naming it set it up.
struct UpstreamClaim {
  UpstreamSource source;
  model::UpstreamTls tls;
  bool fail_closed = false;
  std::string ingress;                               // "namespace/name"
  model::Shared<model::UpstreamPolicy> policy = {};  // shared by the Ingress's upstreams
};

// One Ingress as its paths are processed: what its annotations say, once.
struct IngressContext {
  const objects::Ingress* ingress = nullptr;
  std::string object;  // "Ingress namespace/name"
  std::string name;    // "namespace/name"
  bool regex = false;
  IngressPolicy policy;
  BackendTls tls;
  bool protocol_from_annotation = false;  // backend-protocol is set (a Service's appProtocol
                                          // does not override it)
  std::string substitution;               // model::Substitution::name, empty for none
  std::string fallback_upstream;          // default-backend, or --default-backend-service
};

// HTTPS upstreams are other upstreams than the plain ones of the same Service port: an Ingress
// may talk HTTPS to a port that another Ingress talks HTTP to, and neither may change the other.
constexpr std::string_view kHttpsSuffix = "+https";
// HTTP/2 upstreams likewise ("ns/svc:80+h2", "ns/svc:443+h2+https").
constexpr std::string_view kHttp2Suffix = "+h2";

// A Service port's appProtocol that means HTTP/2 with prior knowledge: the Kubernetes standard
// name (KEP-3726), its short form, and "grpc" (gRPC is HTTP/2). Other values change nothing.
// A Service name as Kubernetes allows it (an RFC 1035 label: lower-case letters, digits, '-').
bool is_service_name(std::string_view name) {
  if (name.empty() || name.size() > 63 || name.front() == '-' || name.back() == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// An IPv4 or IPv6 literal (a Service's clusterIP; "None" and "" are not).
bool is_ip_address(const std::string& text) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, text.c_str(), buf) == 1 || inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

bool app_protocol_is_h2c(std::string_view app_protocol) {
  return app_protocol == "kubernetes.io/h2c" || app_protocol == "h2c" || app_protocol == "grpc";
}

class Translator {
 public:
  Translator(const store::Store& store, const TranslateOptions& options)
      : store_(store), options_(options) {}

  TranslateResult run() {
    resolve_default_backend_service();
    for (const Ingress* ingress : select_ingresses()) add_ingress(*ingress);
    // Canaries attach to main routes, so they come after every main Ingress (oldest first).
    for (const auto& canary : canaries_) add_canary(canary);
    assemble();
    return std::move(result_);
  }

 private:
  void report(std::string object, Severity severity, std::string message) {
    result_.diagnostics.push_back(Diagnostic{std::move(object), std::move(message), severity});
  }

  static std::string name_of(const Ingress& ingress) {
    return store::object_key(ingress.metadata.namespace_, ingress.metadata.name);
  }

  // Our Ingresses, oldest first: age decides conflicts, so it also decides the processing order.
  std::vector<const Ingress*> select_ingresses() {
    store::ClassOptions class_options{options_.ingress_class, options_.controller_name};
    std::vector<const Ingress*> ours;
    for (const auto& [key, ingress] : store_.ingresses()) {
      switch (store::select_ingress(ingress, store_.ingress_classes(), class_options)) {
        case store::IngressSelection::kOurs:
          ours.push_back(&ingress);
          break;
        case store::IngressSelection::kOtherClass:
          break;
        case store::IngressSelection::kClassOfOtherController: {
          const auto& ingress_class = store_.ingress_classes().at(options_.ingress_class);
          report("Ingress " + key, Severity::kWarning,
                 "ingress class " + quote(options_.ingress_class) + " belongs to controller " +
                     quote(ingress_class.spec.controller) + " (IngressClass " +
                     options_.ingress_class + "), not to " + quote(options_.controller_name) +
                     "; ignored");
          break;
        }
      }
    }
    auto by_age = [](const Ingress* a, const Ingress* b) { return older(*a, *b); };
    // Often in order already (the store's is namespace/name, and a list's creation times follow
    // it); stable_sort would still merge through a buffer of its own.
    if (!std::is_sorted(ours.begin(), ours.end(), by_age)) {
      std::stable_sort(ours.begin(), ours.end(), by_age);
    }
    return ours;
  }

  // Creation time, then namespace/name so that equal (or absent) timestamps still give one order.
  static bool older(const Ingress& a, const Ingress& b) {
    return std::forward_as_tuple(a.metadata.creation_timestamp, a.metadata.namespace_,
                                 a.metadata.name) <
           std::forward_as_tuple(b.metadata.creation_timestamp, b.metadata.namespace_,
                                 b.metadata.name);
  }

  bool use_regex(const Ingress& ingress, const std::string& object) {
    auto found = find_annotation(ingress.metadata.annotations, "use-regex", annotation_options());
    if (!found || found->value == "false") return false;
    if (found->value == "true") return true;
    report(object, Severity::kWarning,
           "annotation " + found->key + ": expected \"true\" or \"false\", got " +
               quote(found->value) + "; treated as \"false\"");
    return false;
  }

  AnnotationOptions annotation_options() const {
    return AnnotationOptions{options_.nginx_annotations, options_.compression_default};
  }

  // The Ingress's traffic-policy annotations (annotations.h); their diagnostics are reported here.
  IngressPolicy parse_policy(const Ingress& ingress, bool regex) {
    AnnotationContext context{ingress.metadata.namespace_, ingress.metadata.name, {}};
    for (const auto& rule : ingress.spec.rules) {
      for (const auto& p : rule.paths) {
        context.paths.push_back(PathContext{p.path.empty() ? "/" : p.path,
                                            regex && p.path_type != objects::PathType::kExact});
      }
    }
    AnnotationResult parsed =
        parse_annotations(ingress.metadata.annotations, context, annotation_options());
    for (auto& d : parsed.diagnostics) result_.diagnostics.push_back(std::move(d));
    return std::move(parsed.policy);
  }

  // auth-type basic: the users from the auth-secret (auth-file: the Secret's "auth" key in
  // htpasswd form, "user:hash" per line, as ingress-nginx reads it; auth-map: one key per user,
  // its value the hash). A line that cannot be used is reported and left out; no usable user, or
  // no Secret, leaves the authentication without users: every request is refused (503).
  void resolve_basic_auth(const Ingress& ingress, const std::string& object,
                          model::BasicAuth& auth) {
    if (auth.secret.empty()) return;  // reported by the parser; fails closed
    const std::string closed =
        "; the Ingress's routes refuse every request (503) until it is fixed";
    const auto key = [&](std::string_view name) {
      auto a = find_annotation(ingress.metadata.annotations, name, annotation_options());
      return a ? a->key : std::string(name);
    };
    auto secret = store_.secrets().find(auth.secret);
    if (secret == store_.secrets().end()) {
      report(
          object, Severity::kError,
          "annotation " + key("auth-secret") + ": Secret " + auth.secret + " not found" + closed);
      return;
    }
    auto type =
        find_annotation(ingress.metadata.annotations, "auth-secret-type", annotation_options());
    const bool map = type && trim_copy(type->value) == "auth-map";
    std::vector<std::pair<std::string, std::string>> entries;  // (user, hash), with where
    std::vector<std::string> where;
    if (map) {
      for (const auto& [user, hash] : secret->second.data) {
        entries.emplace_back(user, trim_copy(hash));
        where.push_back("key " + quote(user));
      }
    } else {
      auto file = secret->second.data.find("auth");
      if (file == secret->second.data.end()) {
        report(object, Severity::kError,
               "annotation " + key("auth-secret") + ": Secret " + auth.secret +
                   " has no \"auth\" key (an htpasswd file; auth-secret-type: auth-map reads one "
                   "key per user)" +
                   closed);
        return;
      }
      std::string_view text = file->second;
      size_t line_no = 0;
      while (!text.empty()) {
        const size_t nl = text.find('\n');
        std::string line = trim_copy(text.substr(0, nl));
        text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
        ++line_no;
        if (line.empty() || line[0] == '#') continue;
        const size_t colon = line.find(':');
        std::string user = line.substr(0, colon);
        std::string hash = colon == std::string::npos ? "" : line.substr(colon + 1);
        hash = hash.substr(0, hash.find(':'));  // "user:hash:comment" as nginx reads it
        entries.emplace_back(std::move(user), std::move(hash));
        where.push_back("line " + std::to_string(line_no));
      }
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      auto& [user, hash] = entries[i];
      std::optional<std::string> why = model::check_auth_user(user);
      if (why) {
        why = "user name " + *why;
      } else if (auto bad = model::check_password_hash(hash)) {
        why = "the hash of " + quote(user) + " " + *bad;
      } else if (std::any_of(auth.users.begin(), auth.users.end(),
                             [&](const auto& u) { return u.name == user; })) {
        why = quote(user) + " appears again (the first entry counts)";
      }
      if (why) {
        report(object, Severity::kError,
               "annotation " + key("auth-secret") + ": Secret " + auth.secret + " " + where[i] +
                   ": " + *why + "; left out");
        continue;
      }
      if (auth.users.size() >= model::BasicAuth::kMaxUsers) {
        report(object, Severity::kError,
               "annotation " + key("auth-secret") + ": Secret " + auth.secret + " has more than " +
                   std::to_string(model::BasicAuth::kMaxUsers) + " users; the rest are left out");
        break;
      }
      auth.users.push_back({std::move(user), std::move(hash)});
    }
    if (auth.users.empty()) {
      report(object, Severity::kError,
             "annotation " + key("auth-secret") + ": Secret " + auth.secret +
                 " has no usable user" + closed);
    }
  }

  static std::string trim_copy(std::string_view s) {
    while (!s.empty() &&
           (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n')) {
      s.remove_prefix(1);
    }
    while (!s.empty() &&
           (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
      s.remove_suffix(1);
    }
    return std::string(s);
  }

  // TLS to the backends: the parsed protocol and proxy-ssl-* with the CA Secret resolved. A
  // verification that was asked for and cannot be done fails closed (see BackendTls).
  BackendTls backend_tls(const Ingress& ingress, const std::string& object,
                         const model::UpstreamPolicy& policy) {
    BackendTls tls;
    if (!model::uses_tls(policy.protocol)) return tls;
    tls.https = true;
    tls.server_name = policy.tls_server_name;
    auto annotation =
        find_annotation(ingress.metadata.annotations, "proxy-ssl-secret", annotation_options());
    if (!annotation) return tls;
    const std::string consequence =
        "; the Ingress's HTTPS backends get no endpoints (503) until it is fixed, rather than "
        "being connected to without verification";
    if (policy.tls_secret.empty()) {  // invalid reference, already reported by the parser
      report(object, Severity::kError,
             "annotation " + annotation->key + ": no usable CA Secret" + consequence);
      tls.fail_closed = true;
      return tls;
    }
    auto secret = store_.secrets().find(policy.tls_secret);
    std::string problem;
    if (secret == store_.secrets().end()) {
      problem = "Secret " + policy.tls_secret + " not found";
    } else if (auto ca = secret->second.data.find("ca.crt"); ca == secret->second.data.end()) {
      problem = "Secret " + policy.tls_secret + " has no ca.crt";
    } else if (std::string why = check_ca_bundle(ca->second); !why.empty()) {
      problem = "Secret " + policy.tls_secret + " " + why;
    } else {
      tls.ca_pem = ca->second;
      return tls;
    }
    report(object, Severity::kError,
           "annotation " + annotation->key + ": " + problem + consequence);
    tls.fail_closed = true;
    return tls;
  }

  void add_ingress(const Ingress& ingress) {
    IngressContext ctx;
    ctx.ingress = &ingress;
    ctx.name = name_of(ingress);
    ctx.object = "Ingress " + ctx.name;
    const std::string& object = ctx.object;
    ctx.regex = use_regex(ingress, object);
    ctx.policy = parse_policy(ingress, ctx.regex);
    ctx.tls = backend_tls(ingress, object, *ctx.policy.upstream);
    if (ctx.policy.route->basic_auth)
      resolve_basic_auth(ingress, object, *ctx.policy.route.mut().basic_auth);
    if (ctx.policy.route->external_auth)
      resolve_external_auth(ctx, *ctx.policy.route.mut().external_auth);
    ctx.protocol_from_annotation =
        find_annotation(ingress.metadata.annotations, "backend-protocol", annotation_options())
            .has_value();
    if (ctx.policy.canary) {
      canaries_.push_back(std::move(ctx));
      return;
    }
    ctx.substitution = add_substitution(ingress, object);
    ctx.fallback_upstream = fallback_upstream(ctx);
    if (!ctx.policy.route->error_codes.empty() && ctx.fallback_upstream.empty()) {
      auto found =
          find_annotation(ingress.metadata.annotations, "custom-http-errors", annotation_options());
      report(object, Severity::kWarning,
             "annotation " + (found ? found->key : std::string("custom-http-errors")) +
                 " has no effect without default-backend or the controller's "
                 "--default-backend-service; ignored");
      ctx.policy.route.mut().error_codes.clear();
    }

    if (ingress.spec.default_backend) add_default_backend(ctx);

    for_each_rule_path(ingress, object,
                       [&](const std::string& host, const auto& path, const std::string& where) {
                         add_path(ctx, host, path, where);
                       });

    add_tls(ingress, object);
    add_host_annotations(ingress, object);
    if (ctx.policy.client_auth) add_client_auth(ctx);
    add_passthrough(ingress, object);
  }

  // ssl-passthrough: each exact rule host's TLS connections go as they are to the backend of
  // this Ingress's "/" path (assemble() finds it once the routes are settled); the oldest
  // Ingress wins a host.
  void add_passthrough(const Ingress& ingress, const std::string& object) {
    auto flag = host_flag(ingress, object, "ssl-passthrough");
    if (!flag || !*flag) return;
    auto found =
        find_annotation(ingress.metadata.annotations, "ssl-passthrough", annotation_options());
    for (const auto& rule : ingress.spec.rules) {
      if (rule.host.empty()) {
        report(object, Severity::kWarning,
               "annotation " + found->key +
                   ": a rule without a host cannot be passed through (the host is the SNI the "
                   "client sends); its paths are served as usual");
        continue;
      }
      const std::string host = text::ascii_lower(rule.host);
      if (host.front() == '*' || !model::is_valid_host(host)) {
        report(object, Severity::kError,
               "annotation " + found->key + ": " + host +
                   " is not an exact host name; its connections are terminated as usual");
        continue;
      }
      // `target` keeps the annotation's key for the messages of assemble().
      auto [it, inserted] =
          passthrough_claims_.emplace(host, HostClaim{found->key, name_of(ingress), object});
      if (!inserted && it->second.ingress != name_of(ingress)) {
        report(object, Severity::kError,
               "annotation " + found->key + ": host " + host +
                   " is already passed through by the older Ingress " + it->second.ingress +
                   "; not for this Ingress");
      }
    }
  }

  // auth-tls-secret: the CA bundle read from the Secret, the settings claimed for each rule
  // host of the Ingress (the oldest Ingress's settings win a host). A setup that cannot be used
  // keeps ca_pem empty: the hosts refuse every request instead of going unchecked.
  void add_client_auth(IngressContext& ctx) {
    const Ingress& ingress = *ctx.ingress;
    model::ClientAuth auth = *ctx.policy.client_auth;
    auto annotation =
        find_annotation(ingress.metadata.annotations, "auth-tls-secret", annotation_options());
    const std::string key = annotation ? annotation->key : "tidegate.io/auth-tls-secret";
    const std::string consequence =
        "; the Ingress's hosts refuse every request (503) until it is fixed, rather than "
        "serving clients without the certificate check";
    if (!auth.secret.empty() && auth.ca_pem.empty()) {
      auto secret = store_.secrets().find(auth.secret);
      std::string problem;
      if (secret == store_.secrets().end()) {
        problem = "Secret " + auth.secret + " not found";
      } else if (auto ca = secret->second.data.find("ca.crt"); ca == secret->second.data.end()) {
        problem = "Secret " + auth.secret + " has no ca.crt";
      } else if (std::string why = check_ca_bundle(ca->second); !why.empty()) {
        problem = "Secret " + auth.secret + " " + why;
      } else if (auto crl = secret->second.data.find("ca.crl");
                 crl != secret->second.data.end() && !crl->second.empty()) {
        if (std::string bad = check_crl_bundle(crl->second); !bad.empty()) {
          problem = "Secret " + auth.secret + " " + bad;
        } else {
          auth.ca_pem = ca->second;
          auth.crl_pem = crl->second;
        }
      } else {
        auth.ca_pem = ca->second;
      }
      if (!problem.empty())
        report(ctx.object, Severity::kError, "annotation " + key + ": " + problem + consequence);
    }
    if (auth.ca_pem.size() + auth.crl_pem.size() > model::ClientAuth::kMaxCaBytes) {
      report(
          ctx.object, Severity::kError,
          "annotation " + key + ": Secret " + auth.secret + " is larger than 1 MiB" + consequence);
      auth.ca_pem.clear();
      auth.crl_pem.clear();
    }
    bool hostless = false;
    std::set<std::string> hosts;
    for (const auto& rule : ingress.spec.rules) {
      if (rule.host.empty()) {
        hostless = true;
        continue;
      }
      hosts.insert(text::ascii_lower(rule.host));
    }
    if (hostless) {
      report(ctx.object, Severity::kWarning,
             "annotation " + key +
                 ": rules without a host get no client certificate check (a client names the "
                 "host it wants certificates checked for through SNI)");
    }
    for (const auto& host : hosts) {
      if (!model::is_valid_host(host)) continue;  // reported with the rule
      auto [it, inserted] = client_auth_claims_.emplace(host, ClientAuthClaim{auth, ctx.name});
      if (!inserted && it->second.auth != auth) {
        report(ctx.object, Severity::kError,
               "annotation " + key + ": host " + host +
                   " already has other client certificate settings from the older Ingress " +
                   it->second.ingress + "; this Ingress's are not used for it");
      }
    }
  }

  // "true"/"false" of a host-level annotation; anything else is reported and ignored.
  std::optional<bool> host_flag(const Ingress& ingress, const std::string& object,
                                std::string_view name) {
    auto found = find_annotation(ingress.metadata.annotations, name, annotation_options());
    if (!found) return std::nullopt;
    const std::string_view v = text::trim_ows(found->value);
    if (v == "true") return true;
    if (v == "false") return false;
    report(object, Severity::kError,
           "annotation " + found->key + ": invalid value " + quote(found->value) +
               ": expected \"true\" or \"false\"; ignored");
    return std::nullopt;
  }

  // The annotations that make or change hosts rather than routes (docs/annotations.md, "Hosts"):
  // force-ssl-redirect, from-to-www-redirect and server-alias. Applied in assemble(), once every
  // Ingress's hosts are known.
  void add_host_annotations(const Ingress& ingress, const std::string& object) {
    // Looked up first (in the order their values are reported): most Ingresses have none of
    // the three, and need no list of hosts.
    const bool force_redirect = host_flag(ingress, object, "force-ssl-redirect").value_or(false);
    const bool www_redirect = host_flag(ingress, object, "from-to-www-redirect").value_or(false);
    const auto server_alias =
        find_annotation(ingress.metadata.annotations, "server-alias", annotation_options());
    if (!force_redirect && !www_redirect && !server_alias) return;
    std::vector<std::string> hosts;  // the rule hosts, in order, once each
    for (const auto& rule : ingress.spec.rules) {
      const std::string host = text::ascii_lower(rule.host);
      if (host.empty() || !model::is_valid_host(host)) continue;
      if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
    }
    const std::string name = name_of(ingress);
    if (force_redirect) {
      for (const auto& h : hosts) force_redirect_hosts_.insert(h);
    }
    if (www_redirect) {
      for (const auto& h : hosts) {
        if (h.front() == '*') continue;  // a wildcard has no single other name
        std::string other = h.rfind("www.", 0) == 0 ? h.substr(4) : "www." + h;
        if (!model::is_valid_host(other) || other.find('.') == std::string::npos) continue;
        auto [it, added] = www_claims_.emplace(other, HostClaim{h, name, object});
        if (!added && it->second.target != h) {
          report(object, Severity::kError,
                 "annotation from-to-www-redirect: " + other + " already redirects to " +
                     it->second.target + " (Ingress " + it->second.ingress +
                     ", the older one wins); no redirect from it to " + h);
        }
      }
    }
    if (const auto& found = server_alias) {
      std::string problem;
      const auto aliases = parse_server_aliases(found->value, &problem);
      if (!aliases) {
        report(object, Severity::kError,
               "annotation " + found->key + ": invalid value " + quote(found->value) + ": " +
                   problem + " (a comma-separated list of host names); ignored");
      } else if (hosts.empty()) {
        report(object, Severity::kWarning,
               "annotation " + found->key + " has no effect without a rule with a host; ignored");
      } else {
        if (hosts.size() > 1) {
          report(object, Severity::kWarning,
                 "annotation " + found->key + ": the aliases name the first rule host, " +
                     hosts.front() + ", not the others");
        }
        for (const auto& alias : *aliases) {
          if (alias == hosts.front()) continue;
          auto [it, added] = alias_claims_.emplace(alias, HostClaim{hosts.front(), name, object});
          if (!added && it->second.target != hosts.front()) {
            report(object, Severity::kError,
                   "annotation " + found->key + ": " + alias + " is already an alias of " +
                       it->second.target + " (Ingress " + it->second.ingress +
                       ", the older one wins); ignored for " + hosts.front());
          }
        }
      }
    }
  }

  // Calls visit(host, path, where) for every path of every rule with a valid host; a rule with
  // an invalid host is reported and dropped.
  template <typename Visit>
  void for_each_rule_path(const Ingress& ingress, const std::string& object, Visit&& visit) {
    for (size_t i = 0; i < ingress.spec.rules.size(); ++i) {
      const auto& rule = ingress.spec.rules[i];
      const std::string rule_path = index_path("spec.rules", i);
      const std::string host = rule.host.empty() ? "*" : text::ascii_lower(rule.host);
      if (!model::is_valid_host(host)) {
        report(object, Severity::kError,
               rule_path + ".host: invalid host " + quote(rule.host) + "; rule dropped");
        continue;
      }
      for (size_t j = 0; j < rule.paths.size(); ++j) {
        visit(host, rule.paths[j], index_path(rule_path + ".http.paths", j));
      }
    }
  }

  // A canary Ingress (docs/annotations.md, "Canary"): each of its paths becomes the alternative
  // backend of the main route with the same host, match type and path; it has no routes of its
  // own. Its route-level annotations were already reported as ignored by the parser.
  void add_canary(const IngressContext& ctx) {
    const Ingress& ingress = *ctx.ingress;
    const std::string& object = ctx.object;
    if (annotations::has_substitution_annotations(ingress.metadata.annotations)) {
      report(object, Severity::kWarning,
             "substitution annotations are ignored on a canary Ingress (the main route's "
             "apply to both backends)");
    }
    if (ingress.spec.default_backend) {
      report(object, Severity::kWarning,
             "spec.defaultBackend: ignored on a canary Ingress (a canary only splits the "
             "traffic of main routes)");
    }
    if (!ingress.spec.tls.empty()) {
      report(object, Severity::kWarning,
             "spec.tls: ignored on a canary Ingress (the main Ingress's TLS settings apply)");
    }
    for_each_rule_path(ingress, object,
                       [&](const std::string& host, const auto& path, const std::string& where) {
                         add_canary_path(ctx, host, path, where);
                       });
  }

  void add_canary_path(const IngressContext& ctx, const std::string& host,
                       const objects::HTTPIngressPath& path, const std::string& where) {
    auto routed = route_path(ctx, path, where);
    if (!routed) return;
    const auto& [text, match] = *routed;
    const std::string described = "canary " + std::string(model::to_string(match)) + " path " +
                                  quote(text) + " on host " + quote(host);
    Claim* main = nullptr;
    if (auto h = hosts_.find(host); h != hosts_.end()) {
      auto m = h->second.find(std::make_pair(conflict_key(text, match), match));
      if (m != h->second.end()) main = &m->second;
    }
    if (main == nullptr) {
      // A canary never serves on its own (as in ingress-nginx).
      report(ctx.object, Severity::kError,
             where + ": " + described + " has no main route; path dropped");
      return;
    }
    Claim& claim = *main;
    std::string error;
    auto upstream = resolve(ctx, path.backend, &error);
    if (!upstream) {
      report(ctx.object, Severity::kError, where + ": " + error + "; path dropped");
      return;
    }
    if (*upstream == claim.upstream) {
      report(ctx.object, Severity::kWarning,
             where + ": " + described + ": the main route (Ingress " + claim.ingress +
                 ") already goes to " + *upstream + "; nothing to split");
      return;
    }
    model::Canary canary = *ctx.policy.canary;
    canary.upstream = *upstream;
    if (claim.canary) {
      if (claim.canary_ingress == ctx.name && *claim.canary == canary) return;
      report(ctx.object, Severity::kError,
             where + ": " + described + ": the main route already has a canary from Ingress " +
                 claim.canary_ingress +
                 " (one canary per route; the older one wins); path dropped");
      return;
    }
    claim.canary = std::move(canary);
    claim.canary_ingress = ctx.name;
  }

  // spec.tls: each entry's Secret becomes a Certificate and each of its hosts a TlsHost. An entry
  // without hosts covers the hosts of this Ingress's rules. A host claimed by two Ingresses with
  // different Secrets goes to the oldest Ingress.
  void add_tls(const Ingress& ingress, const std::string& object) {
    if (auto found =
            find_annotation(ingress.metadata.annotations, "ssl-redirect", annotation_options())) {
      if (found->value == "false") {
        for (const auto& rule : ingress.spec.rules) {
          no_redirect_hosts_.insert(rule.host.empty() ? "*" : text::ascii_lower(rule.host));
        }
      } else if (found->value != "true") {
        report(object, Severity::kWarning,
               "annotation " + found->key + ": expected \"true\" or \"false\", got " +
                   quote(found->value) + "; treated as \"true\"");
      }
    }
    for (size_t i = 0; i < ingress.spec.tls.size(); ++i) {
      const auto& tls = ingress.spec.tls[i];
      const std::string where = index_path("spec.tls", i);
      if (tls.secret_name.empty()) {
        report(object, Severity::kError,
               where + ": no secretName; its hosts get the default certificate");
        continue;
      }
      const std::string secret_key =
          store::object_key(ingress.metadata.namespace_, tls.secret_name);
      auto secret = store_.secrets().find(secret_key);
      if (secret == store_.secrets().end()) {
        report(
            object, Severity::kError,
            where + ": Secret " + secret_key + " not found; its hosts get the default certificate");
        continue;
      }
      const auto& data = secret->second.data;
      auto crt = data.find("tls.crt");
      auto key = data.find("tls.key");
      std::string problem;
      if (crt == data.end() || key == data.end()) {
        problem = "has no tls.crt and tls.key";
      } else {
        problem = check_certificate_pair(crt->second, key->second);
      }
      if (!problem.empty()) {
        // Never the PEM itself in a message: it is secret.
        report(object, Severity::kError,
               where + ": Secret " + secret_key + " " + problem +
                   "; its hosts get the default certificate");
        continue;
      }
      std::vector<std::string> hosts;
      for (const auto& h : tls.hosts) hosts.push_back(text::ascii_lower(h));
      if (hosts.empty()) {
        for (const auto& rule : ingress.spec.rules) {
          if (!rule.host.empty()) hosts.push_back(text::ascii_lower(rule.host));
        }
      }
      bool used = false;
      for (const auto& host : hosts) {
        if (!model::is_valid_host(host) || host == "*") {
          report(object, Severity::kError, where + ": invalid host " + quote(host) + "; skipped");
          continue;
        }
        auto [it, inserted] = tls_claims_.emplace(host, TlsClaim{secret_key, name_of(ingress)});
        if (!inserted && it->second.certificate != secret_key) {
          report(object, Severity::kError,
                 where + ": host " + host + " already uses Secret " + it->second.certificate +
                     " from the older Ingress " + it->second.ingress + "; " + secret_key +
                     " is not used for it");
          continue;
        }
        used = true;
      }
      if (used) {
        certificates_.emplace(secret_key, model::Certificate{secret_key, crt->second, key->second});
      }
    }
  }

  // The path text and match type of an Ingress path, or nullopt (reported) when it cannot be
  // routed.
  std::optional<std::pair<std::string, model::PathMatch>> route_path(
      const IngressContext& ctx, const objects::HTTPIngressPath& path, const std::string& where) {
    const std::string& object = ctx.object;
    const bool regex = ctx.regex;
    std::string text = path.path.empty() ? "/" : path.path;
    model::PathMatch match = model::PathMatch::kPrefix;
    switch (path.path_type) {
      case objects::PathType::kExact:
        match = model::PathMatch::kExact;
        break;
      case objects::PathType::kPrefix:
      case objects::PathType::kImplementationSpecific:
        match = regex ? model::PathMatch::kRegex : model::PathMatch::kPrefix;
        break;
    }
    if (match == model::PathMatch::kRegex) {
      RE2::Options re_options;
      re_options.set_log_errors(false);
      RE2 re(text, re_options);
      if (!re.ok()) {
        report(object, Severity::kError,
               where + ": invalid regex " + quote(text) + ": " + re.error() + "; path dropped");
        return std::nullopt;
      }
    }
    if (!std::all_of(text.begin(), text.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
      // Requests carry paths percent-encoded, so such a path could never match; it would also
      // carry arbitrary bytes into logs and the control protocol.
      report(object, Severity::kError,
             where + ": path contains spaces, control or non-ASCII characters; path dropped");
      return std::nullopt;
    }
    if (match != model::PathMatch::kRegex && text.front() != '/') {
      report(object, Severity::kError,
             where + ": path " + quote(text) + " does not start with '/'; path dropped");
      return std::nullopt;
    }
    return std::make_pair(std::move(text), match);
  }

  void add_path(const IngressContext& ctx, const std::string& host,
                const objects::HTTPIngressPath& path, const std::string& where) {
    const std::string& object = ctx.object;
    auto routed = route_path(ctx, path, where);
    if (!routed) return;
    auto& [text, match] = *routed;
    std::string error;
    auto upstream = resolve(ctx, path.backend, &error);
    if (!upstream) {
      report(object, Severity::kError, where + ": " + error + "; path dropped");
      return;
    }

    auto& routes = hosts_[host];
    auto key = std::make_pair(conflict_key(text, match), match);
    auto it = routes.find(key);
    if (it == routes.end()) {
      // The upstream's name and the path text are not read after this: they move.
      Claim claim{std::move(*upstream), ctx.name, std::move(text), ctx.substitution,
                  ctx.policy.route};
      claim.fallback_upstream = ctx.fallback_upstream;
      routes.emplace(std::move(key), std::move(claim));
      return;
    }
    // The same backend twice (two Ingresses, or two rules for one host) is not a conflict, unless
    // the two would treat requests or responses differently.
    std::string same = it->second.path == text ? "" : " (as " + quote(it->second.path) + ")";
    if (it->second.upstream == *upstream) {
      const bool same_subst = same_substitution(it->second.substitution, ctx.substitution);
      if (same_subst && it->second.policy == ctx.policy.route &&
          it->second.fallback_upstream == ctx.fallback_upstream) {
        return;
      }
      report(object, Severity::kError,
             where + ": host " + quote(host) + " " + model::to_string(match) + " path " +
                 quote(text) + " is already routed" + same + " to " + it->second.upstream +
                 " by Ingress " + it->second.ingress + " with other " +
                 (same_subst ? "route annotations" : "substitutions") +
                 " (the older one wins); path dropped");
      return;
    }
    report(object, Severity::kError,
           where + ": host " + quote(host) + " " + model::to_string(match) + " path " +
               quote(text) + " is already routed" + same + " to " + it->second.upstream +
               " by Ingress " + it->second.ingress + " (the older one wins); path dropped");
  }

  // Whether two claims' substitutions (names in substitutions_, empty for none) do the same.
  bool same_substitution(const std::string& a, const std::string& b) const {
    if (a.empty() || b.empty()) return a == b;
    model::Substitution x = substitutions_.at(a);
    x.name = b;
    return x == substitutions_.at(b);
  }

  // The tidegate.io/substitution* annotations and the SubstitutionRuleSet they name, as a
  // model::Substitution in substitutions_; returns its name, or "" when no valid rule remains.
  // Invalid rules are dropped one by one with an error; the Ingress keeps routing either way.
  std::string add_substitution(const Ingress& ingress, const std::string& object) {
    using annotations::kSubstitutionRuleSetAnnotation;
    using annotations::kSubstitutionsAnnotation;
    if (!annotations::has_substitution_annotations(ingress.metadata.annotations)) return {};
    const annotations::SubstitutionAnnotations parsed =
        annotations::parse_substitution_annotations(ingress.metadata.annotations);
    for (const auto& message : parsed.errors) report(object, Severity::kError, message);

    // Where each rule of the combined list came from, for messages.
    std::vector<substitution::Rule> rules;
    std::vector<std::string> origin;
    if (!parsed.rule_set.empty()) {
      const std::string key = store::object_key(ingress.metadata.namespace_, parsed.rule_set);
      auto set = store_.substitution_rule_sets().find(key);
      if (set == store_.substitution_rule_sets().end()) {
        report(object, Severity::kError,
               std::string(kSubstitutionRuleSetAnnotation) + ": SubstitutionRuleSet " + key +
                   " not found; only the Ingress's own rules apply");
      } else {
        const auto& set_rules = set->second.rules;
        for (size_t i = 0; i < set_rules.size(); ++i) {
          rules.push_back({set_rules[i].match, set_rules[i].replace, set_rules[i].flags});
          origin.push_back(std::string(kSubstitutionRuleSetAnnotation) + ": SubstitutionRuleSet " +
                           key + " " + index_path("spec.rules", i));
        }
      }
    }
    for (const auto& r : parsed.rules) {
      rules.push_back(r.rule);
      origin.push_back(std::string(kSubstitutionsAnnotation) + ": rule " + std::to_string(r.index));
    }
    if (rules.empty()) {
      if (parsed.rule_set.empty() &&
          !ingress.metadata.annotations.contains(std::string(kSubstitutionsAnnotation))) {
        report(object, Severity::kWarning,
               "substitution annotations without tidegate.io/substitutions or "
               "tidegate.io/substitution-rule-set have no effect");
      }
      return {};
    }

    std::vector<bool> dropped(rules.size(), false);
    bool whole_list = false;
    for (const auto& error : substitution::validate_rules(rules)) {
      if (error.message == error.reason) {  // about the list, not one rule
        report(object, Severity::kError,
               std::string(kSubstitutionsAnnotation) + ": " + error.reason + "; no substitution");
        whole_list = true;
        continue;
      }
      dropped[error.index] = true;
      std::string reason = error.reason;
      if (reason.starts_with("more than ") && !parsed.rule_set.empty()) {
        reason += " (counting the rule set's)";
      }
      report(object, Severity::kError,
             origin[error.index] + " (match " + quote_pattern(rules[error.index].match) +
                 "): " + reason + "; rule dropped");
    }
    if (whole_list) return {};

    model::Substitution sub;
    sub.name = name_of(ingress);
    for (size_t i = 0; i < rules.size(); ++i) {
      if (!dropped[i]) sub.rules.push_back(std::move(rules[i]));
    }
    if (sub.rules.empty()) return {};
    sub.mime_types = parsed.mime_types;
    sub.max_buffer = parsed.max_buffer;
    substitutions_.emplace(sub.name, sub);
    return sub.name;
  }

  static std::string quote_pattern(std::string_view s) {
    std::string out = "\"";
    out.append(s.substr(0, 80));
    if (s.size() > 80) out += "...";
    return out + "\"";
  }

  // A Service's first port, as the backend ingress-nginx's default-backend annotation and flag
  // mean; nullopt with *error when there is no such Service or it has no port.
  std::optional<objects::IngressBackend> first_port_backend(const std::string& ns,
                                                            const std::string& name,
                                                            std::string* error) const {
    auto svc = store_.services().find(store::object_key(ns, name));
    if (svc == store_.services().end()) {
      *error = "service " + quote(name) + " not found in namespace " + quote(ns);
      return std::nullopt;
    }
    if (svc->second.spec.ports.empty()) {
      *error = "service " + svc->first + " has no ports";
      return std::nullopt;
    }
    objects::IngressBackend backend;
    backend.service = objects::IngressServiceBackend{name, {}};
    backend.service->port.number = svc->second.spec.ports.front().port;
    return backend;
  }

  // --default-backend-service: its upstream (plain HTTP, default policy), for the default route
  // and as every route's fallback.
  void resolve_default_backend_service() {
    const std::string& key = options_.default_backend_service;
    if (key.empty()) return;
    const auto slash = key.find('/');
    flag_ingress_.metadata.namespace_ = key.substr(0, slash);
    flag_ingress_.metadata.name = key.substr(slash + 1);
    IngressContext ctx;
    ctx.ingress = &flag_ingress_;
    ctx.name = "--default-backend-service";
    ctx.object = "Service " + key;
    std::string error;
    auto backend =
        first_port_backend(flag_ingress_.metadata.namespace_, flag_ingress_.metadata.name, &error);
    auto upstream = backend ? resolve(ctx, *backend, &error) : std::nullopt;
    if (!upstream) {
      report(ctx.object, Severity::kError,
             "--default-backend-service: " + error +
                 "; requests no route takes get 404 and routes without endpoints 503");
      return;
    }
    flag_upstream_ = *upstream;
  }

  // The default-backend annotation: a Service of the Ingress's namespace (its first port) that
  // serves the Ingress's routes while their backend has no endpoints; else the controller's.
  std::string fallback_upstream(const IngressContext& ctx) {
    auto found =
        find_annotation(ctx.ingress->metadata.annotations, "default-backend", annotation_options());
    if (!found) return flag_upstream_;
    const std::string name(text::trim_ows(found->value));
    std::string error;
    if (!is_service_name(name)) {
      error = "not a Service name";
    } else if (auto backend = first_port_backend(ctx.ingress->metadata.namespace_, name, &error)) {
      // Plain HTTP with the default upstream policy: an error-page server, not the application
      // (the Ingress's backend-protocol and balancing are the application's).
      IngressContext plain;
      plain.ingress = ctx.ingress;
      plain.name = ctx.name;
      plain.object = ctx.object;
      if (auto upstream = resolve(plain, *backend, &error)) return *upstream;
    }
    report(ctx.object, Severity::kError,
           "annotation " + found->key + ": invalid value " + quote(found->value) + ": " + error +
               "; ignored" +
               (flag_upstream_.empty() ? "" : " (--default-backend-service applies)"));
    return flag_upstream_;
  }

  void add_default_backend(const IngressContext& ctx) {
    std::string error;
    auto upstream = resolve(ctx, *ctx.ingress->spec.default_backend, &error);
    if (!upstream) {
      report(ctx.object, Severity::kError, "spec.defaultBackend: " + error + "; ignored");
      return;
    }
    if (!default_claim_) {
      default_claim_ = Claim{*upstream, ctx.name, "/", ctx.substitution, ctx.policy.route};
      default_claim_->fallback_upstream = ctx.fallback_upstream;
      return;
    }
    const bool same_upstream = default_claim_->upstream == *upstream;
    const bool same_subst = same_substitution(default_claim_->substitution, ctx.substitution);
    if (same_upstream && same_subst && default_claim_->policy == ctx.policy.route) return;
    report(ctx.object, Severity::kError,
           "spec.defaultBackend: the default backend is already " + default_claim_->upstream +
               " from Ingress " + default_claim_->ingress +
               (!same_upstream ? ""
                : !same_subst  ? " with other substitutions"
                               : " with other route annotations") +
               " (the older one wins); ignored");
  }

  // auth-url: the upstream of the Service its host names (the URL's port), plain HTTP or HTTPS
  // as the URL says, with the default upstream policy (the Ingress's backend annotations are
  // its application's). Unusable: reported, and the route fails closed (no upstream).
  void resolve_external_auth(const IngressContext& ctx, model::ExternalAuth& auth) {
    if (auth.url.empty()) return;  // the parser reported it
    std::string error;
    auto url = model::parse_auth_url(auth.url, &error);
    const std::string ns = ctx.ingress->metadata.namespace_;
    auto service = url ? model::service_of_auth_host(url->host, ns) : std::nullopt;
    if (service) {
      IngressContext plain;
      plain.ingress = ctx.ingress;
      plain.name = ctx.name;
      plain.object = ctx.object;
      plain.tls.https = url->https;
      plain.tls.server_name = url->host;
      objects::IngressBackend backend;
      const auto slash = service->find('/');
      backend.service = objects::IngressServiceBackend{service->substr(slash + 1), {}};
      backend.service->port.number = url->port;
      if (auto upstream = resolve(plain, backend, &error, service->substr(0, slash))) {
        auth.upstream = *upstream;
        return;
      }
    }
    auto found =
        find_annotation(ctx.ingress->metadata.annotations, "auth-url", annotation_options());
    report(ctx.object, Severity::kError,
           "annotation " + (found ? found->key : std::string("auth-url")) + ": " + error +
               "; the route refuses every request (503) until it is fixed");
  }

  // The upstream name for a backend, or nullopt with *error set. The Service is looked up in
  // the Ingress's namespace unless `service_namespace` names another (auth-url).
  std::optional<std::string> resolve(const IngressContext& ctx,
                                     const objects::IngressBackend& backend, std::string* error,
                                     const std::string& service_namespace = {}) {
    const Ingress& ingress = *ctx.ingress;
    const BackendTls& tls = ctx.tls;
    if (!backend.service) {
      *error =
          "resource backends (kind " + backend.resource_kind.value_or("?") + ") are not supported";
      return std::nullopt;
    }
    const auto& ref = *backend.service;
    const std::string& ns =
        service_namespace.empty() ? ingress.metadata.namespace_ : service_namespace;
    auto svc = store_.services().find(store::object_key(ns, ref.name));
    if (svc == store_.services().end()) {
      *error = "service " + quote(ref.name) + " not found in namespace " + quote(ns);
      return std::nullopt;
    }
    const objects::Service& service = svc->second;
    const objects::ServicePort* port = find_service_port(service, ref.port);
    if (port == nullptr) {
      *error = "service " + svc->first +
               (ref.port.is_number() ? " has no port " + ref.port.to_string()
                                     : " has no port named " + quote(ref.port.name));
      return std::nullopt;
    }
    if (port->protocol != "TCP") {
      *error = "service " + svc->first + " port " + ref.port.to_string() + " uses protocol " +
               port->protocol + "; only TCP can be proxied";
      return std::nullopt;
    }
    std::string name = svc->first + ":" + ref.port.to_string();
    UpstreamClaim claim{
        UpstreamSource{&service, port}, {}, tls.fail_closed, ctx.name, ctx.policy.upstream};
    // appProtocol h2c makes a plain backend HTTP/2 unless backend-protocol says otherwise (the
    // Ingress author's word is the more specific one).
    if (app_protocol_is_h2c(port->app_protocol) && !ctx.protocol_from_annotation) {
      claim.policy.mut().protocol = model::BackendProtocol::kH2c;
    }
    if (model::uses_http2(claim.policy->protocol)) name += kHttp2Suffix;
    if (tls.https) {
      name += kHttpsSuffix;
      claim.tls.enabled = true;
      claim.tls.server_name =
          tls.server_name.empty() ? ref.name + "." + ns + ".svc" : tls.server_name;
      claim.tls.ca_pem = tls.ca_pem;
    }
    auto it = upstream_claims_.lower_bound(name);
    if (it == upstream_claims_.end() || it->first != name) {
      upstream_claims_.emplace_hint(it, name, std::move(claim));  // the first claim: no copy
      return name;
    }
    if (it->second.tls != claim.tls || it->second.fail_closed != claim.fail_closed) {
      // Verification settings are not merged: the younger Ingress would otherwise talk to its
      // backend with a CA or name it did not ask for.
      *error = "upstream " + name + " is already used by Ingress " + it->second.ingress +
               " with other TLS settings (tidegate.io/proxy-ssl-secret, proxy-ssl-name; the "
               "older one wins)";
      return std::nullopt;
    }
    if (!(it->second.policy == claim.policy) &&
        upstream_conflicts_.emplace(ctx.name, name).second) {
      // Upstreams are shared; their settings (balancer tables, affinity) cannot be per Ingress.
      report(ctx.object, Severity::kError,
             "upstream " + name + " already has the settings " +
                 model::to_json(*it->second.policy).dump() + " from Ingress " + it->second.ingress +
                 " (the older one wins); this Ingress's upstream annotations " +
                 model::to_json(*claim.policy).dump() + " are ignored for it");
    }
    return name;
  }

  // True when a TLS host (exact, or a wildcard one label up) covers `host`.
  bool has_tls(const std::string& host) const {
    if (tls_claims_.contains(host)) return true;
    auto dot = host.find('.');
    return dot != std::string::npos && tls_claims_.contains("*" + host.substr(dot));
  }

  // The certificate (Secret key) a TLS host entry, exact or a wildcard one label up, gives
  // `host`; null: none.
  const std::string* certificate_of(const std::string& host) const {
    if (auto it = tls_claims_.find(host); it != tls_claims_.end()) return &it->second.certificate;
    auto dot = host.find('.');
    if (dot == std::string::npos) return nullptr;
    auto it = tls_claims_.find("*" + host.substr(dot));
    return it == tls_claims_.end() ? nullptr : &it->second.certificate;
  }

  // server-alias: each alias is another name of its host: the same routes, certificate and
  // redirect. A name that is a host of its own keeps its own routes.
  void add_aliases(model::Config& config) {
    for (const auto& [alias, claim] : alias_claims_) {
      if (config.virtual_hosts.contains(alias) || www_claims_.contains(alias)) {
        report(claim.object, Severity::kWarning,
               "annotation server-alias: " + alias +
                   " is a host of its own (its own routes or a www redirect); not an alias of " +
                   claim.target);
        continue;
      }
      auto primary = config.virtual_hosts.find(claim.target);
      if (primary == config.virtual_hosts.end()) continue;  // no routes: nothing to alias
      model::VirtualHost vh = primary->second;
      vh.host = alias;
      config.virtual_hosts.emplace(alias, std::move(vh));
      if (!has_tls(alias)) {
        if (const std::string* certificate = certificate_of(claim.target)) {
          config.tls_hosts.emplace(alias, model::TlsHost{alias, *certificate});
        }
      }
      // An alias is checked for client certificates as its host is: never a way around them.
      if (auto target = client_auth_claims_.find(claim.target);
          target != client_auth_claims_.end()) {
        auto [it, inserted] = config.tls_hosts.emplace(alias, model::TlsHost{alias, ""});
        if (inserted) {
          if (const std::string* certificate = certificate_of(claim.target)) {
            it->second.certificate = *certificate;
          }
        }
        it->second.client_auth = target->second.auth;
      }
    }
  }

  // Client certificates follow the virtual host a request is routed to, as nginx's follow the
  // server block: a name under a wildcard host with client certificates is checked as the
  // wildcard when the wildcard routes it (no host of its own), even when a TLS entry of its own
  // (another Ingress's spec.tls) gives it a certificate; a host of its own under such a wildcard
  // is not checked unless its own Ingress asks (a TLS entry of its own says so, with the
  // wildcard's certificate when it has none).
  void cover_wildcard_client_auth(model::Config& config) {
    std::vector<model::TlsHost> added;
    for (auto& [name, wildcard] : config.tls_hosts) {
      if (name.size() < 3 || name[0] != '*' || !wildcard.client_auth) continue;
      const std::string suffix = name.substr(1);  // ".example.com"
      auto covered = [&](const std::string& host) {
        return host.size() > suffix.size() && host[0] != '*' && host.ends_with(suffix) &&
               host.find('.') == host.size() - suffix.size();
      };
      for (auto& [host, entry] : config.tls_hosts) {
        if (covered(host) && !entry.client_auth && entry.passthrough_upstream.empty() &&
            !config.virtual_hosts.contains(host)) {
          entry.client_auth = wildcard.client_auth;
        }
      }
      for (const auto& [host, vh] : config.virtual_hosts) {
        if (covered(host) && !config.tls_hosts.contains(host)) {
          added.push_back(model::TlsHost{host, wildcard.certificate});
        }
      }
    }
    for (auto& t : added) config.tls_hosts.emplace(t.host, std::move(t));
  }

  // ssl-passthrough: the host's TLS entry names the upstream of its "/" path instead of a
  // certificate (and client certificates, which need termination, do not apply).
  void add_passthrough_hosts(model::Config& config) {
    for (const auto& [host, claim] : passthrough_claims_) {
      const model::Route* root = nullptr;
      if (auto vh = config.virtual_hosts.find(host); vh != config.virtual_hosts.end()) {
        for (const auto& r : vh->second.routes) {
          if (r.path == "/" && r.match != model::PathMatch::kRegex && r.ingress == claim.ingress) {
            root = &r;
          }
        }
      }
      if (root == nullptr) {
        report(claim.object, Severity::kError,
               "annotation " + claim.target + ": host " + host +
                   " has no path \"/\" of this Ingress (its backend receives the connections); "
                   "its connections are terminated as usual");
        continue;
      }
      auto [it, inserted] = config.tls_hosts.emplace(host, model::TlsHost{host, ""});
      if (!inserted && it->second.client_auth) {
        // Passing through would leave the host's routes (plain HTTP, TLS without SNI) without
        // the certificate check another setting asks for: the check wins.
        report(claim.object, Severity::kError,
               "annotation " + claim.target + ": host " + host +
                   " has client certificate settings (auth-tls-*); it is not passed through");
        continue;
      }
      if (!inserted) {
        report(claim.object, Severity::kWarning,
               "annotation " + claim.target + ": host " + host +
                   " is passed through: its TLS certificate is not used");
      }
      it->second = model::TlsHost{host, "", std::nullopt, root->upstream};
    }
  }

  // from-to-www-redirect: the other name of each host redirects to it, unless it is a host of its
  // own (as ingress-nginx, which skips the redirect then).
  void add_www_redirects(model::Config& config) {
    for (const auto& [from, claim] : www_claims_) {
      if (config.virtual_hosts.contains(from)) {
        report(claim.object, Severity::kWarning,
               "annotation from-to-www-redirect: " + from +
                   " is a host of its own; it is not redirected to " + claim.target);
        continue;
      }
      if (!config.virtual_hosts.contains(claim.target)) continue;  // no routes: nothing to reach
      model::VirtualHost vh{from, {}};
      vh.redirect_to = claim.target;
      config.virtual_hosts.emplace(from, std::move(vh));
    }
  }

  void assemble() {
    model::Config& config = result_.config;
    // The upstreams the routes name, known before the routes take the claims' parts: the
    // upstreams (with their endpoints, the larger part of the work) are then built beside the
    // virtual hosts, on a second thread when there are many (TranslateOptions::
    // upstreams_beside_from). Neither side reads what the other writes: the hosts read the host
    // claims, TLS claims and certificates and report into result_; the upstreams read the
    // upstream claims and the Store and report into their own list, which follows the hosts'
    // reports as it would on one thread.
    const std::set<std::string> referenced = referenced_upstreams();
    BuiltUpstreams built;
    // (Declared after what it uses: when the hosts throw, its destructor waits for it.)
    auto upstreams_done = run_beside(referenced.size() >= options_.upstreams_beside_from,
                                     [&] { build_upstreams(referenced, &built); });
    assemble_hosts(config);
    upstreams_done.get();
    for (auto& d : built.diagnostics) result_.diagnostics.push_back(std::move(d));
    config.upstreams = std::move(built.upstreams);
    result_.fail_closed_upstreams = std::move(built.fail_closed);
    result_.service_ip_upstreams = std::move(built.service_ip);
  }

  // The upstreams the routes (and the default route) will name: every upstream a model::Route
  // built in assemble_hosts() can name (a field that names another upstream goes here too).
  std::set<std::string> referenced_upstreams() const {
    std::set<std::string> referenced;
    auto add_claim = [&](const Claim& claim) {
      referenced.insert(claim.upstream);
      if (!claim.fallback_upstream.empty()) referenced.insert(claim.fallback_upstream);
      if (claim.policy->external_auth && !claim.policy->external_auth->upstream.empty()) {
        referenced.insert(claim.policy->external_auth->upstream);
      }
      if (claim.canary) referenced.insert(claim.canary->upstream);
    };
    for (const auto& [host, claims] : hosts_) {
      for (const auto& [key, claim] : claims) add_claim(claim);
    }
    if (default_claim_) {
      add_claim(*default_claim_);
    } else if (!flag_upstream_.empty()) {
      referenced.insert(flag_upstream_);
    }
    return referenced;
  }

  void assemble_hosts(model::Config& config) {
    for (const auto& [host, claim] : tls_claims_) {
      config.tls_hosts.emplace(host, model::TlsHost{host, claim.certificate});
    }
    // Client certificates go on the host's own TLS entry; a host without one gets an entry with
    // the certificate that covers it (a wildcard's, or the default certificate).
    for (const auto& [host, claim] : client_auth_claims_) {
      auto [it, inserted] = config.tls_hosts.emplace(host, model::TlsHost{host, ""});
      if (inserted) {
        if (const std::string* certificate = certificate_of(host))
          it->second.certificate = *certificate;
      }
      it->second.client_auth = claim.auth;
    }
    for (auto& [host, claims] : hosts_) {
      model::VirtualHost vh{host, {}};
      vh.ssl_redirect = host != "*" && (force_redirect_hosts_.contains(host) ||
                                        ((has_tls(host) || client_auth_claims_.contains(host)) &&
                                         !no_redirect_hosts_.contains(host)));
      for (auto& [key, claim] : claims) {
        use_substitution(claim.substitution);
        // The claims are not read after this: their parts move into the route.
        vh.routes.push_back(model::Route{
            std::move(claim.path), key.second, std::move(claim.upstream), std::move(claim.ingress),
            std::move(claim.substitution), std::move(claim.policy), std::move(claim.canary),
            std::move(claim.fallback_upstream)});
      }
      model::sort_routes(vh.routes);
      // hosts_ is in the map's own order: each host goes at the end, without a search.
      config.virtual_hosts.emplace_hint(config.virtual_hosts.end(), host, std::move(vh));
    }
    add_www_redirects(config);
    add_aliases(config);
    add_passthrough_hosts(config);
    cover_wildcard_client_auth(config);
    config.certificates = std::move(certificates_);
    if (default_claim_) {
      config.default_route = model::Route{"/",
                                          model::PathMatch::kPrefix,
                                          default_claim_->upstream,
                                          default_claim_->ingress,
                                          default_claim_->substitution,
                                          default_claim_->policy};
      config.default_route->fallback_upstream = default_claim_->fallback_upstream;
      use_substitution(default_claim_->substitution);
    } else if (!flag_upstream_.empty()) {
      // --default-backend-service takes what no route takes (an Ingress's defaultBackend wins).
      config.default_route =
          model::Route{"/", model::PathMatch::kPrefix, flag_upstream_, "--default-backend-service"};
    }
  }

  struct BuiltUpstreams {
    std::map<std::string, model::Upstream> upstreams;
    std::vector<Diagnostic> diagnostics;
    std::set<std::string> fail_closed;
    std::set<std::string> service_ip;
  };

  // Each referenced upstream with its endpoints. Touches only the upstream claims (their
  // settings move out: each is emitted once), warned_ (used by nothing else), the Store (read)
  // and *out.
  void build_upstreams(const std::set<std::string>& referenced, BuiltUpstreams* out) {
    auto warn = [&](std::string object, std::string message) {
      if (warned_.emplace(object, message).second) {
        out->diagnostics.push_back(
            Diagnostic{std::move(object), std::move(message), Severity::kWarning});
      }
    };
    const EndpointWarning warn_endpoint = warn;
    for (const auto& name : referenced) {
      UpstreamClaim& claim = upstream_claims_.at(name);
      const UpstreamSource& source = claim.source;
      if (source.service->spec.type == "ExternalName") {
        warn("Service " + store::object_key(source.service->metadata.namespace_,
                                            source.service->metadata.name),
             "type ExternalName is not supported; its upstreams have no endpoints");
      }
      model::Upstream upstream{name, {}, std::move(claim.tls), std::move(claim.policy)};
      if (claim.fail_closed) {
        out->fail_closed.insert(name);
      } else if (upstream.policy->service_upstream &&
                 is_ip_address(source.service->spec.cluster_ip)) {
        // service-upstream: one endpoint, the ClusterIP and the Service port.
        upstream.endpoints = {model::Endpoint{source.service->spec.cluster_ip,
                                              static_cast<uint16_t>(source.port->port)}};
        out->service_ip.insert(name);
      } else {
        if (upstream.policy->service_upstream) {
          warn("Ingress " + claim.ingress,
               "annotation service-upstream: Service " +
                   store::object_key(source.service->metadata.namespace_,
                                     source.service->metadata.name) +
                   " has no cluster IP (headless or ExternalName); its endpoints are used");
        }
        upstream.endpoints = endpoints_for(store_, *source.service, *source.port, warn_endpoint);
      }
      out->upstreams.emplace_hint(out->upstreams.end(), name, std::move(upstream));  // sorted
    }
  }

  // Emits a substitution that an emitted route names (a losing Ingress's stays out).
  void use_substitution(const std::string& name) {
    if (name.empty()) return;
    result_.config.substitutions.emplace(name, substitutions_.at(name));
  }

  const store::Store& store_;
  const TranslateOptions& options_;
  std::map<std::string, model::Substitution> substitutions_;  // by Ingress "namespace/name"
  TranslateResult result_;
  // host -> (conflict_key, match) -> claim. Ordered maps: the output order never depends on input
  // order.
  std::map<std::string, std::map<std::pair<std::string, model::PathMatch>, Claim>> hosts_;
  std::optional<Claim> default_claim_;
  std::map<std::string, UpstreamClaim> upstream_claims_;  // by upstream name
  std::set<std::pair<std::string, std::string>>
      upstream_conflicts_;                // (Ingress, upstream) reported
  std::vector<IngressContext> canaries_;  // canary Ingresses, oldest first
  // (object, message) of the warnings build_upstreams() reported: each once. Only it uses this
  // (on the upstreams' thread), so that the hosts' side cannot race with it.
  std::set<std::pair<std::string, std::string>> warned_;
  struct TlsClaim {
    std::string certificate;  // Secret key "namespace/name"
    std::string ingress;
  };
  std::map<std::string, TlsClaim> tls_claims_;
  struct ClientAuthClaim {
    model::ClientAuth auth;
    std::string ingress;
  };
  std::map<std::string, ClientAuthClaim> client_auth_claims_;  // auth-tls-*: host -> claim
  std::map<std::string, model::Certificate> certificates_;
  std::set<std::string> no_redirect_hosts_;
  std::set<std::string> force_redirect_hosts_;  // force-ssl-redirect
  objects::Ingress flag_ingress_;               // stands for --default-backend-service's Service
  std::string flag_upstream_;                   // its upstream; empty: none
  struct HostClaim {
    std::string target;  // the host it redirects to, or is an alias of
    std::string ingress;
    std::string object;
  };
  std::map<std::string, HostClaim> www_claims_;          // from-to-www-redirect: from -> claim
  std::map<std::string, HostClaim> alias_claims_;        // server-alias: alias -> claim
  std::map<std::string, HostClaim> passthrough_claims_;  // ssl-passthrough: host -> claim
};

}  // namespace

TranslateResult translate(const store::Store& store, const TranslateOptions& options) {
  TranslateResult result = Translator(store, options).run();
  // The Gateway API's objects add to the same Config (docs/gateway-api.md).
  gateway::translate_gateway(store, options, result);
  return result;
}

}  // namespace tidegate::controller::translate
