#include "model/mirror.h"

#include <nlohmann/json.hpp>

#include "model/object_reader.h"

namespace tidegate::model {

using nlohmann::json;

std::vector<std::string> validate(const std::vector<Mirror>& mirrors) {
  std::vector<std::string> problems;
  if (mirrors.size() > Mirror::kMaxPerRoute) problems.push_back("more than 16 mirrors");
  for (const auto& m : mirrors) {
    if (m.upstream.empty()) problems.push_back("mirror has no upstream");
    if (m.denominator == 0 || m.denominator > Mirror::kMaxDenominator) {
      problems.push_back("mirror fraction denominator " + std::to_string(m.denominator) +
                         " is not 1-1000000");
    } else if (m.numerator > m.denominator) {
      problems.push_back("mirror fraction " + std::to_string(m.numerator) + "/" +
                         std::to_string(m.denominator) + " is more than 1");
    }
  }
  return problems;
}

json to_json(const std::vector<Mirror>& mirrors) {
  json out = json::array();
  for (const auto& m : mirrors) {
    json j = {{"upstream", m.upstream}};
    if (m.numerator != m.denominator || m.denominator != 100) {
      j["numerator"] = m.numerator;
      j["denominator"] = m.denominator;
    }
    out.push_back(std::move(j));
  }
  return out;
}

std::vector<Mirror> mirrors_from_json(const json& j) {
  if (!j.is_array()) throw std::runtime_error("route policy \"mirrors\" must be an array");
  std::vector<Mirror> out;
  for (const auto& item : j) {
    detail::ObjectReader r(item, "route policy mirror");
    Mirror m;
    r.string("upstream", m.upstream);
    r.integer("numerator", m.numerator, UINT32_MAX);
    r.integer("denominator", m.denominator, UINT32_MAX);
    r.finish();
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace tidegate::model
