#include "substitution/rule.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "substitution/prefix_regex.h"

namespace tidegate::substitution {
namespace {

// The joined patterns grow with the number of rules; give their DFAs room so that RE2 does not
// fall back to its slower NFA on large rule sets.
constexpr int64_t kJoinedMaxMem = 64 << 20;

// Whether `re` matches the empty string anywhere. Every assertion RE2 has (^ $ \A \z \b \B, with
// or without (?m)) looks at most one byte either side, so trying each combination of "nothing,
// a word byte, a non-word byte, a newline" before and after is exhaustive.
bool can_match_empty(const RE2& re) {
  static constexpr std::string_view kSides[] = {"", "a", " ", "\n"};
  for (std::string_view before : kSides) {
    for (std::string_view after : kSides) {
      const std::string text = std::string(before) + std::string(after);
      if (re.Match(text, before.size(), before.size(), RE2::ANCHOR_BOTH, nullptr, 0)) return true;
    }
  }
  return false;
}

std::string describe_regex_error(const RE2& re, std::string_view pattern) {
  std::string message = "invalid regex: " + re.error();
  if (re.error_code() == RE2::ErrorBadPerlOp || pattern.find("(?=") != std::string_view::npos ||
      pattern.find("(?!") != std::string_view::npos ||
      pattern.find("(?<=") != std::string_view::npos ||
      pattern.find("(?<!") != std::string_view::npos) {
    message += " (lookahead and lookbehind are not supported: RE2 guarantees linear time)";
  } else if (re.error_code() == RE2::ErrorBadEscape) {
    for (size_t i = 0; i + 1 < pattern.size(); ++i) {
      if (pattern[i] == '\\' && pattern[i + 1] >= '1' && pattern[i + 1] <= '9') {
        message += " (backreferences such as \\1 are not supported: RE2 guarantees linear time)";
        break;
      }
      if (pattern[i] == '\\') ++i;
    }
  }
  return message;
}

// Splits a replacement into literal text and group references.
std::optional<std::string> parse_replacement(std::string_view text, int groups,
                                             std::vector<Piece>* pieces, int* max_group) {
  std::string literal;
  auto flush = [&] {
    if (!literal.empty()) pieces->push_back({std::move(literal), -1});
    literal.clear();
  };
  *max_group = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (c != '$' || (next != '$' && next != '&' && !(next >= '1' && next <= '9'))) {
      // A '$' before anything else is taken literally, as JavaScript's String.replace does.
      literal += c;
      continue;
    }
    ++i;
    if (next == '$') {
      literal += '$';
      continue;
    }
    flush();
    const int group = next == '&' ? 0 : next - '0';
    if (group > groups) {
      return "replacement uses $" + std::string(1, next) + " but the pattern has " +
             std::to_string(groups) + " capture group" + (groups == 1 ? "" : "s");
    }
    *max_group = std::max(*max_group, group);
    pieces->push_back({"", group});
  }
  flush();
  return std::nullopt;
}

std::optional<std::string> compile_rule(const Rule& rule, CompiledRule* out) {
  if (!rule.flags.empty() && rule.flags != "i") {
    return "unknown flags \"" + rule.flags + "\" (the only flag is \"i\")";
  }
  if (rule.match.empty()) return "match is empty";
  if (rule.match.size() > kMaxPatternBytes) {
    return "match is longer than " + std::to_string(kMaxPatternBytes) + " bytes";
  }
  if (rule.replace.size() > kMaxReplacementBytes) {
    return "replace is longer than " + std::to_string(kMaxReplacementBytes) + " bytes";
  }
  auto re = std::make_unique<RE2>(rule.match, rule_options(rule.flags != "i"));
  if (!re->ok()) return describe_regex_error(*re, rule.match);
  if (can_match_empty(*re)) {
    return "match can match the empty string (as a*, x? or \\b alone do); a rule must match at "
           "least one byte";
  }
  out->replacement.clear();
  if (auto error = parse_replacement(rule.replace, re->NumberOfCapturingGroups(), &out->replacement,
                                     &out->max_group)) {
    return error;
  }
  out->re = std::move(re);
  return std::nullopt;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < 80; ++i) out += s[i];
  if (s.size() > 80) out += "...";
  return out + "\"";
}

}  // namespace

RE2::Options rule_options(bool case_sensitive) {
  RE2::Options o;
  o.set_log_errors(false);
  o.set_longest_match(true);
  o.set_case_sensitive(case_sensitive);
  return o;
}

// The joined patterns keep capturing groups (never read: only the whole match is asked for, which
// RE2 answers with its DFA). Each rule sits in its own group because RE2 20220601 (Debian 12)
// merges character classes across '|' wrongly (google/re2#467: `[ab]|[bB]` does not match
// "B"); groups are never merged, so one rule cannot change what another matches.
RE2::Options joined_options() {
  RE2::Options o = rule_options(true);
  o.set_max_mem(kJoinedMaxMem);
  return o;
}

std::string describe_rule(size_t index, const Rule& rule) {
  return "rule " + std::to_string(index) + " (match " + quote(rule.match) + ")";
}

std::optional<std::string> validate_rule(const Rule& rule) {
  // Through compile_rules(), so that the checks made while joining (a pattern the engine cannot
  // embed) count too.
  CompiledRules compiled = compile_rules({rule});
  if (compiled.errors.empty()) return std::nullopt;
  return std::move(compiled.errors.front().reason);
}

CompiledRules compile_rules(const std::vector<Rule>& rules) {
  CompiledRules result;
  auto reject = [&](size_t i, std::string reason) {
    result.errors.push_back({i, describe_rule(i, rules[i]) + ": " + reason, reason});
  };
  for (size_t i = 0; i < rules.size(); ++i) {
    const Rule& r = rules[i];
    if (i >= kMaxRules) {
      reject(i, "more than " + std::to_string(kMaxRules) + " rules");
      continue;
    }
    CompiledRule compiled;
    compiled.source_index = i;
    if (auto error = compile_rule(r, &compiled)) {
      reject(i, *error);
      continue;
    }
    const std::string open = r.flags == "i" ? "((?i:" : "((?:";
    // Rules are embedded rewritten (groups non-capturing, \Q...\E expanded): an unclosed \Q or
    // a group name used by two rules would otherwise break the joined pattern.
    const std::optional<std::string> embedded = embeddable_pattern(r.match);
    if (!embedded || !RE2(*embedded, rule_options(r.flags != "i")).ok()) {
      reject(i, "uses syntax the streaming engine does not support");
      continue;
    }
    compiled.combined_part = open + *embedded + "))";

    // The prefix closure must compile on its own; when it does not (an unusual pattern or a
    // nesting RE2 refuses), fall back to "anything may still grow into a match".
    std::optional<std::string> pref = prefix_pattern(r.match);
    if (pref) {
      RE2 check(open + *pref + "))", rule_options(true));
      if (!check.ok()) pref.reset();
    }
    if (!pref) {
      compiled.exact_prefix = false;
      pref = "\\C*";
    }
    compiled.viable_part = open + *pref + "))";
    result.rules.push_back(std::move(compiled));
  }
  join_rules(result.rules, &result);
  return result;
}

void join_rules(const std::vector<CompiledRule>& rules, CompiledRules* out) {
  out->combined.clear();
  out->viable.clear();
  out->exact_prefixes = true;
  for (const CompiledRule& r : rules) {
    if (!out->combined.empty()) {
      out->combined += '|';
      out->viable += '|';
    }
    out->combined += r.combined_part;
    out->viable += r.viable_part;
    out->exact_prefixes = out->exact_prefixes && r.exact_prefix;
  }
}

std::vector<RuleError> validate_rules(const std::vector<Rule>& rules) {
  CompiledRules compiled = compile_rules(rules);
  if (!compiled.rules.empty()) {
    RE2 combined(compiled.combined, joined_options());
    RE2 viable("(?:" + compiled.viable + ")\\z", joined_options());
    if (!combined.ok() || !viable.ok()) {
      // Each rule compiled alone, so only the size of the union can fail here.
      std::string reason =
          "the rules together are too large to compile: " + combined.error() + viable.error();
      compiled.errors.push_back({0, reason, reason});
    }
  }
  return std::move(compiled.errors);
}

}  // namespace tidegate::substitution
