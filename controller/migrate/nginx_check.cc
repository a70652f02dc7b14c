#include "migrate/nginx_check.h"

#include <algorithm>
#include <array>
#include <map>
#include <sstream>
#include <string_view>

#include "text/text.h"
#include "translate/annotations.h"

namespace tidegate::controller::migrate {

namespace {

// Supported with a difference a migrating user must know about.
struct Note {
  std::string_view name;
  std::string_view how;
};
constexpr Note kPartly[] = {
    {"custom-headers",
     "the value is the header lines themselves (\"Name: value\" per line), not a ConfigMap "
     "reference"},
    {"proxy-ssl-secret",
     "the backend is verified whenever the Secret has a ca.crt (no proxy-ssl-verify needed); its "
     "tls.crt/tls.key (a client certificate) are not used"},
    {"upstream-hash-by", "the nginx variables docs/annotations.md lists, not every variable"},
    {"limit-whitelist", "read as limit-allowlist"},
    {"default-backend",
     "the Service's first port; it serves the routes while their Service has no endpoints, and "
     "custom-http-errors pages"},
    {"custom-http-errors",
     "for the backend's answers and the proxy's own 502/504 (a backend that fails or times out); "
     "the proxy's 413/429 and answers to a request whose body is still arriving are not "
     "replaced"},
    {"auth-url",
     "the host must be a Service of the cluster (name.namespace.svc...), not an outside name; "
     "variables in its path from the list docs/annotations.md gives"},
    {"auth-cache-key", "the variables docs/annotations.md lists, not every nginx variable"},
    {"auth-signin", "the variables docs/annotations.md lists, not every nginx variable"},
    {"auth-tls-secret",
     "the Secret must be in the Ingress's namespace; a host whose Secret cannot be used refuses "
     "every request (503) instead of going unchecked; plain-HTTP requests are refused with "
     "verify-client on"},
    {"ssl-passthrough",
     "per exact rule host, to the backend of the Ingress's \"/\" path, on the HTTPS port; plain "
     "HTTP to the host is routed as usual"},
    {"affinity-mode",
     "both modes keep a session on its endpoint while it lives; balanced never moves sessions "
     "to new endpoints on scale-up"},
};

// Not supported, with what to use instead when there is something.
constexpr Note kInstead[] = {
    {"mirror-target",
     "not for Ingresses (a URL target); an HTTPRoute's RequestMirror filter mirrors to a "
     "Service (docs/gateway-api.md, \"Request mirroring\")"},
};

// The annotation key a diagnostic of parse_annotations is about ("annotation KEY: ...").
std::string key_of(const std::string& message) {
  constexpr std::string_view kPrefix = "annotation ";
  if (message.compare(0, kPrefix.size(), kPrefix) != 0) return {};
  const size_t end = message.find(':', kPrefix.size());
  if (end == std::string::npos) return {};
  std::string key = message.substr(kPrefix.size(), end - kPrefix.size());
  // "annotation nginx.ingress.kubernetes.io/x is not supported ...": no colon right after.
  if (key.find(' ') != std::string::npos) return {};
  return key;
}

// The value errors of the annotations the translator reads itself (not parse_annotations): the
// same checks, without the objects they refer to (a default-backend's Service is not looked up).
std::optional<std::string> translator_level_error(std::string_view name, std::string_view value) {
  const std::string_view v = text::trim_ows(value);
  if (name == "use-regex" || name == "ssl-redirect" || name == "force-ssl-redirect" ||
      name == "from-to-www-redirect" || name == "ssl-passthrough") {
    if (v == "true" || v == "false") return std::nullopt;
    return "expected \"true\" or \"false\"";
  }
  if (name == "server-alias") {
    std::string error;
    if (!translate::parse_server_aliases(v, &error)) {
      return error + " (a comma-separated list of host names)";
    }
  }
  return std::nullopt;
}

}  // namespace

const char* to_string(Support s) {
  switch (s) {
    case Support::kSupported:
      return "supported";
    case Support::kPartly:
      return "partly";
    case Support::kInvalid:
      return "invalid";
    case Support::kUnsupported:
      return "unsupported";
    case Support::kNeverInterpreted:
      return "refused";
  }
  return "?";
}

std::vector<IngressCheck> check_nginx_annotations(const std::vector<objects::Ingress>& ingresses) {
  const std::string_view prefix = translate::kNginxAnnotationPrefix;
  std::vector<IngressCheck> out;
  for (const auto& ing : ingresses) {
    const auto& annotations = ing.metadata.annotations;
    IngressCheck check;
    check.ingress = ing.metadata.namespace_ + "/" + ing.metadata.name;
    // What the parser says about each key, as it would with --nginx-annotations.
    // The paths as the translator routes them: regexes with use-regex, Exact ones never.
    translate::AnnotationContext context{ing.metadata.namespace_, ing.metadata.name, {}};
    auto use_regex = translate::find_annotation(annotations, "use-regex", {true});
    const bool regex = use_regex && use_regex->value == "true";
    for (const auto& rule : ing.spec.rules) {
      for (const auto& p : rule.paths) {
        context.paths.push_back(
            {p.path.empty() ? "/" : p.path, regex && p.path_type != objects::PathType::kExact});
      }
    }
    auto parsed = translate::parse_annotations(annotations, context, {true});
    // The first error about each key, and the first warning (read, with a difference: the
    // warning says which, e.g. proxy-buffering "on", which Tidegate does not do).
    std::map<std::string, std::string> errors, warnings;
    for (const auto& d : parsed.diagnostics) {
      std::string key = key_of(d.message);
      auto& into = d.severity == translate::Severity::kError ? errors : warnings;
      if (!key.empty() && !into.contains(key)) {
        into[key] = d.message.substr(std::string_view("annotation ").size() + key.size() + 2);
      }
    }
    for (const auto& [key, value] : annotations) {
      if (key.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string_view name = std::string_view(key).substr(prefix.size());
      AnnotationCheck a{key, Support::kSupported, ""};
      if (translate::is_nginx_snippet(name)) {
        a.support = Support::kNeverInterpreted;
        a.detail = "nginx configuration text is never interpreted";
      } else if (!translate::reads_nginx_annotation(name)) {
        a.support = Support::kUnsupported;
        a.detail = "ignored";
        for (const auto& n : kInstead) {
          if (n.name == name && !n.how.empty()) a.detail = "ignored; " + std::string(n.how);
        }
      } else if (auto e = errors.find(key); e != errors.end()) {
        a.support = Support::kInvalid;
        a.detail = e->second;
      } else if (auto why = translator_level_error(name, value)) {
        a.support = Support::kInvalid;
        a.detail = "invalid value \"" + value + "\": " + *why;
      } else {
        for (const auto& n : kPartly) {
          if (n.name == name) {
            a.support = Support::kPartly;
            a.detail = std::string(n.how);
          }
        }
        if (auto w = warnings.find(key); a.detail.empty() && w != warnings.end()) {
          a.support = Support::kPartly;
          a.detail = w->second;
        }
      }
      check.annotations.push_back(std::move(a));
    }
    if (!check.annotations.empty()) out.push_back(std::move(check));
  }
  std::sort(out.begin(), out.end(),
            [](const IngressCheck& a, const IngressCheck& b) { return a.ingress < b.ingress; });
  return out;
}

std::string format_report(const std::vector<IngressCheck>& checks) {
  std::ostringstream o;
  std::array<size_t, 5> counts{};
  const std::string_view prefix = translate::kNginxAnnotationPrefix;
  for (const auto& c : checks) {
    o << "Ingress " << c.ingress << "\n";
    for (const auto& a : c.annotations) {
      ++counts[static_cast<size_t>(a.support)];
      std::string_view name = std::string_view(a.annotation).substr(prefix.size());
      o << "  " << to_string(a.support);
      for (size_t pad = std::string_view(to_string(a.support)).size(); pad < 12; ++pad) o << ' ';
      o << name;
      if (!a.detail.empty()) o << ": " << a.detail;
      o << "\n";
    }
  }
  o << checks.size() << " Ingresses with nginx annotations: ";
  for (size_t i = 0; i < counts.size(); ++i) {
    if (i > 0) o << ", ";
    o << counts[i] << " " << to_string(static_cast<Support>(i));
  }
  o << "\n";
  return o.str();
}

}  // namespace tidegate::controller::migrate
