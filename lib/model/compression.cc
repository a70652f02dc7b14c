#include "model/compression.h"

#include <algorithm>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace tidegate::model {

using nlohmann::json;

const std::vector<std::string>& default_compression_types() {
  static const std::vector<std::string> kTypes = {
      "text/html",
      "application/atom+xml",
      "application/javascript",
      "application/x-javascript",
      "application/json",
      "application/rss+xml",
      "application/vnd.ms-fontobject",
      "application/x-font-ttf",
      "application/x-web-app-manifest+json",
      "application/xhtml+xml",
      "application/xml",
      "font/opentype",
      "image/svg+xml",
      "image/x-icon",
      "text/css",
      "text/javascript",
      "text/plain",
      "text/x-component",
  };
  return kTypes;
}

std::optional<std::string> check_media_type(std::string_view t) {
  auto token = [](std::string_view s) {
    return !s.empty() && s.size() <= 127 && std::all_of(s.begin(), s.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' ||
             c == '_';
    });
  };
  const size_t slash = t.find('/');
  if (slash == std::string_view::npos || !token(t.substr(0, slash)) ||
      !token(t.substr(slash + 1))) {
    return "must be a lower-case media type such as \"text/css\"";
  }
  return std::nullopt;
}

const char* to_string(BreachMitigation m) {
  switch (m) {
    case BreachMitigation::kNoCredentials:
      return "no-credentials";
    case BreachMitigation::kPadding:
      return "padding";
    case BreachMitigation::kOff:
      break;
  }
  return "off";
}

std::optional<BreachMitigation> breach_mitigation_from_string(std::string_view s) {
  if (s == "off") return BreachMitigation::kOff;
  if (s == "no-credentials") return BreachMitigation::kNoCredentials;
  if (s == "padding") return BreachMitigation::kPadding;
  return std::nullopt;
}

std::vector<std::string> validate(const Compression& c) {
  std::vector<std::string> problems;
  if (c.min_length > Compression::kMaxMinLength) {
    problems.push_back("compression min_length is out of range");
  }
  if (c.types.size() > Compression::kMaxTypes) problems.push_back("too many compression types");
  for (const auto& t : c.types) {
    if (auto why = check_media_type(t))
      problems.push_back("compression type \"" + t + "\" " + *why);
  }
  return problems;
}

json to_json(const Compression& c) {
  json j = json::object();
  if (c.min_length != Compression::kDefaultMinLength) j["min_length"] = c.min_length;
  if (!c.types.empty()) j["types"] = c.types;
  if (c.breach != BreachMitigation::kOff) j["breach"] = to_string(c.breach);
  return j;
}

Compression compression_from_json(const json& j) {
  if (!j.is_object()) throw std::runtime_error("route policy compression must be an object");
  Compression c;
  for (const auto& [key, v] : j.items()) {
    if (key == "min_length") {
      if (!v.is_number_unsigned() || v.get<uint64_t>() > Compression::kMaxMinLength) {
        throw std::runtime_error("compression \"min_length\" must be 0.." +
                                 std::to_string(Compression::kMaxMinLength));
      }
      c.min_length = v.get<uint32_t>();
    } else if (key == "types") {
      if (!v.is_array()) throw std::runtime_error("compression \"types\" must be an array");
      for (const auto& t : v) {
        if (!t.is_string()) throw std::runtime_error("compression \"types\" must be strings");
        c.types.push_back(t.get<std::string>());
      }
    } else if (key == "breach") {
      auto m = v.is_string() ? breach_mitigation_from_string(v.get<std::string>()) : std::nullopt;
      if (!m)
        throw std::runtime_error("compression \"breach\" must be off, no-credentials or padding");
      c.breach = *m;
    } else {
      throw std::runtime_error("compression: unknown field \"" + key + "\"");
    }
  }
  return c;
}

}  // namespace tidegate::model
