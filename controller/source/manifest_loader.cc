#include "source/manifest_loader.h"

#include <algorithm>
#include <exception>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>
#include <utility>

#include <yaml-cpp/yaml.h>

namespace tidegate::controller::source {

const char* to_string(Severity s) { return s == Severity::kWarning ? "warning" : "error"; }

bool LoadResult::has_errors() const {
  return std::any_of(errors.begin(), errors.end(),
                     [](const LoadError& e) { return e.severity == Severity::kError; });
}

namespace {

struct Chunk {
  std::string text;
  int first_line = 1;  // line in the file where `text` starts (1-based)
};

bool is_marker(std::string_view line, std::string_view marker) {
  if (!line.starts_with(marker)) return false;
  if (line.size() == marker.size()) return true;
  char next = line[marker.size()];
  return next == ' ' || next == '\t' || next == '\r';
}

// True when the line carries YAML content, not just blanks, a comment or a directive.
bool has_content(std::string_view line) {
  if (line.starts_with('%')) return false;
  size_t i = line.find_first_not_of(" \t\r");
  return i != std::string_view::npos && line[i] != '#';
}

// Splits a stream into its documents. yaml-cpp's LoadAll gives up on the whole stream at the first
// syntax error; splitting first lets one broken document be reported while the others load. The
// YAML spec makes a "---" or "..." line at column 0 a document boundary wherever it appears (it is
// forbidden inside scalars), so a line scan finds the same boundaries the parser would. Documents
// with nothing but comments are dropped and do not count; directives ("%YAML 1.2") and comments
// before the first "---" stay with the document that marker opens.
std::vector<Chunk> split_documents(std::string_view text) {
  std::vector<Chunk> chunks;
  Chunk current;
  bool current_has_content = false;
  bool current_has_marker = false;
  int line_no = 0;
  auto restart = [&](int first_line) {
    current = Chunk{{}, first_line};
    current_has_content = false;
    current_has_marker = false;
  };
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    size_t next = end == std::string_view::npos ? text.size() : end + 1;
    std::string_view line = text.substr(pos, next - pos);
    std::string_view bare = line;
    if (bare.ends_with('\n')) bare.remove_suffix(1);
    ++line_no;
    pos = next;
    if (is_marker(bare, "...")) {
      if (current_has_content) chunks.push_back(std::move(current));
      restart(line_no + 1);
      continue;
    }
    if (is_marker(bare, "---")) {
      if (current_has_content) {
        chunks.push_back(std::move(current));
        restart(line_no);
      } else if (current_has_marker) {
        restart(line_no);  // the previous document was empty
      }
      current_has_marker = true;
      // "--- {kind: Service, ...}" puts content on the marker line itself.
      current_has_content = has_content(bare.substr(3));
    } else {
      current_has_content = current_has_content || has_content(bare);
    }
    current.text.append(line);
  }
  if (current_has_content) chunks.push_back(std::move(current));
  return chunks;
}

// map[key] if it is a scalar, else "". Checks IsDefined first: yaml-cpp's node for an absent key
// throws from every other accessor.
std::string scalar_at(const YAML::Node& map, const char* key) {
  if (!map.IsDefined() || !map.IsMap()) return {};
  const YAML::Node n = map[key];
  return n.IsDefined() && n.IsScalar() ? n.Scalar() : std::string();
}

const char* node_kind_name(const YAML::Node& n) {
  if (!n.IsDefined()) return "nothing";
  switch (n.Type()) {
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "null";
  }
}

class Loader {
 public:
  void load_text(std::string_view text, const std::string& file) {
    std::vector<Chunk> chunks;
    try {
      chunks = split_documents(text);
    } catch (const std::exception& e) {
      add(Severity::kError, file, file + ": cannot split into documents: " + e.what());
      return;
    }
    for (size_t i = 0; i < chunks.size(); ++i) {
      Where where{file, static_cast<int>(i) + 1, -1};
      YAML::Node doc;
      try {
        doc = YAML::Load(chunks[i].text);
      } catch (const YAML::Exception& e) {
        std::string reason = "invalid YAML";
        if (!e.mark.is_null()) {
          reason += " at line " + std::to_string(chunks[i].first_line + e.mark.line) + ", column " +
                    std::to_string(e.mark.column + 1);
        }
        add(Severity::kError, file, where.describe() + ": " + reason + ": " + e.msg);
        continue;
      } catch (const std::exception& e) {
        add(Severity::kError, file, where.describe() + ": invalid YAML: " + e.what());
        continue;
      }
      try {
        load_document(doc, where, /*in_list=*/false);
      } catch (const std::exception& e) {
        // Defensive: conversion does not throw, but a surprise must not lose the other documents.
        add(Severity::kError, file, where.describe() + ": " + e.what());
      }
    }
  }

  void add(Severity severity, const std::string& file, std::string message) {
    result_.errors.push_back(LoadError{severity, file, std::move(message)});
  }

  LoadResult take() { return std::move(result_); }

 private:
  struct Where {
    std::string file;
    int document = 0;
    int item = -1;
    std::string describe(const std::string& identity = {}) const {
      std::string s = file + ": document " + std::to_string(document);
      if (item >= 0) s += ", item " + std::to_string(item);
      if (!identity.empty()) s += " (" + identity + ")";
      return s;
    }
  };

  // "Ingress default/web", "IngressClass tidegate", "Ingress", "web" — as much as the node tells.
  static std::string identity(const YAML::Node& doc, const std::string& kind) {
    const YAML::Node meta = doc["metadata"];
    std::string name = scalar_at(meta, "name");
    std::string ns = scalar_at(meta, "namespace");
    auto known = objects::kind_from_string(kind);
    if (ns.empty() && known && objects::is_namespaced(*known)) ns = "default";
    if (known && !objects::is_namespaced(*known)) ns.clear();
    std::string s = kind;
    if (!name.empty()) {
      if (!s.empty()) s += " ";
      s += ns.empty() ? name : ns + "/" + name;
    }
    return s;
  }

  void load_document(const YAML::Node& doc, const Where& where, bool in_list) {
    if (!doc.IsDefined() || doc.IsNull()) return;  // an empty document, e.g. "---\n# comment"
    if (!doc.IsMap()) {
      add(Severity::kError, where.file,
          where.describe() + ": expected a Kubernetes object (a mapping), got " +
              node_kind_name(doc));
      return;
    }
    std::string kind = scalar_at(doc, "kind");
    std::string api_version = scalar_at(doc, "apiVersion");
    std::string id = identity(doc, kind);
    if (kind.empty()) {
      add(Severity::kError, where.file, where.describe(id) + ": missing kind");
      return;
    }
    if (api_version.empty()) {
      add(Severity::kError, where.file, where.describe(id) + ": missing apiVersion");
      return;
    }
    // `kind: List` (what `kubectl get -o yaml` prints) and typed lists such as IngressList (what
    // the API server returns, whose items carry neither kind nor apiVersion).
    if (kind.ends_with("List") && doc["items"].IsDefined()) {
      load_list(doc, kind, api_version, where, in_list);
      return;
    }
    auto known = objects::kind_from_string(kind);
    if (!known) {
      add(Severity::kWarning, where.file, where.describe(id) + ": ignored: unsupported kind");
      return;
    }
    auto parsed = objects::parse_object(doc);
    if (!parsed.ok()) {
      add(Severity::kError, where.file, where.describe(id) + ": " + parsed.error);
      return;
    }
    const objects::ObjectMeta& meta = objects::meta_of(*parsed.value);
    std::string key =
        kind + " " + (meta.namespace_.empty() ? meta.name : meta.namespace_ + "/" + meta.name);
    auto [it, inserted] = seen_.emplace(key, where.describe());
    if (!inserted) {
      add(Severity::kError, where.file,
          where.describe(key) + ": duplicate of the object in " + it->second + "; ignored");
      return;
    }
    result_.objects.push_back(
        LoadedObject{std::move(*parsed.value), where.file, where.document, where.item});
  }

  void load_list(const YAML::Node& list, const std::string& kind, const std::string& api_version,
                 const Where& where, bool in_list) {
    if (in_list) {
      add(Severity::kError, where.file, where.describe(kind) + ": nested lists are not supported");
      return;
    }
    const YAML::Node items = list["items"];
    if (!items.IsDefined() || items.IsNull()) return;
    if (!items.IsSequence()) {
      add(Severity::kError, where.file,
          where.describe(kind) + ": items: expected a sequence, got " + node_kind_name(items));
      return;
    }
    std::string item_kind = kind == "List" ? std::string() : kind.substr(0, kind.size() - 4);
    for (size_t i = 0; i < items.size(); ++i) {
      // Nodes share their tree, so filling in kind and apiVersion edits our own parse of it.
      YAML::Node item = items[i];
      if (!item_kind.empty() && item.IsMap()) {
        if (!item["kind"].IsDefined()) item["kind"] = item_kind;
        if (!item["apiVersion"].IsDefined()) item["apiVersion"] = api_version;
      }
      Where item_where = where;
      item_where.item = static_cast<int>(i);
      load_document(item, item_where, /*in_list=*/true);
    }
  }

  LoadResult result_;
  std::map<std::string, std::string> seen_;  // "Kind ns/name" -> where it was first loaded
};

}  // namespace

LoadResult load_manifest_text(std::string_view text, std::string file_name) {
  Loader loader;
  loader.load_text(text, file_name);
  return loader.take();
}

LoadResult load_manifest_dir(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  Loader loader;
  const std::string dir_name = dir.string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    loader.add(Severity::kError, dir_name,
               dir_name + ": not a directory" + (ec ? ": " + ec.message() : std::string()));
    return loader.take();
  }
  std::vector<std::string> names;
  fs::directory_iterator it(dir, ec);
  const fs::directory_iterator end;
  while (!ec && it != end) {
    std::string name = it->path().filename().string();
    bool wanted_name =
        !name.starts_with('.') &&
        (name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json"));
    std::error_code status_ec;
    // is_regular_file follows symlinks: a mounted ConfigMap's files are symlinks into "..data".
    if (wanted_name && it->is_regular_file(status_ec)) names.push_back(name);
    it.increment(ec);
  }
  if (ec) {
    loader.add(Severity::kError, dir_name, dir_name + ": cannot list directory: " + ec.message());
    return loader.take();
  }
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    const std::string file = (dir / name).string();
    std::ifstream in(dir / name, std::ios::binary);
    if (!in) {
      loader.add(Severity::kError, file, file + ": cannot read file");
      continue;
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    if (in.bad()) {
      loader.add(Severity::kError, file, file + ": cannot read file");
      continue;
    }
    loader.load_text(buffer.str(), file);
  }
  return loader.take();
}

}  // namespace tidegate::controller::source
