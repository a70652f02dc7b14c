#pragma once
// What every typed object shares: its metadata, and the result of converting one from a document.
// Kept apart from objects.h so that the Gateway API's kinds (gateway.h) can use them while
// objects.h lists every kind in one variant.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace tidegate::controller::objects {

struct ObjectMeta {
  std::string namespace_;  // "default" when a namespaced manifest omits it; empty for IngressClass
  std::string name;
  std::string uid;
  std::string resource_version;
  std::string creation_timestamp;  // RFC 3339 as the API server writes it; empty in most manifests
  // metadata.generation: the Gateway API's status conditions carry it as observedGeneration.
  // 0 when absent (manifests).
  int64_t generation = 0;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  bool operator==(const ObjectMeta&) const = default;
};

// Either a value or an error naming the field. Never both.
template <typename T>
struct ParseResult {
  std::optional<T> value;
  std::string error;
  bool ok() const { return value.has_value(); }
};

}  // namespace tidegate::controller::objects
