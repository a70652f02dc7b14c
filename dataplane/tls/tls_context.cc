#include "tls/tls_context.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include "crypto/openssl_ptr.h"

namespace tidegate::dataplane::tls {

namespace {

using crypto::BioPtr;
using crypto::KeyPtr;
using crypto::memory_bio;
using crypto::X509Ptr;

int no_passphrase(char*, int, int, void*) { return 0; }

std::string openssl_error(const char* what) {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return what;
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return std::string(what) + " (" + buf + ")";
}

// The server's preference comes first: SSL_select_next_proto walks our list and takes the
// first protocol the client also offers.
const unsigned char kH2AndHttp11[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                unsigned int inlen, void* arg) {
  const bool http2 = arg != nullptr;
  const unsigned char* ours = http2 ? kH2AndHttp11 : kHttp11;
  const unsigned int ours_len = http2 ? sizeof kH2AndHttp11 : sizeof kHttp11;
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, ours, ours_len, in, inlen) ==
      OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

// Applies the profile's versions, ciphers, groups and options (see tls_context.h).
bool apply_profile(SSL_CTX* ctx, TlsProfile profile, std::string* error) {
  const bool modern = profile == TlsProfile::kModern;
  if (SSL_CTX_set_min_proto_version(ctx, modern ? TLS1_3_VERSION : TLS1_2_VERSION) != 1 ||
      SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1) {
    *error = openssl_error("TLS versions rejected");
    return false;
  }
  // TLS 1.2's list (a TLS 1.3-only context never uses one).
  if (!modern && SSL_CTX_set_cipher_list(ctx, kIntermediateTls12Ciphers) != 1) {
    *error = openssl_error("TLS 1.2 cipher list rejected");
    return false;
  }
  ERR_clear_error();
  if (SSL_CTX_set_ciphersuites(ctx, kTls13Ciphersuites) != 1) {
    *error = openssl_error("TLS 1.3 cipher suites rejected");
    return false;
  }
  // X25519MLKEM768 arrived in OpenSSL 3.5; older libraries refuse the list that names it.
  if (SSL_CTX_set1_groups_list(ctx, kGroupsWithMlkem) != 1) {
    ERR_clear_error();
    if (SSL_CTX_set1_groups_list(ctx, kGroups) != 1) {
      *error = openssl_error("TLS groups rejected");
      return false;
    }
  }
  // The server's order (AES-128-GCM first), except that a client that lists ChaCha20 first
  // (no AES in hardware, as on many phones) gets ChaCha20. Mozilla's profiles leave the order
  // to the client; testssl.sh rates a server without an order HIGH (docs/proxy.md).
  SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA |
                               SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  return true;
}

}  // namespace

bool parse_tls_profile(std::string_view text, TlsProfile* out) {
  if (text == "intermediate") {
    *out = TlsProfile::kIntermediate;
  } else if (text == "modern") {
    *out = TlsProfile::kModern;
  } else {
    return false;
  }
  return true;
}

std::string_view tls_profile_name(TlsProfile profile) {
  return profile == TlsProfile::kModern ? "modern" : "intermediate";
}

TicketKeys random_ticket_keys() {
  TicketKeys keys{};
  RAND_bytes(keys.data(), static_cast<int>(keys.size()));
  return keys;
}

SslCtxPtr make_server_context(const std::string& cert_pem, const std::string& key_pem,
                              const ServerSettings& settings, std::string* error) {
  ERR_clear_error();
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) {
    *error = openssl_error("SSL_CTX_new failed");
    return nullptr;
  }
  if (!apply_profile(ctx.get(), settings.profile, error)) return nullptr;
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_RELEASE_BUFFERS);
  auto bio = memory_bio(cert_pem);
  X509Ptr leaf(PEM_read_bio_X509(bio.get(), nullptr, no_passphrase, nullptr));
  if (!leaf || SSL_CTX_use_certificate(ctx.get(), leaf.get()) != 1) {
    *error = openssl_error("certificate does not parse");
    return nullptr;
  }
  for (;;) {
    X509* extra = PEM_read_bio_X509(bio.get(), nullptr, no_passphrase, nullptr);
    if (extra == nullptr) break;
    if (SSL_CTX_add_extra_chain_cert(ctx.get(), extra) != 1) {  // takes ownership on success
      X509_free(extra);
      *error = openssl_error("chain certificate rejected");
      return nullptr;
    }
  }
  ERR_clear_error();
  auto key_bio = memory_bio(key_pem);
  KeyPtr key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, no_passphrase, nullptr));
  if (!key || SSL_CTX_use_PrivateKey(ctx.get(), key.get()) != 1) {
    *error = openssl_error("private key does not parse");
    return nullptr;
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1) {
    *error = openssl_error("private key does not match the certificate");
    return nullptr;
  }
  // Shared ticket keys: a ticket issued under one SNI context resumes under any other.
  const TicketKeys& keys = settings.ticket_keys;
  SSL_CTX_ctrl(ctx.get(), SSL_CTRL_SET_TLSEXT_TICKET_KEYS, static_cast<long>(keys.size()),
               const_cast<unsigned char*>(keys.data()));
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);  // tickets only: no shared cache
  SSL_CTX_set_num_tickets(ctx.get(), kTls13TicketsPerHandshake);
  // The argument only says whether h2 is offered (any non-null pointer: yes).
  SSL_CTX_set_alpn_select_cb(ctx.get(), select_alpn,
                             settings.http2 ? const_cast<unsigned char*>(kH2AndHttp11) : nullptr);
  return ctx;
}

CertificateCheck check_certificate(const std::string& cert_pem, const std::string& key_pem) {
  CertificateCheck result;
  ERR_clear_error();
  auto bio = memory_bio(cert_pem);
  X509Ptr leaf(PEM_read_bio_X509(bio.get(), nullptr, no_passphrase, nullptr));
  if (!leaf) {
    result.error = "certificate does not parse";
    ERR_clear_error();
    return result;
  }
  auto key_bio = memory_bio(key_pem);
  KeyPtr key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, no_passphrase, nullptr));
  if (!key) {
    result.error = "private key does not parse";
    ERR_clear_error();
    return result;
  }
  if (X509_check_private_key(leaf.get(), key.get()) != 1) {
    result.error = "private key does not match the certificate";
    ERR_clear_error();
    return result;
  }
  result.expired = X509_cmp_current_time(X509_get0_notAfter(leaf.get())) < 0;
  result.not_yet_valid = X509_cmp_current_time(X509_get0_notBefore(leaf.get())) > 0;
  ERR_clear_error();
  return result;
}

bool generate_self_signed(std::string* cert_pem, std::string* key_pem, std::string* error) {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) {
    *error = openssl_error("EC key generation failed");
    return false;
  }
  X509Ptr cert(X509_new());
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 365L * 24 * 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("tidegate-default"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) {
    *error = openssl_error("signing the default certificate failed");
    return false;
  }
  BioPtr out(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(out.get(), cert.get());
  char* data = nullptr;
  long n = BIO_get_mem_data(out.get(), &data);
  cert_pem->assign(data, static_cast<size_t>(n));
  BioPtr key_out(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(key_out.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  n = BIO_get_mem_data(key_out.get(), &data);
  key_pem->assign(data, static_cast<size_t>(n));
  return true;
}

}  // namespace tidegate::dataplane::tls
