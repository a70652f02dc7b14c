#pragma once
// OpenSSL server contexts: one per certificate, built lazily (see certificate_cache.h), all
// sharing one set of session-ticket keys so that resumption works whichever context SNI picked.

#include <openssl/ssl.h>

#include <array>
#include <cstddef>
#include <memory>
#include <string>

namespace tidegate::dataplane::tls {

struct SslCtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;

// TLS 1.3 session tickets sent after a full handshake (OpenSSL's default, and nginx's, is 2).
// Each ticket costs the server a session serialisation, an encryption and a MAC: one ticket is
// about 6 % of a full ECDSA handshake's CPU (docs/benchmarks.md, "TLS"). One is enough for a
// client to resume, and every resumption brings a fresh one; a client opening several
// connections at once resumes one of them and makes full handshakes for the others.
inline constexpr size_t kTls13TicketsPerHandshake = 1;

// 80 bytes: key name, HMAC secret, AES key (OpenSSL's SSL_CTX_set_tlsext_ticket_keys layout).
using TicketKeys = std::array<unsigned char, 80>;
TicketKeys random_ticket_keys();

// A TLS 1.2+ server context serving `cert_pem` (chain) with `key_pem`; ALPN offers http/1.1.
// Returns null and sets *error (never containing key material) on failure.
SslCtxPtr make_server_context(const std::string& cert_pem, const std::string& key_pem,
                              const TicketKeys& keys, std::string* error);

struct CertificateCheck {
  std::string error;  // empty: usable
  bool expired = false;
  bool not_yet_valid = false;
};
// Parses the chain and key and checks that they match, without building a context.
CertificateCheck check_certificate(const std::string& cert_pem, const std::string& key_pem);

// A self-signed ECDSA P-256 certificate for "tidegate-default", valid for one year, for names
// that have no certificate of their own and clients that send no SNI.
bool generate_self_signed(std::string* cert_pem, std::string* key_pem, std::string* error);

}  // namespace tidegate::dataplane::tls
