#include "model/canary.h"

#include <re2/re2.h>

#include <nlohmann/json.hpp>

#include "model/object_reader.h"
#include "model/syntax.h"

namespace tidegate::model {

using detail::quote;
using nlohmann::json;

std::optional<std::string> check_header_pattern(std::string_view pattern) {
  if (pattern.empty()) return "is empty";
  if (pattern.size() > Canary::kMaxHeaderPattern) return "is longer than 1024 bytes";
  RE2::Options options;
  options.set_log_errors(false);
  RE2 re(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!re.ok()) return "does not compile: " + re.error();
  return std::nullopt;
}

std::vector<std::string> validate(const Canary& c, bool require_upstream) {
  std::vector<std::string> problems;
  if (require_upstream && c.upstream.empty()) problems.push_back("canary has no upstream");
  if (c.weight_total < 1 || c.weight_total > Canary::kMaxWeightTotal) {
    problems.push_back("canary weight total " + std::to_string(c.weight_total) +
                       " is out of range 1-" + std::to_string(Canary::kMaxWeightTotal));
  } else if (c.weight > c.weight_total) {
    problems.push_back("canary weight " + std::to_string(c.weight) + " exceeds the total " +
                       std::to_string(c.weight_total));
  }
  if (!c.header.empty() && !is_token(c.header)) {
    problems.push_back("canary header " + quote(c.header) + " is not a token");
  }
  if (!c.header_value.empty()) {
    if (c.header.empty()) problems.push_back("canary header value without a header");
    if (!detail::is_field_value(c.header_value) || c.header_value.size() > 4096) {
      problems.push_back("canary header value may not hold control characters");
    }
  }
  if (!c.header_pattern.empty()) {
    if (c.header.empty()) problems.push_back("canary header pattern without a header");
    if (auto why = check_header_pattern(c.header_pattern)) {
      problems.push_back("canary header pattern " + *why);
    }
  }
  if (!c.cookie.empty() && !is_token(c.cookie)) {
    problems.push_back("canary cookie " + quote(c.cookie) + " is not a token");
  }
  return problems;
}

json to_json(const Canary& c) {
  const Canary d;
  json j = json::object();
  if (!c.upstream.empty()) j["upstream"] = c.upstream;
  if (c.weight != d.weight) j["weight"] = c.weight;
  if (c.weight_total != d.weight_total) j["weight_total"] = c.weight_total;
  if (!c.header.empty()) j["header"] = c.header;
  if (!c.header_value.empty()) j["header_value"] = c.header_value;
  if (!c.header_pattern.empty()) j["header_pattern"] = c.header_pattern;
  if (!c.cookie.empty()) j["cookie"] = c.cookie;
  return j;
}

Canary canary_from_json(const json& j) {
  Canary c;
  detail::ObjectReader r(j, "canary");
  r.string("upstream", c.upstream);
  r.integer("weight", c.weight, UINT32_MAX);
  r.integer("weight_total", c.weight_total, UINT32_MAX);
  r.string("header", c.header);
  r.string("header_value", c.header_value);
  r.string("header_pattern", c.header_pattern);
  r.string("cookie", c.cookie);
  r.finish();
  return c;
}

}  // namespace tidegate::model
