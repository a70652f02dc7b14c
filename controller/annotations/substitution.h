#pragma once
// The tidegate.io/substitution* annotations of an Ingress (body substitution, issue #5): parsing
// and shape checks. Pure; the translator resolves the SubstitutionRuleSet, validates the rules
// (lib/substitution) and reports everything as diagnostics. docs/translation.md lists the
// annotations, their defaults and their errors.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "substitution/rule.h"

namespace tidegate::controller::annotations {

// A YAML list of {match, replace, flags}: the Ingress's own rules, applied to every path of it.
inline constexpr std::string_view kSubstitutionsAnnotation = "tidegate.io/substitutions";
// Response MIME types to process, separated by commas or spaces (default text/html).
inline constexpr std::string_view kSubstitutionTypesAnnotation = "tidegate.io/substitution-types";
// Most bytes held back per response: "65536", "64k", "64Ki", "1m", "1Mi" (binary units).
inline constexpr std::string_view kSubstitutionMaxBufferAnnotation =
    "tidegate.io/substitution-max-buffer";
// The name of a SubstitutionRuleSet in the Ingress's namespace; its rules come first.
inline constexpr std::string_view kSubstitutionRuleSetAnnotation =
    "tidegate.io/substitution-rule-set";

// One rule of the annotation, with its position in the annotation's list (for messages).
struct IndexedRule {
  size_t index = 0;
  substitution::Rule rule;
  bool operator==(const IndexedRule&) const = default;
};

struct SubstitutionAnnotations {
  bool present = false;  // any of the four annotations is set
  // Rules of the annotation whose shape is right; not yet checked as regexes.
  std::vector<IndexedRule> rules;
  std::string rule_set;  // the SubstitutionRuleSet's name; empty when none is named
  // Lower-case, sorted, unique; {"text/html"} when the annotation is absent or has no valid type.
  std::vector<std::string> mime_types;
  uint64_t max_buffer = 0;  // model::kDefaultSubstitutionMaxBuffer when absent or invalid
  // One message per problem, each starting with the annotation's name; whatever it concerns is
  // left out (a rule) or replaced by the default (types, buffer size).
  std::vector<std::string> errors;
  bool operator==(const SubstitutionAnnotations&) const = default;
};

SubstitutionAnnotations parse_substitution_annotations(
    const std::map<std::string, std::string>& annotations);
// Whether any of the four annotations is set: parse_substitution_annotations(a).present, without
// building anything (most Ingresses have none).
bool has_substitution_annotations(const std::map<std::string, std::string>& annotations);

// "65536", "64k", "64K", "64Ki", "1m", "1M", "1Mi" -> bytes (k = 1024); nullopt otherwise or on
// overflow. Bounds are the caller's.
std::optional<uint64_t> parse_size(std::string_view text);

// `text` without leading and trailing spaces, tabs and line breaks.
std::string_view trim(std::string_view text);

}  // namespace tidegate::controller::annotations
