#include "model/sendfile.h"

#include <algorithm>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "model/object_reader.h"

namespace tidegate::model {

using nlohmann::json;

namespace {

// Visible ASCII without space, quotes or backslash: what a path written in YAML and later matched
// byte for byte may hold.
bool is_path_text(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return c > ' ' && c < 0x7f && c != '"' && c != '\\'; });
}

}  // namespace

std::optional<std::string> check_sendfile_directory(std::string_view p) {
  if (p.empty() || p.front() != '/') return "must be an absolute path";
  if (p.size() > Sendfile::kMaxPathBytes) return "is longer than 1024 bytes";
  if (!is_path_text(p)) return "must be printable ASCII without spaces, quotes or backslashes";
  if (p == "/") return "must not be the root directory";
  // Kernel and credential trees: never served, whatever the operator's roots say.
  for (std::string_view forbidden :
       {"/proc", "/sys", "/dev", "/run/secrets", "/var/run/secrets", "/etc"}) {
    if (path_within(p, forbidden)) {
      return "must not be within " + std::string(forbidden);
    }
  }
  if (p.back() == '/') return "must not end with '/'";
  size_t start = 1;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string_view::npos) end = p.size();
    const std::string_view part = p.substr(start, end - start);
    if (part.empty()) return "must not contain \"//\"";
    if (part == "." || part == "..") return "must not contain \".\" or \"..\" components";
    start = end + 1;
  }
  return std::nullopt;
}

bool path_within(std::string_view path, std::string_view directory) {
  return path.size() >= directory.size() && path.substr(0, directory.size()) == directory &&
         (path.size() == directory.size() || path[directory.size()] == '/');
}

std::vector<std::string> validate(const Sendfile& s) {
  std::vector<std::string> problems;
  if (s.directories.empty()) problems.push_back("x-sendfile needs at least one directory");
  if (s.directories.size() > Sendfile::kMaxDirectories) {
    problems.push_back("x-sendfile has more than 16 directories");
  }
  for (const auto& d : s.directories) {
    if (auto why = check_sendfile_directory(d)) {
      problems.push_back("x-sendfile directory \"" + d + "\" " + *why);
    }
  }
  if (s.mappings.size() > Sendfile::kMaxDirectories) {
    problems.push_back("x-accel-mapping has more than 16 entries");
  }
  for (const auto& m : s.mappings) {
    if (m.uri_prefix.empty() || m.uri_prefix.front() != '/' || m.uri_prefix.back() != '/' ||
        m.uri_prefix.size() > Sendfile::kMaxPathBytes || !is_path_text(m.uri_prefix) ||
        m.uri_prefix.find("..") != std::string::npos) {
      problems.push_back("x-accel-mapping prefix \"" + m.uri_prefix +
                         "\" must start and end with '/', without \"..\"");
    }
    if (auto why = check_sendfile_directory(m.directory)) {
      problems.push_back("x-accel-mapping directory \"" + m.directory + "\" " + *why);
    } else if (std::none_of(s.directories.begin(), s.directories.end(),
                            [&](const std::string& d) { return path_within(m.directory, d); })) {
      problems.push_back("x-accel-mapping directory \"" + m.directory +
                         "\" is not within the x-sendfile directories");
    }
  }
  return problems;
}

json to_json(const Sendfile& s) {
  json j = json::object();
  j["directories"] = s.directories;
  if (!s.mappings.empty()) {
    json mappings = json::array();
    for (const auto& m : s.mappings) {
      mappings.push_back({{"uri_prefix", m.uri_prefix}, {"directory", m.directory}});
    }
    j["mappings"] = std::move(mappings);
  }
  return j;
}

Sendfile sendfile_from_json(const json& j) {
  detail::ObjectReader r(j, "route policy sendfile");
  Sendfile s;
  r.strings("directories", s.directories);
  if (const json* v = r.find("mappings")) {
    if (!v->is_array()) r.fail("mappings", "must be an array");
    for (const auto& item : *v) {
      detail::ObjectReader m(item, "sendfile mapping");
      SendfileMapping mapping;
      m.string("uri_prefix", mapping.uri_prefix);
      m.string("directory", mapping.directory);
      m.finish();
      s.mappings.push_back(std::move(mapping));
    }
  }
  r.finish();
  return s;
}

}  // namespace tidegate::model
