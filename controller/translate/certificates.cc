#include "translate/certificates.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

namespace tidegate::controller::translate {

namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

std::unique_ptr<BIO, BioFree> memory_bio(const std::string& text) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

}  // namespace

std::string check_certificate_pair(const std::string& cert_pem, const std::string& key_pem) {
  ERR_clear_error();
  auto cert_bio = memory_bio(cert_pem);
  std::unique_ptr<X509, X509Free> cert(
      PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    ERR_clear_error();
    return "tls.crt holds no PEM certificate";
  }
  // The rest of the chain must parse too, or clients would get a truncated chain.
  for (;;) {
    std::unique_ptr<X509, X509Free> next(
        PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
    if (!next) break;
  }
  unsigned long err = ERR_peek_last_error();
  if (err != 0 &&
      !(ERR_GET_LIB(err) == ERR_LIB_PEM && ERR_GET_REASON(err) == PEM_R_NO_START_LINE)) {
    ERR_clear_error();
    return "tls.crt: a certificate after the first one does not parse";
  }
  ERR_clear_error();
  auto key_bio = memory_bio(key_pem);
  // No passphrase callback: an encrypted key must fail rather than prompt.
  std::unique_ptr<EVP_PKEY, KeyFree> key(PEM_read_bio_PrivateKey(
      key_bio.get(), nullptr, [](char*, int, int, void*) { return 0; }, nullptr));
  if (!key) {
    ERR_clear_error();
    return "tls.key holds no unencrypted PEM private key";
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return "tls.key does not match the certificate in tls.crt";
  }
  return {};
}

}  // namespace tidegate::controller::translate
