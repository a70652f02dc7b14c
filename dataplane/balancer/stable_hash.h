#pragma once
// A 64-bit hash that is the same in every process and on every run (std::hash promises neither):
// affinity cookies, hash rings and hash keys must agree across data-plane replicas and
// restarts. FNV-1a over the bytes, then a strong final mix so that nearby inputs ("10.0.0.1",
// "10.0.0.2") land far apart. Streaming: feeding "ab" then "c" equals feeding "abc", which is
// what lets a hash-key expression be hashed piece by piece without building the key.

#include <cstdint>
#include <string_view>

namespace tidegate::dataplane::balancer {

// splitmix64's finaliser: bijective, full avalanche.
constexpr uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

class StableHasher {
 public:
  explicit constexpr StableHasher(uint64_t seed = 0) : state_(kOffset ^ mix64(seed)) {}
  constexpr void update(std::string_view bytes) {
    for (char c : bytes) {
      state_ ^= static_cast<unsigned char>(c);
      state_ *= kPrime;
    }
    length_ += bytes.size();
  }
  constexpr uint64_t finish() const { return mix64(state_ ^ mix64(length_)); }
  constexpr uint64_t length() const { return length_; }

 private:
  static constexpr uint64_t kOffset = 0xcbf29ce484222325ULL;
  static constexpr uint64_t kPrime = 0x100000001b3ULL;
  uint64_t state_;
  uint64_t length_ = 0;
};

constexpr uint64_t stable_hash(std::string_view bytes, uint64_t seed = 0) {
  StableHasher h(seed);
  h.update(bytes);
  return h.finish();
}

}  // namespace tidegate::dataplane::balancer
