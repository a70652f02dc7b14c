#pragma once
// Header handling shared by the HTTP paths: hop-by-hop removal (RFC 9110 section 7.6.1),
// X-Forwarded-*, X-Request-ID, request-target splitting.

#include <memory_resource>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/http.hpp>

namespace tidegate::dataplane::server {

class Worker;

// Header fields allocate from a polymorphic resource: the HTTP session hands them a per-connection
// arena released after each exchange, so parsing and editing headers calls no malloc. A default
// constructed Fields uses the default resource (new/delete).
using FieldsAllocator = std::pmr::polymorphic_allocator<char>;
using Fields = boost::beast::http::basic_fields<FieldsAllocator>;

// Removes Connection, the fields Connection names, and the fields that are hop-by-hop by
// definition (Keep-Alive, Proxy-Connection, TE, Trailer, Upgrade, HTTP2-Settings).
// Transfer-Encoding is left to Beast, which re-frames bodies itself.
void remove_hop_by_hop(Fields& fields);

// A field specific to an HTTP/1.1 connection, which HTTP/2 forbids (RFC 9113 section 8.2.2):
// connection, keep-alive, proxy-connection, transfer-encoding, upgrade, te, http2-settings.
// `lower_name` is lower case, as HTTP/2 carries names.
bool is_connection_specific(std::string_view lower_name);

// Trailer fields of a request or a response (names lower case, as HTTP/2 carries them).
using TrailerFields = std::vector<std::pair<std::string, std::string>>;
inline const TrailerFields kNoTrailers{};

template <bool isRequest, typename Body>
void remove_hop_by_hop(boost::beast::http::message<isRequest, Body, Fields>& m) {
  remove_hop_by_hop(static_cast<Fields&>(m.base()));
}

// X-Forwarded-For gets the peer appended; X-Forwarded-Proto and X-Forwarded-Host are set from
// this hop (a client cannot choose them).
void add_forwarded_headers(boost::beast::http::request_header<Fields>& req, std::string_view peer,
                           std::string_view proto);

// Keeps a client's X-Request-ID when it is 1..128 visible ASCII characters, else sets a random
// 32-hex-digit one.
void ensure_request_id(boost::beast::http::request_header<Fields>& req, Worker& worker);

bool is_idempotent(boost::beast::http::verb method);
bool is_http_parse_error(const boost::system::error_code& ec);

struct RequestTarget {
  std::string_view host;            // raw, may carry ":port"; the router normalises it
  std::string_view path;            // without query
  std::string_view path_and_query;  // origin-form of the target (absolute-form loses its authority)
};
// Origin-form ("/a?b") uses the Host header; absolute-form ("http://h/a") uses its own authority.
RequestTarget split_target(std::string_view target, std::string_view host_header);
// A Host value without its port ("[::1]:80" -> "[::1]", "a.example:8080" -> "a.example").
std::string_view host_without_port(std::string_view host);

}  // namespace tidegate::dataplane::server
