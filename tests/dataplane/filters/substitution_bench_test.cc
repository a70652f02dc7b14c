// Engine throughput on a real HTML page, for docs/substitutions.md. Disabled: a measurement, not
// a test. Run with
//   build/bin/tidegate-unit-tests --gtest_also_run_disabled_tests --gtest_filter='*Bench*'
// and TIDEGATE_SUBST_BENCH_FILE=/path/to/page.html to pick another page.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "filters/substitution/rule_set.h"
#include "filters/substitution/stream.h"

namespace tidegate::dataplane::filters {
namespace {

// Ten rules of the kinds the issue lists: domains, an ID pattern, a case-insensitive word, a \b
// word, attribute patterns (one with a group).
std::vector<SubstitutionRule> ten_rules() {
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
  const auto compiled = RuleSet::compile(ten_rules());
  ASSERT_TRUE(compiled.errors.empty()) << compiled.errors[0].message;
  constexpr size_t kChunk = 16 * 1024;  // the proxy's body buffer

  std::string out;
  out.reserve(page.size() * 2);
  const double copy = best_seconds(20, [&] {
    out.clear();
    for (size_t pos = 0; pos < page.size(); pos += kChunk) {
      out.append(page, pos, kChunk);
    }
  });
  uint64_t replacements = 0;
  const double subst = best_seconds(10, [&] {
    out.clear();
    SubstitutionStream stream(compiled.rules, &out);
    for (size_t pos = 0; pos < page.size(); pos += kChunk) {
      stream.feed(std::string_view(page).substr(pos, kChunk));
    }
    stream.end();
    replacements = stream.stats().replacements;
  });
  const double mb = page.size() / 1e6;
  std::printf("page %.2f MB, %llu replacements\n", mb,
              static_cast<unsigned long long>(replacements));
  std::printf("plain copy:          %8.0f MB/s\n", mb / copy);
  std::printf("ten rules, streamed: %8.0f MB/s (%.2f ms per page)\n", mb / subst, subst * 1e3);
}

}  // namespace
}  // namespace tidegate::dataplane::filters
