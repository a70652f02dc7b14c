#pragma once
// Fuzz target: the per-Ingress annotation parser (controller/translate/annotations.h).
//
// Input: the first byte holds the options (bit 0: --nginx-annotations; bit 1: the Ingress has a
// regex path with two capture groups, so rewrite-target's "$N" can be checked), then lines
// "name=value". A name without '/' gets the "tidegate.io/" prefix; a name that is a number picks
// the annotation of that index in supported_annotations() (so mutations reach every annotation).
//
// Invariants:
//   - parse_annotations never throws, and gives the same policy and diagnostics when run twice;
//   - the policy passes model::validate (a canary's without its upstream);
//   - every diagnostic is about this Ingress, and every error names an annotation of the input
//     ("annotation <key>: ...");
//   - an invalid value is ignored, so its default applies: dropping every annotation that was
//     reported invalid leaves the policy as it was (except whitelist-source-range, whose invalid
//     list denies every client, and the canary annotations, which decide whether there is a
//     canary at all: both documented in docs/annotations.md);
//   - parse_nginx_duration and parse_nginx_size never throw on any value (with or without
//     spaces around it); a duration they accept is not negative.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common.h"
#include "model/policy.h"
#include "translate/annotations.h"

namespace tidegate::fuzz {

namespace detail {

inline std::map<std::string, std::string> annotations_from(std::string_view text) {
  using controller::translate::kAnnotationPrefix;
  const auto names = controller::translate::supported_annotations();
  std::map<std::string, std::string> out;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    auto eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    std::string name(line.substr(0, eq));
    if (name.find_first_not_of("0123456789") == std::string::npos && name.size() < 6) {
      name = std::string(names[std::stoul(name) % names.size()]);
    }
    if (name.find('/') == std::string::npos) name = std::string(kAnnotationPrefix) + name;
    out[name] = std::string(line.substr(eq + 1));
  }
  return out;
}

inline bool is_canary_key(std::string_view key) {
  return key.find("/canary") != std::string_view::npos;
}

}  // namespace detail

inline std::string run_annotations(const uint8_t* data, size_t size) {
  namespace tr = controller::translate;
  if (size == 0) return {};
  const uint8_t flags = data[0];
  const auto annotations = detail::annotations_from(as_text(data + 1, size - 1));
  tr::AnnotationOptions options;
  options.nginx_aliases = (flags & 1) != 0;
  tr::AnnotationContext context;
  context.ingress_namespace = "default";
  context.ingress_name = "fuzz";
  context.paths = {{"/", false}};
  if (flags & 2) context.paths.push_back({"/api(/|$)(.*)", true});
  const std::string object = "Ingress default/fuzz";

  const tr::AnnotationResult first = tr::parse_annotations(annotations, context, options);
  const tr::AnnotationResult second = tr::parse_annotations(annotations, context, options);
  TIDEGATE_FUZZ_CHECK(first.policy == second.policy, "policy differs between two runs");
  TIDEGATE_FUZZ_CHECK(first.diagnostics == second.diagnostics, "diagnostics differ");

  for (const auto& problem : model::validate(*first.policy.upstream)) {
    TIDEGATE_FUZZ_CHECK(false, "upstream policy invalid: " << problem);
  }
  for (const auto& problem : model::validate(*first.policy.route)) {
    TIDEGATE_FUZZ_CHECK(false, "route policy invalid: " << problem);
  }
  if (first.policy.canary) {
    for (const auto& problem : model::validate(*first.policy.canary, false)) {
      TIDEGATE_FUZZ_CHECK(false, "canary invalid: " << problem);
    }
  }

  std::map<std::string, std::string> valid_only = annotations;
  bool exception = false;
  for (const auto& d : first.diagnostics) {
    TIDEGATE_FUZZ_CHECK(d.object == object, "diagnostic about " << escape(d.object));
    TIDEGATE_FUZZ_CHECK(!d.message.empty(), "empty diagnostic");
    if (d.severity != tr::Severity::kError) continue;
    const std::string_view message = d.message;
    constexpr std::string_view kLead = "annotation ";
    TIDEGATE_FUZZ_CHECK(message.substr(0, kLead.size()) == kLead,
                        "error without an annotation: " << escape(message));
    const auto rest = message.substr(kLead.size());
    const auto key = rest.substr(0, rest.find(':'));
    TIDEGATE_FUZZ_CHECK(annotations.contains(std::string(key)),
                        "error names " << escape(key) << ", not in the input");
    if (key.ends_with("whitelist-source-range") || detail::is_canary_key(key)) exception = true;
    valid_only.erase(std::string(key));
  }
  if (!exception && valid_only.size() != annotations.size()) {
    const tr::AnnotationResult without = tr::parse_annotations(valid_only, context, options);
    TIDEGATE_FUZZ_CHECK(without.policy == first.policy, "an invalid annotation changed the policy");
  }

  for (const auto& [key, value] : annotations) {
    const std::string spaced = " " + value + "\t";
    if (auto d = tr::parse_nginx_duration(value)) {
      TIDEGATE_FUZZ_CHECK(d->count() >= 0, "negative duration from " << escape(value));
    }
    (void)tr::parse_nginx_size(value);
    (void)tr::parse_nginx_duration(spaced);
    (void)tr::parse_nginx_size(spaced);
  }
  return {};
}

}  // namespace tidegate::fuzz
