#include "model/auth.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace tidegate::model {

using nlohmann::json;

namespace {

bool printable(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

// crypt(3)'s alphabet of salts and digests.
bool crypt_chars(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '/';
  });
}

}  // namespace

std::optional<std::string> check_password_hash(std::string_view h) {
  if (h.size() > 512) return "is longer than 512 bytes";
  if (h.starts_with("$2a$") || h.starts_with("$2b$") || h.starts_with("$2y$")) {
    // $2b$10$ + 53 characters of salt and digest.
    if (h.size() != 60 || h[6] != '$' || !std::isdigit(static_cast<unsigned char>(h[4])) ||
        !std::isdigit(static_cast<unsigned char>(h[5])) || !crypt_chars(h.substr(7))) {
      return "is not a well-formed bcrypt hash";
    }
    const int cost = (h[4] - '0') * 10 + (h[5] - '0');
    if (cost < 4 || cost > 31) return "has a bcrypt cost outside 4-31";
    return std::nullopt;
  }
  for (std::string_view prefix : {"$1$", "$5$", "$6$", "$apr1$"}) {
    if (!h.starts_with(prefix)) continue;
    std::string_view rest = h.substr(prefix.size());
    if (rest.starts_with("rounds=")) {
      if (prefix != "$5$" && prefix != "$6$") return "has rounds= outside SHA-crypt";
      auto dollar = rest.find('$');
      if (dollar == std::string_view::npos) return "is not a well-formed crypt hash";
      rest = rest.substr(dollar + 1);
    }
    auto dollar = rest.find('$');
    if (dollar == std::string_view::npos || dollar == 0 || dollar > 16 ||
        !crypt_chars(rest.substr(0, dollar)) || !crypt_chars(rest.substr(dollar + 1)) ||
        rest.size() == dollar + 1) {
      return "is not a well-formed crypt hash";
    }
    return std::nullopt;
  }
  if (h.starts_with("{SHA}")) {
    // base64 of 20 bytes: 28 characters.
    std::string_view b64 = h.substr(5);
    const bool ok = b64.size() == 28 && b64.back() == '=' &&
                    std::all_of(b64.begin(), b64.end() - 1, [](char c) {
                      return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/';
                    });
    if (!ok) return "is not a well-formed {SHA} hash";
    return std::nullopt;
  }
  if (h.starts_with("{PLAIN}") || h.starts_with("{SSHA}")) {
    return "uses a scheme that is not accepted (use bcrypt: htpasswd -B)";
  }
  return "is not a supported hash (bcrypt, SHA-crypt, MD5-crypt, apr1 or {SHA}; plain text and "
         "DES crypt are refused)";
}

std::optional<std::string> check_auth_user(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > 255) return "is longer than 255 bytes";
  if (!printable(name) || name.find(':') != std::string_view::npos) {
    return "must be printable ASCII without ':'";
  }
  return std::nullopt;
}

std::optional<std::string> check_auth_realm(std::string_view realm) {
  if (realm.size() > 255) return "is longer than 255 bytes";
  if (!printable(realm) || realm.find('"') != std::string_view::npos ||
      realm.find('\\') != std::string_view::npos) {
    return "must be printable ASCII without '\"' or '\\'";
  }
  return std::nullopt;
}

std::vector<std::string> validate(const BasicAuth& a) {
  std::vector<std::string> problems;
  if (auto why = check_auth_realm(a.realm)) problems.push_back("basic_auth realm " + *why);
  if (a.users.size() > BasicAuth::kMaxUsers) problems.push_back("basic_auth has too many users");
  std::set<std::string_view> names;
  for (const auto& u : a.users) {
    if (auto why = check_auth_user(u.name)) {
      problems.push_back("basic_auth user name " + *why);
    } else if (!names.insert(u.name).second) {
      problems.push_back("basic_auth user \"" + u.name + "\" appears twice");
    }
    if (auto why = check_password_hash(u.hash)) {
      problems.push_back("basic_auth hash of \"" + u.name + "\" " + *why);
    }
  }
  return problems;
}

json to_json(const BasicAuth& a) {
  json j = json::object();
  if (a.realm != BasicAuth::kDefaultRealm) j["realm"] = a.realm;
  if (!a.secret.empty()) j["secret"] = a.secret;
  json users = json::array();
  for (const auto& u : a.users) users.push_back(json{{"name", u.name}, {"hash", u.hash}});
  j["users"] = std::move(users);
  return j;
}

BasicAuth basic_auth_from_json(const json& j) {
  if (!j.is_object()) throw std::runtime_error("route policy basic_auth must be an object");
  BasicAuth a;
  for (const auto& [key, v] : j.items()) {
    if (key == "realm" || key == "secret") {
      if (!v.is_string()) throw std::runtime_error("basic_auth \"" + key + "\" must be a string");
      (key == "realm" ? a.realm : a.secret) = v.get<std::string>();
    } else if (key == "users") {
      if (!v.is_array()) throw std::runtime_error("basic_auth \"users\" must be an array");
      for (const auto& u : v) {
        if (!u.is_object() || u.size() != 2 || !u.contains("name") || !u.contains("hash") ||
            !u["name"].is_string() || !u["hash"].is_string()) {
          throw std::runtime_error("basic_auth users must be {\"name\", \"hash\"} objects");
        }
        a.users.push_back({u["name"].get<std::string>(), u["hash"].get<std::string>()});
      }
    } else {
      throw std::runtime_error("basic_auth: unknown field \"" + key + "\"");
    }
  }
  return a;
}

}  // namespace tidegate::model
