#include "model/conditions.h"

#include <set>
#include <stdexcept>

#include <re2/re2.h>
#include <nlohmann/json.hpp>

#include "model/model.h"
#include "model/object_reader.h"
#include "model/syntax.h"

namespace tidegate::model {

using detail::ObjectReader;
using detail::quote;
using nlohmann::json;

const char* to_string(ValueMatch m) {
  return m == ValueMatch::kRegex ? "RegularExpression" : "Exact";
}

std::optional<ValueMatch> value_match_from_string(std::string_view s) {
  if (s == "Exact") return ValueMatch::kExact;
  if (s == "RegularExpression") return ValueMatch::kRegex;
  return std::nullopt;
}

namespace {

constexpr size_t kMaxConditionValue = 4096;

bool is_upper_token(std::string_view s) {
  if (!is_token(s)) return false;
  for (char c : s) {
    if (c >= 'a' && c <= 'z') return false;
  }
  return true;
}

bool is_lower(std::string_view s) {
  for (char c : s) {
    if (c >= 'A' && c <= 'Z') return false;
  }
  return true;
}

void check_value(std::string_view what, std::string_view value, ValueMatch match,
                 std::vector<std::string>& problems) {
  if (value.size() > kMaxConditionValue) {
    problems.push_back(std::string(what) + ": value longer than " +
                       std::to_string(kMaxConditionValue) + " bytes");
    return;
  }
  if (match == ValueMatch::kRegex) {
    RE2::Options options;
    options.set_log_errors(false);
    RE2 re(std::string(value), options);
    if (!re.ok()) {
      problems.push_back(std::string(what) + ": invalid regex " + quote(value) + ": " + re.error());
    }
  } else if (!detail::is_field_value(value)) {
    problems.push_back(std::string(what) + ": value holds a control character");
  }
}

template <class Condition>
json conditions_json(const std::vector<Condition>& conditions) {
  json out = json::array();
  for (const auto& c : conditions) {
    json item{{"name", c.name}, {"value", c.value}};
    if (c.match != ValueMatch::kExact) item["match"] = to_string(c.match);
    out.push_back(std::move(item));
  }
  return out;
}

template <class Condition>
std::vector<Condition> conditions_from(const json& array, const char* what) {
  if (!array.is_array())
    throw std::runtime_error(std::string("route ") + what + " must be an array");
  std::vector<Condition> out;
  for (const auto& item : array) {
    Condition c;
    ObjectReader r(item, std::string("route ") + what + " condition");
    r.string("name", c.name);
    r.string("value", c.value);
    std::string match = "Exact";
    r.string("match", match);
    auto m = value_match_from_string(match);
    if (!m) r.fail("match", "must be Exact or RegularExpression");
    c.match = *m;
    r.finish();
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

// Every check here is about the route's method, headers, query or weighted backends:
// validate_route (model.cc) skips the call, and the context it would build, for a route without
// any of them. A check of anything else belongs there too.
void validate_conditions(const Route& r, const std::string& where,
                         std::vector<std::string>& problems) {
  if (!r.method.empty() && !is_upper_token(r.method)) {
    problems.push_back(where + ": method " + quote(r.method) + " is not an upper-case token");
  }
  if (r.headers.size() > kMaxHeaderConditions) {
    problems.push_back(where + ": more than " + std::to_string(kMaxHeaderConditions) +
                       " header conditions");
  }
  std::set<std::string> names;
  for (const auto& h : r.headers) {
    const std::string what = where + ": header condition " + quote(h.name);
    if (!is_token(h.name) || !is_lower(h.name)) {
      problems.push_back(what + ": the name is not a lower-case token");
    } else if (!names.insert(h.name).second) {
      problems.push_back(what + ": the name appears twice");
    }
    check_value(what, h.value, h.match, problems);
  }
  if (r.query.size() > kMaxQueryConditions) {
    problems.push_back(where + ": more than " + std::to_string(kMaxQueryConditions) +
                       " query conditions");
  }
  names.clear();
  for (const auto& q : r.query) {
    const std::string what = where + ": query condition " + quote(q.name);
    if (q.name.empty() || q.name.size() > 256 || !detail::is_visible(q.name) ||
        q.name.find_first_of("&=#") != std::string::npos) {
      problems.push_back(what + ": the name must be 1-256 visible characters without & = #");
    } else if (!names.insert(q.name).second) {
      problems.push_back(what + ": the name appears twice");
    }
    check_value(what, q.value, q.match, problems);
  }
  if (r.backends.size() > kMaxWeightedBackends) {
    problems.push_back(where + ": more than " + std::to_string(kMaxWeightedBackends) +
                       " weighted backends");
  }
  if (!r.backends.empty() && !r.upstream.empty()) {
    problems.push_back(where + ": a route with weighted backends has no single upstream");
  }
  for (const auto& b : r.backends) {
    if (b.weight > kMaxBackendWeight) {
      problems.push_back(where + ": backend weight " + std::to_string(b.weight) + " is above " +
                         std::to_string(kMaxBackendWeight));
    }
  }
}

void conditions_to_json(const Route& r, json& j) {
  if (!r.method.empty()) j["method"] = r.method;
  if (!r.headers.empty()) j["headers"] = conditions_json(r.headers);
  if (!r.query.empty()) j["query"] = conditions_json(r.query);
  if (!r.backends.empty()) {
    json backends = json::array();
    for (const auto& b : r.backends) {
      backends.push_back(json{{"upstream", b.upstream}, {"weight", b.weight}});
    }
    j["backends"] = std::move(backends);
  }
}

void conditions_from_json(const json& j, Route& r) {
  r.method = j.value("method", std::string());
  if (auto it = j.find("headers"); it != j.end()) {
    r.headers = conditions_from<HeaderCondition>(*it, "headers");
  }
  if (auto it = j.find("query"); it != j.end()) {
    r.query = conditions_from<QueryCondition>(*it, "query");
  }
  if (auto it = j.find("backends"); it != j.end()) {
    if (!it->is_array()) throw std::runtime_error("route backends must be an array");
    for (const auto& item : *it) {
      WeightedBackend b;
      ObjectReader br(item, "route backend");
      br.string("upstream", b.upstream);
      br.integer("weight", b.weight, kMaxBackendWeight);
      br.finish();
      r.backends.push_back(std::move(b));
    }
  }
}

}  // namespace tidegate::model
