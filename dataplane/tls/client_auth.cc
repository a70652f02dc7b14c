#include "tls/client_auth.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <re2/re2.h>

#include "crypto/openssl_ptr.h"
#include "text/text.h"

namespace tidegate::dataplane::tls {

namespace {

using crypto::BioPtr;
using crypto::memory_bio;

// The handshake goes on whatever the chain's verdict: it is kept (SSL_get_verify_result) and
// each request is answered from it, as nginx does (400 rather than a failed handshake).
int keep_going(int, X509_STORE_CTX*) { return 1; }

void hash_field(EVP_MD_CTX* sha, std::string_view field) {
  const uint64_t n = field.size();
  EVP_DigestUpdate(sha, &n, sizeof n);
  EVP_DigestUpdate(sha, field.data(), field.size());
}

std::string name_rfc2253(const X509_NAME* name) {
  if (name == nullptr) return {};
  BioPtr out(BIO_new(BIO_s_mem()));
  if (X509_NAME_print_ex(out.get(), name, 0, XN_FLAG_RFC2253) < 0) return {};
  char* data = nullptr;
  long n = BIO_get_mem_data(out.get(), &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string();
}

}  // namespace

int peer_certificate_ex_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

std::shared_ptr<const CompiledClientAuth> CompiledClientAuth::build(const model::ClientAuth& auth,
                                                                    std::string* error) {
  std::shared_ptr<CompiledClientAuth> c(new CompiledClientAuth());
  c->model_ = auth;
  c->store_ = X509_STORE_new();
  c->names_ = sk_X509_NAME_new_null();
  if (c->store_ == nullptr || c->names_ == nullptr) {
    *error = "out of memory";
    return nullptr;
  }
  if (c->broken()) {
    // Fail closed (server/exchange_client_cert.cc): nothing to parse, still an identity.
    c->key_.fill(0);
    c->key_[0] = 1;
    return c;
  }
  ERR_clear_error();
  auto bio = memory_bio(auth.ca_pem);
  size_t added = 0;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    crypto::X509Ptr owned(cert);
    if (X509_STORE_add_cert(c->store_, cert) != 1) {
      ERR_clear_error();  // a certificate twice in the bundle
      continue;
    }
    if (X509_NAME* name = X509_NAME_dup(X509_get_subject_name(cert))) {
      sk_X509_NAME_push(c->names_, name);
    }
    ++added;
  }
  ERR_clear_error();
  if (added == 0) {
    *error = "client certificate CA bundle of " + auth.secret + " holds no PEM certificate";
    return nullptr;
  }
  if (!auth.crl_pem.empty()) {
    auto crl_bio = memory_bio(auth.crl_pem);
    size_t crls = 0;
    while (X509_CRL* crl = PEM_read_bio_X509_CRL(crl_bio.get(), nullptr, nullptr, nullptr)) {
      X509_STORE_add_crl(c->store_, crl);
      X509_CRL_free(crl);
      ++crls;
    }
    ERR_clear_error();
    if (crls == 0) {
      *error = "client certificate CRL of " + auth.secret + " holds no PEM CRL";
      return nullptr;
    }
    // Every certificate of the chain is checked against the CRLs, as nginx's ssl_crl.
    X509_STORE_set_flags(c->store_, X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL);
  }
  if (!auth.match_cn.empty()) {
    RE2::Options options;
    options.set_log_errors(false);
    c->match_cn_ = std::make_unique<re2::RE2>(auth.match_cn, options);
    if (!c->match_cn_->ok()) {
      *error = "client certificate match_cn: " + c->match_cn_->error();
      return nullptr;
    }
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> sha(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  unsigned int length = 0;
  if (!sha || EVP_DigestInit_ex(sha.get(), EVP_sha256(), nullptr) != 1) {
    *error = "SHA-256 is not available";
    return nullptr;
  }
  hash_field(sha.get(), model::to_string(auth.verify));
  hash_field(sha.get(), auth.ca_pem);
  hash_field(sha.get(), auth.crl_pem);
  hash_field(sha.get(), std::to_string(auth.verify_depth));
  EVP_DigestFinal_ex(sha.get(), c->key_.data(), &length);
  return c;
}

CompiledClientAuth::~CompiledClientAuth() {
  if (store_ != nullptr) X509_STORE_free(store_);
  if (names_ != nullptr) sk_X509_NAME_pop_free(names_, X509_NAME_free);
}

void CompiledClientAuth::ask_for_certificate(SSL* ssl) const {
  SSL_set_verify(ssl, SSL_VERIFY_PEER, keep_going);
  SSL_set_verify_depth(ssl, static_cast<int>(model_.verify_depth));
  SSL_set_session_id_context(ssl, key_.data(), static_cast<unsigned>(key_.size()));
  // optional_no_ca: any issuer is welcome, so no list of names narrows the client's choice.
  if (model_.verify != model::ClientVerify::kOptionalNoCa) {
    if (STACK_OF(X509_NAME)* names = SSL_dup_CA_list(names_)) {
      SSL_set_client_CA_list(ssl, names);  // takes ownership
    }
  }
  restore_store(ssl);
}

void CompiledClientAuth::restore_store(SSL* ssl) const { SSL_set1_verify_cert_store(ssl, store_); }

const PeerCertificate::Verdict& PeerCertificate::verdict() {
  if (verdict_) return *verdict_;
  Verdict& v = verdict_.emplace();
  X509* cert = SSL_get0_peer_certificate(ssl_);
  if (cert == nullptr) return v;
  v.presented = true;
  v.verify_result = SSL_get_verify_result(ssl_);
  v.subject_dn = name_rfc2253(X509_get_subject_name(cert));
  v.issuer_dn = name_rfc2253(X509_get_issuer_name(cert));
  ERR_clear_error();
  return v;
}

const std::string& PeerCertificate::escaped_pem() {
  if (escaped_pem_) return *escaped_pem_;
  std::string& out = escaped_pem_.emplace();
  X509* cert = SSL_get0_peer_certificate(ssl_);
  if (cert == nullptr) return out;
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(bio.get(), cert) == 1) {
    char* data = nullptr;
    long n = BIO_get_mem_data(bio.get(), &data);
    if (n > 0) out = text::percent_encode(std::string_view(data, static_cast<size_t>(n)));
  }
  ERR_clear_error();
  return out;
}

bool sni_from_extension(const unsigned char* data, size_t size, std::string* host) {
  // ServerNameList: uint16 length, then entries of (uint8 type, uint16 length, bytes).
  if (size < 2) return false;
  size_t list = (static_cast<size_t>(data[0]) << 8) | data[1];
  if (list + 2 != size) return false;
  size_t at = 2;
  while (at + 3 <= size) {
    const unsigned type = data[at];
    const size_t n = (static_cast<size_t>(data[at + 1]) << 8) | data[at + 2];
    at += 3;
    if (at + n > size) return false;
    if (type == TLSEXT_NAMETYPE_host_name) {
      if (n == 0 || n > 254) return false;
      host->clear();
      for (size_t i = 0; i < n; ++i) {
        const unsigned char c = data[at + i];
        if (c == 0) return false;
        host->push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c));
      }
      if (host->back() == '.') host->pop_back();
      return !host->empty() && host->size() <= 253;
    }
    at += n;
  }
  return false;
}

std::string verify_header_value(const PeerCertificate::Verdict& v) {
  if (!v.presented) return "NONE";
  if (v.verify_result == X509_V_OK) return "SUCCESS";
  return std::string("FAILED:") + X509_verify_cert_error_string(v.verify_result);
}

bool verify_error_is_optional(long result) {
  switch (result) {
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      return true;
    default:
      return false;
  }
}

}  // namespace tidegate::dataplane::tls
