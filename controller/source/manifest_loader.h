#pragma once
// Reads Kubernetes objects from manifest text or a folder of manifest files: the controller's
// source when it runs without an API server (`--manifests DIR`), and the fixture format of the
// translator's tests. Never throws: every problem becomes one line in LoadResult::errors and the
// rest of the input is still loaded.

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "objects/objects.h"

namespace tidegate::controller::source {

struct LoadedObject {
  objects::Object object;
  std::string file;  // as given to load_manifest_text, or the path of the file in the folder
  int document = 0;  // 1-based index of the YAML document in the file
  int item = -1;     // 0-based index in the document's List, or -1
};

enum class Severity { kWarning, kError };
const char* to_string(Severity s);

struct LoadError {
  Severity severity = Severity::kError;
  std::string file;
  // One line: "<file>: document <n>[, item <i>] (<Kind> <namespace>/<name>): <reason>", the part
  // in parentheses present as far as it is known.
  std::string message;
};

struct LoadResult {
  std::vector<LoadedObject> objects;
  std::vector<LoadError> errors;  // warnings too; see LoadError::severity
  bool has_errors() const;        // any of severity kError
};

// Loads every document of `text` (YAML or JSON; "---"-separated documents; `kind: List` and typed
// lists such as IngressList are expanded). `file_name` is only used in messages and LoadedObject.
// A document that cannot be read is skipped and reported; the others are kept. An object of a kind
// the controller does not read (a ConfigMap, say) is a warning. The second of two objects with the
// same kind, namespace and name is reported and dropped.
LoadResult load_manifest_text(std::string_view text, std::string file_name);

// Loads every regular file directly in `dir` whose name ends in .yaml, .yml or .json and does not
// start with '.', in byte order of file name. Duplicates across files: the first file wins.
LoadResult load_manifest_dir(const std::filesystem::path& dir);

}  // namespace tidegate::controller::source
