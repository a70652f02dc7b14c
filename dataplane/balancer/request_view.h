#pragma once
// What a balancer may look at in a request, without depending on Beast: the client address (after
// trusted-proxy resolution, see ratelimit/client_address.h), the request target and a header
// lookup. Built on the stack by the HTTP session for each pick; everything is borrowed.

#include <string_view>

#include "ratelimit/ip_address.h"

namespace tidegate::dataplane::balancer {

struct RequestView {
  ratelimit::IpAddress client;
  // The request target as received: "/path?query" (origin form).
  std::string_view uri;
  // Returns the value of the first field named `name` (given in lower case, e.g. "x-user-id",
  // "cookie"), or an empty view. Null when the request has no fields to offer.
  std::string_view (*header)(const void* context, std::string_view name) = nullptr;
  const void* header_context = nullptr;

  std::string_view find_header(std::string_view name) const {
    return header == nullptr ? std::string_view() : header(header_context, name);
  }
};

// The value of cookie `name` in a Cookie field value ("a=1; b=2"), exact (case-sensitive) name
// match, first occurrence; empty when absent. Surrounding double quotes are kept (RFC 6265 makes
// them part of the value).
std::string_view find_cookie(std::string_view cookie_header, std::string_view name);

// The raw (not percent-decoded) value of query argument `name` in a request target, exact name
// match, first occurrence; empty when absent or written without '=' ("?flag").
std::string_view find_query_arg(std::string_view uri, std::string_view name);

}  // namespace tidegate::dataplane::balancer
