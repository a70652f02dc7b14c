// Engine throughput on HTML pages, for docs/substitutions.md and bench/substitution.sh.
// Disabled: a measurement, not a test. Run with
//   build/bin/tidegate-unit-tests --gtest_also_run_disabled_tests --gtest_filter='*Bench*'
// Environment:
//   TIDEGATE_SUBST_BENCH_FILE  the page (default /usr/share/doc/nodejs/api/fs.html)
//   TIDEGATE_SUBST_BENCH_RULES sparse (default: the ten rules of the nodejs page), dense (the
//                              ten rules of bench/dense_page.py's page, a match every ~85 bytes)
//                              or dense-alternation (the same, the first rule with an optional
//                              part: no single literal prefix)
// Prints MB/s of page for a plain copy (the floor), RE2 alone running the rules as one
// leftmost-longest alternation over the page in memory (a calibration: what one RE2 search per
// match costs, without replacing anything) and the engine, streamed in 16 KiB chunks.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "dense_rules.h"
#include "filters/substitution/rule_set.h"
#include "filters/substitution/stream.h"

namespace tidegate::dataplane::filters {
namespace {

// Ten rules of the kinds the issue lists: domains, an ID pattern, a case-insensitive word, a \b
// word, attribute patterns (one with a group). bench/substitution.sh's sparse set.
std::vector<SubstitutionRule> sparse_rules() {
  return {
      {R"(developer\.mozilla\.org)", "mdn.clone.example", ""},
      {R"(nodejs\.org)", "nodejs.clone.example", ""},
      {R"(github\.com)", "git.clone.example", ""},
      {R"(www\.freebsd\.org)", "bsd.clone.example", ""},
      {R"(UA-[0-9]{4,10}-[0-9]{1,4})", "UA-0000-0", ""},
      {"javascript", "JS", "i"},
      {R"(\bcallback\b)", "cb", ""},
      {R"re(href="http://([^"]*)")re", R"re(href="https://$1")re", ""},
      {R"re(<meta name="[a-z-]+" content="[^"]*">)re", "", ""},
      {R"(\bdeprecated\b)", "DEPRECATED", "i"},
  };
}

std::string rules_name() {
  const char* rules = std::getenv("TIDEGATE_SUBST_BENCH_RULES");
  return rules != nullptr ? rules : "sparse";
}

// The dense set, or with `alternation` its first rule written with an optional part,
// (?:www\.)?doc\.rust-lang\.org (the same matches on the dense page): a rule without one literal
// prefix, which turned the prefilter off for the whole set until literal_alternatives().
std::vector<SubstitutionRule> dense_rules(bool alternation) {
  std::vector<SubstitutionRule> rules = dense_benchmark_rules();
  if (alternation) rules[0].match = R"((?:www\.)?doc\.rust-lang\.org)";
  return rules;
}

bool dense() { return rules_name().rfind("dense", 0) == 0; }

std::string read_page() {
  const char* path = std::getenv("TIDEGATE_SUBST_BENCH_FILE");
  std::ifstream in(path ? path : "/usr/share/doc/nodejs/api/fs.html", std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// CPU time of this thread: the build machines are shared, and wall time mostly measures the
// neighbours.
double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

template <typename F>
double best_seconds(int runs, F f) {
  double best = 1e9;
  for (int i = 0; i < runs; ++i) {
    const double t0 = thread_seconds();
    f();
    best = std::min(best, thread_seconds() - t0);
  }
  return best;
}

TEST(SubstitutionBench, DISABLED_TenRulesOnAnHtmlPage) {
  const std::string page = read_page();
  ASSERT_GT(page.size(), 100000u) << "set TIDEGATE_SUBST_BENCH_FILE to an HTML page";
  const std::vector<SubstitutionRule> rules =
      dense() ? dense_rules(rules_name() == "dense-alternation") : sparse_rules();
  const auto compiled = RuleSet::compile(rules);
  ASSERT_TRUE(compiled.errors.empty()) << compiled.errors[0].message;
  constexpr size_t kChunk = 16 * 1024;  // the proxy's body buffer
  const int runs = std::getenv("TIDEGATE_SUBST_BENCH_RUNS") != nullptr
                       ? std::max(1, std::atoi(std::getenv("TIDEGATE_SUBST_BENCH_RUNS")))
                       : 10;

  std::string out;
  out.reserve(page.size() * 2);
  const double copy = best_seconds(2 * runs, [&] {
    out.clear();
    for (size_t pos = 0; pos < page.size(); pos += kChunk) {
      out.append(page, pos, kChunk);
    }
  });

  // RE2 alone: every rule in a group, joined by '|', leftmost-longest, searched from the end of
  // each match to the next over the whole page in memory; nothing replaced, the rule not named.
  std::string joined;
  for (const auto& r : rules) {
    if (!joined.empty()) joined += '|';
    joined += (r.flags == "i" ? "((?i:" : "((?:") + r.match + "))";
  }
  RE2::Options options;
  options.set_longest_match(true);
  options.set_max_mem(64 << 20);
  const RE2 alternation(joined, options);
  ASSERT_TRUE(alternation.ok()) << alternation.error();
  uint64_t re2_matches = 0;
  // TIDEGATE_SUBST_BENCH_RE2=0 leaves the calibration out (to profile the engine alone).
  const char* re2_env = std::getenv("TIDEGATE_SUBST_BENCH_RE2");
  const int re2_runs = re2_env != nullptr && std::string(re2_env) == "0" ? 0 : runs;
  const double re2_alone = best_seconds(re2_runs, [&] {
    re2_matches = 0;
    re2::StringPiece m;
    for (size_t pos = 0; alternation.Match(page, pos, page.size(), RE2::UNANCHORED, &m, 1);
         ++re2_matches) {
      pos = static_cast<size_t>(m.data() - page.data()) + m.size();
    }
  });

  uint64_t replacements = 0;
  const double subst = best_seconds(runs, [&] {
    out.clear();
    SubstitutionStream stream(compiled.rules, &out);
    for (size_t pos = 0; pos < page.size(); pos += kChunk) {
      stream.feed(std::string_view(page).substr(pos, kChunk));
    }
    stream.end();
    replacements = stream.stats().replacements;
  });
  if (re2_runs > 0) {
    EXPECT_EQ(replacements, re2_matches);
  }
  const double mb = page.size() / 1e6;
  std::printf("page %.2f MB, %s rules, %llu replacements (one per %.0f bytes)\n", mb,
              rules_name().c_str(), static_cast<unsigned long long>(replacements),
              replacements ? static_cast<double>(page.size()) / replacements : 0.0);
  std::printf("plain copy:          %8.0f MB/s\n", mb / copy);
  std::printf("RE2 alone:           %8.0f MB/s (%.2f ms per page)\n", mb / re2_alone,
              re2_alone * 1e3);
  std::printf("ten rules, streamed: %8.0f MB/s (%.2f ms per page)\n", mb / subst, subst * 1e3);
}

}  // namespace
}  // namespace tidegate::dataplane::filters
