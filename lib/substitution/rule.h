#pragma once
// Substitution rules (issue #5): what a rule is, and whether it is acceptable.
//
// Shared by the controller (which drops invalid rules from annotations and SubstitutionRuleSets
// with a diagnostic), model::validate, and the data plane's engine
// (dataplane/filters/substitution/), so that the three can never disagree about which rules are
// valid: the engine compiles rules with compile_rules() below and nothing else. No I/O.
// Semantics and the messages: docs/substitutions.md.

#include <re2/re2.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tidegate::substitution {

// One rule as written in the annotation or the SubstitutionRuleSet resource.
struct Rule {
  std::string match;    // RE2 syntax
  std::string replace;  // text with $& (whole match), $1..$9 (groups), $$ (a dollar)
  std::string flags;    // "" or "i" (case-insensitive)
  bool operator==(const Rule&) const = default;
};

// Limits on a rule list; beyond them rules are rejected rather than slowing every response.
inline constexpr size_t kMaxRules = 64;
inline constexpr size_t kMaxPatternBytes = 4096;
inline constexpr size_t kMaxReplacementBytes = 16384;

// Why the rule at `index` (its position in the list) was rejected. `message` names the rule:
// `rule 1 (match "(a"): invalid regex: missing ): (a`; `reason` is the part after the colon.
struct RuleError {
  size_t index = 0;
  std::string message;
  std::string reason;
};

// `rule <index> (match "<pattern, at most 80 bytes>")`.
std::string describe_rule(size_t index, const Rule& rule);

// Checks one rule on its own; returns the reason it would be rejected, or nullopt when valid.
// A rule valid here is accepted by compile_rules() unless the list is too long or, together,
// too large for RE2 (validate_rules() checks those too).
std::optional<std::string> validate_rule(const Rule& rule);

// Every problem of a list, in order: each invalid rule, rules beyond kMaxRules, and a union of
// the valid rules too large to compile (index 0 then). Empty when compile_rules() would keep
// every rule and the engine's joined patterns compile.
std::vector<RuleError> validate_rules(const std::vector<Rule>& rules);

// ---- For the engine ----

// A piece of a replacement: literal text, or a group (0 is the whole match).
struct Piece {
  std::string literal;
  int group = -1;  // -1: literal
  bool operator==(const Piece&) const = default;
};

struct CompiledRule {
  size_t source_index = 0;  // index in the list given to compile_rules()
  // Longest-match, the rule's own flags. Shared (RE2 is thread-safe and immutable once built), so
  // that a rule set compiled from a subset of these rules reuses them.
  std::shared_ptr<const RE2> re;
  std::vector<Piece> replacement;
  int max_group = 0;  // highest $n used; 0 means no capture groups are computed
  // This rule's alternative in CompiledRules::combined and in CompiledRules::viable (each in its
  // own capturing group), so that the joined patterns of any subset of the rules can be built
  // again without compiling each rule anew.
  std::string combined_part;
  std::string viable_part;
  bool exact_prefix = true;  // false when viable_part is "anything may still grow" (\C*)
};

// RE2 options of a single rule: longest match, no error logging.
RE2::Options rule_options(bool case_sensitive);
// Options of the joined patterns, with room for their DFAs.
RE2::Options joined_options();

struct CompiledRules {
  std::vector<CompiledRule> rules;  // the valid rules, in their original order
  std::vector<RuleError> errors;    // one per rejected rule, in order
  // Every valid rule in its own capturing group, joined by '|' (leftmost-longest search).
  std::string combined;
  // The union of the valid rules' prefix closures (prefix_regex.h), each in its own group; the
  // engine appends \z. Empty when `rules` is empty.
  std::string viable;
  // False when some rule's prefix closure could not be derived (it is "\C*" then).
  bool exact_prefixes = true;
};

// Compiles each rule and builds the joined pattern texts. Invalid rules and those beyond
// kMaxRules are left out and reported; the joined patterns themselves are not compiled here.
CompiledRules compile_rules(const std::vector<Rule>& rules);

// The joined pattern texts of `rules` (valid rules from compile_rules(), any subset, in order):
// sets `combined`, `viable` and `exact_prefixes` of *out from the rules' parts.
void join_rules(const std::vector<CompiledRule>& rules, CompiledRules* out);

}  // namespace tidegate::substitution
