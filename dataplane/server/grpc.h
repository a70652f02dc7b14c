#pragma once
// gRPC on the client side: recognising a gRPC request, and the answers of the proxy's own in the
// form a gRPC client reads them (docs/proxy.md, "gRPC clients"). gRPC's status codes are
// https://grpc.github.io/grpc/core/md_doc_statuscodes.html; the mapping from the proxy's HTTP
// answers follows gRPC's "HTTP to gRPC Status Code Mapping" with the exceptions a proxy knows
// better (it knows a 504 is a timeout and a 404 is no route).

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http.hpp>

#include "server/headers.h"

namespace tidegate::dataplane::server {

enum class GrpcStatus : int {
  kOk = 0,
  kUnknown = 2,
  kDeadlineExceeded = 4,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kUnauthenticated = 16,
};

// An HTTP/2 request with content-type application/grpc or application/grpc+<format> (not
// grpc-web, which browsers send over HTTP/1.1 as well and which reads HTTP statuses).
bool is_grpc_request(const boost::beast::http::request_header<Fields>& req, unsigned version);

// The gRPC code an answer of the proxy's own stands for: 404 (no route) UNIMPLEMENTED, 502 and
// 503 (no endpoint, connect failure, upstream error) UNAVAILABLE, 504 (timeout)
// DEADLINE_EXCEEDED, 429 RESOURCE_EXHAUSTED, 413/431 RESOURCE_EXHAUSTED, 401 UNAUTHENTICATED,
// 403 PERMISSION_DENIED, 400 INTERNAL, anything else UNKNOWN.
GrpcStatus grpc_status_for_http(unsigned status);

// A grpc-timeout value (gRPC over HTTP/2: 1 to 8 digits and a unit H, M, S, m, u or n): the
// time the client gives the call; nullopt when it does not parse (the header is then ignored).
std::optional<std::chrono::nanoseconds> parse_grpc_timeout(std::string_view value);

// grpc-message's encoding: the text without trailing newlines, bytes outside printable ASCII
// and '%' as %XX.
std::string grpc_percent_encode(std::string_view text);

}  // namespace tidegate::dataplane::server
