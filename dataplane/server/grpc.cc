#include "server/grpc.h"

#include <boost/beast/core/string.hpp>

namespace tidegate::dataplane::server {

namespace http = boost::beast::http;

bool is_grpc_request(const http::request_header<Fields>& req, unsigned version) {
  if (version < 20) return false;
  const std::string_view type = req[http::field::content_type];
  constexpr std::string_view kGrpc = "application/grpc";
  if (type.size() < kGrpc.size() || !boost::beast::iequals(type.substr(0, kGrpc.size()), kGrpc)) {
    return false;
  }
  if (type.size() == kGrpc.size()) return true;
  const char next = type[kGrpc.size()];
  return next == '+' || next == ';';  // application/grpc+proto, application/grpc;...
}

GrpcStatus grpc_status_for_http(unsigned status) {
  switch (status) {
    case 400:
      return GrpcStatus::kInternal;
    case 401:
      return GrpcStatus::kUnauthenticated;
    case 403:
      return GrpcStatus::kPermissionDenied;
    case 404:
      return GrpcStatus::kUnimplemented;
    case 413:
    case 429:
    case 431:
      return GrpcStatus::kResourceExhausted;
    case 502:
    case 503:
      return GrpcStatus::kUnavailable;
    case 504:
      return GrpcStatus::kDeadlineExceeded;
    default:
      return GrpcStatus::kUnknown;
  }
}

std::string grpc_percent_encode(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c >= 0x20 && c <= 0x7e && c != '%') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  return out;
}

std::optional<std::chrono::nanoseconds> parse_grpc_timeout(std::string_view value) {
  if (value.size() < 2 || value.size() > 9) return std::nullopt;
  int64_t n = 0;
  for (char c : value.substr(0, value.size() - 1)) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  using namespace std::chrono;
  switch (value.back()) {
    case 'H':
      return duration_cast<nanoseconds>(hours(n));
    case 'M':
      return duration_cast<nanoseconds>(minutes(n));
    case 'S':
      return duration_cast<nanoseconds>(seconds(n));
    case 'm':
      return duration_cast<nanoseconds>(milliseconds(n));
    case 'u':
      return duration_cast<nanoseconds>(microseconds(n));
    case 'n':
      return nanoseconds(n);
    default:
      return std::nullopt;
  }
}

}  // namespace tidegate::dataplane::server
