#pragma once
// The JSON object reader the model's files share (policy.cc and the family files): typed members,
// exact numbers, and unknown members refused, so that a side that does not know a field NACKs
// it instead of half-applying it. Private to lib/model.

#include <cstdint>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tidegate::model::detail {

using json = nlohmann::json;

// Reads the members of one JSON object, refusing unknown ones when done.
class ObjectReader {
 public:
  ObjectReader(const json& j, std::string what) : j_(j), what_(std::move(what)) {
    if (!j.is_object()) throw std::runtime_error(what_ + " must be an object");
  }
  const json* find(const char* key) {
    auto it = j_.find(key);
    if (it == j_.end()) return nullptr;
    seen_.insert(key);
    return &*it;
  }
  void string(const char* key, std::string& out) {
    if (const json* v = find(key)) {
      if (!v->is_string()) fail(key, "must be a string");
      out = v->get<std::string>();
    }
  }
  void boolean(const char* key, bool& out) {
    if (const json* v = find(key)) {
      if (!v->is_boolean()) fail(key, "must be true or false");
      out = v->get<bool>();
    }
  }
  template <class T>
  void integer(const char* key, T& out, uint64_t max) {
    if (const json* v = find(key)) out = static_cast<T>(unsigned_value(key, *v, max));
  }
  template <class T>
  void optional_integer(const char* key, std::optional<T>& out, uint64_t max) {
    if (const json* v = find(key)) out = static_cast<T>(unsigned_value(key, *v, max));
  }
  void number(const char* key, double& out) {
    if (const json* v = find(key)) {
      if (!v->is_number()) fail(key, "must be a number");
      out = v->get<double>();
    }
  }
  void strings(const char* key, std::vector<std::string>& out) {
    if (const json* v = find(key)) {
      if (!v->is_array()) fail(key, "must be an array of strings");
      out.clear();
      for (const auto& item : *v) {
        if (!item.is_string()) fail(key, "must be an array of strings");
        out.push_back(item.get<std::string>());
      }
    }
  }
  [[noreturn]] void fail(const char* key, const std::string& why) const {
    throw std::runtime_error(what_ + " \"" + key + "\" " + why);
  }
  void finish() const {
    for (const auto& [key, _] : j_.items()) {
      if (!seen_.count(key)) throw std::runtime_error(what_ + ": unknown field \"" + key + "\"");
    }
  }

 private:
  // nlohmann converts -1 or 1.5 to integers silently; numbers on the wire must be exact.
  uint64_t unsigned_value(const char* key, const json& v, uint64_t max) const {
    if (!v.is_number_unsigned()) fail(key, "must be a non-negative integer");
    uint64_t n = v.get<uint64_t>();
    if (n > max) fail(key, "is out of range");
    return n;
  }

  const json& j_;
  std::string what_;
  std::set<std::string> seen_;
};

}  // namespace tidegate::model::detail
