#pragma once
// Per-Ingress traffic-policy annotations (issue #6) -> typed policy (lib/model/policy.h).
//
// parse_annotations() is pure, like the translator: the same annotations and context give the
// same policy and the same diagnostics in the same order (annotations in the order of the table
// in annotations.cc, which is the order of docs/annotations.md). An invalid value is reported
// (Severity::kError, naming the annotation, the value and why) and that one annotation is
// ignored: its default applies. Exceptions, all documented in docs/annotations.md:
//   - whitelist-source-range: an invalid list denies every client rather than opening the route;
//   - a canary Ingress: its route-level annotations are reported and ignored (the main route's
//     settings apply to both backends);
//   - annotations that only refine another (session-cookie-*, cors-*, *-redirect-code,
//     limit-burst-multiplier, ...) are reported as having no effect when that other one is not
//     set.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/policy.h"
#include "model/shared.h"
#include "translate/translate.h"

namespace tidegate::controller::translate {

inline constexpr std::string_view kAnnotationPrefix = "tidegate.io/";
inline constexpr std::string_view kNginxAnnotationPrefix = "nginx.ingress.kubernetes.io/";

// parse_annotations keeps one result per combination of these options for Ingresses without
// annotations: a new option must join that key (annotations.cc).
struct AnnotationOptions {
  // Also read the nginx.ingress.kubernetes.io/ spellings of the annotations we support (the
  // controller flag --nginx-annotations, TranslateOptions::nginx_annotations). Ours win when both
  // are set; different values are reported as a warning. ingress-nginx annotations we do not
  // support are reported as warnings so that a migrating user sees what is left behind.
  bool nginx_aliases = false;
  // enable-compression's value when an Ingress does not set it (--enable-compression).
  bool compression_default = false;
};

// One path of the Ingress as the translator routes it.
struct PathContext {
  std::string path;    // as written (a missing path is "/")
  bool regex = false;  // routed as model::PathMatch::kRegex (use-regex on and not Exact)
};

struct AnnotationContext {
  std::string ingress_namespace;  // for proxy-ssl-secret, which must name a Secret in it
  std::string ingress_name;
  // Every path of the Ingress's rules (default backend excluded); rewrite-target's "$N" are
  // checked against the capture groups of the regex ones.
  std::vector<PathContext> paths;
};

struct IngressPolicy {
  // For every upstream this Ingress's routes use (shared, lib/model/shared.h).
  model::Shared<model::UpstreamPolicy> upstream;
  // For every route this Ingress produces: one value that they share (lib/model/shared.h).
  model::Shared<model::RoutePolicy> route;
  // Set when canary: "true": this Ingress's routes are alternatives of the main routes for the
  // same host and path (Canary::upstream is left empty for the translator to fill).
  std::optional<model::Canary> canary;
  // auth-tls-secret and its refinements: client certificates on every rule host of the
  // Ingress. `secret` is set, `ca_pem` is left for the translator to read from the Secret; an
  // unusable setup keeps `ca_pem` empty (the hosts then refuse every request: fail closed).
  std::optional<model::ClientAuth> client_auth;
  bool operator==(const IngressPolicy&) const = default;
};

struct AnnotationResult {
  IngressPolicy policy;                 // passes model::validate (canary: validate(c, false))
  std::vector<Diagnostic> diagnostics;  // object "Ingress <namespace>/<name>"
};

// Whether Tidegate reads the nginx.ingress.kubernetes.io/ annotation `name` (without prefix)
// behind --nginx-annotations: one of the spellings we parse, or one the translator reads itself.
bool reads_nginx_annotation(std::string_view name);
// Whether it is one of ingress-nginx's configuration snippets (configuration-snippet, ...), which
// are never interpreted.
bool is_nginx_snippet(std::string_view name);

AnnotationResult parse_annotations(const std::map<std::string, std::string>& annotations,
                                   const AnnotationContext& context,
                                   const AnnotationOptions& options = {});

// The value of annotation `name` (without prefix: "use-regex"), honouring the alias mode: ours,
// else (with nginx_aliases) the nginx.ingress.kubernetes.io/ spelling. `key` is the full name
// that was found, for messages. For annotations parsed elsewhere (use-regex, ssl-redirect).
struct FoundAnnotation {
  std::string key;
  std::string value;
};
std::optional<FoundAnnotation> find_annotation(
    const std::map<std::string, std::string>& annotations, std::string_view name,
    const AnnotationOptions& options);

// server-alias's value (read by the translator; the migration check checks it too): host names,
// exact or "*.suffix", comma-separated, lower-cased, at most 64. nullopt with *error (what is
// wrong) when one is not a host name.
std::optional<std::vector<std::string>> parse_server_aliases(std::string_view value,
                                                             std::string* error);

// nginx duration syntax: "60" (seconds), "500ms", "30s", "5m", "1h", "1d", or units combined in
// decreasing order ("1m30s"). nullopt on anything else (or overflow).
std::optional<std::chrono::milliseconds> parse_nginx_duration(std::string_view text);
// nginx size syntax: "1024" (bytes), "8k"/"8K", "8m"/"8M", "1g"/"1G". nullopt on anything else.
std::optional<uint64_t> parse_nginx_size(std::string_view text);

// Every annotation this parser reads, without prefix, in table order (for docs and tests).
std::vector<std::string_view> supported_annotations();

}  // namespace tidegate::controller::translate
