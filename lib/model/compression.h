#pragma once
// Response compression of a route (docs/annotations.md, "Compression"): its own family of the
// route policy (RoutePolicy::compression), checks and JSON form here.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tidegate::model {

// enable-compression (or the controller's --enable-compression default): the data plane
// compresses the route's responses with gzip or brotli as the client's Accept-Encoding prefers.
// compression-breach-mitigation: BREACH reads secrets out of compressed responses that reflect
// attacker input next to them, by their lengths. kNoCredentials leaves responses to requests that
// carry credentials (Cookie, Authorization) uncompressed: what a secret usually rides on.
// kPadding adds a field of random length (1-256 bytes) to every compressed response, which makes
// lengths noisy: an attack needs many more requests; it is not ruled out.
enum class BreachMitigation { kOff, kNoCredentials, kPadding };
const char* to_string(BreachMitigation m);  // "off", "no-credentials", "padding"
std::optional<BreachMitigation> breach_mitigation_from_string(std::string_view s);

struct Compression {
  static constexpr uint32_t kDefaultMinLength = 256;  // ingress-nginx's gzip-min-length
  static constexpr uint32_t kMaxMinLength = 1U << 30;
  static constexpr size_t kMaxTypes = 64;
  uint32_t min_length = kDefaultMinLength;  // responses declared shorter are sent as they are
  std::vector<std::string> types;           // lower-case media types; empty: the default list
  BreachMitigation breach = BreachMitigation::kOff;
  bool operator==(const Compression&) const = default;
};

// ingress-nginx's gzip-types (its default), text/html included as nginx always does.
const std::vector<std::string>& default_compression_types();
// "type/subtype": lower-case token characters around one '/'.
std::optional<std::string> check_media_type(std::string_view text);

std::vector<std::string> validate(const Compression& c);
nlohmann::json to_json(const Compression& c);
Compression compression_from_json(const nlohmann::json& j);

}  // namespace tidegate::model
