#pragma once
// A set of IPv4 and IPv6 networks, built once per configuration snapshot and then read-only (any
// number of threads may call contains()). Used for limit-allowlist, whitelist-source-range and
// the trusted proxies whose X-Forwarded-For is believed (client_address.h).
//
// Families are separate, as in nginx's allow/deny: "::/0" matches every IPv6 client and no IPv4
// client; IPv4-mapped clients (::ffff:a.b.c.d) are IPv4. An IPv4-mapped network written in IPv6
// form with a prefix of at least 96 ("::ffff:10.0.0.0/104") is the IPv4 network 10.0.0.0/8.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratelimit/ip_address.h"

namespace tidegate::dataplane::ratelimit {

struct Cidr {
  IpAddress network;   // host bits cleared
  uint8_t prefix = 0;  // 0-32 for IPv4, 0-128 for IPv6

  // "10.0.0.0/8", "2001:db8::/32", or a bare address (a /32 or /128). Host bits below the
  // prefix are cleared ("10.1.2.3/8" is 10.0.0.0/8), as Go's net.ParseCIDR and nginx do; that is
  // how such values are written in ingress-nginx annotations. On failure returns nullopt and sets
  // *error to a sentence naming the problem.
  static std::optional<Cidr> parse(std::string_view text, std::string* error);
  bool contains(const IpAddress& a) const;
  std::string to_string() const;
  bool operator==(const Cidr&) const = default;
};

class CidrSet {
 public:
  // Most entries one annotation may list; more is refused rather than slowing every lookup.
  static constexpr size_t kMaxEntries = 4096;

  CidrSet() = default;  // empty: contains() is false for every address
  explicit CidrSet(const std::vector<Cidr>& cidrs);

  // A list separated by commas and/or whitespace ("10.0.0.0/8, 192.168.0.1 ::1"). An empty list,
  // an empty entry (",,") or any invalid entry is an error: the message names the entry and its
  // position (1-based), e.g. `entry 2 "10.0.0.0/33": prefix length 33 is out of range 0-32 for
  // IPv4`.
  static std::optional<CidrSet> parse(std::string_view text, std::string* error);

  // Allocation-free; O(number of distinct prefix lengths × log entries).
  bool contains(const IpAddress& a) const;
  bool empty() const { return v4_.empty() && v6_.empty(); }
  // The networks after normalisation (duplicates and networks inside another one removed),
  // IPv4 first, each family ordered by prefix then address.
  std::vector<Cidr> entries() const;

 private:
  // One group per distinct prefix length, networks sorted for binary search.
  struct V4Group {
    uint8_t prefix;
    std::vector<uint32_t> networks;
  };
  struct V6Group {
    uint8_t prefix;
    std::vector<std::pair<uint64_t, uint64_t>> networks;
  };
  std::vector<V4Group> v4_;
  std::vector<V6Group> v6_;
};

}  // namespace tidegate::dataplane::ratelimit
