#include "translate/annotations.h"

#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

namespace tidegate::controller::translate {
namespace {

using model::Canary;
using model::RoutePolicy;

std::string quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_digit);
}

// Splits on commas, trimming each item; empty items are kept (the caller refuses them).
std::vector<std::string> split_commas(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    out.emplace_back(
        trim(s.substr(start, comma == std::string_view::npos ? comma : comma - start)));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

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
      {"backend-protocol", {"backend-protocol"}},
      {"proxy-ssl-secret", {"proxy-ssl-secret"}},
      {"proxy-ssl-name", {"proxy-ssl-name"}},
      {"proxy-connect-timeout", {"proxy-connect-timeout"}},
      {"proxy-read-timeout", {"proxy-read-timeout"}},
      {"proxy-send-timeout", {"proxy-send-timeout"}},
      {"proxy-body-size", {"proxy-body-size"}},
      {"proxy-next-upstream", {"proxy-next-upstream"}},
      {"proxy-next-upstream-tries", {"proxy-next-upstream-tries"}},
      {"rewrite-target", {"rewrite-target"}},
      {"app-root", {"app-root"}},
      {"permanent-redirect", {"permanent-redirect"}},
      {"permanent-redirect-code", {"permanent-redirect-code"}},
      {"temporal-redirect", {"temporal-redirect"}},
      {"temporal-redirect-code", {"temporal-redirect-code"}},
      {"custom-headers", {"custom-headers"}},
      {"upstream-vhost", {"upstream-vhost"}},
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
      {"whitelist-source-range", {"whitelist-source-range"}},
      {"limit-rps", {"limit-rps"}},
      {"limit-burst-multiplier", {"limit-burst-multiplier"}},
      {"limit-connections", {"limit-connections"}},
      {"limit-allowlist", {"limit-allowlist", "limit-whitelist"}},
      {"limit-status-code", {}},
      {"canary", {"canary"}},
      {"canary-weight", {"canary-weight"}},
      {"canary-weight-total", {"canary-weight-total"}},
      {"canary-by-header", {"canary-by-header"}},
      {"canary-by-header-value", {"canary-by-header-value"}},
      {"canary-by-cookie", {"canary-by-cookie"}},
  };
  return kTable;
}

// Read by the translator itself (translate.cc), not here; never reported as unsupported.
constexpr std::string_view kParsedElsewhere[] = {"use-regex", "ssl-redirect"};

// Route-level annotations: ignored on a canary Ingress.
constexpr std::string_view kRouteLevel[] = {"proxy-connect-timeout",
                                            "proxy-read-timeout",
                                            "proxy-send-timeout",
                                            "proxy-body-size",
                                            "proxy-next-upstream",
                                            "proxy-next-upstream-tries",
                                            "rewrite-target",
                                            "app-root",
                                            "permanent-redirect",
                                            "permanent-redirect-code",
                                            "temporal-redirect",
                                            "temporal-redirect-code",
                                            "custom-headers",
                                            "upstream-vhost",
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
                                            "limit-rps",
                                            "limit-burst-multiplier",
                                            "limit-connections",
                                            "limit-allowlist",
                                            "limit-status-code"};

const Spelling* spelling_of(std::string_view name) {
  for (const auto& s : spellings()) {
    if (s.ours == name) return &s;
  }
  return nullptr;
}

// Ours, else (alias mode) the first nginx spelling that is set. When both are set and differ,
// *shadowed receives the nginx one.
std::optional<FoundAnnotation> lookup(const std::map<std::string, std::string>& annotations,
                                      std::string_view name, const AnnotationOptions& options,
                                      std::optional<FoundAnnotation>* shadowed) {
  const std::string ours = std::string(kAnnotationPrefix) + std::string(name);
  std::optional<FoundAnnotation> found;
  if (auto it = annotations.find(ours); it != annotations.end()) {
    found = FoundAnnotation{ours, it->second};
  }
  if (!options.nginx_aliases) return found;
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

class Parser {
 public:
  Parser(const std::map<std::string, std::string>& annotations, const AnnotationContext& context,
         const AnnotationOptions& options)
      : annotations_(annotations),
        context_(context),
        options_(options),
        object_("Ingress " + context.ingress_namespace + "/" + context.ingress_name) {}

  AnnotationResult run() {
    // Canary first: a canary Ingress ignores route-level annotations.
    parse_canary();
    parse_load_balancing();
    parse_affinity();
    parse_backend_protocol();
    if (!result_.policy.canary) {
      parse_timeouts_and_retries();
      parse_rewrites_and_redirects();
      parse_headers();
      parse_cors();
      parse_hsts();
      parse_source_ranges();
      parse_rate_limits();
    } else {
      for (std::string_view name : kRouteLevel) {
        if (auto a = get(name)) {
          warn(*a,
               "ignored on a canary Ingress (the main Ingress's route settings apply to both "
               "backends)");
        }
      }
    }
    if (options_.nginx_aliases) report_unsupported_nginx();
    return std::move(result_);
  }

 private:
  // ---- Looking annotations up and reporting ----

  // The annotation under our name or (alias mode) its nginx spelling; a disagreement between
  // the two is reported once per annotation.
  std::optional<FoundAnnotation> get(std::string_view name) {
    std::optional<FoundAnnotation> shadowed;
    auto found = lookup(annotations_, name, options_, &shadowed);
    if (shadowed && reported_conflicts_.insert(found->key).second) {
      add(Severity::kWarning, "annotations " + found->key + " (" + quote(found->value) + ") and " +
                                  shadowed->key + " (" + quote(shadowed->value) + ") disagree; " +
                                  found->key + " wins");
    }
    return found;
  }

  void add(Severity severity, std::string message) {
    result_.diagnostics.push_back(Diagnostic{object_, std::move(message), severity});
  }
  void invalid(const FoundAnnotation& a, const std::string& why,
               const std::string& consequence = "ignored") {
    add(Severity::kError, "annotation " + a.key + ": invalid value " + quote(a.value) + ": " + why +
                              "; " + consequence);
  }
  void warn(const FoundAnnotation& a, const std::string& why) {
    add(Severity::kWarning, "annotation " + a.key + ": " + why);
  }
  // `name` refines `needed`, which is not set (or invalid).
  void no_effect_without(std::string_view name, const std::string& needed) {
    if (auto a = get(name)) warn(*a, "has no effect without " + needed + "; ignored");
  }

  // ---- Typed getters: nullopt when absent or invalid (invalid is reported) ----

  std::optional<bool> get_bool(std::string_view name) {
    auto a = get(name);
    if (!a) return std::nullopt;
    std::string_view v = trim(a->value);
    if (v == "true") return true;
    if (v == "false") return false;
    invalid(*a, "expected \"true\" or \"false\"");
    return std::nullopt;
  }

  std::optional<int64_t> get_integer(std::string_view name, int64_t min, int64_t max,
                                     std::optional<FoundAnnotation>* found = nullptr) {
    auto a = get(name);
    if (found) *found = a;
    if (!a) return std::nullopt;
    std::string_view v = trim(a->value);
    if (!all_digits(v) || v.size() > 18) {
      invalid(*a, "expected a whole number " + range_text(min, max));
      return std::nullopt;
    }
    int64_t n = std::stoll(std::string(v));
    if (n < min || n > max) {
      invalid(*a, "out of range " + range_text(min, max));
      return std::nullopt;
    }
    return n;
  }

  static std::string range_text(int64_t min, int64_t max) {
    return "(" + std::to_string(min) + "-" + std::to_string(max) + ")";
  }

  // A decimal number "10", "0.5", "2.25": digits with an optional fraction.
  std::optional<double> get_decimal(std::string_view name, double min_exclusive, double max,
                                    const std::string& range,
                                    std::optional<FoundAnnotation>* found = nullptr) {
    auto a = get(name);
    if (found) *found = a;
    if (!a) return std::nullopt;
    std::string_view v = trim(a->value);
    size_t dot = v.find('.');
    std::string_view whole = v.substr(0, dot);
    std::string_view fraction = dot == std::string_view::npos ? "1" : v.substr(dot + 1);
    if (!all_digits(whole) || !all_digits(fraction) || v.size() > 18) {
      invalid(*a, "expected a decimal number " + range);
      return std::nullopt;
    }
    double n = std::stod(std::string(v));
    if (!(n > min_exclusive) || n > max) {
      invalid(*a, "out of range " + range);
      return std::nullopt;
    }
    return n;
  }

  std::optional<std::chrono::milliseconds> get_duration(std::string_view name) {
    auto a = get(name);
    if (!a) return std::nullopt;
    auto d = parse_nginx_duration(trim(a->value));
    if (!d) {
      invalid(*a, "expected a duration such as \"60\" (seconds), \"60s\", \"1m\" or \"500ms\"");
      return std::nullopt;
    }
    if (d->count() < 1 || *d > RoutePolicy::kMaxTimeout) {
      invalid(*a, "out of range (1ms-24h)");
      return std::nullopt;
    }
    return d;
  }

  // ---- Families ----

  void parse_load_balancing() {
    auto& up = result_.policy.upstream;
    auto lb = get("load-balance");
    if (lb) {
      if (auto m = model::load_balance_from_string(trim(lb->value))) {
        up.load_balance = *m;
      } else {
        invalid(*lb, "expected one of round_robin, least_conn, ip_hash, ewma");
        lb.reset();
      }
    }
    if (auto h = get("upstream-hash-by")) {
      std::string_view v = trim(h->value);
      if (auto why = model::check_hash_expression(v)) {
        invalid(*h, *why);
      } else {
        up.hash_by = std::string(v);
        if (lb) warn(*lb, "overridden by " + h->key + " (consistent hashing)");
      }
    }
  }

  void parse_affinity() {
    static constexpr std::string_view kCookieAnnotations[] = {
        "session-cookie-name", "session-cookie-max-age", "session-cookie-path",
        "session-cookie-secure", "session-cookie-samesite"};
    auto a = get("affinity");
    if (a && trim(a->value) != "cookie") {
      invalid(*a, "the only supported affinity is \"cookie\"");
      a.reset();
    }
    if (!a) {
      for (auto name : kCookieAnnotations) no_effect_without(name, "affinity: cookie");
      return;
    }
    model::SessionAffinity s;
    if (auto n = get("session-cookie-name")) {
      std::string_view v = trim(n->value);
      if (model::is_token(v)) {
        s.cookie_name = std::string(v);
      } else {
        invalid(*n, "a cookie name must be a token (letters, digits and !#$%&'*+-.^_`|~)");
      }
    }
    s.max_age_seconds =
        get_integer("session-cookie-max-age", 0, model::SessionAffinity::kMaxMaxAgeSeconds);
    if (auto p = get("session-cookie-path")) {
      std::string_view v = trim(p->value);
      if (auto why = model::check_path(v)) {
        invalid(*p, "a cookie path " + *why);
      } else {
        s.path = std::string(v);
      }
    }
    s.secure = get_bool("session-cookie-secure").value_or(false);
    if (auto ss = get("session-cookie-samesite")) {
      if (auto v = model::same_site_from_string(trim(ss->value))) {
        s.same_site = *v;
      } else {
        invalid(*ss, "expected Strict, Lax or None");
      }
    }
    result_.policy.upstream.affinity = std::move(s);
  }

  void parse_backend_protocol() {
    auto& up = result_.policy.upstream;
    if (auto p = get("backend-protocol")) {
      std::string_view v = trim(p->value);
      if (auto proto = model::backend_protocol_from_string(v)) {
        up.protocol = *proto;
      } else {
        static constexpr std::string_view kNginxOnly[] = {"GRPC", "GRPCS", "AUTO_HTTP", "FCGI"};
        std::string upper(v);
        for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        bool known =
            std::find(std::begin(kNginxOnly), std::end(kNginxOnly), upper) != std::end(kNginxOnly);
        invalid(*p, known ? upper + " backends are not supported (HTTP or HTTPS)"
                          : "expected HTTP or HTTPS");
      }
    }
    parse_proxy_ssl_secret();
    if (auto n = get("proxy-ssl-name")) {
      std::string name(trim(n->value));
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (auto why = model::check_tls_server_name(name)) {
        invalid(*n, *why);
      } else if (up.protocol != model::BackendProtocol::kHttps) {
        warn(*n, "has no effect without backend-protocol: HTTPS; ignored");
      } else {
        up.tls_server_name = std::move(name);
      }
    }
  }

  void parse_proxy_ssl_secret() {
    auto& up = result_.policy.upstream;
    auto s = get("proxy-ssl-secret");
    if (!s) return;
    std::string ref(trim(s->value));
    if (ref.find('/') == std::string::npos) ref = context_.ingress_namespace + "/" + ref;
    if (auto why = model::check_object_ref(ref)) {
      invalid(*s, "expected \"namespace/name\" or \"name\" of a Secret: " + *why);
      return;
    }
    if (ref.substr(0, ref.find('/')) != context_.ingress_namespace) {
      invalid(*s, "the Secret must be in the Ingress's namespace " +
                      quote(context_.ingress_namespace) +
                      " (an Ingress may not use another namespace's Secrets)");
      return;
    }
    if (up.protocol != model::BackendProtocol::kHttps) {
      warn(*s, "has no effect without backend-protocol: HTTPS; ignored");
      return;
    }
    up.tls_secret = std::move(ref);
  }

  void parse_timeouts_and_retries() {
    auto& r = result_.policy.route;
    if (auto d = get_duration("proxy-connect-timeout")) r.connect_timeout = *d;
    if (auto d = get_duration("proxy-read-timeout")) r.read_timeout = *d;
    if (auto d = get_duration("proxy-send-timeout")) r.send_timeout = *d;
    if (auto a = get("proxy-body-size")) {
      auto n = parse_nginx_size(trim(a->value));
      if (!n) {
        invalid(*a, "expected a size such as \"8m\", \"512k\", \"1g\" or \"0\" (unlimited)");
      } else if (*n > RoutePolicy::kMaxBodyBytes) {
        invalid(*a, "larger than 1 TiB (use \"0\" for unlimited)");
      } else if (*n > 0) {
        r.max_body_bytes = *n;
      }
    }
    if (auto a = get("proxy-next-upstream")) {
      model::NextUpstream n{false, false, false, false, false, false};
      std::string why;
      bool off = false;
      size_t words = 0;
      std::string_view v = a->value;
      size_t pos = 0;
      while (why.empty()) {
        while (pos < v.size() && is_space(v[pos])) ++pos;
        if (pos == v.size()) break;
        size_t end = pos;
        while (end < v.size() && !is_space(v[end])) ++end;
        std::string_view word = v.substr(pos, end - pos);
        pos = end;
        ++words;
        if (word == "off") {
          off = true;
        } else if (word == "error") {
          n.error = true;
        } else if (word == "timeout") {
          n.timeout = true;
        } else if (word == "http_502") {
          n.http_502 = true;
        } else if (word == "http_503") {
          n.http_503 = true;
        } else if (word == "http_504") {
          n.http_504 = true;
        } else if (word == "non_idempotent") {
          n.non_idempotent = true;
        } else {
          why = "unsupported condition " + quote(word) +
                " (supported: error, timeout, http_502, http_503, http_504, non_idempotent, off)";
        }
      }
      if (why.empty() && words == 0) why = "empty";
      if (why.empty() && off && words > 1) why = "\"off\" must be alone";
      if (why.empty() && !off && n.off()) {
        why = "non_idempotent needs at least one condition to retry on";
      }
      if (why.empty()) {
        r.next_upstream = n;
      } else {
        invalid(*a, why);
      }
    }
    if (auto n = get_integer("proxy-next-upstream-tries", 1, RoutePolicy::kMaxNextUpstreamTries)) {
      r.next_upstream_tries = static_cast<uint32_t>(*n);
    }
  }

  void parse_rewrites_and_redirects() {
    auto& r = result_.policy.route;
    if (auto a = get("rewrite-target")) {
      std::string_view v = trim(a->value);
      if (auto why = model::check_rewrite_target(v)) {
        invalid(*a, *why);
      } else if (auto why = check_capture_groups(v)) {
        invalid(*a, *why);
      } else {
        r.rewrite_target = std::string(v);
      }
    }
    if (auto a = get("app-root")) {
      std::string_view v = trim(a->value);
      if (auto why = model::check_path(v)) {
        invalid(*a, "app-root " + *why);
      } else {
        r.app_root = std::string(v);
      }
    }
    auto permanent = redirect("permanent-redirect", "permanent-redirect-code", 301);
    auto temporal = redirect("temporal-redirect", "temporal-redirect-code", 302);
    if (permanent && temporal) {
      add(Severity::kWarning, "annotations " + permanent->first + " and " + temporal->first +
                                  " are both set; " + temporal->first +
                                  " wins (as in ingress-nginx)");
    }
    if (temporal) {
      r.redirect = temporal->second;
    } else if (permanent) {
      r.redirect = permanent->second;
    }
    if (r.redirect && !r.app_root.empty()) {
      add(Severity::kWarning, "app-root has no effect: every request of the route is redirected");
    }
  }

  // "$N" in a rewrite target must name a capture group of every path it applies to.
  std::optional<std::string> check_capture_groups(std::string_view target) {
    const int wanted = model::max_capture_reference(target);
    if (wanted == 0) return std::nullopt;
    bool any_regex = false;
    for (const auto& p : context_.paths) {
      if (!p.regex) {
        return "refers to $" + std::to_string(wanted) + " but path " + quote(p.path) +
               " is not a regex (set tidegate.io/use-regex: \"true\"; Exact paths are never "
               "regexes)";
      }
      any_regex = true;
      RE2::Options re_options;
      re_options.set_log_errors(false);
      RE2 re(p.path, re_options);
      if (!re.ok()) continue;  // the translator drops that path and reports it
      if (re.NumberOfCapturingGroups() < wanted) {
        return "refers to $" + std::to_string(wanted) + " but path " + quote(p.path) + " has " +
               std::to_string(re.NumberOfCapturingGroups()) + " capture group" +
               (re.NumberOfCapturingGroups() == 1 ? "" : "s");
      }
    }
    if (!any_regex) {
      return "refers to $" + std::to_string(wanted) + " but the Ingress has no regex path";
    }
    return std::nullopt;
  }

  // The redirect of one kind with its code; reports and ignores invalid parts.
  std::optional<std::pair<std::string, model::Redirect>> redirect(std::string_view url_name,
                                                                  std::string_view code_name,
                                                                  uint16_t default_code) {
    auto a = get(url_name);
    std::optional<std::pair<std::string, model::Redirect>> out;
    if (a) {
      std::string_view v = trim(a->value);
      if (auto why = model::check_redirect_url(v)) {
        invalid(*a, *why);
      } else {
        out.emplace(a->key, model::Redirect{std::string(v), default_code});
      }
    }
    if (!out) {
      no_effect_without(code_name, std::string(url_name));
      return out;
    }
    if (auto c = get(code_name)) {
      std::string_view v = trim(c->value);
      auto valid = std::find_if(std::begin(model::kRedirectCodes), std::end(model::kRedirectCodes),
                                [&](uint16_t code) { return v == std::to_string(code); });
      if (valid == std::end(model::kRedirectCodes)) {
        invalid(*c, "expected 301, 302, 303, 307 or 308",
                "ignored (" + std::to_string(default_code) + " applies)");
      } else {
        out->second.code = *valid;
      }
    }
    return out;
  }

  void parse_headers() {
    auto& r = result_.policy.route;
    if (auto a = get("custom-headers")) {
      std::vector<model::Header> headers;
      std::string why;
      std::set<std::string> names;
      std::string_view v = a->value;
      size_t line_no = 0;
      size_t start = 0;
      while (start <= v.size() && why.empty()) {
        size_t nl = v.find('\n', start);
        std::string_view line =
            trim(v.substr(start, nl == std::string_view::npos ? nl : nl - start));
        start = nl == std::string_view::npos ? v.size() + 1 : nl + 1;
        ++line_no;
        if (line.empty()) continue;
        const std::string where = "line " + std::to_string(line_no) + ": ";
        size_t colon = line.find(':');
        if (colon == std::string_view::npos) {
          why = where + "expected \"Name: value\"";
          break;
        }
        model::Header h{std::string(trim(line.substr(0, colon))),
                        std::string(trim(line.substr(colon + 1)))};
        if (auto bad = model::check_response_header(h.name, h.value)) {
          why = where + *bad;
        } else {
          std::string lower = h.name;
          for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          if (!names.insert(lower).second) why = where + h.name + " is set twice";
        }
        headers.push_back(std::move(h));
      }
      if (why.empty() && headers.empty()) why = "no header given";
      if (why.empty() && headers.size() > model::kMaxResponseHeaders) {
        why = "more than " + std::to_string(model::kMaxResponseHeaders) + " headers";
      }
      const std::string_view whole = trim(v);
      if (!why.empty() && !whole.empty() && whole.find(':') == std::string_view::npos &&
          std::none_of(whole.begin(), whole.end(), is_space)) {
        // ingress-nginx's custom-headers names a ConfigMap; we read the headers inline.
        why =
            "ConfigMap references are not supported; write the headers inline, one "
            "\"Name: value\" per line";
      }
      if (why.empty()) {
        r.response_headers = std::move(headers);
      } else {
        invalid(*a, why);
      }
    }
    if (auto a = get("upstream-vhost")) {
      std::string_view v = trim(a->value);
      if (auto why = model::check_host_port(v)) {
        invalid(*a, *why);
      } else {
        r.upstream_vhost = std::string(v);
      }
    }
    if (auto a = get("allow-upgrade")) {
      std::vector<std::string> protocols;
      std::string why;
      for (auto& p : split_commas(a->value)) {
        for (auto& c : p) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (auto bad = model::check_upgrade_protocol(p)) {
          why = quote(p) + ": " + *bad;
          break;
        }
        if (std::find(protocols.begin(), protocols.end(), p) == protocols.end()) {
          protocols.push_back(std::move(p));
        }
      }
      if (why.empty()) {
        r.upgrade_protocols = std::move(protocols);
      } else {
        invalid(*a, why);
      }
    }
  }

  void parse_cors() {
    static constexpr std::string_view kCorsAnnotations[] = {
        "cors-allow-origin",   "cors-allow-methods",     "cors-allow-headers",
        "cors-expose-headers", "cors-allow-credentials", "cors-max-age"};
    if (!get_bool("enable-cors").value_or(false)) {
      for (auto name : kCorsAnnotations) no_effect_without(name, "enable-cors: \"true\"");
      return;
    }
    model::Cors c;
    if (auto a = get("cors-allow-origin")) {
      auto origins = split_commas(a->value);
      std::string why;
      for (const auto& o : origins) {
        if (auto bad = model::check_cors_origin(o)) {
          why = "origin " + quote(o) + " " + *bad;
          break;
        }
      }
      if (why.empty() && origins.size() > 1 &&
          std::find(origins.begin(), origins.end(), "*") != origins.end()) {
        why = "\"*\" must be alone";
      }
      if (why.empty()) {
        c.allow_origins = std::move(origins);
      } else {
        invalid(*a, why);
      }
    }
    token_list("cors-allow-methods", false, c.allow_methods);
    token_list("cors-allow-headers", true, c.allow_headers);
    token_list("cors-expose-headers", true, c.expose_headers);
    if (auto b = get_bool("cors-allow-credentials")) c.allow_credentials = *b;
    if (auto n = get_integer("cors-max-age", 0, model::Cors::kMaxMaxAgeSeconds)) {
      c.max_age_seconds = *n;
    }
    result_.policy.route.cors = std::move(c);
  }

  // hsts: Strict-Transport-Security on HTTPS responses; the other three refine it.
  void parse_hsts() {
    static constexpr std::string_view kRefining[] = {"hsts-max-age", "hsts-include-subdomains",
                                                     "hsts-preload"};
    if (!get_bool("hsts").value_or(false)) {
      for (auto name : kRefining) no_effect_without(name, "hsts: \"true\"");
      return;
    }
    model::Hsts h;
    if (auto n = get_integer("hsts-max-age", 0, model::Hsts::kMaxMaxAgeSeconds)) {
      h.max_age_seconds = *n;
    }
    if (auto b = get_bool("hsts-include-subdomains")) h.include_subdomains = *b;
    std::optional<FoundAnnotation> preload_found;
    if (auto b = get_bool("hsts-preload")) {
      h.preload = *b;
      preload_found = get("hsts-preload");
    }
    // The browsers' preload lists take a host only with a year or more and includeSubDomains.
    if (h.preload && (h.max_age_seconds < 31'536'000 || !h.include_subdomains)) {
      warn(*preload_found,
           "preload lists require hsts-max-age of at least 31536000 and "
           "hsts-include-subdomains; sent as asked");
    }
    result_.policy.route.hsts = h;
  }

  void token_list(std::string_view name, bool star_alone, std::vector<std::string>& out) {
    auto a = get(name);
    if (!a) return;
    auto items = split_commas(a->value);
    for (const auto& t : items) {
      if (star_alone && t == "*") {
        if (items.size() == 1) continue;
        invalid(*a, "\"*\" must be alone");
        return;
      }
      if (!model::is_token(t)) {
        invalid(*a, (t.empty() ? std::string("empty entry") : quote(t) + " is not a token") +
                        (star_alone ? " (a comma-separated list of names, or \"*\")"
                                    : " (a comma-separated list of names)"));
        return;
      }
    }
    out = std::move(items);
  }

  void parse_source_ranges() {
    auto a = get("whitelist-source-range");
    if (!a) return;
    model::SourceRanges ranges;
    if (auto why = model::parse_cidr_list(a->value, &ranges.cidrs)) {
      ranges.cidrs.clear();
      invalid(*a, *why,
              "the route denies every client (403) until it is fixed, rather than allowing all");
    }
    result_.policy.route.source_ranges = std::move(ranges);
  }

  void parse_rate_limits() {
    auto& rl = result_.policy.route.rate_limits;
    std::optional<FoundAnnotation> rps_found;
    std::optional<FoundAnnotation> burst_found;
    rl.rps = get_decimal("limit-rps", 0, model::RateLimits::kMaxRps,
                         "(greater than 0, at most 100000)", &rps_found);
    auto burst = get_decimal("limit-burst-multiplier", 1 - 1e-9,
                             model::RateLimits::kMaxBurstMultiplier, "(1-10000)", &burst_found);
    if (rl.rps) {
      if (auto why = model::check_burst_window(rl)) {
        invalid(*rps_found, "too low: " + *why);
        rl.rps.reset();
      }
    }
    if (burst) {
      if (!rl.rps) {
        warn(*burst_found, "has no effect without limit-rps; ignored");
      } else {
        model::RateLimits with = rl;
        with.burst_multiplier = *burst;
        if (auto why = model::check_burst_window(with)) {
          invalid(*burst_found, *why);
        } else {
          rl.burst_multiplier = *burst;
        }
      }
    }
    if (auto n = get_integer("limit-connections", 1, model::RateLimits::kMaxConnections)) {
      rl.connections = static_cast<uint32_t>(*n);
    }
    const bool limited = rl.rps || rl.connections;
    if (auto a = get("limit-allowlist")) {
      std::vector<std::string> cidrs;
      if (!limited) {
        warn(*a, "has no effect without limit-rps or limit-connections; ignored");
      } else if (auto why = model::parse_cidr_list(a->value, &cidrs)) {
        invalid(*a, *why, "ignored (no client is exempt)");
      } else {
        rl.allowlist = std::move(cidrs);
      }
    }
    if (auto a = get("limit-status-code")) {
      std::string_view v = trim(a->value);
      if (!limited) {
        warn(*a, "has no effect without limit-rps or limit-connections; ignored");
      } else if (v == "429" || v == "503") {
        rl.status_code = static_cast<uint16_t>(v == "429" ? 429 : 503);
      } else {
        invalid(*a, "expected 429 or 503", "ignored (429 applies)");
      }
    }
  }

  void parse_canary() {
    static constexpr std::string_view kCanaryAnnotations[] = {
        "canary-weight", "canary-weight-total", "canary-by-header", "canary-by-header-value",
        "canary-by-cookie"};
    if (!get_bool("canary").value_or(false)) {
      for (auto name : kCanaryAnnotations) no_effect_without(name, "canary: \"true\"");
      return;
    }
    Canary c;
    if (auto t = get_integer("canary-weight-total", 1, Canary::kMaxWeightTotal)) {
      c.weight_total = static_cast<uint32_t>(*t);
    }
    std::optional<FoundAnnotation> weight_found;
    if (auto w = get_integer("canary-weight", 0, Canary::kMaxWeightTotal, &weight_found)) {
      if (*w > c.weight_total) {
        invalid(*weight_found, "more than the weight total " + std::to_string(c.weight_total),
                "ignored (weight 0)");
      } else {
        c.weight = static_cast<uint32_t>(*w);
      }
    }
    if (auto h = get("canary-by-header")) {
      std::string_view v = trim(h->value);
      if (model::is_token(v)) {
        c.header = std::string(v);
      } else {
        invalid(*h, "a header name must be a token");
      }
    }
    if (auto hv = get("canary-by-header-value")) {
      std::string_view v = trim(hv->value);
      if (c.header.empty()) {
        invalid(*hv, "needs a valid canary-by-header");
      } else if (v.empty() || v.size() > 4096 || !std::all_of(v.begin(), v.end(), [](char ch) {
                   auto u = static_cast<unsigned char>(ch);
                   return u == '\t' || (u >= 0x20 && u != 0x7f);
                 })) {
        invalid(*hv, "a header value must be non-empty without control characters");
      } else {
        c.header_value = std::string(v);
      }
    }
    if (auto k = get("canary-by-cookie")) {
      std::string_view v = trim(k->value);
      if (model::is_token(v)) {
        c.cookie = std::string(v);
      } else {
        invalid(*k, "a cookie name must be a token");
      }
    }
    result_.policy.canary = std::move(c);
  }

  void report_unsupported_nginx() {
    for (const auto& [key, value] : annotations_) {
      if (key.compare(0, kNginxAnnotationPrefix.size(), kNginxAnnotationPrefix) != 0) continue;
      std::string_view name = std::string_view(key).substr(kNginxAnnotationPrefix.size());
      bool known = std::find(std::begin(kParsedElsewhere), std::end(kParsedElsewhere), name) !=
                   std::end(kParsedElsewhere);
      for (const auto& s : spellings()) {
        known = known || std::find(s.nginx.begin(), s.nginx.end(), name) != s.nginx.end();
      }
      if (!known) {
        add(Severity::kWarning, "annotation " + key + " is not supported by Tidegate; ignored");
      }
    }
  }

  const std::map<std::string, std::string>& annotations_;
  const AnnotationContext& context_;
  const AnnotationOptions& options_;
  const std::string object_;
  AnnotationResult result_;
  std::set<std::string> reported_conflicts_;
};

}  // namespace

std::optional<FoundAnnotation> find_annotation(
    const std::map<std::string, std::string>& annotations, std::string_view name,
    const AnnotationOptions& options) {
  return lookup(annotations, name, options, nullptr);
}

AnnotationResult parse_annotations(const std::map<std::string, std::string>& annotations,
                                   const AnnotationContext& context,
                                   const AnnotationOptions& options) {
  return Parser(annotations, context, options).run();
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
