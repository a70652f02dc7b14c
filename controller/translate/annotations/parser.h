#pragma once
// The annotation parser shared by the family files of controller/translate/annotations/: the
// lookup (our name, or an ingress-nginx alias), reporting (Events) and typed getters. Each family
// (backend, timeouts, rewrites, headers, access, canary) parses and validates its annotations in
// its own file; annotations.cc runs them in order. Private to the translator.

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "translate/annotations.h"

namespace tidegate::controller::translate::annotations_detail {

using model::Canary;
using model::RoutePolicy;

inline std::string quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_digit);
}

// Splits on commas, trimming each item; empty items are kept (the caller refuses them).
inline std::vector<std::string> split_commas(std::string_view s) {
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

// Ours, else (alias mode) the first nginx spelling that is set (annotations.cc).
std::optional<FoundAnnotation> lookup(const std::map<std::string, std::string>& annotations,
                                      std::string_view name, const AnnotationOptions& options,
                                      std::optional<FoundAnnotation>* shadowed);

class Parser {
 public:
  Parser(const std::map<std::string, std::string>& annotations, const AnnotationContext& context,
         const AnnotationOptions& options)
      : annotations_(annotations),
        context_(context),
        options_(options),
        object_("Ingress " + context.ingress_namespace + "/" + context.ingress_name) {}

  // The families in order (canary first: a canary Ingress ignores route-level annotations).
  AnnotationResult run();

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

  std::optional<std::chrono::milliseconds> get_duration(std::string_view name,
                                                        bool allow_zero = false) {
    auto a = get(name);
    if (!a) return std::nullopt;
    auto d = parse_nginx_duration(trim(a->value));
    if (!d) {
      invalid(*a, "expected a duration such as \"60\" (seconds), \"60s\", \"1m\" or \"500ms\"");
      return std::nullopt;
    }
    if (d->count() < (allow_zero ? 0 : 1) || *d > RoutePolicy::kMaxTimeout) {
      invalid(*a, allow_zero ? "out of range (0-24h)" : "out of range (1ms-24h)");
      return std::nullopt;
    }
    return d;
  }

  // A Secret reference ("name" or "namespace/name") that must be in the Ingress's own namespace:
  // "namespace/name", or nullopt after reporting why not (with `consequence`).
  std::optional<std::string> own_secret(const FoundAnnotation& a,
                                        const std::string& consequence = "ignored") {
    std::string ref(trim(a.value));
    if (ref.find('/') == std::string::npos) ref = context_.ingress_namespace + "/" + ref;
    if (auto why = model::check_object_ref(ref)) {
      invalid(a, "expected \"namespace/name\" or \"name\" of a Secret: " + *why, consequence);
      return std::nullopt;
    }
    if (ref.substr(0, ref.find('/')) != context_.ingress_namespace) {
      invalid(a,
              "the Secret must be in the Ingress's namespace " + quote(context_.ingress_namespace) +
                  " (an Ingress may not use another namespace's Secrets)",
              consequence);
      return std::nullopt;
    }
    return ref;
  }

  // ---- Families, each in annotations/<family>.cc ----

  // annotations/backend.cc
  void parse_load_balancing();
  void parse_affinity();
  void parse_backend_protocol();
  void parse_proxy_ssl_secret();

  // annotations/timeouts.cc
  void parse_timeouts_and_retries();

  // annotations/buffering.cc: what the data plane does anyway (both bodies stream).
  void parse_buffering();

  // annotations/rewrites.cc
  void parse_rewrites_and_redirects();
  // "$N" in a rewrite target must name a capture group of every path it applies to.
  std::optional<std::string> check_capture_groups(std::string_view target);
  // The redirect of one kind with its code; reports and ignores invalid parts.
  std::optional<std::pair<std::string, model::Redirect>> redirect(std::string_view url_name,
                                                                  std::string_view code_name,
                                                                  uint16_t default_code);

  // annotations/headers.cc
  void parse_headers();
  void parse_cors();
  // hsts: Strict-Transport-Security on HTTPS responses; the other three refine it.
  void parse_hsts();
  void token_list(std::string_view name, bool star_alone, std::vector<std::string>& out);

  // annotations/access.cc
  void parse_source_ranges();
  // annotations/errors.cc
  void parse_error_pages();
  void parse_deny_ranges();
  void parse_rate_limits();

  // annotations/auth.cc
  void parse_auth();
  // auth-url and its refinements (external authentication).
  void parse_external_auth();

  // annotations/client_auth.cc: auth-tls-* (client certificates of the Ingress's hosts).
  void parse_client_auth();

  // annotations/compression.cc
  void parse_compression();

  // annotations/sendfile.cc: x-sendfile-directories, x-accel-mapping.
  void parse_sendfile();

  // annotations/cache.cc: enable-cache.
  void parse_cache();

  // annotations/canary.cc
  void parse_canary();

  // annotations.cc: with --nginx-annotations, every nginx.ingress.kubernetes.io/ annotation
  // Tidegate does not read is reported.
  void report_unsupported_nginx();

  const std::map<std::string, std::string>& annotations_;
  const AnnotationContext& context_;
  const AnnotationOptions& options_;
  const std::string object_;
  AnnotationResult result_;
  // The route policy being built; run() hands it to result_.policy.route (shared, and left out
  // when it is the default one).
  model::RoutePolicy route_;
  model::UpstreamPolicy upstream_;  // the same for result_.policy.upstream
  std::set<std::string> reported_conflicts_;
};

}  // namespace tidegate::controller::translate::annotations_detail
