#pragma once
// Client-side TLS contexts for connections to upstreams (tidegate.io/backend-protocol: HTTPS).
// A context depends only on the CA bundle that verifies the backends (or on there being none);
// the server name (SNI and the verified name) is set per connection. Contexts are shared between
// snapshots and upstreams with the same CA bundle.

#include <memory>
#include <string>

#include <openssl/ssl.h>
#include <boost/asio/ssl/context.hpp>

namespace tidegate::dataplane::tls {

// TLS 1.2+, ALPN http/1.1. With `ca_pem` non-empty the peer's chain must verify against exactly
// those CAs (not the system store); with it empty any certificate is accepted. Returns null and
// sets *error when the bundle holds no usable certificate. Thread-safe (control thread and tests).
std::shared_ptr<boost::asio::ssl::context> upstream_context(const std::string& ca_pem,
                                                            std::string* error);

// Per connection, before the handshake: `name` as SNI (host names only, RFC 6066 section 3)
// and, with `verify`, the name the certificate must carry (an IP address is verified as one).
void set_upstream_identity(SSL* ssl, const std::string& name, bool verify);

}  // namespace tidegate::dataplane::tls
