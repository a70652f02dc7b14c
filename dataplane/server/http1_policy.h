#pragma once
// The HTTP/1.1 message framing policy of the data plane, in one place: every rule of RFC 9110
// and RFC 9112 that a proxy must enforce so that it and the backend never disagree about where a
// message ends, which host it is for, or what protocol the connection speaks. docs/proxy.md
// ("Strict HTTP/1.1") lists every rule with its answer; the tests are tables
// (tests/dataplane/server/http1_policy_test.cc) and e2e/test_hostile_requests.py.
//
// Beast's parser runs first and already refuses what it cannot frame (bare CR or LF, NUL and
// other control characters, a malformed field line or chunk, Content-Length with
// Transfer-Encoding: chunked, two differing Content-Lengths); these functions then judge the
// parsed head. They are pure: no I/O, no clock, no allocation for an ordinary request.

#include <cstddef>
#include <string>
#include <string_view>

#include <boost/beast/http/message.hpp>

#include "router/path_normalize.h"
#include "server/headers.h"
#include "text/http_syntax.h"

namespace tidegate::dataplane::server {

struct RequestRules {
  // Request line (method, target, version, two spaces) longer than this: 414.
  size_t max_request_line_bytes = 8 * 1024;
  // More header fields than this: 431.
  size_t max_header_fields = 100;
  router::PathOptions path;
};

// What to do with one request head. Every refusal closes the connection (after the answer, with
// the lingering close of docs/proxy.md): the framing of what follows cannot be trusted.
struct RequestVerdict {
  unsigned status = 0;      // 0: accepted; else 400, 405, 414, 431, 501 or 505
  std::string_view reason;  // the answer's text (a static string)

  // For an accepted request, the edits to make before routing:
  // the request target becomes `target` (origin-form: the normalized path and the query as
  // received) when `replace_target`;
  bool replace_target = false;
  std::string target;
  // the Host field becomes `host` (an absolute-form target's authority) when `replace_host`;
  bool replace_host = false;
  std::string host;
  // Transfer-Encoding is rewritten to exactly "chunked" (it said "Chunked", or had empty list
  // elements) when `canonical_chunked`;
  bool canonical_chunked = false;
  // the request may be forwarded as an upgrade (Connection: upgrade + Upgrade: websocket,
  // HTTP/1.1). Any other Upgrade (h2c, ...) is stripped and the request proxied as a normal one.
  bool websocket_upgrade = false;
  // Any other single-protocol upgrade of an HTTP/1.1 request with Connection: upgrade, lower
  // case ("foo/2"): forwarded as an upgrade only where the route allows it (allow-upgrade);
  // never "h2c", which is stripped like a list of protocols.
  std::string other_upgrade;
};

RequestVerdict check_request(const boost::beast::http::request_header<Fields>& req,
                             const RequestRules& rules);

// Makes an accepted request's edits (target, Host, Transfer-Encoding) on the parsed head.
void apply_request_verdict(const RequestVerdict& verdict,
                           boost::beast::http::request_header<Fields>& req);

// After the parser stopped at the header size limit, given what it parsed so far: 414 when the
// request line was not complete (Beast parses and keeps the request line as soon as it has it)
// or is over max_request_line_bytes, else 431.
unsigned header_overflow_status(const boost::beast::http::request_header<Fields>& partial,
                                const RequestRules& rules);

// A backend's response head. Refused (502 to the client, the upstream connection closed, never
// relayed): a version other than HTTP/1.0 or 1.1, a control character in a field, more than one
// Content-Length or one that is not a number, Transfer-Encoding with Content-Length, with
// HTTP/1.0, or other than exactly "chunked" (nginx's rule).
struct ResponseVerdict {
  unsigned status = 0;  // 0: relay it; else 502
  std::string_view reason;
};

ResponseVerdict check_response(const boost::beast::http::response_header<Fields>& res);

// Building blocks, exposed for the tests.
using text::is_field_value;  // VCHAR, obs-text, SP and HTAB only
using text::is_token;
bool is_host_value(std::string_view s);  // uri-host [ ":" port ] (RFC 9110 section 7.2)

}  // namespace tidegate::dataplane::server
