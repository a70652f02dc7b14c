#pragma once
// Issue #18's dense rule kinds, shared by the benchmark (bench/substitution.sh's dense set) and
// the differential test over a dense body: two domain rewrites (one with a group), a
// [Cc]argo-style class, two \b words, a case-insensitive word, <code>, an analytics id, every
// class attribute, and http:// links (a group over a negated class).

#include <vector>

#include "filters/substitution/rule_set.h"

namespace tidegate::dataplane::filters {

inline std::vector<SubstitutionRule> dense_benchmark_rules() {
  return {
      {R"(doc\.rust-lang\.org)", "docs.clone.example", ""},
      {R"(https://github\.com/([a-z0-9-]+))", "https://git.clone.example/$1", ""},
      {"[Cc]argo", "Freight", ""},
      {R"(\bcrate\b)", "package", ""},
      {R"(\bdependency\b)", "requirement", ""},
      {"registry", "index", "i"},
      {"<code>", R"(<code class="x">)", ""},
      {R"(UA-[0-9]+-[0-9]+)", "UA-000000-1", ""},
      {R"re(class="[a-z-]+")re", R"re(class="c")re", ""},
      {R"re(href="http://([^"]*)")re", R"re(href="https://$1")re", ""},
  };
}

}  // namespace tidegate::dataplane::filters
