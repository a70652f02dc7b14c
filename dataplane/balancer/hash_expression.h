#pragma once
// The key of consistent hashing (upstream-hash-by), written like nginx's hash directive:
// literal text and variables, concatenated.
//
//   $remote_addr      the client address (after trusted-proxy resolution), canonical text
//   $request_uri      the request target as received, with its query
//   $http_<name>      request header <name>, '_' standing for '-' ($http_x_user_id: X-User-Id),
//                     case-insensitive; the first field of that name
//   $cookie_<name>    cookie <name> (exact, case-sensitive), first occurrence
//   $arg_<name>       query argument <name> (exact, case-sensitive), raw, first occurrence
//
// A variable name runs over [A-Za-z0-9_]; ${name} delimits it when letters follow
// ("${arg_id}x"). There is no escape for a literal '$'. A missing header, cookie or argument is
// the empty string. Compiled once per configuration snapshot; hashing a request allocates
// nothing.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "balancer/request_view.h"

namespace tidegate::dataplane::balancer {

class HashExpression {
 public:
  static constexpr size_t kMaxTextBytes = 1024;
  static constexpr size_t kMaxParts = 32;

  // Null on error, with *error naming the problem and its 0-based offset, e.g.
  // `unknown variable "$host" at offset 0 (known: ...)`.
  static std::shared_ptr<const HashExpression> compile(std::string_view text, std::string* error);

  struct Key {
    uint64_t hash = 0;
    bool empty = true;  // the evaluated key is the empty string (every variable was missing)
  };
  // Hash of the evaluated key (the same as stable_hash(evaluate(request), seed)).
  Key hash(const RequestView& request, uint64_t seed = 0) const;
  // The evaluated key itself, for tests and logs.
  std::string evaluate(const RequestView& request) const;

  const std::string& text() const { return text_; }
  bool operator==(const HashExpression& o) const { return text_ == o.text_; }

  enum class Kind : uint8_t { kLiteral, kRemoteAddr, kRequestUri, kHeader, kCookie, kArg };
  struct Part {
    Kind kind;
    std::string name;  // literal text, or the header (lower case, dashes) / cookie / arg name
  };
  const std::vector<Part>& parts() const { return parts_; }

 private:
  template <class Sink>
  void each_piece(const RequestView& request, Sink&& sink) const;

  std::string text_;
  std::vector<Part> parts_;
};

}  // namespace tidegate::dataplane::balancer
