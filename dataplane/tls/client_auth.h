#pragma once
// Client certificates (mTLS, the auth-tls-* annotations; docs/tls.md, "Client certificates").
//
// A TLS host's model::ClientAuth is compiled once per snapshot into a CompiledClientAuth (the CA
// bundle and CRLs parsed into an X509_STORE, the names sent in the CertificateRequest, the
// subject pattern). During a handshake the client-hello callback finds the host by SNI and asks
// for a certificate (ask_for_certificate); the handshake never fails for a missing or bad
// certificate: as nginx does, the verdict is kept and each request is answered from it (400,
// or a 302 to the error page), so that the client gets an HTTP answer it can show.
//
// Each ClientAuth has a SHA-256 identity (key()). It is the TLS session-id context of every
// connection that asked for a certificate under it, so a session (ticket) never resumes under
// another CA bundle or on a host without one, and a request is taken only on a connection whose
// handshake ran under its host's identity (otherwise 421: another host's connection, a client
// without SNI, or a bundle changed since the handshake).

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "model/client_auth.h"

namespace re2 {
class RE2;
}

namespace tidegate::dataplane::tls {

using ClientAuthKey = std::array<unsigned char, 32>;

class CompiledClientAuth {
 public:
  // Null with *error set when the CA bundle or the CRLs do not parse, or match_cn is invalid.
  static std::shared_ptr<const CompiledClientAuth> build(const model::ClientAuth& auth,
                                                         std::string* error);
  ~CompiledClientAuth();
  CompiledClientAuth(const CompiledClientAuth&) = delete;
  CompiledClientAuth& operator=(const CompiledClientAuth&) = delete;

  const model::ClientAuth& model() const { return model_; }
  // The settings could not be used (no CA bundle: model::ClientAuth::ca_pem): every request to
  // the host is refused, nothing is asked for in the handshake.
  bool broken() const { return model_.ca_pem.empty(); }
  const ClientAuthKey& key() const { return key_; }
  // Null when match_cn is empty.
  const re2::RE2* match_cn() const { return match_cn_.get(); }
  // During the handshake of `ssl` (client hello, before session resumption is decided): ask for
  // the client's certificate, with this bundle's names, depth and session-id context.
  void ask_for_certificate(SSL* ssl) const;
  // After SSL_set_SSL_CTX (which replaces the SSL's certificate settings): the verify store again.
  void restore_store(SSL* ssl) const;

 private:
  CompiledClientAuth() = default;
  model::ClientAuth model_;
  ClientAuthKey key_{};
  X509_STORE* store_ = nullptr;
  STACK_OF(X509_NAME) * names_ = nullptr;
  std::unique_ptr<re2::RE2> match_cn_;
};

// What the handshake of one client connection asked for and learned about the client's
// certificate. One per TLS connection (tls::ServerStream owns it); the client-hello callback
// reaches it through the SSL's ex_data (peer_certificate_ex_index()).
class PeerCertificate {
 public:
  explicit PeerCertificate(SSL* ssl) : ssl_(ssl) {}

  // The ClientAuth the handshake asked for a certificate under; null: none was asked for.
  const CompiledClientAuth* asked_under() const { return auth_.get(); }
  void asked(std::shared_ptr<const CompiledClientAuth> auth) { auth_ = std::move(auth); }

  // What the handshake gave (read once, on first use after the handshake).
  struct Verdict {
    bool presented = false;  // the client sent a certificate
    long verify_result = X509_V_OK;
    std::string subject_dn;  // RFC 2253 ("CN=client,O=Example"), as nginx's $ssl_client_s_dn
    std::string issuer_dn;
  };
  const Verdict& verdict();
  // The client's certificate, PEM, URL-encoded ($ssl_client_escaped_cert); empty without one.
  // Made on first use, then kept.
  const std::string& escaped_pem();

 private:
  SSL* ssl_;
  std::shared_ptr<const CompiledClientAuth> auth_;
  std::optional<Verdict> verdict_;
  std::optional<std::string> escaped_pem_;
};

int peer_certificate_ex_index();

// The SNI host name in a ClientHello's server_name extension body (RFC 6066): the first
// host_name entry, lower-cased, without one trailing dot. False when there is none or it is
// malformed or longer than 253 bytes.
bool sni_from_extension(const unsigned char* data, size_t size, std::string* host);

// The verdict's header value, as nginx's $ssl_client_verify: "SUCCESS", "FAILED:<reason>" or
// "NONE".
std::string verify_header_value(const PeerCertificate::Verdict& v);

// nginx's optional_no_ca lets these verification errors pass (an unknown or self-signed issuer);
// others (an expired certificate, a bad signature) are refused in every mode.
bool verify_error_is_optional(long result);

}  // namespace tidegate::dataplane::tls
