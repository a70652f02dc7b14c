#include "annotations/substitution.h"

#include <algorithm>
#include <exception>

#include <yaml-cpp/yaml.h>

#include "model/model.h"

namespace tidegate::controller::annotations {
namespace {

std::string quote(std::string_view s) {
  std::string out = "\"";
  out.append(s.substr(0, 80));
  if (s.size() > 80) out += "...";
  return out + "\"";
}

const char* node_type(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar:
      return "a scalar";
    default:
      return "null";
  }
}

// The rule at `index`, or the reason its shape is wrong.
std::optional<std::string> read_rule(const YAML::Node& n, substitution::Rule* rule) {
  if (!n.IsMap())
    return std::string("expected a mapping {match, replace, flags}, got ") + node_type(n);
  bool has_match = false, has_replace = false;
  for (const auto& kv : n) {
    if (!kv.first.IsScalar()) return std::string("keys must be strings");
    const std::string& key = kv.first.Scalar();
    const YAML::Node& value = kv.second;
    if (key != "match" && key != "replace" && key != "flags") {
      return "unknown field " + quote(key) + " (a rule has match, replace and flags)";
    }
    std::string text;
    if (value.IsScalar()) {
      text = value.Scalar();
    } else if (!value.IsNull()) {
      return key + ": expected a string, got " + node_type(value);
    }
    if (key == "match") {
      rule->match = std::move(text);
      has_match = !rule->match.empty();
    } else if (key == "replace") {
      rule->replace = std::move(text);  // empty or null: what matched is deleted
      has_replace = true;
    } else {
      rule->flags = std::move(text);
    }
  }
  if (!has_match) return std::string("match: required field missing");
  if (!has_replace) return std::string("replace: required field missing");
  return std::nullopt;
}

void parse_rules(const std::string& text, SubstitutionAnnotations& out) {
  const std::string name(kSubstitutionsAnnotation);
  if (trim(text).empty()) return;
  YAML::Node list;
  try {
    list = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    std::string where;
    if (!e.mark.is_null()) {
      where = " at line " + std::to_string(e.mark.line + 1) + ", column " +
              std::to_string(e.mark.column + 1);
    }
    out.errors.push_back(name + ": invalid YAML" + where + ": " + e.msg + "; no rules from it");
    return;
  }
  if (list.IsNull()) return;
  if (!list.IsSequence()) {
    out.errors.push_back(name + ": expected a YAML list of {match, replace, flags}, got " +
                         node_type(list) + "; no rules from it");
    return;
  }
  for (size_t i = 0; i < list.size(); ++i) {
    substitution::Rule rule;
    if (auto problem = read_rule(list[i], &rule)) {
      out.errors.push_back(name + ": rule " + std::to_string(i) + ": " + *problem +
                           "; rule dropped");
      continue;
    }
    out.rules.push_back({i, std::move(rule)});
  }
}

void parse_types(const std::string& text, SubstitutionAnnotations& out) {
  const std::string name(kSubstitutionTypesAnnotation);
  std::vector<std::string> types;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find_first_of(", \t\r\n", pos);
    if (end == std::string::npos) end = text.size();
    std::string type = text.substr(pos, end - pos);
    pos = end + 1;
    if (type.empty()) continue;
    std::transform(type.begin(), type.end(), type.begin(), [](char c) {
      return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    });
    if (!model::is_valid_mime_type(type)) {
      out.errors.push_back(name + ": " + quote(type) +
                           " is not a MIME type (type/subtype, no parameters); skipped");
      continue;
    }
    types.push_back(std::move(type));
  }
  if (types.empty()) {
    out.errors.push_back(name + ": no valid MIME type in " + quote(text) + "; using " +
                         std::string(model::kDefaultSubstitutionType));
    return;
  }
  std::sort(types.begin(), types.end());
  types.erase(std::unique(types.begin(), types.end()), types.end());
  out.mime_types = std::move(types);
}

void parse_max_buffer(const std::string& text, SubstitutionAnnotations& out) {
  auto size = parse_size(trim(text));
  if (!size || *size < model::kMinSubstitutionMaxBuffer ||
      *size > model::kMaxSubstitutionMaxBuffer) {
    out.errors.push_back(std::string(kSubstitutionMaxBufferAnnotation) + ": " + quote(text) +
                         " is not a size between 1k and 16m (such as 64k or 1m); using 64k");
    return;
  }
  out.max_buffer = *size;
}

}  // namespace

std::string_view trim(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const size_t last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

std::optional<uint64_t> parse_size(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 12) return std::nullopt;
  uint64_t n = 0;
  for (size_t i = 0; i < digits; ++i) n = n * 10 + static_cast<uint64_t>(text[i] - '0');
  std::string_view unit = text.substr(digits);
  uint64_t scale = 1;
  if (unit.empty()) {
    scale = 1;
  } else if (unit == "k" || unit == "K" || unit == "Ki") {
    scale = 1024;
  } else if (unit == "m" || unit == "M" || unit == "Mi") {
    scale = 1024 * 1024;
  } else {
    return std::nullopt;
  }
  return n * scale;  // at most 12 digits times 2^20: no overflow
}

bool has_substitution_annotations(const std::map<std::string, std::string>& annotations) {
  // The four names share this prefix, so they sit together in the map's order.
  static const std::string kPrefix = "tidegate.io/substitution";
  for (auto it = annotations.lower_bound(kPrefix);
       it != annotations.end() && it->first.starts_with(kPrefix); ++it) {
    const std::string_view key = it->first;
    if (key == kSubstitutionsAnnotation || key == kSubstitutionTypesAnnotation ||
        key == kSubstitutionMaxBufferAnnotation || key == kSubstitutionRuleSetAnnotation) {
      return true;
    }
  }
  return false;
}

SubstitutionAnnotations parse_substitution_annotations(
    const std::map<std::string, std::string>& annotations) {
  SubstitutionAnnotations out;
  out.mime_types = {std::string(model::kDefaultSubstitutionType)};
  out.max_buffer = model::kDefaultSubstitutionMaxBuffer;
  auto find = [&](std::string_view name) -> const std::string* {
    auto it = annotations.find(std::string(name));
    if (it == annotations.end()) return nullptr;
    out.present = true;
    return &it->second;
  };
  if (const std::string* text = find(kSubstitutionRuleSetAnnotation)) {
    out.rule_set = std::string(trim(*text));
    if (out.rule_set.empty()) {
      out.errors.push_back(std::string(kSubstitutionRuleSetAnnotation) + ": empty name; ignored");
    }
  }
  if (const std::string* text = find(kSubstitutionsAnnotation)) {
    try {
      parse_rules(*text, out);
    } catch (const std::exception& e) {
      // yaml-cpp throws from accessors on surprises; one annotation must not take the rest down.
      out.rules.clear();
      out.errors.push_back(std::string(kSubstitutionsAnnotation) + ": " + e.what() +
                           "; no rules from it");
    }
  }
  if (const std::string* text = find(kSubstitutionTypesAnnotation)) parse_types(*text, out);
  if (const std::string* text = find(kSubstitutionMaxBufferAnnotation)) {
    parse_max_buffer(*text, out);
  }
  return out;
}

}  // namespace tidegate::controller::annotations
