#pragma once
// X-Sendfile / X-Accel-Redirect of a route (docs/annotations.md, "X-Sendfile"): its own family
// of the route policy (RoutePolicy::sendfile), checks and JSON form here.
//
// With x-sendfile-directories a backend may answer with an empty body and a field naming a file
// (`X-Sendfile: /srv/app/storage/report.pdf`, or nginx's `X-Accel-Redirect: /protected/report.pdf`
// mapped by x-accel-mapping); the data plane then serves the file itself (Range, conditional
// requests, sendfile(2) where the connection allows it), never a file outside the directories.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tidegate::model {

// x-accel-mapping: an X-Accel-Redirect URI under `uri_prefix` names the file at the same place
// under `directory` ("/protected/" -> "/srv/files": /protected/a/b.pdf is /srv/files/a/b.pdf).
struct SendfileMapping {
  std::string uri_prefix;  // starts and ends with '/'
  std::string directory;   // an allowed directory or one beneath one
  bool operator==(const SendfileMapping&) const = default;
};

struct Sendfile {
  static constexpr size_t kMaxDirectories = 16;
  static constexpr size_t kMaxPathBytes = 1024;
  // Absolute directories in normal form (no ".", "..", "//" or trailing '/'; never "/").
  std::vector<std::string> directories;
  std::vector<SendfileMapping> mappings;
  bool operator==(const Sendfile&) const = default;
};

// An absolute directory in normal form, as above, not within /proc, /sys, /dev, /etc,
// /run/secrets or /var/run/secrets; nullopt == valid.
std::optional<std::string> check_sendfile_directory(std::string_view path);
// `path` is `directory` or beneath it (both in normal form).
bool path_within(std::string_view path, std::string_view directory);

std::vector<std::string> validate(const Sendfile& s);
nlohmann::json to_json(const Sendfile& s);
Sendfile sendfile_from_json(const nlohmann::json& j);

}  // namespace tidegate::model
