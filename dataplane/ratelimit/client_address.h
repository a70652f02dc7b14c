#pragma once
// Which address a request comes from, for ip_hash, rate limits and source-range checks.
//
// The peer of the TCP connection is the client unless it is a trusted proxy (a CIDR set from the
// configuration). Then X-Forwarded-For is read from the right (the hop nearest to us) to the
// left, skipping addresses that are themselves trusted proxies; the first untrusted address is
// the client (nginx's real_ip_recursive on, Envoy's xff_num_trusted_hops by CIDR). Anything
// unparsable stops the walk: the last trusted hop that added it is then taken as the client,
// because a malformed element may be the client's own forgery.

#include <span>
#include <string_view>

#include "ratelimit/cidr_set.h"
#include "ratelimit/ip_address.h"

namespace tidegate::dataplane::ratelimit {

// `x_forwarded_for` holds the values of every X-Forwarded-For field line in the order received
// (several lines are one comma-separated list). Elements may carry a port ("1.2.3.4:5678",
// "[2001:db8::1]:443") or brackets, which are removed. Allocation-free.
IpAddress resolve_client_address(const IpAddress& peer,
                                 std::span<const std::string_view> x_forwarded_for,
                                 const CidrSet& trusted_proxies);

// One element of X-Forwarded-For (or Forwarded-style text) without surrounding spaces:
// "1.2.3.4", "1.2.3.4:80", "[::1]:80", "::1". Returns nullopt when it is not an address.
std::optional<IpAddress> parse_forwarded_element(std::string_view element);

}  // namespace tidegate::dataplane::ratelimit
