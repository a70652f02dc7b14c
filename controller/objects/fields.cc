#include "objects/fields.h"

#include <algorithm>
#include <charconv>

#include "objects/objects.h"

namespace tidegate::controller::objects::detail {

[[noreturn]] void fail(const std::string& path, std::string message) {
  throw FieldError{path, std::move(message)};
}

std::string field(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string item(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

const char* type_name(const Node& n) {
  if (!n.IsDefined()) return "nothing";
  switch (n.Type()) {
    case NodeType::kNull:
      return "null";
    case NodeType::kScalar:
      return "a scalar";
    case NodeType::kSequence:
      return "a sequence";
    case NodeType::kMap:
      return "a mapping";
    case NodeType::kUndefined:
      return "nothing";
  }
  return "?";
}

// Absent and explicit null are the same thing for Kubernetes objects.
bool present(const Node& n) { return n.IsDefined() && !n.IsNull(); }

// parent[key] when parent is a mapping; otherwise (null, or an absent field) an absent node.
Node child(const Node& parent, const char* key) {
  if (!parent.IsDefined() || !parent.IsMap()) return Node();
  return parent[key];
}

void expect_map(const Node& n, const std::string& path) {
  if (!n.IsDefined() || !n.IsMap())
    fail(path, std::string("expected a mapping, got ") + type_name(n));
}

std::optional<std::string> opt_string(const Node& parent, const char* key,
                                      const std::string& path) {
  Node n = child(parent, key);
  if (!present(n)) return std::nullopt;
  if (!n.IsScalar()) fail(field(path, key), std::string("expected a string, got ") + type_name(n));
  return std::string(n.ScalarView());
}

std::string req_string(const Node& parent, const char* key, const std::string& path) {
  auto s = opt_string(parent, key, path);
  if (!s || s->empty()) fail(field(path, key), "required field missing");
  return *s;
}

std::optional<int64_t> to_integer(std::string_view s) {
  std::string_view v = s;
  if (v.starts_with('+')) v.remove_prefix(1);
  int64_t out = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || ec != std::errc() || ptr != v.data() + v.size()) return std::nullopt;
  return out;
}

std::optional<int32_t> opt_port_number(const Node& parent, const char* key,
                                       const std::string& path) {
  Node n = child(parent, key);
  if (!present(n)) return std::nullopt;
  std::string where = field(path, key);
  if (!n.IsScalar()) fail(where, std::string("expected an integer, got ") + type_name(n));
  auto v = to_integer(n.ScalarView());
  if (!v) fail(where, "expected an integer, got \"" + n.Scalar() + "\"");
  if (*v < 1 || *v > 65535) fail(where, std::to_string(*v) + " is out of range 1-65535");
  return static_cast<int32_t>(*v);
}

std::optional<bool> opt_bool(const Node& parent, const char* key, const std::string& path) {
  Node n = child(parent, key);
  if (!present(n)) return std::nullopt;
  std::string where = field(path, key);
  if (n.IsScalar()) {
    // The YAML 1.2 core schema's spellings; JSON's true/false are among them.
    const std::string_view s = n.ScalarView();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    fail(where, "expected true or false, got \"" + std::string(s) + "\"");
  }
  fail(where, std::string("expected true or false, got ") + type_name(n));
}

// Kubernetes' IntOrString for ports: a scalar made only of digits is a number (quoted or not;
// Kubernetes would take a quoted "8080" as a port name and then reject it), anything else a name.
std::optional<PortRef> opt_int_or_string(const Node& parent, const char* key,
                                         const std::string& path) {
  Node n = child(parent, key);
  if (!present(n)) return std::nullopt;
  std::string where = field(path, key);
  if (!n.IsScalar()) fail(where, std::string("expected a number or a name, got ") + type_name(n));
  const std::string_view s = n.ScalarView();
  if (s.empty()) return std::nullopt;
  if (auto v = to_integer(s)) {
    if (*v < 1 || *v > 65535) fail(where, std::to_string(*v) + " is out of range 1-65535");
    return PortRef{static_cast<int32_t>(*v), {}};
  }
  return PortRef{std::nullopt, std::string(s)};
}

std::optional<int64_t> opt_integer(const Node& parent, const char* key, const std::string& path) {
  Node n = child(parent, key);
  if (!present(n)) return std::nullopt;
  std::string where = field(path, key);
  if (!n.IsScalar()) fail(where, std::string("expected an integer, got ") + type_name(n));
  auto v = to_integer(n.ScalarView());
  if (!v) fail(where, "expected an integer, got \"" + n.Scalar() + "\"");
  return v;
}

std::vector<std::string> string_list(const Node& parent, const char* key, const std::string& path) {
  std::vector<std::string> out;
  for_each_item(parent, key, path, [&](const Node& n, const std::string& where) {
    if (!n.IsScalar()) fail(where, std::string("expected a string, got ") + type_name(n));
    out.emplace_back(n.ScalarView());
  });
  return out;
}

// A mapping of string to string (labels, annotations, Secret data). A null value reads as "".
std::map<std::string, std::string> string_map(const Node& parent, const char* key,
                                              const std::string& path) {
  std::map<std::string, std::string> out;
  Node n = child(parent, key);
  if (!present(n)) return out;
  std::string where = field(path, key);
  expect_map(n, where);
  for (const auto& kv : n) {
    if (!kv.first.IsScalar()) fail(where, "keys must be strings");
    const std::string_view k = kv.first.ScalarView();
    if (present(kv.second) && !kv.second.IsScalar()) {
      fail(where + "[\"" + std::string(k) + "\"]",
           std::string("expected a string, got ") + type_name(kv.second));
    }
    out.insert_or_assign(std::string(k),
                         present(kv.second) ? std::string(kv.second.ScalarView()) : std::string());
  }
  return out;
}

// Kubernetes object names are DNS-1123 subdomains and namespaces DNS-1123 labels; the API server
// enforces it, so a manifest that breaks it would never reach a real cluster.
bool is_dns_subdomain(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  for (char c : s) {
    if (!alnum(c) && c != '-' && c != '.') return false;
  }
  return true;
}

// Port names are IANA service names in Kubernetes (lower-case letters, digits and '-'); they end
// up in upstream names, logs and the control protocol.
void check_port_name(const std::string& name, const std::string& path) {
  if (name.empty()) return;
  bool ok = name.size() <= 63 && std::all_of(name.begin(), name.end(), [](char c) {
              return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
            });
  if (!ok) fail(path + ".name", "\"" + name.substr(0, 64) + "\" is not a valid port name");
}

ObjectMeta parse_meta(const Node& obj, bool namespaced) {
  ObjectMeta m;
  Node n = child(obj, "metadata");
  const std::string path = "metadata";
  if (present(n)) expect_map(n, path);
  m.name = req_string(n, "name", path);
  m.namespace_ = opt_string(n, "namespace", path).value_or("");
  // A manifest without a namespace lands in the namespace kubectl applies it to; "default" is the
  // only choice that does not depend on the reader's kubeconfig. Cluster-scoped objects have none.
  if (!namespaced) {
    m.namespace_.clear();
  } else if (m.namespace_.empty()) {
    m.namespace_ = "default";
  }
  if (!is_dns_subdomain(m.name, 253)) {
    fail(path + ".name", "\"" + m.name.substr(0, 64) +
                             "\" is not a valid name (lower-case letters, digits, '-' and '.')");
  }
  if (!m.namespace_.empty() &&
      (!is_dns_subdomain(m.namespace_, 63) || m.namespace_.find('.') != std::string::npos)) {
    fail(path + ".namespace", "\"" + m.namespace_.substr(0, 64) +
                                  "\" is not a valid namespace (lower-case letters, digits, '-')");
  }
  m.uid = opt_string(n, "uid", path).value_or("");
  m.resource_version = opt_string(n, "resourceVersion", path).value_or("");
  m.creation_timestamp = opt_string(n, "creationTimestamp", path).value_or("");
  m.generation = opt_integer(n, "generation", path).value_or(0);
  m.labels = string_map(n, "labels", path);
  m.annotations = string_map(n, "annotations", path);
  return m;
}

Node spec_of(const Node& obj) {
  Node spec = child(obj, "spec");
  if (present(spec)) expect_map(spec, "spec");
  return spec;
}

}  // namespace tidegate::controller::objects::detail
