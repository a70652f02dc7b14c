// X-Sendfile: x-sendfile-directories, x-accel-mapping (Tidegate's own; ingress-nginx has no
// annotation for it, its users write an internal location in a snippet).

#include "translate/annotations/parser.h"

namespace tidegate::controller::translate::annotations_detail {

void Parser::parse_sendfile() {
  auto dirs = get("x-sendfile-directories");
  if (!dirs) {
    no_effect_without("x-accel-mapping", "x-sendfile-directories");
    return;
  }
  // Comma- or space-separated absolute directories.
  model::Sendfile s;
  std::optional<std::string> why;
  std::string current;
  auto flush = [&] {
    if (current.empty()) return;
    if (auto bad = model::check_sendfile_directory(current); bad && !why) {
      why = quote(current) + " " + *bad;
    }
    if (std::find(s.directories.begin(), s.directories.end(), current) == s.directories.end()) {
      s.directories.push_back(current);
    }
    current.clear();
  };
  for (char ch : dirs->value) {
    if (ch == ',' || is_space(ch)) {
      flush();
    } else {
      current.push_back(ch);
    }
  }
  flush();
  if (!why && s.directories.empty()) why = "no directory given";
  if (!why && s.directories.size() > model::Sendfile::kMaxDirectories) {
    why = "more than 16 directories";
  }
  if (why) {
    // Off, the backend is not told it may hand files over: it sends them itself.
    invalid(*dirs, *why, "X-Sendfile stays off");
    no_effect_without("x-accel-mapping", "x-sendfile-directories");
    return;
  }
  if (auto a = get("x-accel-mapping")) {
    // "/protected/=/srv/files, /media/=/srv/media": URI prefix = directory.
    std::vector<model::SendfileMapping> mappings;
    std::optional<std::string> bad;
    for (const auto& item : split_commas(a->value)) {
      const size_t eq = item.find('=');
      if (item.empty() || eq == std::string::npos) {
        if (!bad) bad = "expected \"/uri-prefix/=/directory\" entries separated by commas";
        continue;
      }
      model::SendfileMapping m;
      m.uri_prefix = std::string(trim(std::string_view(item).substr(0, eq)));
      m.directory = std::string(trim(std::string_view(item).substr(eq + 1)));
      if (!m.directory.empty() && m.directory.size() > 1 && m.directory.back() == '/') {
        m.directory.pop_back();  // "/srv/files/" as nginx's alias is usually written
      }
      model::Sendfile probe;
      probe.directories = s.directories;
      probe.mappings = {m};
      if (auto problems = model::validate(probe); !problems.empty() && !bad) {
        bad = problems.front();
      }
      mappings.push_back(std::move(m));
    }
    if (!bad && mappings.size() > model::Sendfile::kMaxDirectories) bad = "more than 16 entries";
    if (bad) {
      invalid(*a, *bad, "X-Accel-Redirect values are read as file paths");
    } else {
      // Longest prefix first: the most specific mapping wins.
      std::stable_sort(mappings.begin(), mappings.end(), [](const auto& x, const auto& y) {
        return x.uri_prefix.size() > y.uri_prefix.size();
      });
      s.mappings = std::move(mappings);
    }
  }
  route_.sendfile = std::move(s);
}

}  // namespace tidegate::controller::translate::annotations_detail
