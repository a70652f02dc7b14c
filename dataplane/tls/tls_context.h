#pragma once
// OpenSSL server contexts: one per certificate, built lazily (see certificate_cache.h), all
// sharing one set of session-ticket keys so that resumption works whichever context SNI picked.

#include <openssl/ssl.h>

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

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

// The TLS profile every server context gets (`--tls-profile`), from Mozilla's Server Side TLS
// guidelines, version 6.0 (docs/proxy.md, "TLS profile"):
// - intermediate (default): TLS 1.2 and 1.3; TLS 1.2 ciphers ECDHE with AES-GCM or
//   ChaCha20-Poly1305 only (forward secret, AEAD), in the server's order (AES-128-GCM first)
//   unless the client puts ChaCha20 first;
// - modern: TLS 1.3 only.
// Both: TLS 1.3's three standard suites; groups X25519MLKEM768 (where the OpenSSL in use has
// it), X25519, P-256, P-384; no renegotiation, no compression, no session cache (tickets only).
enum class TlsProfile { kIntermediate, kModern };
bool parse_tls_profile(std::string_view text, TlsProfile* out);
std::string_view tls_profile_name(TlsProfile profile);

// The profile's parts, as OpenSSL spells them (for the tests and the docs).
inline constexpr const char* kIntermediateTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
inline constexpr const char* kTls13Ciphersuites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
inline constexpr const char* kGroupsWithMlkem = "X25519MLKEM768:X25519:P-256:P-384";
inline constexpr const char* kGroups = "X25519:P-256:P-384";

// What every server context is built with: the shared ticket keys and the profile.
struct ServerSettings {
  TicketKeys ticket_keys{};
  TlsProfile profile = TlsProfile::kIntermediate;
  // ALPN offers h2 before http/1.1 (--http2); off: http/1.1 only.
  bool http2 = true;
};

// A server context serving `cert_pem` (chain) with `key_pem` under `settings`' profile; ALPN
// selects h2 (when settings.http2) or http/1.1, in the server's order of preference. Returns null
// and sets *error (never containing key material) on failure.
SslCtxPtr make_server_context(const std::string& cert_pem, const std::string& key_pem,
                              const ServerSettings& settings, std::string* error);

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
