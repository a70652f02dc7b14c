// Annotation table tests: the cases of no family (defaults, aliases), and the checks over every
// family's cases (tests/controller/translate/annotations/<family>_test.cc): each case also checks
// that the policy passes model::validate and that every diagnostic names the Ingress; the parse is
// deterministic; and for every supported annotation there is at least one case where it is valid
// and one where it is refused.

#include "translate/annotations.h"
#include "annotations/table.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace tidegate::controller::translate {
namespace {

using namespace std::chrono_literals;
using annotation_table::A;
using annotation_table::Annotations;
using annotation_table::Case;
using annotation_table::E;
using annotation_table::plain_paths;
using annotation_table::run;
using annotation_table::W;

std::vector<Case> core_cases() {
  return {
      {"no annotations: every default", {}},
      {"unrelated and other controllers' annotations are ignored",
       A({{"kubernetes.io/ingress.class", "x"},
          {"nginx.ingress.kubernetes.io/limit-rps", "5"},
          {"use-regex", "true"}})},

      // ---- nginx aliases ----
      // Without an annotation of either prefix, parse_annotations answers from a result kept per
      // combination of options: these two and the compression family's "the controller's default
      // turns it on" cover the combinations the cases above do not.
      {"aliases on, no annotation of either prefix: every default",
       A({{"kubernetes.io/ingress.class", "x"}}),
       {},
       {},
       plain_paths(),
       AnnotationOptions{true}},
      {"aliases and compression on, no annotation of either prefix: compression only",
       A({{"kubernetes.io/ingress.class", "x"}}),
       [](IngressPolicy& p) { p.route.mut().compression = model::Compression{}; },
       {},
       plain_paths(),
       AnnotationOptions{true, true}},
      {"aliases off: nginx spellings are not read",
       A({{"nginx.ingress.kubernetes.io/load-balance", "ewma"}})},
      {"aliases on: nginx spellings are read",
       A({{"nginx.ingress.kubernetes.io/load-balance", "ewma"},
          {"nginx.ingress.kubernetes.io/limit-rps", "5"},
          {"nginx.ingress.kubernetes.io/limit-whitelist", "10.0.0.0/8"},
          {"nginx.ingress.kubernetes.io/use-regex", "true"}}),
       [](IngressPolicy& p) {
         p.upstream.mut().load_balance = model::LoadBalance::kEwma;
         p.route.mut().rate_limits.rps = 5;
         p.route.mut().rate_limits.allowlist = {"10.0.0.0/8"};
       },
       {},
       plain_paths(),
       AnnotationOptions{true}},
      {"aliases on: ours wins, a disagreement is a warning",
       A({{"load-balance", "least_conn"},
          {"nginx.ingress.kubernetes.io/load-balance", "ewma"},
          {"proxy-read-timeout", "30"},
          {"nginx.ingress.kubernetes.io/proxy-read-timeout", "30"}}),
       [](IngressPolicy& p) {
         p.upstream.mut().load_balance = model::LoadBalance::kLeastConn;
         p.route.mut().read_timeout = 30s;
       },
       {W("annotations tidegate.io/load-balance (\"least_conn\") and "
          "nginx.ingress.kubernetes.io/load-balance (\"ewma\") disagree; tidegate.io/load-balance "
          "wins")},
       plain_paths(),
       AnnotationOptions{true}},
      {"aliases on: diagnostics name the spelling used",
       A({{"nginx.ingress.kubernetes.io/limit-rps", "fast"}}),
       {},
       {E("annotation nginx.ingress.kubernetes.io/limit-rps: invalid value \"fast\"")},
       plain_paths(),
       AnnotationOptions{true}},
      {"aliases on: unsupported nginx annotations are reported, snippets as never interpreted",
       A({{"nginx.ingress.kubernetes.io/configuration-snippet", "more_set_headers x;"},
          {"nginx.ingress.kubernetes.io/proxy-buffer-size", "8k"},
          {"nginx.ingress.kubernetes.io/ssl-redirect", "false"}}),
       {},
       {W("annotation nginx.ingress.kubernetes.io/configuration-snippet: nginx configuration "
          "text is never interpreted by Tidegate; ignored"),
        W("annotation nginx.ingress.kubernetes.io/proxy-buffer-size is not supported by "
          "Tidegate; ignored")},
       plain_paths(),
       AnnotationOptions{true}},
      {"aliases on: limit-status-code has no nginx spelling",
       A({{"limit-rps", "1"}, {"nginx.ingress.kubernetes.io/limit-status-code", "503"}}),
       [](IngressPolicy& p) { p.route.mut().rate_limits.rps = 1; },
       {W("nginx.ingress.kubernetes.io/limit-status-code is not supported")},
       plain_paths(),
       AnnotationOptions{true}},
  };
}

}  // namespace

std::vector<annotation_table::Case> annotation_table::all_cases() {
  std::vector<Case> all = core_cases();
  for (auto* family :
       {backend_cases, timeouts_cases, rewrites_cases, headers_cases, access_cases, canary_cases,
        auth_cases, external_auth_cases, buffering_cases, compression_cases, errors_cases,
        client_auth_cases, sendfile_cases, cache_cases}) {
    auto cases = family();
    all.insert(all.end(), cases.begin(), cases.end());
  }
  return all;
}

namespace {

TEST(Annotations, Table) {
  for (const auto& c : core_cases()) run(c);
}

TEST(Annotations, Deterministic) {
  for (const auto& c : annotation_table::all_cases()) {
    auto a = parse_annotations(c.annotations, c.context, c.options);
    auto b = parse_annotations(c.annotations, c.context, c.options);
    EXPECT_EQ(a.policy, b.policy) << c.name;
    EXPECT_EQ(a.diagnostics, b.diagnostics) << c.name;
  }
}

// Every supported annotation has a case where it is accepted without a diagnostic about it and
// one where it is refused with an error naming it.
TEST(Annotations, TableCoversEveryAnnotation) {
  std::set<std::string> valid, refused;
  for (const auto& c : annotation_table::all_cases()) {
    auto result = parse_annotations(c.annotations, c.context, c.options);
    for (const auto& [key, value] : c.annotations) {
      if (key.rfind("tidegate.io/", 0) != 0) continue;
      const std::string name = key.substr(12);
      bool mentioned = false;
      for (const auto& d : result.diagnostics) {
        if (d.message.find("annotation " + key + ":") != std::string::npos) {
          mentioned = true;
          if (d.severity == Severity::kError) refused.insert(name);
        }
      }
      if (!mentioned) valid.insert(name);
    }
  }
  for (std::string_view name : supported_annotations()) {
    EXPECT_TRUE(valid.count(std::string(name))) << name << " has no valid case";
    EXPECT_TRUE(refused.count(std::string(name))) << name << " has no refused case";
  }
}

TEST(Annotations, FindAnnotationHonoursTheAliasMode) {
  const Annotations a = A({{"nginx.ingress.kubernetes.io/use-regex", "true"}});
  EXPECT_FALSE(find_annotation(a, "use-regex", {}));
  auto found = find_annotation(a, "use-regex", AnnotationOptions{true});
  ASSERT_TRUE(found);
  EXPECT_EQ(found->key, "nginx.ingress.kubernetes.io/use-regex");
  EXPECT_EQ(found->value, "true");
  const Annotations both =
      A({{"use-regex", "false"}, {"nginx.ingress.kubernetes.io/use-regex", "true"}});
  EXPECT_EQ(find_annotation(both, "use-regex", AnnotationOptions{true})->value, "false");
}

TEST(Annotations, NginxDurationAndSizeSyntax) {
  EXPECT_EQ(parse_nginx_duration("60"), 60s);
  EXPECT_EQ(parse_nginx_duration("60s"), 60s);
  EXPECT_EQ(parse_nginx_duration("1m"), 60s);
  EXPECT_EQ(parse_nginx_duration("500ms"), 500ms);
  EXPECT_EQ(parse_nginx_duration("1h2m3s4ms"), 1h + 2min + 3s + 4ms);
  EXPECT_EQ(parse_nginx_duration("2d"), 48h);
  EXPECT_EQ(parse_nginx_duration("0"), 0s);
  for (const char* bad :
       {"", "s", "1.5s", "-1", "1s1m", "1m1m", "1 m", "1w", "1mss", "60S", "1234567890", "1msx"}) {
    EXPECT_FALSE(parse_nginx_duration(bad)) << bad;
  }
  EXPECT_EQ(parse_nginx_size("1024"), 1024u);
  EXPECT_EQ(parse_nginx_size("8k"), 8u << 10);
  EXPECT_EQ(parse_nginx_size("8M"), 8u << 20);
  EXPECT_EQ(parse_nginx_size("1g"), uint64_t{1} << 30);
  EXPECT_EQ(parse_nginx_size("0"), 0u);
  for (const char* bad : {"", "m", "8mb", "1.5m", "-1", "8 m", "1t", "99999999999999999999"}) {
    EXPECT_FALSE(parse_nginx_size(bad)) << bad;
  }
}

}  // namespace
}  // namespace tidegate::controller::translate
