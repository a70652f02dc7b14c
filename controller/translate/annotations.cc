#include "translate/annotations.h"

#include <array>

#include "translate/annotations/parser.h"

namespace tidegate::controller::translate {
namespace annotations_detail {

// Our annotation names, in the order they are parsed and documented, with their
// nginx.ingress.kubernetes.io/ spellings (empty: ingress-nginx has no such annotation).
struct Spelling {
  std::string_view ours;
  std::vector<std::string_view> nginx;
};

const std::vector<Spelling>& spellings() {
  static const std::vector<Spelling> kTable = {
      {"load-balance", {"load-balance"}},
      {"upstream-hash-by", {"upstream-hash-by"}},
      {"affinity", {"affinity"}},
      {"session-cookie-name", {"session-cookie-name"}},
      {"session-cookie-max-age", {"session-cookie-max-age"}},
      {"session-cookie-path", {"session-cookie-path"}},
      {"session-cookie-secure", {"session-cookie-secure"}},
      {"session-cookie-samesite", {"session-cookie-samesite"}},
      {"session-cookie-domain", {"session-cookie-domain"}},
      {"session-cookie-expires", {"session-cookie-expires"}},
      {"affinity-mode", {"affinity-mode"}},
      {"backend-protocol", {"backend-protocol"}},
      {"proxy-ssl-secret", {"proxy-ssl-secret"}},
      {"proxy-ssl-name", {"proxy-ssl-name"}},
      {"service-upstream", {"service-upstream"}},
      {"proxy-connect-timeout", {"proxy-connect-timeout"}},
      {"proxy-read-timeout", {"proxy-read-timeout"}},
      {"proxy-send-timeout", {"proxy-send-timeout"}},
      {"proxy-body-size", {"proxy-body-size"}},
      {"proxy-next-upstream", {"proxy-next-upstream"}},
      {"proxy-next-upstream-tries", {"proxy-next-upstream-tries"}},
      {"proxy-next-upstream-timeout", {"proxy-next-upstream-timeout"}},
      {"proxy-buffering", {"proxy-buffering"}},
      {"proxy-request-buffering", {"proxy-request-buffering"}},
      {"client-body-buffer-size", {"client-body-buffer-size"}},
      {"proxy-http-version", {"proxy-http-version"}},
      {"rewrite-target", {"rewrite-target"}},
      {"app-root", {"app-root"}},
      {"permanent-redirect", {"permanent-redirect"}},
      {"permanent-redirect-code", {"permanent-redirect-code"}},
      {"temporal-redirect", {"temporal-redirect"}},
      {"temporal-redirect-code", {"temporal-redirect-code"}},
      {"custom-headers", {"custom-headers"}},
      {"upstream-vhost", {"upstream-vhost"}},
      {"x-forwarded-prefix", {"x-forwarded-prefix"}},
      {"enable-access-log", {"enable-access-log"}},
      {"allow-upgrade", {}},
      {"enable-cors", {"enable-cors"}},
      {"cors-allow-origin", {"cors-allow-origin"}},
      {"cors-allow-methods", {"cors-allow-methods"}},
      {"cors-allow-headers", {"cors-allow-headers"}},
      {"cors-expose-headers", {"cors-expose-headers"}},
      {"cors-allow-credentials", {"cors-allow-credentials"}},
      {"cors-max-age", {"cors-max-age"}},
      {"hsts", {}},
      {"hsts-max-age", {}},
      {"hsts-include-subdomains", {}},
      {"hsts-preload", {}},
      {"whitelist-source-range", {"whitelist-source-range", "allowlist-source-range"}},
      {"denylist-source-range", {"denylist-source-range"}},
      {"limit-rps", {"limit-rps"}},
      {"limit-rpm", {"limit-rpm"}},
      {"limit-burst-multiplier", {"limit-burst-multiplier"}},
      {"limit-connections", {"limit-connections"}},
      {"limit-allowlist", {"limit-allowlist", "limit-whitelist"}},
      {"limit-status-code", {}},
      {"custom-http-errors", {"custom-http-errors"}},
      {"auth-type", {"auth-type"}},
      {"auth-secret", {"auth-secret"}},
      {"auth-secret-type", {"auth-secret-type"}},
      {"auth-realm", {"auth-realm"}},
      {"auth-url", {"auth-url"}},
      {"auth-method", {"auth-method"}},
      {"auth-signin", {"auth-signin"}},
      {"auth-signin-redirect-param", {"auth-signin-redirect-param"}},
      {"auth-response-headers", {"auth-response-headers"}},
      {"auth-request-redirect", {"auth-request-redirect"}},
      {"auth-cache-key", {"auth-cache-key"}},
      {"auth-cache-duration", {"auth-cache-duration"}},
      {"auth-always-set-cookie", {"auth-always-set-cookie"}},
      {"auth-tls-secret", {"auth-tls-secret"}},
      {"auth-tls-verify-client", {"auth-tls-verify-client"}},
      {"auth-tls-verify-depth", {"auth-tls-verify-depth"}},
      {"auth-tls-pass-certificate-to-upstream", {"auth-tls-pass-certificate-to-upstream"}},
      {"auth-tls-error-page", {"auth-tls-error-page"}},
      {"auth-tls-match-cn", {"auth-tls-match-cn"}},
      {"enable-compression", {}},
      {"compression-min-length", {}},
      {"compression-types", {}},
      {"compression-breach-mitigation", {}},
      {"x-sendfile-directories", {}},
      {"x-accel-mapping", {}},
      {"enable-cache", {}},
      {"canary", {"canary"}},
      {"canary-weight", {"canary-weight"}},
      {"canary-weight-total", {"canary-weight-total"}},
      {"canary-by-header", {"canary-by-header"}},
      {"canary-by-header-value", {"canary-by-header-value"}},
      {"canary-by-header-pattern", {"canary-by-header-pattern"}},
      {"canary-by-cookie", {"canary-by-cookie"}},
  };
  return kTable;
}

// nginx configuration text: never interpreted, and always said so (configuration injection
// through these is how ingress-nginx got its worst CVEs).
constexpr std::string_view kSnippets[] = {"configuration-snippet", "server-snippet",
                                          "stream-snippet",        "auth-snippet",
                                          "modsecurity-snippet",   "location-snippet"};

// Read by the translator itself (translate.cc), not here; never reported as unsupported.
constexpr std::string_view kParsedElsewhere[] = {
    "use-regex",    "ssl-redirect",    "force-ssl-redirect", "from-to-www-redirect",
    "server-alias", "default-backend", "ssl-passthrough"};

// Route-level annotations: ignored on a canary Ingress.
constexpr std::string_view kRouteLevel[] = {"proxy-connect-timeout",
                                            "proxy-read-timeout",
                                            "proxy-send-timeout",
                                            "proxy-body-size",
                                            "proxy-next-upstream",
                                            "proxy-next-upstream-tries",
                                            "proxy-next-upstream-timeout",
                                            "proxy-buffering",
                                            "proxy-request-buffering",
                                            "client-body-buffer-size",
                                            "proxy-http-version",
                                            "rewrite-target",
                                            "app-root",
                                            "permanent-redirect",
                                            "permanent-redirect-code",
                                            "temporal-redirect",
                                            "temporal-redirect-code",
                                            "custom-headers",
                                            "upstream-vhost",
                                            "x-forwarded-prefix",
                                            "enable-access-log",
                                            "allow-upgrade",
                                            "enable-cors",
                                            "cors-allow-origin",
                                            "cors-allow-methods",
                                            "cors-allow-headers",
                                            "cors-expose-headers",
                                            "cors-allow-credentials",
                                            "cors-max-age",
                                            "hsts",
                                            "hsts-max-age",
                                            "hsts-include-subdomains",
                                            "hsts-preload",
                                            "whitelist-source-range",
                                            "denylist-source-range",
                                            "limit-rps",
                                            "limit-rpm",
                                            "limit-burst-multiplier",
                                            "limit-connections",
                                            "limit-allowlist",
                                            "limit-status-code",
                                            "custom-http-errors",
                                            "auth-type",
                                            "auth-secret",
                                            "auth-secret-type",
                                            "auth-realm",
                                            "auth-url",
                                            "auth-method",
                                            "auth-signin",
                                            "auth-signin-redirect-param",
                                            "auth-response-headers",
                                            "auth-request-redirect",
                                            "auth-cache-key",
                                            "auth-cache-duration",
                                            "auth-always-set-cookie",
                                            "auth-tls-secret",
                                            "auth-tls-verify-client",
                                            "auth-tls-verify-depth",
                                            "auth-tls-pass-certificate-to-upstream",
                                            "auth-tls-error-page",
                                            "auth-tls-match-cn",
                                            "enable-compression",
                                            "compression-min-length",
                                            "compression-types",
                                            "compression-breach-mitigation",
                                            "x-sendfile-directories",
                                            "x-accel-mapping",
                                            "enable-cache"};

const Spelling* spelling_of(std::string_view name) {
  for (const auto& s : spellings()) {
    if (s.ours == name) return &s;
  }
  return nullptr;
}

// The two prefixes as the map's key type (its lookups take std::string).
const std::string kOurs(kAnnotationPrefix);
const std::string kTheirs(kNginxAnnotationPrefix);

// Whether some key starts with `prefix` (the map is sorted: the first key not below it).
bool any_with_prefix(const std::map<std::string, std::string>& annotations,
                     const std::string& prefix) {
  auto it = annotations.lower_bound(prefix);
  return it != annotations.end() && it->first.starts_with(prefix);
}

// Ours, else (alias mode) the first nginx spelling that is set. When both are set and differ,
// *shadowed receives the nginx one.
std::optional<FoundAnnotation> lookup(const std::map<std::string, std::string>& annotations,
                                      std::string_view name, const AnnotationOptions& options,
                                      std::optional<FoundAnnotation>* shadowed) {
  // Most Ingresses carry none of our annotations (or only kubectl's): the parser asks for each
  // of about a hundred names, and building each key cost a third of a first translation at
  // 10,000 Ingresses (StartupBench). Two searches answer for all of them.
  const bool theirs_possible = options.nginx_aliases && any_with_prefix(annotations, kTheirs);
  if (!theirs_possible && !any_with_prefix(annotations, kOurs)) return std::nullopt;
  const std::string ours = kOurs + std::string(name);
  std::optional<FoundAnnotation> found;
  if (auto it = annotations.find(ours); it != annotations.end()) {
    found = FoundAnnotation{ours, it->second};
  }
  if (!theirs_possible) return found;
  std::vector<std::string_view> nginx_names{name};
  if (const Spelling* s = spelling_of(name)) nginx_names = s->nginx;
  for (std::string_view n : nginx_names) {
    const std::string theirs = std::string(kNginxAnnotationPrefix) + std::string(n);
    auto it = annotations.find(theirs);
    if (it == annotations.end()) continue;
    if (!found) return FoundAnnotation{theirs, it->second};
    if (shadowed && trim(it->second) != trim(found->value)) {
      *shadowed = FoundAnnotation{theirs, it->second};
    }
    break;
  }
  return found;
}

AnnotationResult Parser::run() {
  // Canary first: a canary Ingress ignores route-level annotations.
  parse_canary();
  parse_load_balancing();
  parse_affinity();
  parse_backend_protocol();
  if (!result_.policy.canary) {
    parse_timeouts_and_retries();
    parse_buffering();
    parse_rewrites_and_redirects();
    parse_headers();
    parse_cors();
    parse_hsts();
    parse_source_ranges();
    parse_deny_ranges();
    parse_rate_limits();
    parse_error_pages();
    parse_auth();
    parse_external_auth();
    parse_client_auth();
    parse_compression();
    parse_sendfile();
    parse_cache();
  } else {
    for (std::string_view name : kRouteLevel) {
      if (auto a = get(name)) {
        warn(*a,
             "ignored on a canary Ingress (the main Ingress's route settings apply to both "
             "backends)");
      }
    }
  }
  for (std::string_view name : kSnippets) {
    auto it = annotations_.find(std::string(kNginxAnnotationPrefix) + std::string(name));
    if (it == annotations_.end()) continue;
    add(Severity::kWarning, "annotation " + it->first +
                                ": nginx configuration text is never interpreted by Tidegate; "
                                "ignored (use the annotations docs/annotations.md lists)");
  }
  if (options_.nginx_aliases) report_unsupported_nginx();
  if (!(route_ == model::RoutePolicy{})) result_.policy.route = std::move(route_);
  if (!(upstream_ == model::UpstreamPolicy{})) result_.policy.upstream = std::move(upstream_);
  return std::move(result_);
}

void Parser::report_unsupported_nginx() {
  for (const auto& [key, value] : annotations_) {
    if (key.compare(0, kNginxAnnotationPrefix.size(), kNginxAnnotationPrefix) != 0) continue;
    std::string_view name = std::string_view(key).substr(kNginxAnnotationPrefix.size());
    bool known = std::find(std::begin(kParsedElsewhere), std::end(kParsedElsewhere), name) !=
                 std::end(kParsedElsewhere);
    for (const auto& s : spellings()) {
      known = known || std::find(s.nginx.begin(), s.nginx.end(), name) != s.nginx.end();
    }
    const bool snippet =
        std::find(std::begin(kSnippets), std::end(kSnippets), name) != std::end(kSnippets);
    if (!known && !snippet) {
      add(Severity::kWarning, "annotation " + key + " is not supported by Tidegate; ignored");
    }
  }
}

}  // namespace annotations_detail

using annotations_detail::all_digits;
using annotations_detail::is_digit;
using annotations_detail::lookup;
using annotations_detail::Parser;
using annotations_detail::spellings;

bool is_nginx_snippet(std::string_view name) {
  return std::find(std::begin(annotations_detail::kSnippets),
                   std::end(annotations_detail::kSnippets),
                   name) != std::end(annotations_detail::kSnippets);
}

bool reads_nginx_annotation(std::string_view name) {
  if (std::find(std::begin(annotations_detail::kParsedElsewhere),
                std::end(annotations_detail::kParsedElsewhere),
                name) != std::end(annotations_detail::kParsedElsewhere)) {
    return true;
  }
  for (const auto& s : spellings()) {
    if (std::find(s.nginx.begin(), s.nginx.end(), name) != s.nginx.end()) return true;
  }
  return false;
}

std::optional<FoundAnnotation> find_annotation(
    const std::map<std::string, std::string>& annotations, std::string_view name,
    const AnnotationOptions& options) {
  return lookup(annotations, name, options, nullptr);
}

AnnotationResult parse_annotations(const std::map<std::string, std::string>& annotations,
                                   const AnnotationContext& context,
                                   const AnnotationOptions& options) {
  // Most Ingresses carry none of our annotations nor nginx's (whose snippets are reported even
  // without alias mode). Every family then finds nothing, and what the parser returns depends on
  // the options alone (the context is read only for annotations that are set): one result per
  // combination of options, computed once. The full parse was 40 % of a first translation at
  // 10,000 Ingresses (StartupBench).
  if (!annotations_detail::any_with_prefix(annotations, annotations_detail::kOurs) &&
      !annotations_detail::any_with_prefix(annotations, annotations_detail::kTheirs)) {
    static const auto kNone = [] {
      std::array<AnnotationResult, 4> r;
      const std::map<std::string, std::string> none;
      for (int i = 0; i < 4; ++i) {
        AnnotationOptions o;
        o.nginx_aliases = (i & 1) != 0;
        o.compression_default = (i & 2) != 0;
        r[i] = Parser(none, AnnotationContext{}, o).run();
      }
      return r;
    }();
    return kNone[(options.nginx_aliases ? 1 : 0) | (options.compression_default ? 2 : 0)];
  }
  return Parser(annotations, context, options).run();
}

std::optional<std::vector<std::string>> parse_server_aliases(std::string_view value,
                                                             std::string* error) {
  std::vector<std::string> aliases;
  for (std::string& alias : annotations_detail::split_commas(value)) {
    for (char& c : alias) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    if (alias.empty() || alias == "*" || !model::is_valid_host(alias)) {
      *error = "invalid host " + annotations_detail::quote(alias);
      return std::nullopt;
    }
    aliases.push_back(std::move(alias));
  }
  if (aliases.size() > 64) {
    *error = "more than 64 aliases";
    return std::nullopt;
  }
  return aliases;
}

std::optional<std::chrono::milliseconds> parse_nginx_duration(std::string_view text) {
  if (all_digits(text)) {
    if (text.size() > 9) return std::nullopt;
    return std::chrono::seconds(std::stoll(std::string(text)));
  }
  struct Unit {
    std::string_view suffix;
    int64_t ms;
  };
  // In the order they must appear; "ms" before "m" so that it is tried first.
  static constexpr Unit kUnits[] = {
      {"d", 86'400'000}, {"h", 3'600'000}, {"ms", 1}, {"m", 60'000}, {"s", 1'000}};
  // Ranks for "decreasing order": d > h > m > s > ms.
  auto rank = [](std::string_view suffix) {
    if (suffix == "d") return 5;
    if (suffix == "h") return 4;
    if (suffix == "m") return 3;
    if (suffix == "s") return 2;
    return 1;  // ms
  };
  if (text.empty()) return std::nullopt;
  int64_t total = 0;
  int last_rank = 6;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = pos;
    while (pos < text.size() && is_digit(text[pos])) ++pos;
    if (pos == start || pos - start > 9) return std::nullopt;
    int64_t n = std::stoll(std::string(text.substr(start, pos - start)));
    const Unit* unit = nullptr;
    for (const auto& u : kUnits) {
      if (text.substr(pos, u.suffix.size()) == u.suffix) {
        unit = &u;
        break;
      }
    }
    if (!unit) return std::nullopt;
    pos += unit->suffix.size();
    if (rank(unit->suffix) >= last_rank) return std::nullopt;
    last_rank = rank(unit->suffix);
    total += n * unit->ms;
  }
  return std::chrono::milliseconds(total);
}

std::optional<uint64_t> parse_nginx_size(std::string_view text) {
  if (text.empty()) return std::nullopt;
  uint64_t multiplier = 1;
  switch (text.back()) {
    case 'k':
    case 'K':
      multiplier = uint64_t{1} << 10;
      break;
    case 'm':
    case 'M':
      multiplier = uint64_t{1} << 20;
      break;
    case 'g':
    case 'G':
      multiplier = uint64_t{1} << 30;
      break;
    default:
      break;
  }
  std::string_view digits = multiplier == 1 ? text : text.substr(0, text.size() - 1);
  if (!all_digits(digits) || digits.size() > 19) return std::nullopt;
  const uint64_t n = std::stoull(std::string(digits));
  if (n > UINT64_MAX / multiplier) return std::nullopt;
  return n * multiplier;
}

std::vector<std::string_view> supported_annotations() {
  std::vector<std::string_view> out;
  for (const auto& s : spellings()) out.push_back(s.ours);
  return out;
}

}  // namespace tidegate::controller::translate
