#pragma once
// HTTP dates (RFC 9110 section 5.6.7): Last-Modified, If-Modified-Since, Expires.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tidegate::dataplane::server {

// IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
std::string format_http_date(int64_t unix_seconds);
// IMF-fixdate, and the obsolete RFC 850 ("Sunday, 06-Nov-94 08:49:37 GMT") and asctime ("Sun Nov
// 6 08:49:37 1994") forms recipients must accept; seconds since the epoch, or nullopt.
std::optional<int64_t> parse_http_date(std::string_view text);

}  // namespace tidegate::dataplane::server
