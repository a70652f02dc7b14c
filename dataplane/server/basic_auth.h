#pragma once
// auth-type: basic on a route (docs/annotations.md, "Basic authentication"): the users of the
// route's model::BasicAuth, compiled once per routing table (server/route_table.h), and the
// check of a request's Authorization header against them. Successful checks are remembered per
// worker (by the SHA-256 of the header value, never the password), so that a bcrypt hash costs
// its tens of milliseconds once per client credential rather than on every request.

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "model/auth.h"

namespace tidegate::dataplane::server {

// Whether `password` matches `hash` (a scheme model::check_password_hash accepts): bcrypt,
// SHA-crypt and MD5-crypt through crypt_r(3) (libxcrypt), Apache's apr1 and {SHA} here. The
// comparison takes the same time wherever the first difference is.
bool verify_password(std::string_view password, std::string_view hash);

// Apache's MD5 ("$apr1$<salt>$<digest>") of `password` with `salt` (at most 8 characters).
std::string apr1_md5(std::string_view password, std::string_view salt);

class BasicAuthCheck {
 public:
  enum class Verdict { kAllowed, kDenied, kUnconfigured };
  static constexpr std::size_t kCachePerWorker = 1024;

  BasicAuthCheck(const model::BasicAuth& config, std::size_t workers);
  // `authorization`: the request's Authorization header ("" when absent). kUnconfigured: the
  // route has no users (its Secret could not be used): the request must be refused.
  Verdict check(std::string_view authorization, std::size_t worker) const;
  // The WWW-Authenticate value of a 401: Basic realm="...", charset="UTF-8".
  const std::string& challenge() const { return challenge_; }

 private:
  struct DigestHash {
    std::size_t operator()(const std::array<unsigned char, 32>& d) const noexcept;
  };
  struct alignas(64) Cache {
    mutable std::unordered_set<std::array<unsigned char, 32>, DigestHash> accepted;
  };
  std::unordered_map<std::string, std::string> users_;  // name -> hash
  std::string challenge_;
  std::unique_ptr<Cache[]> caches_;
  std::size_t workers_;
};

}  // namespace tidegate::dataplane::server
