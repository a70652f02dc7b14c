#pragma once
// Substitution rules for response bodies (issue #5), compiled once per configuration snapshot.
//
// A RuleSet is immutable after compile() and shared across worker threads through
// std::shared_ptr<const RuleSet>; each response gets its own SubstitutionStream (stream.h).
// Semantics and limits: docs/substitutions.md.

#include <re2/re2.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "substitution/rule.h"

namespace tidegate::dataplane::filters {

// Rules, their limits and their validation live in lib/substitution/rule.h, shared with the
// controller so that both sides agree on which rules are valid.
using SubstitutionRule = substitution::Rule;
using RuleError = substitution::RuleError;
using substitution::validate_rule;
inline constexpr size_t kMaxSubstitutionRules = substitution::kMaxRules;
inline constexpr size_t kMaxPatternBytes = substitution::kMaxPatternBytes;
inline constexpr size_t kMaxReplacementBytes = substitution::kMaxReplacementBytes;

class RuleSet;

struct CompileResult {
  // The valid rules, in their original order; null when no rule is valid.
  std::shared_ptr<const RuleSet> rules;
  // One entry per rejected rule, in order. Rejected rules are left out; the others still apply.
  std::vector<RuleError> errors;
};

class RuleSet {
 public:
  static CompileResult compile(const std::vector<SubstitutionRule>& rules);

  using Piece = substitution::Piece;
  using Rule = substitution::CompiledRule;

  size_t size() const { return rules_.size(); }
  const Rule& rule(size_t i) const { return rules_[i]; }

  // Every rule joined by '|', leftmost-longest: finds where the next match starts and ends.
  const RE2& combined() const { return *combined_; }
  // The union of the rules' prefix closures (prefix_regex.h) followed by \z, searched
  // unanchored: the leftmost position whose text up to the window's end can still grow into a
  // match once more bytes arrive. RE2 runs this backwards from the end.
  const RE2& viable_tail() const { return *viable_tail_; }
  // False when some rule's prefix closure could not be derived; the stream then treats every
  // held position as possibly growing (correct, but bytes wait for the end or the buffer limit).
  bool exact_prefixes() const { return exact_prefixes_; }

  // Appends the replacement for the match [start, end) of rule `index` in `text` (bytes before
  // `start` and after `end` are the context for assertions such as \b).
  void expand(size_t index, std::string_view text, size_t start, size_t end,
              std::string* out) const;

  // The leftmost-longest match of any rule in text[from, size) (bytes before `from` are context):
  // its start and end. With a prefilter (every rule starts with a literal), RE2 runs only where
  // some rule's literal is; otherwise the joined pattern searches the whole range.
  bool find(std::string_view text, size_t from, size_t* start, size_t* end) const;
  bool prefiltered() const { return !literals_.empty(); }

  // Which rule produced the match [start, end): the earliest one that matches exactly there.
  size_t rule_for(std::string_view text, size_t start, size_t end) const;

 private:
  RuleSet() = default;
  void build_prefilter(const std::vector<SubstitutionRule>& valid);
  size_t next_candidate(std::string_view text, size_t from) const;
  void check_hit(std::string_view text, size_t from, size_t i, size_t* best) const;

  // A rule's literal prefix and the offset of its rarest byte, which the scan looks for.
  struct Literal {
    std::string bytes;
    bool fold = false;
    size_t offset = 0;
  };

  std::vector<Rule> rules_;
  std::unique_ptr<RE2> combined_;
  std::unique_ptr<RE2> viable_tail_;
  bool exact_prefixes_ = true;
  std::vector<Literal> literals_;       // empty: no prefilter
  std::vector<uint16_t> rule_literal_;  // each rule's literal in literals_
  std::vector<uint16_t> by_byte_[256];  // literals whose rare byte this is
  bool scan_[256] = {};                 // some literal's rare byte
  // What the vector scan compares: a literal's rare byte and the one after it.
  // Each is a byte repeated 32 times, ready for a vector load: position p is a hit when
  // (text[p] | or0) == c0 and (text[p + 1] | or1) == c1 (or = 0x20 folds ASCII letters; a
  // one-byte literal has or1 = c1 = 0xff, which always holds).
  struct alignas(32) Probe {
    unsigned char c0[32], or0[32], c1[32], or1[32];
  };
  template <typename Scan>
  size_t scan_vector(std::string_view text, size_t from, size_t* i, size_t* best) const;
  size_t scan_sse2(std::string_view text, size_t from, size_t* i, size_t* best) const;
  size_t scan_avx2(std::string_view text, size_t from, size_t* i, size_t* best) const;
  std::vector<Probe> probes_;
  size_t max_offset_ = 0;
};

}  // namespace tidegate::dataplane::filters
