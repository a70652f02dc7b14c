#pragma once
// A client address as a value: 16 bytes plus its family, no allocation, cheap to copy and hash.
// IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are normalised to IPv4 everywhere, so that a
// dual-stack listener's peers match IPv4 rules and share IPv4 rate-limit buckets.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tidegate::dataplane::ratelimit {

class IpAddress {
 public:
  // Longest text form() writes ("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255" is 45).
  static constexpr size_t kMaxTextBytes = 46;

  IpAddress() = default;  // 0.0.0.0

  // Dotted quad (exactly four decimal parts, 0-255, no leading zeros) or an IPv6 literal without
  // brackets or zone ("%eth0"). Returns nullopt for anything else.
  static std::optional<IpAddress> parse(std::string_view text);

  static IpAddress v4(uint32_t host_order);
  // 16 bytes in network order; a v4-mapped address becomes IPv4.
  static IpAddress v6(const std::array<uint8_t, 16>& bytes);

  bool is_v4() const { return v4_; }
  // Host-order value of an IPv4 address (0 for IPv6).
  uint32_t v4_value() const;
  // The two 64-bit halves of an IPv6 address in host order (an IPv4 address as v4-mapped).
  uint64_t high() const;
  uint64_t low() const;
  // Network-order bytes; IPv4 is stored v4-mapped (::ffff:a.b.c.d).
  const std::array<uint8_t, 16>& bytes() const { return bytes_; }

  // A stable 64-bit hash (same value in every process: usable as a table key or for ip_hash).
  uint64_t hash() const;

  // Writes the canonical text form (RFC 5952 for IPv6) and returns its length.
  size_t format(char (&out)[kMaxTextBytes]) const;
  std::string to_string() const;

  bool operator==(const IpAddress&) const = default;

 private:
  std::array<uint8_t, 16> bytes_{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0};
  bool v4_ = true;
};

}  // namespace tidegate::dataplane::ratelimit
