#pragma once
// Authentication of a route (docs/annotations.md, "Basic authentication"): its own family of the
// route policy (lib/model/policy.h carries it as RoutePolicy::basic_auth), with its checks and
// JSON form here rather than in policy.cc.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tidegate::model {

// One htpasswd entry.
struct BasicAuthUser {
  std::string name;  // 1..255 printable ASCII, no ':'
  std::string hash;  // a supported scheme (check_password_hash)
  bool operator==(const BasicAuthUser&) const = default;
};

// auth-type: basic with auth-secret: the users as the translator read them from the Secret.
// No users means the Secret could not be used: the data plane refuses every request (503),
// never lets one through.
struct BasicAuth {
  static constexpr std::string_view kDefaultRealm = "Authentication Required";
  static constexpr size_t kMaxUsers = 10'000;
  std::string realm{kDefaultRealm};  // printable ASCII without '"' and '\', at most 255 bytes
  std::string secret;                // "namespace/name", for reports
  std::vector<BasicAuthUser> users;  // unique names
  bool operator==(const BasicAuth&) const = default;
};

// The password hash schemes nginx's auth_basic accepts that are still safe to offer: bcrypt
// ($2a$, $2b$, $2y$), SHA-crypt ($5$, $6$), MD5-crypt ($1$), Apache's MD5 ($apr1$) and {SHA}
// (base64 of SHA-1, `htpasswd -s`). Plain text, {PLAIN} and DES crypt are refused.
std::optional<std::string> check_password_hash(std::string_view hash);
std::optional<std::string> check_auth_user(std::string_view name);
std::optional<std::string> check_auth_realm(std::string_view realm);

std::vector<std::string> validate(const BasicAuth& a);
nlohmann::json to_json(const BasicAuth& a);
BasicAuth basic_auth_from_json(const nlohmann::json& j);

}  // namespace tidegate::model
