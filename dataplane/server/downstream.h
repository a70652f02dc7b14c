#pragma once
// The client side of an exchange, as the exchange (server/exchange.h) sees it, whatever codec
// carries the request: HTTP/1.1 today (server/http1_connection.h), an HTTP/2 stream next. The
// exchange reads the request head and body through it and sends the response through it; the
// codec owns the framing (versions, chunking, keep-alive, interim responses on the wire) and
// the connection's life.
//
// Operations that take time complete by calling the exchange back (Exchange::on_*). A failure on
// the client side is the codec's to handle (it closes the connection or the stream); the
// exchange hears of it only as the end of its observation (Exchange::end()).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/http.hpp>

#include "ratelimit/ip_address.h"
#include "runtime/io_types.h"
#include "server/headers.h"
#include "tls/client_auth.h"

namespace tidegate::dataplane::server {

// A Gateway listener's name, shared by the connections it accepted (they outlive it).
using ListenerName = std::shared_ptr<const std::string>;

// A request or response head (the body parts are the codec's: buffer_body points into the relay
// buffer while a body is read).
using RequestMessage = boost::beast::http::request<boost::beast::http::buffer_body, Fields>;
using ResponseMessage = boost::beast::http::response<boost::beast::http::buffer_body, Fields>;
// An answer from the proxy itself (errors, redirects, CORS preflights).
using LocalResponse = boost::beast::http::response<boost::beast::http::string_body>;

// How the body of a response relates to its head, for the codec's framing.
struct ResponseBody {
  bool expected = true;      // false for HEAD, 204 and 304: the head goes alone
  bool framed = true;        // the upstream framed it (chunked or Content-Length)
  bool chunked = false;      // ... with chunked framing
  bool transformed = false;  // a response filter rewrites it: its length is unknown
};

class Downstream {
 public:
  // --- The connection
  // Keeps the connection (and the exchange it owns) alive while an operation is pending.
  virtual std::shared_ptr<void> hold() = 0;
  virtual runtime::Executor executor() = 0;
  virtual bool is_tls() const = 0;
  // The peer as accept returned it, as text and parsed (nullopt if it does not parse).
  virtual const std::string& peer_address() const = 0;
  virtual const std::optional<ratelimit::IpAddress>& peer_ip() const = 0;
  // The client's HTTP version (11 for HTTP/1.1).
  virtual unsigned http_version() const = 0;
  // A TLS connection's client certificate (what its handshake asked for and got); null on a
  // plain connection.
  virtual tls::PeerCertificate* peer_certificate() = 0;
  // The Gateway listener (model::Listener::name) the connection was accepted on; empty: the data
  // plane's own listeners. Its requests are routed with that listener's hosts only.
  virtual std::string_view listener() const = 0;

  // --- The request
  // The request head, edited in place into what goes upstream.
  virtual RequestMessage& request() = 0;
  // The whole request body has been received.
  virtual bool request_complete() const = 0;
  virtual std::optional<uint64_t> request_content_length() const = 0;
  // proxy-body-size: past `bytes` the codec answers 413 itself.
  virtual void limit_request_body(uint64_t bytes) = 0;
  // The request is a protocol upgrade the codec accepts (a WebSocket), complete without a body.
  virtual bool upgrade_requested() const = 0;
  // Another single-protocol upgrade the request asks for (lower case, "foo/2"; never h2c),
  // complete without a body: the exchange forwards it as an upgrade where the route allows
  // the protocol (allow-upgrade). Empty otherwise.
  virtual std::string_view other_upgrade_requested() const = 0;
  // The exchange took over the client's Expect: 100-continue; tells the client to go on.
  // Completes with Exchange::on_continue_sent(ec).
  virtual void send_continue() = 0;
  // The request's trailers once request_complete() (HTTP/2 clients; empty for HTTP/1.1, whose
  // chunked trailers are not kept).
  virtual const TrailerFields& request_trailers() const = 0;
  // Reads request body bytes into [data, data + size). Completes with
  // Exchange::on_request_body(bytes); a broken or too large body is answered by the codec.
  virtual void read_request_body(char* data, std::size_t size) = 0;
  // A read_request_body() still pending completes never (another attempt reads the body into
  // another place). Only HTTP/2 streams can have one pending then (duplex exchanges).
  virtual void cancel_request_body_read() = 0;

  // --- The response
  // Frames and sends the backend's response head. With a body the head waits for the first
  // send_response_body(); without one it goes now and completes with
  // Exchange::on_response_head_sent(ec, bytes).
  virtual void send_response_head(ResponseMessage& res, const ResponseBody& body) = 0;
  // Body bytes; `last` ends the body. Completes with Exchange::on_response_body_sent(ec, bytes).
  virtual void send_response_body(const char* data, std::size_t n, bool last) = 0;
  // Whether send_response_file() may carry this response's body: a plain-TCP HTTP/1.x client
  // and a body framed by Content-Length (sendfile(2) cannot go through TLS or HTTP/2 frames).
  virtual bool can_send_file() const { return false; }
  // `n` bytes of the open file `fd` from `offset`, the kernel copying them (sendfile(2)); as
  // send_response_body() otherwise, completing with Exchange::on_response_body_sent(ec, bytes).
  virtual void send_response_file(int /*fd*/, uint64_t /*offset*/, std::size_t /*n*/,
                                  bool /*last*/) {}
  // The backend's trailers (a gRPC status), given before the send_response_body() that ends
  // the body; they must stay valid until it completes. HTTP/2 sends them in a HEADERS frame
  // after the last DATA; HTTP/1.1 drops them (they are not forwarded to HTTP/1.1 clients yet).
  virtual void set_response_trailers(const TrailerFields& trailers) = 0;
  // A 101 Switching Protocols head; once it is sent (Exchange::on_upgrade_sent()) the
  // connection becomes a tunnel.
  virtual void send_upgrade(ResponseMessage& res) = 0;
  // An answer of the proxy's own; `close`: the connection closes after it. Completes with
  // Exchange::on_local_response_sent(bytes).
  virtual void send_local_response(LocalResponse& res, bool close) = 0;
  // The exchange is over (its response fully sent): the next request, or the close.
  virtual void exchange_finished() = 0;
  // The client must be closed (the response cannot go on).
  virtual void close() = 0;

 protected:
  ~Downstream() = default;
};

}  // namespace tidegate::dataplane::server
