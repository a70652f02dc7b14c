#pragma once
// The conversion helpers the typed objects share (objects.cc, gateway.cc): private to
// controller/objects, not for other folders. Each throws FieldError naming the field; the public
// parse_* functions catch it through guarded() and return a ParseResult.

#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "objects/meta.h"
#include "objects/node.h"

namespace tidegate::controller::objects {
struct PortRef;
}

namespace tidegate::controller::objects::detail {

// Conversion is a deep descent where any field can be wrong; an exception private to this file
// carries the first error up to the public function, which turns it into a ParseResult. Nothing
// escapes: every public entry point catches it.
struct FieldError {
  std::string path;
  std::string message;
};

[[noreturn]] void fail(const std::string& path, std::string message);
std::string field(const std::string& path, std::string_view key);
std::string item(const std::string& path, size_t i);
const char* type_name(const Node& n);
// Absent and explicit null are the same thing for Kubernetes objects.
bool present(const Node& n);
// parent[key] when parent is a mapping; otherwise an absent node.
Node child(const Node& parent, const char* key);
void expect_map(const Node& n, const std::string& path);
std::optional<std::string> opt_string(const Node& parent, const char* key, const std::string& path);
std::string req_string(const Node& parent, const char* key, const std::string& path);
std::optional<int64_t> to_integer(std::string_view s);
std::optional<int64_t> opt_integer(const Node& parent, const char* key, const std::string& path);
std::optional<int32_t> opt_port_number(const Node& parent, const char* key,
                                       const std::string& path);
std::optional<bool> opt_bool(const Node& parent, const char* key, const std::string& path);
std::optional<PortRef> opt_int_or_string(const Node& parent, const char* key,
                                         const std::string& path);
std::vector<std::string> string_list(const Node& parent, const char* key, const std::string& path);
// A mapping of string to string (labels, annotations, Secret data). A null value reads as "".
std::map<std::string, std::string> string_map(const Node& parent, const char* key,
                                              const std::string& path);
bool is_dns_subdomain(const std::string& s, size_t max);
void check_port_name(const std::string& name, const std::string& path);
ObjectMeta parse_meta(const Node& obj, bool namespaced);
Node spec_of(const Node& obj);

// Calls fn(item_node, item_path) for each element of the sequence at parent[key], if any.
template <typename Fn>
void for_each_item(const Node& parent, const char* key, const std::string& path, Fn&& fn) {
  const Node n = child(parent, key);
  if (!present(n)) return;
  std::string where = field(path, key);
  if (!n.IsSequence()) fail(where, std::string("expected a sequence, got ") + type_name(n));
  size_t i = 0;
  for (const Node& element : n) fn(element, item(where, i++));
}

template <typename T, typename Convert>
ParseResult<T> guarded(const Node& node, Convert convert) {
  ParseResult<T> result;
  try {
    if (!node.IsDefined() || !node.IsMap()) {
      fail("", std::string("expected a mapping, got ") + type_name(node));
    }
    result.value = convert(node);
  } catch (const FieldError& e) {
    result.error = e.path.empty() ? e.message : e.path + ": " + e.message;
  } catch (const std::exception& e) {
    result.error = std::string("internal error: ") + e.what();
  }
  return result;
}

}  // namespace tidegate::controller::objects::detail
