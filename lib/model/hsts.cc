#include "model/hsts.h"

#include <nlohmann/json.hpp>

#include "model/object_reader.h"

namespace tidegate::model {

using nlohmann::json;

std::string hsts_value(const Hsts& h) {
  std::string v = "max-age=" + std::to_string(h.max_age_seconds);
  if (h.include_subdomains) v += "; includeSubDomains";
  if (h.preload) v += "; preload";
  return v;
}

std::vector<std::string> validate(const Hsts& h) {
  std::vector<std::string> problems;
  if (h.max_age_seconds < 0 || h.max_age_seconds > Hsts::kMaxMaxAgeSeconds) {
    problems.push_back("hsts max_age " + std::to_string(h.max_age_seconds) + " is out of range 0-" +
                       std::to_string(Hsts::kMaxMaxAgeSeconds));
  }
  return problems;
}

json to_json(const Hsts& h) {
  const Hsts dh;
  json hj = json::object();
  if (h.max_age_seconds != dh.max_age_seconds) hj["max_age_seconds"] = h.max_age_seconds;
  if (h.include_subdomains != dh.include_subdomains) {
    hj["include_subdomains"] = h.include_subdomains;
  }
  if (h.preload != dh.preload) hj["preload"] = h.preload;
  return hj;
}

Hsts hsts_from_json(const json& j) {
  Hsts h;
  detail::ObjectReader hr(j, "route policy hsts");
  hr.integer("max_age_seconds", h.max_age_seconds, static_cast<uint64_t>(INT64_MAX));
  hr.boolean("include_subdomains", h.include_subdomains);
  hr.boolean("preload", h.preload);
  hr.finish();
  return h;
}

}  // namespace tidegate::model
